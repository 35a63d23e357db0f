//! The coordinator: owns the state, serialises changes through the log, publishes snapshots.
//!
//! Why a plain mutex around the writer and an `ArcSwap` for readers: changes are rare (operators,
//! drain steps) and must be strictly ordered around an fsync, while tags are read millions of
//! times a second. Readers load an immutable `Arc<RoutingTable>` and never wait for the writer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::core::{
    Applied, Audit, ColorZones, CommandError, Envelope, Genesis, RoutingTable, State,
};
use crate::store::{
    Applier, AuditRecord, CommandLog, LogEntry, LogReader, Outcome, SharedLog, Step, StoreError,
    log_id_of, new_log_id, replay,
};
use crate::telemetry;

/// How many audit records are kept in memory for `GET /v1/audit`; older ones stay in the log.
pub const AUDIT_IN_MEMORY: usize = 10_000;

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
}

/// The outcome of an accepted submission.
#[derive(Debug)]
pub struct Submitted {
    pub table: Arc<RoutingTable>,
    /// The whole state after the command (drains included).
    pub state: Arc<State>,
    /// `None` when the command changed nothing (no version was spent).
    pub applied: Option<Applied>,
}

struct Writer {
    state: State,
    log: Box<dyn CommandLog>,
    audit: VecDeque<AuditRecord>,
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
    Local(Mutex<Writer>),
    Shared(Arc<Replica>),
}

/// A replica of a shared log: the applier fed by the tail thread, and the writers waiting on it.
struct Replica {
    log: Box<dyn SharedLog>,
    applier: Mutex<Applier>,
    applied: Condvar,
    published: Arc<Published>,
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
}

pub struct Coordinator {
    published: Arc<Published>,
    path: Path,
    healthy: AtomicBool,
    log_description: String,
    log_id: String,
    apply_wait: Duration,
}

/// What the configuration says the state should start from.
pub struct Boot {
    pub genesis: Genesis,
    pub zones: ColorZones,
    pub now_ms: u64,
}

impl Coordinator {
    /// Rebuilds the state from `entries` (writing the genesis entry to an empty log first).
    pub fn start(
        mut log: Box<dyn CommandLog>,
        mut entries: Vec<LogEntry>,
        boot: Boot,
    ) -> Result<Coordinator, StartError> {
        let log_description = log.describe();
        if entries.is_empty() {
            let audit = Audit {
                by: "tidegate".into(),
                at_ms: boot.now_ms,
                reason: "first start: genesis from configuration".into(),
            };
            let genesis = LogEntry::genesis_pinned(&boot.genesis, &audit, new_log_id(), None);
            log.append(&genesis)?;
            entries.push(genesis);
        }
        let replayed = replay(&entries, &boot.zones).map_err(|e| StoreError::Replay {
            path: log_description.clone(),
            line: e.line,
            reason: e.reason,
        })?;
        if replayed.genesis.scheme != boot.genesis.scheme {
            return Err(StartError::SchemeChanged {
                log: describe_scheme(&replayed.genesis),
                config: describe_scheme(&boot.genesis),
            });
        }
        let mut audit: VecDeque<AuditRecord> = replayed.audit.into();
        while audit.len() > AUDIT_IN_MEMORY {
            audit.pop_front();
        }
        Ok(Coordinator {
            published: Arc::new(Published::new(replayed.state.clone())),
            path: Path::Local(Mutex::new(Writer { state: replayed.state, log, audit })),
            healthy: AtomicBool::new(true),
            log_description,
            log_id: log_id_of(&entries[0]),
            apply_wait: Duration::ZERO,
        })
    }

