//! What every command log is: the [`CommandLog`] and [`SharedLog`] traits, their positions,
//! tails and records, and [`StoreError`]. Apart from `mod.rs`, so the logs and the snapshot
//! files use these without importing the module that declares them.

use std::path::PathBuf;
use std::time::Duration;

use super::entry::LogEntry;

/// An opaque, ordered place in a log, *between* entries: everything before it is covered.
///
/// Only the log that handed a position out knows what the number means: the file log uses the
/// byte offset just after an entry's line, a Kafka-topic log would use the offset of the next
/// record. Positions of one log only grow, and [`LogPosition::START`] is before the first entry.
/// A snapshot records the position it covers, and start-up reads the entries after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition(pub u64);

impl LogPosition {
    pub const START: LogPosition = LogPosition(0);
}

/// The entries after a position, as [`CommandLog::read_after`] found them.
#[derive(Debug)]
pub struct Tail {
    pub entries: Vec<LogEntry>,
    /// The position after the last entry (the position given when there are none).
    pub end: LogPosition,
    /// Damage that was repaired (a torn last write), as sentences for the start-up log.
    pub warnings: Vec<String>,
}

/// An append-only, durable sequence of [`LogEntry`]s.
pub trait CommandLog: Send {
    /// Every entry after `position`, oldest first, and the position after the last one. Called
    /// once at start-up, before any append: the file log also cuts a torn last write here. A
    /// `position` that this log never handed out is [`StoreError::Position`] (the caller then
    /// reads from [`LogPosition::START`]).
    fn read_after(&mut self, position: LogPosition) -> Result<Tail, StoreError>;

    /// Appends one entry and returns the position just after it. Returns only once the entry
    /// would survive a crash (`kill -9` or power loss); after an error the log refuses further
    /// appends until it is reopened.
    fn append(&mut self, entry: &LogEntry) -> Result<LogPosition, StoreError>;

    /// Where the log lives, for messages and `/readyz`.
    fn describe(&self) -> String;

    /// Whether an append could be acknowledged now (Kafka: the partition has a leader and enough
    /// in-sync replicas), or why not. Blocks for at most about a second.
    fn writable(&self) -> Result<(), String> {
        Ok(())
    }

    /// The file a second reader may decode to page through the history (`GET /v1/audit` beyond
    /// the in-memory trail); `None` when the log cannot be read that way.
    fn history_path(&self) -> Option<PathBuf> {
        None
    }
}

/// A log shared by several coordinator replicas (Kafka): appends go to one total order, and each
/// replica reads every record back through its own [`LogReader`] and decides it with an
/// `Applier` (`apply.rs`). Positions are the log's own (Kafka: the partition offset).
pub trait SharedLog: Send + Sync {
    /// Appends one record and returns its position once it is durable (acknowledged by every
    /// in-sync replica). [`StoreError::OutcomeUnknown`] when that cannot be known.
    fn append(&self, entry: &LogEntry) -> Result<u64, StoreError>;

    /// Where the log lives, for messages and `/readyz`.
    fn describe(&self) -> String;

    /// Whether an append could be acknowledged now (Kafka: the partition has a leader and enough
    /// in-sync replicas), or why not. Blocks for at most about a second.
    fn writable(&self) -> Result<(), String> {
        Ok(())
    }
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
        "the command log {path} is corrupt at line {line} (byte {offset}): {reason}. The line is complete, so this is not a torn write and it may hold an acknowledged change; restore the file from a backup or move it aside"
    )]
    Corrupt { path: PathBuf, line: usize, offset: u64, reason: String },
    #[error("the command log {path} cannot be replayed at entry {line}: {reason}")]
    Replay { path: String, line: usize, reason: String },
    #[error("position {position} is not an entry boundary of the command log {log}: {reason}")]
    Position { log: String, position: u64, reason: String },
    #[error("the command log was appended to before its tail was read (a bug)")]
    Unread,
    #[error("the command log refused the write because an earlier write failed; restart tidegate")]
    Poisoned,
    #[error("cannot encode a log entry: {0}")]
    Encode(#[from] serde_json::Error),
}
