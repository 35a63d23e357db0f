//! The drain state machine in virtual time: fixture scenarios plus every operator transition.

use serde_json::Value;
use tidegate_core::Envelope;
use tidegate_core::{
    Audit, Command, CommandError, DrainAction, DrainMode, DrainPlan, Genesis, Guard, Inputs,
    OnBreach, Reading, State, StepConvergence, UnitMode, UnitScheme, ZoneId, Zones,
};

fn state(blue_units: u32) -> State {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    State::genesis(Genesis { scheme, blue_units }, Zones::default()).unwrap()
}

fn apply(state: &State, at_ms: u64, by: &str, command: Command) -> Result<State, CommandError> {
    let env = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: by.into(), at_ms, reason: "test".into() },
    };
    Ok(state.apply(&env)?.map(|(s, _)| s).unwrap_or_else(|| state.clone()))
}

/// A state at `blue_units` with a drain of `plan` just started at t = 0 by alice.
fn started(blue_units: u32, plan: DrainPlan) -> State {
    apply(&state(blue_units), 0, "alice", Command::StartDrain { plan }).unwrap()
}

fn plan(zone: &str, target_blue: u32, step: u32, guard: Guard) -> DrainPlan {
    let color = Zones::default().color_in(zone).unwrap();
    DrainPlan {
        zone: zone.into(),
        color,
        target_blue_units: target_blue,
        step_units: step,
        interval_ms: 1000,
        guard,
        mode: DrainMode::Maintenance,
        domain: None,
        freeze_ms: None,
        receivers: None,
    }
}

fn guard(breaches: u32, on_breach: OnBreach) -> Guard {
    Guard { max_error_rate: 0.02, min_requests: 100, breaches, on_breach }
}

fn healthy() -> Reading {
    Reading::Known { error_rate: 0.0, requests: 1000 }
}

fn failing() -> Reading {
    Reading::Known { error_rate: 0.5, requests: 1000 }
}

/// One runner tick in virtual time: decide, then apply what was decided.
fn tick(state: &State, now: u64, draining: &Reading, receiving: &Reading) -> State {
    tick_with(state, now, draining, receiving, &StepConvergence::Disabled)
}

fn tick_with(
    state: &State,
    now: u64,
    draining: &Reading,
    receiving: &Reading,
    convergence: &StepConvergence,
) -> State {
    tick_full(state, now, draining, receiving, convergence, Some(0))
}

/// A tick with every input, the MQ backlog of the drained zone included.
fn tick_full(
    state: &State,
    now: u64,
    draining: &Reading,
    receiving: &Reading,
    convergence: &StepConvergence,
    backlog: Option<u64>,
) -> State {
    let drain = state.active_drain().expect("an active drain").clone();
    let receiving_zone = state.table().zone_of(drain.receiving_color()).to_owned();
    let inputs = Inputs {
        blue_units: state.table().blue_units(),
        now_ms: now,
        receiving_zone: &receiving_zone,
        draining,
        receiving,
        convergence,
        backlog,
        capacity: None,
    };
    let Some(action) = drain.decide(&inputs) else {
        return state.clone();
    };
    let command = match action {
        DrainAction::Complete => Command::CompleteDrain { drain: drain.id },
        DrainAction::Step { blue_units } => Command::DrainStep { drain: drain.id, blue_units },
        DrainAction::Hold { breach, reason, .. } => {
            Command::DrainHold { drain: drain.id, breach, reason }
        }
        DrainAction::Pause { reason } => {
            let env = Envelope {
                expected_version: state.version(),
                command: Command::PauseDrain { drain: drain.id },
                audit: Audit { by: format!("drain:{}", drain.id), at_ms: now, reason },
            };
            return state.apply(&env).unwrap().unwrap().0;
        }
        other => panic!("these drains do not freeze (tests/freeze.rs does): {other:?}"),
    };
    apply(state, now, &format!("drain:{}", drain.id), command)
        .expect("the runner's command applies")
}

fn latest(state: &State) -> &tidegate_core::Drain {
    state.drains().next_back().unwrap()
}

