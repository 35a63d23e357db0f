//! The dual-owner watch's API: services report a bounded sample of the writes they commit
//! (`POST /v1/writes`, a writer: the reports raise a page), and operators read the users caught
//! written by two zones (`GET /v1/writes/dual-owners`).
//!
//! A report counts under the caller's own name: a service token's is its identity
//! (`service:<hash prefix>`, the name that owns its subscribers; service tokens have no other
//! configured name), so it may omit `service` or send exactly that, and any other name is
//! refused (403 `service_mismatch`). An operator reports for any service it names (default
//! `operator:NAME`). Each service's writes are judged only against its own
//! (`service::write_watch`), so a report can neither raise nor hide a catch in another
//! service's writes.

use rocket::fairing::AdHoc;
use rocket::serde::json::Json;
use rocket::{State, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use rocket::http::Status;

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::{App, iso8601};
use crate::core::{WriteObservation, validate_user_id};
use crate::service::write_watch::{MAX_FUTURE_SKEW_MS, MAX_SERVICES, Refused};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

/// Most observations one report may carry: services send a sample, not every write.
pub const MAX_OBSERVATIONS: usize = 1000;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("writes", |rocket| async {
        rocket.mount("/", routes![post_writes, get_dual_owners])
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteReport {
    /// The reporting service's name, for the report and the logs: a service token's own
    /// identity (the default), any name for an operator (default `operator:NAME`).
    #[serde(default)]
    service: Option<String>,
    writes: Vec<ObservedWrite>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ObservedWrite {
    user_id: String,
    /// The zone that committed the write (by name or lane).
    zone: String,
    /// The routing version the writer's check judged with.
    version: u64,
    /// When it was committed, ms since the epoch (default: now).
    at_ms: Option<u64>,
}

#[post("/v1/writes", data = "<body>")]
fn post_writes(
    app: &State<App>,
    caller: Caller,
    body: JsonBody<'_, WriteReport>,
) -> Result<Json<Value>, ApiError> {
    let identity = caller.require_writer(&app.config)?;
    let report = body.map_err(json_error)?.into_inner();
    let service = match (&caller, report.service) {
        (Caller::Service { .. }, Some(named)) if named != identity => {
            return Err(ApiError::new(
                Status::Forbidden,
                "service_mismatch",
                format!(
                    "a service token reports only under its own name, `{identity}`: omit `service` or send that"
                ),
            ));
        }
        (_, Some(named)) => named,
        (_, None) => identity,
    };
    if service.is_empty() || service.len() > 128 {
        return Err(ApiError::bad_request("invalid_writes", "service: 1 to 128 bytes".to_owned()));
    }
    if report.writes.len() > MAX_OBSERVATIONS {
        return Err(ApiError::bad_request(
            "batch_too_large",
            format!("at most {MAX_OBSERVATIONS} write observations per report (send a sample)"),
        ));
    }
    let table = app.coordinator.table();
    let now = super::now_ms();
    // Validate everything first so a bad observation in the middle records nothing.
    let mut parsed = Vec::with_capacity(report.writes.len());
    for (i, w) in report.writes.into_iter().enumerate() {
        validate_user_id(&w.user_id).map_err(|e| {
            ApiError::bad_request("invalid_user_id", format!("writes[{i}].user_id: {e}"))
        })?;
        let zone = table
            .zones()
            .resolve(&w.zone)
            .map_err(|e| ApiError::bad_request("unknown_zone", format!("writes[{i}].zone: {e}")))?;
        if w.version > table.version() {
            return Err(ApiError::bad_request(
                "invalid_writes",
                format!(
                    "writes[{i}].version {} is newer than this coordinator's table ({})",
                    w.version,
                    table.version()
                ),
            ));
        }
        let at_ms = w.at_ms.unwrap_or(now);
        // Refused, not clamped: a clamped time would still be a time the writer did not
        // commit at, and the service's clock needs fixing either way.
        if at_ms > now.saturating_add(MAX_FUTURE_SKEW_MS) {
            return Err(ApiError::bad_request(
                "write_in_future",
                format!(
                    "writes[{i}].at_ms {at_ms} is {} ms ahead of this coordinator's clock (at most {MAX_FUTURE_SKEW_MS} ms of skew)",
                    at_ms - now
                ),
            ));
        }
        let observation =
            WriteObservation { zone: table.zone_of(zone).to_owned(), version: w.version, at_ms };
        parsed.push((w.user_id, observation));
    }
    let accepted = parsed.len();
    let recorded = app.write_watch.record(&service, parsed, now).map_err(|refused| match refused {
        Refused::TooManyServices => ApiError::new(
            Status::Conflict,
            "too_many_services",
            format!("{MAX_SERVICES} services report writes already; report under one of their names"),
        ),
        Refused::RateLimited { retry_after_ms } => ApiError::new(
            Status::TooManyRequests,
            "rate_limited",
            format!(
                "`{service}` reports faster than {} observations a second; send a smaller sample",
                crate::service::write_watch::OBSERVATIONS_PER_SECOND
            ),
        )
        .with("retry_after_seconds", json!(retry_after_ms.div_ceil(1000))),
    })?;
    Ok(Json(json!({
        "service": service,
        "accepted": accepted,
        "dual_owner_writes": recorded.caught,
    })))
}

#[get("/v1/writes/dual-owners")]
fn get_dual_owners(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let (total, recent, by_service) = app.write_watch.report();
    let recent: Vec<Value> = recent
        .iter()
        .map(|c| {
            json!({
                "user_id": c.user_id,
                "service": c.service,
                "owner": {"zone": c.newer.zone, "version": c.newer.version, "at": iso8601(c.newer.at_ms)},
                "stale": {"zone": c.stale.zone, "version": c.stale.version, "at": iso8601(c.stale.at_ms)},
            })
        })
        .collect();
    Ok(Json(json!({ "total": total, "by_service": by_service, "recent": recent })))
}
