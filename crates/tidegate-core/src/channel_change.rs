//! Loss-less channel changes (pure): a put or delete of a release channel as three logged
//! phases, the same rule as a loss-less drain step. Freeze the writes whose owner the change
//! moves, switch once every live subscriber applied the freeze, unfreeze once every live
//! subscriber applied the switch.
//!
//! What is frozen is computed from the diff ([`change_freeze`]): the writes of the channel's
//! services (before and after the change) by the users whose owner for one of those services
//! differs between the two definitions. They are selected by unit, plus the user IDs either
//! definition lists. A map move's freeze is per unit and leaves channel users alone. A channel
//! change's freeze is per service, so other services' writes of the same users go on.
//!
//! Architecture invariant: at most one channel change is in progress in the whole table, and
//! while it is, the channel it changes takes no other put or delete (expiry included). The
//! freeze is part of the routing table ([`RoutingTable::channel_freeze`]), published to every
//! subscriber with the map, so a Router that has the freeze refuses those writes with `frozen`
//! before the switch exists anywhere.
//!
//! [`RoutingTable::channel_freeze`]: crate::RoutingTable::channel_freeze
//!
//! The phases themselves are [`Phases`], shared with loss-less unit moves.

use std::collections::BTreeSet;

use super::channel::{Channel, ChannelFallback};
use super::drain::FreezeBarrier;
use super::staged::{Phases, StagedStep};
use super::unit_map::{UnitMap, UnitSet};
use super::zone::ZoneId;

/// The freeze of a channel change in progress, as the table publishes it: writes of
/// `services` in `domain` by users of `units` or listed in `users` answer `frozen`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelFreeze {
    /// The channel being changed.
    pub channel: String,
    /// The routing domain (`None`: the default domain).
    pub domain: Option<String>,
    /// Sorted: the channel's services before and after the change.
    pub services: Vec<String>,
    pub units: UnitSet,
    pub users: BTreeSet<String>,
}

impl ChannelFreeze {
    /// Whether a write of `service` by `user_id` (of `unit`) in `domain` is frozen.
    pub fn covers(&self, domain: Option<&str>, service: &str, user_id: &str, unit: u32) -> bool {
        let domain = domain.unwrap_or(super::domain::DEFAULT_DOMAIN);
        let own = self.domain.as_deref().unwrap_or(super::domain::DEFAULT_DOMAIN);
        domain == own
            && self.services.binary_search_by(|s| s.as_str().cmp(service)).is_ok()
            && (self.units.contains(unit) || self.users.contains(user_id))
    }

    /// True when the change moves nobody.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.users.is_empty()
    }
}

/// Where a channel definition sends one service's calls of one user: the map's owner, a zone,
/// or nowhere (a suspended `reject` channel).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    Map,
    Zone(ZoneId),
    Refused,
}

fn route(channel: Option<&Channel>, service: &str, selected: impl Fn(&Channel) -> bool) -> Route {
    match channel {
        Some(c) if c.serves(service) && selected(c) => match (c.suspended, c.fallback) {
            (false, _) => Route::Zone(c.zone),
            (true, ChannelFallback::Global) => Route::Map,
            (true, ChannelFallback::Reject) => Route::Refused,
        },
        _ => Route::Map,
    }
}

/// What a change of one channel from `before` to `after` (`None`: absent) freezes on `map` (the
/// channel's domain's map): every unit where some service of either definition routes
/// differently, and every listed user of either definition whose route differs (their unit is
/// not known here, so "the map" counts as a route of its own).
pub fn change_freeze(
    map: &UnitMap,
    name: &str,
    before: Option<&Channel>,
    after: Option<&Channel>,
) -> ChannelFreeze {
    let mut services: Vec<String> =
        before.iter().chain(after.iter()).flat_map(|c| c.services.iter().cloned()).collect();
    services.sort();
    services.dedup();
    let resolve = |r: Route, unit: u32| match r {
        Route::Map => Route::Zone(map.owner(unit)),
        other => other,
    };
    let mut units = Vec::new();
    for unit in 0..map.units() {
        let moves = services.iter().any(|s| {
            let b = route(before, s, |c| c.units.contains(unit));
            let a = route(after, s, |c| c.units.contains(unit));
            resolve(b, unit) != resolve(a, unit)
        });
        if moves {
            units.push(unit);
        }
    }
    let listed: BTreeSet<&String> =
        before.iter().chain(after.iter()).flat_map(|c| c.users.iter()).collect();
    let users = listed
        .into_iter()
        .filter(|user| {
            services.iter().any(|s| {
                route(before, s, |c| c.users.contains(*user))
                    != route(after, s, |c| c.users.contains(*user))
            })
        })
        .cloned()
        .collect();
    ChannelFreeze {
        channel: name.to_owned(),
        domain: before.or(after).and_then(|c| c.domain.clone()),
        services,
        units: UnitSet::from_sorted(&units).unwrap_or_default(),
        users,
    }
}

/// A channel change in progress, in the replicated state.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelChange {
    pub name: String,
    /// The channel after the change (`None`: it is deleted).
    pub next: Option<Channel>,
    pub phases: Phases,
}

impl ChannelChange {
    /// The next phase at `now_ms`, given the barrier (see [`Phases::decide`]).
    pub fn decide(&self, now_ms: u64, barrier: &FreezeBarrier) -> Option<StagedStep> {
        self.phases.decide(
            now_ms,
            barrier,
            &format!("channel {}", self.name),
            "the channel is unchanged",
        )
    }
}
