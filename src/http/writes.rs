//! The dual-owner watch's API: services report a bounded sample of the writes they commit
//! (`POST /v1/writes`, a writer: the reports raise a page), and operators read the users caught
//! written by two zones (`GET /v1/writes/dual-owners`).

use rocket::fairing::AdHoc;
use rocket::serde::json::Json;
use rocket::{State, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::{App, iso8601};
use crate::core::{WriteObservation, validate_user_id};

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
    /// The reporting service's name, for the report and the logs.
    service: String,
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
    caller.require_writer(&app.config)?;
    let report = body.map_err(json_error)?.into_inner();
    if report.service.is_empty() || report.service.len() > 128 {
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
        let observation = WriteObservation {
            zone: table.zone_of(zone).to_owned(),
            version: w.version,
            at_ms: w.at_ms.unwrap_or(now),
        };
        parsed.push((w.user_id, observation));
    }
    let accepted = parsed.len();
    let caught = app.write_watch.record(&report.service, parsed);
    Ok(Json(json!({ "accepted": accepted, "dual_owner_writes": caught })))
}

#[get("/v1/writes/dual-owners")]
fn get_dual_owners(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let (total, recent) = app.write_watch.report();
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
    Ok(Json(json!({ "total": total, "recent": recent })))
}
