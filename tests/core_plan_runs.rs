//! Plan runs in virtual time: fixture scenarios (tests/fixtures/plan_run_scenarios.json) drive the
//! pure `PlanRun::decide` and `Drain::decide` and apply what they decide, with operator actions
//! and restarts (a replay of every logged command through its wire form) in between.

use serde_json::Value;
use tidegate::core::{
    Audit, Command, Decision, DrainAction, Envelope, Genesis, Guard, Inputs, OnBreach, Projection,
    Reading, RunReadings, State, StepConvergence, StepDefaults, UnitMode, UnitScheme, Verdict,
    ZoneId, Zones,
};
use tidegate::store::{WireCommand, WirePlan};

struct Sim {
    genesis: State,
    state: State,
    log: Vec<Envelope>,
}

impl Sim {
    /// Applies a command; `Err` is the refusal's sentence. No-ops log nothing.
    fn apply(&mut self, at_ms: u64, by: &str, command: Command) -> Result<(), String> {
        let env = Envelope {
            expected_version: self.state.version(),
            command,
            audit: Audit { by: by.into(), at_ms, reason: "scenario".into() },
        };
        if let Some((next, _)) = self.state.apply(&env).map_err(|e| e.to_string())? {
            self.state = next;
            self.log.push(env);
        }
        Ok(())
    }

    /// A restart: the state rebuilt from the genesis by replaying every logged command after a
    /// round trip through the log's wire form.
    fn restart(&mut self) {
        let mut state = self.genesis.clone();
        for env in &self.log {
            let wire =
                serde_json::to_string(&WireCommand::encode(&env.command, state.table().zones()))
                    .unwrap();
            let back: WireCommand = serde_json::from_str(&wire).unwrap();
            let env = Envelope { command: back.to_command(state.table()).unwrap(), ..env.clone() };
            state = state.apply(&env).expect("replays").expect("changes").0;
        }
        assert_eq!(state, self.state, "a replay rebuilds exactly the state");
        self.state = state;
    }
}

fn reading(v: &Value) -> Reading {
    match v.as_f64() {
        Some(error_rate) => Reading::Known { error_rate, requests: 500 },
        None => Reading::Unknown { why: "no data".into() },
    }
}

fn defaults(sc: &Value, key: &str) -> StepDefaults {
    let d = &sc["defaults"][key];
    StepDefaults {
        step_units: d["step"].as_u64().unwrap_or(25) as u32,
        interval_ms: d["interval"].as_u64().unwrap_or(1000),
        guard: Guard {
            max_error_rate: 0.05,
            min_requests: 100,
            breaches: d["breaches"].as_u64().unwrap_or(2) as u32,
            on_breach: if d["on_breach"] == "rollback" {
                OnBreach::Rollback
            } else {
                OnBreach::Pause
            },
        },
    }
}

fn exceeds() -> Verdict {
    Verdict::Exceeds(Projection {
        zone: "az-a".into(),
        current_rps: 700.0,
        projected_rps: 1200.0,
        capacity_rps: 1000.0,
        allowed_rps: 900.0,
        estimated: false,
        source_note: None,
        receiving_note: None,
    })
}

