//! MQ lane maths: halves, lag sums, and the assignment and grant properties (property tests).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use tidegate_core::{
    Assignment, AssignmentInput, LaneConfig, LaneError, LaneMember, ZoneFlags, ZoneId, Zones,
    assign, counterpart, grant, half_lags, partition_lag,
};

fn zones() -> Zones {
    Zones::default() // blue in az-b, green in az-a
}

#[test]
fn odd_and_degenerate_partition_counts_are_refused_with_a_reason() {
    assert_eq!(LaneConfig::new(7), Err(LaneError::OddPartitions(7)));
    let message = LaneConfig::new(7).unwrap_err().to_string();
    assert!(message.contains("even") && message.contains('7'), "{message}");
    assert_eq!(LaneConfig::new(0), Err(LaneError::TooFewPartitions(0)));
    assert_eq!(LaneConfig::new(1), Err(LaneError::TooFewPartitions(1)));
    assert!(matches!(LaneConfig::new(20_000), Err(LaneError::TooManyPartitions(20_000))));
    assert_eq!(LaneConfig::new(2).unwrap().partitions(), 2);
}

#[test]
fn halves_are_blue_first_then_green() {
    let lane = LaneConfig::new(8).unwrap();
    assert_eq!(lane.half(ZoneId::BLUE), 0..4);
    assert_eq!(lane.half(ZoneId::GREEN), 4..8);
    assert_eq!(lane.color_of(3), Ok(ZoneId::BLUE));
    assert_eq!(lane.color_of(4), Ok(ZoneId::GREEN));
    assert_eq!(lane.color_of(8), Err(LaneError::NoSuchPartition { partition: 8, partitions: 8 }));
}

#[test]
fn lag_is_high_watermark_minus_committed_and_never_negative() {
    assert_eq!(partition_lag(0, 100, Some(40)), 60);
    assert_eq!(partition_lag(0, 100, Some(100)), 0);
    // Never committed: everything retained counts.
    assert_eq!(partition_lag(10, 100, None), 90);
    // Committed before the retention horizon: only what is still there counts.
    assert_eq!(partition_lag(50, 100, Some(20)), 50);
    // A committed offset past the high watermark (a truncated log) is no lag, not a negative one.
    assert_eq!(partition_lag(0, 100, Some(120)), 0);
    let lane = LaneConfig::new(4).unwrap();
    assert_eq!(half_lags(lane, [(0, 5), (1, 7), (2, 1), (3, 0), (9, 1000)]), [12, 1]);
}

fn member(id: &str, zone: &str, alive: bool) -> LaneMember {
    LaneMember { id: id.into(), zone: zone.into(), alive }
}

fn owned_by(assignment: &Assignment, member: &str) -> Vec<u32> {
    assignment.get(member).map(|s| s.iter().copied().collect()).unwrap_or_default()
}

#[test]
fn each_half_is_spread_over_its_own_zone() {
    let zones = zones();
    let members = [
        member("b1", "az-b", true),
        member("b2", "az-b", true),
        member("a1", "az-a", true),
        member("a2", "az-a", true),
        member("a3", "az-a", true),
    ];
    let input = AssignmentInput {
        lane: LaneConfig::new(8).unwrap(),
        zones: &zones,
        members: &members,
        flags: vec![ZoneFlags::default(); 2],
    };
    let a = assign(&input);
    assert_eq!(owned_by(&a, "b1"), vec![0, 1]);
    assert_eq!(owned_by(&a, "b2"), vec![2, 3]);
    assert_eq!(owned_by(&a, "a1"), vec![4, 5]);
    assert_eq!(owned_by(&a, "a2"), vec![6]);
    assert_eq!(owned_by(&a, "a3"), vec![7]);
}

#[test]
fn a_drained_empty_zone_gets_nothing_and_its_half_goes_across() {
    let zones = zones();
    let members = [member("b1", "az-b", true), member("a1", "az-a", true)];
    let mut flags = [ZoneFlags::default(); 2];
    flags[ZoneId::BLUE.index()].drained_empty = true;
    let input = AssignmentInput {
        lane: LaneConfig::new(4).unwrap(),
        zones: &zones,
        members: &members,
        flags: flags.to_vec(),
    };
    let a = assign(&input);
    assert_eq!(owned_by(&a, "b1"), Vec::<u32>::new());
    assert_eq!(owned_by(&a, "a1"), vec![0, 1, 2, 3]);
    assert!(a.contains_key("b1"), "live members are listed even with nothing to do");
}

