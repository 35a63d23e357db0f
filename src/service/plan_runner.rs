//! The plan runner: the loop that reads what the active plan run's step waits for, and submits
//! the run's next command.
//!
//! Like the drain runner it holds no run state of its own: every tick it takes the active run
//! from the replicated state, reads what the pure `PlanRun::decide` needs (the linked drain, the
//! dial step's capacity verdict, a precondition, a zone's MQ backlog), and submits the decided
//! command through the coordinator as `plan:<id>`. A restart (or another replica) picks up at the
//! run's persisted step; a duplicate from another replica loses the compare-and-set on the
//! version or is refused by "exactly the next step" in `State::apply`. Holds are logged once per
//! distinct reason (the comparison is with the run's persisted `hold_reason`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{
    Audit, Command, CommandError, Decision, Envelope, HttpCall, PlanRun, PlanStep, Reading,
    RunReadings, RunStatus, StepDefaults, Verdict, ZoneId, ZoneSample,
};
use crate::service::capacity::Capacities;
use crate::service::coordinator::{Coordinator, SubmitError};
use crate::service::drain_runner::truncate_reason;
use crate::service::health::Health;
use crate::service::lane_membership::Lanes;
use crate::service::preconditions::Preconditions;
use crate::service::receivers;
use crate::service::subscribers::Subscribers;

/// What the runner reads and writes through.
pub struct Runner {
    pub coordinator: Arc<Coordinator>,
    pub health: Arc<Health>,
    pub subscribers: Arc<Subscribers>,
    pub lanes: Arc<Lanes>,
    pub capacities: Arc<Capacities>,
    pub preconditions: Arc<Preconditions>,
    /// How drains of each mode step (the configuration's defaults).
    pub maintenance: StepDefaults,
    pub evacuate: StepDefaults,
    pub tick: Duration,
    pub now_ms: fn() -> u64,
    /// Who claims HTTP steps' calls, in the audit (`[node] id`, else the process).
    pub caller: String,
}

/// Runs until `shutdown` completes.
pub async fn run(runner: Runner, shutdown: impl Future<Output = ()>) {
    let runner = Arc::new(runner);
    tokio::pin!(shutdown);
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + runner.tick, runner.tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last problem reported: a refusal that repeats every tick (a drill's restore waiting for
    // an operator's drain to end) is logged once, not once per tick.
    let mut last_problem: Option<String> = None;
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let r = Arc::clone(&runner);
        let problem = match tokio::task::spawn_blocking(move || tick_once(&r)).await {
            Ok(problem) => problem,
            Err(e) => Some(format!("tidegate: plan runner tick failed: {e}")),
        };
        if let Some(message) = worth_logging(&mut last_problem, problem) {
            tracing::warn!(
                component = "plan_runner",
                "{}",
                message.strip_prefix("tidegate: ").unwrap_or(&message)
            );
        }
    }
}

/// The problem to log, if it is not the one logged last (`None` ends a streak: the same problem
/// coming back later is logged again).
fn worth_logging(last: &mut Option<String>, problem: Option<String>) -> Option<String> {
    if problem == *last {
        return None;
    }
    last.clone_from(&problem);
    problem
}

