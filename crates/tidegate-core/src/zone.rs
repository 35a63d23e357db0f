//! Zones as indices: the list of zones a routing table maps units to.
//!
//! A zone is an index ([`ZoneId`]) into one [`Zones`] list. Each entry has a name (the
//! availability zone or site, `az-a`), a lane (the name users and messages see: `blue`, `green`,
//! or any name for more zones) and a class ([`ZoneClass`]). The list only grows: a zone that is
//! retired keeps its index, so every index in a log, a snapshot or a lane placement means the
//! same zone for the life of the log.
//!
//! Architecture invariant: the two-zone dial is the special case of a two-zone list. Index 0 is
//! the `blue` lane and index 1 the `green` lane of every list (the genesis makes them), so logs and
//! clients written for two colours keep their meaning.

use std::sync::Arc;

/// Longest zone or lane name, in bytes.
pub const MAX_ZONE_NAME_BYTES: usize = 64;

/// Most zones one table may list (retired ones included).
pub const MAX_ZONES: usize = 64;

/// An index into a table's [`Zones`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub u16);

impl ZoneId {
    /// The `blue` lane of every table.
    pub const BLUE: ZoneId = ZoneId(0);
    /// The `green` lane of every table.
    pub const GREEN: ZoneId = ZoneId(1);

    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The lane name of the first two zones of every table (`blue`, `green`), else `zone-<n>`:
    /// for texts written where no table is at hand (plan step labels). Anything a client reads
    /// takes the lane from the table ([`Zones::lane`]).
    pub fn default_lane(self) -> std::borrow::Cow<'static, str> {
        match self.0 {
            0 => "blue".into(),
            1 => "green".into(),
            n => format!("zone-{n}").into(),
        }
    }
}

/// What a zone is for, in the seed's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZoneClass {
    /// A regional zone: owns user units.
    Rzone,
    /// The global zone: takes writes to global data; may also own units.
    Gzone,
    /// A city zone that serves global reads (a replica of the GZone's data).
    Czone,
}

impl ZoneClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneClass::Rzone => "rzone",
            ZoneClass::Gzone => "gzone",
            ZoneClass::Czone => "czone",
        }
    }

    pub fn parse(s: &str) -> Result<ZoneClass, ZoneError> {
        match s {
            "rzone" => Ok(ZoneClass::Rzone),
            "gzone" => Ok(ZoneClass::Gzone),
            "czone" => Ok(ZoneClass::Czone),
            other => Err(ZoneError::UnknownClass(other.to_owned())),
        }
    }
}

/// One entry of the zone list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ZoneSpec {
    pub name: String,
    pub lane: String,
    pub class: ZoneClass,
    /// A retired zone owns nothing and cannot be given anything; it keeps its index.
    pub retired: bool,
}

impl ZoneSpec {
    pub fn new(name: &str, lane: &str, class: ZoneClass) -> ZoneSpec {
        ZoneSpec { name: name.to_owned(), lane: lane.to_owned(), class, retired: false }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    #[error("`{0}` is not a zone or lane of this table")]
    Unknown(String),
    #[error("zone class `{0}` is unknown: expected `rzone`, `gzone` or `czone`")]
    UnknownClass(String),
    #[error(
        "`{0}` is not a valid zone or lane name: use 1 to {MAX_ZONE_NAME_BYTES} characters of a-z, A-Z, 0-9, `-`, `_` and `.`"
    )]
    BadName(String),
    #[error("`{0}` is already a zone or a lane of this table")]
    Duplicate(String),
    #[error("a table lists at most {MAX_ZONES} zones")]
    TooMany,
    #[error("a table needs its `blue` and `green` lanes as its first two zones")]
    MissingColors,
    #[error("zone `{0}` is retired")]
    Retired(String),
}

/// The zones of a table, in index order. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Zones {
    list: Arc<Vec<ZoneSpec>>,
    /// Each zone's name and lane, interned ([`intern`]): what a tag answer borrows instead of
    /// allocating. Follows from `list`.
    interned: Arc<[(Option<&'static str>, Option<&'static str>)]>,
}

/// Distinct zone names interned per process at most: a table lists at most [`MAX_ZONES`] and
/// zones are added rarely, so this is never reached in practice; past it, names are copied.
const MAX_INTERNED: usize = 4096;

/// `name` as a `&'static str` shared by every table that names the zone (leaked once per
/// distinct name, at most [`MAX_INTERNED`]); `None` past the bound.
fn intern(name: &str) -> Option<&'static str> {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Mutex::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return Some(known);
    }
    if names.len() >= MAX_INTERNED {
        return None;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    Some(leaked)
}

