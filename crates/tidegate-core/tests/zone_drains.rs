//! Step-by-step drains of one zone among N (issue 22), in the pure core: fixture rows in
//! `tests/fixtures/zone_drains.json` (receivers named or spread by headroom, the guard's holds
//! on health and capacity, the refusals), and properties: each step moves exactly the source's
//! next slice, lowest units first, and nothing else; the drain ends with the source empty after
//! `ceil(units / step)` steps; and which units leave in which step does not depend on how the
//! receivers' room splits them.

use proptest::prelude::*;
use serde_json::Value;
use tidegate_core::{
    Capacity, DrainMode, Guard, OnBreach, Reading, ReceiverInputs, Receivers, Run, StepInputs,
    UnitMap, UnitMove, ZoneClass, ZoneId, ZoneLoad, ZoneSpec, ZoneStep, Zones, decide_zone_step,
    receiving_zones,
};

const UNITS: u32 = 100;
const GUARD: Guard =
    Guard { max_error_rate: 0.05, min_requests: 100, breaches: 3, on_breach: OnBreach::Pause };
const HEADROOM: f64 = 0.1;

fn zones() -> Zones {
    Zones::from_specs(vec![
        ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
        ZoneSpec::new("az-c", "red", ZoneClass::Rzone),
        ZoneSpec::new("az-d", "yellow", ZoneClass::Rzone),
    ])
    .unwrap()
}

/// A lane as the core sees it; an unknown lane is an index the table does not have.
fn lane(zones: &Zones, lane: &str) -> ZoneId {
    zones.by_lane(lane).unwrap_or(ZoneId(99))
}

fn parse_map(zones: &Zones, text: &str) -> UnitMap {
    let runs: Vec<Run> = text
        .split(',')
        .map(|run| {
            let (range, l) = run.split_once(':').unwrap();
            let (first, last) = range.split_once('-').unwrap();
            Run { first: first.parse().unwrap(), last: last.parse().unwrap(), zone: lane(zones, l) }
        })
        .collect();
    UnitMap::from_runs(&runs, UNITS).unwrap()
}

fn moves_text(zones: &Zones, moves: &[UnitMove]) -> String {
    moves
        .iter()
        .map(|m| format!("{}:{}", m.units, zones.lane(m.zone)))
        .collect::<Vec<_>>()
        .join(";")
}

fn apply(map: &UnitMap, moves: &[UnitMove]) -> UnitMap {
    moves.iter().fold(map.clone(), |map, m| map.moved(&m.units, m.zone))
}

