//! The routing table and the operator API that changes it: dial, pins, audit.

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, delete, get, put, routes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::idempotency::{IdempotencyKey, Scoped, Seen};
use super::tag::Versioned;
use super::{App, iso8601};
use crate::core::{Command, PinChange, Share, ZoneId};
use crate::service::coordinator::AuditError;
pub use crate::service::routing_frames::routing_body;

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("routing", |rocket| async {
        rocket.mount("/", routes![get_routing, put_dial, put_pin, delete_pin, get_audit])
    })
}

#[get("/v1/routing")]
fn get_routing(app: &State<App>, caller: Caller) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let table = app.coordinator.table();
    Ok(Versioned::new(&routing_body(&table, app.coordinator.log_id()), table.version()))
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct DialRequest {
    blue_percent: Option<f64>,
    blue_units: Option<u64>,
    /// The routing domain whose dial moves (absent or `default`: the default domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domain: Option<String>,
    expected_version: u64,
    reason: String,
    /// Move even when the receiving zone's capacity says no (audited in the reason).
    #[serde(default)]
    force: bool,
    /// Loss-less: freeze the units the move gives away, move them once every live subscriber
    /// has the freeze, unfreeze once every one has the move (a unit move of exactly the units
    /// the dial moves; default: the server's `[freeze] by_default`, off unless configured).
    #[serde(default)]
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    #[serde(default)]
    freeze_window: Option<String>,
}

#[put("/v1/dial", data = "<request>")]
async fn put_dial(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    request: JsonBody<'_, DialRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        request.freeze,
        request.freeze_window.as_deref(),
        "invalid_dial",
    )?;
    let key = match keyed(app, key, &by, &request)? {
        Keyed::Answered(answer) => return Ok((Status::Ok, answer)),
        Keyed::Submit(key) => key,
    };
    if !app.coordinator.table().zones().is_two() {
        return Err(crate::core::CommandError::NeedsTwoZones("the dial").into());
    }
    let domain = super::units::named_domain(&app.coordinator.table(), request.domain.as_deref())?;
    let units = app.coordinator.table().units();
    let share = match (request.blue_percent, request.blue_units) {
        (Some(percent), None) => Share::from_percent(percent, units),
        (None, Some(blue_units)) => Share::from_units(blue_units, units),
        _ => {
            return Err(ApiError::bad_request(
                "invalid_dial",
                "give exactly one of blue_percent and blue_units",
            ));
        }
    }
    .map_err(|e| ApiError::from(crate::core::CommandError::from(e)))?;
    let mut reason = request.reason;
    if app.capacities.is_configured() {
        let capacities = std::sync::Arc::clone(&app.capacities);
        // A named domain's dial is judged on the table as that domain sees it. Load is measured
        // per zone, not per domain, so its units are counted at the zone's per-unit load.
        let table = app.coordinator.table();
        let table =
            std::sync::Arc::new(table.view_of(domain.as_deref()).unwrap_or((*table).clone()));
        let to = share.blue_units;
        let verdict = rocket::tokio::task::spawn_blocking(move || {
            capacities.judge_dial(&table, to, super::now_ms())
        })
        .await
        .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
        if verdict.blocks() {
            if !request.force {
                return Err(ApiError::insufficient_capacity(&verdict));
            }
            reason = format!("{reason} [forced: insufficient_capacity: {}]", verdict.explain());
        }
    }
    // Loss-less: the dial's move as a unit move of exactly the units it gives away, through the
    // same door as every other change of owner.
    let table = app.coordinator.table();
    let map = table.map_of(domain.as_deref()).ok_or_else(|| {
        ApiError::new(Status::InternalServerError, "internal", "the domain vanished")
    })?;
    let next = map.set_count(ZoneId::BLUE, ZoneId::GREEN, share.blue_units);
    let units = crate::core::UnitSet::from_sorted(&map.diff(&next)).unwrap_or_default();
    let zone =
        if share.blue_units < map.count(ZoneId::BLUE) { ZoneId::GREEN } else { ZoneId::BLUE };
    let change = OwnerChange {
        moves_owner: !units.is_empty(),
        moves: vec![crate::core::UnitMove { units, zone, domain: domain.clone() }],
        at_once: Command::SetBlueUnits { blue_units: share.blue_units, domain },
        pins: Vec::new(),
        global: None,
    };
    let ask = ChangeAsk { expected_version: request.expected_version, by, reason };
    owner_change(app, change, window, request.freeze.is_none(), ask, key).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PinRequest {
    color: String,
    expected_version: u64,
    reason: String,
    /// Loss-less: freeze the user's unit where the pin changes their owner, pin once every live
    /// subscriber has the freeze, unfreeze once every one has the pin (default: the server's
    /// `[freeze] by_default`, as a unit move).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_window: Option<String>,
}

