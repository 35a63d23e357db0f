//! Release channels (`/v1/channels`): a blue-green release of one service that takes
//! precedence over the global map for a sticky set of its users (`core::channel`).
//!
//! `PUT /v1/channels/{name}` parses the body into a resolved core `Channel` (naming the field of
//! any bad input), judges the receiving zone's capacity as if the channel's units moved there in
//! its domain (conservative: the service's share of a unit's load is not known, so the unit's
//! whole load is counted), and submits `Command::PutChannel` with the expected version and the
//! reason like every change. `DELETE` submits `Command::DeleteChannel`. Reads need a reader.

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::response::status::Custom;
use rocket::serde::json::Json;
use rocket::{State, delete, get, put, routes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::units::{named_domain, project, zone_named};
use super::{App, now_ms};
use crate::core::{ChannelFallback, ChannelSpec, Command, UnitSet, valid_name};
use crate::duration::parse_duration_ms;
use crate::service::routing_frames::{channel_body, channels_body};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("channels", |rocket| async {
        rocket.mount("/", routes![get_channels, get_channel, put_channel, delete_channel]).attach(
            AdHoc::on_liftoff("channel expiry", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    rocket::tokio::spawn(crate::service::channel_expiry::run(
                        std::sync::Arc::clone(&app.coordinator),
                        std::time::Duration::from_secs(1),
                        now_ms,
                        rocket.shutdown(),
                    ));
                    rocket::tokio::spawn(crate::service::staged_changes::run(
                        std::sync::Arc::clone(&app.coordinator),
                        std::sync::Arc::clone(&app.subscribers),
                        std::time::Duration::from_millis(50),
                        now_ms,
                        rocket.shutdown(),
                    ));
                })
            }),
        )
    })
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PutRequest {
    /// The services whose calls the channel routes.
    services: Vec<String>,
    /// The receiving zone, by name or lane.
    zone: String,
    /// The routing domain (absent: the default domain).
    #[serde(default)]
    domain: Option<String>,
    /// A sticky share of the users, in percent (or `units`).
    #[serde(default)]
    percent: Option<f64>,
    /// Explicit units (`0-9,17`), instead of `percent`.
    #[serde(default)]
    units: Option<String>,
    /// User IDs the channel selects besides its units.
    #[serde(default)]
    users: Vec<String>,
    /// `global` (default) or `reject`: what the channel's users get while it is suspended.
    #[serde(default)]
    fallback: Option<String>,
    /// When the coordinator removes the channel (milliseconds since the Unix epoch), or
    #[serde(default)]
    expires_at_ms: Option<u64>,
    /// how long from now (`2h`, `30m`).
    #[serde(default)]
    expires_in: Option<String>,
    expected_version: u64,
    reason: String,
    /// Put the channel even when the receiving zone's capacity says no (audited).
    #[serde(default)]
    force: bool,
    /// Answer the resolved channel and the capacity projection without changing anything.
    #[serde(default)]
    dry_run: bool,
    /// Loss-less: freeze the writes the change moves, switch once every live subscriber has
    /// the freeze, unfreeze once every one has the switch (default: off, the change is at once).
    #[serde(default)]
    freeze: Option<bool>,
    /// The freeze's maximum window (`[freeze] window`, 30s, by default; at most `10m`).
    #[serde(default)]
    freeze_window: Option<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct DeleteRequest {
    expected_version: u64,
    reason: String,
    /// Loss-less, as for a put.
    #[serde(default)]
    freeze: Option<bool>,
    #[serde(default)]
    freeze_window: Option<String>,
}

/// The channel change in progress (`null` between changes): its phase, what it freezes and
/// since when, for `GET /v1/channels` and the answer of a loss-less put or delete.
fn change_body(app: &App) -> Value {
    change_body_of(&app.coordinator.state())
}

/// [`change_body`] of a state.
pub(super) fn change_body_of(state: &crate::core::State) -> Value {
    let (Some(change), Some(freeze)) = (state.channel_change(), state.table().channel_freeze())
    else {
        return Value::Null;
    };
    json!({
        "channel": change.name,
        "phase": if change.phases.switched.is_some() { "switched" } else { "freezing" },
        "action": if change.next.is_some() { "put" } else { "delete" },
        "services": freeze.services,
        "units": freeze.units.to_string(),
        "unit_count": freeze.units.len(),
        "users": freeze.users,
        "frozen_version": change.phases.frozen_version,
        "frozen_at_ms": change.phases.frozen_ms,
        "window_ms": change.phases.window_ms,
        "switched_version": change.phases.switched.map(|(v, _)| v),
        "switched_at_ms": change.phases.switched.map(|(_, ms)| ms),
    })
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(Status::NotFound, "channel_not_found", format!("there is no channel `{name}`"))
}

/// `GET /v1/channels`: every release channel.
#[get("/v1/channels")]
fn get_channels(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let table = app.coordinator.table();
    Ok(Json(json!({
        "version": table.version(),
        "channels": channels_body(&table),
        "change": change_body(app),
    })))
}

/// `GET /v1/channels/{name}`.
#[get("/v1/channels/<name>")]
fn get_channel(app: &State<App>, caller: Caller, name: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let table = app.coordinator.table();
    let channel = table.channels().get(name).ok_or_else(|| not_found(name))?;
    let mut body = channel_body(&table, channel);
    body["version"] = json!(table.version());
    Ok(Json(body))
}

/// `PUT /v1/channels/{name}`: creates or replaces a channel.
#[put("/v1/channels/<name>", data = "<request>")]
async fn put_channel(
    app: &State<App>,
    caller: Caller,
    name: &str,
    request: JsonBody<'_, PutRequest>,
) -> Result<Custom<Json<Value>>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    // A channel change moves its users' owner for its services: loss-less by default, as a
    // unit move (`[freeze] by_default`).
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        r.freeze,
        r.freeze_window.as_deref(),
        "invalid_channel",
    )?;
    if !valid_name(name) {
        return Err(ApiError::bad_request(
            "invalid_channel",
            format!("name: a channel name is 1-64 bytes of [a-z0-9_.-], got `{name}`"),
        ));
    }
    let table = app.coordinator.table();
    let domain = named_domain(&table, r.domain.as_deref())?;
    let zone = zone_named(&table, "zone", &r.zone)?;
    let units = r
        .units
        .as_deref()
        .map(|u| UnitSet::parse(u, table.units()))
        .transpose()
        .map_err(|e| ApiError::bad_request("invalid_channel", format!("units: {e}")))?;
    let fallback = match r.fallback.as_deref() {
        None => ChannelFallback::Global,
        Some(f) => ChannelFallback::parse(f).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_channel",
                format!("fallback: `{f}` is not `global` or `reject`"),
            )
        })?,
    };
    let now = now_ms();
    let expires_at_ms = match (r.expires_at_ms, r.expires_in.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "invalid_channel",
                "expires_in: give `expires_at_ms` or `expires_in`, not both",
            ));
        }
        (Some(at), None) => Some(at),
        (None, Some(text)) => {
            let ms = parse_duration_ms(text).map_err(|e| {
                ApiError::bad_request("invalid_channel", format!("expires_in: {e}"))
            })?;
            if ms == 0 {
                return Err(ApiError::bad_request(
                    "invalid_channel",
                    "expires_in: must be longer than 0s",
                ));
            }
            Some(now.saturating_add(ms))
        }
        (None, None) => None,
    };
    let spec = ChannelSpec {
        name: name.to_owned(),
        domain: domain.clone(),
        services: r.services,
        zone,
        percent: r.percent,
        units,
        users: r.users,
        fallback,
        expires_at_ms,
    };
    let channel = spec
        .resolve(table.units(), now)
        .map_err(|e| ApiError::bad_request("invalid_channel", e.to_string()))?;
    if let Some(known) = app.config.channel_services.as_ref()
        && let Some(unknown) = channel.services.iter().find(|s| !known.contains(*s))
    {
        return Err(ApiError::bad_request(
            "unknown_service",
            format!(
                "services: `{unknown}` is not listed in [channels] services ({})",
                known.join(", ")
            ),
        ));
    }
    // Capacity: the receiving zone gains the channel's units of the domain it does not own yet.
    let mut next = table.map().clone();
    let mut next_domains = std::collections::BTreeMap::new();
    match domain.as_deref() {
        None => next = next.moved(&channel.units, channel.zone),
        Some(name) => {
            let map = table.map_of(Some(name)).ok_or_else(|| {
                ApiError::new(Status::InternalServerError, "internal", "the domain vanished")
            })?;
            next_domains.insert(name.to_owned(), map.moved(&channel.units, channel.zone));
        }
    }
    let (projection, blocking) = project(app, &table, &next, &next_domains, Some(name)).await?;
    let channel_json = channel_body(&table, &channel);
    if r.dry_run {
        let freeze = window.map(|_| {
            let before = table.channels().get(name);
            let map = table.map_of(domain.as_deref()).unwrap_or(table.map());
            let f = crate::core::change_freeze(map, name, before, Some(&channel));
            json!({"services": f.services, "units": f.units.to_string(), "unit_count": f.units.len(), "users": f.users})
        });
        return Ok(Custom(
            Status::Ok,
            Json(json!({
                "dry_run": true,
                "channel": channel_json,
                "projection": projection,
                "would_refuse": blocking.as_ref().map(crate::core::Verdict::explain),
                "freeze": freeze,
            })),
        ));
    }
    let mut reason = r.reason;
    if let Some(verdict) = blocking {
        if !r.force {
            return Err(ApiError::insufficient_capacity(&verdict));
        }
        reason = format!("{reason} [forced: insufficient_capacity: {}]", verdict.explain());
    }
    if let Some(window_ms) = window {
        let command = Command::FreezeChannel {
            name: name.to_owned(),
            next: Some(channel.clone()),
            window_ms,
        };
        let ask = FreezeAsk {
            expected_version: r.expected_version,
            by: by.clone(),
            reason: reason.clone(),
            window_ms,
        };
        match freeze_answer(app, command, ask, r.freeze.is_none(), projection.clone()).await {
            // Frozen only by default, and a live replica of an older release cannot read a
            // freeze: put at once, as that release would, and say so in the audit.
            Err(e) if r.freeze.is_none() && super::freeze_wait::unreadable(&e) => {}
            other => return other,
        }
        reason = super::freeze_wait::at_once_reason(&reason);
    }
    let submitted =
        super::submit(app, Command::PutChannel { channel }, Some(r.expected_version), by, reason)
            .await?;
    let after = &submitted.table;
    let stored = after.channels().get(name).map(|c| channel_body(after, c));
    Ok(Custom(
        Status::Ok,
        Json(json!({
            "version": after.version(),
            "changed": submitted.applied.is_some(),
            "channel": stored,
            "projection": projection,
        })),
    ))
}

