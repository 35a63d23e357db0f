//! The coordinator: owns the state, serialises changes through the log, publishes snapshots.
//!
//! Why a plain mutex around the writer and an `ArcSwap` for readers: changes are rare (operators,
//! drain steps) and must be strictly ordered around an fsync, while tags are read millions of
//! times a second. Readers load an immutable `Arc<RoutingTable>` and never wait for the writer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::core::{
    Applied, Audit, ColorZones, CommandError, Envelope, Genesis, RoutingTable, State,
};
use crate::store::{AuditRecord, CommandLog, LogEntry, StoreError, replay};
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
    state: State,
    log: Box<dyn CommandLog>,
    audit: VecDeque<AuditRecord>,
}

pub struct Coordinator {
    current: ArcSwap<State>,
    /// Every published state, for watchers (the routing watch stream, the commit-time recorder).
    changes: tokio::sync::watch::Sender<Arc<State>>,
    writer: Mutex<Writer>,
    healthy: AtomicBool,
    log_description: String,
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
            let genesis = LogEntry::genesis(&boot.genesis, &audit);
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
        let initial = Arc::new(replayed.state.clone());
        Ok(Coordinator {
            changes: tokio::sync::watch::Sender::new(Arc::clone(&initial)),
            current: ArcSwap::new(initial),
            writer: Mutex::new(Writer { state: replayed.state, log, audit }),
            healthy: AtomicBool::new(true),
            log_description,
        })
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
        let published = Arc::new(next.clone());
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
        telemetry::publish_state(&published);
        self.current.store(Arc::clone(&published));
        self.changes.send_replace(Arc::clone(&published));
        Ok(Submitted { table, state: published, applied: Some(applied) })
    }

    /// A receiver that sees every published state (coalesced: a slow reader sees the newest).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<State>> {
        self.changes.subscribe()
    }

    /// The newest `limit` audit records, newest first.
    pub fn audit(&self, limit: usize) -> Vec<AuditRecord> {
        let writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        writer.audit.iter().rev().take(limit).cloned().collect()
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