#[test]
fn a_dead_zone_hands_its_half_to_the_other_zone() {
    let zones = zones();
    let members = [member("b1", "az-b", false), member("a1", "az-a", true)];
    let input = AssignmentInput {
        lane: LaneConfig::new(4).unwrap(),
        zones: &zones,
        members: &members,
        flags: vec![ZoneFlags { drained_empty: false, down: true }, ZoneFlags::default()],
    };
    let a = assign(&input);
    assert!(!a.contains_key("b1"), "dead members get nothing and are not listed");
    assert_eq!(owned_by(&a, "a1"), vec![0, 1, 2, 3]);
}

#[test]
fn grant_waits_for_the_holder_to_release() {
    let mut target = Assignment::new();
    target.insert("a".into(), BTreeSet::from([0, 1]));
    target.insert("b".into(), BTreeSet::from([2, 3]));
    let mut holding = BTreeMap::new();
    holding.insert("a".to_owned(), BTreeSet::from([0, 1, 2]));
    let granted = grant(&target, &holding);
    assert_eq!(granted["a"], BTreeSet::from([0, 1]));
    assert_eq!(granted["b"], BTreeSet::from([3]), "2 is still held by a");
    holding.insert("a".to_owned(), BTreeSet::from([0, 1]));
    assert_eq!(grant(&target, &holding), target);
}

// ---- properties ------------------------------------------------------------------------------

fn arb_members() -> impl Strategy<Value = Vec<LaneMember>> {
    prop::collection::vec((0u8..12, prop::bool::ANY, prop::bool::weighted(0.8)), 0..12).prop_map(
        |raw| {
            let mut seen = BTreeSet::new();
            raw.into_iter()
                .filter(|(id, _, _)| seen.insert(*id))
                .map(|(id, in_b, alive)| LaneMember {
                    id: format!("m{id:02}"),
                    zone: if in_b { "az-b" } else { "az-a" }.into(),
                    alive,
                })
                .collect()
        },
    )
}

fn arb_flags() -> impl Strategy<Value = [ZoneFlags; 2]> {
    prop::array::uniform2((prop::bool::ANY, prop::bool::ANY))
        .prop_map(|f| f.map(|(drained_empty, down)| ZoneFlags { drained_empty, down }))
}

fn arb_lane() -> impl Strategy<Value = LaneConfig> {
    (1u32..=32).prop_map(|half| LaneConfig::new(half * 2).unwrap())
}

