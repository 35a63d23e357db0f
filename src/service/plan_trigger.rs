//! The plan trigger loop: starts a plan's run by itself, signed `by: auto`, when its trigger
//! fires (its zone down long enough, or every lane consumer of a zone gone).
//!
//! I/O only: every tick it reads each zone's health and lane members, keeps since when a zone has
//! been down (or without consumers), and for every plan with a trigger asks the pure
//! `core::decide_trigger`; on fire it calls `service::plan_start::start`, the function the
//! HTTP run route calls. It runs on every replica (when `[plans] triggers = true`): two replicas
//! firing together are harmless, because the start is a compare-and-set on the state version and
//! `State::apply` refuses a start while a run is active. The cooldown is measured from the last
//! automatic run in the replicated state, so a restart or another replica respects it. "Down
//! since" lives in memory: after a restart the zone must be seen down for the whole period again.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::core::{
    Guard, PlanRun, PlanStep, Reading, State, StoredPlan, TriggerDecision, TriggerInputs,
    decide_trigger, trigger_zone,
};
use crate::service::capacity::Capacities;
use crate::service::coordinator::Coordinator;
use crate::service::health::Health;
use crate::service::lane_membership::Lanes;
use crate::service::plan_start::{self, StartRequest};
use crate::service::preconditions::Preconditions;
use crate::telemetry;

/// Who an automatic run is signed by.
pub const AUTO: &str = "auto";

/// What the loop reads and writes through.
pub struct Triggers {
    /// `[plans] triggers`: when off, the loop only registers the metrics.
    pub enabled: bool,
    pub coordinator: Arc<Coordinator>,
    pub health: Arc<Health>,
    pub lanes: Arc<Lanes>,
    pub capacities: Arc<Capacities>,
    pub preconditions: Arc<Preconditions>,
    /// A zone is down when its error rate is at least this (`health.down_error_rate`).
    pub down_error_rate: f64,
    /// The receiving zone must pass this guard (the evacuation guard).
    pub guard: Guard,
    /// `[plans] auto_window` and `auto_max_share_percent`: the caps on automatic runs.
    pub auto_window_ms: u64,
    pub auto_max_share_percent: f64,
    pub tick: Duration,
    pub now_ms: fn() -> u64,
    pub observed: Mutex<Observed>,
}

/// What this replica has seen, in memory.
#[derive(Debug, Default)]
pub struct Observed {
    down_since: HashMap<String, u64>,
    silent_since: HashMap<String, u64>,
    had_consumers: HashMap<String, bool>,
    consumers_gone_since: HashMap<String, u64>,
    /// The last refusal kind per plan, so a refusal is logged and counted once per episode.
    refused: HashMap<String, &'static str>,
    primed: HashSet<String>,
}

/// Runs until `shutdown` completes.
pub async fn run(triggers: Triggers, shutdown: impl Future<Output = ()>) {
    let triggers = Arc::new(triggers);
    tokio::pin!(shutdown);
    let mut ticker =
        tokio::time::interval_at(tokio::time::Instant::now() + triggers.tick, triggers.tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let t = Arc::clone(&triggers);
        if let Err(e) = tokio::task::spawn_blocking(move || tick_once(&t)).await {
            tracing::info!("plan trigger tick failed: {e}");
        }
    }
}