/// One tick at `now`: the drain runner's decision, then the plan runner's until it waits.
fn tick(sim: &mut Sim, sc: &Value, t: &Value, now: u64, trail: &mut Vec<String>) {
    let zones = sim.state.table().zones().clone();
    let health = &t["health"];
    if let Some(drain) = sim.state.active_drain().cloned() {
        let receiving = zones.zone_of(drain.receiving_color()).to_owned();
        let inputs = Inputs {
            blue_units: sim.state.table().blue_units(),
            now_ms: now,
            receiving_zone: &receiving,
            draining: &reading(&health[&drain.plan.zone]),
            receiving: &reading(&health[&receiving]),
            convergence: &StepConvergence::Disabled,
            backlog: Some(t["backlog"].as_u64().unwrap_or(0)),
            capacity: None,
        };
        let by = format!("drain:{}", drain.id);
        let id = drain.id;
        let command = match drain.decide(&inputs) {
            None => None,
            Some(DrainAction::Step { blue_units }) => {
                Some(Command::DrainStep { drain: id, blue_units })
            }
            Some(DrainAction::Hold { breach, reason, .. }) => {
                Some(Command::DrainHold { drain: id, breach, reason })
            }
            Some(DrainAction::Complete) => Some(Command::CompleteDrain { drain: id }),
            Some(DrainAction::Pause { reason }) => panic!("no convergence gate: {reason}"),
            Some(other) => panic!("plan steps do not freeze: {other:?}"),
        };
        if let Some(c) = command {
            sim.apply(now, &by, c).expect("the drain runner's command applies");
        }
    }
    for _ in 0..10 {
        let Some(run) = sim.state.active_run().cloned() else { return };
        let table = sim.state.table();
        let readings = RunReadings {
            restore_into: Ok(()),
            receivers: None,
            now_ms: now,
            zones: &zones,
            units: table.units(),
            blue_units: table.blue_units(),
            zone_units: 0,
            drain: run.drain.and_then(|d| sim.state.drain(d)),
            maintenance: defaults(sc, "maintenance"),
            evacuate: defaults(sc, "evacuate"),
            dial_capacity: if t["dial_capacity"] == "exceeds" {
                exceeds()
            } else {
                Verdict::Unchecked
            },
            precondition: t.get("precondition").and_then(Value::as_bool).map(Ok),
            backlog: Some(t["backlog"].as_u64().unwrap_or(0)),
        };
        let by = format!("plan:{}", run.id);
        let command = match run.decide(&readings) {
            None => return,
            Some(Decision::StartStep { step, drain }) => {
                trail.push(format!("start {step}"));
                Command::PlanStepStarted { run: run.id, step, drain, samples: vec![] }
            }
            Some(Decision::DoneStep { step }) => {
                trail.push(format!("done {step}"));
                Command::PlanStepDone { run: run.id, step, converged_ms: None, samples: vec![] }
            }
            Some(Decision::FreezeStep { step }) => {
                trail.push(format!("freeze {step}"));
                Command::PlanStepFreeze { run: run.id, step }
            }
            Some(Decision::Hold { reason }) => {
                if run.hold_reason.as_deref() == Some(reason.as_str()) {
                    return;
                }
                Command::PlanRunHold { run: run.id, reason }
            }
            Some(Decision::Fail { reason }) => {
                trail.push("fail".into());
                Command::FailPlanRun { run: run.id, reason }
            }
            Some(Decision::Restore) => {
                trail.push("restore".into());
                Command::PlanRestore { run: run.id }
            }
            // HTTP steps have their own tests (tests/core_plan_calls.rs).
            Some(Decision::Call { .. }) => panic!("no fixture scenario has an http step"),
        };
        sim.apply(now, &by, command).expect("the plan runner's command applies");
    }
    panic!("the plan runner did not settle within one tick");
}

