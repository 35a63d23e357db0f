//! A zone drain among N as the state machine runs it (issue 22): started with receivers, stepped
//! by `Drain::decide_zone` and `ZoneDrainStep`, held by the guard, rolled back, refused when a
//! step is not the drain's next slice, and the same after a replay of the log and after a
//! snapshot.

use std::path::Path;

use tidegate::core::{
    Audit, Command, CommandError, Direction, Drain, DrainAction, DrainMode, DrainPlan, DrainStatus,
    Envelope, FreezeBarrier, Genesis, Guard, Inputs, OnBreach, Reading, ReceiverInputs, State,
    StepConvergence, UnitMode, UnitMove, UnitScheme, UnitSet, ZoneClass, ZoneDrainInputs, ZoneId,
    ZoneSpec, Zones,
};
use tidegate::service::coordinator::{Boot, Coordinator, Started};
use tidegate::store::{FileLog, Snapshots};

const A: ZoneId = ZoneId(0);
const B: ZoneId = ZoneId(1);
const C: ZoneId = ZoneId(2);

fn zones() -> Zones {
    Zones::from_specs(vec![
        ZoneSpec::new("az-a", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-b", "green", ZoneClass::Rzone),
        ZoneSpec::new("az-c", "red", ZoneClass::Rzone),
    ])
    .unwrap()
}

fn envelope(state: &State, at_ms: u64, by: &str, command: Command) -> Envelope {
    Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: by.into(), at_ms, reason: "test".into() },
    }
}

fn apply(state: &State, at_ms: u64, by: &str, command: Command) -> Result<State, CommandError> {
    let env = envelope(state, at_ms, by, command);
    Ok(state.apply(&env)?.map(|(s, _)| s).unwrap_or_else(|| state.clone()))
}

/// Three zones: az-a owns 0-49, az-b 50-59, az-c 60-99.
fn three_zones() -> State {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let s = State::genesis(Genesis { scheme, blue_units: 50 }, zones()).unwrap();
    let moves =
        vec![UnitMove { units: UnitSet::parse("60-99", 100).unwrap(), zone: C, domain: None }];
    apply(&s, 1, "alice", Command::MoveUnits { moves }).unwrap()
}

fn plan(receivers: Vec<ZoneId>, target: u32, step: u32, on_breach: OnBreach) -> DrainPlan {
    DrainPlan {
        zone: "az-c".into(),
        color: C,
        target_blue_units: target,
        step_units: step,
        interval_ms: 1000,
        guard: Guard { max_error_rate: 0.05, min_requests: 10, breaches: 2, on_breach },
        mode: DrainMode::Maintenance,
        domain: None,
        freeze_ms: None,
        receivers: Some(receivers),
    }
}

fn owners(s: &State) -> Vec<ZoneId> {
    s.table().map_of(None).unwrap().owners().to_vec()
}

fn units_of(s: &State, zone: ZoneId) -> Vec<u32> {
    s.table().map_of(None).unwrap().units_of(zone).collect()
}

const OK: Reading = Reading::Known { error_rate: 0.0, requests: 100 };

/// The runner's decision with every zone reading `reading` (receivers: `receiving`).
fn decide(
    s: &State,
    drain: &Drain,
    now: u64,
    source: &Reading,
    receiving: &Reading,
) -> Option<DrainAction> {
    let names: Vec<String> =
        drain.receiving_zones().iter().map(|z| s.table().zone_of(*z).to_owned()).collect();
    let receivers: Vec<ReceiverInputs<'_>> = drain
        .receiving_zones()
        .iter()
        .zip(&names)
        .map(|(zone, name)| ReceiverInputs { zone: *zone, name, reading: receiving, load: None })
        .collect();
    drain.decide_zone(&ZoneDrainInputs {
        map: s.table().map_of(None).unwrap(),
        now_ms: now,
        source_reading: source,
        source_load: None,
        receivers: &receivers,
        convergence: &StepConvergence::Disabled,
        headroom: 0.0,
    })
}