/// One look at every plan with a trigger (blocking: health and preconditions may do HTTP).
pub fn tick_once(t: &Triggers) {
    let now = (t.now_ms)();
    let state = t.coordinator.state();
    let plans: Vec<StoredPlan> =
        state.plans().filter(|p| p.plan.trigger.is_some()).cloned().collect();
    if plans.is_empty() {
        return;
    }
    let zones = state.table().zones().clone();
    let mut observed = t.observed.lock().unwrap_or_else(|p| p.into_inner());
    if !t.enabled {
        for stored in &plans {
            if observed.primed.insert(stored.plan.name.clone()) {
                telemetry::prime_plan_trigger(&stored.plan.name);
            }
        }
        return;
    }
    // Down and silent are judged over the detection window, the receiving zone's guard over
    // the whole window (as the drain guard judges it).
    let recent: HashMap<String, Reading> =
        zones.iter().map(|(_, z)| &z.name).map(|z| (z.clone(), t.health.recent(z, now))).collect();
    let healths: HashMap<String, Reading> = zones
        .iter()
        .map(|(_, z)| &z.name)
        .map(|z| (z.clone(), t.health.zone(z, now).reading))
        .collect();
    observe(&mut observed, t, &recent, now);
    let auto_runs = auto_runs_since_armed(&state);
    for stored in &plans {
        let name = &stored.plan.name;
        if observed.primed.insert(name.clone()) {
            telemetry::prime_plan_trigger(name);
        }

        let quiet = decide_trigger(&stored.plan, &cheap_inputs(&observed, stored, &state, now));
        if quiet == TriggerDecision::Quiet {
            observed.refused.remove(name);
            continue;
        }
        let start: Vec<_> = crate::core::start_preconditions(&stored.plan).cloned().collect();
        let preconditions = t.preconditions.check_all(&start);
        let mut inputs = cheap_inputs(&observed, stored, &state, now);
        inputs.preconditions = &preconditions;
        inputs.busy = plan_start::busy_reason(&state);
        if let Some(receiving) = receiving_zone(stored, &zones) {
            inputs.receiving_health = judge_health(&t.guard, &receiving, healths.get(&receiving));
        }
        inputs.receiving_capacity = judge_capacity(t, &state, stored, now);
        let caps = crate::core::AutomationCaps {
            automation: state.automation(),
            runs: &auto_runs,
            window_ms: t.auto_window_ms,
            max_share_percent: t.auto_max_share_percent,
        };
        let receiving = receiving_zone(stored, &zones);
        inputs.caps = crate::core::check_caps(
            &caps,
            name,
            receiving.as_deref(),
            share_moved(&state, stored),
            now,
        );
        match decide_trigger(&stored.plan, &inputs) {
            TriggerDecision::Quiet => {
                observed.refused.remove(name);
            }
            TriggerDecision::Blocked { kind, why } => refuse(&mut observed, name, kind, &why),
            TriggerDecision::Fire(reason) => {
                let request = StartRequest {
                    plan: name.clone(),
                    plan_revision: Some(stored.revision),
                    expected_version: Some(state.version()),
                    drill_hold_ms: None,
                    by: AUTO.to_owned(),
                    reason: reason.clone(),
                    now_ms: now,
                };
                match plan_start::start(&t.coordinator, &t.preconditions, request) {
                    Ok((_, id)) => {
                        observed.refused.remove(name);
                        telemetry::count_plan_trigger(name);
                        tracing::info!("plan {name}: started run {id} by auto: {reason}");
                    }
                    // Lost the compare-and-set to another replica or caller, or the state moved
                    // on: the next tick decides again from the new state.
                    Err(e) => refuse(&mut observed, name, "start_refused", &e.to_string()),
                }
            }
        }
    }
}

/// Updates since when each zone is down and without lane consumers.
fn observe(o: &mut Observed, t: &Triggers, healths: &HashMap<String, Reading>, now: u64) {
    for (zone, reading) in healths {
        match reading {
            Reading::Known { error_rate, requests }
                if *requests > 0 && *error_rate >= t.down_error_rate =>
            {
                o.down_since.entry(zone.clone()).or_insert(now);
                o.silent_since.remove(zone);
            }
            // A reading that cannot be read breaks neither "down since" (one unknown reading
            // used to restart a zone's zone_down_for) nor starts it; it starts "silent since".
            Reading::Unknown { .. } => {
                o.silent_since.entry(zone.clone()).or_insert(now);
            }
            Reading::Known { .. } => {
                o.down_since.remove(zone);
                o.silent_since.remove(zone);
            }
        }
    }
    // Members as far as this replica can tell (the authority's settled count, here or sent by
    // it); when it cannot tell, "gone since" neither starts nor resets.
    let Some(members_by_zone) = t.lanes.members_by_zone(now) else { return };
    for zone in healths.keys() {
        let members = members_by_zone.get(zone).copied().unwrap_or(0);
        if members > 0 {
            o.had_consumers.insert(zone.clone(), true);
            o.consumers_gone_since.remove(zone);
        } else if o.had_consumers.get(zone).copied().unwrap_or(false) {
            o.consumers_gone_since.entry(zone.clone()).or_insert(now);
        }
    }
}

