//! The versioned routing table: which zone every unit and every pinned user belongs to.
//!
//! Architecture invariant: a user's zone is their pin's zone if they are pinned, else the owner
//! of their unit in the table's [`UnitMap`]. On a two-zone table in dial form unit `u` is blue
//! exactly when `u < blue_units` (the rule of the first releases), and the dial moves units in
//! one fixed order, so dial moves are monotone and sticky and `a -> b -> a` restores the table
//! (see `unit_map`). Clients in other languages need only this rule, the map and the hash.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::channel::{Channel, ChannelError, ChannelFallback};
use super::channel_change::ChannelFreeze;
use super::dial::Share;
use super::unit::{Unit, UnitError, UnitScheme};
use super::unit_map::{UnitMap, UnitSet};
use super::zone::{ZoneId, Zones};

/// What a request without a user ID gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// A colour drawn at random, weighted by the current blue share.
    Random,
    /// A client error: untagged requests are a bug in the caller.
    Reject,
}

/// The answer to "which colour is this user?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    pub color: ZoneId,
    pub unit: Unit,
    /// True when a pin, not the unit, decided the colour.
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error(transparent)]
    InvalidUserId(#[from] UnitError),
    #[error("the request has no user_id and the fallback is `reject`")]
    Untagged,
    #[error(
        "release channel `{0}` is suspended (its zone was evacuated) and its fallback is `reject`"
    )]
    ChannelUnavailable(String),
}

/// Which rule decided a tag (the precedence: pin > channel > unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule<'a> {
    Pin,
    /// The release channel of this name, for the service asked about.
    Channel(&'a str),
    Unit,
}

impl Rule<'_> {
    /// The rule as answers name it: `pin`, `unit`, or `channel:<name>`.
    pub fn describe(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Rule::Pin => "pin".into(),
            Rule::Unit => "unit".into(),
            Rule::Channel(name) => format!("channel:{name}").into(),
        }
    }
}

/// One immutable version of the routing state. Cheap to clone only through `Arc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingTable {
    pub(crate) version: u64,
    pub(crate) scheme: UnitScheme,
    pub(crate) map: UnitMap,
    pub(crate) pins: Arc<BTreeMap<String, ZoneId>>,
    pub(crate) zones: Zones,
    pub(crate) global: GlobalWriter,
    /// The named routing domains beyond the default one, each with its own unit map over the
    /// same zones, scheme and pins (a user's zone agrees across domains wherever the maps do).
    pub(crate) domains: Arc<BTreeMap<String, UnitMap>>,
    /// Units whose writes are frozen by a move in progress, by domain name (`default` for the
    /// default domain): the freeze of a loss-less move (see [`RoutingTable::check_write`]).
    pub(crate) frozen: Arc<BTreeMap<String, UnitSet>>,
    /// Release channels by name: overlays of one service's calls (see `channel`).
    pub(crate) channels: Arc<BTreeMap<String, Channel>>,
    /// The freeze of a channel change in progress (see `channel_change`).
    pub(crate) channel_freeze: Option<Arc<ChannelFreeze>>,
}

/// How long a write refused as frozen or behind is told to wait before it retries: a freeze
/// lasts until every live subscriber applied the switch, typically a few hundred milliseconds.
pub const WRITE_RETRY_AFTER_MS: u64 = 250;

/// The answer of the ownership check for a write (`RoutingTable::check_write`).
///
/// Architecture invariant: every write check (the Router's, the edge gate's, OFREP metadata's)
/// is this one function of the table, the user, the local zone and the caller's version, so
/// they cannot disagree about a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// The local zone owns the user at a table at least as new as the caller's: write.
    Owned,
    /// The user's unit is frozen by a move in progress: answer busy and retry after
    /// [`WRITE_RETRY_AFTER_MS`] (reads go on).
    Frozen { owner: ZoneId, unit: u32 },
    /// The caller decided at a newer version than the local table: the local zone cannot judge
    /// yet; answer busy (503 with `Retry-After`) and let the local copy catch up.
    Behind { incoming: u64, local: u64 },
    /// Another zone owns the user at a local table at least as new as the caller's: refuse
    /// (421 naming the owner) or forward once to the owner.
    Misrouted { owner: ZoneId },
    /// The table would say `owned`, but the copy that judged has not been confirmed current
    /// within its lease (`crate::lease`): a zone cut off from the coordinators must not keep
    /// writing users the others may have taken over. Answer busy (503 with `Retry-After`);
    /// reads and tags go on from the last table.
    Unconfirmed,
}

