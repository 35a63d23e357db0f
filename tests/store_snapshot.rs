//! Snapshots: start-up from a snapshot plus the log after it equals a full replay; damaged,
//! misplaced and half-written snapshots are ignored with a warning; damage in the log a snapshot
//! covers still stops start-up.

use std::fs;
use std::path::Path;

use proptest::prelude::*;
use tidegate::core::{
    Audit, Command, Decision, DrainMode, DrainPlan, Envelope, Genesis, Guard, OnBreach,
    RunReadings, StepDefaults, UnitMode, UnitScheme, Verdict, ZoneId, ZoneSample, Zones,
    step_toward,
};
use tidegate::service::coordinator::{AUDIT_IN_MEMORY, Boot, Coordinator, Started};
use tidegate::store::WirePlan;
use tidegate::store::{FileLog, LOG_FILE, SNAPSHOT_FILE, Snapshots};

fn boot() -> Boot {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    Boot { genesis: Genesis { scheme, blue_units: 50 }, zones: Zones::default(), now_ms: 1 }
}

fn start(dir: &Path, every: Option<u64>) -> Started {
    let snapshots = every.map(|every| Snapshots::new(dir, every));
    Coordinator::start(Box::new(FileLog::open(dir).unwrap()), snapshots, boot()).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Dial(u32),
    Pin(u16, bool),
    Unpin(u16),
    StartDrain {
        target: u32,
        step: u32,
        rollback: bool,
    },
    Step,
    Hold(bool),
    Pause,
    Resume,
    Abort,
    Rollback,
    /// Store the plan (a pin, an evacuation, a dial).
    PutPlan,
    /// Start a run (a drill with a hold when true).
    RunStart(bool),
    /// The plan runner's next command, as `PlanRun::decide` says.
    RunTick,
    /// Pause, resume, abort or roll back the run.
    RunControl(u8),
    /// Put release channel `orders-v2` at once, with units `0..n` (green).
    ChannelPut(u32),
    /// Start a loss-less change of it: to units `0..n`, or with 0 its deletion.
    ChannelFreeze(u32),
    /// The change's next phase: its switch, or (true) its unfreeze (aborted when unswitched).
    ChannelPhase(bool),
    /// Start a loss-less move of units `n..n+10` to green.
    UnitsFreeze(u32),
    /// The unit move's next phase, as for a channel change.
    UnitsPhase(bool),
}

fn channel(n: u32) -> tidegate::core::Channel {
    tidegate::core::ChannelSpec {
        name: "orders-v2".into(),
        domain: None,
        services: vec!["orders".into()],
        zone: ZoneId::GREEN,
        percent: None,
        units: Some(tidegate::core::UnitSet::parse(&format!("0-{}", n.max(1) - 1), 100).unwrap()),
        users: vec!["alice".into()],
        fallback: tidegate::core::ChannelFallback::Global,
        expires_at_ms: None,
    }
    .resolve(100, 0)
    .unwrap()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u32..=100).prop_map(Op::Dial),
        3 => (0u16..40, any::<bool>()).prop_map(|(u, g)| Op::Pin(u, g)),
        1 => (0u16..40).prop_map(Op::Unpin),
        2 => (0u32..=100, 1u32..30, any::<bool>())
            .prop_map(|(target, step, rollback)| Op::StartDrain { target, step, rollback }),
        4 => Just(Op::Step),
        2 => any::<bool>().prop_map(Op::Hold),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
        1 => Just(Op::Abort),
        1 => Just(Op::Rollback),
        1 => Just(Op::PutPlan),
        1 => any::<bool>().prop_map(Op::RunStart),
        4 => Just(Op::RunTick),
        1 => (0u8..4).prop_map(Op::RunControl),
        1 => (1u32..=60).prop_map(Op::ChannelPut),
        1 => (0u32..=60).prop_map(Op::ChannelFreeze),
        2 => any::<bool>().prop_map(Op::ChannelPhase),
        1 => (0u32..90).prop_map(Op::UnitsFreeze),
        2 => any::<bool>().prop_map(Op::UnitsPhase),
    ]
}

