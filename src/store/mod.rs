//! The durable log of commands: state is the replay of the log.
//!
//! Architecture invariant: a change is acknowledged only after its log entry is durable
//! (`CommandLog::append` returned), and the in-memory state is only ever what replaying the log
//! produces. The log sits behind the small [`CommandLog`] trait so that a Kafka-topic log shared by
//! several coordinator replicas can replace the embedded file log without touching the core: every
//! entry carries the version it expected, so replicas replaying the same topic reject the same
//! losers of a compare-and-set race and reach the same state.

mod apply;
mod decision;
mod entry;
mod file_log;
mod history;
mod log;
mod replay;
mod snapshot;

pub use apply::{Applier, Step, keyed_id, split_keyed_id};
pub use decision::{Lease, Outcome, lease_granted};
pub use entry::{
    DEFAULT_CALL_METHOD, DEFAULT_CALL_RETRIES, DEFAULT_CALL_TIMEOUT, LogEntry, WireCommand,
    WireDrainPlan, WireHttpCall, WirePlan, WirePrecondition, WireStep, WireTrigger, WireZones,
    is_plain_two, log_id_of, new_log_id,
};
pub use file_log::{FileLog, LOG_FILE, decode_log, encode_line};
pub use history::{
    LINE_MARK_EVERY, LineIndex, PagePlan, STATE_MARK_EVERY, VersionIndex, shared_page,
};
pub use log::{CommandLog, LogPosition, LogReader, ReadRecord, SharedLog, StoreError, Tail};
pub use replay::{
    AUDIT_IN_MEMORY, AuditRecord, ReplayError, Replayed, audit_before, genesis_audit, genesis_hash,
    history_hash, push_audit, replay, replay_after,
};
pub use snapshot::{Loaded, Outcomes, SNAPSHOT_FILE, Shared, Snapshots};
