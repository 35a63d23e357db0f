//! The coordinator: owns the state, serialises changes through the log, publishes states and
//! writes snapshots of them (embedded log).
//!
//! Why a plain mutex around the writer and an `ArcSwap` for readers: changes are rare (operators,
//! drain steps) and must be strictly ordered around an fsync, while tags are read millions of
//! times a second. Readers load an immutable `Arc<RoutingTable>` and never wait for the writer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::core::ZoneId;
use crate::core::{Applied, Audit, CommandError, Envelope, Genesis, RoutingTable, State, Zones};
use crate::store::{
    Applier, AuditRecord, CommandLog, Lease, LogEntry, LogPosition, LogReader, Outcome, Replayed,
    SharedLog, Snapshots, Step, StoreError, VersionIndex, history_hash, log_id_of, new_log_id,
    push_audit, replay, replay_after,
};
use crate::telemetry;

pub use crate::store::AUDIT_IN_MEMORY;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "the command log was created with {log}, but the configuration says {config}; changing the unit scheme would move almost every user at once. Keep `units` as it was, or start with a new data directory"
    )]
    SchemeChanged { log: String, config: String },
    #[error(
        "the shared command log was created with {log}, but `colors.blue`/`colors.green` say {config}; every replica must agree, so set them as the log says"
    )]
    ZonesChanged { log: String, config: String },
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "command {command_id} is in the shared log, but this replica has not applied it within {waited_ms} ms; read GET /v1/audit, or retry with the same command id (it never applies twice)"
    )]
    NotApplied { command_id: String, waited_ms: u64 },
    #[error(
        "the Idempotency-Key was already used by this caller for a different request (the shared log holds it); use a new key for a new change"
    )]
    KeyReused { command_id: String },
    /// A record of a newer format than some live replica reads; nothing was appended.
    #[error("{0}")]
    FormatNotSupported(String),
}

/// Says whether a record of a format level may be written now (`Presence::check_format`).
pub type FormatGate = Box<dyn Fn(u32) -> Result<(), String> + Send + Sync>;

/// The outcome of an accepted submission.
#[derive(Debug)]
pub struct Submitted {
    pub table: Arc<RoutingTable>,
    /// The whole state after the command (drains included).
    pub state: Arc<State>,
    /// `None` when the command changed nothing (no version was spent).
    pub applied: Option<Applied>,
}

impl Submitted {
    /// The version the change itself made (for a retry of a command applied earlier, that
    /// earlier version, not the table's now), else the table's.
    pub fn change_version(&self) -> u64 {
        self.applied.as_ref().map_or(self.table.version(), |a| a.version)
    }
}

struct Writer {
    /// The state, the genesis and the in-memory audit trail: what a snapshot stores.
    replayed: Replayed,
    log: Box<dyn CommandLog>,
    /// The log position after the newest entry, and how many entries the log holds.
    position: LogPosition,
    entries: u64,
    /// Entries appended since the newest snapshot (or since the start of the log).
    since_snapshot: u64,
}

/// What readers see: the newest state, and a channel that announces each one.
struct Published {
    current: ArcSwap<State>,
    /// Every published state, for watchers (the routing watch stream, the commit-time recorder).
    changes: tokio::sync::watch::Sender<Arc<State>>,
}

impl Published {
    fn new(state: State) -> Published {
        let initial = Arc::new(state);
        Published {
            changes: tokio::sync::watch::Sender::new(Arc::clone(&initial)),
            current: ArcSwap::new(initial),
        }
    }

    fn publish(&self, state: &State) -> Arc<State> {
        let published = Arc::new(state.clone());
        telemetry::publish_state(&published);
        self.current.store(Arc::clone(&published));
        self.changes.send_replace(Arc::clone(&published));
        published
    }
}

/// How changes reach the log: the embedded log (apply, then append) or a shared one (append, then
/// apply from the tail).
enum Path {
    Local(Box<Mutex<Writer>>),
    Shared(Arc<Replica>),
}

/// A replica of a shared log: the applier fed by the tail thread, and the writers waiting on it.
struct Replica {
    log: Box<dyn SharedLog>,
    applier: Mutex<Applier>,
    applied: Condvar,
    published: Arc<Published>,
    /// This replica's own snapshots (its data directory), and the records applied since the
    /// newest one.
    snapshots: Option<Mutex<Snapshots>>,
    since_snapshot: std::sync::atomic::AtomicU64,
    /// The command ids this replica's own submissions wait for, and the state right after the
    /// tail applied each one's record: the answer describes that change, not whatever later
    /// records (other writers') the tail applied in the same batch before the waiter woke.
    /// Two requests waiting for one id (a retry racing its first attempt) share the slot.
    awaited: Mutex<HashMap<String, Awaited>>,
    /// Set when the tail met a record it cannot read: it applies nothing after it (a replica
    /// that skipped a newer release's record would diverge from the replicas that applied it).
    halted: Mutex<Option<String>>,
    /// Offsets an operator confirmed are garbage (`store.kafka.skip_offsets`): they take no effect.
    skip: std::collections::BTreeSet<u64>,
    /// The tail's last read failed (the brokers cannot be read).
    tail_failing: AtomicBool,
    /// When this replica last confirmed it had read the whole log (its wall clock, ms; 0:
    /// never): the stamp of its newest confirmation record that came back through the tail
    /// ([`Coordinator::confirm`]).
    confirmed_at_ms: AtomicU64,
    /// Started from the snapshot while the brokers did not answer: reads are served from the
    /// snapshot's state, changes are refused until the topic has been checked (`set_online`).
    offline: Arc<Mutex<Option<String>>>,
}

/// Options of a replica on a shared log.
#[derive(Clone, Debug, Default)]
pub struct SharedOptions {
    /// How long a writer waits for its own replica to apply its record.
    pub apply_wait: Duration,
    /// Unreadable records to skip (`store.kafka.skip_offsets`); any other one halts the replica.
    pub skip_offsets: Vec<u64>,
    /// The brokers do not answer (why): start from the snapshot alone, serve reads, refuse
    /// changes until [`Coordinator::set_online`]. Without a usable snapshot this is an error.
    pub offline: Option<String>,
}

/// Why a replica stops at an unreadable record, for the log and `/readyz`.
fn halt_reason(position: u64, why: &str) -> String {
    format!(
        "record {position} of the shared log cannot be read ({why}); this replica applies nothing after it. A newer release wrote it: upgrade this replica. If it is garbage on every replica, list {position} in store.kafka.skip_offsets on every replica"
    )
}

/// How many of this replica's requests wait for one command id, and the state right after its
/// first record once the tail applied it.
type Awaited = (u32, Option<Arc<State>>);

impl Replica {
    /// Writes a snapshot of the applier now if records were applied since the last one. The
    /// applier is copied under its lock and written outside it.
    fn snapshot_now(&self) -> Result<bool, StoreError> {
        let Some(snapshots) = &self.snapshots else { return Ok(false) };
        let (replayed, shared, position) = {
            let a = self.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if self.since_snapshot.swap(0, Ordering::SeqCst) == 0 {
                return Ok(false);
            }
            let (replayed, shared) = a.snapshot();
            (replayed, shared, a.next_position)
        };
        let snapshots = snapshots.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        snapshots.save_shared(&replayed, LogPosition(position), &shared)?;
        Ok(true)
    }

    /// True when `every` records were applied since the newest snapshot.
    fn snapshot_due(&self) -> bool {
        self.snapshots.as_ref().is_some_and(|s| {
            let every = s.lock().unwrap_or_else(|p| p.into_inner()).every;
            every > 0 && self.since_snapshot.load(Ordering::SeqCst) >= every
        })
    }
}