/// Checks a zone or lane name: 1 to 64 characters of `[A-Za-z0-9._-]` (the labels Prometheus
/// and the configuration accept).
pub fn validate_zone_name(name: &str) -> Result<(), ZoneError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_ZONE_NAME_BYTES
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(()) } else { Err(ZoneError::BadName(name.to_owned())) }
}

impl Zones {
    fn of(list: Vec<ZoneSpec>) -> Zones {
        let interned = list.iter().map(|z| (intern(&z.name), intern(&z.lane))).collect();
        Zones { list: Arc::new(list), interned }
    }

    /// The two-zone list: `blue` in `blue_zone`, `green` in `green_zone`.
    pub fn two(blue_zone: &str, green_zone: &str) -> Zones {
        Zones::of(vec![
            ZoneSpec::new(blue_zone, "blue", ZoneClass::Rzone),
            ZoneSpec::new(green_zone, "green", ZoneClass::Rzone),
        ])
    }

    /// A list from its entries: the first two are the `blue` and `green` lanes; names and lanes
    /// are distinct across the whole list (a lane may equal its own zone's name).
    pub fn from_specs(specs: Vec<ZoneSpec>) -> Result<Zones, ZoneError> {
        if specs.len() < 2 || specs[0].lane != "blue" || specs[1].lane != "green" {
            return Err(ZoneError::MissingColors);
        }
        if specs.len() > MAX_ZONES {
            return Err(ZoneError::TooMany);
        }
        let mut list = Vec::with_capacity(specs.len());
        for spec in specs {
            check_new_in(&list, &spec)?;
            list.push(spec);
        }
        Ok(Zones::of(list))
    }

    /// Why `spec` cannot join this list, if it cannot.
    pub fn check_new(&self, spec: &ZoneSpec) -> Result<(), ZoneError> {
        check_new_in(&self.list, spec)
    }

    /// The list with `spec` appended; its index is the old length.
    pub fn with(&self, spec: ZoneSpec) -> Result<(Zones, ZoneId), ZoneError> {
        self.check_new(&spec)?;
        let id = ZoneId(self.list.len() as u16);
        let mut list = (*self.list).clone();
        list.push(spec);
        Ok((Zones::of(list), id))
    }

    /// The list with `zone` retired.
    pub fn retiring(&self, zone: ZoneId) -> Zones {
        let mut list = (*self.list).clone();
        list[zone.index()].retired = true;
        Zones::of(list)
    }

    /// The list with the names of the first two zones replaced (a file log's zones are
    /// configuration, attached after replay).
    pub fn renamed_colors(&self, blue_zone: &str, green_zone: &str) -> Zones {
        let mut list = (*self.list).clone();
        list[0].name = blue_zone.to_owned();
        list[1].name = green_zone.to_owned();
        Zones::of(list)
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every zone, retired ones included, in index order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (ZoneId, &ZoneSpec)> {
        self.list.iter().enumerate().map(|(i, z)| (ZoneId(i as u16), z))
    }

    /// Every zone index, retired ones included.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = ZoneId> + use<> {
        (0..self.list.len() as u16).map(ZoneId)
    }

