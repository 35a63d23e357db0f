//! What one proposal of a shared log does: [`decide`] (the one place a proposal is decided, for
//! the `Applier` in `apply.rs` and for audit pages read from the log in `history.rs`), its
//! [`Outcome`], and the lease rule. Apart from `apply.rs`, so the snapshot and the history
//! files use them without importing the applier, which imports them.

use crate::core::{Applied, Audit, CommandError, Envelope, State};

use super::replay::AuditRecord;

/// The decided outcome of one proposal.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It took effect and made `applied.version`.
    Applied(Applied),
    /// It was valid but changed nothing (no version spent).
    Unchanged,
    /// The core refused it (a version conflict for a compare-and-set loser).
    Refused(CommandError),
    /// The record could not be read as a command (a foreign or newer writer).
    Unreadable(String),
    /// Refused when first applied, for this reason; known from a snapshot, which keeps the
    /// exact error of version conflicts only.
    RefusedEarlier(String),
}

/// A lease as the log decided it (`LogEntry::Lease`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub url: Option<String>,
    /// The audited time of the record that granted it last (a claim or a renewal).
    pub at_ms: u64,
    pub until_ms: u64,
}

/// Whether a claim of a lease by `holder`, stamped `at_ms`, is granted over `current`: when the
/// lease is free, is already `holder`'s (a renewal), or its term ended before `at_ms`. Pure, and
/// applied in log order, so every replica grants the same claims.
pub fn lease_granted(current: Option<&Lease>, holder: &str, at_ms: u64) -> bool {
    current.is_none_or(|lease| lease.holder == holder || lease.until_ms < at_ms)
}

/// Why [`decide`] took no effect.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The command cannot be read against the state (a lane the table does not have).
    Unreadable(String),
    /// The core refused it (a version conflict for a compare-and-set loser).
    Refused(CommandError),
}

/// What a proposal's command does to `state`: the next state, what was applied and its audit
/// record, or `None` when it changed nothing. The one place a proposal is decided, by the
/// [`Applier`] and by an audit page read from the log (`store::history`), so the two agree.
pub(crate) fn decide(
    state: &State,
    expected_version: u64,
    at_ms: u64,
    by: &str,
    reason: &str,
    command: &super::entry::WireCommand,
) -> Result<Option<(State, Applied, AuditRecord)>, Refusal> {
    let command = command.to_command(state.table()).map_err(Refusal::Unreadable)?;
    let action = command.action();
    let envelope = Envelope {
        expected_version,
        command,
        audit: Audit { by: by.to_owned(), at_ms, reason: reason.to_owned() },
    };
    let Some((next, applied)) = state.apply(&envelope).map_err(Refusal::Refused)? else {
        return Ok(None);
    };
    let record = AuditRecord {
        version: applied.version,
        at_ms,
        by: by.to_owned(),
        reason: reason.to_owned(),
        action,
        from: applied.from.clone(),
        to: applied.to.clone(),
    };
    Ok(Some((next, applied, record)))
}