/// Applies every record from the applier's next position up to `end`. Reads at least once, so
/// that a position the log does not hold is [`StoreError::Position`] even when it is past `end`.
/// Stops at a record it cannot read (unless its offset is in `skip`), with why.
fn catch_up(
    applier: &mut Applier,
    reader: &mut dyn LogReader,
    end: u64,
    skip: &std::collections::BTreeSet<u64>,
) -> Result<(u64, Option<String>), StoreError> {
    let mut applied = 0;
    loop {
        let wait =
            if applier.next_position < end { Duration::from_secs(1) } else { Duration::ZERO };
        let records = reader.read_after(applier.next_position, wait)?;
        for (position, record) in &records {
            if *position < applier.next_position {
                continue;
            }
            if let Err(why) = record
                && !skip.contains(position)
            {
                return Ok((applied, Some(halt_reason(*position, why))));
            }
            applier.apply(*position, record.as_ref().map_err(String::as_str));
            applied += 1;
        }
        if applier.next_position >= end {
            return Ok((applied, None));
        }
    }
}

/// The versions of a shared log from its genesis up to the position `until` (a snapshot's), read
/// by a reader of its own and decided by an [`Applier`] (the start-up catch-up's code): the
/// [`VersionIndex`] a replica started from that snapshot lacks.
fn index_from_start(
    reader: &mut dyn LogReader,
    until: u64,
    skip: &std::collections::BTreeSet<u64>,
    deadline: std::time::Instant,
) -> Result<VersionIndex, String> {
    let first = reader
        .read_after(0, Duration::from_secs(5))
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .ok_or("the log's first record cannot be read")?;
    let (position, entry) = first;
    let entry = entry.map_err(|e| format!("the first record is unreadable: {e}"))?;
    // The audit trail is not what this reads: keep one record of it.
    let mut applier = Applier::from_genesis(position, &entry, 1)?;
    while applier.next_position < until {
        // A reader that stops delivering (the brokers went away) gives up rather than hold the
        // one flight for ever.
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "the log was not read up to position {until} in time (reached {})",
                applier.next_position
            ));
        }
        let records = reader
            .read_after(applier.next_position, Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        for (position, record) in &records {
            if *position < applier.next_position {
                continue;
            }
            if *position >= until {
                break;
            }
            if let Err(why) = record
                && !skip.contains(position)
            {
                return Err(halt_reason(*position, why));
            }
            applier.apply(*position, record.as_ref().map_err(String::as_str));
        }
    }
    Ok(applier.history)
}

/// Versions `lo..=hi` of a shared log's audit, oldest first (see [`Coordinator::audit_from_log`]).
fn shared_page(
    replica: &Replica,
    deep: &mut DeepAudit,
    open: &ReaderFactory,
    lo: u64,
    hi: u64,
    deadline: std::time::Instant,
) -> Result<Vec<AuditRecord>, String> {
    let lock = || replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (plan, until, genesis) = {
        let a = lock();
        (a.history.plan(lo, hi), a.history.oldest_next(), a.genesis_entry.clone())
    };
    if deep.reader.is_none() {
        deep.reader = Some(open().map_err(|e| e.to_string())?);
    }
    let reader = deep.reader.as_mut().expect("opened above");
    let plan = match plan {
        Some(plan) => plan,
        None => {
            // Started from a snapshot: index the versions before it, once.
            let older = index_from_start(reader.as_mut(), until, &replica.skip, deadline)?;
            let mut a = lock();
            a.history.prepend(older)?;
            a.history.plan(lo, hi).ok_or_else(|| {
                format!("versions {lo} to {hi} are not in this replica's index of the log")
            })?
        }
    };
    crate::store::shared_page(reader.as_mut(), plan, &genesis, deadline)
}

/// What GET /v1/cluster reports about this replica's log.
#[derive(Clone, Debug)]
pub struct LogStatus {
    pub kind: &'static str,
    pub id: String,
    pub description: String,
    /// Next position to apply (Kafka: offset), for a shared log.
    pub next_position: Option<u64>,
    pub state_hash: Option<u64>,
    /// The version `state_hash` belongs to (read under the same lock), for a shared log.
    pub state_version: Option<u64>,
}

pub struct Coordinator {
    published: Arc<Published>,
    path: Path,
    healthy: AtomicBool,
    /// The file log's change in flight: when it began (ms; 0: none), set before its append and
    /// cleared once its state is published, so a confirmation never postdates an appended change
    /// that watch streams cannot see yet ([`Coordinator::confirmed_at_ms`]).
    in_flight_since_ms: AtomicU64,
    /// The last writability probe of a shared log (`write_readiness`), and the lock its one
    /// probe at a time holds.
    probe: Mutex<Option<(std::time::Instant, Result<(), String>)>>,
    probing: Mutex<()>,
    /// Refuses records that some live replica could not read (shared log only).
    format_gate: std::sync::OnceLock<FormatGate>,
    log_description: String,
    log_id: String,
    apply_wait: Duration,
    /// Where snapshots go (embedded log only); the mutex keeps two writers off the temporary file.
    snapshots: Option<Mutex<Snapshots>>,
    /// Where audit pages older than the in-memory trail are read from (set once).
    history: std::sync::OnceLock<History>,
    /// Held by the one audit page being read from the log (single flight), with what it keeps
    /// between pages.
    deep_audit: Mutex<DeepAudit>,
}

/// What the one audit page read from the log at a time keeps for the next.
#[derive(Default)]
struct DeepAudit {
    /// A file log's line index, extended as the log grows.
    lines: crate::store::LineIndex,
    /// A shared log's reader (dropped after an error, opened again by the next page).
    reader: Option<Box<dyn LogReader>>,
}

/// Opens a fresh reader of a shared log, from its first record (`GET /v1/audit` beyond memory).
pub type ReaderFactory = Box<dyn Fn() -> Result<Box<dyn LogReader>, StoreError> + Send + Sync>;

/// Where audit pages older than the in-memory trail come from: the log itself, read a second time
/// (`store::history`: only the page's own records and a bounded few before them).
enum History {
    /// The file log: its entries carry their audit, found through a line index.
    File { path: std::path::PathBuf },
    /// A shared log, read by a reader of its own from the applier's nearest kept state.
    Shared(ReaderFactory),
}

/// One page of `GET /v1/audit`: newest first, and the `before` of the next (older) page, `None`
/// once the page reaches version 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    pub next_before: Option<u64>,
    /// True when the page was read from the log rather than the in-memory trail.
    pub from_log: bool,
}

impl AuditPage {
    fn new(records: Vec<AuditRecord>, from_log: bool) -> AuditPage {
        let next_before = records.last().map(|r| r.version).filter(|v| *v > 1);
        AuditPage { records, next_before, from_log }
    }
}

/// Why an audit page could not be read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditError {
    /// Another page is being read from the log (one at a time).
    Busy,
    /// The log cannot be read back (no history source, an I/O error, a record that cannot be
    /// read), with why.
    Unavailable(String),
}

/// What the configuration says the state should start from.
#[derive(Clone)]
pub struct Boot {
    pub genesis: Genesis,
    pub zones: Zones,
    pub now_ms: u64,
}

/// A started coordinator and what start-up found worth a warning (a torn tail, an ignored
/// snapshot).
pub struct Started {
    pub coordinator: Coordinator,
    pub warnings: Vec<String>,
    /// True when start-up began from a snapshot rather than the first entry.
    pub from_snapshot: bool,
}

/// A snapshot to be written outside the writer lock.
struct Pending {
    replayed: Replayed,
    position: LogPosition,
    entries: u64,
}

