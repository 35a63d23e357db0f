//! The explicit unit map: which zone owns every unit, kept as one zone index per unit and
//! written as runs (`0-49 -> 0, 50-99 -> 1`).
//!
//! Architecture invariant: the two-zone dial is the map's special case. `blue_units = b` on a
//! two-zone map in dial form means units `0..b` are zone 0 (blue) and `b..N` zone 1 (green), the
//! rule of every earlier release. Moving the dial on any two-zone map flips units in one fixed
//! order ([`UnitMap::set_count`]): more blue turns the lowest green units blue, less blue turns
//! the highest blue units green, so on a dial-form map a move from `a` to `b` flips exactly the
//! units between them and `a -> b -> a` restores the map.

use std::fmt;
use std::sync::Arc;

use super::zone::ZoneId;

/// A set of units written as ascending, non-overlapping ranges: `25-49,60,70-72`. The default is
/// the empty set (which [`UnitSet::parse`] refuses: a move names at least one unit).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct UnitSet {
    ranges: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitSetError {
    #[error("the unit set is empty")]
    Empty,
    #[error("`{0}` is not a unit or a range of units (`25` or `25-49`)")]
    Syntax(String),
    #[error("unit {unit} is outside the table's {units} units (0-{last})", last = units - 1)]
    OutOfRange { unit: u32, units: u32 },
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("unit {0} is named twice")]
    Overlap(u32),
}

impl UnitSet {
    /// Parses `25-49,60` for a table of `units` units; ranges may come in any order but may not
    /// overlap.
    pub fn parse(text: &str, units: u32) -> Result<UnitSet, UnitSetError> {
        let mut ranges = Vec::new();
        for part in text.split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let number = |s: &str| {
                s.trim().parse::<u32>().map_err(|_| UnitSetError::Syntax(part.to_owned()))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => {
                    let u = number(part)?;
                    (u, u)
                }
            };
            if lo > hi {
                return Err(UnitSetError::Backwards(part.to_owned()));
            }
            ranges.push((lo, hi));
        }
        UnitSet::from_ranges(ranges, units)
    }

    /// A set from inclusive ranges, checked against `units`.
    pub fn from_ranges(mut ranges: Vec<(u32, u32)>, units: u32) -> Result<UnitSet, UnitSetError> {
        if ranges.is_empty() {
            return Err(UnitSetError::Empty);
        }
        ranges.sort_unstable();
        for &(lo, hi) in &ranges {
            if hi >= units {
                return Err(UnitSetError::OutOfRange { unit: hi.max(lo), units });
            }
        }
        for pair in ranges.windows(2) {
            if pair[1].0 <= pair[0].1 {
                return Err(UnitSetError::Overlap(pair[1].0));
            }
        }
        Ok(UnitSet { ranges })
    }

    /// The set of `units` (ascending, without repeats, as [`UnitMap::diff`] returns them), as
    /// ranges; `None` when there are none.
    pub fn from_sorted(units: &[u32]) -> Option<UnitSet> {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for &u in units {
            match ranges.last_mut() {
                Some((_, hi)) if u == *hi + 1 => *hi = u,
                _ => ranges.push((u, u)),
            }
        }
        (!ranges.is_empty()).then_some(UnitSet { ranges })
    }

    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }

    pub fn len(&self) -> u32 {
        self.ranges.iter().map(|&(lo, hi)| hi - lo + 1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Binary search over the ranges: a channel's share of 10 000 units is hundreds of them,
    /// and the tag path asks this for every channel user.
    pub fn contains(&self, unit: u32) -> bool {
        let after = self.ranges.partition_point(|&(lo, _)| lo <= unit);
        after > 0 && unit <= self.ranges[after - 1].1
    }

    /// True when the two sets share a unit.
    pub fn overlaps(&self, other: &UnitSet) -> Option<u32> {
        other.iter().find(|&u| self.contains(u))
    }
}

impl fmt::Display for UnitSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi { write!(f, "{lo}")? } else { write!(f, "{lo}-{hi}")? }
        }
        Ok(())
    }
}

