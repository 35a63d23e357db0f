//! Applying a shared log: every replica turns the same records into the same states and outcomes.
//!
//! A shared log (Kafka) holds *proposals*, not decided changes: any replica appends one, and
//! whether it takes effect is decided here, when the record is applied in log order. The decision
//! is a function of the records before it only (compare-and-set on the expected version, the
//! core's checks, and the command id seen before or not), so a compare-and-set loser is refused
//! on every replica the same way, and a retried command id applies at most once.
//!
//! Architecture invariant: [`Applier::apply`] is pure (no clock, no configuration, no I/O); the
//! genesis record is the only input besides the records.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::core::{Genesis, State, Zones};

use super::decision::{Lease, Outcome, Refusal, decide, lease_granted};
use super::entry::{LogEntry, log_id_of, scheme_of};
use super::history::VersionIndex;
use super::replay::{AuditRecord, Replayed, genesis_audit, genesis_hash, history_hash};
use super::snapshot::{Loaded, Shared};

/// What applying one record did.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// The state changed; publish it.
    Changed,
    /// Nothing changed (a refusal, a no-op, a duplicate command id, a foreign record).
    Unchanged,
}

/// The replica state of a shared log.
pub struct Applier {
    pub log_id: String,
    pub genesis: Genesis,
    /// The genesis record as logged (a snapshot stores it).
    pub genesis_entry: LogEntry,
    pub zones: Zones,
    pub state: State,
    /// The position of the next record to apply (Kafka: the next offset).
    pub next_position: u64,
    pub audit: VecDeque<AuditRecord>,
    audit_limit: usize,
    /// Every command id seen, with its outcome. Why all of them: dedup must not depend on how
    /// long a replica has run, or replicas would disagree about a late retry.
    outcomes: HashMap<String, Outcome>,
    /// For command ids of the form `key-<scope>-<fingerprint>` (an HTTP `Idempotency-Key`
    /// scoped to its caller, [`keyed_id`]): the fingerprint first seen per scope. Derived from
    /// `outcomes` (rebuilt from a snapshot's), and only read before an append, to refuse a key
    /// reused for another request; it never changes how a record is decided.
    keys: HashMap<String, String>,
    /// Digest of the applied history, the same on every replica at the same version.
    pub state_hash: u64,
    /// The leases by name. Not routing state: they spend no version and stay out of the audit
    /// trail and `state_hash`.
    pub leases: BTreeMap<String, Lease>,
    /// The outcomes of the newest lease claims (ids are never retried, and a holder renews every
    /// few seconds forever, so keeping them all would grow without bound). A function of the
    /// log like everything else here.
    lease_outcomes: VecDeque<(String, bool)>,
    /// Where each version's record is, and the state every few thousand versions: what an audit
    /// page older than the in-memory trail is read with (`store::history`).
    pub history: VersionIndex,
}

/// A command id for a caller-scoped key: `key-<scope>-<fingerprint>` (both lowercase hex).
pub fn keyed_id(scope: &str, fingerprint: &str) -> String {
    format!("key-{scope}-{fingerprint}")
}

/// The scope and fingerprint of an id made by [`keyed_id`].
pub fn split_keyed_id(id: &str) -> Option<(&str, &str)> {
    let (scope, fingerprint) = id.strip_prefix("key-")?.split_once('-')?;
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(scope) && hex(fingerprint)).then_some((scope, fingerprint))
}

fn keys_of<'a>(ids: impl Iterator<Item = &'a String>) -> HashMap<String, String> {
    let mut keys = HashMap::new();
    for (scope, fingerprint) in ids.filter_map(|id| split_keyed_id(id)) {
        // A snapshot does not keep the order ids were seen in; two fingerprints under one scope
        // (a reuse raced on two replicas) keep either: a retry of either id still gets its own
        // outcome (the check skips ids already decided), and a third body is refused.
        keys.entry(scope.to_owned()).or_insert_with(|| fingerprint.to_owned());
    }
    keys
}