impl Coordinator {
    /// Rebuilds the state from the newest valid snapshot and the log after it, or from the whole
    /// log (writing the genesis entry to an empty log first). Without `snapshots`, always the
    /// whole log.
    pub fn start(
        mut log: Box<dyn CommandLog>,
        snapshots: Option<Snapshots>,
        boot: Boot,
    ) -> Result<Started, StartError> {
        let log_description = log.describe();
        let history_path = log.history_path();
        let mut warnings = Vec::new();
        let mut snapshot_ignored = false;
        let ignored =
            |why: String| format!("ignored the snapshot ({why}); replaying the whole log");
        let loaded = match snapshots.as_ref().map(|s| s.load(&boot.zones)) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(loaded))) => Some(loaded),
            Some(Err(why)) => {
                snapshot_ignored = true;
                warnings.push(ignored(why));
                None
            }
        };
        let mut resumed = None;
        if let Some(loaded) = loaded {
            let mut replayed = loaded.replayed;
            match log.read_after(loaded.position) {
                Ok(tail) => {
                    let count = tail.entries.len() as u64;
                    match replay_after(&mut replayed, &tail.entries, loaded.entries) {
                        Ok(()) => {
                            warnings.extend(tail.warnings);
                            resumed = Some((replayed, tail.end, loaded.entries + count, count));
                        }
                        Err(e) => {
                            snapshot_ignored = true;
                            warnings.push(ignored(format!(
                                "the log after it does not apply to it: entry {}: {}",
                                e.line, e.reason
                            )));
                        }
                    }
                }
                Err(e @ StoreError::Position { .. }) => {
                    snapshot_ignored = true;
                    warnings.push(ignored(e.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let from_snapshot = resumed.is_some();
        let (replayed, position, entries, since_snapshot) = match resumed {
            Some(resumed) => resumed,
            None => {
                let tail = log.read_after(LogPosition::START)?;
                warnings.extend(tail.warnings);
                let (mut entries, mut end) = (tail.entries, tail.end);
                if entries.is_empty() {
                    let audit = Audit {
                        by: "tidegate".into(),
                        at_ms: boot.now_ms,
                        reason: "first start: genesis from configuration".into(),
                    };
                    // A file log's two colours stay configuration (renamed at start), so they
                    // are pinned only when the log starts with more zones or other classes.
                    let pinned = (!crate::store::is_plain_two(&boot.zones)).then_some(&boot.zones);
                    let genesis =
                        LogEntry::genesis_pinned(&boot.genesis, &audit, new_log_id(), pinned);
                    end = log.append(&genesis)?;
                    entries.push(genesis);
                }
                let replayed = replay(&entries, &boot.zones).map_err(|e| StoreError::Replay {
                    path: log_description.clone(),
                    line: e.line,
                    reason: e.reason,
                })?;
                let count = entries.len() as u64;
                (replayed, end, count, count)
            }
        };
        if replayed.genesis.scheme != boot.genesis.scheme {
            return Err(StartError::SchemeChanged {
                log: describe_scheme(&replayed.genesis),
                config: describe_scheme(&boot.genesis),
            });
        }
        let coordinator = Coordinator {
            published: Arc::new(Published::new(replayed.state.clone())),
            log_id: log_id_of(&replayed.genesis_entry),
            path: Path::Local(Box::new(Mutex::new(Writer {
                replayed,
                log,
                position,
                entries,
                since_snapshot,
            }))),
            snapshots: snapshots.map(Mutex::new),
            healthy: AtomicBool::new(true),
            in_flight_since_ms: AtomicU64::new(0),
            probe: Mutex::new(None),
            probing: Mutex::new(()),
            format_gate: std::sync::OnceLock::new(),
            log_description,
            apply_wait: Duration::ZERO,
            history: std::sync::OnceLock::new(),
            deep_audit: Mutex::new(DeepAudit::default()),
        };
        if let Some(path) = history_path {
            let _ = coordinator.history.set(History::File { path });
        }
        // A long replay (or a snapshot that had to be ignored) is worth a snapshot right away,
        // so the next start is fast again.
        let due = coordinator.snapshots.as_ref().is_some_and(|s| {
            let every = s.lock().unwrap_or_else(|p| p.into_inner()).every;
            (every > 0 && since_snapshot >= every) || (snapshot_ignored && since_snapshot > 0)
        });
        if due && let Err(e) = coordinator.snapshot_now() {
            warnings.push(format!("could not write a snapshot: {e}"));
        }
        Ok(Started { coordinator, warnings, from_snapshot })
    }

    /// Writes a snapshot of the current state now, if snapshots are configured and the log grew
    /// since the last one (clean shutdown calls this). Returns whether one was written.
    pub fn snapshot_now(&self) -> Result<bool, StoreError> {
        if let Path::Shared(replica) = &self.path {
            return replica.snapshot_now();
        }
        let Some(snapshots) = &self.snapshots else {
            return Ok(false);
        };
        let Path::Local(writer) = &self.path else {
            return Ok(false);
        };
        let pending = {
            let mut writer = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if writer.since_snapshot == 0 {
                return Ok(false);
            }
            writer.since_snapshot = 0;
            Pending {
                replayed: writer.replayed.clone(),
                position: writer.position,
                entries: writer.entries,
            }
        };
        let snapshots = snapshots.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        snapshots.save(&pending.replayed, pending.position, pending.entries)?;
        Ok(true)
    }

    /// Joins a shared log as one replica: writes the genesis record if the log is empty, starts
    /// from this replica's newest valid snapshot (else the first record), applies every record up
    /// to the log's end, then tails it on a thread of its own for as long as the process lives.
    /// The genesis must pin the same unit scheme and zones as `boot`. A snapshot of another log,
    /// or whose position the log no longer holds ([`StoreError::Position`]: below the log start
    /// offset, or past its end), is ignored with a warning and the whole log is applied.
    /// A replica whose brokers do not answer at start: the state is its snapshot's (the genesis,
    /// the log id and the position it covers are in it), the tail catches up once the brokers
    /// answer, and changes wait for [`Coordinator::set_online`]. Refused without a usable
    /// snapshot of this configuration's scheme and zones (the caller then waits for the brokers).
    fn start_offline(
        log: Box<dyn SharedLog>,
        reader: Box<dyn LogReader>,
        snapshots: Option<Snapshots>,
        boot: Boot,
        apply_wait: Duration,
        skip: std::collections::BTreeSet<u64>,
        why: String,
    ) -> Result<Started, StartError> {
        let log_description = log.describe();
        let shared = |reason: String| StoreError::Shared { log: log_description.clone(), reason };
        let loaded = snapshots
            .as_ref()
            .map(|s| s.load(&boot.zones))
            .transpose()
            .map_err(|e| shared(format!("{why}, and the snapshot cannot be used: {e}")))?
            .flatten()
            .ok_or_else(|| shared(format!("{why}, and there is no snapshot to serve from")))?;
        let applier = Applier::from_snapshot(loaded, AUDIT_IN_MEMORY)
            .map_err(|e| shared(format!("{why}, and the snapshot cannot be used: {e}")))?;
        check_genesis(&applier, &boot)?;
        let log_id = applier.log_id.clone();
        let version = applier.state.version();
        let published = Arc::new(Published::new(applier.state.clone()));
        let replica = Arc::new(Replica {
            log,
            applier: Mutex::new(applier),
            applied: Condvar::new(),
            published: Arc::clone(&published),
            snapshots: snapshots.map(Mutex::new),
            since_snapshot: std::sync::atomic::AtomicU64::new(0),
            awaited: Mutex::new(HashMap::new()),
            halted: Mutex::new(None),
            skip,
            tail_failing: AtomicBool::new(true),
            confirmed_at_ms: AtomicU64::new(0),
            offline: Arc::new(Mutex::new(Some(format!(
                "{why}; serving reads from the snapshot (version {version}) until they do"
            )))),
        });
        let coordinator =
            Self::run_shared(replica, reader, published, log_description, log_id, apply_wait)?;
        Ok(Started { coordinator, warnings: Vec::new(), from_snapshot: true })
    }

    /// Starts the tail thread of `replica` (it applies the log from the applier's position on)
    /// and wraps it as the coordinator.
    fn run_shared(
        replica: Arc<Replica>,
        mut reader: Box<dyn LogReader>,
        published: Arc<Published>,
        log_description: String,
        log_id: String,
        apply_wait: Duration,
    ) -> Result<Coordinator, StoreError> {
        let tail = Arc::clone(&replica);
        std::thread::Builder::new()
            .name("tidegate-log-tail".into())
            .spawn(move || tail_loop(&tail, reader.as_mut()))
            .map_err(|e| StoreError::Shared {
                log: log_description.clone(),
                reason: format!("cannot start the tail thread: {e}"),
            })?;
        Ok(Coordinator {
            published,
            path: Path::Shared(replica),
            healthy: AtomicBool::new(true),
            in_flight_since_ms: AtomicU64::new(0),
            probe: Mutex::new(None),
            probing: Mutex::new(()),
            format_gate: std::sync::OnceLock::new(),
            log_description,
            log_id,
            apply_wait,
            snapshots: None,
            history: std::sync::OnceLock::new(),
            deep_audit: Mutex::new(DeepAudit::default()),
        })
    }

    /// Whether this replica serves only its snapshot (started while the brokers were down).
    pub fn offline(&self) -> Option<String> {
        match &self.path {
            Path::Shared(replica) => {
                replica.offline.lock().unwrap_or_else(|p| p.into_inner()).clone()
            }
            Path::Local(_) => None,
        }
    }

    /// The brokers answer and the topic was checked: changes are accepted again.
    pub fn set_online(&self) {
        if let Some(handle) = self.offline_handle() {
            *handle.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// The flag [`Coordinator::set_online`] clears, for a thread that outlives the caller's
    /// borrow (start-up hands the coordinator on before the brokers answer).
    pub fn offline_handle(&self) -> Option<Arc<Mutex<Option<String>>>> {
        match &self.path {
            Path::Shared(replica) => Some(Arc::clone(&replica.offline)),
            Path::Local(_) => None,
        }
    }

    pub fn start_shared(
        log: Box<dyn SharedLog>,
        mut reader: Box<dyn LogReader>,
        snapshots: Option<Snapshots>,
        boot: Boot,
        options: SharedOptions,
    ) -> Result<Started, StartError> {
        let apply_wait = options.apply_wait;
        let skip: std::collections::BTreeSet<u64> = options.skip_offsets.iter().copied().collect();
        let log_description = log.describe();
        let shared = |reason: String| StoreError::Shared { log: log_description.clone(), reason };
        if let Some(why) = options.offline.clone() {
            return Self::start_offline(log, reader, snapshots, boot, apply_wait, skip, why);
        }
        if reader.end()? == 0 {
            let audit = Audit {
                by: "tidegate".into(),
                at_ms: boot.now_ms,
                reason: "first start: genesis from configuration".into(),
            };
            let genesis =
                LogEntry::genesis_pinned(&boot.genesis, &audit, new_log_id(), Some(&boot.zones));
            // If another replica created the log at the same moment, its genesis came first and
            // this one is ignored when applied.
            log.append(&genesis)?;
        }
        let first = loop {
            if let Some(first) = reader.read_after(0, Duration::from_secs(1))?.into_iter().next() {
                break first;
            }
        };
        let (position, entry) = first;
        let entry = entry.map_err(|e| shared(format!("the first record is unreadable: {e}")))?;
        let mut applier =
            Applier::from_genesis(position, &entry, AUDIT_IN_MEMORY).map_err(shared)?;
        check_genesis(&applier, &boot)?;
        let mut warnings = Vec::new();
        let ignored = |why: String| format!("ignored the snapshot ({why}); applying the whole log");
        let mut snapshot_ignored = false;
        let mut from_snapshot = false;
        let end = reader.end()?;
        let loaded = match snapshots.as_ref().map(|s| s.load(&boot.zones)) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(loaded))) => Some(loaded),
            Some(Err(why)) => {
                warnings.push(ignored(why));
                snapshot_ignored = true;
                None
            }
        };
        let mut applied = None;
        if let Some(loaded) = loaded {
            match Applier::from_snapshot(loaded, AUDIT_IN_MEMORY) {
                Ok(restored) if restored.log_id != applier.log_id => {
                    let why =
                        format!("it is of log {}, this log is {}", restored.log_id, applier.log_id);
                    warnings.push(ignored(why));
                    snapshot_ignored = true;
                }
                Ok(mut restored) => match catch_up(&mut restored, reader.as_mut(), end, &skip) {
                    Ok(count) => {
                        from_snapshot = true;
                        applied = Some(count);
                        applier = restored;
                    }
                    Err(e @ StoreError::Position { .. }) => {
                        warnings.push(ignored(e.to_string()));
                        snapshot_ignored = true;
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(why) => {
                    warnings.push(ignored(why));
                    snapshot_ignored = true;
                }
            }
        }
        let (applied, halted) = match applied {
            Some(done) => done,
            None => catch_up(&mut applier, reader.as_mut(), end, &skip)?,
        };
        if let Some(why) = &halted {
            tracing::error!("{why}");
        }
        let log_id = applier.log_id.clone();
        let published = Arc::new(Published::new(applier.state.clone()));
        let replica = Arc::new(Replica {
            log,
            applier: Mutex::new(applier),
            applied: Condvar::new(),
            published: Arc::clone(&published),
            snapshots: snapshots.map(Mutex::new),
            since_snapshot: std::sync::atomic::AtomicU64::new(applied),
            awaited: Mutex::new(HashMap::new()),
            halted: Mutex::new(halted),
            skip,
            tail_failing: AtomicBool::new(false),
            confirmed_at_ms: AtomicU64::new(0),
            offline: Arc::new(Mutex::new(None)),
        });
        // A long catch-up (or a snapshot that had to be ignored) is worth a snapshot right away,
        // so the next start is fast again.
        if (replica.snapshot_due() || (snapshot_ignored && applied > 0))
            && let Err(e) = replica.snapshot_now()
        {
            warnings.push(format!("could not write a snapshot: {e}"));
        }
        let coordinator =
            Self::run_shared(replica, reader, published, log_description, log_id, apply_wait)?;
        Ok(Started { coordinator, warnings, from_snapshot })
    }

    /// The current table. Lock-free; the hot path of tagging.
    #[inline]
    pub fn table(&self) -> Arc<RoutingTable> {
        self.published.current.load().table_arc()
    }

    /// The current state (table and drains), lock-free.
    pub fn state(&self) -> Arc<State> {
        self.published.current.load_full()
    }

    /// Validates, logs durably, then publishes a change. Blocks on fsync: call it from a
    /// blocking context (`spawn_blocking`), never on an async executor thread.
    pub fn submit(&self, envelope: &Envelope) -> Result<Submitted, SubmitError> {
        self.submit_with_id(envelope, None)
    }

    /// [`Coordinator::submit`] under a caller-chosen command id (shared logs: a retry with the
    /// same id never applies twice). The embedded log ignores the id.
    pub fn submit_with_id(
        &self,
        envelope: &Envelope,
        command_id: Option<&str>,
    ) -> Result<Submitted, SubmitError> {
        let writer = match &self.path {
            Path::Local(writer) => writer,
            Path::Shared(replica) => return self.submit_shared(replica, envelope, command_id),
        };
        // A panic while holding the lock cannot leave a half-applied state behind (the state is
        // replaced only after the log append succeeded), so a poisoned lock is safe to reuse.
        let mut writer = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some((next, applied)) = writer.replayed.state.apply(envelope)? else {
            return Ok(Submitted { table: self.table(), state: self.state(), applied: None });
        };
        let entry = LogEntry::change(
            envelope,
            applied.version,
            &applied.from,
            &applied.to,
            writer.replayed.state.table().zones(),
        );
        let started = std::time::Instant::now();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.in_flight_since_ms.store(now.max(1), Ordering::Release);
        let position = match writer.log.append(&entry) {
            Ok(position) => position,
            Err(e) => {
                self.healthy.store(false, Ordering::SeqCst);
                self.in_flight_since_ms.store(0, Ordering::Release);
                return Err(e.into());
            }
        };
        metrics::histogram!(telemetry::LOG_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        writer.position = position;
        writer.entries += 1;
        writer.since_snapshot += 1;
        let table = next.table_arc();
        writer.replayed.state = next;
        writer.replayed.state_hash = history_hash(
            writer.replayed.state_hash,
            applied.version,
            envelope.command.action(),
            &applied.from,
            &applied.to,
        );
        push_audit(
            &mut writer.replayed.audit,
            AuditRecord {
                version: applied.version,
                at_ms: envelope.audit.at_ms,
                by: envelope.audit.by.clone(),
                reason: envelope.audit.reason.clone(),
                action: envelope.command.action(),
                from: applied.from.clone(),
                to: applied.to.clone(),
            },
        );
        let snapshot_due = self.snapshots.as_ref().is_some_and(|s| {
            let every = s.lock().unwrap_or_else(|p| p.into_inner()).every;
            every > 0 && writer.since_snapshot >= every
        });
        // Published under the writer lock, so states are published in log order.
        let published = self.published.publish(&writer.replayed.state);
        self.in_flight_since_ms.store(0, Ordering::Release);
        drop(writer);
        telemetry::count_change(envelope.command.action());
        telemetry::count_run_end(&published, &envelope.command);
        if snapshot_due && let Err(e) = self.snapshot_now() {
            // The log holds the change; a missing snapshot only makes the next start slower.
            tracing::warn!("could not write a snapshot: {e}");
        }
        Ok(Submitted { table, state: published, applied: Some(applied) })
    }

    /// Appends a proposal, waits until this replica has applied it, and answers its outcome.
    fn submit_shared(
        &self,
        replica: &Replica,
        envelope: &Envelope,
        command_id: Option<&str>,
    ) -> Result<Submitted, SubmitError> {
        let level = envelope.command.format_level();
        if let Some(gate) = self.format_gate.get()
            && let Err(why) = gate(level)
        {
            return Err(SubmitError::FormatNotSupported(why));
        }
        let offline = replica.offline.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(why) =
            offline.or_else(|| replica.halted.lock().unwrap_or_else(|p| p.into_inner()).clone())
        {
            return Err(SubmitError::Store(StoreError::Shared {
                log: self.log_description.clone(),
                reason: why,
            }));
        }
        let command_id = command_id.map_or_else(new_log_id, str::to_owned);
        // A caller's key already in the log with another request's fingerprint: refused before
        // anything is appended (a retry of an id already decided still gets its outcome).
        if let Some((scope, fingerprint)) = crate::store::split_keyed_id(&command_id) {
            let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if a.outcome(&command_id).is_none()
                && a.key_fingerprint(scope).is_some_and(|seen| seen != fingerprint)
            {
                return Err(SubmitError::KeyReused { command_id });
            }
        }
        let zones = self.state().table().zones().clone();
        let entry = LogEntry::proposal(&command_id, envelope, &zones);
        let started = std::time::Instant::now();
        let awaited = || replica.awaited.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        awaited().entry(command_id.clone()).or_insert((0, None)).0 += 1;
        let appended = replica.log.append(&entry);
        if appended.is_ok() {
            let append_seconds = started.elapsed().as_secs_f64();
            metrics::histogram!(telemetry::LOG_APPEND_DURATION).record(append_seconds);
        }
        let applier = appended
            .map_err(SubmitError::from)
            .and_then(|position| self.wait_applied(replica, position, &command_id));
        // Taken under the applier lock (the tail fills it there); the last waiter removes it.
        let own_state = {
            let mut awaited = awaited();
            let slot = awaited.get_mut(&command_id).map(|(waiters, state)| {
                *waiters -= 1;
                (*waiters == 0, state.clone())
            });
            match slot {
                Some((last, state)) => {
                    if last {
                        awaited.remove(&command_id);
                    }
                    state
                }
                None => None,
            }
        };
        let applier = applier?;
        let outcome = applier.outcome(&command_id).cloned();
        drop(applier);
        // The state right after this change's own record; a record the tail applied before this
        // waiter registered cannot exist (registration precedes the append).
        let state = own_state.unwrap_or_else(|| self.state());
        let table = state.table_arc();
        match outcome {
            Some(Outcome::Applied(applied)) => {
                telemetry::count_change(envelope.command.action());
                telemetry::count_run_end(&state, &envelope.command);
                Ok(Submitted { table, state, applied: Some(applied) })
            }
            Some(Outcome::Unchanged) => Ok(Submitted { table, state, applied: None }),
            Some(Outcome::Refused(e)) => Err(e.into()),
            Some(Outcome::RefusedEarlier(why)) => {
                let reason = format!("command {command_id} was refused when first applied: {why}");
                Err(StoreError::Shared { log: self.log_description.clone(), reason }.into())
            }
            Some(Outcome::Unreadable(why)) => {
                let reason = format!("command {command_id} could not be applied: {why}");
                Err(StoreError::Shared { log: self.log_description.clone(), reason }.into())
            }
            None => {
                let reason = format!("command {command_id} has no outcome after being applied");
                Err(StoreError::Shared { log: self.log_description.clone(), reason }.into())
            }
        }
    }

    /// Waits until this replica has applied the record at `position`, and holds the applier.
    fn wait_applied<'a>(
        &self,
        replica: &'a Replica,
        position: u64,
        command_id: &str,
    ) -> Result<std::sync::MutexGuard<'a, Applier>, SubmitError> {
        let deadline = std::time::Instant::now() + self.apply_wait;
        let mut applier = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while applier.next_position <= position {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                let waited_ms = self.apply_wait.as_millis() as u64;
                let command_id = command_id.to_owned();
                return Err(SubmitError::NotApplied { command_id, waited_ms });
            }
            applier = replica
                .applied
                .wait_timeout(applier, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        Ok(applier)
    }

    /// Claims (or renews) the lease `name` for `holder` until `until_ms`, stamped `at_ms`, and
    /// answers the decided outcome once this replica has applied the record: whether it was
    /// granted, and the lease as it stands after it. Blocking (call it off the executor). The
    /// embedded log has one node, which always holds every lease: granted, and nothing logged.
    pub fn claim_lease(
        &self,
        name: &str,
        holder: &str,
        url: Option<&str>,
        at_ms: u64,
        until_ms: u64,
    ) -> Result<(bool, Option<Lease>), SubmitError> {
        let Path::Shared(replica) = &self.path else {
            let lease =
                Lease { holder: holder.to_owned(), url: url.map(str::to_owned), at_ms, until_ms };
            return Ok((true, Some(lease)));
        };
        if let Some(why) = replica.offline.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(SubmitError::Store(StoreError::Shared {
                log: self.log_description.clone(),
                reason: why,
            }));
        }
        let id = new_log_id();
        let entry = LogEntry::Lease {
            id: id.clone(),
            name: name.to_owned(),
            holder: holder.to_owned(),
            url: url.map(str::to_owned),
            at_ms,
            until_ms,
        };
        let position = replica.log.append(&entry)?;
        let applier = self.wait_applied(replica, position, &id)?;
        let granted = applier.lease_outcome(&id) == Some(true);
        Ok((granted, applier.leases.get(name).cloned()))
    }

    /// When this coordinator last confirmed its table current, on its wall clock (ms), for the
    /// heartbeats of its watch streams (`crate::core::lease`); `None` when it cannot say.
    ///
    /// The embedded file log has one writer, this process: its table is current up to `now_ms`,
    /// or up to just before a change that is appended but not yet published. A replica of a shared log confirms through the log itself
    /// ([`Coordinator::confirm`]): reading the broker's high watermark would not do, because a
    /// broker cut off from the others may still claim to lead the partition and answer with a
    /// stale one, while a record this replica wrote can come back to it only through a log that
    /// a majority of brokers accepted.
    pub fn confirmed_at_ms(&self, now_ms: u64) -> Option<u64> {
        match &self.path {
            // Up to now, unless a change is between its append and its publication: then up to
            // just before it began (the caller reads its clock before asking, and a change that
            // begins after that is later than the confirmation anyway).
            Path::Local(_) => match self.in_flight_since_ms.load(Ordering::Acquire) {
                0 => Some(now_ms),
                since => Some(now_ms.min(since.saturating_sub(1))),
            },
            Path::Shared(replica) => {
                if replica.halted.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                    return None; // it applies nothing more: nothing it serves is current
                }
                let at = replica.confirmed_at_ms.load(Ordering::Acquire);
                (at > 0).then_some(at)
            }
        }
    }

    /// Confirms this replica's table current as of `at_ms` (its wall clock, taken before the
    /// call): appends a lease record named `confirm/<holder>` stamped `at_ms` and waits until the
    /// tail has applied it. Every record the log accepted before it is applied then, and the
    /// states they made are published before the confirmation is, so a watch stream that sends
    /// the confirmation has sent (or queued) every table it covers. Blocking; a file log needs
    /// none (see [`Coordinator::confirmed_at_ms`]). The record spends no version and leaves the
    /// audit alone; one per replica every third of a lease (docs/src/partitions.md).
    pub fn confirm(&self, holder: &str, at_ms: u64, lease_ms: u64) -> Result<(), SubmitError> {
        let Path::Shared(replica) = &self.path else { return Ok(()) };
        let name = format!("confirm/{holder}");
        self.claim_lease(&name, holder, None, at_ms, at_ms.saturating_add(lease_ms))?;
        replica.confirmed_at_ms.fetch_max(at_ms, Ordering::AcqRel);
        Ok(())
    }

    /// The lease `name` as this replica has applied it (`None`: never granted, or a file log).
    pub fn lease(&self, name: &str) -> Option<Lease> {
        match &self.path {
            Path::Local(_) => None,
            Path::Shared(replica) => {
                let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                a.leases.get(name).cloned()
            }
        }
    }

    /// True when the log is shared by replicas (leases mean something).
    pub fn is_shared(&self) -> bool {
        matches!(self.path, Path::Shared(_))
    }

    /// The log this coordinator serves from, for GET /v1/cluster.
    pub fn log_status(&self) -> LogStatus {
        let (kind, next_position, state_hash, state_version) = match &self.path {
            Path::Local(writer) => {
                let writer = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                ("file", None, Some(writer.replayed.state_hash), None)
            }
            Path::Shared(replica) => {
                let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                ("kafka", Some(a.next_position), Some(a.state_hash), Some(a.state.version()))
            }
        };
        LogStatus {
            kind,
            id: self.log_id.clone(),
            description: self.log_description.clone(),
            next_position,
            state_hash,
            state_version,
        }
    }

    /// The identity of the log (the genesis' random id): the same on every replica.
    pub fn log_id(&self) -> &str {
        &self.log_id
    }

    /// A receiver that sees every published state (coalesced: a slow reader sees the newest).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<State>> {
        self.published.changes.subscribe()
    }

    /// The newest `limit` audit records, newest first.
    pub fn audit(&self, limit: usize) -> Vec<AuditRecord> {
        self.with_audit(|audit| audit.iter().rev().take(limit).cloned().collect())
    }

    fn with_audit<T>(&self, read: impl FnOnce(&std::collections::VecDeque<AuditRecord>) -> T) -> T {
        match &self.path {
            Path::Local(writer) => {
                let writer = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                read(&writer.replayed.audit)
            }
            Path::Shared(replica) => {
                let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                read(&a.audit)
            }
        }
    }

    /// The newest `limit` audit records with a version below `before` (all when `None`), newest
    /// first, when the in-memory trail holds the whole page; `None` when the page reaches below
    /// it and must be read from the log ([`Coordinator::audit_from_log`]).
    pub fn audit_in_memory(&self, limit: usize, before: Option<u64>) -> Option<AuditPage> {
        self.with_audit(|audit| {
            let (oldest, newest) = match (audit.front(), audit.back()) {
                (Some(a), Some(b)) => (a.version, b.version),
                _ => return Some(AuditPage::new(Vec::new(), false)),
            };
            let before = before.unwrap_or(u64::MAX).min(newest + 1);
            let lowest = before.saturating_sub(limit as u64).max(1);
            if before > 1 && lowest < oldest {
                return None;
            }
            let records =
                audit.iter().rev().filter(|r| r.version < before).take(limit).cloned().collect();
            Some(AuditPage::new(records, false))
        })
    }

    /// Gives a shared log's coordinator the way to read its log from the start, for audit pages
    /// older than the in-memory trail (a file log's coordinator knows its file already).
    pub fn set_history_reader(&self, open: ReaderFactory) {
        let _ = self.history.set(History::Shared(open));
    }

    /// The newest `limit` (at most [`AUDIT_IN_MEMORY`]) audit records with a version below
    /// `before`, read from the log itself (`store::history`): a file log's own lines for them,
    /// found through a line index; on a shared log the records from the applier's nearest kept
    /// state below the page, read by a reader of its own and decided as the applier did (a
    /// replica started from a snapshot first indexes the log up to it, once). The cost is that
    /// of the page plus a bounded few records before it, whatever its depth. One page at a time
    /// ([`AuditError::Busy`] meanwhile). Blocking.
    pub fn audit_from_log(&self, limit: usize, before: u64) -> Result<AuditPage, AuditError> {
        let mut deep = match self.deep_audit.try_lock() {
            Ok(deep) => deep,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(AuditError::Busy),
        };
        let limit = limit.clamp(1, AUDIT_IN_MEMORY);
        let newest = self.state().version();
        let before = before.min(newest + 1);
        if before <= 1 {
            return Ok(AuditPage::new(Vec::new(), true));
        }
        let (lo, hi) = (before.saturating_sub(limit as u64).max(1), before - 1);
        let unavailable = AuditError::Unavailable;
        let mut records = match (self.history.get(), &self.path) {
            (Some(History::File { path }), Path::Local(writer)) => {
                let end = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).position.0;
                let mut file = std::fs::File::open(path)
                    .map_err(|e| unavailable(format!("cannot read {}: {e}", path.display())))?;
                deep.lines
                    .extend(&mut file, end)
                    .map_err(|e| unavailable(format!("cannot read {}: {e}", path.display())))?;
                deep.lines.page(&mut file, lo, hi).map_err(unavailable)?
            }
            (Some(History::Shared(open)), Path::Shared(replica)) => {
                let deadline = std::time::Instant::now() + Duration::from_secs(120);
                let read = shared_page(replica, &mut deep, open, lo, hi, deadline);
                if read.is_err() {
                    deep.reader = None;
                }
                read.map_err(unavailable)?
            }
            _ => return Err(unavailable("this log cannot be read back".into())),
        };
        records.reverse();
        Ok(AuditPage::new(records, true))
    }

    /// Sets the check that a record's format is read by every live replica (set once, by the
    /// HTTP app that owns the presence view).
    pub fn set_format_gate(&self, gate: FormatGate) {
        let _ = self.format_gate.set(gate);
    }

    /// False once a log write has failed: the process must restart to recover.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    /// Whether a change could be accepted now, or why not: the file log has not failed a write;
    /// a shared log's replica has not stopped at an unreadable record, its tail reads, and the
    /// log answers that it could acknowledge an append. Blocks for up to about a second on a
    /// shared log: call it from a blocking context.
    pub fn write_readiness(&self, lease_ms: u64, now_ms: u64) -> Result<(), String> {
        if !self.is_healthy() {
            return Err(
                "a write to the command log failed; changes are refused until restart".into()
            );
        }
        let Path::Shared(replica) = &self.path else { return Ok(()) };
        if let Some(why) = replica.offline.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(why);
        }
        if let Some(why) = replica.halted.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(why);
        }
        if replica.tail_failing.load(Ordering::SeqCst) {
            return Err(
                "the shared log cannot be read, so this replica cannot apply its own changes"
                    .into(),
            );
        }
        // Readiness follows the tail's progress, not the brokers' metadata: a broker cut off
        // from the others may still claim to lead the partition (and answer the probe below),
        // while a confirmation is a record of this replica's that came back through the log.
        let confirmed = replica.confirmed_at_ms.load(Ordering::Acquire);
        let age = now_ms.saturating_sub(confirmed);
        if confirmed == 0 || age > lease_ms {
            let since = if confirmed == 0 { "yet".to_owned() } else { format!("for {age} ms") };
            return Err(format!(
                "this replica has not confirmed its table through the log {since} (lease {lease_ms} ms): it cannot tell that it has read every change, and its subscribers' write checks answer unconfirmed"
            ));
        }
        // One probe per second whoever asks (readiness is polled, and read anonymously); while
        // one runs, others get the last answer.
        let last = self.probe.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((at, result)) = &last
            && at.elapsed() < Duration::from_secs(1)
        {
            return result.clone();
        }
        let Ok(_probing) = self.probing.try_lock() else {
            return last.map_or_else(|| Err("the log is being checked".into()), |(_, r)| r);
        };
        let result = replica.log.writable();
        *self.probe.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((std::time::Instant::now(), result.clone()));
        result
    }

    pub fn log_description(&self) -> &str {
        &self.log_description
    }
}