#[test]
fn fixture_scenarios() {
    let doc: Value =
        serde_json::from_str(include_str!("fixtures/plan_run_scenarios.json")).unwrap();
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 8);
    for sc in scenarios {
        let name = sc["name"].as_str().unwrap();
        let zones = Zones::default();
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let blue_units = sc["start_blue"].as_u64().unwrap() as u32;
        let genesis = State::genesis(Genesis { scheme, blue_units }, zones.clone()).unwrap();
        let mut sim = Sim { genesis: genesis.clone(), state: genesis, log: Vec::new() };
        for (user, color) in sc["pins"].as_object().into_iter().flatten() {
            let color: ZoneId = zones.by_lane(color.as_str().unwrap()).unwrap();
            sim.apply(0, "alice", Command::Pin { user_id: user.clone(), color }).unwrap();
        }
        let wire: WirePlan = serde_json::from_value(sc["plan"].clone()).unwrap();
        let plan = wire.to_plan(&zones).unwrap();
        sim.apply(0, "alice", Command::PutPlan { plan }).unwrap();
        let drill = sc["drill_hold_ms"].as_u64();
        sim.apply(
            0,
            "alice",
            Command::StartPlanRun {
                plan: wire.name.clone(),
                revision: 1,
                drill_hold_ms: drill,
                restores_maps: false,
            },
        )
        .unwrap();
        let mut trail = Vec::new();
        for (i, t) in sc["ticks"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name}, tick {i}");
            let now = t["t"].as_u64().unwrap();
            let run_id = sim.state.plan_runs().next_back().unwrap().id;
            if let Some(action) = t["action"].as_str() {
                let command = match action {
                    "pause" => Some(Command::PausePlanRun { run: run_id }),
                    "resume" => Some(Command::ResumePlanRun { run: run_id }),
                    "abort" => Some(Command::AbortPlanRun { run: run_id }),
                    "rollback" => Some(Command::RollbackPlanRun { run: run_id }),
                    "restart" => {
                        sim.restart();
                        trail.push("restart".into());
                        None
                    }
                    "operator_drain" => {
                        let drain = tidegate::core::DrainPlan {
                            zone: "az-a".into(),
                            color: ZoneId::GREEN,
                            target_blue_units: 100,
                            step_units: 10,
                            interval_ms: 1000,
                            guard: defaults(sc, "maintenance").guard,
                            mode: tidegate::core::DrainMode::Maintenance,
                            domain: None,
                            freeze_ms: None,
                            receivers: None,
                        };
                        Some(Command::StartDrain { plan: drain })
                    }
                    other => panic!("{at}: unknown action {other}"),
                };
                if let Some(command) = command {
                    let result = sim.apply(now, "alice", command);
                    match t["refused_contains"].as_str() {
                        Some(part) => {
                            let e = result.expect_err(&at);
                            assert!(e.contains(part), "{at}: `{e}` lacks `{part}`");
                        }
                        None => result.unwrap_or_else(|e| panic!("{at}: {e}")),
                    }
                }
            }
            tick(&mut sim, sc, t, now, &mut trail);
            let run = sim.state.plan_run(run_id).unwrap();
            let e = &t["expect"];
            if let Some(blue) = e["blue"].as_u64() {
                assert_eq!(u64::from(sim.state.table().blue_units()), blue, "{at}");
            }
            if let Some(state) = e["state"].as_str() {
                assert_eq!(run.status.as_str(), state, "{at}: {:?}", run.hold_reason);
            }
            if let Some(step) = e["step"].as_u64() {
                assert_eq!(run.step as u64, step, "{at}");
            }
            if let Some(part) = e["hold_contains"].as_str() {
                let hold = run.hold_reason.as_deref().unwrap_or("");
                assert!(hold.contains(part), "{at}: hold `{hold}` lacks `{part}`");
            }
            if let Some(drain_state) = e["drain"].as_str() {
                let d = sim.state.drains().next_back().expect("a drain");
                assert_eq!(d.state_name(), drain_state, "{at}");
            }
            if let Some(pins) = e["pins"].as_object() {
                let have = sim.state.table().pins();
                assert_eq!(have.len(), pins.len(), "{at}: {have:?}");
                for (user, color) in pins {
                    assert_eq!(
                        have.get(user).map(|c| c.default_lane()),
                        color.as_str().map(Into::into),
                        "{at}"
                    );
                }
            }
            if let Some(met) = e.get("met") {
                assert_eq!(run.met_rto(), met.as_bool(), "{at}");
            }
        }
        let want: Vec<String> = sc["trail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(trail, want, "{name}: every step started and done once, in order");
        // Every step record has a start and, when done, a settle time after it.
        let run = sim.state.plan_runs().next_back().unwrap();
        for r in &run.steps {
            if let Some(done) = r.done_ms {
                assert!(done >= r.started_ms, "{name}");
            }
        }
    }
}