/// One decision for the active run, if any (blocking: reads may do HTTP, the log fsyncs).
/// Returns the problem to report when the decided command could not be submitted.
pub fn tick_once(runner: &Runner) -> Option<String> {
    let now = (runner.now_ms)();
    let state = runner.coordinator.state();
    crate::telemetry::publish_run_progress(&state, now);
    let run = state.active_run().cloned()?;
    let table = state.table();
    let zones = table.zones().clone();
    let step = run.plan.steps.get(run.step).cloned();
    let waiting = run.status == RunStatus::Running && run.in_step;
    // A dial or zone-move step of a named domain is judged and stepped on that domain's view
    // (its map in the default place), as drains of that domain are.
    let view = step.as_ref().and_then(|s| table.view_of(s.named_domain()));
    let step_blue_units = view.as_ref().map_or(table.blue_units(), |v| v.blue_units());
    // A zone move among three or more zones is a zone drain: what its zone owns in its domain.
    let zone_units = match &step {
        Some(s @ PlanStep::MoveZone { zone, .. }) => zones
            .color_in(zone)
            .and_then(|c| table.map_of(s.named_domain()).map(|m| m.count(c)))
            .unwrap_or(0),
        _ => 0,
    };
    // A zone move among three or more zones about to start: who may receive, judged now.
    let receivers = match &step {
        Some(PlanStep::MoveZone { zone, mode, .. })
            if run.status == RunStatus::Running && !run.in_step && !zones.is_two() =>
        {
            zones
                .color_in(zone)
                .map(|source| step_receivers(runner, &state, &run, source, *mode, now))
        }
        _ => None,
    };
    let mut dial_capacity = Verdict::Unchecked;
    let mut precondition = None;
    let mut backlog = None;
    if waiting {
        match &step {
            Some(s @ PlanStep::Dial { .. }) => {
                let to = PlanRun::step_target(s, &zones, table.units(), step_blue_units);
                dial_capacity =
                    runner.capacities.judge_dial(view.as_ref().unwrap_or(table), to, now);
            }
            Some(PlanStep::MoveUnits { moves }) => {
                // The default domain's map after the moves, judged per receiving zone; a move
                // the state refuses is reported when the step is submitted.
                let resolved: Option<Vec<crate::core::UnitMove>> = moves
                    .iter()
                    .map(|m| {
                        Some(crate::core::UnitMove {
                            units: m.units.clone(),
                            zone: zones.color_in(&m.zone)?,
                            domain: m.domain.clone(),
                        })
                    })
                    .collect();
                if let Some(Ok((next, _))) = resolved.map(|r| state.moved_maps(&r)) {
                    dial_capacity = runner
                        .capacities
                        .judge_map(table, &next, now)
                        .into_iter()
                        .map(|(_, v)| v)
                        .find(Verdict::blocks)
                        .unwrap_or(Verdict::Unchecked);
                }
            }
            Some(PlanStep::WaitPrecondition { name }) => {
                precondition = run
                    .plan
                    .preconditions
                    .iter()
                    .find(|p| &p.name == name)
                    .map(|p| runner.preconditions.check(p));
            }
            Some(PlanStep::WaitConsumed { zone }) => {
                let color = zones.color_in(zone).unwrap_or(ZoneId::BLUE);
                let since = run.steps.last().map_or(run.started_ms, |s| s.started_ms);
                backlog = runner.lanes.total_half_lag(color, since, now);
            }
            _ => {}
        }
    }
    let drain = run.drain.and_then(|id| state.drain(id));
    let restore_into = if run.status == RunStatus::Holding && now >= run.hold_until_ms.unwrap_or(0)
    {
        restore_health(runner, &run, table, now)
    } else {
        Ok(())
    };
    let readings = RunReadings {
        restore_into,
        receivers,
        now_ms: now,
        zones: &zones,
        units: table.units(),
        blue_units: step_blue_units,
        zone_units,
        drain,
        maintenance: runner.maintenance,
        evacuate: runner.evacuate,
        dial_capacity,
        precondition,
        backlog,
    };
    let decision = run.decide(&readings)?;
    let names: Vec<&str> = zones.iter().map(|(_, z)| z.name.as_str()).collect();
    let samples = || sample_zones(&runner.health, &names, now);
    let (command, reason) = match decision {
        Decision::StartStep { step, drain } => {
            let reason = format!(
                "plan {} step {} of {}: {}",
                run.plan.name,
                step + 1,
                run.plan.steps.len(),
                run.step_label(step)
            );
            (Command::PlanStepStarted { run: run.id, step, drain, samples: samples() }, reason)
        }
        Decision::DoneStep { step } => {
            let converged_ms =
                drain.and_then(|d| d.last_step_version.map(|v| (v, d))).and_then(|(v, d)| {
                    // As the drain judged it: an evacuation does not wait for its own zone's clients.
                    let excluded = (d.plan.mode == crate::core::DrainMode::Evacuate)
                        .then_some(d.plan.zone.as_str());
                    let c = runner.subscribers.convergence_excluding(v, now, excluded);
                    (c.live > 0 && c.converged == c.live).then(|| {
                        runner
                            .subscribers
                            .list(now)
                            .iter()
                            .filter(|(s, live)| *live && s.applied_version >= v)
                            .filter(|(s, _)| excluded != Some(s.zone.as_str()))
                            .filter_map(|(s, _)| s.applied_at_ms)
                            .max()
                            .unwrap_or(now)
                    })
                });
            let reason = format!(
                "plan {} step {} of {} done: {}",
                run.plan.name,
                step + 1,
                run.plan.steps.len(),
                run.step_label(step)
            );
            let samples = samples();
            (Command::PlanStepDone { run: run.id, step, converged_ms, samples }, reason)
        }
        Decision::FreezeStep { step } => {
            let reason = format!(
                "plan {} step {} of {} (loss-less, freeze_window): {}",
                run.plan.name,
                step + 1,
                run.plan.steps.len(),
                run.step_label(step)
            );
            (Command::PlanStepFreeze { run: run.id, step }, reason)
        }
        Decision::Hold { reason } => {
            let reason = truncate_reason(reason);
            if run.hold_reason.as_deref() == Some(reason.as_str()) {
                return None;
            }
            (Command::PlanRunHold { run: run.id, reason: reason.clone() }, reason)
        }
        Decision::Fail { reason } => {
            (Command::FailPlanRun { run: run.id, reason: reason.clone() }, reason)
        }
        Decision::Call { step, attempt, until_ms } => {
            let Some(PlanStep::Http(call)) = run.plan.steps.get(step).cloned() else {
                return None;
            };
            return call_out(runner, &run, state.version(), step, attempt, until_ms, &call, now);
        }
        Decision::Restore => {
            let why = if run.rolling_back {
                "rolling back: restoring the table the run started from"
            } else {
                "drill hold is over: restoring the table the drill started from"
            };
            (Command::PlanRestore { run: run.id }, why.to_owned())
        }
    };
    let hold_on_refusal = run.status == RunStatus::Running;
    match submit(&runner.coordinator, state.version(), run.id, now, command, reason) {
        None => None,
        Some(SubmitError::Command(e)) if hold_on_refusal => {
            let mut problem = format!(
                "tidegate: plan run {}: the core refused the runner's command: {e}",
                run.id
            );
            let reason = truncate_reason(format!("holding: the runner's command was refused: {e}"));
            if run.hold_reason.as_deref() != Some(reason.as_str()) {
                let hold = Command::PlanRunHold { run: run.id, reason: reason.clone() };
                let version = runner.coordinator.state().version();
                if let Some(e) = submit(&runner.coordinator, version, run.id, now, hold, reason) {
                    problem.push_str(&format!("; could not hold the run either: {e}"));
                }
            }
            Some(problem)
        }
        Some(e) => Some(format!("tidegate: plan run {}: could not submit: {e}", run.id)),
    }
}