/// Submits `op` against the current state; refusals (a dial during a drain...) are fine.
fn submit(c: &Coordinator, op: &Op, at_ms: u64) {
    let state = c.state();
    let active = state.active_drain().map(|d| d.id).unwrap_or(1);
    let command = match op {
        Op::Dial(blue_units) => Command::SetBlueUnits { blue_units: *blue_units, domain: None },
        Op::Pin(u, green) => Command::Pin {
            user_id: format!("user-{u}"),
            color: if *green { ZoneId::GREEN } else { ZoneId::BLUE },
        },
        Op::Unpin(u) => Command::Unpin { user_id: format!("user-{u}") },
        Op::StartDrain { target, step, rollback } => {
            let blue = *target < state.table().blue_units();
            Command::StartDrain {
                plan: DrainPlan {
                    zone: if blue { "az-b" } else { "az-a" }.into(),
                    color: if blue { ZoneId::BLUE } else { ZoneId::GREEN },
                    target_blue_units: *target,
                    step_units: *step,
                    interval_ms: 1000,
                    // Both modes, so the snapshot must carry the mode to match the replay.
                    mode: if *step % 2 == 0 { DrainMode::Evacuate } else { DrainMode::Maintenance },
                    guard: Guard {
                        max_error_rate: 0.1 / 3.0,
                        min_requests: 10,
                        breaches: 2,
                        on_breach: if *rollback { OnBreach::Rollback } else { OnBreach::Pause },
                    },
                    domain: None,
                    freeze_ms: None,
                    receivers: None,
                },
            }
        }
        Op::Step => {
            let Some(drain) = state.active_drain() else { return };
            let blue_units =
                step_toward(state.table().blue_units(), drain.heading_for(), drain.plan.step_units);
            Command::DrainStep { drain: drain.id, blue_units }
        }
        Op::Hold(breach) => {
            Command::DrainHold { drain: active, breach: *breach, reason: "guard".into() }
        }
        Op::Pause => Command::PauseDrain { drain: active },
        Op::Resume => Command::ResumeDrain { drain: active },
        Op::Abort => Command::AbortDrain { drain: active },
        Op::Rollback => Command::RollbackDrain { drain: active },
        Op::PutPlan => {
            let plan: WirePlan = serde_json::from_value(serde_json::json!({
                "name": "az-b-failing", "rto_ms": 5000,
                "steps": [
                    {"type": "pin", "user_id": "user-1", "color": "green"},
                    {"type": "http", "name": "promote", "url": "https://db-admin/promote",
                     "token_env": "DB_ADMIN_TOKEN", "retries": 2},
                    {"type": "evacuate", "zone": "az-b", "to_percent": 25},
                    {"type": "dial", "blue_percent": 30}
                ]
            }))
            .unwrap();
            Command::PutPlan { plan: plan.to_plan(&tidegate::core::Zones::default()).unwrap() }
        }
        Op::RunStart(drill) => Command::StartPlanRun {
            plan: "az-b-failing".into(),
            revision: 1,
            drill_hold_ms: drill.then_some(1500),
            // Drills keep the start maps: snapshots carry them too.
            restores_maps: *drill,
        },
        Op::RunTick => {
            let Some(run) = state.active_run() else { return };
            let table = state.table();
            let defaults = StepDefaults {
                step_units: 25,
                interval_ms: 1000,
                guard: Guard {
                    max_error_rate: 0.1 / 3.0,
                    min_requests: 10,
                    breaches: 2,
                    on_breach: OnBreach::Pause,
                },
            };
            let readings = RunReadings {
                restore_into: Ok(()),
                receivers: None,
                now_ms: at_ms,
                zones: table.zones(),
                units: table.units(),
                blue_units: table.blue_units(),
                zone_units: 0,
                drain: run.drain.and_then(|d| state.drain(d)),
                maintenance: defaults,
                evacuate: defaults,
                dial_capacity: Verdict::Unchecked,
                precondition: Some(Ok(true)),
                backlog: Some(0),
            };
            // An error rate that is not a short decimal: the snapshot must keep it exactly.
            let samples =
                vec![ZoneSample { zone: "az-b".into(), error_rate: Some(0.6 / 7.0), requests: 9 }];
            // An HTTP step's open attempt gets its result (a 500 now and then: retries).
            if let Some(open) = run.current_calls().last().filter(|a| a.done_ms.is_none()) {
                let status = if at_ms.is_multiple_of(3) { 500 } else { 200 };
                Command::PlanCallDone {
                    run: run.id,
                    step: run.step,
                    attempt: open.attempt,
                    status: Some(status),
                    error: None,
                }
            } else {
                match run.decide(&readings) {
                    None => return,
                    Some(Decision::StartStep { step, drain }) => {
                        Command::PlanStepStarted { run: run.id, step, drain, samples }
                    }
                    Some(Decision::DoneStep { step }) => Command::PlanStepDone {
                        run: run.id,
                        step,
                        converged_ms: Some(at_ms - 1),
                        samples,
                    },
                    Some(Decision::FreezeStep { step }) => {
                        Command::PlanStepFreeze { run: run.id, step }
                    }
                    Some(Decision::Hold { reason }) => Command::PlanRunHold { run: run.id, reason },
                    Some(Decision::Fail { reason }) => Command::FailPlanRun { run: run.id, reason },
                    Some(Decision::Restore) => Command::PlanRestore { run: run.id },
                    Some(Decision::Call { step, attempt, until_ms }) => Command::PlanCallStarted {
                        run: run.id,
                        step,
                        attempt,
                        caller: "replica-a".into(),
                        until_ms,
                    },
                }
            }
        }
        Op::RunControl(n) => {
            let run = state.plan_runs().next_back().map_or(1, |r| r.id);
            match n {
                0 => Command::PausePlanRun { run },
                1 => Command::ResumePlanRun { run },
                2 => Command::AbortPlanRun { run },
                _ => Command::RollbackPlanRun { run },
            }
        }
        Op::ChannelPut(n) => Command::PutChannel { channel: channel(*n) },
        Op::ChannelFreeze(n) => Command::FreezeChannel {
            name: "orders-v2".into(),
            next: (*n > 0).then(|| channel(*n)),
            window_ms: 5_000,
        },
        Op::ChannelPhase(end) => {
            let name = "orders-v2".to_owned();
            match state.channel_change().map(|c| c.phases.switched.is_some()) {
                Some(false) if !end => Command::SwitchChannel { name },
                Some(switched) => Command::UnfreezeChannel { name, aborted: !switched },
                None => Command::SwitchChannel { name },
            }
        }
        Op::UnitsFreeze(n) => Command::FreezeUnits {
            moves: vec![tidegate::core::UnitMove {
                units: tidegate::core::UnitSet::parse(&format!("{n}-{}", n + 9), 100).unwrap(),
                zone: ZoneId::GREEN,
                domain: None,
            }],
            // Every other freeze pins a user too, so the snapshot carries pin changes.
            pins: if n % 2 == 1 {
                vec![tidegate::core::PinChange {
                    user_id: format!("user-{n}"),
                    zone: Some(ZoneId::BLUE),
                }]
            } else {
                vec![]
            },
            // Every third freeze moves the global writer too.
            global: n.is_multiple_of(3).then_some(tidegate::core::GlobalWriter {
                zone: Some(ZoneId::GREEN),
                read_only: false,
                frozen: false,
            }),
            window_ms: 5_000,
        },
        Op::UnitsPhase(end) => match state.units_change().map(|c| c.phases.switched.is_some()) {
            Some(false) if !end => Command::SwitchUnits,
            Some(switched) => Command::UnfreezeUnits { aborted: !switched },
            None => Command::SwitchUnits,
        },
    };
    let audit = Audit { by: "prop".into(), at_ms, reason: format!("op at {at_ms}") };
    let _ = c.submit(&Envelope { expected_version: state.version(), command, audit });
}