fn reading(rate: &Value, requests: u64) -> Reading {
    match rate.as_f64() {
        Some(error_rate) => Reading::Known { error_rate, requests },
        None => Reading::Unknown { why: "no data".into() },
    }
}

#[test]
fn fixture_scenarios() {
    let doc: Value = serde_json::from_str(include_str!("fixtures/drain_scenarios.json")).unwrap();
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 7);
    for sc in scenarios {
        let name = sc["name"].as_str().unwrap();
        let g = &sc["guard"];
        let on_breach =
            if g["on_breach"] == "pause" { OnBreach::Pause } else { OnBreach::Rollback };
        let guard = Guard {
            max_error_rate: g["max_error_rate"].as_f64().unwrap(),
            min_requests: g["min_requests"].as_u64().unwrap(),
            breaches: g["breaches"].as_u64().unwrap() as u32,
            on_breach,
        };
        let zone = sc["zone"].as_str().unwrap();
        let target_zone = sc["target"].as_u64().unwrap() as u32;
        let target_blue = if zone == "az-b" { target_zone } else { 100 - target_zone };
        let mut p = plan(zone, target_blue, sc["step"].as_u64().unwrap() as u32, guard);
        p.interval_ms = sc["interval"].as_u64().unwrap();
        let mut s = apply(
            &state(sc["start_blue"].as_u64().unwrap() as u32),
            0,
            "alice",
            Command::StartDrain { plan: p },
        )
        .unwrap();
        for (i, check) in sc["checks"].as_array().unwrap().iter().enumerate() {
            let requests = check["requests"].as_u64().unwrap();
            if s.active_drain().filter(|d| d.status != tidegate_core::DrainStatus::Paused).is_some()
            {
                s = tick(
                    &s,
                    check["t"].as_u64().unwrap(),
                    &reading(&check["draining"], requests),
                    &reading(&check["receiving"], requests),
                );
            }
            assert_eq!(
                u64::from(s.table().blue_units()),
                check["blue"].as_u64().unwrap(),
                "{name}, check {i}"
            );
            assert_eq!(
                latest(&s).state_name(),
                check["state"].as_str().unwrap(),
                "{name}, check {i}"
            );
        }
    }
}

#[test]
fn a_breach_at_every_step_pauses_exactly_there() {
    // Drain 50 -> 0 in steps of 10; the receiving zone starts failing before step k.
    for k in 0..5u64 {
        let mut s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
        let mut t = 0;
        for _ in 0..k {
            s = tick(&s, t, &healthy(), &healthy());
            t += 1000;
        }
        let before = s.table().blue_units();
        assert_eq!(u64::from(before), 50 - 10 * k);
        s = tick(&s, t, &healthy(), &failing());
        assert_eq!(latest(&s).state_name(), "running", "one breach is not enough (k={k})");
        assert_eq!(latest(&s).consecutive_breaches, 1);
        // Not due yet: nothing happens however bad it looks.
        s = tick(&s, t + 999, &healthy(), &failing());
        assert_eq!(latest(&s).consecutive_breaches, 1);
        s = tick(&s, t + 1000, &healthy(), &failing());
        assert_eq!(latest(&s).state_name(), "paused", "k={k}");
        assert_eq!(s.table().blue_units(), before, "a breach never moves users (k={k})");
        assert!(
            latest(&s).hold_reason.as_deref().unwrap().contains("paused by the guard"),
            "k={k}"
        );
    }
}

#[test]
fn resume_after_a_guard_pause_completes_the_drain() {
    let mut s = started(50, plan("az-b", 0, 25, guard(1, OnBreach::Pause)));
    s = tick(&s, 0, &failing(), &healthy());
    assert_eq!(latest(&s).state_name(), "paused");
    let id = latest(&s).id;
    s = apply(&s, 5000, "alice", Command::ResumeDrain { drain: id }).unwrap();
    assert_eq!(latest(&s).state_name(), "running");
    assert_eq!(latest(&s).consecutive_breaches, 0);
    s = tick(&s, 5000, &healthy(), &healthy());
    assert_eq!(s.table().blue_units(), 25);
    s = tick(&s, 6000, &healthy(), &healthy());
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (0, "settling"));
    s = tick(&s, 6001, &healthy(), &healthy());
    assert_eq!(latest(&s).state_name(), "completed");
    assert_eq!(latest(&s).steps_done, 2);
}