impl WriteCheck {
    /// The answer's name, as APIs and metrics show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            WriteCheck::Owned => "owned",
            WriteCheck::Frozen { .. } => "frozen",
            WriteCheck::Behind { .. } => "behind",
            WriteCheck::Misrouted { .. } => "misrouted",
            WriteCheck::Unconfirmed => "unconfirmed",
        }
    }

    /// This answer from a copy whose lease is `confirmed` (current) or not: only `owned` turns
    /// into [`WriteCheck::Unconfirmed`]; a freeze, a newer caller or another owner answer the
    /// same from any copy (the owner a misrouted write is forwarded to judges it again).
    pub fn leased(self, confirmed: bool) -> WriteCheck {
        match self {
            WriteCheck::Owned if !confirmed => WriteCheck::Unconfirmed,
            other => other,
        }
    }
}

pub use super::domain::DEFAULT_DOMAIN;

/// Most named domains one table may hold.
pub const MAX_DOMAINS: usize = 32;

pub use crate::global_writer::GlobalWriter;

/// The answer of the global write check ([`RoutingTable::check_global_write`]): may a service
/// in a zone write global data (data that belongs to no user) now?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalWriteCheck {
    /// The local zone is the global writer: write.
    Owned,
    /// The caller decided at a newer version than the local table: wait for it (503).
    Behind { incoming: u64, local: u64 },
    /// A move of the global writer is in progress: wait and retry (503 with `Retry-After`).
    Frozen { owner: Option<ZoneId> },
    /// An operator made global data read-only: no zone writes it (503).
    ReadOnly { owner: Option<ZoneId> },
    /// Another zone is the global writer (`None`: no zone is): refuse (421) or forward.
    Misrouted { owner: Option<ZoneId> },
    /// The table would say `owned`, but the copy that judged has not been confirmed current
    /// within its lease (see [`WriteCheck::Unconfirmed`]): wait (503).
    Unconfirmed,
}

impl GlobalWriteCheck {
    /// The answer's name, as APIs and metrics show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            GlobalWriteCheck::Owned => "owned",
            GlobalWriteCheck::Behind { .. } => "behind",
            GlobalWriteCheck::Frozen { .. } => "frozen",
            GlobalWriteCheck::ReadOnly { .. } => "read_only",
            GlobalWriteCheck::Misrouted { .. } => "misrouted",
            GlobalWriteCheck::Unconfirmed => "unconfirmed",
        }
    }

    /// This answer from a copy whose lease is `confirmed` or not: only `owned` turns into
    /// `Unconfirmed` (as [`WriteCheck::leased`]).
    pub fn leased(self, confirmed: bool) -> GlobalWriteCheck {
        match self {
            GlobalWriteCheck::Owned if !confirmed => GlobalWriteCheck::Unconfirmed,
            other => other,
        }
    }

    /// The HTTP status of the answer: 200 owned, 421 misrouted, 503 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            GlobalWriteCheck::Owned => 200,
            GlobalWriteCheck::Misrouted { .. } => 421,
            _ => 503,
        }
    }

    /// How long to wait before retrying, when a retry will do (behind, frozen, unconfirmed);
    /// read-only lasts until an operator lifts it, and misrouted is not retried here.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            GlobalWriteCheck::Behind { .. }
            | GlobalWriteCheck::Frozen { .. }
            | GlobalWriteCheck::Unconfirmed => Some(WRITE_RETRY_AFTER_MS),
            _ => None,
        }
    }

    /// The global writer the answer names, if any.
    pub fn owner(&self) -> Option<ZoneId> {
        match self {
            GlobalWriteCheck::Owned
            | GlobalWriteCheck::Behind { .. }
            | GlobalWriteCheck::Unconfirmed => None,
            GlobalWriteCheck::Frozen { owner }
            | GlobalWriteCheck::ReadOnly { owner }
            | GlobalWriteCheck::Misrouted { owner } => *owner,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("blue_units {blue_units} exceeds the {units} units")]
    BlueUnitsOutOfRange { blue_units: u32, units: u32 },
    #[error("pinned user id is invalid: {0}")]
    InvalidPin(UnitError),
    #[error("the unit map has {map} units, the scheme {units}")]
    MapSize { map: u32, units: u32 },
    #[error("the unit map names zone {0}, which the table does not list")]
    UnknownZone(u16),
    #[error("frozen units name domain `{0}`, which the table does not have")]
    FrozenDomain(String),
    #[error("frozen unit {unit} is outside the {units} units")]
    FrozenUnit { unit: u32, units: u32 },
    #[error("channel `{channel}`: {problem}")]
    Channel { channel: String, problem: String },
}