/// How many lease outcomes are kept: far more than claims in flight at once.
const LEASE_OUTCOMES: usize = 1024;

impl Applier {
    /// Starts from the first record of the log, which must be a genesis record.
    pub fn from_genesis(
        position: u64,
        entry: &LogEntry,
        audit_limit: usize,
    ) -> Result<Self, String> {
        let LogEntry::Genesis { units, unit_mode, digits_skip, blue_units, zones, .. } = entry
        else {
            return Err("the first record of the shared log is not a genesis record".into());
        };
        if zones.is_none() {
            return Err("the genesis record of a shared log does not pin the zones".into());
        }
        let zones = entry.genesis_zones()?.ok_or("the genesis record pins no zones")?;
        let scheme = scheme_of(*units, unit_mode, *digits_skip)?;
        let genesis = Genesis { scheme, blue_units: *blue_units };
        let state = State::genesis(genesis, zones.clone()).map_err(|e| e.to_string())?;
        let audit = VecDeque::from_iter(genesis_audit(entry));
        let log_id = log_id_of(entry);
        let state_hash = genesis_hash(&log_id);
        let history = VersionIndex::starting(1, position + 1, state.clone());
        Ok(Applier {
            log_id,
            genesis,
            genesis_entry: entry.clone(),
            zones,
            state,
            next_position: position + 1,
            audit,
            audit_limit,
            outcomes: HashMap::new(),
            keys: HashMap::new(),
            state_hash,
            leases: BTreeMap::new(),
            lease_outcomes: VecDeque::new(),
            history,
        })
    }

    /// Continues from a snapshot of a replica of the same log (see [`Applier::snapshot`]): the
    /// state, the audit tail, the digest and every decided command id, so every later record is
    /// decided exactly as by a replica that applied the whole log.
    pub fn from_snapshot(loaded: Loaded, audit_limit: usize) -> Result<Self, String> {
        let Some(Shared { log_id, outcomes, leases }) = loaded.shared else {
            return Err("it was written for a file log, not a shared one".into());
        };
        let Some(zones) = loaded.replayed.genesis_entry.genesis_zones()? else {
            return Err("its genesis record does not pin the zones".into());
        };
        let Replayed { genesis, genesis_entry, state, mut audit, state_hash } = loaded.replayed;
        while audit.len() > audit_limit {
            audit.pop_front();
        }
        // The versions before the snapshot are not indexed until an audit page needs them.
        let history = VersionIndex::starting(state.version(), loaded.position.0, state.clone());
        Ok(Applier {
            log_id,
            genesis,
            genesis_entry,
            zones,
            state,
            next_position: loaded.position.0,
            audit,
            audit_limit,
            keys: keys_of(outcomes.keys()),
            outcomes,
            state_hash,
            leases,
            lease_outcomes: VecDeque::new(),
            history,
        })
    }

    /// What a snapshot of this replica holds: the replay so far, every decided command id and
    /// the leases. Its position is [`Applier::next_position`].
    pub fn snapshot(&self) -> (Replayed, Shared) {
        let replayed = Replayed {
            genesis: self.genesis,
            genesis_entry: self.genesis_entry.clone(),
            state: self.state.clone(),
            audit: self.audit.clone(),
            state_hash: self.state_hash,
        };
        let shared = Shared {
            log_id: self.log_id.clone(),
            outcomes: self.outcomes.clone(),
            leases: self.leases.clone(),
        };
        (replayed, shared)
    }

    /// The decided outcome of command `id`, once its record has been applied.
    pub fn outcome(&self, id: &str) -> Option<&Outcome> {
        self.outcomes.get(id)
    }

    /// The fingerprint first seen under a keyed id's scope (see [`keyed_id`]), if any.
    pub fn key_fingerprint(&self, scope: &str) -> Option<&str> {
        self.keys.get(scope).map(String::as_str)
    }