/// Runs the drain's decisions at 1 s ticks until it stops moving; returns the state and every
/// step's moved units.
fn run(mut s: State, mut now: u64, ticks: usize) -> (State, Vec<String>, u64) {
    let mut steps = Vec::new();
    for _ in 0..ticks {
        let Some(drain) = s.active_drain().cloned() else { break };
        let runner = format!("drain:{}", drain.id);
        match decide(&s, &drain, now, &OK, &OK) {
            Some(DrainAction::Move { moves, .. }) => {
                let text: Vec<String> = moves
                    .iter()
                    .map(|m| format!("{}>{}", m.units, s.table().zone_of(m.zone)))
                    .collect();
                steps.push(text.join(" "));
                s = apply(&s, now, &runner, Command::ZoneDrainStep { drain: drain.id, moves })
                    .unwrap();
            }
            None => {}
            other => panic!("unexpected {other:?}"),
        }
        now += 1000;
    }
    (s, steps, now)
}

#[test]
fn a_zone_drain_moves_the_lowest_units_out_step_by_step_and_settles() {
    let s = three_zones();
    let before = owners(&s);
    let s = apply(
        &s,
        10,
        "alice",
        Command::StartDrain { plan: plan(vec![A, B], 0, 10, OnBreach::Pause) },
    )
    .unwrap();
    let drain = s.active_drain().unwrap().clone();
    assert_eq!(drain.start_blue_units, 40);
    assert_eq!(drain.start_units.as_ref().map(ToString::to_string).as_deref(), Some("60-99"));
    assert_eq!(drain.steps_total(), 4);
    let (s, steps, now) = run(s, 10, 10);
    // Evenly over both receivers without capacity: each a contiguous half of the slice.
    assert_eq!(
        steps,
        [
            "60-64>az-a 65-69>az-b",
            "70-74>az-a 75-79>az-b",
            "80-84>az-a 85-89>az-b",
            "90-94>az-a 95-99>az-b"
        ]
    );
    assert!(units_of(&s, C).is_empty());
    // Only az-c's units changed owner.
    let after = owners(&s);
    for (u, (b, a)) in before.iter().zip(&after).enumerate() {
        if *b != C {
            assert_eq!(b, a, "unit {u} of another zone moved");
        }
    }
    // Emptying the zone settles on its lanes' backlog, like the dial's drain.
    let drain = s.drains().next_back().unwrap().clone();
    assert_eq!((drain.status, drain.steps_done), (DrainStatus::Settling, 4));
    let unread = Reading::Unknown { why: "settling".into() };
    let inputs = Inputs {
        blue_units: 0,
        now_ms: now,
        receiving_zone: "",
        draining: &unread,
        receiving: &unread,
        convergence: &StepConvergence::Disabled,
        backlog: Some(0),
        capacity: None,
    };
    assert_eq!(drain.decide(&inputs), Some(DrainAction::Complete));
    let s = apply(&s, now, "drain:1", Command::CompleteDrain { drain: drain.id }).unwrap();
    assert_eq!(s.drains().next_back().unwrap().status, DrainStatus::Completed);
}

#[test]
fn a_partial_drain_stops_at_its_target_and_a_named_receiver_takes_everything() {
    let s = three_zones();
    let s = apply(
        &s,
        10,
        "alice",
        Command::StartDrain { plan: plan(vec![B], 15, 10, OnBreach::Pause) },
    )
    .unwrap();
    let (s, steps, _) = run(s, 10, 10);
    assert_eq!(steps, ["60-69>az-b", "70-79>az-b", "80-84>az-b"]);
    assert_eq!(units_of(&s, C), (85..100).collect::<Vec<_>>());
    assert_eq!(units_of(&s, A), (0..50).collect::<Vec<_>>(), "az-a was not named");
    // A zone that keeps units is not emptied: completed at once, nothing to settle.
    assert_eq!(s.drains().next_back().unwrap().status, DrainStatus::Completed);
}

