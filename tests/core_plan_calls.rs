//! HTTP steps in the pure core: what `PlanRun::decide` says is due (claim, wait, retry after the
//! backoff, fail, done), and what `State::apply` accepts (one live claim per attempt, so of two
//! replicas only one calls; a lapsed claim is claimed again; a late result of an old attempt is
//! refused), through a replay of the wire form.

use tidegate::core::{
    Audit, Command, Decision, Envelope, Genesis, Guard, OnBreach, RunReadings, State, StepDefaults,
    UnitMode, UnitScheme, Verdict, Zones,
};
use tidegate::store::{WireCommand, WirePlan};

struct Sim {
    genesis: State,
    state: State,
    log: Vec<Envelope>,
}

impl Sim {
    fn new(steps: serde_json::Value) -> Sim {
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let genesis = State::genesis(Genesis { scheme, blue_units: 50 }, Zones::default()).unwrap();
        let mut sim = Sim { genesis: genesis.clone(), state: genesis, log: Vec::new() };
        let wire: WirePlan = serde_json::from_value(
            serde_json::json!({"name": "p", "rto_ms": 60000, "steps": steps}),
        )
        .unwrap();
        sim.apply(
            0,
            "alice",
            Command::PutPlan { plan: wire.to_plan(&tidegate::core::Zones::default()).unwrap() },
        )
        .unwrap();
        sim.apply(
            1,
            "alice",
            Command::StartPlanRun {
                plan: "p".into(),
                revision: 1,
                drill_hold_ms: None,
                restores_maps: false,
            },
        )
        .unwrap();
        sim
    }

    fn apply(&mut self, at_ms: u64, by: &str, command: Command) -> Result<(), String> {
        self.apply_at(self.state.version(), at_ms, by, command)
    }

    fn apply_at(
        &mut self,
        version: u64,
        at_ms: u64,
        by: &str,
        command: Command,
    ) -> Result<(), String> {
        let env = Envelope {
            expected_version: version,
            command,
            audit: Audit { by: by.into(), at_ms, reason: "test".into() },
        };
        if let Some((next, _)) = self.state.apply(&env).map_err(|e| e.to_string())? {
            self.state = next;
            self.log.push(env);
        }
        Ok(())
    }

    fn decide(&self, now_ms: u64) -> Option<Decision> {
        let run = self.state.active_run()?;
        let table = self.state.table();
        let d = StepDefaults {
            step_units: 25,
            interval_ms: 1000,
            guard: Guard {
                max_error_rate: 0.05,
                min_requests: 100,
                breaches: 2,
                on_breach: OnBreach::Pause,
            },
        };
        run.decide(&RunReadings {
            now_ms,
            zones: table.zones(),
            units: table.units(),
            blue_units: table.blue_units(),
            zone_units: 0,
            drain: None,
            maintenance: d,
            evacuate: d,
            dial_capacity: Verdict::Unchecked,
            precondition: Some(Ok(true)),
            backlog: Some(0),
            restore_into: Ok(()),
            receivers: None,
        })
    }

    fn restart(&mut self) {
        let mut state = self.genesis.clone();
        for env in &self.log {
            let wire =
                serde_json::to_string(&WireCommand::encode(&env.command, state.table().zones()))
                    .unwrap();
            assert!(!wire.contains("s3cret"), "{wire}");
            let back: WireCommand = serde_json::from_str(&wire).unwrap();
            let env = Envelope { command: back.to_command(state.table()).unwrap(), ..env.clone() };
            state = state.apply(&env).expect("replays").expect("changes").0;
        }
        assert_eq!(state, self.state, "a replay rebuilds exactly the state");
    }
}

fn call_step(retries: u32) -> serde_json::Value {
    serde_json::json!([
        {"type": "http", "name": "promote", "url": "https://db-admin.internal/promote?zone=az-a",
         "token_env": "DB_ADMIN_TOKEN", "timeout": "5s", "retries": retries},
        {"type": "dial", "blue_percent": 0.0}
    ])
}

