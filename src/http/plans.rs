//! Prepared plans: `PUT/GET /v1/plans/{name}`, `GET /v1/plans`, `POST /v1/plans/{name}/dry-run`.
//!
//! Plans are stored through the log (`Command::PutPlan`), with expected version and reason, like
//! every change. A dry run reads the zones' load, capacity and health, the MQ backlog and the
//! preconditions, and asks the pure `core::dry_run` what running the plan would do.

use std::sync::Arc;

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
    Color, Command, DryRunInputs, Share, StepDefaults, StoredPlan, Verdict, dry_run,
};
use crate::duration::{format_duration_ms, parse_duration_ms};
use crate::store::{WirePlan, WirePrecondition, WireStep};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("plans", |rocket| async {
        rocket.mount("/", routes![put_plan, get_plans, get_plan, post_dry_run])
    })
}

fn plan_body(stored: &StoredPlan) -> Value {
    let wire = WirePlan::from(&stored.plan);
    json!({
        "name": stored.plan.name,
        "revision": stored.revision,
        "rto": format_duration_ms(stored.plan.rto_ms),
        "rto_ms": stored.plan.rto_ms,
        "preconditions": wire.preconditions,
        "steps": wire.steps,
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
    let invalid = |why: String| ApiError::bad_request("invalid_plan", why);
    let rto_ms = parse_duration_ms(&r.rto).map_err(|e| invalid(format!("rto: {e}")))?;
    let wire =
        WirePlan { name: name.to_owned(), preconditions: r.preconditions, steps: r.steps, rto_ms };
    let plan = wire.to_plan().map_err(invalid)?;
    let submitted =
        super::submit(app, Command::PutPlan { plan }, Some(r.expected_version), by, r.reason)
            .await?;
    let stored = submitted.state.plan(name).ok_or_else(|| not_found(name))?;
    let mut body = plan_body(stored);
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Versioned::new(&body, submitted.table.version()))
}

#[get("/v1/plans")]
fn get_plans(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let plans: Vec<Value> = state.plans().map(plan_body).collect();
    Ok(Json(json!({ "version": state.version(), "plans": plans })))
}

#[get("/v1/plans/<name>")]
fn get_plan(app: &State<App>, caller: Caller, name: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let stored = state.plan(name).ok_or_else(|| not_found(name))?;
    Ok(Json(plan_body(stored)))
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
    let (health, capacities, preconditions, lanes) = (
        Arc::clone(&app.health),
        Arc::clone(&app.capacities),
        Arc::clone(&app.preconditions),
        Arc::clone(&app.lanes),
    );
    let list = stored.plan.preconditions.clone();
    let now = now_ms();
    let readings = rocket::tokio::task::spawn_blocking(move || {
        let zone_of = |c: Color| zones.zone_of(c).to_owned();
        (
            capacities.zone(&zone_of(Color::Blue), now),
            capacities.zone(&zone_of(Color::Green), now),
            health.zone(&zone_of(Color::Blue), now).reading,
            health.zone(&zone_of(Color::Green), now).reading,
            preconditions.check_all(&list),
            [lanes.total_half_lag(Color::Blue, 0, now), lanes.total_half_lag(Color::Green, 0, now)],
        )
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
    let (blue_load, green_load, blue_health, green_health, results, backlog) = readings;
    let units = table.units();
    let drain = &app.config.drain;
    let step_units =
        |percent: f64| Share::from_percent(percent, units).map(|s| s.blue_units).unwrap_or(1);
    let busy = state.active_drain().map(|d| {
        format!(
            "drain {} of {} is {}; a run cannot start while it is active",
            d.id,
            d.plan.zone,
            d.state_name()
        )
    });
    let inputs = DryRunInputs {
        zones: &app.config.zones,
        units,
        blue_units: table.blue_units(),
        blue_load: &blue_load,
        green_load: &green_load,
        headroom: app.capacities.headroom(),
        blue_health: &blue_health,
        green_health: &green_health,
        maintenance: StepDefaults {
            step_units: step_units(drain.step_percent),
            interval_ms: drain.interval_ms,
            guard: drain.guard,
        },
        evacuate: StepDefaults {
            step_units: step_units(drain.evacuate.step_percent),
            interval_ms: drain.evacuate.interval_ms,
            guard: drain.evacuate.guard,
        },
        preconditions: &results,
        backlog,
        busy,
    };
    let run = dry_run(&stored.plan, &inputs);
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|s| {
            json!({
                "index": s.index,
                "description": s.description,
                "blue_percent_before": s.blue_percent_before,
                "blue_percent_after": s.blue_percent_after,
                "users_moved_percent": s.users_moved_percent,
                "expected_ms": s.expected_ms,
                "capacity": verdict_body(&s.capacity),
                "holds": s.holds,
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
            app.config.zones.blue.clone(): backlog[0],
            app.config.zones.green.clone(): backlog[1],
        },
        "expected_ms": run.expected_ms,
        "expected_duration": format_duration_ms(run.expected_ms),
        "rto_ms": run.rto_ms,
        "rto": format_duration_ms(run.rto_ms),
        "fits_rto": run.fits_rto(),
        "holds": run.holds,
    })))
}