    /// Every zone that is not retired.
    pub fn live(&self) -> impl Iterator<Item = ZoneId> + '_ {
        self.iter().filter(|(_, z)| !z.retired).map(|(id, _)| id)
    }

    pub fn get(&self, zone: ZoneId) -> Option<&ZoneSpec> {
        self.list.get(zone.index())
    }

    pub fn contains(&self, zone: ZoneId) -> bool {
        zone.index() < self.list.len()
    }

    /// The zone's name (`az-a`). Panics on an index from another table: indices come from this
    /// list or from a log it was built from.
    pub fn zone_of(&self, zone: ZoneId) -> &str {
        &self.list[zone.index()].name
    }

    /// [`Zones::zone_of`] for answers that outlive the list: borrowed from the process's
    /// interned names, so a tag answer allocates nothing for it.
    #[inline]
    pub fn zone_static(&self, zone: ZoneId) -> std::borrow::Cow<'static, str> {
        match self.interned[zone.index()].0 {
            Some(name) => std::borrow::Cow::Borrowed(name),
            None => std::borrow::Cow::Owned(self.zone_of(zone).to_owned()),
        }
    }

    /// [`Zones::lane`] for answers that outlive the list (see [`Zones::zone_static`]).
    #[inline]
    pub fn lane_static(&self, zone: ZoneId) -> std::borrow::Cow<'static, str> {
        match self.interned[zone.index()].1 {
            Some(lane) => std::borrow::Cow::Borrowed(lane),
            None => std::borrow::Cow::Owned(self.lane(zone).to_owned()),
        }
    }

    /// The zone's lane (`blue`).
    pub fn lane(&self, zone: ZoneId) -> &str {
        &self.list[zone.index()].lane
    }

    /// The zone named `name` (a zone name, not a lane).
    pub fn color_in(&self, name: &str) -> Option<ZoneId> {
        self.list.iter().position(|z| z.name == name).map(|i| ZoneId(i as u16))
    }

    /// The zone whose lane is `lane`.
    pub fn by_lane(&self, lane: &str) -> Option<ZoneId> {
        self.list.iter().position(|z| z.lane == lane).map(|i| ZoneId(i as u16))
    }

    /// A zone by its lane or its name, as the API accepts either.
    pub fn resolve(&self, lane_or_name: &str) -> Result<ZoneId, ZoneError> {
        self.by_lane(lane_or_name)
            .or_else(|| self.color_in(lane_or_name))
            .ok_or_else(|| ZoneError::Unknown(lane_or_name.to_owned()))
    }

    /// The other zone of a two-zone list (the dial's counterpart); `None` with more zones.
    pub fn counterpart(&self, zone: ZoneId) -> Option<ZoneId> {
        match (self.is_two(), zone) {
            (true, ZoneId::BLUE) => Some(ZoneId::GREEN),
            (true, ZoneId::GREEN) => Some(ZoneId::BLUE),
            _ => None,
        }
    }

    /// True when the live zones are the two colours the dial works on.
    pub fn is_two(&self) -> bool {
        self.live().map(|z| z.0).eq([0, 1])
    }

    /// Every zone name, comma-separated, for error messages.
    pub fn names(&self) -> String {
        self.list.iter().map(|z| z.name.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// Why `spec` cannot join `list`, if it cannot.
fn check_new_in(list: &[ZoneSpec], spec: &ZoneSpec) -> Result<(), ZoneError> {
    validate_zone_name(&spec.name)?;
    validate_zone_name(&spec.lane)?;
    if list.len() >= MAX_ZONES {
        return Err(ZoneError::TooMany);
    }
    for name in [&spec.name, &spec.lane] {
        if list.iter().any(|z| &z.name == name || &z.lane == name) {
            return Err(ZoneError::Duplicate(name.clone()));
        }
    }
    Ok(())
}

impl Default for Zones {
    /// The layout of the source design: blue in zone B, green in zone A.
    fn default() -> Self {
        Zones::two("az-b", "az-a")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_names_are_interned_once_per_name() {
        let a = Zones::two("az-intern-b", "az-intern-a");
        let (b, c) = a.with(ZoneSpec::new("az-intern-c", "red", ZoneClass::Rzone)).unwrap();
        let std::borrow::Cow::Borrowed(first) = a.zone_static(ZoneId::GREEN) else {
            panic!("an interned name is borrowed")
        };
        let std::borrow::Cow::Borrowed(second) = b.zone_static(ZoneId::GREEN) else {
            panic!("an interned name is borrowed")
        };
        // Two lists naming one zone share its one copy.
        assert!(std::ptr::eq(first, second));
        assert_eq!(first, "az-intern-a");
        assert_eq!(b.zone_static(c), "az-intern-c");
        assert!(matches!(b.lane_static(c), std::borrow::Cow::Borrowed("red")));
        let renamed = b.renamed_colors("az-intern-x", "az-intern-y");
        assert_eq!(renamed.zone_static(ZoneId::BLUE), "az-intern-x");
        assert_eq!(renamed.zone_static(c), "az-intern-c");
        assert_eq!(renamed.retiring(c).zone_static(c), "az-intern-c");
    }

    #[test]
    fn names_and_lanes_are_unique_and_checked() {
        let zones = Zones::default();
        assert_eq!(zones.resolve("blue"), Ok(ZoneId::BLUE));
        assert_eq!(zones.resolve("az-a"), Ok(ZoneId::GREEN));
        let (three, id) = zones.with(ZoneSpec::new("az-c", "red", ZoneClass::Rzone)).unwrap();
        assert_eq!(id, ZoneId(2));
        assert_eq!(three.lane(id), "red");
        assert_eq!(
            three.with(ZoneSpec::new("az-d", "red", ZoneClass::Rzone)),
            Err(ZoneError::Duplicate("red".into()))
        );
        assert_eq!(
            three.with(ZoneSpec::new("az-a", "x", ZoneClass::Rzone)),
            Err(ZoneError::Duplicate("az-a".into()))
        );
        assert!(matches!(
            three.with(ZoneSpec::new("az c", "x", ZoneClass::Rzone)),
            Err(ZoneError::BadName(_))
        ));
        assert_eq!(three.counterpart(ZoneId::BLUE), None);
        assert_eq!(zones.counterpart(ZoneId::BLUE), Some(ZoneId::GREEN));
        assert_eq!(
            Zones::from_specs(vec![ZoneSpec::new("a", "green", ZoneClass::Rzone)]),
            Err(ZoneError::MissingColors)
        );
    }
}