fn claim(attempt: u32, caller: &str, until_ms: u64) -> Command {
    Command::PlanCallStarted { run: 1, step: 0, attempt, caller: caller.into(), until_ms }
}

fn result(attempt: u32, status: Option<u16>) -> Command {
    Command::PlanCallDone { run: 1, step: 0, attempt, status, error: None }
}

fn start_step(sim: &mut Sim) {
    let started = Command::PlanStepStarted { run: 1, step: 0, drain: None, samples: vec![] };
    sim.apply(2, "plan:1", started).unwrap();
}

#[test]
fn two_replicas_claiming_the_same_attempt_one_claim_is_logged() {
    let mut sim = Sim::new(call_step(3));
    start_step(&mut sim);
    // Both replicas decide the same claim at the same version.
    let Some(Decision::Call { step: 0, attempt: 1, until_ms }) = sim.decide(10) else {
        panic!("a claim is due: {:?}", sim.decide(10));
    };
    assert_eq!(until_ms, 10 + 5_000 + tidegate::core::CALL_CLAIM_MARGIN_MS);
    let version = sim.state.version();
    sim.apply_at(version, 10, "plan:1", claim(1, "replica-a", until_ms)).unwrap();
    let e = sim.apply_at(version, 10, "plan:1", claim(1, "replica-b", until_ms)).unwrap_err();
    assert!(e.contains("not the expected version"), "{e}");
    // Even at the new version, a second claim of a live attempt is refused.
    let e = sim.apply(11, "plan:1", claim(2, "replica-b", until_ms + 1)).unwrap_err();
    assert!(e.contains("claim is still live"), "{e}");
    // While the claim lives nothing else is due; the step is not done before a success.
    assert_eq!(sim.decide(100), None);
    let done = Command::PlanStepDone { run: 1, step: 0, converged_ms: None, samples: vec![] };
    assert!(sim.apply(100, "plan:1", done.clone()).unwrap_err().contains("call"));
    sim.apply(120, "plan:1", result(1, Some(204))).unwrap();
    let run = sim.state.plan_run(1).unwrap();
    assert!(run.current_calls()[0].ok);
    assert_eq!(run.current_calls()[0].caller, "replica-a");
    assert_eq!(sim.decide(121), Some(Decision::DoneStep { step: 0 }));
    assert!(
        sim.apply(121, "plan:1", claim(2, "replica-b", 9_999)).is_err(),
        "no call after success"
    );
    sim.apply(121, "plan:1", done).unwrap();
    sim.restart();
}

#[test]
fn failures_are_retried_after_the_backoff_then_the_run_fails_with_the_status() {
    let mut sim = Sim::new(call_step(2));
    start_step(&mut sim);
    let mut now = 10;
    for attempt in 1..=3 {
        let Some(Decision::Call { attempt: a, until_ms, .. }) = sim.decide(now) else {
            panic!("attempt {attempt} is due at {now}: {:?}", sim.decide(now));
        };
        assert_eq!(a, attempt);
        sim.apply(now, "plan:1", claim(attempt, "replica-a", until_ms)).unwrap();
        now += 50;
        sim.apply(now, "plan:1", result(attempt, Some(500))).unwrap();
        let hold = sim.state.plan_run(1).unwrap().hold_reason.clone().unwrap();
        assert!(hold.contains("HTTP 500"), "{hold}");
        if attempt < 3 {
            let backoff = tidegate::core::call_backoff_ms(attempt);
            assert_eq!(backoff, 1000 << (attempt - 1));
            assert_eq!(sim.decide(now + backoff - 1), None, "not before the backoff");
            now += backoff;
        }
    }
    // A fourth claim is refused by the core, and the runner decides to fail.
    assert!(sim.apply(now + 60_000, "plan:1", claim(4, "replica-a", now + 70_000)).is_err());
    let Some(Decision::Fail { reason }) = sim.decide(now + 1) else { panic!("fails") };
    assert!(reason.contains("HTTP 500") && reason.contains("3 time(s)"), "{reason}");
    assert!(reason.contains("https://db-admin.internal/promote?zone=az-a"), "{reason}");
    sim.apply(now + 1, "plan:1", Command::FailPlanRun { run: 1, reason }).unwrap();
    assert_eq!(sim.state.table().blue_units(), 50, "the dial step never ran");
    sim.restart();
}