    /// Whether lease claim `id` was granted, once applied (among the newest claims only).
    pub fn lease_outcome(&self, id: &str) -> Option<bool> {
        self.lease_outcomes.iter().rev().find(|(i, _)| i == id).map(|(_, granted)| *granted)
    }

    /// Applies the record at `position` (`Err` holds why a record could not be decoded).
    pub fn apply(&mut self, position: u64, record: Result<&LogEntry, &str>) -> Step {
        self.next_position = position + 1;
        let entry = match record {
            Ok(entry) => entry,
            Err(_) => return Step::Unchanged,
        };
        if let LogEntry::Lease { id, name, holder, url, at_ms, until_ms } = entry {
            if self.lease_outcome(id).is_none() {
                let granted = lease_granted(self.leases.get(name), holder, *at_ms);
                if granted {
                    let lease = Lease {
                        holder: holder.clone(),
                        url: url.clone(),
                        at_ms: *at_ms,
                        until_ms: *until_ms,
                    };
                    self.leases.insert(name.clone(), lease);
                }
                self.lease_outcomes.push_back((id.clone(), granted));
                if self.lease_outcomes.len() > LEASE_OUTCOMES {
                    self.lease_outcomes.pop_front();
                }
            }
            return Step::Unchanged;
        }
        // A later genesis (a replica that lost the race to create the log) and decided entries
        // (they belong to file logs) take no effect.
        let LogEntry::Proposal { id, expected_version, at_ms, by, reason, command } = entry else {
            return Step::Unchanged;
        };
        if self.outcomes.contains_key(id) {
            return Step::Unchanged;
        }
        if let Some((scope, fingerprint)) = split_keyed_id(id) {
            self.keys.entry(scope.to_owned()).or_insert_with(|| fingerprint.to_owned());
        }
        let (next, applied, record) =
            match decide(&self.state, *expected_version, *at_ms, by, reason, command) {
                Ok(Some(done)) => done,
                Ok(None) => {
                    self.outcomes.insert(id.clone(), Outcome::Unchanged);
                    return Step::Unchanged;
                }
                Err(Refusal::Unreadable(e)) => {
                    self.outcomes.insert(id.clone(), Outcome::Unreadable(e));
                    return Step::Unchanged;
                }
                Err(Refusal::Refused(e)) => {
                    self.outcomes.insert(id.clone(), Outcome::Refused(e));
                    return Step::Unchanged;
                }
            };
        self.state_hash = history_hash(
            self.state_hash,
            applied.version,
            record.action,
            &applied.from,
            &applied.to,
        );
        self.audit.push_back(record);
        while self.audit.len() > self.audit_limit {
            self.audit.pop_front();
        }
        self.history.record(applied.version, position, &next);
        self.outcomes.insert(id.clone(), Outcome::Applied(applied));
        self.state = next;
        Step::Changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Audit, CommandError, Envelope};
    use crate::core::{Command, UnitMode, UnitScheme};

    fn genesis() -> LogEntry {
        let genesis =
            Genesis { scheme: UnitScheme::new(100, UnitMode::Hash).unwrap(), blue_units: 50 };
        let audit = Audit { by: "t".into(), at_ms: 1, reason: "test".into() };
        LogEntry::genesis_pinned(&genesis, &audit, "log-a".into(), Some(&Zones::default()))
    }

    fn dial(id: &str, expected: u64, blue: u32) -> LogEntry {
        let envelope = Envelope {
            expected_version: expected,
            command: Command::SetBlueUnits { blue_units: blue, domain: None },
            audit: Audit { by: "op".into(), at_ms: 2, reason: "move".into() },
        };
        LogEntry::proposal(id, &envelope, &Zones::default())
    }

