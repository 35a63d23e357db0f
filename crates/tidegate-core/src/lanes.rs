//! MQ lanes, the pure part: a topic's zone ranges, lag sums and who consumes which partition.
//!
//! A lane topic of a table with N zones has a multiple of N partitions P, cut into one
//! contiguous range per zone in index order: zone `z` owns `[z*P/N, (z+1)*P/N)`. With two zones
//! these are the halves of every earlier release: blue messages go to `[0, P/2)` and green ones
//! to `[P/2, P)`. Moving units moves message traffic as well as requests. The coordinator
//! spreads each range over the live consumers of its zone. [`assign`] is the
//! rule; [`grant`] makes handovers safe: a partition that a consumer still holds is not handed to
//! another one until the holder has committed and released it, or has been declared dead.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use super::zone::{ZoneId, Zones};

/// Most partitions a lane topic may have. Far above what one consumer group can use, low enough
/// that an assignment always fits in a response.
pub const MAX_LANE_PARTITIONS: u32 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    #[error(
        "a lane topic needs an even number of partitions (blue gets the first half, green the second), got {0}; add one partition"
    )]
    OddPartitions(u32),
    #[error(
        "a lane topic of {zones} zones needs a multiple of {zones} partitions (one equal range per zone), got {partitions}"
    )]
    NotMultiple { partitions: u32, zones: u32 },
    #[error("a lane topic needs at least 2 partitions (one per colour), got {0}")]
    TooFewPartitions(u32),
    #[error("a lane topic may have at most {MAX_LANE_PARTITIONS} partitions, got {0}")]
    TooManyPartitions(u32),
    #[error("partition {partition} is outside the topic's {partitions} partitions")]
    NoSuchPartition { partition: u32, partitions: u32 },
}

/// The shape of one lane topic: its partition count (a multiple of its zone count) and zones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneConfig {
    partitions: u32,
    zones: u32,
}

impl LaneConfig {
    /// A two-zone topic (blue and green halves).
    pub fn new(partitions: u32) -> Result<LaneConfig, LaneError> {
        LaneConfig::for_zones(partitions, 2)
    }

    /// A topic over `zones` zones (every zone of the table, retired ones included, so that
    /// retiring a zone never moves another zone's range).
    pub fn for_zones(partitions: u32, zones: u32) -> Result<LaneConfig, LaneError> {
        let zones = zones.max(2);
        if partitions < 2 {
            return Err(LaneError::TooFewPartitions(partitions));
        }
        if partitions > MAX_LANE_PARTITIONS {
            return Err(LaneError::TooManyPartitions(partitions));
        }
        if zones == 2 && !partitions.is_multiple_of(2) {
            return Err(LaneError::OddPartitions(partitions));
        }
        if !partitions.is_multiple_of(zones) {
            return Err(LaneError::NotMultiple { partitions, zones });
        }
        Ok(LaneConfig { partitions, zones })
    }

    /// How many zones the topic is cut for.
    pub fn zones(&self) -> u32 {
        self.zones
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Partitions per zone range (per half with two zones).
    pub fn half_size(&self) -> u32 {
        self.partitions / self.zones
    }

    /// The partitions of a zone's range: `[z*P/N, (z+1)*P/N)`; empty for a zone the topic was
    /// not cut for.
    pub fn half(&self, zone: ZoneId) -> Range<u32> {
        let size = self.half_size();
        let z = u32::from(zone.0);
        if z >= self.zones {
            return 0..0;
        }
        z * size..(z + 1) * size
    }

    /// The zone whose range holds `partition`.
    pub fn color_of(&self, partition: u32) -> Result<ZoneId, LaneError> {
        if partition >= self.partitions {
            return Err(LaneError::NoSuchPartition { partition, partitions: self.partitions });
        }
        Ok(ZoneId((partition / self.half_size()) as u16))
    }
}

/// Lag of one partition for a consumer group: messages written but not yet committed.
///
/// `committed` is `None` when the group never committed on the partition; then everything still
/// retained (from the low watermark on) counts as lag, because a new consumer starts there.
pub fn partition_lag(low: i64, high: i64, committed: Option<i64>) -> u64 {
    let from = committed.unwrap_or(low).max(low);
    u64::try_from(high.saturating_sub(from)).unwrap_or(0)
}

/// Per-partition lags summed per zone range, indexed by zone. Partitions outside the topic are
/// ignored.
pub fn half_lags(config: LaneConfig, lags: impl IntoIterator<Item = (u32, u64)>) -> Vec<u64> {
    let mut sums = vec![0u64; config.zones as usize];
    for (partition, lag) in lags {
        if let Ok(zone) = config.color_of(partition) {
            sums[zone.index()] = sums[zone.index()].saturating_add(lag);
        }
    }
    sums
}

/// A registered consumer as the assignment sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneMember {
    pub id: String,
    pub zone: String,
    /// False once the member missed its session timeout.
    pub alive: bool,
}