#[test]
fn operator_rollback_returns_to_the_start() {
    let mut s = started(60, plan("az-b", 0, 20, guard(2, OnBreach::Pause)));
    s = tick(&s, 0, &healthy(), &healthy());
    s = tick(&s, 1000, &healthy(), &healthy());
    assert_eq!(s.table().blue_units(), 20);
    let id = latest(&s).id;
    s = apply(&s, 1500, "alice", Command::PauseDrain { drain: id }).unwrap();
    s = apply(&s, 1600, "alice", Command::RollbackDrain { drain: id }).unwrap();
    assert_eq!(latest(&s).state_name(), "rolling_back");
    // Rolling back ignores failing readings: it is the remedy.
    s = tick(&s, 1600, &failing(), &failing());
    assert_eq!(s.table().blue_units(), 40);
    s = tick(&s, 2600, &Reading::Unknown { why: "x".into() }, &failing());
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (60, "rolled_back"));
    assert!(s.active_drain().is_none());
}

#[test]
fn abort_leaves_the_share_where_it_is_and_finishes_the_drain() {
    let mut s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    s = tick(&s, 0, &healthy(), &healthy());
    let id = latest(&s).id;
    s = apply(&s, 10, "alice", Command::AbortDrain { drain: id }).unwrap();
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (40, "aborted"));
    for command in [
        Command::ResumeDrain { drain: id },
        Command::PauseDrain { drain: id },
        Command::RollbackDrain { drain: id },
    ] {
        assert!(matches!(apply(&s, 20, "alice", command), Err(CommandError::DrainFinished { .. })));
    }
    // With the drain finished, the dial is free again, and a new drain may start.
    s = apply(&s, 30, "alice", Command::SetBlueUnits { blue_units: 45, domain: None }).unwrap();
    assert!(
        apply(
            &s,
            40,
            "alice",
            Command::StartDrain { plan: plan("az-b", 0, 10, guard(2, OnBreach::Pause)) }
        )
        .is_ok()
    );
}

#[test]
fn the_dial_is_locked_while_a_drain_runs_and_free_while_it_is_paused() {
    let s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    let id = latest(&s).id;
    assert_eq!(
        apply(&s, 1, "bob", Command::SetBlueUnits { blue_units: 10, domain: None }).unwrap_err(),
        CommandError::DrainRunning(id)
    );
    let s = apply(&s, 2, "bob", Command::PauseDrain { drain: id }).unwrap();
    assert_eq!(latest(&s).pause_cause, Some("operator"));
    let s = apply(&s, 3, "bob", Command::SetBlueUnits { blue_units: 35, domain: None }).unwrap();
    assert_eq!(s.table().blue_units(), 35);
    // Resuming continues from wherever the dial now is, one step at a time.
    let s = apply(&s, 4, "bob", Command::ResumeDrain { drain: id }).unwrap();
    let s = tick(&s, 4, &healthy(), &healthy());
    assert_eq!(s.table().blue_units(), 25);
}

#[test]
fn one_active_drain_at_a_time() {
    let s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    let err = apply(
        &s,
        1,
        "alice",
        Command::StartDrain { plan: plan("az-a", 100, 10, guard(2, OnBreach::Pause)) },
    )
    .unwrap_err();
    assert_eq!(err, CommandError::DrainActive(1));
    let s = apply(&s, 2, "alice", Command::PauseDrain { drain: 1 }).unwrap();
    assert!(
        apply(
            &s,
            3,
            "alice",
            Command::StartDrain { plan: plan("az-a", 100, 10, guard(2, OnBreach::Pause)) }
        )
        .is_err()
    );
}