/// How a loss-less channel change is asked for.
struct FreezeAsk {
    expected_version: u64,
    by: String,
    reason: String,
    window_ms: u64,
}

/// Submits the freeze of a loss-less put or delete: 202 with the change in progress (the
/// switch and the unfreeze follow as every live subscriber applies each), or 200 `changed:
/// false` when the channel is already so. Frozen only by default (`by_default`), the request
/// waits for the change's end, as a unit move frozen by default does: 200 with `loss_less`, or
/// 409 `freeze_aborted` when it was undone (the channel unchanged).
async fn freeze_answer(
    app: &App,
    command: Command,
    ask: FreezeAsk,
    by_default: bool,
    projection: Vec<Value>,
) -> Result<Custom<Json<Value>>, ApiError> {
    let FreezeAsk { expected_version, by, reason, window_ms } = ask;
    let submitted = super::submit(app, command, Some(expected_version), by, reason).await?;
    let changed = submitted.applied.is_some();
    let frozen_version = submitted.change_version();
    if changed
        && by_default
        && let Some(loss_less) =
            super::freeze_wait::default_channel_freeze_end(app, frozen_version, window_ms).await?
    {
        let table = app.coordinator.table();
        return Ok(Custom(
            Status::Ok,
            Json(json!({
                "version": table.version(),
                "changed": true,
                "loss_less": loss_less,
                "projection": projection,
            })),
        ));
    }
    Ok(Custom(
        if changed { Status::Accepted } else { Status::Ok },
        Json(json!({
            "version": submitted.table.version(),
            "changed": changed,
            "change": if changed { change_body(app) } else { Value::Null },
            "projection": projection,
        })),
    ))
}