impl RoutingTable {
    /// A two-zone dial-form table from its parts, as clients of the first releases decode it.
    pub fn from_parts(
        version: u64,
        scheme: UnitScheme,
        blue_units: u32,
        pins: BTreeMap<String, ZoneId>,
        zones: Zones,
    ) -> Result<RoutingTable, TableError> {
        if blue_units > scheme.count() {
            return Err(TableError::BlueUnitsOutOfRange { blue_units, units: scheme.count() });
        }
        let map = UnitMap::dial(scheme.count(), blue_units);
        RoutingTable::from_map(version, scheme, map, pins, zones, GlobalWriter::default())
    }

    /// A table from its parts, as a client decodes it from the watch stream or `GET
    /// /v1/routing`, or a snapshot stores it. The coordinator never builds tables this way
    /// otherwise: its tables come from `State::apply`.
    pub fn from_map(
        version: u64,
        scheme: UnitScheme,
        map: UnitMap,
        pins: BTreeMap<String, ZoneId>,
        zones: Zones,
        global: GlobalWriter,
    ) -> Result<RoutingTable, TableError> {
        if map.units() != scheme.count() {
            return Err(TableError::MapSize { map: map.units(), units: scheme.count() });
        }
        let known = |z: ZoneId| zones.contains(z);
        if let Some(bad) =
            map.owners().iter().chain(pins.values()).chain(global.zone.iter()).find(|z| !known(**z))
        {
            return Err(TableError::UnknownZone(bad.0));
        }
        for user_id in pins.keys() {
            super::unit::validate_user_id(user_id).map_err(TableError::InvalidPin)?;
        }
        Ok(RoutingTable {
            version,
            scheme,
            map,
            pins: Arc::new(pins),
            zones,
            global,
            domains: Arc::new(BTreeMap::new()),
            frozen: Arc::new(BTreeMap::new()),
            channel_freeze: None,
            channels: Arc::new(BTreeMap::new()),
        })
    }

    /// The same table with named domains (as decoded from the wire or a snapshot); each map
    /// must cover the scheme's units and name only the table's zones.
    pub fn with_domains(
        mut self,
        domains: BTreeMap<String, UnitMap>,
    ) -> Result<RoutingTable, TableError> {
        for map in domains.values() {
            if map.units() != self.scheme.count() {
                return Err(TableError::MapSize { map: map.units(), units: self.scheme.count() });
            }
            if let Some(bad) = map.owners().iter().find(|z| !self.zones.contains(**z)) {
                return Err(TableError::UnknownZone(bad.0));
            }
        }
        self.domains = Arc::new(domains);
        Ok(self)
    }

