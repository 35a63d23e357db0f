//! The synchronous answer of a move frozen by default: a caller that did not ask for a freeze
//! (`[freeze] by_default` froze its dial or unit move) keeps the contract it knows, one answer
//! with the table after the move, so the request waits for the change to end (unfrozen after
//! its switch: 200; undone without switching: 409 `freeze_aborted`, naming who held it). A
//! caller that asks with `"freeze": true` gets 202 at once and follows the change itself.

use std::time::Duration;

use rocket::http::Status;
use serde_json::{Value, json};

use super::App;
use super::error::ApiError;
use super::idempotency::Scoped;
use super::tag::Versioned;
use crate::service::routing_frames::routing_body;

/// How long past its window a request waits for the staged loop to end a change before it
/// answers 202 with the change still in progress (a loop that is not running never hangs it).
const SLACK: Duration = Duration::from_secs(10);

/// The end of a move frozen by default: the table after it (200), a 409 `freeze_aborted` when
/// it was undone, or `None` (answer 202) when it is still running. `decorate` adds what the
/// caller's answer carries besides the table; `key`, if any, remembers the final answer.
pub(super) async fn default_freeze_end(
    app: &App,
    frozen_version: u64,
    window_ms: u64,
    key: Option<&Scoped>,
    decorate: impl FnOnce(&mut Value),
) -> Result<Option<Versioned>, ApiError> {
    match change_end(app, Staged::Units, frozen_version, window_ms).await {
        Ended::Unfrozen { version, took_ms, said } => {
            let table = app.coordinator.table();
            let mut body = routing_body(&table, app.coordinator.log_id());
            body["changed"] = json!(true);
            body["loss_less"] = freeze_summary(frozen_version, version, took_ms, &said);
            decorate(&mut body);
            let answer = Versioned::new(&body, table.version());
            if let Some(key) = key {
                app.idempotency.answered(key, answer.body(), table.version());
            }
            Ok(Some(answer))
        }
        Ended::Aborted { version, reason } => {
            // A retry with the same key gets the same refusal, not the 202 of the freeze.
            let refusal = aborted(version, &reason);
            if let Some(key) = key {
                app.idempotency.refused(key, &refusal);
            }
            Err(refusal)
        }
        Ended::Running => Ok(None),
    }
}

/// The end of a channel change frozen by default (a `PUT` or `DELETE /v1/channels/{name}` that
/// did not say `freeze`): `Ok(Some(loss_less))` once unfrozen after its switch, 409
/// `freeze_aborted` when it was undone, `Ok(None)` (answer 202) while it still runs.
pub(super) async fn default_channel_freeze_end(
    app: &App,
    frozen_version: u64,
    window_ms: u64,
) -> Result<Option<Value>, ApiError> {
    match change_end(app, Staged::Channel, frozen_version, window_ms).await {
        Ended::Unfrozen { version, took_ms, said } => {
            Ok(Some(freeze_summary(frozen_version, version, took_ms, &said)))
        }
        Ended::Aborted { version, reason } => Err(aborted(version, &reason)),
        Ended::Running => Ok(None),
    }
}

/// The two kinds of staged change a request can wait for.
#[derive(Clone, Copy, Debug)]
enum Staged {
    /// A unit move or pin change (`units_change`, ended by `units_unfreeze`).
    Units,
    /// A channel change (`channel_change`, ended by `channel_unfreeze`).
    Channel,
}

/// How a staged change frozen at `frozen_version` ended.
#[derive(Debug)]
enum Ended {
    /// Switched and unfrozen: the audit record that unfroze it.
    Unfrozen { version: u64, took_ms: u64, said: String },
    /// Undone without switching (nothing moved), and why.
    Aborted { version: u64, reason: String },
    /// Still in progress after its window and [`SLACK`].
    Running,
}

/// Waits until the staged change of `kind` frozen at `frozen_version` has ended, at most
/// `window_ms` plus [`SLACK`].
async fn change_end(app: &App, kind: Staged, frozen_version: u64, window_ms: u64) -> Ended {
    let mut states = app.coordinator.subscribe();
    let deadline = rocket::tokio::time::Instant::now() + Duration::from_millis(window_ms) + SLACK;
    let unfreeze = match kind {
        Staged::Units => "units_unfreeze",
        Staged::Channel => "channel_unfreeze",
    };
    loop {
        let running = {
            let state = states.borrow_and_update();
            match kind {
                Staged::Units => {
                    state.units_change().is_some_and(|c| c.phases.frozen_version == frozen_version)
                }
                Staged::Channel => state
                    .channel_change()
                    .is_some_and(|c| c.phases.frozen_version == frozen_version),
            }
        };
        if !running {
            break;
        }
        if !matches!(rocket::tokio::time::timeout_at(deadline, states.changed()).await, Ok(Ok(())))
        {
            return Ended::Running;
        }
    }
    // The change has ended: its unfreeze is the first `units_unfreeze` after the freeze.
    let records = app.coordinator.audit(256);
    let frozen_at = records.iter().find(|r| r.version == frozen_version).map(|r| r.at_ms);
    let Some(end) =
        records.iter().rev().find(|r| r.version > frozen_version && r.action == unfreeze)
    else {
        // Past the in-memory trail (hundreds of changes in the wait): say it ended, unread.
        return Ended::Unfrozen {
            version: app.coordinator.state().version(),
            took_ms: 0,
            said: "the unit move ended".into(),
        };
    };
    if end.to.contains("without switching") {
        Ended::Aborted { version: end.version, reason: end.reason.clone() }
    } else {
        let took_ms = frozen_at.map_or(0, |at| end.at_ms.saturating_sub(at));
        Ended::Unfrozen { version: end.version, took_ms, said: end.to.clone() }
    }
}

/// Whether a freeze that applied was made at once inside a held hold (the hold covers its
/// units, so it started no change of its own): it is done, nothing to wait for.
pub(super) fn within_hold(submitted: &crate::service::coordinator::Submitted) -> bool {
    submitted.applied.is_some()
        && submitted.state.units_change().is_some_and(|c| {
            c.hold_ms.is_some() && c.phases.frozen_version != submitted.change_version()
        })
}

/// The 409 of a default freeze that was undone: nothing moved.
fn aborted(version: u64, reason: &str) -> ApiError {
    ApiError::new(
        Status::Conflict,
        "freeze_aborted",
        format!(
            "the move was frozen by default ([freeze] by_default) and undone at version {version} without switching, so nothing changed owner: {reason}"
        ),
    )
}

/// What the synchronous answer says about the freeze it waited for.
fn freeze_summary(frozen_version: u64, unfrozen_version: u64, took_ms: u64, said: &str) -> Value {
    json!({
        "by_default": true,
        "frozen_version": frozen_version,
        "unfrozen_version": unfrozen_version,
        "frozen_ms": took_ms,
        "said": said,
    })
}

/// Whether a freeze was refused because a live replica cannot read its record (a replica of a
/// release before loss-less moves, mid rolling upgrade). A move frozen only by default then
/// moves at once, as that release would ([`at_once_reason`]); one that asked for the freeze
/// keeps the refusal.
pub(super) fn unreadable(e: &ApiError) -> bool {
    e.code == "format_not_supported"
}

/// The audited reason of a move that [`unreadable`] sent at once.
pub(super) fn at_once_reason(reason: &str) -> String {
    let note = " [not frozen by default: a live replica cannot read a freeze yet]";
    let mut cut = crate::core::MAX_REASON_BYTES.saturating_sub(note.len()).min(reason.len());
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{note}", &reason[..cut])
}