#[test]
fn a_second_run_or_an_operator_drain_is_refused_while_a_run_is_active() {
    let zones = Zones::default();
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let genesis = State::genesis(Genesis { scheme, blue_units: 50 }, zones.clone()).unwrap();
    let mut sim = Sim { genesis: genesis.clone(), state: genesis, log: Vec::new() };
    let wire: WirePlan = serde_json::from_value(serde_json::json!({
        "name": "p", "rto_ms": 1000,
        "steps": [{"type": "dial", "blue_percent": 0.0}]
    }))
    .unwrap();
    sim.apply(0, "alice", Command::PutPlan { plan: wire.to_plan(&zones).unwrap() }).unwrap();
    let start = |revision| Command::StartPlanRun {
        plan: "p".into(),
        revision,
        drill_hold_ms: None,
        restores_maps: false,
    };
    let e = sim.apply(1, "alice", start(2)).unwrap_err();
    assert!(e.contains("revision 1, not the expected revision 2"), "{e}");
    sim.apply(1, "alice", start(1)).unwrap();
    let e = sim.apply(2, "alice", start(1)).unwrap_err();
    assert!(e.contains("plan run 1 is still active"), "{e}");
    // Exactly the next step: a done before a start, or a step out of order, is refused.
    let done = Command::PlanStepDone { run: 1, step: 0, converged_ms: None, samples: vec![] };
    assert!(sim.apply(3, "plan:1", done.clone()).unwrap_err().contains("step"));
    let started = |step| Command::PlanStepStarted { run: 1, step, drain: None, samples: vec![] };
    assert!(sim.apply(3, "plan:1", started(1)).is_err());
    sim.apply(3, "plan:1", started(0)).unwrap();
    // A duplicate from another replica (same command again) is refused, not applied twice.
    assert!(sim.apply(3, "plan:1", started(0)).is_err());
    sim.apply(4, "plan:1", done.clone()).unwrap();
    assert!(sim.apply(4, "plan:1", done).is_err());
    assert_eq!(sim.state.table().blue_units(), 0);
    assert_eq!(sim.state.plan_run(1).unwrap().status.as_str(), "completed");
    sim.restart();
}

/// The staged loop's part of a tick: the unit change in progress (a plan's hold or loss-less
/// step) moves on when `all_applied` says every live subscriber has its barrier version.
fn staged(sim: &mut Sim, now: u64, all_applied: bool) -> Option<String> {
    let change = sim.state.units_change()?.clone();
    let barrier = tidegate::core::FreezeBarrier {
        version: change.phases.barrier_version(),
        all_applied,
        behind: if all_applied { String::new() } else { "gw-1 (az-b, on v3)".into() },
    };
    let (command, said) = match change.decide(now, &barrier)? {
        tidegate::core::StagedStep::Switch => (Command::SwitchUnits, "switch".to_owned()),
        tidegate::core::StagedStep::Unfreeze { aborted, .. } => {
            (Command::UnfreezeUnits { aborted }, format!("unfreeze aborted={aborted}"))
        }
    };
    sim.apply(now, "units", command).expect("the staged loop's command applies");
    Some(said)
}

