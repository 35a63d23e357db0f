//! Fixture tables for the N-zone model (issue 22), a row per case in
//! `tests/fixtures/unit_moves.json`: unit-set moves on a three-zone table, the dial as the
//! two-zone special case, capacity per receiving zone, spreading an evacuation by headroom and the
//! lane ranges of an N-zone topic. Plus properties: stickiness and minimal movement of moves, and
//! per domain: each domain's dial moves only its own map, sticky, monotone and minimal, and two
//! domains at the same dial agree on every unit.

use proptest::prelude::*;
use serde_json::Value;
use tidegate_core::{
    Audit, Capacity, Command, Envelope, Gain, Genesis, LaneConfig, State, UnitMode, UnitMove,
    UnitScheme, UnitSet, Verdict, ZoneClass, ZoneId, ZoneLoad, ZoneSpec, Zones, judge_gains,
    spread_by_headroom,
};

fn fixture() -> Value {
    let text = include_str!("fixtures/unit_moves.json");
    serde_json::from_str(text).unwrap()
}

fn three() -> State {
    let zones = Zones::from_specs(vec![
        ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
        ZoneSpec::new("az-c", "red", ZoneClass::Rzone),
    ])
    .unwrap();
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap()
}

fn apply(state: &State, command: Command) -> Result<Option<State>, String> {
    let envelope = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: "test".into(), at_ms: 1, reason: "fixture".into() },
    };
    state.apply(&envelope).map(|o| o.map(|(s, _)| s)).map_err(|e| e.to_string())
}

fn map_text(state: &State) -> String {
    let table = state.table();
    table
        .map()
        .runs()
        .iter()
        .map(|r| format!("{}-{}:{}", r.first, r.last, table.lane(r.zone)))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn unit_move_rows() {
    for case in fixture()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let state = three();
        let zones = state.table().zones().clone();
        let moves: Result<Vec<UnitMove>, String> = case["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let units =
                    UnitSet::parse(m[0].as_str().unwrap(), 100).map_err(|e| e.to_string())?;
                let lane = m[1].as_str().unwrap();
                // An unknown lane reaches the core as an index the table does not have.
                let zone = zones.by_lane(lane).unwrap_or(ZoneId(99));
                Ok(UnitMove { units, zone, domain: None })
            })
            .collect();
        let result = moves.and_then(|moves| apply(&state, Command::MoveUnits { moves }));
        if let Some(error) = case["error"].as_str() {
            let got = result.expect_err(name);
            let expected = if error == "not a lane" { "zone index 99" } else { error };
            assert!(got.contains(expected), "{name}: {got}");
            continue;
        }
        let next = match result.expect(name) {
            Some(next) => next,
            None => {
                assert_eq!(case["unchanged"], true, "{name}: unexpectedly unchanged");
                state.clone()
            }
        };
        assert_eq!(map_text(&next), case["map"].as_str().unwrap(), "{name}");
        if let Some(dial) = case["dial"].as_u64() {
            // The dial needs the two colours alone: retire the third zone when it owns nothing.
            let two = if next.table().units_of(ZoneId(2)) == 0 {
                apply(&next, Command::RetireZone { zone: ZoneId(2) }).unwrap().unwrap()
            } else {
                next.clone()
            };
            let dialled =
                apply(&two, Command::SetBlueUnits { blue_units: dial as u32, domain: None });
            match case["dial_error"].as_str() {
                Some(e) => assert!(dialled.unwrap_err().contains(e), "{name}"),
                None => assert_eq!(
                    map_text(&dialled.unwrap().unwrap()),
                    case["dial_map"].as_str().unwrap(),
                    "{name}"
                ),
            }
        }
    }
}