/// Applies every record of the shared log as it arrives, publishing each new state and waking
/// the writers waiting for their records. Read errors are retried (the Kafka client reconnects by
/// itself); the replica keeps serving its last state meanwhile.
fn tail_loop(replica: &Replica, reader: &mut dyn LogReader) {
    // A replica started offline begins failing: its first good read says it works again.
    let mut failing = replica.tail_failing.load(Ordering::SeqCst);
    loop {
        if replica.halted.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        }
        let from = {
            let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            a.next_position
        };
        let records = match reader.read_after(from, Duration::from_millis(200)) {
            Ok(records) => {
                if failing {
                    tracing::info!(
                        event = "log_tail_recovered",
                        "reading the shared log works again"
                    );
                    failing = false;
                    replica.tail_failing.store(false, Ordering::SeqCst);
                }
                records
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(event = "log_tail_failing", error = %e, "cannot read the shared log: {e}");
                    failing = true;
                    replica.tail_failing.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        if records.is_empty() {
            continue;
        }
        let mut a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut changed = false;
        for (position, record) in &records {
            if *position < a.next_position {
                continue;
            }
            if let Err(why) = record {
                if !replica.skip.contains(position) {
                    let reason = halt_reason(*position, why);
                    tracing::error!(event = "log_tail_halted", position = *position, "{reason}");
                    *replica.halted.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
                    break;
                }
                tracing::warn!(
                    "shared log record {position} is unreadable ({why}); skipped (store.kafka.skip_offsets)"
                );
            }
            changed |= a.apply(*position, record.as_ref().map_err(String::as_str)) == Step::Changed;
            replica.since_snapshot.fetch_add(1, Ordering::SeqCst);
            if let Ok(LogEntry::Proposal { id, .. }) = record {
                let mut awaited =
                    replica.awaited.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if let Some((_, slot)) = awaited.get_mut(id).filter(|(_, slot)| slot.is_none()) {
                    *slot = Some(Arc::new(a.state.clone()));
                }
            }
        }
        if changed {
            replica.published.publish(&a.state);
        }
        drop(a);
        replica.applied.notify_all();
        if replica.snapshot_due()
            && let Err(e) = replica.snapshot_now()
        {
            // The log holds every record; a missing snapshot only makes the next start slower.
            tracing::warn!("could not write a snapshot: {e}");
        }
    }
}

/// Refuses a log whose genesis pins another unit scheme or colour-to-zone map than `boot`'s.
fn check_genesis(applier: &Applier, boot: &Boot) -> Result<(), StartError> {
    if applier.genesis.scheme != boot.genesis.scheme {
        return Err(StartError::SchemeChanged {
            log: describe_scheme(&applier.genesis),
            config: describe_scheme(&boot.genesis),
        });
    }
    if applier.zones != boot.zones {
        return Err(StartError::ZonesChanged {
            log: format!(
                "blue in {}, green in {}",
                applier.zones.zone_of(ZoneId::BLUE),
                applier.zones.zone_of(ZoneId::GREEN)
            ),
            config: format!(
                "blue in {}, green in {}",
                boot.zones.zone_of(ZoneId::BLUE),
                boot.zones.zone_of(ZoneId::GREEN)
            ),
        });
    }
    Ok(())
}

fn describe_scheme(genesis: &Genesis) -> String {
    match genesis.scheme.mode() {
        crate::core::UnitMode::Hash => format!("{} units in hash mode", genesis.scheme.count()),
        crate::core::UnitMode::Digits { skip } => {
            format!("{} units in digits mode (skip {skip})", genesis.scheme.count())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Command, UnitMode, UnitScheme};
    use crate::store::ReadRecord;

    /// A shared log in memory, read and written by every replica of a test.
    #[derive(Clone, Default)]
    struct Memory {
        records: Arc<Mutex<Vec<LogEntry>>>,
    }

    impl SharedLog for Memory {
        fn append(&self, entry: &LogEntry) -> Result<u64, StoreError> {
            let mut records = self.records.lock().unwrap();
            records.push(entry.clone());
            Ok(records.len() as u64 - 1)
        }
        fn describe(&self) -> String {
            "memory".into()
        }
    }

    impl LogReader for Memory {
        fn read_after(&mut self, from: u64, wait: Duration) -> Result<Vec<ReadRecord>, StoreError> {
            let records = self.records.lock().unwrap().clone();
            if from > records.len() as u64 {
                let reason = format!("the log ends at {}", records.len());
                return Err(StoreError::Position { log: "memory".into(), position: from, reason });
            }
            if from == records.len() as u64 {
                std::thread::sleep(wait.min(Duration::from_millis(20)));
            }
            let read = records.into_iter().enumerate().skip(from as usize);
            Ok(read.map(|(i, e)| (i as u64, Ok(e))).collect())
        }
        fn end(&mut self) -> Result<u64, StoreError> {
            Ok(self.records.lock().unwrap().len() as u64)
        }
    }

    fn start(log: &Memory, dir: &std::path::Path) -> Started {
        let boot = Boot {
            genesis: Genesis {
                scheme: UnitScheme::new(100, UnitMode::Hash).unwrap(),
                blue_units: 50,
            },
            zones: Zones::default(),
            now_ms: 1,
        };
        let snapshots = Snapshots::new(dir, 0);
        let (writer, reader) = (Box::new(log.clone()), Box::new(log.clone()));
        Coordinator::start_shared(
            writer,
            reader,
            Some(snapshots),
            boot,
            SharedOptions {
                apply_wait: Duration::from_secs(5),
                skip_offsets: Vec::new(),
                offline: None,
            },
        )
        .unwrap()
    }

    fn dial(c: &Coordinator, blue_units: u32) {
        let envelope = Envelope {
            expected_version: c.state().version(),
            command: Command::SetBlueUnits { blue_units, domain: None },
            audit: Audit { by: "alice".into(), at_ms: 2, reason: "move".into() },
        };
        c.submit(&envelope).unwrap();
    }

    #[test]
    fn a_shared_logs_deep_audit_page_equals_its_in_memory_trail_and_skips_refused_records() {
        let dir = tempfile::tempdir().unwrap();
        let log = Memory::default();
        let c = start(&log, dir.path()).coordinator;
        for blue in 1..=30 {
            dial(&c, blue);
            // A stale proposal after each change: refused, so it spends no version.
            let stale = Envelope {
                expected_version: 1,
                command: Command::SetBlueUnits { blue_units: 99, domain: None },
                audit: Audit { by: "late".into(), at_ms: 3, reason: "stale".into() },
            };
            log.append(&LogEntry::proposal(&format!("stale-{blue}"), &stale, &Zones::default()))
                .unwrap();
        }
        assert!(wait_for(|| c.state().version() == 31 && c.audit(1)[0].version == 31));
        c.set_history_reader(Box::new({
            let log = log.clone();
            move || Ok(Box::new(log.clone()) as Box<dyn LogReader>)
        }));
        let all = c.audit(usize::MAX);
        for (before, limit) in [(32, 31), (31, 5), (12, 4), (3, 10), (2, 1)] {
            let page = c.audit_from_log(limit, before).unwrap();
            let expected: Vec<AuditRecord> =
                all.iter().filter(|r| r.version < before).take(limit).cloned().collect();
            assert_eq!(page.records, expected, "before {before}, limit {limit}");
            assert_eq!(page.next_before, expected.last().map(|r| r.version).filter(|v| *v > 1));
            assert!(page.from_log);
            // The memory trail (which holds all 31 here) gives the same page.
            assert_eq!(c.audit_in_memory(limit, Some(before)).unwrap().records, expected);
        }
        assert_eq!(c.audit_from_log(5, 1).unwrap().records, Vec::new());
        // One page at a time.
        let _flight = c.deep_audit.lock().unwrap();
        assert_eq!(c.audit_from_log(5, 10), Err(AuditError::Busy));
    }

    /// Appends `count` dial proposals straight to the log (each followed by a refused stale
    /// one and a lease record, which spend no version), from version `from`.
    fn append_dials(log: &Memory, from: u64, count: u64) {
        for n in 0..count {
            let version = from + n;
            let change = Envelope {
                expected_version: version,
                command: Command::SetBlueUnits {
                    blue_units: (version % 90) as u32 + 1,
                    domain: None,
                },
                audit: Audit {
                    by: format!("op{}", n % 3),
                    at_ms: 10 + version,
                    reason: format!("change {version}"),
                },
            };
            let id = format!("dial-{version}");
            log.append(&LogEntry::proposal(&id, &change, &Zones::default())).unwrap();
            let stale = Envelope { expected_version: 1, ..change };
            let id = format!("stale-{version}");
            log.append(&LogEntry::proposal(&id, &stale, &Zones::default())).unwrap();
            if n % 100 == 0 {
                let lease = LogEntry::Lease {
                    id: format!("lease-{version}"),
                    name: "lanes".into(),
                    holder: "r1".into(),
                    url: None,
                    at_ms: 10 + version,
                    until_ms: 20 + version,
                };
                log.append(&lease).unwrap();
            }
        }
    }

    #[test]
    fn deep_pages_across_state_marks_and_before_a_snapshot_equal_the_trail() {
        let marks = crate::store::STATE_MARK_EVERY;
        let dir = tempfile::tempdir().unwrap();
        let log = Memory::default();
        let first = start(&log, dir.path()).coordinator;
        // More than two state marks, then a snapshot, then more than another mark.
        append_dials(&log, 1, 2 * marks + 300);
        let at_snapshot = 2 * marks + 301;
        assert!(wait_for(|| first.state().version() == at_snapshot));
        assert!(first.snapshot_now().unwrap());
        append_dials(&log, at_snapshot, marks + 200);
        let newest = at_snapshot + marks + 200;
        assert!(wait_for(|| first.state().version() == newest));
        let all = first.audit(usize::MAX);
        assert_eq!(all.len() as u64, newest, "the whole history is in memory here");
        // A second replica started from the snapshot: its index begins there, and the first
        // page below it indexes the log up to it, once.
        let second = start(&log, dir.path()).coordinator;
        assert!(wait_for(|| second.state().version() == newest));
        for c in [&second, &first] {
            c.set_history_reader(Box::new({
                let log = log.clone();
                move || Ok(Box::new(log.clone()) as Box<dyn LogReader>)
            }));
        }
        let cases = [
            (newest + 1, 500),
            (at_snapshot + 1, 10),
            (at_snapshot + 3, 5),
            (marks + 1, 1),
            (marks + 2, 3),
            (2 * marks + 7, 1_500),
            (newest - 10, 3_000),
            (40, 100),
            (2, 1),
            (3, 2),
        ];
        for c in [&second, &first] {
            for (before, limit) in cases {
                let page = c.audit_from_log(limit, before).unwrap();
                let expected: Vec<AuditRecord> =
                    all.iter().filter(|r| r.version < before).take(limit).cloned().collect();
                assert_eq!(page.records, expected, "before {before}, limit {limit}");
            }
        }
        let Path::Shared(replica) = &second.path else { panic!("shared") };
        let index = &replica.applier.lock().unwrap().history;
        assert_eq!((index.oldest(), index.newest()), (1, newest));
    }

    fn wait_for(mut check: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_replica_snapshot_is_used_when_the_log_holds_its_position_and_ignored_when_not() {
        let dir = tempfile::tempdir().unwrap();
        let log = Memory::default();
        let first = start(&log, dir.path());
        assert!(!first.from_snapshot);
        for units in [10, 20, 30] {
            dial(&first.coordinator, units);
        }
        assert!(first.coordinator.snapshot_now().unwrap());
        let hash = first.coordinator.log_status().state_hash;
        let again = start(&log, dir.path());
        assert!(again.from_snapshot, "{:?}", again.warnings);
        assert_eq!(again.coordinator.state().table().blue_units(), 30);
        assert_eq!(again.coordinator.log_status().state_hash, hash);
        // A log of the same id that no longer reaches the snapshot's position (Kafka: an offset
        // past the end, or below the log start offset): the snapshot is ignored, and the whole
        // log is applied.
        log.records.lock().unwrap().truncate(2);
        let fallback = start(&log, dir.path());
        assert!(!fallback.from_snapshot);
        let warnings = fallback.warnings.join("; ");
        assert!(warnings.contains("ignored the snapshot (position 4"), "{warnings}");
        assert_eq!(fallback.coordinator.state().table().blue_units(), 10);
        assert_eq!(fallback.coordinator.state().version(), 2);
    }

    /// Concurrent writers on one replica: each applied change's answer is the table that change
    /// produced (its own version and value), never a later one another writer's record made.
    #[test]
    fn each_answer_is_its_own_change_under_concurrent_writers() {
        let dir = tempfile::tempdir().unwrap();
        let log = Memory::default();
        let coordinator = Arc::new(start(&log, dir.path()).coordinator);
        let writers: Vec<_> = (0..8u32)
            .map(|w| {
                let c = Arc::clone(&coordinator);
                std::thread::spawn(move || {
                    let mut answers = Vec::new();
                    for i in 0..40u32 {
                        let blue_units = (w * 40 + i) % 99 + 1;
                        let envelope = Envelope {
                            expected_version: c.state().version(),
                            command: Command::SetBlueUnits { blue_units, domain: None },
                            audit: Audit { by: format!("w{w}"), at_ms: 2, reason: "move".into() },
                        };
                        if let Ok(Submitted { table, applied: Some(applied), .. }) =
                            c.submit(&envelope)
                        {
                            answers.push((
                                applied.version,
                                blue_units,
                                table.version(),
                                table.blue_units(),
                            ));
                        }
                    }
                    answers
                })
            })
            .collect();
        let answers: Vec<_> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        assert!(answers.len() >= 40, "only {} changes applied", answers.len());
        let audit = coordinator.audit(usize::MAX);
        let wrong: Vec<_> = answers
            .iter()
            .filter(|(version, asked, table_version, table_units)| {
                table_version != version || table_units != asked
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{} of {} answers describe another change: {wrong:?}",
            wrong.len(),
            answers.len()
        );
        for (version, asked, _, _) in &answers {
            let record = audit.iter().find(|r| r.version == *version).expect("audited");
            let units = format!("({asked}/100 units blue)");
            assert!(record.to.ends_with(&units), "audit at version {version}: {}", record.to);
        }
    }
}