fn copy_log(from: &Path, to: &Path) {
    fs::copy(from.join(LOG_FILE), to.join(LOG_FILE)).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the history and wherever the snapshot falls, a start from the snapshot and the
    /// entries after it reaches exactly the state (table, drains, audit) of a full replay.
    #[test]
    fn a_snapshot_plus_the_later_entries_equals_a_full_replay(
        ops in prop::collection::vec(op(), 1..80),
        every in 1u64..20,
    ) {
        let dir = tempfile::tempdir().unwrap();
        {
            let started = start(dir.path(), Some(every));
            for (i, op) in ops.iter().enumerate() {
                submit(&started.coordinator, op, 10 + i as u64 * 1000);
            }
        }
        let full_dir = tempfile::tempdir().unwrap();
        copy_log(dir.path(), full_dir.path());
        let full = start(full_dir.path(), None);
        let resumed = start(dir.path(), Some(every));
        prop_assert!(resumed.warnings.is_empty(), "{:?}", resumed.warnings);
        let versions = full.coordinator.state().version();
        // A snapshot exists once `every` entries were appended (the genesis counts).
        prop_assert_eq!(resumed.from_snapshot, versions >= every);
        prop_assert_eq!(&*resumed.coordinator.state(), &*full.coordinator.state());
        prop_assert_eq!(
            resumed.coordinator.audit(AUDIT_IN_MEMORY),
            full.coordinator.audit(AUDIT_IN_MEMORY)
        );
    }
}

