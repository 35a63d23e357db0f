//! Evacuation and capacity in virtual time: fixture scenarios plus the projection maths.

use serde_json::Value;
use tidegate_core::{
    Audit, Capacity, CapacityInputs, Command, DrainAction, DrainMode, DrainPlan, Envelope, Genesis,
    Guard, Inputs, OnBreach, Reading, State, StepConvergence, UnitMode, UnitScheme, Verdict,
    ZoneLoad, Zones, judge,
};

fn apply(state: &State, at_ms: u64, by: &str, command: Command) -> State {
    let env = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: by.into(), at_ms, reason: "test".into() },
    };
    state.apply(&env).expect("applies").map(|(s, _)| s).unwrap_or_else(|| state.clone())
}

fn reading(rate: &Value, requests: u64) -> Reading {
    match rate.as_f64() {
        Some(error_rate) => Reading::Known { error_rate, requests },
        None => Reading::Unknown { why: "no data".into() },
    }
}

fn rps(value: &Value) -> Result<f64, String> {
    value.as_f64().ok_or_else(|| "no outcomes".to_owned())
}

fn load(zone: &str, rps: f64, capacity: Capacity) -> ZoneLoad {
    ZoneLoad { zone: zone.into(), load_rps: Ok(rps), capacity, load_note: None }
}

#[test]
fn fixture_scenarios() {
    let doc: Value =
        serde_json::from_str(include_str!("fixtures/evacuation_scenarios.json")).unwrap();
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 10);
    for sc in scenarios {
        let name = sc["name"].as_str().unwrap();
        let g = &sc["guard"];
        let guard = Guard {
            max_error_rate: g["max_error_rate"].as_f64().unwrap(),
            min_requests: g["min_requests"].as_u64().unwrap(),
            breaches: g["breaches"].as_u64().unwrap() as u32,
            on_breach: if g["on_breach"] == "pause" { OnBreach::Pause } else { OnBreach::Rollback },
        };
        let zones = Zones::default();
        let zone = sc["zone"].as_str().unwrap();
        let color = zones.color_in(zone).unwrap();
        let target_zone = sc["target"].as_u64().unwrap() as u32;
        let plan = DrainPlan {
            zone: zone.into(),
            color,
            target_blue_units: if zone == "az-b" { target_zone } else { 100 - target_zone },
            step_units: sc["step"].as_u64().unwrap() as u32,
            interval_ms: sc["interval"].as_u64().unwrap(),
            guard,
            mode: DrainMode::parse(sc["mode"].as_str().unwrap()).unwrap(),
            domain: None,
            freeze_ms: None,
            receivers: None,
        };
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let blue_units = sc["start_blue"].as_u64().unwrap() as u32;
        let genesis = State::genesis(Genesis { scheme, blue_units }, zones.clone()).unwrap();
        let mut s = apply(&genesis, 0, "alice", Command::StartDrain { plan });
        let capacity = match &sc["capacity"]["receiving"] {
            Value::Null => Capacity::Unchecked,
            Value::String(_) => Capacity::Unknown { why: "query failed".into() },
            v => Capacity::Rps(v.as_f64().unwrap()),
        };
        let headroom = sc["capacity"]["headroom"].as_f64().unwrap_or(0.0);
        for (i, check) in sc["checks"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name}, check {i}");
            let drain = s.active_drain().expect("an active drain").clone();
            let requests = check["requests"].as_u64().unwrap();
            let receiving_zone = s.table().zone_of(drain.receiving_color()).to_owned();
            let capacity_inputs = check.get("draining_rps").map(|d| CapacityInputs {
                units: 100,
                draining: ZoneLoad {
                    zone: zone.into(),
                    load_rps: rps(d),
                    capacity: Capacity::Unchecked,
                    load_note: None,
                },
                receiving: ZoneLoad {
                    zone: receiving_zone.clone(),
                    load_rps: rps(&check["receiving_rps"]),
                    capacity: capacity.clone(),
                    load_note: None,
                },
                headroom,
            });
            let inputs = Inputs {
                blue_units: s.table().blue_units(),
                now_ms: check["t"].as_u64().unwrap(),
                receiving_zone: &receiving_zone,
                draining: &reading(&check["draining"], requests),
                receiving: &reading(&check["receiving"], requests),
                convergence: &StepConvergence::Disabled,
                backlog: Some(0),
                capacity: capacity_inputs.as_ref(),
            };
            let runner = format!("drain:{}", drain.id);
            let now = inputs.now_ms;
            match drain.decide(&inputs) {
                None => {}
                Some(DrainAction::Step { blue_units }) => {
                    s = apply(&s, now, &runner, Command::DrainStep { drain: drain.id, blue_units })
                }
                Some(DrainAction::Hold { breach, reason, .. }) => {
                    s = apply(
                        &s,
                        now,
                        &runner,
                        Command::DrainHold { drain: drain.id, breach, reason },
                    )
                }
                Some(DrainAction::Complete) => {
                    s = apply(&s, now, &runner, Command::CompleteDrain { drain: drain.id })
                }
                Some(DrainAction::Pause { .. }) => panic!("{at}: no convergence gate here"),
                Some(other) => panic!("{at}: evacuations here do not freeze: {other:?}"),
            }
            let latest = s.drains().next_back().unwrap();
            assert_eq!(u64::from(s.table().blue_units()), check["blue"].as_u64().unwrap(), "{at}");
            assert_eq!(latest.state_name(), check["state"].as_str().unwrap(), "{at}");
            if let Some(part) = check.get("hold_contains").and_then(Value::as_str) {
                let hold = latest.hold_reason.as_deref().unwrap_or("");
                assert!(hold.contains(part), "{at}: hold reason `{hold}` lacks `{part}`");
            }
        }
    }
}