#[put("/v1/pins/<user_id>", data = "<request>")]
async fn put_pin(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    user_id: &str,
    request: JsonBody<'_, PinRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    let window = pin_window(app, request.freeze, request.freeze_window.as_deref())?;
    let key = match keyed(app, key, &by, &request)? {
        Keyed::Answered(answer) => return Ok((Status::Ok, answer)),
        Keyed::Submit(key) => key,
    };
    let table = app.coordinator.state().table_arc();
    let color: ZoneId = table.zones().by_lane(&request.color).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_color",
            format!(
                "`{}` is not a lane of this table; lanes: {}",
                request.color,
                table.zones().iter().map(|(_, z)| z.lane.as_str()).collect::<Vec<_>>().join(", ")
            ),
        )
    })?;
    let change = PinChange { user_id: user_id.to_owned(), zone: Some(color) };
    let ask = ChangeAsk { expected_version: request.expected_version, by, reason: request.reason };
    let change = OwnerChange {
        moves: Vec::new(),
        at_once: Command::Pin { user_id: change.user_id.clone(), color },
        moves_owner: pin_moves_owner(app, &change),
        pins: vec![change],
        global: None,
    };
    owner_change(app, change, window, request.freeze.is_none(), ask, key).await
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct UnpinRequest {
    expected_version: u64,
    reason: String,
    /// Loss-less, as for `PUT /v1/pins/{user}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_window: Option<String>,
}

#[delete("/v1/pins/<user_id>", data = "<request>")]
async fn delete_pin(
    app: &State<App>,
    caller: Caller,
    key: IdempotencyKey,
    user_id: &str,
    request: JsonBody<'_, UnpinRequest>,
) -> Result<(Status, Versioned), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    let window = pin_window(app, request.freeze, request.freeze_window.as_deref())?;
    let key = match keyed(app, key, &by, &request)? {
        Keyed::Answered(answer) => return Ok((Status::Ok, answer)),
        Keyed::Submit(key) => key,
    };
    let change = PinChange { user_id: user_id.to_owned(), zone: None };
    let ask = ChangeAsk { expected_version: request.expected_version, by, reason: request.reason };
    let change = OwnerChange {
        moves: Vec::new(),
        at_once: Command::Unpin { user_id: change.user_id.clone() },
        moves_owner: pin_moves_owner(app, &change),
        pins: vec![change],
        global: None,
    };
    owner_change(app, change, window, request.freeze.is_none(), ask, key).await
}

/// A pin change's freeze window: as a unit move's (`[freeze] by_default` unless the request
/// says), since a pin moves its user from one owner to another.
fn pin_window(
    app: &App,
    freeze: Option<bool>,
    window: Option<&str>,
) -> Result<Option<u64>, ApiError> {
    super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        freeze,
        window,
        "invalid_body",
    )
}

/// Who asks for a change of owner, against which version, and why.
pub(super) struct ChangeAsk {
    pub expected_version: u64,
    pub by: String,
    pub reason: String,
}

/// A change of owner that is not a unit move: pin changes, or a move of the global writer.
pub(super) struct OwnerChange {
    /// The command that makes it at once (no freeze window, or no owner changes).
    pub at_once: Command,
    /// Whether it gives some user (or global data) another owner.
    pub moves_owner: bool,
    /// The unit moves it makes (a dial's), as `FreezeUnits` makes them.
    pub moves: Vec<crate::core::UnitMove>,
    pub pins: Vec<PinChange>,
    pub global: Option<crate::core::GlobalWriter>,
}