    /// The same table with frozen units (as decoded from the wire or a snapshot), by domain
    /// name (`default` for the default domain); every domain must exist and every unit fit.
    pub fn with_frozen(
        mut self,
        mut frozen: BTreeMap<String, UnitSet>,
    ) -> Result<RoutingTable, TableError> {
        for (domain, set) in &frozen {
            if self.map_of(Some(domain)).is_none() {
                return Err(TableError::FrozenDomain(domain.clone()));
            }
            if let Some(unit) = set.iter().find(|u| *u >= self.units()) {
                return Err(TableError::FrozenUnit { unit, units: self.units() });
            }
        }
        frozen.retain(|_, set| !set.is_empty());
        self.frozen = Arc::new(frozen);
        Ok(self)
    }

    /// The same table with release channels (as decoded from the wire or a snapshot): each must
    /// name an existing domain and zone and fit the scheme, and no service may have two
    /// channels in one domain.
    pub fn with_channels(
        mut self,
        channels: BTreeMap<String, Channel>,
    ) -> Result<RoutingTable, TableError> {
        for channel in channels.values() {
            self.check_channel(channel, &channels).map_err(|e| TableError::Channel {
                channel: channel.name.clone(),
                problem: e.to_string(),
            })?;
        }
        self.channels = Arc::new(channels);
        Ok(self)
    }

    /// The same table with the freeze of a channel change in progress (a snapshot's or a
    /// published table's), checked against its domains and units.
    pub fn with_channel_freeze(
        mut self,
        freeze: Option<ChannelFreeze>,
    ) -> Result<RoutingTable, TableError> {
        if let Some(f) = &freeze {
            let problem =
                |problem: String| TableError::Channel { channel: f.channel.clone(), problem };
            if self.map_of(f.domain.as_deref()).is_none() {
                return Err(problem(format!(
                    "its freeze names domain `{}`, which the table does not have",
                    f.domain.as_deref().unwrap_or(DEFAULT_DOMAIN)
                )));
            }
            if let Some(unit) = f.units.iter().find(|u| *u >= self.units()) {
                return Err(problem(format!(
                    "its freeze names unit {unit}, outside the table's {} units",
                    self.units()
                )));
            }
        }
        self.channel_freeze = freeze.map(Arc::new);
        Ok(self)
    }

    /// The freeze of the channel change in progress, if there is one.
    pub fn channel_freeze(&self) -> Option<&ChannelFreeze> {
        self.channel_freeze.as_deref()
    }