    #[test]
    fn first_proposal_for_a_version_wins_and_the_rest_are_refused() {
        let mut a = Applier::from_genesis(0, &genesis(), 100).unwrap();
        assert_eq!(a.apply(1, Ok(&dial("x", 1, 10))), Step::Changed);
        assert_eq!(a.apply(2, Ok(&dial("y", 1, 20))), Step::Unchanged);
        assert_eq!(a.state.version(), 2);
        assert_eq!(a.state.table().blue_units(), 10);
        assert!(matches!(a.outcome("x"), Some(Outcome::Applied(applied)) if applied.version == 2));
        assert!(matches!(
            a.outcome("y"),
            Some(Outcome::Refused(CommandError::VersionConflict { expected: 1, current: 2 }))
        ));
        assert_eq!(a.next_position, 3);
    }

    #[test]
    fn a_retried_command_id_applies_once() {
        let mut a = Applier::from_genesis(0, &genesis(), 100).unwrap();
        a.apply(1, Ok(&dial("x", 1, 10)));
        // The same id again, even with an expected version that would now match: ignored.
        assert_eq!(a.apply(2, Ok(&dial("x", 2, 30))), Step::Unchanged);
        assert_eq!(a.state.table().blue_units(), 10);
        assert!(matches!(a.outcome("x"), Some(Outcome::Applied(applied)) if applied.version == 2));
    }

    #[test]
    fn replicas_applying_the_same_records_agree_and_ignore_later_geneses() {
        let records = [genesis(), dial("a", 1, 10), genesis(), dial("b", 1, 5), dial("c", 2, 70)];
        let run = || {
            let mut a = Applier::from_genesis(0, &records[0], 100).unwrap();
            for (i, r) in records.iter().enumerate().skip(1) {
                a.apply(i as u64, Ok(r));
            }
            (a.state.version(), a.state.table().blue_units(), a.state_hash)
        };
        assert_eq!(run(), (3, 70, run().2));
        let mut a = Applier::from_genesis(0, &records[0], 100).unwrap();
        assert_eq!(a.apply(1, Err("garbage")), Step::Unchanged);
        assert_eq!(a.next_position, 2);
    }

    fn lease(id: &str, holder: &str, at_ms: u64, until_ms: u64) -> LogEntry {
        LogEntry::Lease {
            id: id.into(),
            name: "lanes".into(),
            holder: holder.into(),
            url: Some(format!("http://{holder}")),
            at_ms,
            until_ms,
        }
    }

    #[test]
    fn a_lease_goes_to_another_holder_only_after_its_term_and_spends_no_version() {
        let mut a = Applier::from_genesis(0, &genesis(), 100).unwrap();
        let hash = a.state_hash;
        a.apply(1, Ok(&lease("1", "r1", 1_000, 7_000)));
        assert_eq!(a.lease_outcome("1"), Some(true));
        // Another replica claims during the term: refused, whatever its own clock says later.
        a.apply(2, Ok(&lease("2", "r2", 6_999, 12_999)));
        assert_eq!(a.lease_outcome("2"), Some(false));
        // The holder renews; the term moves on.
        a.apply(3, Ok(&lease("3", "r1", 5_000, 11_000)));
        assert_eq!(a.lease_outcome("3"), Some(true));
        a.apply(4, Ok(&lease("4", "r2", 11_000, 17_000)));
        assert_eq!(a.lease_outcome("4"), Some(false), "not before until");
        a.apply(5, Ok(&lease("5", "r2", 11_001, 17_001)));
        assert_eq!(a.lease_outcome("5"), Some(true));
        assert_eq!(a.leases["lanes"].holder, "r2");
        assert_eq!(a.leases["lanes"].url.as_deref(), Some("http://r2"));
        // The old holder waking up after a pause is refused.
        a.apply(6, Ok(&lease("6", "r1", 12_000, 18_000)));
        assert_eq!(a.lease_outcome("6"), Some(false));
        // A retried id is judged once.
        a.apply(7, Ok(&lease("6", "r1", 30_000, 36_000)));
        assert_eq!(a.leases["lanes"].holder, "r2");
        assert_eq!((a.state.version(), a.state_hash, a.audit.len()), (1, hash, 1));
        assert_eq!(a.next_position, 8);
        // Renewals forever keep a bounded memory.
        for i in 0..3_000u64 {
            a.apply(8 + i, Ok(&lease(&format!("r{i}"), "r2", 12_000 + i, 18_000 + i)));
        }
        assert_eq!(a.lease_outcomes.len(), LEASE_OUTCOMES);
        assert_eq!(a.lease_outcome("r2999"), Some(true));
        assert_eq!(a.leases["lanes"].until_ms, 20_999);
    }

