//! The durable log of commands: state is the replay of the log.
//!
//! Architecture invariant: a change is acknowledged only after its log entry is durable
//! (`CommandLog::append` returned), and the in-memory state is only ever what replaying the log
//! produces. The log sits behind the small [`CommandLog`] trait so that a Kafka-topic log shared by
//! several coordinator replicas can replace the embedded file log without touching the core: every
//! entry carries the version it expected, so replicas replaying the same topic reject the same
//! losers of a compare-and-set race and reach the same state.

mod apply;
mod entry;
mod file_log;
mod replay;

pub use apply::{Applier, Outcome, Step};
pub use entry::{LogEntry, WireCommand, WireZones, log_id_of, new_log_id};
pub use file_log::{FileLog, LOG_FILE, Opened, encode_line};
pub use replay::{AuditRecord, ReplayError, Replayed, replay};

use std::path::PathBuf;
use std::time::Duration;

/// An append-only, durable sequence of [`LogEntry`]s.
pub trait CommandLog: Send {
    /// Appends one entry. Returns only once the entry would survive a crash (`kill -9` or power
    /// loss); after an error the log refuses further appends until it is reopened.
    fn append(&mut self, entry: &LogEntry) -> Result<(), StoreError>;

    /// Where the log lives, for messages and `/readyz`.
    fn describe(&self) -> String;
}

/// A log shared by several coordinator replicas (Kafka): appends go to one total order, and each
/// replica reads every record back through its own [`LogReader`] and decides it with an
/// [`Applier`]. Positions are the log's own (Kafka: the partition offset).
pub trait SharedLog: Send + Sync {
    /// Appends one record and returns its position once it is durable (acknowledged by every
    /// in-sync replica). [`StoreError::OutcomeUnknown`] when that cannot be known.
    fn append(&self, entry: &LogEntry) -> Result<u64, StoreError>;

    /// Where the log lives, for messages and `/readyz`.
    fn describe(&self) -> String;
}

/// One record read back from a shared log: its position, and the entry or why it is unreadable.
pub type ReadRecord = (u64, Result<LogEntry, String>);

/// Reads a shared log in order.
pub trait LogReader: Send {
    /// The records at positions `>= from`, waiting up to `wait` for the first one.
    fn read_after(&mut self, from: u64, wait: Duration) -> Result<Vec<ReadRecord>, StoreError>;

    /// The position after the last record (Kafka: the high watermark).
    fn end(&mut self) -> Result<u64, StoreError>;
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the log did not confirm command {command_id} ({reason}); it may or may not take effect. Retry with the same command id: it never applies twice"
    )]
    OutcomeUnknown { command_id: String, reason: String },
    #[error("the shared log {log}: {reason}")]
    Shared { log: String, reason: String },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "data directory {0} is locked by another running tidegate; give each instance its own --data-dir"
    )]
    Locked(PathBuf),
    #[error(
        "the command log {path} is corrupt at line {line} (byte {offset}): {reason}. Records after it exist, so this is not a torn write; restore the file from a backup or move it aside"
    )]
    Corrupt { path: PathBuf, line: usize, offset: u64, reason: String },
    #[error("the command log {path} cannot be replayed at entry {line}: {reason}")]
    Replay { path: String, line: usize, reason: String },
    #[error("the command log refused the write because an earlier write failed; restart tidegate")]
    Poisoned,
    #[error("cannot encode a log entry: {0}")]
    Encode(#[from] serde_json::Error),
}
