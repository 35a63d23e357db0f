//! Release channels (pure): a blue-green release of one service (or a few) that overrides the
//! global map for a sticky set of users, in one domain.
//!
//! Architecture invariant: the precedence is pin > channel (of the service asked about) > the
//! domain's unit map, and it is one function of the table ([`RoutingTable::tag_service`]), so the
//! coordinator, the Router, the edge and OFREP cannot disagree. A channel is part of the routing
//! table (published to every subscriber with the map), never a side table: a client that tags
//! from a table version tags channels from the same version.
//!
//! A channel is stored resolved: its users are an explicit [`UnitSet`] (a `percent` is turned into
//! units once, by [`share_units`], in an order fixed by the channel's name, so raising the share
//! only adds users and lowering it only removes them) plus up to [`MAX_CHANNEL_USERS`] user IDs.
//! Expiry is a logged command the coordinator submits at `expires_at_ms` (tagging reads no clock).
//! An evacuation of the channel's zone suspends it in the same version, and it resumes once the
//! zone owns units of the channel's domain again (the restore); while suspended its users get the
//! fallback: the global map, or a refusal.
//!
//! [`RoutingTable::tag_service`]: crate::RoutingTable::tag_service

use std::collections::BTreeSet;

use super::unit_map::{UnitMap, UnitSet};
use super::zone::ZoneId;

/// Most channels one table holds.
pub const MAX_CHANNELS: usize = 64;
/// Most services one channel names.
pub const MAX_CHANNEL_SERVICES: usize = 16;
/// Most user IDs one channel lists (pins of the release: testers, a pilot customer).
pub const MAX_CHANNEL_USERS: usize = 1_000;
/// Longest channel or service name, in bytes.
pub const MAX_CHANNEL_NAME_BYTES: usize = 64;

/// What a channel's users get while the channel is suspended (its zone evacuated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChannelFallback {
    /// The domain's unit map decides, as if the channel did not exist (the default).
    #[default]
    Global,
    /// The tag is refused (`TagError::ChannelUnavailable`): the service would rather fail than
    /// serve these users from the old release.
    Reject,
}

impl ChannelFallback {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelFallback::Global => "global",
            ChannelFallback::Reject => "reject",
        }
    }

    pub fn parse(s: &str) -> Option<ChannelFallback> {
        match s {
            "global" => Some(ChannelFallback::Global),
            "reject" => Some(ChannelFallback::Reject),
            _ => None,
        }
    }
}

/// A release channel, as stored in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Channel {
    pub name: String,
    /// The routing domain (`None`: the default domain).
    pub domain: Option<String>,
    /// The services whose calls the channel routes, sorted, each at most in one channel per
    /// domain.
    pub services: Vec<String>,
    /// The zone the channel's users go to.
    pub zone: ZoneId,
    /// The channel's users by unit.
    pub units: UnitSet,
    /// The channel's users by ID, sorted.
    pub users: BTreeSet<String>,
    pub fallback: ChannelFallback,
    /// When the coordinator removes the channel (milliseconds since the Unix epoch).
    pub expires_at_ms: Option<u64>,
    /// Suspended by an evacuation of `zone`: its users get the fallback until `zone` owns units
    /// of the domain again.
    pub suspended: bool,
}

impl Channel {
    /// Whether the channel routes calls of `service`.
    pub fn serves(&self, service: &str) -> bool {
        self.services.binary_search_by(|s| s.as_str().cmp(service)).is_ok()
    }

    /// Whether the channel selects a user (by ID, or by their unit).
    pub fn selects(&self, user_id: &str, unit: u32) -> bool {
        self.units.contains(unit) || (!self.users.is_empty() && self.users.contains(user_id))
    }

