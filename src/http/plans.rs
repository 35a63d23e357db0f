//! Prepared plans: `PUT/GET /v1/plans/{name}`, `GET /v1/plans`, `POST /v1/plans/{name}/dry-run`,
//! and their runs: `POST /v1/plans/{name}/run`, `/drill`, `GET /v1/plans/{name}/runs[/{id}]`
//! (the report) and `POST /v1/plans/{name}/runs/{id}/{pause|resume|abort|rollback}`.
//!
//! Plans are stored through the log (`Command::PutPlan`), with expected version and reason, like
//! every change. A dry run reads the zones' load, capacity and health, the MQ backlog and the
//! preconditions, and asks the pure `core::dry_run` what running the plan would do.

use std::sync::Arc;
use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, get, post, put, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::tag::Versioned;
use super::{App, iso8601, now_ms};
use crate::core::{
    Command, DryRunInputs, PlanRun, Share, State as CoreState, StepDefaults, StepRecord,
    StoredPlan, Verdict, ZoneId, dry_run,
};
use crate::duration::{format_duration_ms, parse_duration_ms};
use crate::service::{plan_config, plan_runner, plan_start, plan_trigger};
use crate::store::{WirePlan, WirePrecondition, WireStep};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("plans", |rocket| async {
        rocket
            .mount(
                "/",
                routes![
                    put_plan,
                    get_plans,
                    get_plan,
                    post_dry_run,
                    post_run,
                    post_drill,
                    get_runs,
                    get_run,
                    run_action,
                    get_automation,
                    put_automation
                ],
            )
            .attach(AdHoc::on_liftoff("plan runner", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let (maintenance, evacuate) =
                        step_defaults(app, app.coordinator.table().units());
                    let runner = plan_runner::Runner {
                        coordinator: Arc::clone(&app.coordinator),
                        health: Arc::clone(&app.health),
                        subscribers: Arc::clone(&app.subscribers),
                        lanes: Arc::clone(&app.lanes),
                        capacities: Arc::clone(&app.capacities),
                        preconditions: Arc::clone(&app.preconditions),
                        maintenance,
                        evacuate,
                        tick: Duration::from_millis(app.config.drain.tick_ms),
                        now_ms,
                        caller: app.config.node.as_ref().map_or_else(
                            || format!("pid {}", std::process::id()),
                            |n| n.id.clone(),
                        ),
                    };
                    rocket::tokio::spawn(plan_runner::run(runner, rocket.shutdown()));
                    let triggers = plan_trigger::Triggers {
                        enabled: app.config.plan_triggers,
                        coordinator: Arc::clone(&app.coordinator),
                        health: Arc::clone(&app.health),
                        lanes: Arc::clone(&app.lanes),
                        capacities: Arc::clone(&app.capacities),
                        preconditions: Arc::clone(&app.preconditions),
                        down_error_rate: app.config.health.down_error_rate,
                        guard: app.config.drain.evacuate.guard,
                        auto_window_ms: app.config.auto_window_ms,
                        auto_max_share_percent: app.config.auto_max_share_percent,
                        tick: Duration::from_millis(app.config.drain.tick_ms),
                        now_ms,
                        observed: Default::default(),
                    };
                    rocket::tokio::spawn(plan_trigger::run(triggers, rocket.shutdown()));
                })
            }))
    })
}

/// How drains of each mode step, from the configuration, in units of a table of `units`.
fn step_defaults(app: &App, units: u32) -> (StepDefaults, StepDefaults) {
    let drain = &app.config.drain;
    let step_units = |percent: f64| {
        Share::from_percent(percent, units).map(|s| s.blue_units).unwrap_or(1).max(1)
    };
    (
        StepDefaults {
            step_units: step_units(drain.step_percent),
            interval_ms: drain.interval_ms,
            guard: drain.guard,
        },
        StepDefaults {
            step_units: step_units(drain.evacuate.step_percent),
            interval_ms: drain.evacuate.interval_ms,
            guard: drain.evacuate.guard,
        },
    )
}

