//! Holds: a freeze in place (`POST /v1/holds`, `DELETE /v1/holds`). The units named (and, with
//! `global`, global writes) are frozen and nothing moves, so a data-layer action (a replica's
//! catch-up, a promote) runs while no zone writes them; inside a held hold a change of owner of
//! held units (`PUT /v1/units`, a pin, `PUT /v1/global-writer` when it holds global writes) is
//! made at once. The hold is the unit change in progress (`GET /v1/changes`), so the loop that
//! moves loss-less changes also makes it held, undoes it at its window, and ends it at `hold`.

use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, delete, post, routes};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, json_error};
use crate::core::{Command, HeldUnits, MAX_HOLD_MS, RoutingTable, UnitSet};
use crate::duration::{format_duration_ms, parse_duration_ms};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("holds", |rocket| async { rocket.mount("/", routes![post_hold, delete_hold]) })
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HeldBody {
    /// `0-19`, `0-19,40`: units of the table.
    units: String,
    /// The routing domain (absent: the default domain).
    #[serde(default)]
    domain: Option<String>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HoldRequest {
    #[serde(default)]
    units: Vec<HeldBody>,
    /// Hold global writes too.
    #[serde(default)]
    global: bool,
    /// The longest the hold lasts once held (`30s`, `10m`; at most 1h).
    hold: String,
    /// How long every live subscriber has to apply the freeze (default `[freeze] window`).
    #[serde(default)]
    freeze_window: Option<String>,
    expected_version: u64,
    reason: String,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ReleaseRequest {
    expected_version: u64,
    reason: String,
}

/// The hold `r` asks for, checked against `table` (every error names its field).
fn command_of(
    r: &HoldRequest,
    table: &RoutingTable,
    default_window_ms: u64,
) -> Result<Command, ApiError> {
    let invalid = |what: String| ApiError::bad_request("invalid_hold", what);
    let mut units = Vec::with_capacity(r.units.len());
    for (i, held) in r.units.iter().enumerate() {
        let set = UnitSet::parse(&held.units, table.units())
            .map_err(|e| invalid(format!("units[{i}].units: {e}")))?;
        units.push(HeldUnits { domain: held.domain.clone(), units: set });
    }
    let hold_ms = parse_duration_ms(&r.hold).map_err(|e| invalid(format!("hold: {e}")))?;
    if !(1..=MAX_HOLD_MS).contains(&hold_ms) {
        return Err(invalid(format!(
            "hold must be from 1ms to {}",
            format_duration_ms(MAX_HOLD_MS)
        )));
    }
    let window_ms = match &r.freeze_window {
        None => default_window_ms,
        Some(text) => {
            let ms = parse_duration_ms(text).map_err(|e| invalid(format!("freeze_window: {e}")))?;
            if !(100..=crate::core::MAX_FREEZE_MS).contains(&ms) {
                return Err(invalid(format!(
                    "freeze_window must be from 100ms to {}",
                    format_duration_ms(crate::core::MAX_FREEZE_MS)
                )));
            }
            ms
        }
    };
    Ok(Command::HoldUnits { units, global: r.global, window_ms, hold_ms })
}

/// `POST /v1/holds`: freezes the units named (and global writes, with `global`) in place and
/// answers once every live subscriber refuses their writes: 200 `held`; 409 `freeze_aborted`
/// when one did not apply the freeze within `freeze_window` (undone, nothing was held); 202 when
/// the loop has not decided by the window and some slack.
#[post("/v1/holds", data = "<request>")]
async fn post_hold(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, HoldRequest>,
) -> Result<(Status, Json<Value>), ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let command = command_of(&r, &app.coordinator.table(), app.config.freeze_window_ms)?;
    let Command::HoldUnits { window_ms, .. } = command else { unreachable!("a hold") };
    let submitted = super::submit(app, command, Some(r.expected_version), by, r.reason).await?;
    let frozen_version = submitted.change_version();
    match held(app, frozen_version, window_ms).await {
        Waited::Held => Ok((Status::Ok, Json(hold_body(app, true)))),
        Waited::Running => Ok((Status::Accepted, Json(hold_body(app, false)))),
        Waited::Ended => {
            let records = app.coordinator.audit(256);
            let end = records
                .iter()
                .rev()
                .find(|r| r.version > frozen_version && r.action == "units_unfreeze");
            let reason = end.map_or("the hold ended before it was held", |r| r.reason.as_str());
            Err(ApiError::new(
                Status::Conflict,
                "freeze_aborted",
                format!(
                    "the hold frozen at version {frozen_version} ended before every live subscriber applied it, so nothing was held: {reason}"
                ),
            ))
        }
    }
}

/// `DELETE /v1/holds`: releases the hold in progress (its units thaw in one audited version; a
/// hold not yet held is undone). 409 `no_hold` when none is in progress.
#[delete("/v1/holds", data = "<request>")]
async fn delete_hold(
    app: &State<App>,
    caller: Caller,
    request: JsonBody<'_, ReleaseRequest>,
) -> Result<Json<Value>, ApiError> {
    let by = caller.require_operator(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let state = app.coordinator.state();
    let Some(change) = state.units_change().filter(|c| c.hold_ms.is_some()) else {
        return Err(ApiError::new(
            Status::Conflict,
            "no_hold",
            "no hold is in progress (GET /v1/changes shows the unit change in progress, if any)",
        ));
    };
    let aborted = change.phases.switched.is_none();
    let frozen_version = change.phases.frozen_version;
    let reason = format!("released: {}", r.reason);
    let command = Command::UnfreezeUnits { aborted };
    let submitted = super::submit(app, command, Some(r.expected_version), by, reason).await?;
    Ok(Json(json!({
        "version": submitted.table.version(),
        "released": {"frozen_version": frozen_version, "was_held": !aborted},
    })))
}

/// The hold in progress (see `GET /v1/changes`), with whether it is held.
fn hold_body(app: &App, held: bool) -> Value {
    let state = app.coordinator.state();
    json!({
        "version": state.version(),
        "held": held,
        "hold": super::units::units_change_body(&state),
    })
}

/// How the wait for a hold ended.
enum Waited {
    /// Every live subscriber has its freeze.
    Held,
    /// Undone (or released) before it was held.
    Ended,
    /// Still freezing after its window and some slack.
    Running,
}

/// Waits until the hold frozen at `frozen_version` is held or has ended, at most `window_ms`
/// plus ten seconds (a loop that is not running never hangs the request).
async fn held(app: &App, frozen_version: u64, window_ms: u64) -> Waited {
    let mut states = app.coordinator.subscribe();
    let deadline = rocket::tokio::time::Instant::now()
        + Duration::from_millis(window_ms)
        + Duration::from_secs(10);
    loop {
        {
            let state = states.borrow_and_update();
            match state.units_change().filter(|c| c.phases.frozen_version == frozen_version) {
                None => return Waited::Ended,
                Some(c) if c.is_held() => return Waited::Held,
                Some(_) => {}
            }
        }
        if !matches!(rocket::tokio::time::timeout_at(deadline, states.changed()).await, Ok(Ok(())))
        {
            return Waited::Running;
        }
    }
}