/// One run of the map: units `first..=last` belong to `zone`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub first: u32,
    pub last: u32,
    pub zone: ZoneId,
}

/// Which zone owns each unit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnitMap {
    owners: Arc<[ZoneId]>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitMapError {
    #[error("the runs must cover units 0-{last} in order without gaps; unit {at} is missing or repeated", last = units - 1)]
    Gap { at: u32, units: u32 },
}

impl UnitMap {
    /// The dial-form two-zone map: `0..blue_units` blue, the rest green.
    pub fn dial(units: u32, blue_units: u32) -> UnitMap {
        let owners: Vec<ZoneId> =
            (0..units).map(|u| if u < blue_units { ZoneId::BLUE } else { ZoneId::GREEN }).collect();
        UnitMap { owners: owners.into() }
    }

    /// A map from its runs, which must cover `0..units` in order.
    pub fn from_runs(runs: &[Run], units: u32) -> Result<UnitMap, UnitMapError> {
        let mut owners = Vec::with_capacity(units as usize);
        for run in runs {
            if run.first != owners.len() as u32 || run.last < run.first || run.last >= units {
                return Err(UnitMapError::Gap { at: owners.len() as u32, units });
            }
            owners.extend(std::iter::repeat_n(run.zone, (run.last - run.first + 1) as usize));
        }
        if owners.len() as u32 != units {
            return Err(UnitMapError::Gap { at: owners.len() as u32, units });
        }
        Ok(UnitMap { owners: owners.into() })
    }

    pub fn units(&self) -> u32 {
        self.owners.len() as u32
    }

    #[inline]
    pub fn owner(&self, unit: u32) -> ZoneId {
        self.owners[unit as usize]
    }

    /// The owner of every unit, in unit order.
    pub fn owners(&self) -> &[ZoneId] {
        &self.owners
    }

    /// The map as runs of equal owners, in unit order.
    pub fn runs(&self) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for (u, &zone) in self.owners.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if run.zone == zone => run.last = u as u32,
                _ => runs.push(Run { first: u as u32, last: u as u32, zone }),
            }
        }
        runs
    }

    /// How many units `zone` owns.
    pub fn count(&self, zone: ZoneId) -> u32 {
        self.owners.iter().filter(|&&z| z == zone).count() as u32
    }

    /// The units `zone` owns.
    pub fn units_of(&self, zone: ZoneId) -> impl Iterator<Item = u32> + '_ {
        self.owners.iter().enumerate().filter(move |(_, z)| **z == zone).map(|(u, _)| u as u32)
    }

    /// True when the map is the dial form: blue units first, then green, nothing else.
    pub fn is_dial_form(&self) -> bool {
        let b = self.count(ZoneId::BLUE);
        self.owners
            .iter()
            .enumerate()
            .all(|(u, &z)| z == if (u as u32) < b { ZoneId::BLUE } else { ZoneId::GREEN })
    }

    /// The map with `zone` owning `target` of the units shared by `zone` and `other`, moved in
    /// the dial's fixed order (see the module doc). Units of third zones never move. `target`
    /// must be at most the units the two own together.
    pub fn set_count(&self, zone: ZoneId, other: ZoneId, target: u32) -> UnitMap {
        let mut owners = self.owners.to_vec();
        let have = self.count(zone);
        if target > have {
            // Growing blue takes the lowest units of the other zone; growing green (zone 1
            // with blue as `other`) takes the highest blue units, the same order seen from
            // the other side.
            let mut need = target - have;
            let order: Box<dyn Iterator<Item = usize>> = if zone < other {
                Box::new(0..owners.len())
            } else {
                Box::new((0..owners.len()).rev())
            };
            for u in order {
                if need == 0 {
                    break;
                }
                if owners[u] == other {
                    owners[u] = zone;
                    need -= 1;
                }
            }
        } else if target < have {
            let mut give = have - target;
            let order: Box<dyn Iterator<Item = usize>> = if zone < other {
                Box::new((0..owners.len()).rev())
            } else {
                Box::new(0..owners.len())
            };
            for u in order {
                if give == 0 {
                    break;
                }
                if owners[u] == zone {
                    owners[u] = other;
                    give -= 1;
                }
            }
        }
        UnitMap { owners: owners.into() }
    }

    /// The map with every unit of `set` given to `zone`.
    pub fn moved(&self, set: &UnitSet, zone: ZoneId) -> UnitMap {
        let mut owners = self.owners.to_vec();
        for u in set.iter() {
            owners[u as usize] = zone;
        }
        UnitMap { owners: owners.into() }
    }

    /// Units whose owner differs between the two maps (same unit count).
    pub fn diff(&self, other: &UnitMap) -> Vec<u32> {
        self.owners
            .iter()
            .zip(other.owners.iter())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(u, _)| u as u32)
            .collect()
    }
}