#[test]
fn plans_are_validated() {
    let s = state(50);
    let bad = [
        plan("az-b", 50, 10, guard(2, OnBreach::Pause)), // already there
        plan("az-b", 0, 0, guard(2, OnBreach::Pause)),   // no step
        plan("az-b", 101, 10, guard(2, OnBreach::Pause)), // beyond the units
        plan("az-b", 0, 10, guard(0, OnBreach::Pause)),  // zero breaches
        DrainPlan { color: ZoneId::GREEN, ..plan("az-b", 0, 10, guard(2, OnBreach::Pause)) },
    ];
    for p in bad {
        assert!(
            matches!(
                apply(&s, 0, "alice", Command::StartDrain { plan: p.clone() }),
                Err(CommandError::InvalidDrain(_))
            ),
            "{p:?}"
        );
    }
}

#[test]
fn a_step_that_skips_or_repeats_is_refused() {
    let s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    for wrong in [30, 50, 0] {
        let err = apply(&s, 0, "drain:1", Command::DrainStep { drain: 1, blue_units: wrong })
            .unwrap_err();
        assert!(
            matches!(err, CommandError::DrainStepMismatch { expected: 40, .. }),
            "{wrong}: {err:?}"
        );
    }
    let s = apply(&s, 0, "drain:1", Command::DrainStep { drain: 1, blue_units: 40 }).unwrap();
    assert_eq!(latest(&s).next_due_ms, 1000);
    let s = apply(&s, 1, "alice", Command::PauseDrain { drain: 1 }).unwrap();
    assert!(matches!(
        apply(&s, 2, "drain:1", Command::DrainStep { drain: 1, blue_units: 30 }),
        Err(CommandError::DrainNotRunning { .. })
    ));
}

#[test]
fn repeated_operator_commands_change_nothing() {
    let s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    let env = |command| Envelope {
        expected_version: s.version(),
        command,
        audit: Audit { by: "a".into(), at_ms: 1, reason: "r".into() },
    };
    assert!(s.apply(&env(Command::ResumeDrain { drain: 1 })).unwrap().is_none());
    assert!(matches!(
        s.apply(&env(Command::PauseDrain { drain: 9 })),
        Err(CommandError::DrainNotFound(9))
    ));
}

fn measured(version: u64, fraction: f64) -> StepConvergence {
    StepConvergence::Measured {
        version,
        fraction,
        required: 1.0,
        timeout_ms: 2500,
        behind: "gw-7 (az-a, on v2)".into(),
    }
}

#[test]
fn a_step_waits_for_the_previous_one_to_converge_then_pauses_after_the_timeout() {
    let mut s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    // The first step has no previous step to wait for.
    s = tick_with(&s, 0, &healthy(), &healthy(), &measured(1, 0.0));
    assert_eq!(s.table().blue_units(), 40);
    let step_version = latest(&s).last_step_version.unwrap();
    assert_eq!(step_version, s.version());
    // Due at 1000, but only half the subscribers run the step's version: wait, log nothing.
    let waiting = tick_with(&s, 1000, &healthy(), &healthy(), &measured(step_version, 0.5));
    assert_eq!(waiting, s, "waiting changes nothing");
    // Converged: the next step goes.
    let stepped = tick_with(&s, 1200, &healthy(), &healthy(), &measured(step_version, 1.0));
    assert_eq!(stepped.table().blue_units(), 30);
    // Still behind when the timeout (2500 ms after the step) passes: paused, with the reason.
    let paused = tick_with(&s, 2500, &healthy(), &healthy(), &measured(step_version, 0.5));
    assert_eq!(latest(&paused).state_name(), "paused");
    let reason = latest(&paused).hold_reason.clone().unwrap();
    assert!(reason.contains("50% of subscribers") && reason.contains("gw-7"), "{reason}");
    assert_eq!(latest(&paused).pause_cause, Some("convergence"));
    assert_eq!(paused.table().blue_units(), 40);
    assert!(reason.contains("resume to go on without them"), "{reason}");
    // Resuming is the operator's call to go on without the stragglers: the next step goes at
    // once instead of waiting a second full timeout and pausing again.
    let resumed = apply(&paused, 3000, "alice", Command::ResumeDrain { drain: 1 }).unwrap();
    let stepped = tick_with(&resumed, 3100, &healthy(), &healthy(), &measured(step_version, 0.5));
    assert_eq!(latest(&stepped).state_name(), "running");
    assert_eq!(stepped.table().blue_units(), 30, "the resumed drain stepped past the stragglers");
    // The gate is back for the new step: it waits for that one's subscribers.
    let v2 = latest(&stepped).last_step_version.unwrap();
    let waiting = tick_with(&stepped, 4200, &healthy(), &healthy(), &measured(v2, 0.5));
    assert_eq!(waiting, stepped, "the next step waits for convergence again");
}

