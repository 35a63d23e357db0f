//! Rebuilding the state from log entries: the only way state is ever constructed.

use std::collections::VecDeque;

use crate::core::{Audit, Envelope, Genesis, State, ZoneId, Zones};

use super::entry::{LogEntry, log_id_of, scheme_of};

/// How many audit records are kept in memory (and in a snapshot) for `GET /v1/audit`; older ones
/// stay in the log.
pub const AUDIT_IN_MEMORY: usize = 10_000;

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
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub genesis: Genesis,
    /// The genesis entry as logged (a snapshot stores it).
    pub genesis_entry: LogEntry,
    pub state: State,
    /// The newest [`AUDIT_IN_MEMORY`] audit records, oldest first.
    pub audit: VecDeque<AuditRecord>,
    /// Digest of the applied history ([`genesis_hash`], then [`history_hash`] per change).
    pub state_hash: u64,
}

/// The history digest right after the genesis entry of the log `log_id`.
pub fn genesis_hash(log_id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(log_id.as_bytes())
}

/// The history digest after a change that made `version`. Why no command id in it: a file log
/// moved onto a shared log (`tidegate log import`) reaches the same digest at every version, so
/// the two can be compared; two replicas of one log agree anyway, as they apply the same records.
pub fn history_hash(prev: u64, version: u64, action: &str, from: &str, to: &str) -> u64 {
    let digest = format!("{prev}|{version}|{action}|{from}|{to}");
    xxhash_rust::xxh3::xxh3_64(digest.as_bytes())
}

/// The audit record of a genesis entry (version 1); `None` for any other entry.
pub fn genesis_audit(entry: &LogEntry) -> Option<AuditRecord> {
    let LogEntry::Genesis { units, blue_units, at_ms, by, reason, .. } = entry else {
        return None;
    };
    Some(AuditRecord {
        version: 1,
        at_ms: *at_ms,
        by: by.clone(),
        reason: reason.clone(),
        action: "genesis",
        from: String::new(),
        to: format!("{units} units, {blue_units} blue"),
    })
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
pub fn replay(entries: &[LogEntry], zones: &Zones) -> Result<Replayed, ReplayError> {
    let fail = |line: usize, reason: String| ReplayError { line, reason };
    let Some(first) = entries.first() else {
        return Err(fail(1, "the log is empty (no genesis entry)".into()));
    };
    let LogEntry::Genesis { units, unit_mode, digits_skip, blue_units, .. } = first else {
        return Err(fail(1, "the first entry is not a genesis entry".into()));
    };
    let scheme = scheme_of(*units, unit_mode, *digits_skip).map_err(|e| fail(1, e))?;
    let genesis = Genesis { scheme, blue_units: *blue_units };
    // A genesis that pins the zones wins over the configuration: replay depends on the log only.
    // A log that does not pin them takes only the names of its two colours from the
    // configuration: zones beyond two exist in a log only through its genesis or `add_zone`.
    let zones = match first.genesis_zones().map_err(|e| fail(1, e))? {
        Some(pinned) => pinned,
        None => Zones::two(zones.zone_of(ZoneId::BLUE), zones.zone_of(ZoneId::GREEN)),
    };
    let state = State::genesis(genesis, zones).map_err(|e| fail(1, e.to_string()))?;
    let audit = VecDeque::from_iter(genesis_audit(first));
    let state_hash = genesis_hash(&log_id_of(first));
    let mut replayed = Replayed { genesis, genesis_entry: first.clone(), state, audit, state_hash };
    replay_after(&mut replayed, &entries[1..], 1)?;
    Ok(replayed)
}

/// Applies `entries` (changes only) to an earlier replay, such as a snapshot. `before` is how
/// many log entries `replayed` already covers, for the positions in errors.
pub fn replay_after(
    replayed: &mut Replayed,
    entries: &[LogEntry],
    before: u64,
) -> Result<(), ReplayError> {
    let fail = |line: usize, reason: String| ReplayError { line, reason };
    for (index, entry) in entries.iter().enumerate() {
        let line = before as usize + index + 1;
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
            LogEntry::Proposal { .. } | LogEntry::Lease { .. } => {
                return Err(fail(line, "a shared-log entry, which only a shared log holds".into()));
            }
        };
        let command = command.to_command(replayed.state.table()).map_err(|e| fail(line, e))?;
        let action = command.action();
        let envelope = Envelope {
            expected_version: *expected_version,
            command,
            audit: Audit { by: by.clone(), at_ms: *at_ms, reason: reason.clone() },
        };
        let (next, applied) = match replayed.state.apply(&envelope) {
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
        replayed.state_hash =
            history_hash(replayed.state_hash, applied.version, action, &applied.from, &applied.to);
        push_audit(
            &mut replayed.audit,
            AuditRecord {
                version: *version,
                at_ms: *at_ms,
                by: by.clone(),
                reason: reason.clone(),
                action,
                from: from.clone(),
                to: to.clone(),
            },
        );
        replayed.state = next;
    }
    Ok(())
}

/// The newest `limit` audit records with a version below `before`, newest first, from a whole
/// file log's `entries` (genesis first): the prefix of the log up to version `before - 1` is
/// replayed by [`replay`], the start-up replay itself, so a page read from the log is exactly
/// what the in-memory trail held when that version was the newest. `limit` is at most
/// [`AUDIT_IN_MEMORY`].
pub fn audit_before(
    entries: &[LogEntry],
    zones: &Zones,
    before: u64,
    limit: usize,
) -> Result<Vec<AuditRecord>, ReplayError> {
    let cut = entries
        .iter()
        .position(|e| matches!(e, LogEntry::Change { version, .. } if *version >= before))
        .unwrap_or(entries.len());
    let replayed = replay(&entries[..cut.max(1)], zones)?;
    Ok(replayed.audit.iter().rev().filter(|r| r.version < before).take(limit).cloned().collect())
}

/// Appends to the in-memory audit trail, forgetting the oldest beyond [`AUDIT_IN_MEMORY`].
pub fn push_audit(audit: &mut VecDeque<AuditRecord>, record: AuditRecord) {
    audit.push_back(record);
    while audit.len() > AUDIT_IN_MEMORY {
        audit.pop_front();
    }
}

/// The `'static` name of an audit action read back from a snapshot.
pub(crate) fn action_name(name: &str) -> Option<&'static str> {
    // Every name `Command::action` gives, plus the genesis. A name missing here made every
    // snapshot holding it unreadable (start-up then replays the whole log): the list is the
    // core's own, so a new command cannot be forgotten here.
    std::iter::once("genesis")
        .chain(crate::core::Command::ACTIONS.iter().copied())
        .find(|a| *a == name)
}