#[test]
fn a_claim_whose_caller_died_lapses_and_is_claimed_again() {
    let mut sim = Sim::new(call_step(1));
    start_step(&mut sim);
    let until = 10 + 5_000 + tidegate::core::CALL_CLAIM_MARGIN_MS;
    sim.apply(10, "plan:1", claim(1, "replica-a", until)).unwrap();
    // replica-a dies mid-call: no result. Before the claim lapses nothing is due.
    assert_eq!(sim.decide(until - 1), None);
    // After it lapsed and the backoff, replica-b claims attempt 2 (the action is repeated).
    let due = until + tidegate::core::call_backoff_ms(1);
    assert_eq!(sim.decide(due - 1), None);
    let Some(Decision::Call { attempt: 2, until_ms, .. }) = sim.decide(due) else {
        panic!("{:?}", sim.decide(due))
    };
    // The core refuses a claim of attempt 2 while attempt 1's claim still lives.
    assert!(sim.apply(until - 1, "plan:1", claim(2, "replica-b", until_ms)).is_err());
    sim.apply(due, "plan:1", claim(2, "replica-b", until_ms)).unwrap();
    // replica-a's late result for attempt 1 is refused: attempt 2 is the open one.
    let e = sim.apply(due + 1, "plan:1", result(1, Some(200))).unwrap_err();
    assert!(e.contains("attempt"), "{e}");
    sim.apply(due + 5, "plan:1", result(2, Some(200))).unwrap();
    let run = sim.state.plan_run(1).unwrap();
    let calls = run.current_calls();
    assert!(calls[0].outcome().contains("lapsed"), "{}", calls[0].outcome());
    assert_eq!((calls[1].caller.as_str(), calls[1].ok), ("replica-b", true));
    assert_eq!(sim.decide(due + 6), Some(Decision::DoneStep { step: 0 }));
    sim.restart();
}

#[test]
fn an_unexpected_status_fails_and_expect_status_is_exact() {
    let mut sim = Sim::new(serde_json::json!([
        {"type": "http", "name": "scale", "url": "http://autoscaler/scale", "method": "put",
         "expect_status": 202, "retries": 0}
    ]));
    start_step(&mut sim);
    let plan = &sim.state.plan_run(1).unwrap().plan;
    let tidegate::core::PlanStep::Http(call) = &plan.steps[0] else { panic!() };
    assert_eq!((call.method.as_str(), call.timeout_ms), ("PUT", 5_000), "defaults and case");
    sim.apply(10, "plan:1", claim(1, "r", 20_000)).unwrap();
    sim.apply(11, "plan:1", result(1, Some(200))).unwrap();
    let Some(Decision::Fail { reason }) = sim.decide(12) else { panic!("{:?}", sim.decide(12)) };
    assert!(reason.contains("expecting HTTP 202; last: HTTP 200"), "{reason}");
}

#[test]
fn a_plan_with_an_http_step_needs_format_level_2() {
    let wire: WirePlan = serde_json::from_value(serde_json::json!({
        "name": "p", "rto_ms": 1000, "steps": call_step(1)
    }))
    .unwrap();
    assert_eq!(
        Command::PutPlan { plan: wire.to_plan(&tidegate::core::Zones::default()).unwrap() }
            .format_level(),
        2
    );
    assert_eq!(claim(1, "r", 2).format_level(), 2);
    assert_eq!(result(1, None).format_level(), 2);
    for c in [claim(1, "r", 2), result(1, None)] {
        assert!(Command::ACTIONS.contains(&c.action()));
    }
}
