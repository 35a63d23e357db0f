//! Why a command is refused.

use super::{MAX_PINS, MAX_REASON_BYTES};
use crate::dial::DialError;
use crate::unit::UnitError;
use crate::unit_map::UnitSetError;
use crate::zone::ZoneError;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    #[error("the routing table is at version {current}, not the expected version {expected}")]
    VersionConflict { expected: u64, current: u64 },
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error(transparent)]
    InvalidUserId(#[from] UnitError),
    #[error("user `{0}` is not pinned")]
    PinNotFound(String),
    #[error("at most {MAX_PINS} users may be pinned at once")]
    TooManyPins,
    #[error("a reason is required for every change")]
    MissingReason,
    #[error("the reason is {0} bytes long; at most {MAX_REASON_BYTES} bytes are allowed")]
    ReasonTooLong(usize),
    #[error("the operator name is empty")]
    MissingActor,
    #[error("{0} needs a two-zone table (blue and green); with more zones, move unit sets")]
    NeedsTwoZones(&'static str),
    #[error(transparent)]
    Zone(#[from] ZoneError),
    #[error(transparent)]
    UnitSet(#[from] UnitSetError),
    #[error("{0}")]
    InvalidMove(String),
    #[error("there is no routing domain `{0}`")]
    UnknownDomain(String),
    #[error("routing domain `{0}` exists already")]
    DomainExists(String),
    #[error("zone `{zone}` still {what}; move them away first")]
    ZoneBusy { zone: String, what: String },
    #[error("drain {0} is running; pause it before moving the dial by hand, or abort it")]
    DrainRunning(u64),
    #[error("drain {0} is still active (running or paused); abort it or let it finish first")]
    DrainActive(u64),
    #[error("there is no drain {0}")]
    DrainNotFound(u64),
    #[error("drain {id} is {state}; it can no longer {action}")]
    DrainFinished { id: u64, state: &'static str, action: &'static str },
    #[error("drain {id} is {state}, so it cannot {action}")]
    DrainNotRunning { id: u64, state: &'static str, action: &'static str },
    #[error("drain {id}'s next step is to {expected} blue units, not {got}")]
    DrainStepMismatch { id: u64, expected: u32, got: u32 },
    #[error("invalid drain: {0}")]
    InvalidDrain(String),
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    #[error("plan run {0} is still active; abort it or let it finish first")]
    RunActive(u64),
    #[error("there is no plan `{0}`")]
    PlanNotFound(String),
    #[error("plan `{name}` is at revision {current}, not the expected revision {expected}")]
    PlanRevisionChanged { name: String, expected: u64, current: u64 },
    #[error("there is no plan run {0}")]
    RunNotFound(u64),
    #[error("plan run {id} is {state}, so it cannot {action}")]
    RunState { id: u64, state: &'static str, action: &'static str },
    #[error("plan run {id}'s next command is for step {expected}, not step {got}")]
    RunStepMismatch { id: u64, expected: usize, got: usize },
    #[error("plan run {id}'s next call attempt is {expected}, not {got}")]
    CallAttemptMismatch { id: u64, expected: u32, got: u32 },
    #[error(transparent)]
    Channel(#[from] crate::channel::ChannelError),
    #[error(
        "a loss-less unit move is in progress (freeze, switch, unfreeze); the maps change again once it ends"
    )]
    UnitsChanging,
    #[error("the loss-less unit move cannot {0}")]
    UnitsPhase(&'static str),
    #[error("freeze_window: must be from 1 ms to {max} ms, got {0}", max = crate::drain::MAX_FREEZE_MS)]
    FreezeWindow(u64),
    #[error("invalid hold: {0}")]
    InvalidHold(String),
}