/// What the coordinator knows about a zone when it assigns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneFlags {
    /// The zone's share of users is 0 *and* its half's lag is zero: nothing is left for its
    /// consumers to do, so they get nothing.
    pub drained_empty: bool,
    /// The zone has no live consumer: its half must be consumed by the other zone.
    pub down: bool,
}

/// Everything [`assign`] looks at. Member order does not matter.
#[derive(Clone, Debug)]
pub struct AssignmentInput<'a> {
    pub lane: LaneConfig,
    pub zones: &'a Zones,
    pub members: &'a [LaneMember],
    /// Flags of every zone, indexed by zone (a missing entry counts as default flags).
    pub flags: Vec<ZoneFlags>,
}

/// Partitions per member ID. Every live member appears, possibly with no partitions.
pub type Assignment = BTreeMap<String, BTreeSet<u32>>;

/// Who consumes which partition.
///
/// For each zone's range, the owners are the first non-empty group of:
/// 1. the live members of the zone itself, unless it is drained-and-empty or down;
/// 2. the live members of the other zones that are neither drained-and-empty nor down;
/// 3. every live member.
///
/// The last step exists because "every partition has a consumer" wins over "a drained zone gets
/// nothing": a drained zone still receives stray messages (pinned users, producers on an old
/// table), and when it is the only zone with consumers left, they must be read. (Both zones
/// drained at once cannot come from one routing table; the rule still has an answer for it.) The half is then
/// cut into contiguous runs over the owners sorted by ID, so the result depends only on the
/// input and never moves a partition when nothing changed; owners get `n` or `n + 1` partitions.
pub fn assign(input: &AssignmentInput<'_>) -> Assignment {
    let mut assignment: Assignment =
        input.members.iter().filter(|m| m.alive).map(|m| (m.id.clone(), BTreeSet::new())).collect();
    let live_in = |zone: &str| -> Vec<&str> {
        let set: BTreeSet<&str> = input
            .members
            .iter()
            .filter(|m| m.alive && m.zone == zone)
            .map(|m| m.id.as_str())
            .collect();
        set.into_iter().collect()
    };
    let flags = |zone: ZoneId| input.flags.get(zone.index()).copied().unwrap_or_default();
    let usable = |zone: ZoneId| !flags(zone).drained_empty && !flags(zone).down;
    let cut_for: Vec<ZoneId> =
        input.zones.ids().filter(|z| u32::from(z.0) < input.lane.zones()).collect();
    for &color in &cut_for {
        let mut owners = Vec::new();
        if usable(color) {
            owners = live_in(input.zones.zone_of(color));
        }
        if owners.is_empty() {
            let mut others: Vec<&str> = cut_for
                .iter()
                .filter(|&&z| z != color && usable(z))
                .flat_map(|&z| live_in(input.zones.zone_of(z)))
                .collect();
            others.sort_unstable();
            owners = others;
        }
        if owners.is_empty() {
            owners = assignment.keys().map(String::as_str).collect();
        }
        if owners.is_empty() {
            continue;
        }
        let owners: Vec<String> = owners.into_iter().map(str::to_owned).collect();
        let half: Vec<u32> = input.lane.half(color).collect();
        let base = half.len() / owners.len();
        let extra = half.len() % owners.len();
        let mut partitions = half.into_iter();
        for (i, owner) in owners.iter().enumerate() {
            let take = base + usize::from(i < extra);
            let slot = assignment.entry(owner.clone()).or_default();
            slot.extend(partitions.by_ref().take(take));
        }
    }
    assignment
}

