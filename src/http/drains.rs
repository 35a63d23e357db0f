//! Zone health and drains: `POST /v1/outcomes`, `GET /v1/zones`, `/v1/drains/...`, restore.

use std::sync::Arc;
use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::tag::Versioned;
use super::{App, iso8601, now_ms};
use crate::core::{
    Capacity, Command, Drain, DrainMode, DrainPlan, DrainStatus, Guard, OnBreach, Reading,
    RoutingTable, Share, State as CoreState, ZoneId,
};
use crate::duration::{format_duration_ms, parse_duration_ms};
use crate::service::health::ZoneHealth;
use crate::service::{drain_runner, zone_history};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("drains", |rocket| async {
        rocket
            .mount(
                "/",
                routes![
                    post_outcomes,
                    get_zones,
                    get_zone_history,
                    post_drain,
                    get_current_drain,
                    get_drains,
                    get_drain,
                    drain_action,
                    restore_zone
                ],
            )
            .attach(AdHoc::on_liftoff("drain runner", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let shutdown = rocket.shutdown();
                    let runner = drain_runner::Runner {
                        coordinator: Arc::clone(&app.coordinator),
                        health: Arc::clone(&app.health),
                        subscribers: Arc::clone(&app.subscribers),
                        lanes: Arc::clone(&app.lanes),
                        capacities: Arc::clone(&app.capacities),
                        convergence_fraction: app.config.drain.convergence_fraction,
                        convergence_timeout_ms: app.config.drain.convergence_timeout_ms,
                        tick: Duration::from_millis(app.config.drain.tick_ms),
                        now_ms,
                    };
                    rocket::tokio::spawn(drain_runner::run(runner, shutdown));
                })
            }))
            .attach(AdHoc::on_liftoff("zone history", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let coordinator = Arc::clone(&app.coordinator);
                    rocket::tokio::spawn(zone_history::run(
                        Arc::clone(&app.zone_history),
                        Arc::clone(&app.health),
                        move || zone_history::live_zones(&coordinator.table()),
                        Duration::from_millis(zone_history::SAMPLE_EVERY_MS),
                        now_ms,
                        rocket.shutdown(),
                    ));
                })
            }))
    })
}

// ---- outcomes and zones ----------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeBatch {
    zone: String,
    color: String,
    #[serde(default)]
    ok: u64,
    #[serde(default)]
    error: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Outcomes {
    One(OutcomeBatch),
    Many(Vec<OutcomeBatch>),
}

/// Most requests one batch may report: far above any real batch, low enough that a typo of a
/// few extra digits is caught before it swamps the window.
const MAX_BATCH_COUNT: u64 = 100_000_000;

#[post("/v1/outcomes", data = "<body>")]
fn post_outcomes(
    app: &State<App>,
    caller: Caller,
    body: JsonBody<'_, Outcomes>,
) -> Result<Json<Value>, ApiError> {
    // Outcomes steer drains (a forged batch can pause, roll back or hide a zone): a writer only.
    caller.require_writer(&app.config)?;
    let batches = match body.map_err(json_error)?.into_inner() {
        Outcomes::One(batch) => vec![batch],
        Outcomes::Many(batches) => batches,
    };
    if batches.len() > 1000 {
        return Err(ApiError::bad_request("batch_too_large", "at most 1000 batches per request"));
    }
    // Validate everything first so a bad batch in the middle records nothing.
    let mut parsed = Vec::with_capacity(batches.len());
    for (i, b) in batches.iter().enumerate() {
        let color: ZoneId = app.config.zones.by_lane(&b.color).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_color",
                format!("batch {i}: `{}` is not a lane of this tidegate", b.color),
            )
        })?;
        if app.config.zones.color_in(&b.zone).is_none() {
            return Err(ApiError::bad_request(
                "unknown_zone",
                format!("batch {i}: zone `{}` is not one of {}", b.zone, app.config.zones.names()),
            ));
        }
        if b.ok.saturating_add(b.error) > MAX_BATCH_COUNT {
            return Err(ApiError::bad_request(
                "invalid_outcomes",
                format!("batch {i}: at most {MAX_BATCH_COUNT} requests per batch"),
            ));
        }
        parsed.push((b.zone.as_str(), color, b.ok, b.error));
    }
    let now = now_ms();
    for (zone, color, ok, error) in parsed {
        app.health
            .record(zone, color, ok, error, now)
            .map_err(|e| ApiError::bad_request("unknown_zone", e.to_string()))?;
    }
    Ok(Json(json!({ "accepted": batches.len() })))
}