/// Issue 46, seed 003's order as one plan: hold units 0-19 and global writes -> wait for the
/// replica's catch-up (a precondition) -> move the held units (made at once inside the hold,
/// even with the plan's `freeze_window`) -> release. The hold step ends when every live
/// subscriber has the freeze, not before; the move changes owners while every write of those
/// users is refused; the release thaws them with their new owner. A subscriber that never
/// applies the freeze fails the run at the window with nothing held and nothing moved. Holds
/// must pair with releases, and need the plan's `freeze_window`.
#[test]
fn a_plan_holds_writes_across_a_data_layer_step_and_moves_inside_the_hold() {
    let plan_json = serde_json::json!({
        "name": "promote-orders", "rto_ms": 60000, "freeze_ms": 5000,
        "preconditions": [{"name": "replica_caught_up", "promql": "pg_replication_lag_bytes == 0"}],
        "steps": [
            {"type": "hold", "units": [{"units": "0-19"}], "global": true, "hold": "10m"},
            {"type": "wait_precondition", "name": "replica_caught_up"},
            {"type": "move_units", "moves": [{"units": "0-19", "zone": "az-a"}]},
            {"type": "release"},
        ],
    });
    let sc = serde_json::json!({});
    let zones = Zones::default();
    let start = || {
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let genesis = State::genesis(Genesis { scheme, blue_units: 50 }, zones.clone()).unwrap();
        let mut sim = Sim { genesis: genesis.clone(), state: genesis, log: Vec::new() };
        let wire: WirePlan = serde_json::from_value(plan_json.clone()).unwrap();
        let plan = wire.to_plan(&zones).unwrap();
        let put = Command::PutPlan { plan };
        assert_eq!(put.format_level(), 10, "older replicas cannot read a hold step");
        sim.apply(0, "alice", put).unwrap();
        let start = Command::StartPlanRun {
            plan: "promote-orders".into(),
            revision: 1,
            drill_hold_ms: None,
            restores_maps: false,
        };
        sim.apply(0, "alice", start).unwrap();
        sim
    };
    let green_of = |state: &State| {
        let t = state.table();
        (0..20).filter(|u| t.map().owner(*u) == ZoneId::GREEN).count()
    };

    // 1. Every subscriber applies the freeze at t=500; the replica catches up at t=2000.
    let mut sim = start();
    let mut trail = Vec::new();
    let mut phases = Vec::new();
    for now in (0..=4000).step_by(250) {
        let all_applied = now >= 500;
        if let Some(p) = staged(&mut sim, now, all_applied) {
            phases.push(format!("{now}: {p}"));
        }
        let t = serde_json::json!({"precondition": now >= 2000});
        tick(&mut sim, &sc, &t, now, &mut trail);
        let table = sim.state.table();
        let run = sim.state.plan_runs().next_back().unwrap().clone();
        if (1..3).contains(&run.step) {
            // Between the hold and the release: 0-19 and global writes refused everywhere.
            assert_eq!(table.frozen_in(None).map(ToString::to_string).as_deref(), Some("0-19"));
            assert!(table.global().frozen, "t={now}");
        }
        if now < 2000 {
            assert_eq!(green_of(&sim.state), 0, "nothing moves before the catch-up (t={now})");
        }
        if now == 250 {
            assert_eq!((run.step, run.in_step), (0, true), "the hold step waits to be held");
        }
    }
    let run = sim.state.plan_runs().next_back().unwrap().clone();
    assert_eq!(run.status.as_str(), "completed", "{:?} {trail:?}", run.fail_reason);
    assert_eq!(green_of(&sim.state), 20, "the held units moved");
    assert!(sim.state.table().frozen().is_empty() && !sim.state.table().global().frozen);
    assert!(sim.state.units_change().is_none());
    assert_eq!(phases, ["500: switch"], "held by the loop; the release is the plan's");
    assert_eq!(
        trail,
        ["start 0", "freeze 0", "start 1", "done 1", "start 2", "freeze 2", "start 3", "done 3"]
    );
    sim.restart();

    // 2. A subscriber that never applies the freeze: the run fails at the window, nothing held.
    let mut sim = start();
    let mut trail = Vec::new();
    for now in (0..=8000).step_by(250) {
        staged(&mut sim, now, false);
        tick(&mut sim, &sc, &serde_json::json!({"precondition": true}), now, &mut trail);
    }
    let run = sim.state.plan_runs().next_back().unwrap().clone();
    assert_eq!(run.status.as_str(), "failed");
    assert!(run.fail_reason.as_deref().unwrap_or("").contains("5000 ms"), "{:?}", run.fail_reason);
    assert_eq!(green_of(&sim.state), 0);
    assert!(sim.state.table().frozen().is_empty() && !sim.state.table().global().frozen);
    assert_eq!(trail, ["start 0", "freeze 0"]);

    // 3. Holds pair with releases and need the plan's freeze_window.
    let bad = |steps: Value, freeze: bool| {
        let mut p = serde_json::json!({"name": "p", "rto_ms": 1000, "steps": steps});
        if freeze {
            p["freeze_ms"] = 5000.into();
        }
        let wire: WirePlan = serde_json::from_value(p).unwrap();
        let plan = wire.to_plan(&zones).unwrap();
        tidegate::core::validate_plan(&plan, &zones, 100).unwrap_err()
    };
    let hold = serde_json::json!({"type": "hold", "units": [{"units": "0-9"}], "hold": "1m"});
    let release = serde_json::json!({"type": "release"});
    assert!(bad(serde_json::json!([hold, release]), false).contains("freeze_window"));
    assert!(bad(serde_json::json!([hold]), true).contains("never released"));
    assert!(bad(serde_json::json!([release]), true).contains("without a hold"));
    assert!(bad(serde_json::json!([hold, hold, release]), true).contains("inside the hold"));
}