/// Runs written as `0-49:0,50-99:1` (zone indices), for descriptions in the audit log.
pub fn describe_runs(runs: &[Run], lane: impl Fn(ZoneId) -> String) -> String {
    runs.iter()
        .map(|r| {
            let units = if r.first == r.last {
                r.first.to_string()
            } else {
                format!("{}-{}", r.first, r.last)
            };
            format!("{units} {}", lane(r.zone))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One move of `PUT /v1/units`: these units now belong to `zone`, in `domain` (`None`: the
/// default domain). Moves of several domains in one command are a linked change: one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitMove {
    pub units: UnitSet,
    pub zone: ZoneId,
    pub domain: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_sets_parse_and_refuse_what_they_should() {
        let set = UnitSet::parse("60, 25-49,70-72", 100).unwrap();
        assert_eq!(set.to_string(), "25-49,60,70-72");
        assert_eq!(set.len(), 29);
        assert_eq!(UnitSet::parse("", 100), Err(UnitSetError::Empty));
        assert_eq!(
            UnitSet::parse("25-100", 100),
            Err(UnitSetError::OutOfRange { unit: 100, units: 100 })
        );
        assert_eq!(UnitSet::parse("10-20,20-30", 100), Err(UnitSetError::Overlap(20)));
        assert_eq!(UnitSet::parse("9-3", 100), Err(UnitSetError::Backwards("9-3".into())));
        assert_eq!(UnitSet::parse("a-3", 100), Err(UnitSetError::Syntax("a-3".into())));
    }

    #[test]
    fn the_dial_on_a_dial_form_map_is_the_threshold_rule() {
        for a in [0, 1, 37, 50, 99, 100] {
            let map = UnitMap::dial(100, a);
            assert!(map.is_dial_form());
            for b in [0, 13, 50, 64, 100] {
                let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, b);
                assert_eq!(moved, UnitMap::dial(100, b), "{a} -> {b}");
                assert_eq!(
                    moved.set_count(ZoneId::BLUE, ZoneId::GREEN, a),
                    map,
                    "{a} -> {b} -> {a}"
                );
                // The same move seen from green's side.
                assert_eq!(map.set_count(ZoneId::GREEN, ZoneId::BLUE, 100 - b), moved);
            }
        }
    }

    #[test]
    fn runs_round_trip_and_third_zones_never_move_with_the_dial() {
        let map = UnitMap::dial(100, 50).moved(&UnitSet::parse("25-49", 100).unwrap(), ZoneId(2));
        let runs = map.runs();
        assert_eq!(runs.len(), 3);
        assert_eq!(UnitMap::from_runs(&runs, 100).unwrap(), map);
        assert!(UnitMap::from_runs(&runs[1..], 100).is_err());
        let dialled = map.set_count(ZoneId::BLUE, ZoneId::GREEN, 10);
        assert_eq!(dialled.count(ZoneId(2)), 25);
        assert_eq!(dialled.count(ZoneId::BLUE), 10);
        assert_eq!(map.diff(&dialled), (10..25).collect::<Vec<_>>());
    }
}
