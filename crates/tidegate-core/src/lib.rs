//! The pure model of tidegate: units, the routing table, the dial, the commands that change it,
//! drains and the MQ lane maths.
//!
//! Architecture invariant: nothing under `core` does I/O, reads a clock, draws random numbers or
//! knows tokio, Rocket, rdkafka or serde. Time and randomness arrive as arguments, so every
//! behaviour here is a function of its inputs and can be tested exhaustively (see its `tests/`).

#![forbid(unsafe_code)]

mod automation;
mod capacity;
mod channel;
mod channel_apply;
mod channel_change;
mod command;
mod dial;
mod domain;
mod drain;
mod flag;
mod global_writer;
mod lanes;
pub mod lease;
mod plan;
mod plan_run;
mod plan_trigger;
mod staged;
mod table;
mod unit;
mod unit_map;
mod write_watch;
mod zone;
mod zone_drain;

pub use automation::{AutoRun, Automation, Caps as AutomationCaps, check_caps};
pub use capacity::{
    Capacity, Gain, Projection, ReceiverHealth, Verdict, ZoneLoad, choose_receivers, judge,
    judge_gains, spread_by_headroom,
};
pub use channel::{
    Channel, ChannelError, ChannelFallback, ChannelSpec, MAX_CHANNEL_NAME_BYTES,
    MAX_CHANNEL_SERVICES, MAX_CHANNEL_USERS, MAX_CHANNELS, routed_map, share_count, share_units,
    valid_name,
};
pub use channel_apply::expired_channels;
pub use channel_change::{ChannelChange, ChannelFreeze, change_freeze};
pub use command::{
    Applied, Audit, Command, CommandError, Envelope, FINISHED_DRAINS_KEPT, FORMAT_LEVEL, Genesis,
    MAX_PINS, MAX_REASON_BYTES, State,
};
pub use dial::{DialError, Share};
pub use drain::{
    CapacityInputs, DEFAULT_FREEZE_MS, Direction, Drain, DrainAction, DrainMode, DrainPlan,
    DrainStatus, FREEZES_KEPT, FreezeBarrier, FreezeRecord, Guard, Inputs, MAX_DRAIN_INTERVAL_MS,
    MAX_FREEZE_MS, OnBreach, Reading, StepConvergence, StepFreeze, counterpart, step_toward,
};
pub use flag::{
    DEFAULT_FLAG_KEY, FlagError, FlagEvaluation, FlagReason, TargetingKey, evaluate_color_flag,
};
pub use lanes::{
    Assignment, AssignmentInput, LaneConfig, LaneError, LaneMember, MAX_LANE_PARTITIONS,
    PartitionOffsets, ZoneFlags, assign, grant, half_lags, hold_unvouched, partition_lag,
};
pub use plan::{
    CheckKind, DryRun, DryRunInputs, DryRunStep, HttpCall, MAX_CALL_RETRIES, MAX_CALL_TIMEOUT_MS,
    MAX_PLAN_STEPS, Plan, PlanMove, PlanStep, Precondition, StepDefaults, StoredPlan, Trigger,
    describe_moves, dry_run, start_preconditions, trigger_zone, validate_plan, validate_trigger,
};
pub use plan_run::{
    CALL_CLAIM_MARGIN_MS, CallAttempt, Decision, FINISHED_RUNS_KEPT, PlanRun, RunReadings,
    RunStatus, StepRecord, ZoneSample, call_backoff_ms,
};
pub use plan_trigger::{
    REFUSAL_KINDS as TRIGGER_REFUSAL_KINDS, TriggerDecision, TriggerInputs,
    decide as decide_trigger,
};
pub use staged::{HeldUnits, MAX_HOLD_MS, Phases, PinChange, StagedStep, UnitsChange};
pub use table::{
    DEFAULT_DOMAIN, Fallback, GlobalWriteCheck, GlobalWriter, MAX_DOMAINS, RoutingTable, Rule,
    TableError, Tag, TagError, WRITE_RETRY_AFTER_MS, WriteCheck,
};
pub use unit::{
    HASH_ALGORITHM, MAX_UNITS, MAX_USER_ID_BYTES, MIN_UNITS, SchemeError, Unit, UnitError,
    UnitMode, UnitScheme, hash_user_id, validate_user_id,
};
pub use unit_map::{Run, UnitMap, UnitMapError, UnitMove, UnitSet, UnitSetError, describe_runs};
pub use write_watch::{WriteObservation, is_dual_owner, newest_after};
pub use zone::{
    MAX_ZONE_NAME_BYTES, MAX_ZONES, ZoneClass, ZoneError, ZoneId, ZoneSpec, Zones,
    validate_zone_name,
};
pub use zone_drain::{
    ReceiverInputs, Receivers, StepInputs, ZoneDrainError, ZoneDrainInputs, ZoneStep,
    decide_zone_step, free_room, next_slice, receiving_zones, split_slice,
};