/// `DELETE /v1/channels/{name}`: removes a channel; its users go back to the global map.
#[delete("/v1/channels/<name>", data = "<request>")]
async fn delete_channel(
    app: &State<App>,
    caller: Caller,
    name: &str,
    request: JsonBody<'_, DeleteRequest>,
) -> Result<Custom<Json<Value>>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    // A channel change moves its users' owner for its services: loss-less by default, as a
    // unit move (`[freeze] by_default`).
    let window = super::drains::freeze_from(
        &app.config,
        super::drains::FreezeKind::Move,
        r.freeze,
        r.freeze_window.as_deref(),
        "invalid_channel",
    )?;
    let mut reason = r.reason;
    if let Some(window_ms) = window {
        let command = Command::FreezeChannel { name: name.to_owned(), next: None, window_ms };
        let ask = FreezeAsk {
            expected_version: r.expected_version,
            by: by.clone(),
            reason: reason.clone(),
            window_ms,
        };
        match freeze_answer(app, command, ask, r.freeze.is_none(), Vec::new()).await {
            Err(e) if r.freeze.is_none() && super::freeze_wait::unreadable(&e) => {}
            other => return other,
        }
        reason = super::freeze_wait::at_once_reason(&reason);
    }
    let command = Command::DeleteChannel { name: name.to_owned(), expired: false };
    let submitted = super::submit(app, command, Some(r.expected_version), by, reason).await?;
    Ok(Custom(
        Status::Ok,
        Json(json!({
            "version": submitted.table.version(),
            "changed": submitted.applied.is_some(),
            "deleted": name,
        })),
    ))
}