/// One attempt of an HTTP step: claim it (compare-and-set), and only if this replica's claim is
/// the one logged, call and log the result. A claim that loses (another replica's won, or the
/// state moved) calls nothing; a claim whose result is never logged lapses at `until_ms` and the
/// next attempt is claimed anew, which is why an action must be safe to repeat.
#[allow(clippy::too_many_arguments)]
fn call_out(
    runner: &Runner,
    run: &PlanRun,
    version: u64,
    step: usize,
    attempt: u32,
    until_ms: u64,
    call: &HttpCall,
    now: u64,
) -> Option<String> {
    let label = format!(
        "plan {} step {} of {}: call `{}` ({} {}) attempt {attempt} of {}, by {}",
        run.plan.name,
        step + 1,
        run.plan.steps.len(),
        call.name,
        call.method,
        call.url,
        call.retries + 1,
        runner.caller
    );
    let claim = Command::PlanCallStarted {
        run: run.id,
        step,
        attempt,
        caller: runner.caller.clone(),
        until_ms,
    };
    let envelope = Envelope {
        expected_version: version,
        command: claim,
        audit: Audit { by: format!("plan:{}", run.id), at_ms: now, reason: truncate_reason(label) },
    };
    match runner.coordinator.submit(&envelope) {
        Ok(s) if s.applied.is_some() => {}
        // Lost the race (another replica claimed, or the state moved): the next tick decides
        // again. Not applied here yet: the claim may be ours, but calling on a maybe is how two
        // replicas call at once; an unconfirmed claim lapses and is retried.
        Ok(_) | Err(SubmitError::Command(CommandError::VersionConflict { .. })) => return None,
        Err(e) => {
            return Some(format!(
                "tidegate: plan run {}: could not claim call `{}`: {e}",
                run.id, call.name
            ));
        }
    }
    let started = std::time::Instant::now();
    let (status, error) = perform(call);
    let elapsed = started.elapsed().as_millis();
    let outcome = match (status, &error) {
        (Some(s), _) => format!("HTTP {s}"),
        (None, Some(e)) => e.clone(),
        (None, None) => "no answer".to_owned(),
    };
    let reason = format!(
        "plan {} step {} of {}: call `{}` ({} {}) attempt {attempt} answered {outcome} after \
         {elapsed} ms",
        run.plan.name,
        step + 1,
        run.plan.steps.len(),
        call.name,
        call.method,
        call.url,
    );
    let done = Command::PlanCallDone { run: run.id, step, attempt, status, error };
    // The result is logged against whatever version the state is at by then (other changes may
    // have landed during the call); a few tries on conflicts, then the claim lapses.
    let mut last = None;
    for _ in 0..5 {
        let envelope = Envelope {
            expected_version: runner.coordinator.state().version(),
            command: done.clone(),
            audit: Audit {
                by: format!("plan:{}", run.id),
                at_ms: (runner.now_ms)(),
                reason: truncate_reason(reason.clone()),
            },
        };
        match runner.coordinator.submit(&envelope) {
            Ok(_) => return None,
            Err(SubmitError::Command(CommandError::VersionConflict { .. })) => continue,
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    Some(format!(
        "tidegate: plan run {}: could not log the result of call `{}` ({outcome}): {}; its claim \
         lapses and the call is retried",
        run.id,
        call.name,
        last.map_or_else(|| "the state kept moving".to_owned(), |e| e.to_string())
    ))
}

/// Makes the HTTP request: the status, or why there was none. The token is read from the
/// environment here and goes only into the request's header.
fn perform(call: &HttpCall) -> (Option<u16>, Option<String>) {
    let token = match &call.token_env {
        Some(env) => match std::env::var(env) {
            Ok(t) if !t.is_empty() => Some(t),
            _ => {
                return (
                    None,
                    Some(format!(
                        "the token's environment variable {env} is not set on this replica"
                    )),
                );
            }
        },
        None => None,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_millis(call.timeout_ms)))
        .build()
        .into();
    let uri = call.url.as_str();
    let mut request = match call.method.as_str() {
        "GET" => ureq::http::Request::get(uri),
        "PUT" => ureq::http::Request::put(uri),
        "PATCH" => ureq::http::Request::patch(uri),
        "DELETE" => ureq::http::Request::delete(uri),
        _ => ureq::http::Request::post(uri),
    };
    if let Some(token) = token {
        request = match &call.token_header {
            Some(h) => request.header(h.as_str(), token),
            None => request.header("authorization", format!("Bearer {token}")),
        };
    }
    // An explicit empty body (`content-length: 0`): some servers answer a POST without one with
    // 411 Length Required.
    let empty: &[u8] = &[];
    let request = match request.body(empty) {
        Ok(r) => r,
        Err(e) => return (None, Some(format!("the request could not be built: {e}"))),
    };
    match agent.run(request) {
        Ok(response) => (Some(response.status().as_u16()), None),
        Err(e) => (None, Some(error_text(&e))),
    }
}

/// A transport error in words, without anything a header carried.
fn error_text(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".to_owned(),
        other => {
            let mut text = other.to_string();
            text.truncate(300);
            text
        }
    }
}