#[test]
fn capacity_per_receiver_rows() {
    for case in fixture()["capacity"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let sources: Vec<(u32, u32, ZoneLoad)> = case["gains"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let load = ZoneLoad {
                    zone: format!("source-{i}"),
                    load_rps: Ok(g[2].as_f64().unwrap()),
                    capacity: Capacity::Unchecked,
                    load_note: None,
                };
                (g[0].as_u64().unwrap() as u32, g[1].as_u64().unwrap() as u32, load)
            })
            .collect();
        let gains: Vec<Gain<'_>> = sources
            .iter()
            .map(|(m, u, l)| Gain { moved_units: *m, source_units: *u, source: l })
            .collect();
        let receiving = ZoneLoad {
            zone: "receiver".into(),
            load_rps: Ok(case["receiving_rps"].as_f64().unwrap()),
            capacity: Capacity::Rps(case["capacity"].as_f64().unwrap()),
            load_note: None,
        };
        let verdict = judge_gains(
            &gains,
            case["receiving_units"].as_u64().unwrap() as u32,
            &receiving,
            case["headroom"].as_f64().unwrap(),
        );
        let (kind, p) = match &verdict {
            Verdict::Fits(p) => ("fits", p),
            Verdict::Exceeds(p) => ("exceeds", p),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(kind, case["verdict"].as_str().unwrap(), "{name}: {}", verdict.explain());
        assert!((p.projected_rps - case["projected"].as_f64().unwrap()).abs() < 1e-6, "{name}");
    }
}