/// A history with a drain in it, snapshotted every 3 entries; returns the state's version.
fn history(dir: &Path) -> u64 {
    let started = start(dir, Some(3));
    let ops = [
        Op::Dial(40),
        Op::Pin(1, true),
        Op::StartDrain { target: 0, step: 10, rollback: false },
        Op::Step,
        Op::Hold(true),
        Op::Step,
        Op::Pause,
    ];
    for (i, op) in ops.iter().enumerate() {
        submit(&started.coordinator, op, 100 + i as u64);
    }
    started.coordinator.state().version()
}

fn expect_full_replay_with_warning(dir: &Path, version: u64, needle: &str) {
    let started = start(dir, Some(3));
    assert!(!started.from_snapshot);
    assert_eq!(started.coordinator.state().version(), version);
    assert!(
        started.warnings.iter().any(|w| w.contains("ignored the snapshot") && w.contains(needle)),
        "{:?}",
        started.warnings
    );
    drop(started);
    // The ignored snapshot was replaced by a good one right away.
    let again = start(dir, Some(3));
    assert!(again.from_snapshot && again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.coordinator.state().version(), version);
}

#[test]
fn a_damaged_snapshot_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let version = history(dir.path());
    let path = dir.path().join(SNAPSHOT_FILE);
    let mut bytes = fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    expect_full_replay_with_warning(dir.path(), version, "checksum");
}

#[test]
fn a_truncated_snapshot_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let version = history(dir.path());
    let path = dir.path().join(SNAPSHOT_FILE);
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    expect_full_replay_with_warning(dir.path(), version, "incomplete");
}

#[test]
fn a_snapshot_that_does_not_fit_the_log_is_ignored() {
    // The log was replaced by a shorter one (restored from an old backup): the snapshot's
    // position lies beyond its end.
    let dir = tempfile::tempdir().unwrap();
    let version = history(dir.path());
    let log = dir.path().join(LOG_FILE);
    let text = fs::read_to_string(&log).unwrap();
    let first_two: String = text.split_inclusive('\n').take(2).collect();
    fs::write(&log, first_two).unwrap();
    let started = start(dir.path(), Some(3));
    assert!(!started.from_snapshot);
    assert_eq!(started.coordinator.state().version(), 2);
    assert!(version > 2);
    assert!(started.warnings.iter().any(|w| w.contains("only")), "{:?}", started.warnings);
}