/// Makes a change of owner: at once without a freeze window, or loss-less through the same
/// freeze -> switch -> unfreeze as a unit move (`FreezeUnits` with its pins or global writer):
/// what it moves is frozen (a pinned user's unit in every domain where the pin changes their
/// owner; global writes for the global writer), the change is made once every live
/// subscriber has the freeze, and it thaws once every one has the change. A change that moves
/// no owner (a pin to the zone that owns the user already, a read-only flag) is made at once.
/// `by_default`: the freeze came from `[freeze] by_default`, so the answer waits for its end
/// (200, or 409 `freeze_aborted` when it was undone); asked for, the answer is 202 at once.
pub(super) async fn owner_change(
    app: &App,
    change: OwnerChange,
    window: Option<u64>,
    by_default: bool,
    ask: ChangeAsk,
    key: Scoped,
) -> Result<(Status, Versioned), ApiError> {
    let ChangeAsk { expected_version, by, reason } = ask;
    let OwnerChange { at_once, moves_owner, moves, pins, global } = change;
    let Some(window_ms) = window.filter(|_| moves_owner) else {
        let answer = submit(app, at_once, expected_version, by, reason, key).await?;
        return Ok((Status::Ok, answer));
    };
    let command = Command::FreezeUnits { moves, pins, global, window_ms };
    let submitted = match submit_keyed(
        app,
        command,
        expected_version,
        by.clone(),
        reason.clone(),
        &key,
    )
    .await
    {
        Err(e) if by_default && super::freeze_wait::unreadable(&e) => {
            let reason = super::freeze_wait::at_once_reason(&reason);
            let answer = submit(app, at_once, expected_version, by, reason, key).await?;
            return Ok((Status::Ok, answer));
        }
        other => other?,
    };
    let within_hold = super::freeze_wait::within_hold(&submitted);
    let mut body = routing_body(&submitted.table, app.coordinator.log_id());
    body["changed"] = json!(submitted.applied.is_some());
    body["change"] = super::units::units_change_body(&app.coordinator.state());
    body["within_hold"] = json!(within_hold);
    let answer = Versioned::new(&body, submitted.table.version());
    app.idempotency.answered(&key, answer.body(), submitted.table.version());
    if within_hold {
        // Made at once inside a held hold, which froze its units: done.
        return Ok((Status::Ok, answer));
    }
    if by_default && submitted.applied.is_some() {
        let frozen_version = submitted.change_version();
        if let Some(done) = super::freeze_wait::default_freeze_end(
            app,
            frozen_version,
            window_ms,
            Some(&key),
            |_| {},
        )
        .await?
        {
            return Ok((Status::Ok, done));
        }
    }
    Ok((Status::Accepted, answer))
}

/// Whether `change` gives its user another owner ([`crate::core::State::pin_changes_owner`],
/// the rule the freeze itself follows). A pin the state would refuse counts as a change: the
/// freeze's submission then answers the refusal.
fn pin_moves_owner(app: &App, change: &PinChange) -> bool {
    app.coordinator.state().pin_changes_owner(change).unwrap_or(true)
}

/// A change request's `Idempotency-Key`, looked up in what this replica remembers.
pub(super) enum Keyed {
    /// The caller sent this key with this request before: its answer, again.
    Answered(Versioned),
    /// Submit, under the scoped key's command id (a drawn key without the header).
    Submit(Scoped),
}

/// Scopes the key to the caller and binds it to this request (method, path, `request`);
/// refuses the key's reuse for another request (422 `idempotency_key_reused`).
pub(super) fn keyed(
    app: &App,
    key: IdempotencyKey,
    by: &str,
    request: &impl Serialize,
) -> Result<Keyed, ApiError> {
    let scoped = key.scope(by, request)?;
    Ok(match app.idempotency.check(&scoped, std::time::Instant::now())? {
        Seen::Answered(body, version) => Keyed::Answered(Versioned::rendered(body, version)),
        Seen::Refused(refusal) => return Err(refusal),
        Seen::Submit => Keyed::Submit(scoped),
    })
}

