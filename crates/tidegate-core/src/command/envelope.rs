//! The envelope around a command: the genesis record, who asked and why, and what an accepted
//! command did.

use super::{Command, CommandError};
use crate::unit::UnitScheme;

/// Longest accepted audit reason, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The first record of every log: the unit scheme is fixed for the life of a log because changing
/// it would move almost every user at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Genesis {
    pub scheme: UnitScheme,
    pub blue_units: u32,
}

/// Who asked for a change, when (milliseconds since the Unix epoch, read by the caller) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub by: String,
    pub at_ms: u64,
    pub reason: String,
}

/// A command with the version it expects and its audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub expected_version: u64,
    pub command: Command,
    pub audit: Audit,
}

/// What an accepted command did, in words an operator reads in the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub version: u64,
    pub from: String,
    pub to: String,
}

pub(super) fn validate_audit(audit: &Audit) -> Result<(), CommandError> {
    if audit.by.trim().is_empty() {
        return Err(CommandError::MissingActor);
    }
    if audit.reason.trim().is_empty() {
        return Err(CommandError::MissingReason);
    }
    if audit.reason.len() > MAX_REASON_BYTES {
        return Err(CommandError::ReasonTooLong(audit.reason.len()));
    }
    Ok(())
}