fn health_body(h: &ZoneHealth) -> Value {
    let (error_rate, unknown) = match &h.reading {
        Reading::Known { error_rate, .. } => (json!(error_rate), Value::Null),
        Reading::Unknown { why } => (Value::Null, json!(why)),
    };
    json!({
        "error_rate": error_rate,
        "requests": h.requests,
        "errors": h.errors,
        "source": h.source,
        "last_update": h.last_update_ms.map(iso8601),
        "unknown_reason": unknown,
    })
}

/// A zone's load and capacity. Unknown values are `null` with the reason, never a number.
fn capacity_body(load: &crate::core::ZoneLoad, headroom: f64) -> Value {
    let (capacity, capacity_unknown) = match &load.capacity {
        Capacity::Unchecked => (Value::Null, Value::Null),
        Capacity::Unknown { why } => (Value::Null, json!(why)),
        Capacity::Rps(rps) => (json!(rps), Value::Null),
    };
    json!({
        "checked": load.capacity != Capacity::Unchecked,
        "load_rps": load.load_rps.as_ref().ok(),
        "load_unknown_reason": load.load_rps.as_ref().err(),
        "capacity_rps": capacity,
        "capacity_unknown_reason": capacity_unknown,
        "allowed_rps": match &load.capacity {
            Capacity::Rps(rps) => json!(rps * (1.0 - headroom)),
            _ => Value::Null,
        },
        "headroom": headroom,
    })
}

fn zone_state(
    state: &CoreState,
    zone: &str,
    color: ZoneId,
    recent: &Reading,
    warn_rate: f64,
    down_rate: f64,
) -> &'static str {
    let table = state.table();
    if let Some(drain) = state.active_drain().filter(|d| d.plan.zone == zone) {
        // A paused drain moves nobody: saying "draining" would tell an operator it still does.
        if drain.status == crate::core::DrainStatus::Paused {
            return "paused";
        }
        let blue = table.blue_units_in(drain.plan.domain.as_deref()).unwrap_or(0);
        let growing = if color == ZoneId::BLUE {
            drain.heading_for() > blue
        } else {
            drain.heading_for() < blue
        };
        return if growing { "restoring" } else { "draining" };
    }
    let share_units = table.units_of(color);
    if share_units == 0 {
        // Blue and green at 0 % were drained; a further zone that owns nothing is `empty` (it
        // may never have owned a unit, or been evacuated).
        return if color.index() < 2 { "drained" } else { "empty" };
    }
    // Judged over the detection window (`health.detect_window`), as the triggers judge it.
    // Silence is `unknown`, never `active`: a zone whose reporters stopped looked healthy.
    match recent {
        Reading::Unknown { .. } => "unknown",
        Reading::Known { error_rate, requests } if *requests > 0 && *error_rate >= down_rate => {
            "down"
        }
        Reading::Known { error_rate, requests } if *requests > 0 && *error_rate > warn_rate => {
            "degraded"
        }
        Reading::Known { .. } => "active",
    }
}

/// The last minutes of each live zone's health as the coordinator sampled it (every
/// `zone_history::SAMPLE_EVERY_MS`), one series per live zone of the table in index order (a
/// zone added since the last sample is listed with no samples yet), oldest sample first; an
/// unknown reading has `error_rate: null`.
#[get("/v1/zones/history")]
fn get_zone_history(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    app.zone_history.track(&zone_history::live_zones(&app.coordinator.table()));
    let zones: Vec<Value> = app
        .zone_history
        .snapshot()
        .into_iter()
        .map(|series| {
            let samples: Vec<Value> = series
                .samples
                .iter()
                .map(|s| {
                    json!({
                        "at": iso8601(s.at_ms),
                        "at_ms": s.at_ms,
                        "error_rate": s.error_rate,
                        "requests": s.requests,
                    })
                })
                .collect();
            json!({
                "zone": series.zone.zone,
                "index": series.zone.id.0,
                "color": series.zone.lane,
                "samples": samples,
            })
        })
        .collect();
    Ok(Json(json!({
        "every": format_duration_ms(zone_history::SAMPLE_EVERY_MS),
        "keep": format_duration_ms(zone_history::KEEP_MS),
        "now_ms": now_ms(),
        "zones": zones,
    })))
}