fn plan_body(stored: &StoredPlan, state: &CoreState) -> Value {
    let wire = WirePlan::encode(&stored.plan, state.table().zones());
    let now = now_ms();
    let last_drill = state
        .plan_runs()
        .rev()
        .find(|r| r.plan.name == stored.plan.name && r.is_drill() && !r.is_active())
        .map(|r| run_body(r, state, now));
    let active_run = state
        .active_run()
        .filter(|r| r.plan.name == stored.plan.name)
        .map(|r| json!({ "id": r.id, "state": r.status.as_str(), "drill": r.is_drill() }));
    json!({
        "last_drill": last_drill,
        "active_run": active_run,
        "name": stored.plan.name,
        "revision": stored.revision,
        "rto": format_duration_ms(stored.plan.rto_ms),
        "rto_ms": stored.plan.rto_ms,
        "freeze_window": stored.plan.freeze_ms.map(format_duration_ms),
        "preconditions": wire.preconditions,
        "steps": wire.steps,
        "trigger": stored.plan.trigger.as_ref().map(|t| json!({
            "zone_down_for": t.zone_down_for_ms.map(format_duration_ms),
            "zone_silent_for": t.zone_silent_for_ms.map(format_duration_ms),
            "lane_consumers_gone": t.lane_consumers_gone,
            "lane_consumers_gone_for": t.lane_consumers_gone.as_ref()
                .map(|_| format_duration_ms(t.lane_consumers_gone_for_ms)),
        })),
        "cooldown": stored.plan.trigger.as_ref().map(|t| format_duration_ms(t.cooldown_ms)),
        "updated_by": stored.updated_by,
        "updated_at": iso8601(stored.updated_ms),
        "reason": stored.reason,
    })
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(Status::NotFound, "plan_not_found", format!("there is no plan `{name}`"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRequest {
    expected_version: u64,
    reason: String,
    /// Recovery time objective, e.g. `5m`.
    rto: String,
    #[serde(default)]
    preconditions: Vec<WirePrecondition>,
    steps: Vec<WireStep>,
    /// Opt-in automatic start: `{"zone_down_for": "30s"}` and/or `{"lane_consumers_gone": zone}`.
    #[serde(default)]
    trigger: Option<plan_config::TriggerBody>,
    /// At most one automatic run per this, e.g. `30m`; required with a trigger.
    #[serde(default)]
    cooldown: Option<String>,
    /// Loss-less zone moves: each drain or evacuate step freezes its units for at most this
    /// window (`30s`); absent: at once.
    #[serde(default)]
    freeze_window: Option<String>,
}

#[put("/v1/plans/<name>", data = "<request>")]
async fn put_plan(
    app: &State<App>,
    caller: Caller,
    name: &str,
    request: JsonBody<'_, PlanRequest>,
) -> Result<Versioned, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    // A plan declared in config is appended again at every start-up when the log's differs, so
    // an API edit would be reverted silently by the next restart: refuse it and say where the
    // plan lives.
    if app.config.declared_plans.contains_key(name) {
        return Err(ApiError::new(
            Status::Conflict,
            "plan_declared_in_config",
            format!(
                "plan `{name}` is declared in the configuration file ([plans.{name}]): edit it \
                 there and restart (an API edit would be undone by the next start), or remove it \
                 from the file to manage it through the API; to stop its trigger now, use \
                 PUT /v1/automation"
            ),
        ));
    }
    let invalid = |why: String| ApiError::bad_request("invalid_plan", why);
    let body = plan_config::PlanBody {
        rto: r.rto,
        preconditions: r.preconditions,
        steps: r.steps,
        trigger: r.trigger,
        cooldown: r.cooldown,
        freeze_window: r.freeze_window,
    };
    let zones = app.coordinator.state().table().zones().clone();
    let plan = plan_config::to_plan(name, body, &zones).map_err(invalid)?;
    let submitted =
        super::submit(app, Command::PutPlan { plan }, Some(r.expected_version), by, r.reason)
            .await?;
    let stored = submitted.state.plan(name).ok_or_else(|| not_found(name))?;
    let mut body = plan_body(stored, &submitted.state);
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Versioned::new(&body, submitted.table.version()))
}

/// Automatic failover's state: the stop switch, when it was armed, and the automatic runs that
/// count against the caps since (once per incident, the hop limit, the window).
fn automation_body(app: &App, state: &crate::core::State) -> Value {
    let a = state.automation();
    let runs: Vec<Value> = plan_trigger::auto_runs_since_armed(state)
        .into_iter()
        .map(|r| {
            json!({
                "run": r.run,
                "plan": r.plan,
                "left_zone": r.left_zone,
                "started_at": super::iso8601(r.started_ms),
            })
        })
        .collect();
    json!({
        "stopped": a.stopped,
        "triggers_enabled": app.config.plan_triggers,
        "armed_at": (a.armed_ms > 0).then(|| super::iso8601(a.armed_ms)),
        "changed_by": (!a.changed_by.is_empty()).then_some(a.changed_by.as_str()),
        "changed_at": (a.changed_ms > 0).then(|| super::iso8601(a.changed_ms)),
        "reason": (!a.reason.is_empty()).then_some(a.reason.as_str()),
        "window": format_duration_ms(app.config.auto_window_ms),
        "max_share_percent": app.config.auto_max_share_percent,
        "runs_since_armed": runs,
    })
}

#[get("/v1/automation")]
fn get_automation(app: &State<App>, caller: Caller) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    Ok(Versioned::new(&automation_body(app, &state), state.version()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AutomationRequest {
    /// `true` stops every trigger; `false` starts them again and re-arms the caps.
    stopped: bool,
    expected_version: u64,
    reason: String,
}

/// The runtime stop switch of every trigger (durable and audited: it survives restarts and is
/// the same on every replica), and the operator's re-arm after an incident.
#[put("/v1/automation", data = "<request>")]
async fn put_automation(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, AutomationRequest>,
) -> Result<Versioned, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let command = Command::SetAutomation { stopped: r.stopped };
    let submitted = super::submit(app, command, Some(r.expected_version), by, r.reason).await?;
    let mut body = automation_body(app, &submitted.state);
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Versioned::new(&body, submitted.table.version()))
}

#[get("/v1/plans")]
fn get_plans(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let plans: Vec<Value> = state.plans().map(|p| plan_body(p, &state)).collect();
    Ok(Json(json!({ "version": state.version(), "plans": plans })))
}

#[get("/v1/plans/<name>")]
fn get_plan(app: &State<App>, caller: Caller, name: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let stored = state.plan(name).ok_or_else(|| not_found(name))?;
    Ok(Json(plan_body(stored, &state)))
}

fn verdict_body(v: &Verdict) -> Value {
    match v {
        Verdict::Unchecked => json!({ "verdict": "unchecked" }),
        Verdict::Fits(p) | Verdict::Exceeds(p) => json!({
            "verdict": if matches!(v, Verdict::Fits(_)) { "fits" } else { "exceeds" },
            "zone": p.zone,
            "current_rps": p.current_rps,
            "projected_rps": p.projected_rps,
            "allowed_rps": p.allowed_rps,
            "capacity_rps": p.capacity_rps,
            "estimated": p.estimated,
            "detail": v.explain(),
        }),
        Verdict::Unknown { zone, .. } => json!({
            "verdict": "unknown", "zone": zone, "detail": v.explain(),
        }),
    }
}

/// What running the plan now would do; changes nothing.
#[post("/v1/plans/<name>/dry-run")]
async fn post_dry_run(
    app: &State<App>,
    caller: Caller,
    name: &str,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let stored = state.plan(name).ok_or_else(|| not_found(name))?.clone();
    let table = state.table_arc();
    let zones = app.config.zones.clone();
    let names: Vec<String> = table.zones().iter().map(|(_, z)| z.name.clone()).collect();
    let (health, capacities, preconditions, lanes) = (
        Arc::clone(&app.health),
        Arc::clone(&app.capacities),
        Arc::clone(&app.preconditions),
        Arc::clone(&app.lanes),
    );
    let list = stored.plan.preconditions.clone();
    let now = now_ms();
    let readings = rocket::tokio::task::spawn_blocking(move || {
        let zone_of = |c: ZoneId| zones.zone_of(c).to_owned();
        (
            capacities.zone(&zone_of(ZoneId::BLUE), now),
            capacities.zone(&zone_of(ZoneId::GREEN), now),
            health.zone(&zone_of(ZoneId::BLUE), now).reading,
            health.zone(&zone_of(ZoneId::GREEN), now).reading,
            // Shared results: a dry run is a read, and never one outbound call per caller.
            preconditions.check_all_shared(&list),
            [
                lanes.total_half_lag(ZoneId::BLUE, 0, now),
                lanes.total_half_lag(ZoneId::GREEN, 0, now),
            ],
            // Every zone's load and capacity, for the projection of `move_units` steps.
            names.iter().map(|name| capacities.zone(name, now)).collect::<Vec<_>>(),
        )
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
    let (blue_load, green_load, blue_health, green_health, results, backlog, zone_loads) = readings;
    let units = table.units();
    let (maintenance, evacuate) = step_defaults(app, units);
    let busy = plan_start::busy_reason(&state);
    let domain_blue_units: std::collections::BTreeMap<String, u32> =
        table.domains().iter().map(|(name, map)| (name.clone(), map.count(ZoneId::BLUE))).collect();
    let inputs = DryRunInputs {
        zones: table.zones(),
        units,
        blue_units: table.blue_units(),
        domain_blue_units: &domain_blue_units,
        blue_load: &blue_load,
        green_load: &green_load,
        headroom: app.capacities.headroom(),
        blue_health: &blue_health,
        green_health: &green_health,
        maintenance,
        evacuate,
        preconditions: &results,
        backlog,
        busy,
        channels: &table.channels().values().cloned().collect::<Vec<_>>(),
        unit_map: table.map_of(None),
        zone_loads: &zone_loads,
        domain_maps: table.domains(),
    };
    let run = dry_run(&stored.plan, &inputs);
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|s| {
            json!({
                "index": s.index,
                "domain": s.domain.as_deref().unwrap_or(crate::core::DEFAULT_DOMAIN),
                "description": s.description,
                "blue_percent_before": s.blue_percent_before,
                "blue_percent_after": s.blue_percent_after,
                "users_moved_percent": s.users_moved_percent,
                "expected_ms": s.expected_ms,
                "capacity": verdict_body(&s.capacity),
                "holds": s.holds,
                "channels": s.channels,
            })
        })
        .collect();
    let preconditions: Vec<Value> = results
        .iter()
        .map(|(name, r)| match r {
            Ok(passed) => json!({ "name": name, "passed": passed, "error": null }),
            Err(why) => json!({ "name": name, "passed": null, "error": why }),
        })
        .collect();
    let zone_load = |load: &crate::core::ZoneLoad| {
        json!({
            "zone": load.zone,
            "load_rps": load.load_rps.as_ref().ok(),
            "load_unknown_reason": load.load_rps.as_ref().err(),
        })
    };
    Ok(Json(json!({
        "plan": stored.plan.name,
        "revision": stored.revision,
        "version": state.version(),
        "would_start": run.would_start(),
        "refusals": run.refusals,
        "preconditions": preconditions,
        "steps": steps,
        "zones": [zone_load(&blue_load), zone_load(&green_load)],
        "backlog": {
            app.config.zones.zone_of(ZoneId::BLUE): backlog[0],
            app.config.zones.zone_of(ZoneId::GREEN): backlog[1],
        },
        "expected_ms": run.expected_ms,
        "expected_duration": format_duration_ms(run.expected_ms),
        "rto_ms": run.rto_ms,
        "rto": format_duration_ms(run.rto_ms),
        "fits_rto": run.fits_rto(),
        "holds": run.holds,
    })))
}

fn record_body(run: &PlanRun, r: &StepRecord) -> Value {
    let samples: Vec<Value> = r
        .samples
        .iter()
        .map(|(at, zones)| {
            json!({
                "at": iso8601(*at),
                "at_ms": at,
                "zones": zones.iter().map(|z| json!({
                    "zone": z.zone, "error_rate": z.error_rate, "requests": z.requests,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let since = |t: Option<u64>| t.map(|t| t.saturating_sub(run.started_ms));
    json!({
        "index": r.index,
        "step": run.step_label(r.index),
        "drain_id": r.drain,
        "started_at": iso8601(r.started_ms),
        "started_ms": r.started_ms,
        "converged_at": r.converged_ms.map(iso8601),
        "converged_ms": r.converged_ms,
        "settled_at": r.done_ms.map(iso8601),
        "settled_ms": r.done_ms,
        "converged_after_ms": since(r.converged_ms),
        // False when no subscriber's acknowledgement measured it: then there is no time.
        "convergence_measured": r.converged_ms.is_some(),
        "settled_after_ms": since(r.done_ms),
        "errors": samples,
        // An HTTP step's attempts: who called, when, what answered. Never a token.
        "calls": r.calls.iter().map(|a| json!({
            "attempt": a.attempt,
            "caller": a.caller,
            "claimed_at": iso8601(a.claimed_ms),
            "claimed_ms": a.claimed_ms,
            "claim_until_ms": a.until_ms,
            "done_at": a.done_ms.map(iso8601),
            "done_ms": a.done_ms,
            "status": a.status,
            "error": a.error,
            "ok": a.ok,
            "outcome": a.outcome(),
        })).collect::<Vec<_>>(),
    })
}

/// A run's report: the timeline of every step, the errors per zone, time against the RTO.
pub fn run_body(run: &PlanRun, state: &CoreState, now: u64) -> Value {
    let mut timeline: Vec<Value> = run.steps.iter().map(|r| record_body(run, r)).collect();
    if let Some(r) = &run.restore {
        let mut restore = record_body(run, r);
        restore["phase"] = json!("restore");
        timeline.push(restore);
    }
    // Errors per zone during the run, from the samples logged at every step boundary.
    let mut errors: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for r in &run.steps {
        for (at, zones) in &r.samples {
            for z in zones {
                errors.entry(z.zone.clone()).or_default().push(json!({
                    "at_ms": at, "error_rate": z.error_rate, "requests": z.requests,
                }));
            }
        }
    }
    let max_rate = |zone: &str| {
        errors
            .get(zone)
            .and_then(|v| v.iter().filter_map(|s| s["error_rate"].as_f64()).reduce(f64::max))
    };
    let errors: Vec<Value> = errors
        .iter()
        .map(|(zone, samples)| {
            json!({ "zone": zone, "max_error_rate": max_rate(zone), "samples": samples })
        })
        .collect();
    let last_converged = run.steps.iter().filter_map(|r| r.converged_ms).max();
    let switch_ms = run.switch_ms(now);
    let drain = run.drain.and_then(|d| state.drain(d));
    json!({
        "id": run.id,
        "plan": run.plan.name,
        "revision": run.revision,
        "drill": run.is_drill(),
        "drill_hold_ms": run.drill_hold_ms,
        "state": run.status.as_str(),
        "active": run.is_active(),
        "outcome": (!run.is_active()).then(|| run.status.as_str()),
        "step": run.step,
        "steps_total": run.plan.steps.len(),
        "current_step": run.is_active().then(|| run.step_label(run.step)),
        "in_step": run.in_step,
        "drain_id": run.drain,
        "drain_hold_reason": drain.and_then(|d| d.hold_reason.clone()),
        "hold_reason": run.hold_reason,
        "hold_until": run.hold_until_ms.map(iso8601),
        "fail_reason": run.fail_reason,
        "started_by": run.started_by,
        "reason": run.reason,
        "started_at": iso8601(run.started_ms),
        "started_ms": run.started_ms,
        "switched_at": run.switched_ms.map(iso8601),
        "finished_at": run.finished_ms.map(iso8601),
        "finished_ms": run.finished_ms,
        "switch_ms": switch_ms,
        "switch_duration": format_duration_ms(switch_ms),
        "last_converged_after_ms": last_converged.map(|t| t.saturating_sub(run.started_ms)),
        "total_ms": run.finished_ms.unwrap_or(now).saturating_sub(run.started_ms),
        "rto_ms": run.plan.rto_ms,
        "rto": format_duration_ms(run.plan.rto_ms),
        "met": run.met_rto(),
        "rto_verdict": match run.met_rto() { Some(true) => "met", Some(false) => "missed", None => "pending" },
        "timeline": timeline,
        "errors": errors,
    })
}

fn run_not_found(name: &str, id: u64) -> ApiError {
    ApiError::new(Status::NotFound, "plan_run_not_found", format!("plan `{name}` has no run {id}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
    expected_version: Option<u64>,
    reason: String,
    /// The revision the operator reviewed: a run of a plan changed since is refused.
    plan_revision: Option<u64>,
    /// Drills only: how long to hold the switched table before restoring, e.g. `30s`.
    hold: Option<String>,
}

async fn start_run(
    app: &App,
    caller: Caller,
    name: &str,
    r: RunRequest,
    drill_hold_ms: Option<u64>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let request = plan_start::StartRequest {
        plan: name.to_owned(),
        plan_revision: r.plan_revision,
        expected_version: r.expected_version,
        drill_hold_ms,
        by,
        reason: r.reason,
        now_ms: now_ms(),
    };
    let (coordinator, checks) = (Arc::clone(&app.coordinator), Arc::clone(&app.preconditions));
    let (submitted, id) = rocket::tokio::task::spawn_blocking(move || {
        plan_start::start(&coordinator, &checks, request)
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))??;
    let run = submitted
        .state
        .plan_run(id)
        .ok_or_else(|| ApiError::new(Status::InternalServerError, "internal", "no run"))?;
    Ok((
        Status::Created,
        Versioned::new(&run_body(run, &submitted.state, now_ms()), submitted.table.version()),
    ))
}

#[post("/v1/plans/<name>/run", data = "<request>")]
async fn post_run(
    app: &State<App>,
    caller: Caller,
    name: &str,
    request: JsonBody<'_, RunRequest>,
) -> Result<(Status, Versioned), ApiError> {
    caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    if r.hold.is_some() {
        return Err(ApiError::bad_request(
            "invalid_run",
            "hold: only a drill holds; POST /v1/plans/{name}/drill",
        ));
    }
    start_run(app, caller, name, r, None).await
}

#[post("/v1/plans/<name>/drill", data = "<request>")]
async fn post_drill(
    app: &State<App>,
    caller: Caller,
    name: &str,
    request: JsonBody<'_, RunRequest>,
) -> Result<(Status, Versioned), ApiError> {
    caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let hold = r.hold.as_deref().unwrap_or("30s");
    let hold_ms = parse_duration_ms(hold)
        .map_err(|e| ApiError::bad_request("invalid_run", format!("hold: {e}")))?;
    if hold_ms > crate::core::MAX_DRAIN_INTERVAL_MS {
        return Err(ApiError::bad_request("invalid_run", "hold: at most 24h"));
    }
    start_run(app, caller, name, r, Some(hold_ms)).await
}

#[get("/v1/plans/<name>/runs")]
fn get_runs(app: &State<App>, caller: Caller, name: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let now = now_ms();
    let runs: Vec<Value> = state
        .plan_runs()
        .rev()
        .filter(|r| r.plan.name == name)
        .map(|r| run_body(r, &state, now))
        .collect();
    if runs.is_empty() && state.plan(name).is_none() {
        return Err(not_found(name));
    }
    Ok(Json(json!({ "plan": name, "version": state.version(), "runs": runs })))
}

fn parse_run_id(id: &str) -> Result<u64, ApiError> {
    id.parse().map_err(|_| {
        ApiError::bad_request("invalid_run_id", format!("`{id}` is not a run ID (a whole number)"))
    })
}

#[get("/v1/plans/<name>/runs/<id>")]
fn get_run(
    app: &State<App>,
    caller: Caller,
    name: &str,
    id: &str,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let id = parse_run_id(id)?;
    let state = app.coordinator.state();
    let run = state.plan_run(id).filter(|r| r.plan.name == name);
    let run = run.ok_or_else(|| run_not_found(name, id))?;
    Ok(Json(run_body(run, &state, now_ms())))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunActionRequest {
    reason: String,
    expected_version: Option<u64>,
}

#[post("/v1/plans/<name>/runs/<id>/<action>", data = "<request>")]
async fn run_action(
    app: &State<App>,
    caller: Caller,
    name: &str,
    id: &str,
    action: &str,
    request: JsonBody<'_, RunActionRequest>,
) -> Result<Versioned, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let id = parse_run_id(id)?;
    let command = match action {
        "pause" => Command::PausePlanRun { run: id },
        "resume" => Command::ResumePlanRun { run: id },
        "abort" => Command::AbortPlanRun { run: id },
        "rollback" => Command::RollbackPlanRun { run: id },
        other => {
            return Err(ApiError::new(
                Status::NotFound,
                "not_found",
                format!("`{other}` is not a run action: pause, resume, abort or rollback"),
            ));
        }
    };
    let r = request.map_err(json_error)?.into_inner();
    if app.coordinator.state().plan_run(id).is_none_or(|r| r.plan.name != name) {
        return Err(run_not_found(name, id));
    }
    let submitted = super::submit(app, command, r.expected_version, by, r.reason).await?;
    let run = submitted.state.plan_run(id).ok_or_else(|| run_not_found(name, id))?;
    let mut body = run_body(run, &submitted.state, now_ms());
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Versioned::new(&body, submitted.table.version()))
}