    /// The domain's name as tables key it.
    pub fn domain_name(&self) -> &str {
        self.domain.as_deref().unwrap_or(super::domain::DEFAULT_DOMAIN)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChannelError {
    #[error("name: a channel name is 1-{MAX_CHANNEL_NAME_BYTES} bytes of [a-z0-9_.-], got `{0}`")]
    InvalidName(String),
    #[error(
        "services: name 1-{MAX_CHANNEL_SERVICES} services of 1-{MAX_CHANNEL_NAME_BYTES} bytes of [a-z0-9_.-]: {0}"
    )]
    InvalidServices(String),
    #[error("percent: must be from 0 to 100, got {0}")]
    InvalidPercent(f64),
    #[error(
        "a channel selects its users by `percent` or by `units` (one of them), and may add `users`; {0}"
    )]
    NoUsers(&'static str),
    #[error("users: at most {MAX_CHANNEL_USERS} user IDs, got {0}")]
    TooManyUsers(usize),
    #[error("users[{index}]: {reason}")]
    InvalidUser { index: usize, reason: String },
    #[error("expires_at_ms: {0} is not in the future")]
    ExpiryInPast(u64),
    #[error("services: `{service}` already has channel `{other}` in domain `{domain}`")]
    Overlap { service: String, other: String, domain: String },
    #[error("at most {MAX_CHANNELS} channels may exist at once")]
    TooMany,
    #[error("there is no channel `{0}`")]
    NotFound(String),
    #[error(
        "channel `{0}` is being changed loss-lessly (freeze, switch, unfreeze); wait for the change to end"
    )]
    Changing(String),
    #[error("channel `{0}`'s change cannot {1}")]
    ChangePhase(String, &'static str),
    #[error("freeze_window: must be from 1 ms to {max} ms, got {0}", max = crate::drain::MAX_FREEZE_MS)]
    FreezeWindow(u64),
    #[error("domain: there is no routing domain `{0}`")]
    UnknownDomain(String),
    #[error("zone: the table has no zone {0}")]
    UnknownZone(u16),
    #[error("units: unit {unit} is outside the table's {units} units")]
    UnitOutOfRange { unit: u32, units: u32 },
}

/// The map as a domain's load follows it: the units of each of `channels` go to the channel's
/// zone while that zone owns units of `map` (a channel whose zone owns none is suspended, and its
/// users follow the map). Capacity projections judge moves between two such maps, so units a
/// channel keeps in its zone carry no load when the map moves them, and a channel that a move
/// suspends or resumes carries its users' load with it.
///
/// The estimate is the one `PUT /v1/channels` admits a channel on: all of a channel's users' load
/// follows the channel (it routes only its services' calls, and its listed user IDs are not
/// counted). Pass the channels of the map's domain.
pub fn routed_map<'a>(map: &UnitMap, channels: impl IntoIterator<Item = &'a Channel>) -> UnitMap {
    let mut routed = map.clone();
    for c in channels {
        if !c.units.is_empty() && map.count(c.zone) > 0 {
            routed = routed.moved(&c.units, c.zone);
        }
    }
    routed
}

/// Checks a channel or service name: 1-64 bytes of lower-case ASCII letters, digits, `_`, `.`
/// and `-` (names appear in URLs, headers and metric labels).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CHANNEL_NAME_BYTES
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
}

/// The first `count` units of the channel's fixed order: units sorted by XXH3-64 of the channel
/// name, a NUL byte and the unit's decimal digits (ties by unit). The order depends only on the
/// name, so a larger share of the same channel is a superset of a smaller one (sticky), and two
/// channels' shares are independent samples of the users.
pub fn share_units(name: &str, units: u32, count: u32) -> UnitSet {
    let mut keyed: Vec<(u64, u32)> = (0..units)
        .map(|u| {
            let mut key = Vec::with_capacity(name.len() + 12);
            key.extend_from_slice(name.as_bytes());
            key.push(0);
            key.extend_from_slice(u.to_string().as_bytes());
            (xxhash_rust::xxh3::xxh3_64(&key), u)
        })
        .collect();
    keyed.sort_unstable();
    let mut chosen: Vec<u32> = keyed.iter().take(count.min(units) as usize).map(|k| k.1).collect();
    chosen.sort_unstable();
    UnitSet::from_sorted(&chosen).unwrap_or_default()
}