/// Each zone's error rate now, for the run's record.
fn sample_zones(health: &Health, zones: &[&str], now: u64) -> Vec<ZoneSample> {
    zones
        .iter()
        .map(|zone| {
            let h = health.zone(zone, now);
            let (error_rate, requests) = match h.reading {
                Reading::Known { error_rate, requests } => (Some(error_rate), requests),
                Reading::Unknown { .. } => (None, h.requests.unwrap_or(0)),
            };
            ZoneSample { zone: (*zone).to_owned(), error_rate, requests }
        })
        .collect()
}

/// One attempt as `plan:<run>`; `None` when logged or when it lost a version race (the next
/// tick decides again from the new state).
fn submit(
    coordinator: &Coordinator,
    expected_version: u64,
    run: u64,
    now: u64,
    command: Command,
    reason: String,
) -> Option<SubmitError> {
    let envelope = Envelope {
        expected_version,
        command,
        audit: Audit { by: format!("plan:{run}"), at_ms: now, reason: truncate_reason(reason) },
    };
    match coordinator.submit(&envelope) {
        Ok(_) => None,
        Err(SubmitError::Command(CommandError::VersionConflict { .. })) => None,
        Err(e) => Some(e),
    }
}

/// Whether the zone a drill's restore moves users back into may take them: known and not above
/// the evacuation guard's error rate (over the detection window).
/// The receivers of a zone move among three or more zones ([`receivers::choose`] under the
/// step's guard; an automatic run also keeps the hop limit), or why no zone may receive.
fn step_receivers(
    runner: &Runner,
    state: &crate::core::State,
    run: &PlanRun,
    source: ZoneId,
    mode: crate::core::DrainMode,
    now: u64,
) -> Result<Vec<ZoneId>, String> {
    let guard = if mode == crate::core::DrainMode::Evacuate {
        runner.evacuate.guard
    } else {
        runner.maintenance.guard
    };
    let table = state.table();
    let mut choice =
        receivers::choose(&runner.health, state, table, source, guard.max_error_rate, now);
    if run.started_by == crate::service::plan_trigger::AUTO {
        let runs = crate::service::plan_trigger::auto_runs_since_armed(state);
        choice = receivers::for_automatic_run(choice, table, &runs);
    }
    if choice.chosen.is_empty() {
        Err(choice.skipped_reasons().join("; "))
    } else {
        Ok(choice.chosen)
    }
}