/// What the coordinator actually hands out, given the target assignment and what each member
/// reported it still holds.
///
/// A member is granted a partition of its target only when no *other* member holds it. A holder
/// releases a partition only after it stopped reading it and committed its offsets, so the next
/// owner starts exactly at the committed offset: no committed message is read twice and none is
/// skipped. `holding` must only contain live members: a dead member's claims are void (it cannot
/// commit any more), which is how a zone's half gets handed over after a session timeout.
pub fn grant(target: &Assignment, holding: &BTreeMap<String, BTreeSet<u32>>) -> Assignment {
    let mut held_by: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (member, partitions) in holding {
        for &p in partitions {
            held_by.entry(p).or_default().push(member);
        }
    }
    target
        .iter()
        .map(|(member, partitions)| {
            let mine = partitions
                .iter()
                .copied()
                .filter(|p| {
                    held_by.get(p).is_none_or(|holders| holders.iter().all(|h| *h == member))
                })
                .collect();
            (member.clone(), mine)
        })
        .collect()
}

/// What a lane authority that has just taken over may grant.
///
/// A new authority (another replica took the lane lease) starts with no members and adopts
/// the previous authority's members as their heartbeats arrive, each with the partitions it
/// says it holds. A partition no adopted member has claimed ("vouched") may still be read by a
/// member that has not reached the new authority yet; that member stops reading on its own
/// rule one session timeout after it last heard from the old authority, which was before this
/// one took over. So until `settled_at_ms` (the moment of taking over plus one session timeout)
/// only vouched partitions are granted; after it, everything `grant` allows. `None` means the
/// authority never changed hands (a single node).
pub fn hold_unvouched(
    granted: Assignment,
    vouched: &BTreeSet<u32>,
    now_ms: u64,
    settled_at_ms: Option<u64>,
) -> Assignment {
    if settled_at_ms.is_none_or(|settled| now_ms >= settled) {
        return granted;
    }
    granted
        .into_iter()
        .map(|(member, partitions)| {
            (member, partitions.into_iter().filter(|p| vouched.contains(p)).collect())
        })
        .collect()
}

/// Offsets of one partition for one consumer group, as read from Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub partition: u32,
    pub low: i64,
    pub high: i64,
    /// `None` when the group never committed on this partition.
    pub committed: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[u32]) -> BTreeSet<u32> {
        items.iter().copied().collect()
    }

    #[test]
    fn a_new_authority_grants_only_vouched_partitions_until_one_session_has_passed() {
        let granted: Assignment =
            [("a".to_owned(), set(&[0, 1])), ("b".to_owned(), set(&[2, 3]))].into();
        let vouched = set(&[1, 2]);
        // Taken over at 1000 with a 500 ms session: settled at 1500.
        let held = hold_unvouched(granted.clone(), &vouched, 1_499, Some(1_500));
        assert_eq!(held["a"], set(&[1]));
        assert_eq!(held["b"], set(&[2]));
        assert_eq!(hold_unvouched(granted.clone(), &vouched, 1_500, Some(1_500)), granted);
        assert_eq!(hold_unvouched(granted.clone(), &set(&[]), 0, None), granted);
        // Members stay in the answer, with nothing.
        assert_eq!(hold_unvouched(granted, &set(&[]), 0, Some(1))["a"], set(&[]));
    }

    #[test]
    fn an_adopted_claim_keeps_its_partition_and_blocks_others() {
        // The adopted member `a` reports partition 0; the new target gives 0 to `b`. `grant`
        // holds it back from `b` while `a` claims it, and the hold keeps unclaimed 1 back.
        let target: Assignment =
            [("a".to_owned(), set(&[])), ("b".to_owned(), set(&[0, 1]))].into();
        let claims: BTreeMap<String, BTreeSet<u32>> =
            [("a".to_owned(), set(&[0])), ("b".to_owned(), set(&[]))].into();
        let held = hold_unvouched(grant(&target, &claims), &set(&[0]), 10, Some(20));
        assert_eq!(held["b"], set(&[]));
        // Once `a` released 0 (still vouched: it was claimed), `b` gets it before settling.
        let claims: BTreeMap<String, BTreeSet<u32>> =
            [("a".to_owned(), set(&[])), ("b".to_owned(), set(&[]))].into();
        let held = hold_unvouched(grant(&target, &claims), &set(&[0]), 11, Some(20));
        assert_eq!(held["b"], set(&[0]));
    }
}