/// The number of units a share of `percent` selects out of `units` (rounded to the nearest unit).
pub fn share_count(percent: f64, units: u32) -> u32 {
    ((percent * f64::from(units) / 100.0).round() as u32).min(units)
}

/// A channel as an operator asks for it, before it is resolved into the table.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelSpec {
    pub name: String,
    pub domain: Option<String>,
    pub services: Vec<String>,
    pub zone: ZoneId,
    pub percent: Option<f64>,
    pub units: Option<UnitSet>,
    pub users: Vec<String>,
    pub fallback: ChannelFallback,
    pub expires_at_ms: Option<u64>,
}

impl ChannelSpec {
    /// Checks the spec's own fields (not its fit in a table) and resolves it for a scheme of
    /// `units` units, at `now_ms` (an expiry must be later).
    pub fn resolve(&self, units: u32, now_ms: u64) -> Result<Channel, ChannelError> {
        if !valid_name(&self.name) {
            return Err(ChannelError::InvalidName(self.name.clone()));
        }
        let mut services = self.services.clone();
        services.sort();
        services.dedup();
        if services.is_empty() || services.len() > MAX_CHANNEL_SERVICES {
            return Err(ChannelError::InvalidServices(format!("{} given", services.len())));
        }
        if let Some(bad) = services.iter().find(|s| !valid_name(s)) {
            return Err(ChannelError::InvalidServices(format!("`{bad}` is not a valid name")));
        }
        let set = match (self.percent, &self.units) {
            (Some(_), Some(_)) => return Err(ChannelError::NoUsers("not both")),
            (Some(p), None) => {
                if !(0.0..=100.0).contains(&p) || p.is_nan() {
                    return Err(ChannelError::InvalidPercent(p));
                }
                share_units(&self.name, units, share_count(p, units))
            }
            (None, Some(set)) => set.clone(),
            (None, None) if !self.users.is_empty() => UnitSet::default(),
            (None, None) => return Err(ChannelError::NoUsers("none was given")),
        };
        if self.users.len() > MAX_CHANNEL_USERS {
            return Err(ChannelError::TooManyUsers(self.users.len()));
        }
        for (index, user) in self.users.iter().enumerate() {
            super::unit::validate_user_id(user)
                .map_err(|e| ChannelError::InvalidUser { index, reason: e.to_string() })?;
        }
        if let Some(at) = self.expires_at_ms
            && at <= now_ms
        {
            return Err(ChannelError::ExpiryInPast(at));
        }
        Ok(Channel {
            name: self.name.clone(),
            domain: self.domain.clone().filter(|d| d != super::domain::DEFAULT_DOMAIN),
            services,
            zone: self.zone,
            units: set,
            users: self.users.iter().cloned().collect(),
            fallback: self.fallback,
            expires_at_ms: self.expires_at_ms,
            suspended: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_larger_share_of_a_channel_contains_the_smaller_one() {
        let mut last = UnitSet::default();
        for count in 0..=100 {
            let set = share_units("orders-v2", 100, count);
            assert_eq!(set.len(), count);
            assert!(last.iter().all(|u| set.contains(u)), "share {count} dropped a unit");
            last = set;
        }
    }

    #[test]
    fn two_channels_draw_different_units() {
        let a = share_units("orders-v2", 100, 10);
        let b = share_units("search-v7", 100, 10);
        assert_ne!(a, b);
        assert_ne!(a, UnitSet::from_sorted(&(0..10).collect::<Vec<_>>()).unwrap());
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("orders-v2.canary_1"));
        for bad in ["", "Orders", "a b", "ü", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
