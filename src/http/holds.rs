//! Holds: a freeze in place (`POST /v1/holds`, `DELETE /v1/holds`). The units named (and, with
//! `global`, global writes) are frozen and nothing moves, so a data-layer action (a replica's
//! catch-up, a promote) runs while no zone writes them; inside a held hold a change of owner of
//! held units (`PUT /v1/units`, a pin, `PUT /v1/global-writer` when it holds global writes) is
//! made at once. The hold is the unit change in progress (`GET /v1/changes`), so the loop that
//! moves loss-less changes also makes it held, undoes it at its window, and ends it at `hold`.
//!
//! This file holds the request, its command, the wait and the answer; the two handlers in
//! `units.rs` only guard, submit and answer (this file does not know `App`, so it joins no
//! import circle).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ApiError;
use crate::core::{Command, DEFAULT_DOMAIN, HeldUnits, MAX_HOLD_MS, RoutingTable, State, UnitSet};
use crate::duration::{format_duration_ms, parse_duration_ms};
use crate::service::coordinator::Coordinator;

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
pub(super) struct HoldRequest {
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
    pub expected_version: u64,
    pub reason: String,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReleaseRequest {
    pub expected_version: u64,
    pub reason: String,
}

/// The hold `r` asks for, checked against `table` (every error names its field).
pub(super) fn command_of(
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

/// The hold in progress (see `GET /v1/changes`), with whether it is held.
pub(super) fn hold_body(state: &State, held: bool) -> Value {
    json!({
        "version": state.version(),
        "held": held,
        "hold": units_change_body(state),
    })
}

/// How the wait for a hold ended.
pub(super) enum Waited {
    /// Every live subscriber has its freeze.
    Held,
    /// Undone (or released) before it was held.
    Ended,
    /// Still freezing after its window and some slack.
    Running,
}

/// Waits until the hold frozen at `frozen_version` is held or has ended, at most `window_ms`
/// plus ten seconds (a loop that is not running never hangs the request).
pub(super) async fn held(coordinator: &Coordinator, frozen_version: u64, window_ms: u64) -> Waited {
    let mut states = coordinator.subscribe();
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

/// The loss-less unit change in progress, a move or a hold (`null` between them): its phase, moves and frozen
/// units, for `GET /v1/changes` and the answer of a loss-less move.
pub(crate) fn units_change_body(state: &crate::core::State) -> Value {
    let Some(change) = state.units_change() else { return Value::Null };
    let table = state.table();
    json!({
        "kind": if change.hold_ms.is_some() { "hold" } else { "move" },
        "phase": match (change.phases.switched.is_some(), change.hold_ms.is_some()) {
            (false, _) => "freezing",
            (true, false) => "switched",
            (true, true) => "held",
        },
        "hold_ms": change.hold_ms,
        "moves": change.moves.iter().map(|m| json!({
            "units": m.units.to_string(),
            "zone": table.zone_of(m.zone),
            "lane": table.lane(m.zone),
            "domain": m.domain.as_deref().unwrap_or(DEFAULT_DOMAIN),
        })).collect::<Vec<_>>(),
        "frozen": table
            .frozen()
            .iter()
            .map(|(domain, units)| (domain.clone(), json!(units.to_string())))
            .collect::<serde_json::Map<String, Value>>(),
        "frozen_version": change.phases.frozen_version,
        "frozen_at_ms": change.phases.frozen_ms,
        "window_ms": change.phases.window_ms,
        "switched_version": change.phases.switched.map(|(v, _)| v),
        "switched_at_ms": change.phases.switched.map(|(_, ms)| ms),
    })
}