#[test]
fn a_half_written_snapshot_left_by_a_crash_changes_nothing() {
    // A crash between creating the temporary file and the rename leaves the temporary file
    // behind; the snapshot in place is the previous, whole one.
    let dir = tempfile::tempdir().unwrap();
    let version = history(dir.path());
    fs::write(dir.path().join("tidegate.snapshot.tmp"), b"0badc0de {\"format\":1,\"posi").unwrap();
    let started = start(dir.path(), Some(3));
    assert!(started.from_snapshot);
    assert!(started.warnings.is_empty(), "{:?}", started.warnings);
    assert_eq!(started.coordinator.state().version(), version);
}

#[test]
fn a_snapshot_never_hides_damage_in_the_log_it_covers() {
    // Damage a line *before* the snapshot's position. The snapshot start does not replay it,
    // but it checks its checksum: it refuses, naming the line, exactly as a start without the
    // snapshot does (deleting the snapshot is always allowed, so it must not change the verdict).
    // It used to start from the snapshot and hide the damage until the snapshot was deleted.
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let log = dir.path().join(LOG_FILE);
    let mut text = fs::read_to_string(&log).unwrap();
    let second = text.find('\n').unwrap() + 1;
    text.replace_range(second..second + 8, "00000000");
    fs::write(&log, text).unwrap();
    let from_snapshot = Coordinator::start(
        Box::new(FileLog::open(dir.path()).unwrap()),
        Some(Snapshots::new(dir.path(), 3)),
        boot(),
    );
    let message = from_snapshot.err().expect("damage under the snapshot refuses").to_string();
    assert!(message.contains("line 2") && message.contains("checksum"), "{message}");
    fs::remove_file(dir.path().join(SNAPSHOT_FILE)).unwrap();
    let full = Coordinator::start(Box::new(FileLog::open(dir.path()).unwrap()), None, boot());
    assert!(full.err().unwrap().to_string().contains("line 2"));
}

#[test]
fn plan_runs_survive_a_snapshot_exactly() {
    // A drill that stores a pin, evacuates, holds and restores, plus a second run left mid-step.
    // The plan's HTTP step takes a start, a claim and a result per attempt (one of them may be a
    // 500: a retry) and a done; ticks while the drain waits for its step change nothing.
    let mut ops = vec![Op::PutPlan, Op::RunStart(true)];
    ops.extend(std::iter::repeat_n(Op::RunTick, 12));
    ops.push(Op::Step); // the run's drain: az-b 50% -> 25%, completed
    ops.extend(std::iter::repeat_n(Op::RunTick, 6));
    ops.extend([Op::RunStart(false), Op::RunTick, Op::RunTick, Op::RunTick, Op::RunControl(0)]);
    for every in [2, 3, 5] {
        let dir = tempfile::tempdir().unwrap();
        {
            let started = start(dir.path(), Some(every));
            for (i, op) in ops.iter().enumerate() {
                // 1 s apart: the drill's drain steps and its 1.5 s hold pass.
                submit(&started.coordinator, op, 10 + i as u64 * 1000);
            }
        }
        let full_dir = tempfile::tempdir().unwrap();
        copy_log(dir.path(), full_dir.path());
        let full = start(full_dir.path(), None);
        let resumed = start(dir.path(), Some(every));
        assert!(resumed.warnings.is_empty(), "{:?}", resumed.warnings);
        assert!(resumed.from_snapshot);
        let state = full.coordinator.state();
        let runs: Vec<_> = state.plan_runs().map(|r| (r.id, r.status.as_str())).collect();
        assert_eq!(runs, [(1, "completed"), (2, "paused")], "every {every}");
        assert!(state.plan_run(1).unwrap().restore.is_some());
        let calls = &state.plan_run(1).unwrap().steps[1].calls;
        assert!(calls.last().is_some_and(|a| a.ok && a.status == Some(200)), "{calls:?}");
        assert_eq!(&*resumed.coordinator.state(), &*state, "every {every}");
    }
}