    #[test]
    fn a_replica_started_from_a_snapshot_decides_later_records_as_one_that_applied_them_all() {
        let records = [
            genesis(),
            dial("a", 1, 10),
            dial("b", 1, 20), // a compare-and-set loser
            dial("c", 2, 30),
            lease("l1", "r1", 1_000, 7_000),
            dial(&keyed_id("5c09e", "f1"), 3, 40),
        ];
        let mut full = Applier::from_genesis(0, &records[0], 100).unwrap();
        for (i, r) in records.iter().enumerate().skip(1) {
            full.apply(i as u64, Ok(r));
        }
        let dir = tempfile::tempdir().unwrap();
        let snapshots = crate::store::Snapshots::new(dir.path(), 1);
        let (replayed, shared) = full.snapshot();
        let position = crate::store::LogPosition(full.next_position);
        snapshots.save_shared(&replayed, position, &shared).unwrap();
        let loaded = snapshots.load(&Zones::default()).unwrap().unwrap();
        let mut resumed = Applier::from_snapshot(loaded, 100).unwrap();
        assert_eq!(resumed.next_position, 6);
        // The fingerprint a caller's key was first used with survives the snapshot.
        assert_eq!(full.key_fingerprint("5c09e"), Some("f1"));
        assert_eq!(resumed.key_fingerprint("5c09e"), Some("f1"));
        assert_eq!(resumed.key_fingerprint("other"), None);
        assert_eq!(resumed.state_hash, full.state_hash);
        assert_eq!(resumed.leases, full.leases, "the lease taken before the snapshot is kept");
        // Later records: a retry of `a` (seen before the snapshot) whose expected version now
        // matches, a retry of the loser `b`, a new command, and a claim of the lease during its
        // term by another replica (refused by both, as the snapshot carries the lease).
        let later = [
            dial("a", 4, 70),
            dial("b", 4, 80),
            dial("d", 4, 90),
            lease("l2", "r2", 6_000, 12_000),
        ];
        for (i, r) in later.iter().enumerate() {
            let position = 6 + i as u64;
            assert_eq!(full.apply(position, Ok(r)), resumed.apply(position, Ok(r)), "record {i}");
        }
        assert_eq!(resumed.lease_outcome("l2"), Some(false));
        assert_eq!(full.lease_outcome("l2"), Some(false));
        assert_eq!(resumed.leases["lanes"].holder, "r1");
        assert_eq!(resumed.state, full.state);
        assert_eq!(resumed.state.table().blue_units(), 90, "only `d` took effect");
        assert_eq!(resumed.state_hash, full.state_hash);
        assert_eq!(resumed.audit, full.audit);
        for id in ["a", "b", "c", "d"] {
            assert_eq!(resumed.outcome(id), full.outcome(id), "{id}");
        }
        // A file-log snapshot is not a replica's.
        let file = crate::store::Snapshots::new(dir.path(), 1);
        file.save(&replayed, position, 5).unwrap();
        let loaded = file.load(&Zones::default()).unwrap().unwrap();
        assert!(Applier::from_snapshot(loaded, 100).is_err());
    }

    #[test]
    fn a_genesis_without_pinned_zones_is_refused() {
        let genesis =
            Genesis { scheme: UnitScheme::new(100, UnitMode::Hash).unwrap(), blue_units: 50 };
        let audit = Audit { by: "t".into(), at_ms: 1, reason: "test".into() };
        let err = Applier::from_genesis(0, &LogEntry::genesis(&genesis, &audit), 10).err().unwrap();
        assert!(err.contains("zones"), "{err}");
    }
}