fn restore_health(
    runner: &Runner,
    run: &PlanRun,
    table: &crate::core::RoutingTable,
    now: u64,
) -> Result<(), String> {
    // The zones the restore gives units back to, in every domain the run moved.
    let gaining_in = |start: u32, now_blue: u32| match start.cmp(&now_blue) {
        std::cmp::Ordering::Greater => Some(ZoneId::BLUE),
        std::cmp::Ordering::Less => Some(ZoneId::GREEN),
        std::cmp::Ordering::Equal => None,
    };
    let mut gaining: Vec<ZoneId> = Vec::new();
    if let Some(maps) = &run.start_maps {
        // A map restore gives each unit back to its owner at the start.
        for (domain, start) in maps {
            let Some(now_map) = table.map_of(Some(domain)) else { continue };
            for (unit, owner) in start.owners().iter().enumerate() {
                if now_map.owner(unit as u32) != *owner && !gaining.contains(owner) {
                    gaining.push(*owner);
                }
            }
        }
    } else {
        gaining.extend(gaining_in(run.start_blue_units, table.blue_units()));
        for (domain, start) in &run.start_domain_blue_units {
            if let Some(now_blue) = table.blue_units_in(Some(domain))
                && let Some(zone) = gaining_in(*start, now_blue)
                && !gaining.contains(&zone)
            {
                gaining.push(zone);
            }
        }
    }
    let guard = runner.evacuate.guard;
    for zone in gaining {
        let zone = table.zone_of(zone);
        match runner.health.recent(zone, now) {
            // Owning nothing, a live zone reports no outcomes: idle, not dead, when something
            // of it still shows life (a live subscriber, a lane member there).
            Reading::Unknown { why } => match signs_of_life(runner, table, zone, now) {
                Some(_) => {}
                None => {
                    return Err(format!(
                        "{zone}'s health is unknown ({why}) and nothing of it is live (no \
                         subscriber, no lane member)"
                    ));
                }
            },
            Reading::Known { error_rate, requests }
                if requests >= guard.min_requests && error_rate > guard.max_error_rate =>
            {
                return Err(format!(
                    "{zone} fails {:.1} % of {requests} requests, above the guard's {:.1} %",
                    error_rate * 100.0,
                    guard.max_error_rate * 100.0
                ));
            }
            Reading::Known { .. } => {}
        }
    }
    Ok(())
}

/// What shows that an idle zone (one owning no units in any domain) is alive although it
/// reports no outcomes: a live subscriber or a lane member in it. `None` for a zone that owns
/// units (its silence is its own) or shows nothing.
fn signs_of_life(
    runner: &Runner,
    table: &crate::core::RoutingTable,
    zone: &str,
    now: u64,
) -> Option<String> {
    let id = table.zones().color_in(zone)?;
    let owns = table.map().count(id) + table.domains().values().map(|m| m.count(id)).sum::<u32>();
    if owns > 0 {
        return None;
    }
    let subscribers =
        runner.subscribers.list(now).iter().filter(|(s, live)| *live && s.zone == zone).count();
    if subscribers > 0 {
        return Some(format!("{subscribers} live subscriber(s)"));
    }
    let members = runner.lanes.members_by_zone(now)?.get(zone).copied().unwrap_or(0);
    (members > 0).then(|| format!("{members} lane member(s)"))
}

#[cfg(test)]
mod tests {
    use super::worth_logging;

    #[test]
    fn a_repeated_problem_is_logged_once_per_streak() {
        let mut last = None;
        let refused = || Some("restore refused: drain 4 is active".to_owned());
        assert_eq!(worth_logging(&mut last, refused()), refused());
        assert_eq!(worth_logging(&mut last, refused()), None);
        assert_eq!(worth_logging(&mut last, refused()), None);
        let other = Some("could not submit: the log is full".to_owned());
        assert_eq!(worth_logging(&mut last, other.clone()), other);
        assert_eq!(worth_logging(&mut last, None), None);
        // After a clean tick the same refusal is news again.
        assert_eq!(worth_logging(&mut last, refused()), refused());
    }
}
