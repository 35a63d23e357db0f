//! Rebuilding the state from log entries: the only way state is ever constructed.

use crate::core::{Audit, ColorZones, Envelope, Genesis, State};

use super::entry::{LogEntry, scheme_of};

/// One line of the audit trail, newest last in memory and newest first over the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    pub version: u64,
    pub at_ms: u64,
    pub by: String,
    pub reason: String,
    pub action: &'static str,
    pub from: String,
    pub to: String,
}

/// The result of a replay.
#[derive(Debug)]
pub struct Replayed {
    pub genesis: Genesis,
    pub state: State,
    pub audit: Vec<AuditRecord>,
}

/// Why an entry could not be replayed: its 1-based position and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayError {
    pub line: usize,
    pub reason: String,
}

/// Replays `entries` (genesis first) into a state under the configured `zones`.
///
/// Every change is re-applied through [`State::apply`], so a log cannot smuggle in a state the
/// core would refuse, and an entry whose recorded version disagrees with the replay is an error.
pub fn replay(entries: &[LogEntry], zones: &ColorZones) -> Result<Replayed, ReplayError> {
    let fail = |line: usize, reason: String| ReplayError { line, reason };
    let Some(first) = entries.first() else {
        return Err(fail(1, "the log is empty (no genesis entry)".into()));
    };
    let LogEntry::Genesis {
        units,
        unit_mode,
        digits_skip,
        blue_units,
        at_ms,
        by,
        reason,
        zones: pinned,
        ..
    } = first
    else {
        return Err(fail(1, "the first entry is not a genesis entry".into()));
    };
    let scheme = scheme_of(*units, unit_mode, *digits_skip).map_err(|e| fail(1, e))?;
    let genesis = Genesis { scheme, blue_units: *blue_units };
    // A genesis that pins the zones wins over the configuration: replay depends on the log only.
    let zones = match pinned {
        Some(z) => ColorZones { blue: z.blue.clone(), green: z.green.clone() },
        None => zones.clone(),
    };
    let mut state = State::genesis(genesis, zones).map_err(|e| fail(1, e.to_string()))?;
    let mut audit = vec![AuditRecord {
        version: 1,
        at_ms: *at_ms,
        by: by.clone(),
        reason: reason.clone(),
        action: "genesis",
        from: String::new(),
        to: format!("{} units, {blue_units} blue", units),
    }];
    for (index, entry) in entries.iter().enumerate().skip(1) {
        let line = index + 1;
        let (version, expected_version, at_ms, by, reason, command, from, to) = match entry {
            LogEntry::Change {
                version,
                expected_version,
                at_ms,
                by,
                reason,
                command,
                from,
                to,
            } => (version, expected_version, at_ms, by, reason, command, from, to),
            LogEntry::Genesis { .. } => return Err(fail(line, "a second genesis entry".into())),
            LogEntry::Proposal { .. } => {
                return Err(fail(line, "a proposal entry, which only a shared log holds".into()));
            }
        };
        let command = command.to_command().map_err(|e| fail(line, e))?;
        let action = command.action();
        let envelope = Envelope {
            expected_version: *expected_version,
            command,
            audit: Audit { by: by.clone(), at_ms: *at_ms, reason: reason.clone() },
        };
        let (next, applied) = match state.apply(&envelope) {
            Ok(Some(done)) => done,
            Ok(None) => return Err(fail(line, "the entry changes nothing".into())),
            Err(e) => return Err(fail(line, e.to_string())),
        };
        if applied.version != *version {
            return Err(fail(
                line,
                format!("the entry says version {version}, the replay reached {}", applied.version),
            ));
        }
        audit.push(AuditRecord {
            version: *version,
            at_ms: *at_ms,
            by: by.clone(),
            reason: reason.clone(),
            action,
            from: from.clone(),
            to: to.clone(),
        });
        state = next;
    }
    Ok(Replayed { genesis, state, audit })
}