/// The inputs that cost nothing to read: the observations and the last automatic run.
fn cheap_inputs<'a>(
    o: &Observed,
    stored: &StoredPlan,
    state: &State,
    now: u64,
) -> TriggerInputs<'a> {
    let trigger = stored.plan.trigger.as_ref();
    TriggerInputs {
        now_ms: now,
        zone_down_since_ms: trigger_zone(&stored.plan).and_then(|z| o.down_since.get(z).copied()),
        zone_silent_since_ms: trigger_zone(&stored.plan)
            .and_then(|z| o.silent_since.get(z).copied()),
        consumers_gone_since_ms: trigger
            .and_then(|t| t.lane_consumers_gone.as_ref())
            .and_then(|z| o.consumers_gone_since.get(z).copied()),
        last_auto_run_ms: last_auto_run(state, &stored.plan.name),
        ..TriggerInputs::default()
    }
}

/// When the plan last started automatically, from the replicated state.
pub fn last_auto_run(state: &State, plan: &str) -> Option<u64> {
    state
        .plan_runs()
        .filter(|r: &&PlanRun| r.plan.name == plan && r.started_by == AUTO)
        .map(|r| r.started_ms)
        .max()
}

/// Every automatic run started since automation was last armed, from the replicated state:
/// what the caps count, the same on every replica and after a restart.
pub fn auto_runs_since_armed(state: &State) -> Vec<crate::core::AutoRun> {
    let armed = state.automation().armed_ms;
    state
        .plan_runs()
        .filter(|r| r.started_by == AUTO && r.started_ms >= armed)
        .map(|r| crate::core::AutoRun {
            run: r.id,
            plan: r.plan.name.clone(),
            left_zone: trigger_zone(&r.plan).map(str::to_owned),
            started_ms: r.started_ms,
        })
        .collect()
}

/// The share of users, in percent, the plan's first zone move would move from the table now.
fn share_moved(state: &State, stored: &StoredPlan) -> f64 {
    let table = state.table();
    let Some(step) = stored.plan.steps.iter().find(|s| matches!(s, PlanStep::MoveZone { .. }))
    else {
        return 0.0;
    };
    let to = PlanRun::step_target(step, table.zones(), table.units(), table.blue_units());
    f64::from(to.abs_diff(table.blue_units())) * 100.0 / f64::from(table.units())
}

/// The zone that receives the users: the other zone of the plan's watched zone.
fn receiving_zone(stored: &StoredPlan, zones: &crate::core::Zones) -> Option<String> {
    let watched = trigger_zone(&stored.plan)
        .or_else(|| stored.plan.trigger.as_ref()?.lane_consumers_gone.as_deref())?;
    zones.color_in(watched).and_then(|c| zones.counterpart(c)).map(|c| zones.zone_of(c).to_owned())
}

/// The receiving zone passes the guard: known, and not above its error rate.
fn judge_health(guard: &Guard, zone: &str, reading: Option<&Reading>) -> Result<(), String> {
    match reading {
        Some(Reading::Known { error_rate, requests })
            if *requests >= guard.min_requests && *error_rate > guard.max_error_rate =>
        {
            Err(format!(
                "{zone} errors {:.1} % over {requests} requests, above the guard's {:.1} %",
                error_rate * 100.0,
                guard.max_error_rate * 100.0
            ))
        }
        Some(Reading::Known { .. }) => Ok(()),
        Some(Reading::Unknown { why }) => Err(format!("{zone} health is unknown: {why}")),
        None => Err(format!("{zone} is not a zone of this table")),
    }
}

/// Whether the table the plan's first zone move leads to fits the receiving zone's capacity.
fn judge_capacity(
    t: &Triggers,
    state: &State,
    stored: &StoredPlan,
    now: u64,
) -> Result<(), String> {
    let table = state.table();
    let Some(step) = stored.plan.steps.iter().find(|s| matches!(s, PlanStep::MoveZone { .. }))
    else {
        return Ok(());
    };
    let to = PlanRun::step_target(step, table.zones(), table.units(), table.blue_units());
    let verdict = t.capacities.judge_dial(table, to, now);
    if verdict.blocks() { Err(verdict.explain()) } else { Ok(()) }
}

fn refuse(o: &mut Observed, plan: &str, kind: &'static str, why: &str) {
    if o.refused.get(plan) == Some(&kind) {
        return;
    }
    o.refused.insert(plan.to_owned(), kind);
    telemetry::count_plan_trigger_refusal(plan, kind);
    tracing::info!("plan {plan}: trigger fired but the run did not start: {why}");
}