#[test]
fn load_moves_with_the_share_of_users_moved() {
    // az-b serves 40 units at 800 rps (20 rps per unit); moving 10 of them adds 200 rps.
    let source = load("az-b", 800.0, Capacity::Unchecked);
    let receiving = load("az-a", 300.0, Capacity::Rps(1000.0));
    let Verdict::Fits(p) = judge(10, 40, 60, &source, &receiving, 0.2) else { panic!() };
    assert_eq!((p.current_rps, p.projected_rps, p.allowed_rps), (300.0, 500.0, 800.0));
    assert!(!p.estimated);
    // Moving all 40 adds all 800 rps: over 800 allowed.
    let verdict = judge(40, 40, 60, &source, &receiving, 0.2);
    assert!(verdict.blocks());
    let Verdict::Exceeds(p) = &verdict else { panic!() };
    assert_eq!(p.projected_rps, 1100.0);
    assert!(verdict.explain().contains("1100 rps"), "{}", verdict.explain());
    assert!(verdict.explain().contains("800 rps"), "{}", verdict.explain());
}

#[test]
fn projection_is_monotone_in_the_units_moved() {
    let source = load("az-b", 1234.0, Capacity::Unchecked);
    let receiving = load("az-a", 321.0, Capacity::Rps(5000.0));
    let mut last = 0.0;
    for moved in 0..=70 {
        let (Verdict::Fits(p) | Verdict::Exceeds(p)) =
            judge(moved, 70, 30, &source, &receiving, 0.1)
        else {
            panic!("known inputs give a projection")
        };
        assert!(p.projected_rps >= last, "moved {moved}");
        last = p.projected_rps;
    }
    assert!((last - 1555.0).abs() < 1e-9, "moving every unit moves all of the load: {last}");
}

#[test]
fn unknowns_block_and_no_capacity_is_not_checked() {
    let known = load("az-b", 100.0, Capacity::Unchecked);
    let blind = ZoneLoad {
        zone: "az-a".into(),
        load_rps: Err("no outcomes".into()),
        capacity: Capacity::Rps(1e9),
        load_note: None,
    };
    assert!(matches!(judge(1, 50, 50, &known, &blind, 0.0), Verdict::Unknown { .. }));
    let unknown_cap = load("az-a", 1.0, Capacity::Unknown { why: "empty result".into() });
    assert!(judge(1, 50, 50, &known, &unknown_cap, 0.0).blocks());
    let unchecked = load("az-a", 1e12, Capacity::Unchecked);
    assert_eq!(judge(50, 50, 50, &known, &unchecked, 0.0), Verdict::Unchecked);
    // Both loads unknown and nobody in the receiving zone: nothing to estimate from.
    let blind_source = ZoneLoad {
        zone: "az-b".into(),
        load_rps: Err("down".into()),
        capacity: Capacity::Unchecked,
        load_note: None,
    };
    let empty = load("az-a", 0.0, Capacity::Rps(10.0));
    assert!(matches!(judge(10, 100, 0, &blind_source, &empty, 0.0), Verdict::Unknown { .. }));
}

/// Issue 47: the receivers of an evacuation that names none, a row per case:
/// (candidates as `name=state`, chosen, skipped names). States: `ok`, `fail` (12 % errors),
/// `unknown`, `draining`.
#[test]
fn receivers_skip_failing_draining_and_unknown_beside_a_healthy_zone() {
    use tidegate_core::{ReceiverHealth, choose_receivers};
    let rows: &[(&str, &str, &str)] = &[
        ("a=ok b=ok", "a b", ""),
        ("a=ok b=fail", "a", "b"),
        ("a=ok b=unknown", "a", "b"),
        ("a=unknown b=unknown", "a b", ""),
        ("a=unknown b=fail", "a", "b"),
        ("a=ok b=draining c=unknown", "a", "b c"),
        ("a=fail b=draining", "", "a b"),
        ("a=draining b=unknown", "b", "a"),
    ];
    for (candidates, chosen, skipped) in rows {
        let list: Vec<(usize, String, ReceiverHealth)> = candidates
            .split(' ')
            .enumerate()
            .map(|(i, c)| {
                let (name, state) = c.split_once('=').unwrap();
                let health = match state {
                    "ok" => ReceiverHealth::Healthy,
                    "fail" => ReceiverHealth::Failing { error_rate: 0.12 },
                    "unknown" => ReceiverHealth::Unknown { why: "no outcomes".into() },
                    "draining" => ReceiverHealth::Draining,
                    other => panic!("{other}"),
                };
                (i, name.to_owned(), health)
            })
            .collect();
        let (got, left_out) = choose_receivers(&list, 0.05);
        let names =
            |ids: Vec<usize>| ids.iter().map(|i| list[*i].1.clone()).collect::<Vec<_>>().join(" ");
        assert_eq!(names(got), *chosen, "{candidates}");
        let out: Vec<usize> = left_out.iter().map(|(i, _)| *i).collect();
        assert_eq!(names(out), *skipped, "{candidates}");
        for (i, why) in &left_out {
            assert!(why.starts_with(&format!("{}: ", list[*i].1)), "{why}");
        }
    }
}
