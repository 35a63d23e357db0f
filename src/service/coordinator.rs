//! The coordinator: owns the state, serialises changes through the log, publishes states and
//! writes snapshots of them.
//!
//! Why a plain mutex around the writer and an `ArcSwap` for readers: changes are rare (operators,
//! drain steps) and must be strictly ordered around an fsync, while tags are read millions of
//! times a second. Readers load an immutable `Arc<RoutingTable>` and never wait for the writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::core::{
    Applied, Audit, ColorZones, CommandError, Envelope, Genesis, RoutingTable, State,
};
use crate::store::{
    AuditRecord, CommandLog, LogEntry, LogPosition, Replayed, Snapshots, StoreError, push_audit,
    replay, replay_after,
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
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error(transparent)]
    Store(#[from] StoreError),
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
    /// The state, the genesis and the in-memory audit trail: what a snapshot stores.
    replayed: Replayed,
    log: Box<dyn CommandLog>,
    /// The log position after the newest entry, and how many entries the log holds.
    position: LogPosition,
    entries: u64,
    /// Entries appended since the newest snapshot (or since the start of the log).
    since_snapshot: u64,
}

pub struct Coordinator {
    current: ArcSwap<State>,
    /// Every published state, for watchers (the routing watch stream, the commit-time recorder).
    changes: tokio::sync::watch::Sender<Arc<State>>,
    writer: Mutex<Writer>,
    /// Where snapshots go; the mutex keeps two writers off the temporary file.
    snapshots: Option<Mutex<Snapshots>>,
    healthy: AtomicBool,
    log_description: String,
}

/// What the configuration says the state should start from.
pub struct Boot {
    pub genesis: Genesis,
    pub zones: ColorZones,
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
                    let genesis = LogEntry::genesis(&boot.genesis, &audit);
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
        let initial = Arc::new(replayed.state.clone());
        let coordinator = Coordinator {
            changes: tokio::sync::watch::Sender::new(Arc::clone(&initial)),
            current: ArcSwap::new(initial),
            writer: Mutex::new(Writer { replayed, log, position, entries, since_snapshot }),
            snapshots: snapshots.map(Mutex::new),
            healthy: AtomicBool::new(true),
            log_description,
        };
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
        let Some(snapshots) = &self.snapshots else {
            return Ok(false);
        };
        let pending = {
            let mut writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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

    /// The current table. Lock-free; the hot path of tagging.
    #[inline]
    pub fn table(&self) -> Arc<RoutingTable> {
        self.current.load().table_arc()
    }

    /// The current state (table and drains), lock-free.
    pub fn state(&self) -> Arc<State> {
        self.current.load_full()
    }

    /// Validates, logs durably, then publishes a change. Blocks on fsync: call it from a
    /// blocking context (`spawn_blocking`), never on an async executor thread.
    pub fn submit(&self, envelope: &Envelope) -> Result<Submitted, SubmitError> {
        // A panic while holding the lock cannot leave a half-applied state behind (the state is
        // replaced only after the log append succeeded), so a poisoned lock is safe to reuse.
        let mut writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some((next, applied)) = writer.replayed.state.apply(envelope)? else {
            return Ok(Submitted { table: self.table(), state: self.state(), applied: None });
        };
        let entry = LogEntry::change(envelope, applied.version, &applied.from, &applied.to);
        let started = std::time::Instant::now();
        let position = match writer.log.append(&entry) {
            Ok(position) => position,
            Err(e) => {
                self.healthy.store(false, Ordering::SeqCst);
                return Err(e.into());
            }
        };
        metrics::histogram!(telemetry::LOG_APPEND_DURATION).record(started.elapsed().as_secs_f64());
        writer.position = position;
        writer.entries += 1;
        writer.since_snapshot += 1;
        let table = next.table_arc();
        let published = Arc::new(next.clone());
        writer.replayed.state = next;
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
        drop(writer);
        telemetry::count_change(envelope.command.action());
        telemetry::publish_state(&published);
        self.current.store(Arc::clone(&published));
        self.changes.send_replace(Arc::clone(&published));
        if snapshot_due && let Err(e) = self.snapshot_now() {
            // The log holds the change; a missing snapshot only makes the next start slower.
            eprintln!("tidegate: warning: could not write a snapshot: {e}");
        }
        Ok(Submitted { table, state: published, applied: Some(applied) })
    }

    /// A receiver that sees every published state (coalesced: a slow reader sees the newest).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<State>> {
        self.changes.subscribe()
    }

    /// The newest `limit` audit records, newest first.
    pub fn audit(&self, limit: usize) -> Vec<AuditRecord> {
        let writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        writer.replayed.audit.iter().rev().take(limit).cloned().collect()
    }

    /// False once a log write has failed: the process must restart to recover.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    pub fn log_description(&self) -> &str {
        &self.log_description
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