#[test]
fn spread_rows() {
    for case in fixture()["spread"].as_array().unwrap() {
        let rooms: Vec<Option<f64>> =
            case["rooms"].as_array().unwrap().iter().map(Value::as_f64).collect();
        let counts = spread_by_headroom(case["units"].as_u64().unwrap() as u32, &rooms);
        let expected: Vec<u32> =
            case["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect();
        assert_eq!(counts, expected, "{case}");
    }
}

#[test]
fn lane_range_rows() {
    for case in fixture()["lanes"].as_array().unwrap() {
        let (p, z) =
            (case["partitions"].as_u64().unwrap() as u32, case["zones"].as_u64().unwrap() as u32);
        match (LaneConfig::for_zones(p, z), case["error"].as_str()) {
            (Err(e), Some(expected)) => assert!(e.to_string().contains(expected), "{case}: {e}"),
            (Ok(lane), None) => {
                let ranges: Vec<(u32, u32)> =
                    (0..z as u16).map(|i| lane.half(ZoneId(i))).map(|r| (r.start, r.end)).collect();
                let expected: Vec<(u32, u32)> = case["ranges"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| (r[0].as_u64().unwrap() as u32, r[1].as_u64().unwrap() as u32))
                    .collect();
                assert_eq!(ranges, expected, "{case}");
                for partition in 0..p {
                    let zone = lane.color_of(partition).unwrap();
                    assert!(lane.half(zone).contains(&partition), "{case} partition {partition}");
                }
            }
            (other, _) => panic!("{case}: {other:?}"),
        }
    }
}

proptest! {
    /// A move changes the owner of exactly the named units whose owner differs, and every user
    /// of every other unit keeps their zone (stickiness, minimal movement).
    #[test]
    fn a_move_flips_exactly_the_named_units(lo in 0u32..100, len in 1u32..40, lane in 0u16..3, first in 0u32..60) {
        let state = three();
        let start = apply(&state, Command::MoveUnits { moves: vec![UnitMove {
            units: UnitSet::from_ranges(vec![(first, first + 20)], 100).unwrap(), zone: ZoneId(2), domain: None }] })
            .unwrap().unwrap();
        let hi = (lo + len - 1).min(99);
        let set = UnitSet::from_ranges(vec![(lo, hi)], 100).unwrap();
        let next = apply(&start, Command::MoveUnits { moves: vec![UnitMove { units: set.clone(), zone: ZoneId(lane), domain: None }] })
            .unwrap().unwrap_or_else(|| start.clone());
        let changed = start.table().map().diff(next.table().map());
        let expected: Vec<u32> = (lo..=hi).filter(|u| start.table().map().owner(*u) != ZoneId(lane)).collect();
        prop_assert_eq!(changed, expected);
        for u in 0..100 {
            let want = if set.contains(u) { ZoneId(lane) } else { start.table().map().owner(u) };
            prop_assert_eq!(next.table().map().owner(u), want);
        }
    }

    /// Moving a set away and back restores the table (`a -> b -> a`).
    #[test]
    fn away_and_back_restores_the_map(lo in 0u32..90, len in 1u32..10) {
        let state = three();
        let set = UnitSet::from_ranges(vec![(lo, lo + len - 1)], 100).unwrap();
        let owner = state.table().map().owner(lo);
        prop_assume!((lo..lo + len).all(|u| state.table().map().owner(u) == owner));
        let away = apply(&state, Command::MoveUnits { moves: vec![UnitMove { units: set.clone(), zone: ZoneId(2), domain: None }] }).unwrap().unwrap();
        let back = apply(&away, Command::MoveUnits { moves: vec![UnitMove { units: set, zone: owner, domain: None }] }).unwrap().unwrap();
        prop_assert_eq!(back.table().map(), state.table().map());
    }

    /// Dials in two domains, in any order: a dial moves only its own domain's map (the other
    /// keeps every unit), monotonically and minimally (exactly |from - to| units change, all in
    /// the direction of the move), and whenever both domains stand at the same dial their maps
    /// are equal, so every user's zone agrees across them. A drain step obeys the same.
    #[test]
    fn each_domain_dials_alone_and_domains_at_one_dial_agree(
        moves in proptest::collection::vec((any::<bool>(), 0u32..=100), 1..12)
    ) {
        let zones = Zones::from_specs(vec![
            ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
            ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
        ])
        .unwrap();
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let mut state = State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap();
        state = apply(&state, Command::AddDomain { name: "search".into() }).unwrap().unwrap();
        for (named, to) in moves {
            let domain = named.then(|| "search".to_owned());
            let (own, other) = (domain.as_deref(), if named { None } else { Some("search") });
            let before = state.table().map_of(own).unwrap().clone();
            let other_before = state.table().map_of(other).unwrap().clone();
            let next = apply(&state, Command::SetBlueUnits { blue_units: to, domain: domain.clone() })
                .unwrap()
                .unwrap_or_else(|| state.clone());
            let after = next.table().map_of(own).unwrap();
            prop_assert_eq!(next.table().map_of(other).unwrap(), &other_before);
            let from = before.count(ZoneId::BLUE);
            let changed = before.diff(after);
            prop_assert_eq!(changed.len() as u32, from.abs_diff(to));
            let gaining = if to > from { ZoneId::BLUE } else { ZoneId::GREEN };
            prop_assert!(changed.iter().all(|u| after.owner(*u) == gaining));
            let (d, s) = (next.table().map_of(None).unwrap(), next.table().map_of(Some("search")).unwrap());
            if d.count(ZoneId::BLUE) == s.count(ZoneId::BLUE) {
                prop_assert_eq!(d, s);
            }
            state = next;
        }
        prop_assert_eq!(Command::SetBlueUnits { blue_units: 1, domain: Some("search".into()) }.format_level(), 3);
        prop_assert_eq!(Command::SetBlueUnits { blue_units: 1, domain: None }.format_level(), 1);
    }
}

/// A plan run started with `restores_maps` keeps every domain's map and a drill of a plan with
/// `move_units` steps is allowed; logged without it (as the release before wrote runs), the
/// same drill is refused on replay, exactly as that release refused it.
#[test]
fn a_run_that_restores_maps_keeps_them_and_an_older_record_is_refused_as_before() {
    use tidegate_core::{Plan, PlanMove, PlanStep};
    let plan = Plan {
        name: "give-az-c".into(),
        preconditions: Vec::new(),
        steps: vec![PlanStep::MoveUnits {
            moves: vec![PlanMove {
                units: UnitSet::parse("0-9", 100).unwrap(),
                zone: "az-c".into(),
                domain: None,
            }],
        }],
        rto_ms: 60_000,
        trigger: None,
        freeze_ms: None,
    };
    let s = apply(&three(), Command::PutPlan { plan }).unwrap().unwrap();
    let start = |restores_maps| Command::StartPlanRun {
        plan: "give-az-c".into(),
        revision: 1,
        drill_hold_ms: Some(1000),
        restores_maps,
    };
    let refused = apply(&s, start(false)).unwrap_err();
    assert!(refused.contains("restores_maps"), "{refused}");
    assert_eq!(start(false).format_level(), 1);
    assert_eq!(start(true).format_level(), 7);
    let s = apply(&s, start(true)).unwrap().unwrap();
    let run = s.active_run().unwrap();
    let maps = run.start_maps.as_ref().expect("the run keeps its start maps");
    assert_eq!(maps.keys().collect::<Vec<_>>(), ["default"]);
    assert_eq!(&maps["default"], s.table().map());
}