#[test]
fn zone_drain_rows() {
    let fixture: Value = serde_json::from_str(include_str!("fixtures/zone_drains.json")).unwrap();
    let zones = zones();
    for case in fixture["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let mut map = parse_map(&zones, case["map"].as_str().unwrap());
        let source = lane(&zones, case["source"].as_str().unwrap());
        let receivers = match case["to"].as_array() {
            Some(to) => {
                Receivers::Named(to.iter().map(|l| lane(&zones, l.as_str().unwrap())).collect())
            }
            None => Receivers::Spread,
        };
        let step = case["step"].as_u64().unwrap() as u32;
        let listed = receiving_zones(&zones, source, &receivers, step);
        if let Some(error) = case["error"].as_str() {
            let got = listed.expect_err(name).to_string();
            assert!(got.contains(error), "{name}: {got}");
            continue;
        }
        let listed = listed.expect(name);
        let load = |z: ZoneId| -> Option<ZoneLoad> {
            let l = &case["loads"][zones.lane(z)];
            l.as_array().map(|l| ZoneLoad {
                zone: zones.zone_of(z).to_owned(),
                load_rps: Ok(l[0].as_f64().unwrap()),
                capacity: Capacity::Rps(l[1].as_f64().unwrap()),
                load_note: None,
            })
        };
        let reading = |z: ZoneId| -> Reading {
            match &case["health"][zones.lane(z)] {
                Value::Array(h) => Reading::Known {
                    error_rate: h[0].as_f64().unwrap(),
                    requests: h[1].as_u64().unwrap(),
                },
                Value::String(_) => Reading::Unknown { why: "no samples".into() },
                _ => Reading::Known { error_rate: 0.0, requests: 1000 },
            }
        };
        let mode = match case["mode"].as_str() {
            Some("evacuate") => DrainMode::Evacuate,
            _ => DrainMode::Maintenance,
        };
        let loads: Vec<Option<ZoneLoad>> = listed.iter().map(|z| load(*z)).collect();
        let readings: Vec<Reading> = listed.iter().map(|z| reading(*z)).collect();
        let receiving: Vec<ReceiverInputs> = listed
            .iter()
            .enumerate()
            .map(|(i, z)| ReceiverInputs {
                zone: *z,
                name: zones.zone_of(*z),
                reading: &readings[i],
                load: loads[i].as_ref(),
            })
            .collect();
        let (source_reading, source_load) = (reading(source), load(source));
        let mut steps = Vec::new();
        loop {
            let decision = decide_zone_step(&StepInputs {
                map: &map,
                domain: None,
                source,
                source_name: zones.zone_of(source),
                source_reading: &source_reading,
                source_load: source_load.as_ref(),
                receivers: &receiving,
                step_units: step,
                mode,
                guard: &GUARD,
                consecutive_breaches: 0,
                headroom: HEADROOM,
            });
            match decision {
                ZoneStep::Arrived => break,
                ZoneStep::Move { moves, verdicts } => {
                    assert!(verdicts.iter().all(|(_, v)| !v.blocks()), "{name}: {verdicts:?}");
                    steps.push(moves_text(&zones, &moves));
                    map = apply(&map, &moves);
                }
                ZoneStep::Hold { breach, zone, reason } => {
                    let hold = case["hold"].as_str().unwrap_or_else(|| panic!("{name}: {reason}"));
                    assert!(reason.contains(hold), "{name}: {reason}");
                    assert_eq!(breach, case["breach"].as_bool().unwrap(), "{name}");
                    assert_eq!(zone, case["zone"].as_str().unwrap(), "{name}");
                    assert!(steps.is_empty(), "{name}: held after {steps:?}");
                    break;
                }
            }
        }
        if case.get("hold").is_some() {
            continue;
        }
        let expected: Vec<&str> =
            case["steps"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert_eq!(steps, expected, "{name}");
        assert_eq!(map.count(source), 0, "{name}: the source is empty at the end");
    }
}

/// Drains `source` to every other zone with the given rooms (loads against a 5000 rps
/// capacity; `None`: no capacity), no capacity on the source (so nothing holds), and returns
/// each step's moves.
fn drain_all(
    map: &UnitMap,
    source: ZoneId,
    step: u32,
    rooms: &[Option<f64>],
) -> Vec<Vec<UnitMove>> {
    let zones = zones();
    let listed = receiving_zones(&zones, source, &Receivers::Spread, step).unwrap();
    let healthy = Reading::Known { error_rate: 0.0, requests: 1000 };
    let loads: Vec<Option<ZoneLoad>> = listed
        .iter()
        .zip(rooms)
        .map(|(z, room)| {
            room.map(|room| ZoneLoad {
                zone: zones.zone_of(*z).to_owned(),
                load_rps: Ok(4500.0 - room),
                capacity: Capacity::Rps(5000.0),
                load_note: None,
            })
        })
        .collect();
    let receiving: Vec<ReceiverInputs> = listed
        .iter()
        .zip(&loads)
        .map(|(z, load)| ReceiverInputs {
            zone: *z,
            name: zones.zone_of(*z),
            reading: &healthy,
            load: load.as_ref(),
        })
        .collect();
    let mut map = map.clone();
    let mut steps = Vec::new();
    loop {
        match decide_zone_step(&StepInputs {
            map: &map,
            domain: None,
            source,
            source_name: zones.zone_of(source),
            source_reading: &healthy,
            source_load: None,
            receivers: &receiving,
            step_units: step,
            mode: DrainMode::Maintenance,
            guard: &GUARD,
            consecutive_breaches: 0,
            headroom: HEADROOM,
        }) {
            ZoneStep::Arrived => return steps,
            ZoneStep::Move { moves, .. } => {
                map = apply(&map, &moves);
                steps.push(moves);
            }
            hold => panic!("nothing should hold: {hold:?}"),
        }
    }
}

fn units_of(moves: &[UnitMove]) -> Vec<u32> {
    let mut units: Vec<u32> =
        moves.iter().flat_map(|m| m.units.iter().collect::<Vec<_>>()).collect();
    units.sort_unstable();
    units
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn each_step_moves_the_next_slice_and_nothing_else(
        owners in proptest::collection::vec(0u16..4, UNITS as usize),
        source in 0u16..4,
        step in 1u32..40,
        rooms in proptest::collection::vec(proptest::option::of(-500.0f64..4000.0), 3),
    ) {
        let zones = zones();
        let runs: Vec<Run> = owners
            .iter()
            .enumerate()
            .map(|(u, z)| Run { first: u as u32, last: u as u32, zone: ZoneId(*z) })
            .collect();
        let start = UnitMap::from_runs(&runs, UNITS).unwrap();
        let source = ZoneId(source);
        let owned: Vec<u32> = start.units_of(source).collect();
        let steps = drain_all(&start, source, step, &rooms);
        prop_assert_eq!(steps.len(), owned.len().div_ceil(step as usize));
        let mut map = start.clone();
        for (k, moves) in steps.iter().enumerate() {
            let slice = &owned[k * step as usize..((k + 1) * step as usize).min(owned.len())];
            prop_assert_eq!(units_of(moves), slice.to_vec(), "step {} moves the next slice", k);
            for m in moves {
                prop_assert!(m.zone != source && zones.get(m.zone).is_some());
            }
            let next = apply(&map, moves);
            prop_assert_eq!(map.diff(&next), slice.to_vec(), "nothing else changes owner");
            map = next;
        }
        prop_assert_eq!(map.count(source), 0);
        // The same units leave in the same steps, however the receivers' room splits them.
        let even = drain_all(&start, source, step, &[None, None, None]);
        let slices = |s: &[Vec<UnitMove>]| s.iter().map(|m| units_of(m)).collect::<Vec<_>>();
        prop_assert_eq!(slices(&steps), slices(&even));
        // And a drain run again from the same map is the same drain.
        prop_assert_eq!(drain_all(&start, source, step, &rooms), steps);
    }
}