/// Submits a command and renders the table that change produced (its own version and values,
/// not whatever the replica reached since), remembering the answer under its key.
async fn submit(
    app: &App,
    command: Command,
    expected_version: u64,
    by: String,
    reason: String,
    key: Scoped,
) -> Result<Versioned, ApiError> {
    let submitted = submit_keyed(app, command, expected_version, by, reason, &key).await?;
    let mut body = routing_body(&submitted.table, app.coordinator.log_id());
    body["changed"] = json!(submitted.applied.is_some());
    let answer = Versioned::new(&body, submitted.table.version());
    app.idempotency.answered(&key, answer.body(), submitted.table.version());
    Ok(answer)
}

/// Submits `command` under `key`'s command id; an error that names the command id (an unknown
/// outcome) names the client's key instead, which is what the client retries with.
pub(super) async fn submit_keyed(
    app: &App,
    command: Command,
    expected_version: u64,
    by: String,
    reason: String,
    key: &Scoped,
) -> Result<crate::service::coordinator::Submitted, ApiError> {
    let id = key.command_id();
    super::submit_with_id(app, command, Some(expected_version), by, reason, Some(id.clone()))
        .await
        .map_err(|mut e| {
            if let Some(named) = e.extra.get_mut("command_id") {
                *named = json!(key.key());
                e.detail = e.detail.replace(&id, key.key());
            }
            e
        })
}

#[derive(Serialize)]
struct AuditEntry<'a> {
    version: u64,
    at: String,
    at_ms: u64,
    by: &'a str,
    action: &'a str,
    reason: &'a str,
    from: &'a str,
    to: &'a str,
}

/// `GET /v1/audit?limit=N&before=V`: the newest N records below version V, newest first, and the
/// cursor of the next page. Pages inside the in-memory trail are answered from it; older ones
/// ("deep" pages) are read from the log, one at a time, and only for an identified reader (a
/// viewer, service or operator token, or a UI session) whenever any token is configured.
#[get("/v1/audit?<limit>&<before>")]
async fn get_audit(
    app: &State<App>,
    caller: Caller,
    limit: Option<&str>,
    before: Option<&str>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let max = crate::service::coordinator::AUDIT_IN_MEMORY;
    let limit = match limit {
        None => 100,
        Some(text) => {
            text.parse::<usize>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_limit",
                    format!("limit must be a whole number from 1 to {max}"),
                )
            })?
        }
    };
    let before = match before {
        None => None,
        Some(text) => Some(text.parse::<u64>().ok().filter(|v| *v >= 1).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_before",
                "before must be a whole number from 1 (a version; the page holds the records below it)",
            )
        })?),
    };
    let page = match app.coordinator.audit_in_memory(limit, before) {
        Some(page) => page,
        None => {
            if caller.is_anonymous()
                && !(app.config.operators.is_empty() && app.config.service_tokens.is_empty())
            {
                return Err(ApiError::new(
                    Status::Unauthorized,
                    "unauthorized",
                    "audit pages older than the in-memory trail are read from the log and need a viewer, service or operator token",
                ));
            }
            let coordinator = app.coordinator.clone();
            let before = before.unwrap_or(u64::MAX);
            rocket::tokio::task::spawn_blocking(move || coordinator.audit_from_log(limit, before))
                .await
                .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?
                .map_err(|e| match e {
                    AuditError::Busy => ApiError::new(
                        Status::ServiceUnavailable,
                        "audit_busy",
                        "another audit page is being read from the log; one is read at a time",
                    )
                    .with("retry_after_seconds", 1.into()),
                    AuditError::Unavailable(why) => ApiError::new(
                        Status::ServiceUnavailable,
                        "audit_unavailable",
                        format!("the audit page cannot be read from the log: {why}"),
                    ),
                })?
        }
    };
    let entries: Vec<AuditEntry<'_>> = page
        .records
        .iter()
        .map(|r| AuditEntry {
            version: r.version,
            at: iso8601(r.at_ms),
            at_ms: r.at_ms,
            by: &r.by,
            action: r.action,
            reason: &r.reason,
            from: &r.from,
            to: &r.to,
        })
        .collect();
    let source = if page.from_log { "log" } else { "memory" };
    Ok(Json(json!({ "entries": entries, "next_before": page.next_before, "source": source })))
}