    /// Joins a shared log as one replica: writes the genesis record if the log is empty, replays
    /// every record up to the log's end, then tails it on a thread of its own for as long as the
    /// process lives. The genesis must pin the same unit scheme and zones as `boot`.
    pub fn start_shared(
        log: Box<dyn SharedLog>,
        mut reader: Box<dyn LogReader>,
        boot: Boot,
        apply_wait: Duration,
    ) -> Result<Coordinator, StartError> {
        let log_description = log.describe();
        let shared = |reason: String| StoreError::Shared { log: log_description.clone(), reason };
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
        if applier.genesis.scheme != boot.genesis.scheme {
            return Err(StartError::SchemeChanged {
                log: describe_scheme(&applier.genesis),
                config: describe_scheme(&boot.genesis),
            });
        }
        if applier.zones != boot.zones {
            return Err(StartError::ZonesChanged {
                log: format!("blue in {}, green in {}", applier.zones.blue, applier.zones.green),
                config: format!("blue in {}, green in {}", boot.zones.blue, boot.zones.green),
            });
        }
        let end = reader.end()?;
        while applier.next_position < end {
            let records = reader.read_after(applier.next_position, Duration::from_secs(1))?;
            for (position, record) in &records {
                applier.apply(*position, record.as_ref().map_err(String::as_str));
            }
        }
        let log_id = applier.log_id.clone();
        let published = Arc::new(Published::new(applier.state.clone()));
        let replica = Arc::new(Replica {
            log,
            applier: Mutex::new(applier),
            applied: Condvar::new(),
            published: Arc::clone(&published),
        });
        let tail = Arc::clone(&replica);
        std::thread::Builder::new()
            .name("tidegate-log-tail".into())
            .spawn(move || tail_loop(&tail, reader.as_mut()))
            .map_err(|e| shared(format!("cannot start the tail thread: {e}")))?;
        Ok(Coordinator {
            published,
            path: Path::Shared(replica),
            healthy: AtomicBool::new(true),
            log_description,
            log_id,
            apply_wait,
        })
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
        let Some((next, applied)) = writer.state.apply(envelope)? else {
            return Ok(Submitted { table: self.table(), state: self.state(), applied: None });
        };
        let entry = LogEntry::change(envelope, applied.version, &applied.from, &applied.to);
        let started = std::time::Instant::now();
        if let Err(e) = writer.log.append(&entry) {
            self.healthy.store(false, Ordering::SeqCst);
            return Err(e.into());
        }
        metrics::histogram!(telemetry::LOG_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        let table = next.table_arc();
        writer.state = next;
        writer.audit.push_back(AuditRecord {
            version: applied.version,
            at_ms: envelope.audit.at_ms,
            by: envelope.audit.by.clone(),
            reason: envelope.audit.reason.clone(),
            action: envelope.command.action(),
            from: applied.from.clone(),
            to: applied.to.clone(),
        });
        if writer.audit.len() > AUDIT_IN_MEMORY {
            writer.audit.pop_front();
        }
        telemetry::count_change(envelope.command.action());
        let published = self.published.publish(&writer.state);
        Ok(Submitted { table, state: published, applied: Some(applied) })
    }

    /// Appends a proposal, waits until this replica has applied it, and answers its outcome.
    fn submit_shared(
        &self,
        replica: &Replica,
        envelope: &Envelope,
        command_id: Option<&str>,
    ) -> Result<Submitted, SubmitError> {
        let command_id = command_id.map_or_else(new_log_id, str::to_owned);
        let entry = LogEntry::proposal(&command_id, envelope);
        let started = std::time::Instant::now();
        let position = replica.log.append(&entry)?;
        metrics::histogram!(telemetry::LOG_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        let deadline = std::time::Instant::now() + self.apply_wait;
        let mut applier = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while applier.next_position <= position {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                let waited_ms = self.apply_wait.as_millis() as u64;
                return Err(SubmitError::NotApplied { command_id, waited_ms });
            }
            applier = replica
                .applied
                .wait_timeout(applier, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        let outcome = applier.outcome(&command_id).cloned();
        drop(applier);
        let state = self.state();
        let table = state.table_arc();
        match outcome {
            Some(Outcome::Applied(applied)) => {
                telemetry::count_change(envelope.command.action());
                Ok(Submitted { table, state, applied: Some(applied) })
            }
            Some(Outcome::Unchanged) => Ok(Submitted { table, state, applied: None }),
            Some(Outcome::Refused(e)) => Err(e.into()),
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

    /// The log this coordinator serves from, for GET /v1/cluster.
    pub fn log_status(&self) -> LogStatus {
        let (kind, next_position, state_hash) = match &self.path {
            Path::Local(_) => ("file", None, None),
            Path::Shared(replica) => {
                let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                ("kafka", Some(a.next_position), Some(a.state_hash))
            }
        };
        LogStatus {
            kind,
            id: self.log_id.clone(),
            description: self.log_description.clone(),
            next_position,
            state_hash,
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
        match &self.path {
            Path::Local(writer) => {
                let writer = writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                writer.audit.iter().rev().take(limit).cloned().collect()
            }
            Path::Shared(replica) => {
                let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                a.audit.iter().rev().take(limit).cloned().collect()
            }
        }
    }

    /// False once a log write has failed: the process must restart to recover.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    pub fn log_description(&self) -> &str {
        &self.log_description
    }
}

/// Applies every record of the shared log as it arrives, publishing each new state and waking
/// the writers waiting for their records. Read errors are retried (the Kafka client reconnects by
/// itself); the replica keeps serving its last state meanwhile.
fn tail_loop(replica: &Replica, reader: &mut dyn LogReader) {
    let mut failing = false;
    loop {
        let from = {
            let a = replica.applier.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            a.next_position
        };
        let records = match reader.read_after(from, Duration::from_millis(200)) {
            Ok(records) => {
                if failing {
                    eprintln!("tidegate: reading the shared log works again");
                    failing = false;
                }
                records
            }
            Err(e) => {
                if !failing {
                    eprintln!("tidegate: warning: cannot read the shared log: {e}");
                    failing = true;
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
                eprintln!(
                    "tidegate: warning: shared log record {position} is unreadable ({why}); it takes no effect"
                );
            }
            changed |= a.apply(*position, record.as_ref().map_err(String::as_str)) == Step::Changed;
        }
        if changed {
            replica.published.publish(&a.state);
        }
        drop(a);
        replica.applied.notify_all();
    }
}

fn describe_scheme(genesis: &Genesis) -> String {
    match genesis.scheme.mode() {
        crate::core::UnitMode::Hash => format!("{} units in hash mode", genesis.scheme.count()),
        crate::core::UnitMode::Digits { skip } => {
            format!("{} units in digits mode (skip {skip})", genesis.scheme.count())
        }
    }
}
