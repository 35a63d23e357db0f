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
    Guard, PlanRun, PlanStep, Reading, Share, State, StoredPlan, TriggerDecision, TriggerInputs,
    Verdict, ZoneId, decide_trigger, trigger_zone,
};
use crate::service::capacity::Capacities;
use crate::service::coordinator::Coordinator;
use crate::service::health::Health;
use crate::service::lane_membership::Lanes;
use crate::service::plan_start::{self, StartRequest};
use crate::service::preconditions::Preconditions;
use crate::service::receivers::{self, Choice};
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
        let first = first_move(&state, stored);
        let receivers = match &first {
            Some(f) => Some(receivers_of(t, &state, f, &auto_runs, now)),
            // A plan without a zone move (a dial, a call) still sends the watched zone's users
            // to the other zone on two zones.
            None => watched_counterpart(stored, &zones).map(|z| PlanReceivers {
                by_health: vec![z],
                chosen: Choice { chosen: vec![z], skipped: Vec::new() },
            }),
        };
        let caps = crate::core::AutomationCaps {
            automation: state.automation(),
            runs: &auto_runs,
            window_ms: t.auto_window_ms,
            max_share_percent: t.auto_max_share_percent,
        };
        // The hop limit is judged on the zones health lets receive, before it takes its own out.
        let could_receive: Vec<&str> = receivers
            .as_ref()
            .map(|r| r.by_health.iter().map(|z| state.table().zone_of(*z)).collect())
            .unwrap_or_default();
        inputs.caps = crate::core::check_caps(
            &caps,
            name,
            &could_receive,
            first.as_ref().map_or(0.0, |f| f.share_percent(&state)),
            now,
        );
        if let Some(r) = &receivers {
            inputs.receiving_health = judge_receivers(&t.guard, r, &healths, &state);
        }
        if let (Some(first), Some(r)) = (&first, &receivers)
            && inputs.receiving_health.is_ok()
        {
            inputs.receiving_capacity = judge_capacity(t, &state, first, &r.chosen.chosen, now);
        }
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

/// The plan's first zone move as the table stands now.
struct FirstMove {
    source: ZoneId,
    domain: Option<String>,
    /// The units the zone owns in the step's domain, and the units the step leaves it.
    owned: u32,
    keep: u32,
}

impl FirstMove {
    /// The share of users, in percent, the move changes the owner of.
    fn share_percent(&self, state: &State) -> f64 {
        f64::from(self.owned.abs_diff(self.keep)) * 100.0 / f64::from(state.table().units())
    }
}

fn first_move(state: &State, stored: &StoredPlan) -> Option<FirstMove> {
    let table = state.table();
    let step = stored.plan.steps.iter().find(|s| matches!(s, PlanStep::MoveZone { .. }))?;
    let PlanStep::MoveZone { zone, to_percent, .. } = step else { return None };
    let source = table.zones().color_in(zone)?;
    let domain = step.named_domain().map(str::to_owned);
    let owned = table.map_of(domain.as_deref())?.count(source);
    // On two zones too, a zone at `to_percent` keeps that share of the units.
    let keep = Share::from_percent(*to_percent, table.units()).map_or(owned, |s| s.blue_units);
    Some(FirstMove { source, domain, owned, keep })
}

/// The other zone of the plan's watched zone, on two zones.
fn watched_counterpart(stored: &StoredPlan, zones: &crate::core::Zones) -> Option<ZoneId> {
    let watched = trigger_zone(&stored.plan)
        .or_else(|| stored.plan.trigger.as_ref()?.lane_consumers_gone.as_deref())?;
    zones.color_in(watched).and_then(|c| zones.counterpart(c))
}

/// Who would receive the plan's first zone move.
struct PlanReceivers {
    /// The zones health lets receive (what the hop limit is judged on).
    by_health: Vec<ZoneId>,
    /// The zones the run would give units to (health, then the hop limit), and who is left out.
    chosen: Choice,
}

/// On two zones the other zone; among three or more, the runner's own choice for an automatic
/// run ([`receivers::choose`], then [`receivers::for_automatic_run`]), so the trigger judges the
/// zones the run's drain would then use.
fn receivers_of(
    t: &Triggers,
    state: &State,
    first: &FirstMove,
    runs: &[crate::core::AutoRun],
    now: u64,
) -> PlanReceivers {
    let table = state.table();
    let zones = table.zones();
    if zones.is_two() {
        let other: Vec<ZoneId> = zones.counterpart(first.source).into_iter().collect();
        return PlanReceivers {
            by_health: other.clone(),
            chosen: Choice { chosen: other, skipped: Vec::new() },
        };
    }
    let choice =
        receivers::choose(&t.health, state, table, first.source, t.guard.max_error_rate, now);
    let by_health = choice.chosen.clone();
    PlanReceivers { by_health, chosen: receivers::for_automatic_run(choice, table, runs) }
}

/// Every zone the run would give users to passes the guard: known, and not above its error
/// rate (an automatic run never sends users into a zone whose health nobody can read).
fn judge_receivers(
    guard: &Guard,
    r: &PlanReceivers,
    healths: &HashMap<String, Reading>,
    state: &State,
) -> Result<(), String> {
    let table = state.table();
    if r.chosen.chosen.is_empty() {
        return Err(format!("no zone may receive: {}", r.chosen.skipped_reasons().join("; ")));
    }
    for zone in &r.chosen.chosen {
        let name = table.zone_of(*zone);
        judge_health(guard, name, healths.get(name))?;
    }
    Ok(())
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

/// Whether the table the plan's first zone move leads to fits every receiving zone's capacity:
/// on two zones the dial it sets; among three or more, the units the zone gives away (its
/// highest, as the zone drain gives them) spread over the receivers by free room, as the drain
/// spreads them, judged on each receiver's load plus its share of the source's.
fn judge_capacity(
    t: &Triggers,
    state: &State,
    first: &FirstMove,
    receivers: &[ZoneId],
    now: u64,
) -> Result<(), String> {
    let table = state.table();
    if first.keep >= first.owned {
        return Ok(());
    }
    if table.zones().is_two() {
        let Some(view) = table.view_of(first.domain.as_deref()) else { return Ok(()) };
        let to = if first.source == ZoneId::BLUE { first.keep } else { table.units() - first.keep };
        let verdict = t.capacities.judge_dial(&view, to, now);
        return if verdict.blocks() { Err(verdict.explain()) } else { Ok(()) };
    }
    let Some(map) = table.map_of(first.domain.as_deref()) else { return Ok(()) };
    let given: Vec<u32> = map.units_of(first.source).skip(first.keep as usize).collect();
    let rooms: Vec<Option<f64>> =
        receivers.iter().map(|z| t.capacities.room(table, *z, now)).collect();
    let next = crate::service::capacity::spread_map(map, &given, receivers, &rooms);
    let verdicts = t.capacities.judge_maps(table, &[(map, &next)], now);
    match verdicts.into_iter().map(|(_, v)| v).find(Verdict::blocks) {
        Some(v) => Err(v.explain()),
        None => Ok(()),
    }
}

fn refuse(o: &mut Observed, plan: &str, kind: &'static str, why: &str) {
    if o.refused.get(plan) == Some(&kind) {
        return;
    }
    o.refused.insert(plan.to_owned(), kind);
    telemetry::count_plan_trigger_refusal(plan, kind);
    tracing::info!("plan {plan}: trigger fired but the run did not start: {why}");
}