#[test]
fn resuming_an_operator_pause_does_not_restart_a_spent_convergence_timeout() {
    let mut s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    s = tick_with(&s, 0, &healthy(), &healthy(), &measured(1, 0.0));
    let v = latest(&s).last_step_version.unwrap();
    s = apply(&s, 500, "alice", Command::PauseDrain { drain: 1 }).unwrap();
    // Resumed after the step's timeout (2500 ms) was spent: stragglers pause it on the next
    // check, they do not get a fresh timeout.
    s = apply(&s, 3000, "alice", Command::ResumeDrain { drain: 1 }).unwrap();
    let paused = tick_with(&s, 3000, &healthy(), &healthy(), &measured(v, 0.5));
    assert_eq!(latest(&paused).pause_cause, Some("convergence"));
}

#[test]
fn rolling_back_does_not_wait_for_convergence() {
    let mut s = started(50, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    s = tick(&s, 0, &healthy(), &healthy());
    s = apply(&s, 10, "alice", Command::RollbackDrain { drain: 1 }).unwrap();
    let v = latest(&s).last_step_version.unwrap();
    s = tick_with(&s, 10, &healthy(), &healthy(), &measured(v, 0.0));
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (50, "rolled_back"));
}

#[test]
fn a_drain_that_empties_its_zone_settles_until_the_backlog_is_consumed() {
    let mut s = started(20, plan("az-b", 0, 10, guard(2, OnBreach::Pause)));
    s = tick(&s, 0, &healthy(), &healthy());
    s = tick(&s, 1000, &healthy(), &healthy());
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (0, "settling"));
    assert!(latest(&s).hold_reason.as_deref().unwrap().contains("backlog"));
    assert!(s.active_drain().is_some(), "settling is still active: no second drain yet");
    // Backlog unknown or not yet consumed: keep waiting, whatever the time.
    for backlog in [None, Some(359), Some(1)] {
        let waiting =
            tick_full(&s, 99_000, &healthy(), &healthy(), &StepConvergence::Disabled, backlog);
        assert_eq!(latest(&waiting).state_name(), "settling", "{backlog:?}");
    }
    // The dial stays locked while settling.
    assert_eq!(
        apply(&s, 2000, "bob", Command::SetBlueUnits { blue_units: 10, domain: None }).unwrap_err(),
        CommandError::DrainRunning(1)
    );
    let done = tick_full(&s, 2000, &healthy(), &healthy(), &StepConvergence::Disabled, Some(0));
    assert_eq!(latest(&done).state_name(), "completed");
    assert_eq!(latest(&done).finished_ms, Some(2000));
    // Or the operator says otherwise.
    let forced = apply(&s, 2500, "alice", Command::CompleteDrain { drain: 1 }).unwrap();
    assert_eq!(latest(&forced).state_name(), "completed");
}

#[test]
fn a_partial_drain_completes_without_settling_and_complete_is_only_for_settling_drains() {
    let mut s = started(50, plan("az-b", 40, 10, guard(2, OnBreach::Pause)));
    assert!(matches!(
        apply(&s, 0, "alice", Command::CompleteDrain { drain: 1 }),
        Err(CommandError::DrainNotRunning { .. })
    ));
    s = tick(&s, 0, &healthy(), &healthy());
    assert_eq!((s.table().blue_units(), latest(&s).state_name()), (40, "completed"));
}