fn owners_of(a: &Assignment) -> BTreeMap<u32, Vec<String>> {
    let mut owners: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (member, partitions) in a {
        for p in partitions {
            owners.entry(*p).or_default().push(member.clone());
        }
    }
    owners
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_partition_is_assigned_exactly_once_when_anyone_is_alive(
        lane in arb_lane(), members in arb_members(), flags in arb_flags()
    ) {
        let zones = zones();
        let a = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        let owners = owners_of(&a);
        if members.iter().any(|m| m.alive) {
            prop_assert_eq!(owners.len() as u32, lane.partitions());
            for (p, who) in &owners {
                prop_assert!(*p < lane.partitions());
                prop_assert_eq!(who.len(), 1, "partition {} owned by {:?}", p, who);
            }
        } else {
            prop_assert!(owners.is_empty());
        }
        // Only live members ever own anything, and every live member is listed.
        for m in &members {
            prop_assert_eq!(a.contains_key(&m.id), m.alive);
        }
    }

    #[test]
    fn nothing_moves_when_nothing_changed(
        lane in arb_lane(), members in arb_members(), flags in arb_flags(), seed in any::<u64>()
    ) {
        let zones = zones();
        let first = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        // Same input in another order: the registration order must not matter.
        let mut shuffled = members.clone();
        let n = shuffled.len();
        if n > 1 {
            shuffled.rotate_left((seed as usize) % n);
            shuffled.swap(0, (seed as usize / 7) % n);
        }
        let again = assign(&AssignmentInput { lane, zones: &zones, members: &shuffled, flags: flags.to_vec() });
        prop_assert_eq!(first, again);
    }

    #[test]
    fn a_serving_zone_keeps_its_half_and_shares_it_evenly(
        lane in arb_lane(), members in arb_members(), flags in arb_flags()
    ) {
        let zones = zones();
        let a = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        for color in [ZoneId::BLUE, ZoneId::GREEN] {
            let zone = zones.zone_of(color);
            let f = flags[color.index()];
            let live: Vec<&LaneMember> =
                members.iter().filter(|m| m.alive && m.zone == zone).collect();
            if f.drained_empty || f.down || live.is_empty() {
                continue;
            }
            let mut counts = Vec::new();
            for m in &live {
                let mine = &a[&m.id];
                counts.push(mine.iter().filter(|p| lane.half(color).contains(*p)).count());
            }
            prop_assert_eq!(counts.iter().sum::<usize>() as u32, lane.half_size());
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "uneven spread {:?}", counts);
        }
    }

    #[test]
    fn drained_empty_zones_get_nothing_while_the_other_zone_can_consume(
        lane in arb_lane(), members in arb_members(), flags in arb_flags()
    ) {
        let zones = zones();
        let a = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        for color in [ZoneId::BLUE, ZoneId::GREEN] {
            let other = zones.zone_of(counterpart(color));
            let other_flags = flags[counterpart(color).index()];
            let other_can = !other_flags.down
                && !other_flags.drained_empty
                && members.iter().any(|m| m.alive && m.zone == other);
            if flags[color.index()].drained_empty && other_can {
                for m in members.iter().filter(|m| m.alive && m.zone == zones.zone_of(color)) {
                    prop_assert!(a[&m.id].is_empty(), "{} in a drained zone owns {:?}", m.id, a[&m.id]);
                }
            }
        }
    }

    #[test]
    fn a_zone_without_live_members_has_its_half_consumed_by_the_other(
        lane in arb_lane(), members in arb_members()
    ) {
        let zones = zones();
        // The service sets `down` exactly when a zone has no live member.
        let flags = [ZoneId::BLUE, ZoneId::GREEN].map(|c| ZoneFlags {
            drained_empty: false,
            down: !members.iter().any(|m| m.alive && m.zone == zones.zone_of(c)),
        });
        let a = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        for color in [ZoneId::BLUE, ZoneId::GREEN] {
            if flags[color.index()].down && !flags[counterpart(color).index()].down {
                let owners = owners_of(&a);
                for p in lane.half(color) {
                    let owner = &owners[&p][0];
                    let m = members.iter().find(|m| &m.id == owner).unwrap();
                    prop_assert_eq!(&m.zone, zones.zone_of(counterpart(color)));
                }
            }
        }
    }

    #[test]
    fn membership_changes_in_one_zone_do_not_move_the_other_half(
        lane in arb_lane(), members in arb_members(), newcomer in 20u8..30, in_b in any::<bool>()
    ) {
        let zones = zones();
        let flags = [ZoneFlags::default(); 2];
        let before = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        let zone = if in_b { "az-b" } else { "az-a" };
        let mut more = members.clone();
        more.push(member(&format!("m{newcomer}"), zone, true));
        let after = assign(&AssignmentInput { lane, zones: &zones, members: &more, flags: flags.to_vec() });
        let other_color = counterpart(zones.color_in(zone).unwrap());
        let other_zone = zones.zone_of(other_color);
        // Only meaningful when the other zone consumes its own half both times.
        if members.iter().any(|m| m.alive && m.zone == other_zone)
            && members.iter().any(|m| m.alive && m.zone == zone)
        {
            let (b, a) = (owners_of(&before), owners_of(&after));
            for p in lane.half(other_color) {
                prop_assert_eq!(&b[&p], &a[&p], "partition {} moved", p);
            }
        }
    }

    #[test]
    fn grants_are_exclusive_and_never_exceed_the_target(
        lane in arb_lane(), members in arb_members(), flags in arb_flags(),
        claims in prop::collection::vec((0u8..12, 0u32..64), 0..40)
    ) {
        let zones = zones();
        let target = assign(&AssignmentInput { lane, zones: &zones, members: &members, flags: flags.to_vec() });
        let mut holding: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for (id, p) in claims {
            holding.entry(format!("m{id:02}")).or_default().insert(p % lane.partitions());
        }
        let granted = grant(&target, &holding);
        for (member, partitions) in &granted {
            prop_assert!(partitions.is_subset(&target[member]));
            for p in partitions {
                for (holder, held) in &holding {
                    prop_assert!(holder == member || !held.contains(p),
                        "{} granted {} while {} holds it", member, p, holder);
                }
            }
        }
        let owners = owners_of(&granted);
        prop_assert!(owners.values().all(|who| who.len() == 1));
        // With nothing held elsewhere, the grant is the target.
        prop_assert_eq!(grant(&target, &BTreeMap::new()), target);
    }
}