    /// Why `channel` cannot sit in this table beside `others` (its own entry there is skipped).
    pub(crate) fn check_channel(
        &self,
        channel: &Channel,
        others: &BTreeMap<String, Channel>,
    ) -> Result<(), ChannelError> {
        if self.map_of(channel.domain.as_deref()).is_none() {
            return Err(ChannelError::UnknownDomain(channel.domain_name().to_owned()));
        }
        if !self.zones.contains(channel.zone) {
            return Err(ChannelError::UnknownZone(channel.zone.0));
        }
        if let Some(unit) = channel.units.iter().find(|u| *u >= self.units()) {
            return Err(ChannelError::UnitOutOfRange { unit, units: self.units() });
        }
        for other in others.values().filter(|o| o.name != channel.name) {
            if other.domain_name() != channel.domain_name() {
                continue;
            }
            if let Some(service) = channel.services.iter().find(|s| other.serves(s)) {
                return Err(ChannelError::Overlap {
                    service: service.clone(),
                    other: other.name.clone(),
                    domain: channel.domain_name().to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The release channels, by name.
    pub fn channels(&self) -> &BTreeMap<String, Channel> {
        &self.channels
    }

    /// Replaces (or with `None` removes) the channel called `name`.
    pub(crate) fn set_channel(&mut self, name: &str, channel: Option<Channel>) {
        let channels = Arc::make_mut(&mut self.channels);
        match channel {
            Some(c) => {
                channels.insert(name.to_owned(), c);
            }
            None => {
                channels.remove(name);
            }
        }
    }

    /// The channel that routes `service`'s calls in `domain` (`None`: the default domain).
    pub fn channel_for(&self, domain: Option<&str>, service: &str) -> Option<&Channel> {
        if self.channels.is_empty() {
            return None;
        }
        let domain = domain.unwrap_or(DEFAULT_DOMAIN);
        self.channels.values().find(|c| c.domain_name() == domain && c.serves(service))
    }

    /// Tags a user for a call of `service` (`None`: no service, the global rule) in `domain`
    /// (`None`: the default domain): a pin wins, then the service's release channel if it selects
    /// the user, then the domain's map. A suspended channel gives its users its fallback: the
    /// map, or [`TagError::ChannelUnavailable`]. `Ok(None)` when the domain does not exist.
    pub fn tag_service(
        &self,
        domain: Option<&str>,
        user_id: &str,
        service: Option<&str>,
    ) -> Result<Option<(Tag, Rule<'_>)>, TagError> {
        let Some(map) = self.map_of(domain) else { return Ok(None) };
        let tag = self.tag_in(map, user_id)?;
        if tag.pinned {
            return Ok(Some((tag, Rule::Pin)));
        }
        if let Some(channel) = service.and_then(|s| self.channel_for(domain, s))
            && channel.selects(user_id, tag.unit.0)
        {
            if !channel.suspended {
                return Ok(Some((
                    Tag { color: channel.zone, ..tag },
                    Rule::Channel(&channel.name),
                )));
            }
            if channel.fallback == ChannelFallback::Reject {
                return Err(TagError::ChannelUnavailable(channel.name.clone()));
            }
        }
        Ok(Some((tag, Rule::Unit)))
    }

    /// The frozen units by domain name (`default` for the default domain); empty between moves.
    pub fn frozen(&self) -> &BTreeMap<String, UnitSet> {
        &self.frozen
    }

    /// The frozen units of `domain` (`None`: the default domain), if any are.
    pub fn frozen_in(&self, domain: Option<&str>) -> Option<&UnitSet> {
        self.frozen.get(domain.unwrap_or(DEFAULT_DOMAIN))
    }

    /// Freezes `units` of `domain` (`None`: the default domain), or thaws it with `None`.
    pub(crate) fn set_frozen(&mut self, domain: Option<&str>, units: Option<UnitSet>) {
        let name = domain.unwrap_or(DEFAULT_DOMAIN).to_owned();
        let frozen = Arc::make_mut(&mut self.frozen);
        match units {
            Some(set) if !set.is_empty() => {
                frozen.insert(name, set);
            }
            _ => {
                frozen.remove(&name);
            }
        }
    }

    /// The ownership check for a write of `user_id` in `domain` (`None`: the default domain) by
    /// a service in `local`, which the caller routed there at `incoming` (the propagated
    /// `x-tidegate-version`, when known). In order: a caller newer than this table is `Behind`
    /// (this table cannot judge its decision); a frozen unit is `Frozen`; another owner is
    /// `Misrouted`; else `Owned`. A frozen unit freezes every user of it, pinned or not (a
    /// loss-less pin change freezes its user's unit). `None` when the domain does not exist.
    pub fn check_write(
        &self,
        domain: Option<&str>,
        user_id: &str,
        local: ZoneId,
        incoming: Option<u64>,
    ) -> Result<Option<WriteCheck>, UnitError> {
        let Some(map) = self.map_of(domain) else { return Ok(None) };
        let tag = self.tag_in(map, user_id)?;
        if let Some(incoming) = incoming
            && incoming > self.version
        {
            return Ok(Some(WriteCheck::Behind { incoming, local: self.version }));
        }
        if let Some(set) = self.frozen_in(domain)
            && set.contains(tag.unit.0)
        {
            return Ok(Some(WriteCheck::Frozen { owner: tag.color, unit: tag.unit.0 }));
        }
        if tag.color != local {
            return Ok(Some(WriteCheck::Misrouted { owner: tag.color }));
        }
        Ok(Some(WriteCheck::Owned))
    }

    /// [`RoutingTable::check_write`] of a write by `service` (`None`: as `check_write`): a
    /// release channel of that service that selects the user owns their writes of it, as it
    /// routes their calls (pin > channel > map). A freeze covers every write of the users it
    /// names, whichever rule routes them now: a map move's frozen units and the freeze of a
    /// channel change in progress ([`ChannelFreeze::covers`]) make those writes `Frozen`, after
    /// `Behind`. A channel suspended
    /// with `reject` is [`TagError::ChannelUnavailable`]: its users' writes have no owner.
    pub fn check_write_for(
        &self,
        domain: Option<&str>,
        service: Option<&str>,
        user_id: &str,
        local: ZoneId,
        incoming: Option<u64>,
    ) -> Result<Option<WriteCheck>, TagError> {
        let Some(service) = service else {
            return Ok(self.check_write(domain, user_id, local, incoming)?);
        };
        let Some((tag, rule)) = self.tag_service(domain, user_id, Some(service))? else {
            return Ok(None);
        };
        let by_channel = matches!(rule, Rule::Channel(_));
        let frozen = self.write_frozen(domain, Some(service), user_id, &tag);
        if !by_channel && !frozen {
            return Ok(self.check_write(domain, user_id, local, incoming)?);
        }
        let owner = tag.color;
        if let Some(incoming) = incoming
            && incoming > self.version
        {
            return Ok(Some(WriteCheck::Behind { incoming, local: self.version }));
        }
        if frozen {
            return Ok(Some(WriteCheck::Frozen { owner, unit: tag.unit.0 }));
        }
        if owner != local {
            return Ok(Some(WriteCheck::Misrouted { owner }));
        }
        Ok(Some(WriteCheck::Owned))
    }

    /// Whether a write by the user of `tag` of `service` in `domain` is frozen. One rule: a
    /// freeze covers every write of the users it names, whichever rule routes them (pin,
    /// channel or map): a channel change's freeze covers the writes of its services
    /// ([`ChannelFreeze::covers`]); a map move's (or a pin change's) frozen units cover every
    /// write of their users. Freezing a user whose owner does not change only delays their
    /// writes; not freezing one whose owner changes lets two zones write them. The write checks
    /// and the edge gate ask this.
    pub fn write_frozen(
        &self,
        domain: Option<&str>,
        service: Option<&str>,
        user_id: &str,
        tag: &Tag,
    ) -> bool {
        if let (Some(s), Some(f)) = (service, &self.channel_freeze)
            && f.covers(domain, s, user_id, tag.unit.0)
        {
            return true;
        }
        self.frozen_in(domain).is_some_and(|set| set.contains(tag.unit.0))
    }

    /// The named domains beyond the default one, by name.
    pub fn domains(&self) -> &BTreeMap<String, UnitMap> {
        &self.domains
    }

    /// The unit map of `domain` (`None` or `default`: the default domain's), if it exists.
    pub fn map_of(&self, domain: Option<&str>) -> Option<&UnitMap> {
        match domain {
            None | Some(DEFAULT_DOMAIN) => Some(&self.map),
            Some(name) => self.domains.get(name),
        }
    }

    /// The same table with `domain`'s map replaced (`None` or `default`: the default domain's).
    /// The caller has checked that the domain exists ([`RoutingTable::map_of`]).
    pub(crate) fn set_map_of(&mut self, domain: Option<&str>, map: UnitMap) {
        match domain {
            None | Some(DEFAULT_DOMAIN) => self.map = map,
            Some(name) => {
                Arc::make_mut(&mut self.domains).insert(name.to_owned(), map);
            }
        }
    }

    /// The table as `domain` sees it: the same zones, scheme, pins and version, with that
    /// domain's map as the default one (`None` or `default`: a copy of this table), if the
    /// domain exists. What a drain or dial of a named domain is judged and stepped on.
    pub fn view_of(&self, domain: Option<&str>) -> Option<RoutingTable> {
        let map = self.map_of(domain)?.clone();
        let mut view = self.clone();
        view.map = map;
        Some(view)
    }

    /// Units owned by zone 0 (`blue`) in `domain`'s map (`None`: the default domain), if the
    /// domain exists: the dial of that domain on a two-zone table.
    pub fn blue_units_in(&self, domain: Option<&str>) -> Option<u32> {
        self.map_of(domain).map(|m| m.count(ZoneId::BLUE))
    }

    /// Tags a user in the domain whose map is `map` (from [`RoutingTable::map_of`]): a pin wins
    /// in every domain, else the map's owner of the user's unit.
    #[inline]
    pub fn tag_in(&self, map: &UnitMap, user_id: &str) -> Result<Tag, UnitError> {
        let unit = self.scheme.unit_of(user_id)?;
        if !self.pins.is_empty()
            && let Some(&color) = self.pins.get(user_id)
        {
            return Ok(Tag { color, unit, pinned: true });
        }
        Ok(Tag { color: map.owner(unit.0), unit, pinned: false })
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn scheme(&self) -> &UnitScheme {
        &self.scheme
    }

    pub fn units(&self) -> u32 {
        self.scheme.count()
    }

    /// The blue share (units of zone 0). Meaningful as the dial on two-zone tables.
    pub fn share(&self) -> Share {
        Share { blue_units: self.blue_units(), units: self.units() }
    }

    /// Units owned by zone 0 (`blue`).
    pub fn blue_units(&self) -> u32 {
        self.map.count(ZoneId::BLUE)
    }

    pub fn blue_percent(&self) -> f64 {
        self.share().blue_percent()
    }

    pub fn zones(&self) -> &Zones {
        &self.zones
    }

    /// The name of a zone of this table.
    pub fn zone_of(&self, zone: ZoneId) -> &str {
        self.zones.zone_of(zone)
    }

    /// [`RoutingTable::zone_of`] for answers that outlive the table (see [`Zones::zone_static`]).
    #[inline]
    pub fn zone_static(&self, zone: ZoneId) -> std::borrow::Cow<'static, str> {
        self.zones.zone_static(zone)
    }

    /// The lane (colour) of a zone of this table.
    pub fn lane(&self, zone: ZoneId) -> &str {
        self.zones.lane(zone)
    }

    /// [`RoutingTable::lane`] for answers that outlive the table: borrowed, for blue and green
    /// (indices 0 and 1 of every table) from constants, else from the interned lanes
    /// ([`Zones::lane_static`]), so tagging allocates nothing.
    #[inline]
    pub fn lane_static(&self, zone: ZoneId) -> std::borrow::Cow<'static, str> {
        // Indexed, not matched: which of blue and green a user gets is random, so a branch on
        // it is mispredicted half the time (Router::tag took 37 ns against 26 for the two-colour
        // release's; indexed, about 31: scripts/bench-router.sh). `index < 2` is predictable.
        const FIRST_TWO: [&str; 2] = ["blue", "green"];
        match FIRST_TWO.get(zone.index()) {
            Some(lane) => std::borrow::Cow::Borrowed(lane),
            None => self.zones.lane_static(zone),
        }
    }

    /// Every domain's name, `default` first, comma-separated (for error messages).
    pub fn domain_names(&self) -> String {
        std::iter::once(DEFAULT_DOMAIN)
            .chain(self.domains.keys().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn map(&self) -> &UnitMap {
        &self.map
    }

    pub fn global(&self) -> GlobalWriter {
        self.global
    }

    /// The global write check: may a service in `local`, whose caller routed it at `incoming`
    /// (the propagated `x-tidegate-version`, when known), write global data now? In order: a
    /// caller newer than this table is `Behind`; a move of the global writer in progress is
    /// `Frozen`; read-only global data is `ReadOnly`; another zone (or none) as the global
    /// writer is `Misrouted`; else `Owned`. The Go and Java clients and the edge's
    /// `GET /v1/write-check?global=true` answer the same (`tests/fixtures/global_write_checks.json`).
    pub fn check_global_write(&self, local: ZoneId, incoming: Option<u64>) -> GlobalWriteCheck {
        let owner = self.global.zone;
        if let Some(incoming) = incoming
            && incoming > self.version
        {
            return GlobalWriteCheck::Behind { incoming, local: self.version };
        }
        if self.global.frozen {
            return GlobalWriteCheck::Frozen { owner };
        }
        if self.global.read_only {
            return GlobalWriteCheck::ReadOnly { owner };
        }
        if owner != Some(local) {
            return GlobalWriteCheck::Misrouted { owner };
        }
        GlobalWriteCheck::Owned
    }

    /// Sets whether global writes are frozen (a global-writer move in progress).
    pub(crate) fn set_global_frozen(&mut self, frozen: bool) {
        self.global.frozen = frozen;
    }

    /// Units owned by `zone`.
    pub fn units_of(&self, zone: ZoneId) -> u32 {
        self.map.count(zone)
    }

    /// True when nothing routes users or writes to `zone`: no units in any domain, no pins, no
    /// release channel, not the global writer. Such a zone carries no load by construction (a
    /// zone just added has no traffic to report, so its measured load is unknown, not zero).
    pub fn routes_nothing_to(&self, zone: ZoneId) -> bool {
        self.map.count(zone) == 0
            && self.domains.values().all(|m| m.count(zone) == 0)
            && !self.pins.values().any(|z| *z == zone)
            && !self.channels.values().any(|c| c.zone == zone)
            && self.global.zone != Some(zone)
    }

    pub fn pins(&self) -> &BTreeMap<String, ZoneId> {
        &self.pins
    }

    #[inline]
    pub fn color_of_unit(&self, unit: Unit) -> ZoneId {
        self.map.owner(unit.0)
    }

    /// The zone of every unit, in unit order.
    pub fn unit_colors(&self) -> impl Iterator<Item = ZoneId> + '_ {
        self.map.owners().iter().copied()
    }

    /// Tags a user: a pin wins over the unit. The ID must be valid (see `validate_user_id`).
    #[inline]
    pub fn tag(&self, user_id: &str) -> Result<Tag, UnitError> {
        let unit = self.scheme.unit_of(user_id)?;
        // The emptiness check keeps the common no-pins case free of a map lookup.
        if !self.pins.is_empty()
            && let Some(&color) = self.pins.get(user_id)
        {
            return Ok(Tag { color, unit, pinned: true });
        }
        Ok(Tag { color: self.color_of_unit(unit), unit, pinned: false })
    }

    /// The zone for a request without a user ID. `draw` is a uniform sample in `[0, 1)`,
    /// supplied by the caller because the core draws no random numbers itself; zones are
    /// weighted by the units they own, in index order.
    pub fn untagged(&self, fallback: Fallback, draw: f64) -> Result<ZoneId, TagError> {
        match fallback {
            Fallback::Reject => Err(TagError::Untagged),
            Fallback::Random => {
                let units = f64::from(self.units());
                let mut below = 0.0;
                let mut last = ZoneId::GREEN;
                for zone in self.zones.ids() {
                    let owned = f64::from(self.map.count(zone));
                    if owned == 0.0 {
                        continue;
                    }
                    below += owned / units;
                    last = zone;
                    if draw < below {
                        return Ok(zone);
                    }
                }
                Ok(last)
            }
        }
    }

    /// The same table with the names of its first two zones taken from configuration (a file
    /// log's zones are configuration, not logged state, so they are attached after replay).
    pub fn with_zones(mut self, zones: Zones) -> RoutingTable {
        self.zones = zones;
        self
    }
}