#[test]
fn the_guard_holds_on_a_failing_receiver_and_rolls_back_highest_first() {
    let s = three_zones();
    let start = owners(&s);
    let s = apply(
        &s,
        10,
        "alice",
        Command::StartDrain { plan: plan(vec![A, B], 0, 10, OnBreach::Rollback) },
    )
    .unwrap();
    let (mut s, steps, mut now) = run(s, 10, 2);
    assert_eq!(steps.len(), 2);
    let failing = Reading::Known { error_rate: 0.5, requests: 100 };
    // A receiver failing: two breaches in a row turn the drain back.
    for breach in 1..=2 {
        let drain = s.active_drain().unwrap().clone();
        match decide(&s, &drain, now, &OK, &failing) {
            Some(DrainAction::Hold { breach: true, zone, reason }) => {
                assert_eq!(zone, "az-a", "the first receiver is judged first");
                assert!(reason.contains(&format!("guard breach {breach}/2")), "{reason}");
                s = apply(
                    &s,
                    now,
                    "drain:1",
                    Command::DrainHold { drain: 1, breach: true, reason },
                )
                .unwrap();
            }
            other => panic!("breach {breach}: {other:?}"),
        }
        now += 1000;
    }
    let drain = s.active_drain().unwrap().clone();
    assert_eq!((drain.status, drain.direction), (DrainStatus::Running, Direction::Back));
    // Rolling back is never held by the guard: the failing receiver gives its units back.
    let mut back = Vec::new();
    for _ in 0..5 {
        let Some(drain) = s.active_drain().cloned() else { break };
        if let Some(DrainAction::Move { moves, .. }) = decide(&s, &drain, now, &failing, &failing) {
            back.push(
                moves
                    .iter()
                    .map(|m| format!("{}>{}", m.units, s.table().zone_of(m.zone)))
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            s = apply(&s, now, "drain:1", Command::ZoneDrainStep { drain: 1, moves }).unwrap();
        }
        now += 1000;
    }
    assert_eq!(back, ["70-79>az-c", "60-69>az-c"], "the last units out come back first");
    assert_eq!(owners(&s), start, "the rollback restored the map the drain started from");
    assert_eq!(s.drains().next_back().unwrap().status, DrainStatus::RolledBack);
}

#[test]
fn an_evacuation_ignores_the_failing_source_and_a_maintenance_drain_holds_on_it() {
    let s = three_zones();
    let failing = Reading::Known { error_rate: 0.9, requests: 500 };
    let mut evacuate = plan(vec![A, B], 0, 40, OnBreach::Pause);
    evacuate.mode = DrainMode::Evacuate;
    let e = apply(&s, 10, "alice", Command::StartDrain { plan: evacuate }).unwrap();
    let drain = e.active_drain().unwrap().clone();
    assert!(matches!(decide(&e, &drain, 10, &failing, &OK), Some(DrainAction::Move { .. })));
    let m = apply(
        &s,
        10,
        "alice",
        Command::StartDrain { plan: plan(vec![A, B], 0, 40, OnBreach::Pause) },
    )
    .unwrap();
    let drain = m.active_drain().unwrap().clone();
    match decide(&m, &drain, 10, &failing, &OK) {
        Some(DrainAction::Hold { breach: true, zone, .. }) => assert_eq!(zone, "az-c"),
        other => panic!("{other:?}"),
    }
    let unknown = Reading::Unknown { why: "no data".into() };
    match decide(&m, &drain, 10, &OK, &unknown) {
        Some(DrainAction::Hold { breach: false, reason, .. }) => {
            assert!(reason.contains("health of receiving zone az-a is unknown"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn steps_and_starts_that_are_not_the_drains_own_are_refused() {
    let s = three_zones();
    let refused = |s: &State, command: Command| match apply(s, 20, "drain:1", command) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("applied"),
    };
    // Starts: a receiver that is the source, a retired or unknown zone, nothing to move, a
    // freeze window of 0, a dial drain on three zones.
    let mut self_receiver = plan(vec![C], 0, 10, OnBreach::Pause);
    assert!(
        refused(&s, Command::StartDrain { plan: self_receiver.clone() })
            .contains("az-c` is the zone being drained")
    );
    self_receiver.receivers = Some(vec![A, ZoneId(7)]);
    assert!(refused(&s, Command::StartDrain { plan: self_receiver }).contains("to[1]"));
    assert!(
        refused(&s, Command::StartDrain { plan: plan(vec![A], 40, 10, OnBreach::Pause) })
            .contains("moves none")
    );
    let mut frozen = plan(vec![A], 0, 10, OnBreach::Pause);
    frozen.freeze_ms = Some(0);
    assert!(refused(&s, Command::StartDrain { plan: frozen }).contains("freeze window"));
    let mut dial = plan(vec![A], 0, 10, OnBreach::Pause);
    dial.receivers = None;
    assert!(refused(&s, Command::StartDrain { plan: dial }).contains("two"));
    // Steps: not the next slice, a zone that is not a receiver, the dial's step.
    let s =
        apply(&s, 10, "alice", Command::StartDrain { plan: plan(vec![A], 0, 10, OnBreach::Pause) })
            .unwrap();
    let mv = |units: &str, zone| UnitMove {
        units: UnitSet::parse(units, 100).unwrap(),
        zone,
        domain: None,
    };
    let e = refused(&s, Command::ZoneDrainStep { drain: 1, moves: vec![mv("61-70", A)] });
    assert!(e.contains("moves units 60-69, not 61-70"), "{e}");
    let e = refused(&s, Command::ZoneDrainStep { drain: 1, moves: vec![mv("60-69", B)] });
    assert!(e.contains("not to `az-b`"), "{e}");
    let e = refused(
        &s,
        Command::ZoneDrainStep { drain: 1, moves: vec![mv("60-64", A), mv("60-69", A)] },
    );
    assert!(e.contains("not"), "{e}");
    let e = refused(&s, Command::DrainStep { drain: 1, blue_units: 40 });
    assert!(e.contains("not the dial"), "{e}");
    // A replica of an older release cannot read these: level 7, written only when every live
    // replica supports it (the dial's drain stays at its old level).
    let slice = vec![mv("60-69", A)];
    assert_eq!(Command::ZoneDrainStep { drain: 1, moves: slice }.format_level(), 7);
    let start = Command::StartDrain { plan: plan(vec![A], 0, 10, OnBreach::Pause) };
    assert_eq!(start.format_level(), 7);
    let mut dial = plan(vec![A], 0, 10, OnBreach::Pause);
    dial.receivers = None;
    assert_eq!(Command::StartDrain { plan: dial }.format_level(), 1);
    // Control: the right slice applies.
    apply(&s, 20, "drain:1", Command::ZoneDrainStep { drain: 1, moves: vec![mv("60-69", A)] })
        .unwrap();
    // A two-zone table drains by its dial: receivers are refused there.
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let two = State::genesis(Genesis { scheme, blue_units: 50 }, Zones::default()).unwrap();
    let mut on_two = plan(vec![ZoneId::BLUE], 0, 10, OnBreach::Pause);
    on_two.zone = "az-a".into();
    on_two.color = ZoneId::GREEN;
    assert!(
        refused(&two, Command::StartDrain { plan: on_two })
            .contains("two-zone table drains by its blue-green dial")
    );
}

fn start(dir: &Path, every: Option<u64>) -> Started {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let boot = Boot { genesis: Genesis { scheme, blue_units: 50 }, zones: zones(), now_ms: 1 };
    let snapshots = every.map(|every| Snapshots::new(dir, every));
    Coordinator::start(Box::new(FileLog::open(dir).unwrap()), snapshots, boot).unwrap()
}

fn submit(c: &Coordinator, at_ms: u64, by: &str, command: Command) {
    let state = c.state();
    c.submit(&envelope(&state, at_ms, by, command)).unwrap();
}

#[test]
fn a_zone_drain_replays_from_the_log_and_from_a_snapshot_exactly() {
    // Mid-rollback after two steps out: the log carries the receivers, the moves and the start
    // units a rollback needs.
    for every in [2, 3, 5] {
        let dir = tempfile::tempdir().unwrap();
        {
            let started = start(dir.path(), Some(every));
            let c = &started.coordinator;
            let moves = vec![UnitMove {
                units: UnitSet::parse("60-99", 100).unwrap(),
                zone: C,
                domain: None,
            }];
            submit(c, 5, "alice", Command::MoveUnits { moves });
            submit(
                c,
                10,
                "alice",
                Command::StartDrain { plan: plan(vec![A, B], 0, 10, OnBreach::Rollback) },
            );
            for (i, now) in [10u64, 1010].into_iter().enumerate() {
                let state = c.state();
                let drain = state.active_drain().unwrap().clone();
                let Some(DrainAction::Move { moves, .. }) = decide(&state, &drain, now, &OK, &OK)
                else {
                    panic!("step {i}")
                };
                submit(c, now, "drain:1", Command::ZoneDrainStep { drain: 1, moves });
            }
            submit(c, 2000, "alice", Command::RollbackDrain { drain: 1 });
            let state = c.state();
            let drain = state.active_drain().unwrap().clone();
            let Some(DrainAction::Move { moves, .. }) = decide(&state, &drain, 2000, &OK, &OK)
            else {
                panic!("rollback step")
            };
            submit(c, 2000, "drain:1", Command::ZoneDrainStep { drain: 1, moves });
        }
        let full_dir = tempfile::tempdir().unwrap();
        let log = tidegate::store::LOG_FILE;
        std::fs::copy(dir.path().join(log), full_dir.path().join(log)).unwrap();
        let full = start(full_dir.path(), None);
        let resumed = start(dir.path(), Some(every));
        assert!(resumed.warnings.is_empty(), "{:?}", resumed.warnings);
        assert!(resumed.from_snapshot, "every {every}");
        let state = full.coordinator.state();
        let drain = state.active_drain().unwrap();
        assert_eq!((drain.direction, drain.steps_done), (Direction::Back, 1));
        assert_eq!(drain.plan.receivers, Some(vec![A, B]));
        assert_eq!(units_of(&state, C), (70..100).collect::<Vec<_>>(), "60-69 are still out");
        assert_eq!(&*resumed.coordinator.state(), &*state, "every {every}");
    }
}

/// A loss-less step of a zone drain: freeze the slice (its users' writes are refused), switch
/// exactly those moves once every live subscriber applied the freeze, unfreeze once every one
/// applied the switch. A freeze not applied in its window aborts back: no unit changes owner.
#[test]
fn a_lossless_zone_drain_freezes_switches_and_unfreezes_each_slice() {
    let s = three_zones();
    let mut p = plan(vec![A, B], 20, 10, OnBreach::Pause);
    p.freeze_ms = Some(5_000);
    let mut s = apply(&s, 10, "alice", Command::StartDrain { plan: p }).unwrap();
    let frozen = |s: &State| s.table().frozen().get("default").map(ToString::to_string);
    let mv = |units: &str, zone| UnitMove {
        units: UnitSet::parse(units, 100).unwrap(),
        zone,
        domain: None,
    };
    let mut now = 10;
    for step in 0..2u32 {
        let drain = s.active_drain().unwrap().clone();
        let Some(DrainAction::FreezeMoves { moves }) = decide(&s, &drain, now, &OK, &OK) else {
            panic!("step {step} freezes first")
        };
        // The switch without its freeze is refused.
        let early =
            apply(&s, now, "drain:1", Command::ZoneDrainStep { drain: 1, moves: moves.clone() });
        assert!(early.unwrap_err().to_string().contains("freezes its units"));
        s = apply(&s, now, "drain:1", Command::ZoneDrainFreeze { drain: 1, moves: moves.clone() })
            .unwrap();
        let slice = format!("{}-{}", 60 + step * 10, 69 + step * 10);
        assert_eq!(frozen(&s).as_deref(), Some(slice.as_str()), "step {step}");
        assert_eq!(units_of(&s, C).len(), 40 - step as usize * 10, "frozen, not moved yet");
        let drain = s.active_drain().unwrap().clone();
        let frozen_at = drain.freeze.as_ref().unwrap().frozen_version;
        let behind =
            FreezeBarrier { version: frozen_at, all_applied: false, behind: "edge-1".into() };
        assert_eq!(drain.decide_freeze(now + 100, &behind), None, "a straggler holds the switch");
        let applied =
            FreezeBarrier { version: frozen_at, all_applied: true, behind: String::new() };
        let Some(DrainAction::Move { moves: switch, .. }) =
            drain.decide_freeze(now + 200, &applied)
        else {
            panic!("the switch")
        };
        assert_eq!(switch, moves, "the switch makes exactly the frozen moves");
        // Other moves than the frozen ones are refused at the switch.
        let other = vec![mv(&slice, A)];
        if other != moves {
            assert!(
                apply(&s, now + 200, "drain:1", Command::ZoneDrainStep { drain: 1, moves: other })
                    .is_err()
            );
        }
        s = apply(&s, now + 200, "drain:1", Command::ZoneDrainStep { drain: 1, moves: switch })
            .unwrap();
        assert_eq!(units_of(&s, C).len(), 30 - step as usize * 10);
        assert_eq!(
            frozen(&s).as_deref(),
            Some(slice.as_str()),
            "still frozen until the switch is applied"
        );
        let drain = s.active_drain().unwrap().clone();
        let switched = drain.freeze.as_ref().unwrap().switched.unwrap().0;
        let applied = FreezeBarrier { version: switched, all_applied: true, behind: String::new() };
        let Some(DrainAction::Unfreeze { aborted: false, .. }) =
            drain.decide_freeze(now + 300, &applied)
        else {
            panic!("the unfreeze")
        };
        s = apply(&s, now + 300, "drain:1", Command::DrainUnfreeze { drain: 1, aborted: false })
            .unwrap();
        assert_eq!(frozen(&s), None);
        now += 2_000;
    }
    // Two slices of 10 took az-c from 40 to its target of 20 units: completed.
    assert_eq!(s.drains().next_back().unwrap().status, DrainStatus::Completed);
    assert_eq!(s.drains().next_back().unwrap().freezes.len(), 2);

    // A freeze a subscriber never applies aborts back after its window: nothing moved.
    let s = three_zones();
    let mut p = plan(vec![A], 0, 10, OnBreach::Pause);
    p.freeze_ms = Some(1_000);
    let s = apply(&s, 10, "alice", Command::StartDrain { plan: p }).unwrap();
    let drain = s.active_drain().unwrap().clone();
    let Some(DrainAction::FreezeMoves { moves }) = decide(&s, &drain, 10, &OK, &OK) else {
        panic!()
    };
    let s = apply(&s, 10, "drain:1", Command::ZoneDrainFreeze { drain: 1, moves }).unwrap();
    let drain = s.active_drain().unwrap().clone();
    let version = drain.freeze.as_ref().unwrap().frozen_version;
    let stuck = FreezeBarrier { version, all_applied: false, behind: "gw-7 (az-c, on v3)".into() };
    let Some(DrainAction::Unfreeze { aborted: true, reason }) = drain.decide_freeze(1_010, &stuck)
    else {
        panic!("aborts at the window")
    };
    assert!(reason.contains("gw-7"), "{reason}");
    let s =
        apply(&s, 1_010, "drain:1", Command::DrainUnfreeze { drain: 1, aborted: true }).unwrap();
    assert_eq!(frozen(&s), None);
    assert_eq!(units_of(&s, C).len(), 40, "no unit changed owner");
    assert_eq!(s.active_drain().unwrap().status, DrainStatus::Paused);
}

#[test]
fn a_frozen_zone_drain_step_replays_from_a_snapshot_exactly() {
    for every in [2, 3] {
        let dir = tempfile::tempdir().unwrap();
        {
            let started = start(dir.path(), Some(every));
            let c = &started.coordinator;
            let moves = vec![UnitMove {
                units: UnitSet::parse("60-99", 100).unwrap(),
                zone: C,
                domain: None,
            }];
            submit(c, 5, "alice", Command::MoveUnits { moves });
            let mut p = plan(vec![A, B], 0, 10, OnBreach::Pause);
            p.freeze_ms = Some(30_000);
            submit(c, 10, "alice", Command::StartDrain { plan: p });
            let state = c.state();
            let drain = state.active_drain().unwrap().clone();
            let Some(DrainAction::FreezeMoves { moves }) = decide(&state, &drain, 10, &OK, &OK)
            else {
                panic!("freeze")
            };
            submit(c, 10, "drain:1", Command::ZoneDrainFreeze { drain: 1, moves });
        }
        let full_dir = tempfile::tempdir().unwrap();
        let log = tidegate::store::LOG_FILE;
        std::fs::copy(dir.path().join(log), full_dir.path().join(log)).unwrap();
        let full = start(full_dir.path(), None);
        let resumed = start(dir.path(), Some(every));
        assert!(resumed.from_snapshot && resumed.warnings.is_empty(), "{:?}", resumed.warnings);
        let state = full.coordinator.state();
        let freeze = state.active_drain().unwrap().freeze.clone().expect("mid-freeze");
        assert_eq!(freeze.moves.as_ref().map(Vec::len), Some(2), "{freeze:?}");
        assert_eq!(&*resumed.coordinator.state(), &*state, "every {every}");
    }
}