#[get("/v1/zones")]
async fn get_zones(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let health = Arc::clone(&app.health);
    let capacities = Arc::clone(&app.capacities);
    // Every live zone of the table (a third zone too), by index: health and capacity are read
    // by zone name, whichever zones the configuration lists.
    let live: Vec<(ZoneId, String)> = app
        .coordinator
        .table()
        .zones()
        .iter()
        .filter(|(_, z)| !z.retired)
        .map(|(id, z)| (id, z.name.clone()))
        .collect();
    let now = now_ms();
    let readings = rocket::tokio::task::spawn_blocking(move || {
        live.into_iter()
            .map(|(c, zone)| {
                (c, health.zone(&zone, now), capacities.zone(&zone, now), health.recent(&zone, now))
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
    let state = app.coordinator.state();
    let table = state.table();
    let share = table.share();
    let zones: Vec<Value> = readings
        .iter()
        .map(|(color, h, load, recent)| {
            let units = table.units_of(*color);
            let mut body = json!({
                "zone": h.zone,
                "color": table.lane(*color),
                "state": zone_state(
                    &state,
                    &h.zone,
                    *color,
                    recent,
                    app.config.drain.guard.max_error_rate,
                    app.config.health.down_error_rate,
                ),
                "share_percent": f64::from(units) * 100.0 / f64::from(share.units),
                "units": units,
            });
            body.as_object_mut().unwrap().extend(health_body(h).as_object().unwrap().clone());
            body["capacity"] = capacity_body(load, app.capacities.headroom());
            body
        })
        .collect();
    Ok(Json(json!({
        "version": table.version(),
        "window": format_duration_ms(app.health.window_ms()),
        "zones": zones,
    })))
}

// ---- drains ----------------------------------------------------------------------------------

/// The wire form of a drain. Percentages are the drained zone's share of users.
pub fn drain_body(app: &App, drain: &Drain, table: &RoutingTable) -> Value {
    // The drained zone's unconsumed MQ backlog: what a settling drain waits for.
    let since = if drain.status == DrainStatus::Settling { drain.last_step_ms } else { 0 };
    let backlog = drain
        .is_active()
        .then(|| app.lanes.total_half_lag(drain.plan.color, since, super::now_ms()))
        .flatten();
    let units = table.units();
    let steps_total = drain.steps_total();
    let guard = &drain.plan.guard;
    json!({
        "id": drain.id,
        "zone": drain.plan.zone,
        "domain": drain.plan.domain.as_deref().unwrap_or(crate::core::DEFAULT_DOMAIN),
        "color": table.lane(drain.plan.color),
        "mode": drain.plan.mode.as_str(),
        "receiving_zone": table.zone_of(drain.receiving_color()),
        "receiving_zones": drain.receiving_zones().iter().map(|z| table.zone_of(*z)).collect::<Vec<_>>(),
        "state": drain.state_name(),
        "direction": match drain.direction { crate::core::Direction::Forward => "forward", crate::core::Direction::Back => "back" },
        "from_percent": drain.zone_percent(drain.start_blue_units, units),
        "target_percent": drain.zone_percent(drain.plan.target_blue_units, units),
        "current_percent": if drain.is_active() { json!(drain.zone_percent(current_units(drain, table), units)) } else { Value::Null },
        "step_percent": f64::from(drain.plan.step_units) * 100.0 / f64::from(units),
        "interval": format_duration_ms(drain.plan.interval_ms),
        "interval_ms": drain.plan.interval_ms,
        "steps_done": drain.steps_done,
        "steps_total": steps_total,
        "progress": if steps_total == 0 { 1.0 } else { f64::from(drain.steps_done) / f64::from(steps_total) },
        "next_step_at": (drain.status == crate::core::DrainStatus::Running).then(|| iso8601(drain.next_due_ms)),
        "hold_reason": drain.hold_reason,
        "backlog_messages": backlog,
        "pause_cause": drain.pause_cause,
        "consecutive_breaches": drain.consecutive_breaches,
        "guard": {
            "max_error_rate": guard.max_error_rate,
            "min_requests": guard.min_requests,
            "breaches": guard.breaches,
            "on_breach": guard.on_breach.as_str(),
        },
        "started_by": drain.started_by,
        "started_at": iso8601(drain.started_ms),
        "reason": drain.reason,
        "finished_at": drain.finished_ms.map(iso8601),
        "freeze": freeze_body(drain, table),
    })
}

/// What a drain counts in the table now: the dial's blue units, or the drained zone's units on
/// a zone drain among N.
fn current_units(drain: &Drain, table: &RoutingTable) -> u32 {
    let domain = drain.plan.domain.as_deref();
    if drain.is_zone_drain() {
        table.map_of(domain).map_or(0, |m| m.count(drain.plan.color))
    } else {
        table.blue_units_in(domain).unwrap_or(0)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct GuardRequest {
    max_error_rate: Option<f64>,
    min_requests: Option<u64>,
    breaches: Option<u32>,
    on_breach: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DrainRequest {
    zone: String,
    target_percent: f64,
    step_percent: Option<f64>,
    interval: Option<String>,
    #[serde(default)]
    guard: GuardRequest,
    /// `maintenance` (the default) or `evacuate`.
    mode: Option<String>,
    /// The routing domain whose dial the drain moves (default: `default`).
    domain: Option<String>,
    /// Loss-less steps: freeze the units of each step, switch, unfreeze (default: the server's
    /// `[freeze] by_default` for a maintenance drain, off for an evacuation).
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    freeze_window: Option<String>,
    /// On a table of three or more zones: the zones that receive the drained zone's units
    /// (default: every other live zone), spread by free room.
    to: Option<Vec<String>>,
    reason: String,
    expected_version: Option<u64>,
}

/// Turns the request's zone-share terms into a plan in blue units, filling in config defaults.
#[allow(clippy::too_many_arguments)]
fn plan_from(
    app: &App,
    table: &RoutingTable,
    zone: &str,
    target_percent: f64,
    step_percent: Option<f64>,
    interval: Option<&str>,
    guard: &GuardRequest,
    mode: DrainMode,
    to: Option<&[String]>,
) -> Result<DrainPlan, ApiError> {
    let config = &app.config.drain;
    let (default_step, default_interval, default_guard) = match mode {
        DrainMode::Maintenance => (config.step_percent, config.interval_ms, config.guard),
        DrainMode::Evacuate => {
            let e = &config.evacuate;
            (e.step_percent, e.interval_ms, e.guard)
        }
    };
    let invalid = |what: String| ApiError::bad_request("invalid_drain", what);
    let zones = table.zones();
    let color =
        zones.color_in(zone).or_else(|| app.config.zones.color_in(zone)).ok_or_else(|| {
            ApiError::bad_request(
                "unknown_zone",
                format!("zone `{zone}` is not one of {}", zone_names(zones)),
            )
        })?;
    let units = table.units();
    let target = Share::from_percent(target_percent, units)
        .map_err(|e| invalid(format!("target_percent: {e}")))?;
    let receivers = receivers_from(table, color, to)?;
    let target_blue_units = match &receivers {
        // A zone drain among N counts the drained zone's own units.
        Some(_) => target.blue_units,
        None if color == ZoneId::BLUE => target.blue_units,
        None => units - target.blue_units,
    };
    let step = Share::from_percent(step_percent.unwrap_or(default_step), units)
        .map_err(|e| invalid(format!("step_percent: {e}")))?;
    if step.blue_units == 0 {
        return Err(invalid("step_percent must move at least one unit".into()));
    }
    let interval_ms = match interval {
        Some(text) => parse_duration_ms(text).map_err(|e| invalid(format!("interval: {e}")))?,
        None => default_interval,
    };
    if interval_ms < 10 {
        return Err(invalid("interval must be at least 10ms".into()));
    }
    if interval_ms > crate::core::MAX_DRAIN_INTERVAL_MS {
        return Err(invalid(format!(
            "interval must be at most {}",
            format_duration_ms(crate::core::MAX_DRAIN_INTERVAL_MS)
        )));
    }
    let on_breach = match guard.on_breach.as_deref() {
        None => default_guard.on_breach,
        Some("pause") => OnBreach::Pause,
        Some("rollback") => OnBreach::Rollback,
        Some(other) => {
            return Err(invalid(format!(
                "guard.on_breach: `{other}` is not `pause` or `rollback`"
            )));
        }
    };
    let max_error_rate = guard.max_error_rate.unwrap_or(default_guard.max_error_rate);
    if !(0.0..=1.0).contains(&max_error_rate) {
        return Err(invalid(format!(
            "guard.max_error_rate must be between 0 and 1 (0.02 = 2%), got {max_error_rate}"
        )));
    }
    Ok(DrainPlan {
        zone: zone.to_owned(),
        color,
        target_blue_units,
        step_units: step.blue_units,
        interval_ms,
        guard: Guard {
            max_error_rate,
            min_requests: guard.min_requests.unwrap_or(default_guard.min_requests),
            breaches: guard.breaches.unwrap_or(default_guard.breaches),
            on_breach,
        },
        mode,
        domain: None,
        freeze_ms: None,
        receivers,
    })
}

/// The zones a table lists, for an unknown-zone error: `az-a, az-b, az-c`.
fn zone_names(zones: &crate::core::Zones) -> String {
    zones.live().map(|z| zones.zone_of(z).to_owned()).collect::<Vec<_>>().join(", ")
}

/// A drain's receivers: `None` on a two-zone table (the dial gives the other zone every unit
/// it moves; `to` may name that zone and nothing else), the named zones or every other live
/// zone on a table of three or more.
fn receivers_from(
    table: &RoutingTable,
    source: ZoneId,
    to: Option<&[String]>,
) -> Result<Option<Vec<ZoneId>>, ApiError> {
    let zones = table.zones();
    let mut named = Vec::new();
    for (i, name) in to.unwrap_or_default().iter().enumerate() {
        let zone = zones.color_in(name).ok_or_else(|| {
            ApiError::bad_request(
                "unknown_zone",
                format!("to[{i}]: zone `{name}` is not one of {}", zone_names(zones)),
            )
        })?;
        named.push(zone);
    }
    if zones.is_two() {
        let other = crate::core::counterpart(source);
        if let Some(i) = named.iter().position(|z| *z != other) {
            return Err(ApiError::bad_request(
                "invalid_drain",
                format!(
                    "to[{i}]: a two-zone drain moves users to `{}`, the other zone",
                    zones.zone_of(other)
                ),
            ));
        }
        return Ok(None);
    }
    let receivers = if to.is_some() {
        crate::core::Receivers::Named(named)
    } else {
        crate::core::Receivers::Spread
    };
    crate::core::receiving_zones(zones, source, &receivers, 1)
        .map(Some)
        .map_err(|e| ApiError::bad_request("invalid_drain", e.to_string()))
}

/// Whether a request's move freezes by default: `[freeze] by_default` covers maintenance
/// drains, unit moves and dial moves; evacuations and channel changes freeze only when asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FreezeKind {
    /// Frozen unless the request says `"freeze": false`, when `[freeze] by_default` is on.
    Move,
    /// Frozen only with `"freeze": true` (speed first).
    OnRequest,
}

/// The freeze window of a loss-less move (`code` is the error's) from the request's `freeze`
/// and `freeze_window`, `[freeze] by_default` for a [`FreezeKind::Move`] and `[freeze] window`
/// when the request names none.
pub(super) fn freeze_from(
    config: &crate::config::Config,
    kind: FreezeKind,
    freeze: Option<bool>,
    window: Option<&str>,
    code: &'static str,
) -> Result<Option<u64>, ApiError> {
    let invalid = |what: String| ApiError::bad_request(code, what);
    let by_default = kind == FreezeKind::Move && config.freeze_by_default;
    match (freeze.unwrap_or(by_default), window) {
        (false, None) => Ok(None),
        (false, Some(_)) => Err(invalid(
            "freeze_window: set `freeze: true` to freeze (a drain's steps, a channel's change)"
                .into(),
        )),
        (true, None) => Ok(Some(config.freeze_window_ms)),
        (true, Some(text)) => {
            let ms = parse_duration_ms(text).map_err(|e| invalid(format!("freeze_window: {e}")))?;
            if !(100..=crate::core::MAX_FREEZE_MS).contains(&ms) {
                return Err(invalid(format!(
                    "freeze_window must be from 100ms to {}",
                    format_duration_ms(crate::core::MAX_FREEZE_MS)
                )));
            }
            Ok(Some(ms))
        }
    }
}

/// A drain's freeze in progress and its finished freezes, for `GET /v1/drains`.
fn freeze_body(drain: &Drain, table: &RoutingTable) -> Value {
    let current = drain.freeze.as_ref().map(|f| {
        json!({
            "phase": if f.switched.is_some() { "switched" } else { "freezing" },
            "units": f.units.to_string(),
            "unit_count": f.units.len(),
            "blue_units": f.blue_units,
            "moves": f.moves.as_ref().map(|moves| moves.iter().map(|m| json!({"units": m.units.to_string(), "zone": table.zone_of(m.zone)})).collect::<Vec<_>>()),
            "frozen_version": f.frozen_version,
            "frozen_at": iso8601(f.frozen_ms),
            "switched_version": f.switched.map(|(v, _)| v),
            "switched_at": f.switched.map(|(_, ms)| iso8601(ms)),
        })
    });
    let finished: Vec<Value> = drain
        .freezes
        .iter()
        .map(|r| {
            json!({
                "step": r.step,
                "units": r.units,
                "window_ms": r.window_ms,
                "switch_after_ms": r.switch_after_ms,
                "note": r.note,
            })
        })
        .collect();
    json!({
        "enabled": drain.plan.freeze_ms.is_some(),
        "window_ms": drain.plan.freeze_ms,
        "current": current,
        "finished": finished,
    })
}

async fn start_drain(
    app: &App,
    by: String,
    plan: DrainPlan,
    reason: String,
    expected_version: Option<u64>,
) -> Result<(Status, Versioned), ApiError> {
    let submitted =
        super::submit(app, Command::StartDrain { plan }, expected_version, by, reason).await?;
    let drain = submitted.state.drains().next_back().expect("a drain was just started");
    Ok((
        Status::Created,
        Versioned::new(&drain_body(app, drain, &submitted.table), submitted.table.version()),
    ))
}

#[post("/v1/drains", data = "<request>")]
async fn post_drain(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, DrainRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let mode = match r.mode.as_deref() {
        None => DrainMode::Maintenance,
        Some(text) => DrainMode::parse(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_drain",
                format!("mode: `{text}` is not `maintenance` or `evacuate`"),
            )
        })?,
    };
    let table = app.coordinator.table();
    let domain = super::units::named_domain(&table, r.domain.as_deref())?;
    let mut plan = plan_from(
        app,
        &table,
        &r.zone,
        r.target_percent,
        r.step_percent,
        r.interval.as_deref(),
        &r.guard,
        mode,
        r.to.as_deref(),
    )?;
    plan.domain = domain;
    // A maintenance drain follows `[freeze] by_default`; an evacuation is speed first.
    let kind = if mode == crate::core::DrainMode::Maintenance {
        FreezeKind::Move
    } else {
        FreezeKind::OnRequest
    };
    plan.freeze_ms =
        freeze_from(&app.config, kind, r.freeze, r.freeze_window.as_deref(), "invalid_drain")?;
    start_drain(app, by, plan, r.reason, r.expected_version).await
}

#[get("/v1/drains/current")]
fn get_current_drain(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let drain = state.active_drain().ok_or_else(|| {
        ApiError::new(
            Status::NotFound,
            "no_active_drain",
            "no drain is running or paused; GET /v1/drains lists past drains",
        )
    })?;
    Ok(Json(drain_body(app, drain, state.table())))
}

#[get("/v1/drains")]
fn get_drains(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let state = app.coordinator.state();
    let drains: Vec<Value> =
        state.drains().rev().map(|d| drain_body(app, d, state.table())).collect();
    Ok(Json(json!({ "drains": drains })))
}

#[get("/v1/drains/<id>", rank = 2)]
fn get_drain(app: &State<App>, caller: Caller, id: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let id = parse_id(id)?;
    let state = app.coordinator.state();
    let drain = state.drain(id).ok_or_else(|| not_found(id))?;
    Ok(Json(drain_body(app, drain, state.table())))
}

fn parse_id(id: &str) -> Result<u64, ApiError> {
    id.parse().map_err(|_| {
        ApiError::bad_request(
            "invalid_drain_id",
            format!("`{id}` is not a drain ID (a whole number)"),
        )
    })
}

fn not_found(id: u64) -> ApiError {
    ApiError::new(Status::NotFound, "drain_not_found", format!("there is no drain {id}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionRequest {
    reason: String,
    expected_version: Option<u64>,
}

#[post("/v1/drains/<id>/<action>", data = "<request>")]
async fn drain_action(
    app: &State<App>,
    caller: Caller,
    id: &str,
    action: &str,
    request: JsonBody<'_, ActionRequest>,
) -> Result<Versioned, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let id = parse_id(id)?;
    let command = match action {
        "pause" => Command::PauseDrain { drain: id },
        "resume" => Command::ResumeDrain { drain: id },
        "abort" => Command::AbortDrain { drain: id },
        "rollback" => Command::RollbackDrain { drain: id },
        "complete" => Command::CompleteDrain { drain: id },
        other => {
            return Err(ApiError::new(
                Status::NotFound,
                "not_found",
                format!(
                    "`{other}` is not a drain action: pause, resume, abort, rollback or complete"
                ),
            ));
        }
    };
    let r = request.map_err(json_error)?.into_inner();
    let submitted = super::submit(app, command, r.expected_version, by, r.reason).await?;
    let drain = submitted.state.drain(id).ok_or_else(|| not_found(id))?;
    let mut body = drain_body(app, drain, &submitted.table);
    body["changed"] = json!(submitted.applied.is_some());
    Ok(Versioned::new(&body, submitted.table.version()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreRequest {
    reason: String,
    target_percent: Option<f64>,
    step_percent: Option<f64>,
    interval: Option<String>,
    #[serde(default)]
    guard: GuardRequest,
    expected_version: Option<u64>,
}

/// Brings a zone back gradually: a drain toward the share the zone had before its latest
/// completed drain (or the request's `target_percent`, or 50 %).
#[post("/v1/zones/<zone>/restore", data = "<request>")]
async fn restore_zone(
    app: &State<App>,
    caller: Caller,
    zone: &str,
    request: JsonBody<'_, RestoreRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let state = app.coordinator.state();
    let table = state.table();
    if !table.zones().is_two() {
        // A zone drain among N moves units out of a zone; giving a zone units back is a unit
        // move (or a plan's restore), not a drain.
        return Err(ApiError::new(
            Status::Conflict,
            "needs_two_zones",
            "a restore steps the blue-green dial, which needs a two-zone table; with more zones, give the zone units with PUT /v1/units (a drill or rollback of a plan restores its starting map)",
        ));
    }
    let units = table.units();
    let target_percent = r.target_percent.unwrap_or_else(|| {
        state
            .drains()
            .rev()
            .find(|d| d.plan.zone == zone && d.state_name() == "completed")
            .map(|d| d.zone_percent(d.start_blue_units, units))
            .filter(|p| *p > 0.0)
            .unwrap_or(50.0)
    });
    let plan = plan_from(
        app,
        table,
        zone,
        target_percent,
        r.step_percent,
        r.interval.as_deref(),
        &r.guard,
        DrainMode::Maintenance,
        None,
    )?;
    start_drain(app, by, plan, r.reason, r.expected_version).await
}
