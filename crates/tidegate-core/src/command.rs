//! Commands that change the routing state, and the pure function that applies them.
//!
//! Every change is an [`Envelope`]: a command, the version it expects (compare-and-set) and an
//! audit record. [`State::apply`] either returns the next state or says why not, without side
//! effects; the store logs accepted envelopes and rebuilds the state by applying them again.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::automation::Automation;
use super::dial::{DialError, Share, percent_of};
use super::drain::{
    Direction, Drain, DrainMode, DrainPlan, DrainStatus, FREEZES_KEPT, FreezeRecord, MAX_FREEZE_MS,
    OnBreach, StepFreeze, step_toward,
};
use super::plan::{self, Plan, PlanStep, StoredPlan};
use super::plan_run::{
    CallAttempt, FINISHED_RUNS_KEPT, PlanRun, RunStatus, StepRecord, ZoneSample,
};
use super::table::{DEFAULT_DOMAIN, GlobalWriter, RoutingTable};
use super::unit::{UnitError, UnitScheme};
use super::unit_map::{UnitMap, UnitSet, UnitSetError, describe_runs};
use super::validate_user_id;
use super::zone::{ZoneError, ZoneId, ZoneSpec, Zones};

/// How many users may be pinned at once: pins are for testers and incidents, not for routing
/// whole populations (that is what units are for), and the whole table is pushed to every
/// subscriber on every change.
pub const MAX_PINS: usize = 10_000;

/// Longest accepted audit reason, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The first record of every log: the unit scheme is fixed for the life of a log because changing
/// it would move almost every user at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Genesis {
    pub scheme: UnitScheme,
    pub blue_units: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Move the dial of `domain` (`None`: the default domain) to `blue_units` of the table's
    /// units.
    SetBlueUnits {
        blue_units: u32,
        domain: Option<String>,
    },
    /// Force a user to a colour, whatever their unit.
    Pin {
        user_id: String,
        color: ZoneId,
    },
    /// Remove a user's pin.
    Unpin {
        user_id: String,
    },
    /// Start draining (or restoring) a zone.
    StartDrain {
        plan: DrainPlan,
    },
    /// A drain moves the dial one step (decided by `Drain::decide`).
    DrainStep {
        drain: u64,
        blue_units: u32,
    },
    /// A loss-less drain step begins: freeze the units the step to `blue_units` moves (their
    /// writes are refused until the unfreeze); the switch follows as a `DrainStep`.
    DrainFreeze {
        drain: u64,
        blue_units: u32,
    },
    /// The freeze of a drain step ends: after its switch, or `aborted` back without switching
    /// (the freeze was not applied everywhere in time; the drain pauses).
    DrainUnfreeze {
        drain: u64,
        aborted: bool,
    },
    /// A drain's guard held a step: unknown health, or a breach (which may pause or roll back).
    DrainHold {
        drain: u64,
        breach: bool,
        reason: String,
    },
    PauseDrain {
        drain: u64,
    },
    ResumeDrain {
        drain: u64,
    },
    AbortDrain {
        drain: u64,
    },
    RollbackDrain {
        drain: u64,
    },
    /// A settling drain is done: its zone's backlog is consumed (the runner), or an operator
    /// says so.
    CompleteDrain {
        drain: u64,
    },
    /// Stop automatic failover (`stopped: true`), or start and re-arm it (`false`): runs that
    /// triggers started before re-arming no longer count against the caps.
    SetAutomation {
        stopped: bool,
    },
    /// Store (or replace) a prepared plan under its name.
    PutPlan {
        plan: Plan,
    },
    /// Start a run of a stored plan at `revision` (a drill when `drill_hold_ms` is set).
    StartPlanRun {
        plan: String,
        revision: u64,
        drill_hold_ms: Option<u64>,
    },
    /// A run starts its next step (a zone move starts its drain here).
    PlanStepStarted {
        run: u64,
        step: usize,
        drain: Option<DrainPlan>,
        samples: Vec<ZoneSample>,
    },
    /// A run's current step is done (a dial or pin step takes effect here).
    PlanStepDone {
        run: u64,
        step: usize,
        converged_ms: Option<u64>,
        samples: Vec<ZoneSample>,
    },
    /// A run's current step waits (capacity, a precondition, a backlog).
    PlanRunHold {
        run: u64,
        reason: String,
    },
    PausePlanRun {
        run: u64,
    },
    ResumePlanRun {
        run: u64,
    },
    AbortPlanRun {
        run: u64,
    },
    /// Roll a run back: its drain stops and the starting table is restored next.
    RollbackPlanRun {
        run: u64,
    },
    /// A run cannot go on (its drain was aborted or rolled back).
    FailPlanRun {
        run: u64,
        reason: String,
    },
    /// Restore the table a run started from (a rollback, or the end of a drill's hold).
    PlanRestore {
        run: u64,
    },
    /// `caller` (a replica) claims attempt `attempt` of the run's current HTTP step until
    /// `until_ms`. Compare-and-set like every command: of two replicas deciding the same
    /// attempt, one claim is logged and only its replica calls.
    PlanCallStarted {
        run: u64,
        step: usize,
        attempt: u32,
        caller: String,
        until_ms: u64,
    },
    /// The result of a claimed attempt: the HTTP status, or why no answer came. Never a token.
    PlanCallDone {
        run: u64,
        step: usize,
        attempt: u32,
        status: Option<u16>,
        error: Option<String>,
    },
    /// Give explicit unit sets to zones (`PUT /v1/units`): every move or none, in one version.
    MoveUnits {
        moves: Vec<UnitMove>,
    },
    /// Append a zone to the list. It owns nothing until units are moved to it.
    AddZone {
        spec: ZoneSpec,
    },
    /// Retire a zone: refused while it owns units or pins or takes global writes (the service
    /// also refuses while lane consumers run there).
    RetireZone {
        zone: ZoneId,
    },
    /// Choose the zone that takes global writes, and whether global data is read-only.
    SetGlobalWriter {
        zone: Option<ZoneId>,
        read_only: bool,
    },
    /// Add a named routing domain, starting as a copy of the default domain's map.
    AddDomain {
        name: String,
    },
}

/// One move of `PUT /v1/units`: these units now belong to `zone`, in `domain` (`None`: the
/// default domain). Moves of several domains in one command are a linked change: one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitMove {
    pub units: UnitSet,
    pub zone: ZoneId,
    pub domain: Option<String>,
}

/// The newest record format this release reads and writes. A command of a higher
/// [`Command::format_level`] than some live replica supports must not be written: that replica
/// would stop at it (ARCHITECTURE.md, "replicas, upgrades").
pub const FORMAT_LEVEL: u32 = 5;

impl Command {
    /// The record format a command needs every replica to read: 1 for the commands of the first
    /// replicated release, 2 for those added since (the automation switch, plan call-outs), 3
    /// for the N-zone model (unit moves, zone lifecycle, the global writer, a pin to a third zone,
    /// a named domain's dial or drain), 4 for loss-less moves (a drain that freezes), 5 for a
    /// plan whose dial or zone-move step names a domain.
    pub fn format_level(&self) -> u32 {
        match self {
            Command::PutPlan { plan } if plan.steps.iter().any(|s| s.named_domain().is_some()) => 5,
            // Loss-less moves: a frozen table and the phases of a step.
            Command::DrainFreeze { .. } | Command::DrainUnfreeze { .. } => 4,
            Command::StartDrain { plan } if plan.freeze_ms.is_some() => 4,
            Command::PlanStepStarted { drain: Some(plan), .. } if plan.freeze_ms.is_some() => 4,
            Command::MoveUnits { .. }
            | Command::AddZone { .. }
            | Command::RetireZone { .. }
            | Command::SetGlobalWriter { .. }
            | Command::AddDomain { .. } => 3,
            Command::Pin { color, .. } if color.index() >= 2 => 3,
            // A named domain's dial or drain.
            Command::SetBlueUnits { domain: Some(_), .. } => 3,
            Command::StartDrain { plan } if plan.domain.is_some() => 3,
            Command::PlanStepStarted { drain: Some(plan), .. } if plan.domain.is_some() => 3,
            Command::SetAutomation { .. } => 2,
            Command::PlanCallStarted { .. } | Command::PlanCallDone { .. } => 2,
            // A plan with unit moves needs the N-zone model.
            Command::PutPlan { plan }
                if plan.steps.iter().any(|s| matches!(s, PlanStep::MoveUnits { .. })) =>
            {
                3
            }
            // A plan with an HTTP step is a step kind older replicas cannot read.
            Command::PutPlan { plan }
                if plan.steps.iter().any(|s| matches!(s, PlanStep::Http(_))) =>
            {
                2
            }
            _ => 1,
        }
    }

    /// Every value [`Command::action`] can return.
    pub const ACTIONS: &[&str] = &[
        "dial",
        "pin",
        "unpin",
        "drain_start",
        "drain_step",
        "drain_freeze",
        "drain_unfreeze",
        "drain_hold",
        "drain_pause",
        "drain_resume",
        "drain_abort",
        "drain_rollback",
        "drain_complete",
        "plan_put",
        "plan_run_start",
        "plan_step_start",
        "plan_step_done",
        "plan_run_hold",
        "plan_run_pause",
        "plan_run_resume",
        "plan_run_abort",
        "plan_run_rollback",
        "plan_run_fail",
        "plan_run_restore",
        "automation_stop",
        "automation_arm",
        "plan_call_start",
        "plan_call_done",
        "units_move",
        "zone_add",
        "zone_retire",
        "global_writer",
        "domain_add",
    ];

    /// A short name for the audit log and metrics.
    pub fn action(&self) -> &'static str {
        match self {
            Command::SetBlueUnits { .. } => "dial",
            Command::Pin { .. } => "pin",
            Command::Unpin { .. } => "unpin",
            Command::StartDrain { .. } => "drain_start",
            Command::DrainStep { .. } => "drain_step",
            Command::DrainFreeze { .. } => "drain_freeze",
            Command::DrainUnfreeze { .. } => "drain_unfreeze",
            Command::DrainHold { .. } => "drain_hold",
            Command::PauseDrain { .. } => "drain_pause",
            Command::ResumeDrain { .. } => "drain_resume",
            Command::AbortDrain { .. } => "drain_abort",
            Command::RollbackDrain { .. } => "drain_rollback",
            Command::CompleteDrain { .. } => "drain_complete",
            Command::PutPlan { .. } => "plan_put",
            Command::StartPlanRun { .. } => "plan_run_start",
            Command::PlanStepStarted { .. } => "plan_step_start",
            Command::PlanStepDone { .. } => "plan_step_done",
            Command::PlanRunHold { .. } => "plan_run_hold",
            Command::PausePlanRun { .. } => "plan_run_pause",
            Command::ResumePlanRun { .. } => "plan_run_resume",
            Command::AbortPlanRun { .. } => "plan_run_abort",
            Command::RollbackPlanRun { .. } => "plan_run_rollback",
            Command::FailPlanRun { .. } => "plan_run_fail",
            Command::PlanRestore { .. } => "plan_run_restore",
            Command::SetAutomation { stopped: true } => "automation_stop",
            Command::SetAutomation { stopped: false } => "automation_arm",
            Command::PlanCallStarted { .. } => "plan_call_start",
            Command::PlanCallDone { .. } => "plan_call_done",
            Command::MoveUnits { .. } => "units_move",
            Command::AddZone { .. } => "zone_add",
            Command::RetireZone { .. } => "zone_retire",
            Command::SetGlobalWriter { .. } => "global_writer",
            Command::AddDomain { .. } => "domain_add",
        }
    }
}

/// Who asked for a change, when (milliseconds since the Unix epoch, read by the caller) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub by: String,
    pub at_ms: u64,
    pub reason: String,
}

/// A command with the version it expects and its audit record.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    pub expected_version: u64,
    pub command: Command,
    pub audit: Audit,
}

/// What an accepted command did, in words an operator reads in the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub version: u64,
    pub from: String,
    pub to: String,
}

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
}

/// How many finished drains the state remembers (active drains are always kept).
pub const FINISHED_DRAINS_KEPT: usize = 100;

/// The whole replicated state: the routing table and the drains.
///
/// Both halves sit behind `Arc`s so that a snapshot is cheap to clone and a command that only
/// touches a drain does not copy the pins.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    table: Arc<RoutingTable>,
    drains: Arc<BTreeMap<u64, Drain>>,
    next_drain_id: u64,
    plans: Arc<BTreeMap<String, StoredPlan>>,
    runs: Arc<BTreeMap<u64, PlanRun>>,
    next_run_id: u64,
    automation: Automation,
}

impl State {
    /// The state right after the genesis record (version 1).
    pub fn genesis(genesis: Genesis, zones: Zones) -> Result<State, DialError> {
        Share::from_units(u64::from(genesis.blue_units), genesis.scheme.count())?;
        Ok(State {
            table: Arc::new(RoutingTable {
                version: 1,
                scheme: genesis.scheme,
                map: UnitMap::dial(genesis.scheme.count(), genesis.blue_units),
                pins: Arc::new(BTreeMap::new()),
                zones,
                global: GlobalWriter::default(),
                domains: Arc::new(BTreeMap::new()),
                frozen: Arc::new(BTreeMap::new()),
            }),
            drains: Arc::new(BTreeMap::new()),
            next_drain_id: 1,
            plans: Arc::new(BTreeMap::new()),
            runs: Arc::new(BTreeMap::new()),
            next_run_id: 1,
            automation: Automation::default(),
        })
    }

    pub fn table(&self) -> &RoutingTable {
        &self.table
    }

    /// A shared handle to the table, for publishing without a copy.
    pub fn table_arc(&self) -> Arc<RoutingTable> {
        Arc::clone(&self.table)
    }

    /// Every remembered drain, oldest first.
    pub fn drains(&self) -> impl DoubleEndedIterator<Item = &Drain> {
        self.drains.values()
    }

    pub fn drain(&self, id: u64) -> Option<&Drain> {
        self.drains.get(&id)
    }

    /// The running or paused drain, if there is one (there is at most one).
    pub fn active_drain(&self) -> Option<&Drain> {
        self.drains.values().rev().find(|d| d.is_active())
    }

    pub fn version(&self) -> u64 {
        self.table.version
    }

    /// The ID the next drain will get.
    pub fn next_drain_id(&self) -> u64 {
        self.next_drain_id
    }

    /// A state from its parts, as a snapshot of an earlier replay stores them. Only the store
    /// calls this, with parts that a replay through [`State::apply`] produced and a checksum
    /// guarded; the log after the snapshot is then applied as usual.
    pub fn restore(
        table: RoutingTable,
        drains: Vec<Drain>,
        next_drain_id: u64,
        plans: Vec<StoredPlan>,
        runs: Vec<PlanRun>,
        next_run_id: u64,
        automation: Automation,
    ) -> State {
        State {
            table: Arc::new(table),
            drains: Arc::new(drains.into_iter().map(|d| (d.id, d)).collect()),
            next_drain_id,
            plans: Arc::new(plans.into_iter().map(|p| (p.plan.name.clone(), p)).collect()),
            runs: Arc::new(runs.into_iter().map(|r| (r.id, r)).collect()),
            next_run_id,
            automation,
        }
    }

    /// Automatic failover's stop switch and arming time.
    pub fn automation(&self) -> &Automation {
        &self.automation
    }

    /// Every remembered plan run, oldest first.
    pub fn plan_runs(&self) -> impl DoubleEndedIterator<Item = &PlanRun> {
        self.runs.values()
    }

    pub fn plan_run(&self, id: u64) -> Option<&PlanRun> {
        self.runs.get(&id)
    }

    /// The active plan run, if there is one (there is at most one).
    pub fn active_run(&self) -> Option<&PlanRun> {
        self.runs.values().rev().find(|r| r.is_active())
    }

    /// The ID the next plan run will get.
    pub fn next_run_id(&self) -> u64 {
        self.next_run_id
    }

    /// Every stored plan, by name.
    pub fn plans(&self) -> impl Iterator<Item = &StoredPlan> {
        self.plans.values()
    }

    pub fn plan(&self, name: &str) -> Option<&StoredPlan> {
        self.plans.get(name)
    }

    /// Applies an envelope. `Ok(None)` means the command is valid but changes nothing (moving
    /// the dial to where it already is): no version is spent and nothing needs logging.
    pub fn apply(&self, envelope: &Envelope) -> Result<Option<(State, Applied)>, CommandError> {
        let current = self.version();
        if envelope.expected_version != current {
            return Err(CommandError::VersionConflict {
                expected: envelope.expected_version,
                current,
            });
        }
        validate_audit(&envelope.audit)?;
        let at_ms = envelope.audit.at_ms;
        let mut next = self.clone();
        let mut table = (*self.table).clone();
        table.version = current + 1;
        let (from, to) = match &envelope.command {
            Command::SetBlueUnits { blue_units, domain } => {
                if let Some(drain) = self.active_drain().filter(|d| d.status != DrainStatus::Paused)
                {
                    return Err(CommandError::DrainRunning(drain.id));
                }
                if !self.table.zones.is_two() {
                    return Err(CommandError::NeedsTwoZones("the dial"));
                }
                let domain = domain.as_deref();
                let map = self.domain_map(domain)?;
                let share = Share::from_units(u64::from(*blue_units), self.table.units())?;
                if share.blue_units == map.count(ZoneId::BLUE) {
                    return Ok(None);
                }
                let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, share.blue_units);
                table.set_map_of(domain, moved);
                (describe_share_in(&self.table, domain), describe_share_in(&table, domain))
            }
            Command::Pin { user_id, color } => {
                self.live_zone(*color)?;
                validate_user_id(user_id)?;
                // A pinned user must still have a unit (digits mode checks the ID's shape).
                self.table.scheme.unit_of(user_id)?;
                let before = self.table.pins.get(user_id).copied();
                if before == Some(*color) {
                    return Ok(None);
                }
                if before.is_none() && self.table.pins.len() >= MAX_PINS {
                    return Err(CommandError::TooManyPins);
                }
                Arc::make_mut(&mut table.pins).insert(user_id.clone(), *color);
                (
                    describe_pin(&self.table, user_id, before),
                    describe_pin(&self.table, user_id, Some(*color)),
                )
            }
            Command::Unpin { user_id } => {
                let before = Arc::make_mut(&mut table.pins)
                    .remove(user_id)
                    .ok_or_else(|| CommandError::PinNotFound(user_id.clone()))?;
                (
                    describe_pin(&self.table, user_id, Some(before)),
                    describe_pin(&self.table, user_id, None),
                )
            }
            Command::StartDrain { plan } => {
                if let Some(active) = self.active_drain() {
                    return Err(CommandError::DrainActive(active.id));
                }
                if let Some(run) = self.active_run() {
                    return Err(CommandError::RunActive(run.id));
                }
                validate_plan(plan, &self.table)?;
                let drain = Drain {
                    id: self.next_drain_id,
                    plan: plan.clone(),
                    start_blue_units: drain_units(&self.table, plan),
                    status: DrainStatus::Running,
                    direction: Direction::Forward,
                    next_due_ms: at_ms,
                    consecutive_breaches: 0,
                    hold_reason: None,
                    pause_cause: None,
                    steps_done: 0,
                    last_step_version: None,
                    last_step_ms: at_ms,
                    started_ms: at_ms,
                    started_by: envelope.audit.by.clone(),
                    reason: envelope.audit.reason.clone(),
                    finished_ms: None,
                    freeze: None,
                    freezes: Vec::new(),
                };
                let to = describe_plan(&drain, self.table.units());
                next.next_drain_id += 1;
                next.insert_drain(drain);
                ("no active drain".to_owned(), to)
            }
            Command::DrainStep { drain: id, blue_units } => {
                let mut drain = self.running_drain(*id, "step")?.clone();
                let target = drain.heading_for();
                let domain = drain.plan.domain.clone();
                let map = self.domain_map(domain.as_deref())?;
                let now = map.count(ZoneId::BLUE);
                let expected = step_toward(now, target, drain.plan.step_units);
                if now == target || *blue_units != expected {
                    return Err(CommandError::DrainStepMismatch {
                        id: *id,
                        expected,
                        got: *blue_units,
                    });
                }
                // A loss-less step switches only what it froze, and only once.
                let lossless =
                    drain.direction == Direction::Forward && drain.plan.freeze_ms.is_some();
                match &mut drain.freeze {
                    Some(f) if f.switched.is_none() && f.blue_units == *blue_units => {
                        f.switched = Some((current + 1, at_ms));
                    }
                    Some(f) => {
                        return Err(CommandError::InvalidDrain(format!(
                            "drain {id}'s step froze units {} for {} blue units{}; it switches only those, once",
                            f.units,
                            f.blue_units,
                            if f.switched.is_some() { " and has switched them" } else { "" }
                        )));
                    }
                    None if lossless => {
                        return Err(CommandError::InvalidDrain(format!(
                            "drain {id} moves loss-lessly: a step freezes its units (drain_freeze) before it switches them"
                        )));
                    }
                    None => {}
                }
                let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, *blue_units);
                table.set_map_of(domain.as_deref(), moved);
                match drain.direction {
                    Direction::Forward => drain.steps_done += 1,
                    Direction::Back => drain.steps_done = drain.steps_done.saturating_sub(1),
                }
                drain.consecutive_breaches = 0;
                drain.hold_reason = None;
                drain.last_step_version = Some(current + 1);
                drain.last_step_ms = at_ms;
                if drain.freeze.is_some() {
                    // The unfreeze is due as soon as the switch is applied everywhere; the
                    // drain arrives (or waits its interval) from there.
                    drain.next_due_ms = at_ms;
                    drain.hold_reason = Some(format!(
                        "switched; units stay frozen until every live subscriber applies version {}",
                        current + 1
                    ));
                } else {
                    drain.next_due_ms = at_ms.saturating_add(drain.plan.interval_ms);
                    if *blue_units == target {
                        arrive(&mut drain, self.table.units(), at_ms);
                    }
                }
                let from = describe_share_in(&self.table, domain.as_deref());
                let to = format!(
                    "{} ({})",
                    describe_share_in(&table, domain.as_deref()),
                    drain.state_name()
                );
                next.insert_drain(drain);
                (from, to)
            }
            Command::DrainFreeze { drain: id, blue_units } => {
                let mut drain = self.running_drain(*id, "freeze")?.clone();
                if drain.plan.freeze_ms.is_none() || drain.direction != Direction::Forward {
                    return Err(CommandError::InvalidDrain(format!(
                        "drain {id} does not freeze its steps (only forward steps of a drain started with `freeze` do)"
                    )));
                }
                if let Some(f) = &drain.freeze {
                    return Err(CommandError::InvalidDrain(format!(
                        "drain {id} already froze units {} at version {}",
                        f.units, f.frozen_version
                    )));
                }
                let domain = drain.plan.domain.clone();
                let map = self.domain_map(domain.as_deref())?;
                let now = map.count(ZoneId::BLUE);
                let target = drain.heading_for();
                let expected = step_toward(now, target, drain.plan.step_units);
                if now == target || *blue_units != expected {
                    return Err(CommandError::DrainStepMismatch {
                        id: *id,
                        expected,
                        got: *blue_units,
                    });
                }
                let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, *blue_units);
                let Some(units) = UnitSet::from_sorted(&map.diff(&moved)) else {
                    return Err(CommandError::InvalidDrain(format!(
                        "drain {id}'s step to {blue_units} blue units moves no unit"
                    )));
                };
                table.set_frozen(domain.as_deref(), Some(units.clone()));
                drain.consecutive_breaches = 0;
                drain.next_due_ms = at_ms;
                drain.hold_reason = Some(format!(
                    "frozen: units {units} refuse writes until every live subscriber applies version {}",
                    current + 1
                ));
                let from = describe_share_in(&self.table, domain.as_deref());
                let to = format!("{from}; units {units} frozen for the step to {blue_units}");
                drain.freeze = Some(StepFreeze {
                    blue_units: *blue_units,
                    units,
                    frozen_version: current + 1,
                    frozen_ms: at_ms,
                    switched: None,
                });
                next.insert_drain(drain);
                (from, to)
            }
            Command::DrainUnfreeze { drain: id, aborted } => {
                let mut drain = self.running_drain(*id, "unfreeze")?.clone();
                let Some(freeze) = drain.freeze.take() else {
                    return Err(CommandError::InvalidDrain(format!("drain {id} has no freeze")));
                };
                if *aborted != freeze.switched.is_none() {
                    return Err(CommandError::InvalidDrain(format!(
                        "drain {id}'s freeze of units {} {}",
                        freeze.units,
                        if *aborted {
                            "has switched: it can only be unfrozen"
                        } else {
                            "has not switched: it can only be aborted back"
                        }
                    )));
                }
                let domain = drain.plan.domain.clone();
                table.set_frozen(domain.as_deref(), None);
                let from = format!("units {} frozen", freeze.units);
                record_freeze(
                    &mut drain,
                    &freeze,
                    at_ms,
                    aborted.then(|| envelope.audit.reason.clone()),
                );
                if *aborted {
                    drain.status = DrainStatus::Paused;
                    drain.pause_cause = Some("freeze");
                    drain.hold_reason = Some(format!("paused: {}", envelope.audit.reason));
                    drain.next_due_ms = at_ms;
                } else {
                    let switched_ms = freeze.switched.map_or(at_ms, |(_, ms)| ms);
                    drain.hold_reason = None;
                    drain.next_due_ms =
                        switched_ms.saturating_add(drain.plan.interval_ms).max(at_ms);
                    finish_if_arrived(&mut drain, &table, at_ms);
                }
                let to = format!(
                    "units {} writable ({}{})",
                    freeze.units,
                    if *aborted { "aborted back, not switched; " } else { "" },
                    drain.state_name()
                );
                next.insert_drain(drain);
                (from, to)
            }
            Command::DrainHold { drain: id, breach, reason } => {
                let mut drain = self.running_drain(*id, "hold")?.clone();
                let from = drain.state_name().to_owned();
                drain.next_due_ms = at_ms.saturating_add(drain.plan.interval_ms);
                drain.hold_reason = Some(reason.clone());
                if *breach {
                    drain.consecutive_breaches += 1;
                    if drain.consecutive_breaches >= drain.plan.guard.breaches {
                        match drain.plan.guard.on_breach {
                            OnBreach::Pause => {
                                drain.status = DrainStatus::Paused;
                                drain.pause_cause = Some("guard");
                                drain.hold_reason = Some(format!("paused by the guard: {reason}"));
                            }
                            OnBreach::Rollback => {
                                drain.direction = Direction::Back;
                                drain.consecutive_breaches = 0;
                                drain.next_due_ms = at_ms;
                                drain.hold_reason = Some(format!("rolling back: {reason}"));
                                // Before its first step there is nothing to step back: done.
                                finish_if_arrived(&mut drain, &self.table, at_ms);
                            }
                        }
                    }
                }
                let to = format!(
                    "{}: {}",
                    drain.state_name(),
                    drain.hold_reason.as_deref().unwrap_or("")
                );
                next.insert_drain(drain);
                (from, to)
            }
            Command::PauseDrain { drain: id } => {
                let mut drain = self.live_drain(*id, "be paused")?.clone();
                if drain.status == DrainStatus::Paused {
                    return Ok(None);
                }
                drain.status = DrainStatus::Paused;
                // The runner pauses as `drain:<id>` only when a step failed to converge.
                let by_runner = envelope.audit.by.starts_with("drain:");
                drain.pause_cause = Some(if by_runner { "convergence" } else { "operator" });
                drain.hold_reason =
                    Some(format!("paused by {}: {}", envelope.audit.by, envelope.audit.reason));
                next.insert_drain(drain);
                ("running".to_owned(), "paused".to_owned())
            }
            Command::ResumeDrain { drain: id } => {
                let mut drain = self.live_drain(*id, "be resumed")?.clone();
                if drain.status == DrainStatus::Running {
                    return Ok(None);
                }
                drain.status = DrainStatus::Running;
                drain.consecutive_breaches = 0;
                drain.hold_reason = None;
                // Resuming a drain the convergence gate paused is the operator's decision to go
                // on without the stragglers it named: the gate is waived for that step (it
                // used to restart the timeout, so a resume waited a full timeout and paused
                // again). Other pauses keep the step clock: a timeout already spent stays spent.
                if drain.pause_cause == Some("convergence") {
                    drain.last_step_version = None;
                }
                drain.pause_cause = None;
                drain.next_due_ms = at_ms;
                finish_if_arrived(&mut drain, &self.table, at_ms);
                let to = drain.state_name().to_owned();
                next.insert_drain(drain);
                ("paused".to_owned(), to)
            }
            Command::AbortDrain { drain: id } => {
                let mut drain = self.live_drain(*id, "be aborted")?.clone();
                let from = drain.state_name().to_owned();
                drain.status = DrainStatus::Aborted;
                drain.hold_reason = None;
                drain.finished_ms = Some(at_ms);
                next.insert_drain(drain);
                (from, format!("aborted at {}", describe_share(&self.table)))
            }
            Command::CompleteDrain { drain: id } => {
                let mut drain = self.live_drain(*id, "complete")?.clone();
                if drain.status != DrainStatus::Settling {
                    return Err(CommandError::DrainNotRunning {
                        id: *id,
                        state: drain.state_name(),
                        action: "complete (only a settling drain can)",
                    });
                }
                drain.status = DrainStatus::Completed;
                drain.hold_reason = None;
                drain.finished_ms = Some(at_ms);
                next.insert_drain(drain);
                ("settling".to_owned(), "completed".to_owned())
            }
            Command::SetAutomation { stopped } => {
                let before = &self.automation;
                let from = if before.stopped { "automation stopped" } else { "automation on" };
                next.automation = Automation {
                    stopped: *stopped,
                    // Starting (or re-arming) clears the caps' memory; stopping keeps it.
                    armed_ms: if *stopped { before.armed_ms } else { at_ms },
                    changed_by: envelope.audit.by.clone(),
                    changed_ms: at_ms,
                    reason: envelope.audit.reason.clone(),
                };
                let to = if *stopped {
                    "automation stopped".to_owned()
                } else {
                    "automation on, re-armed (earlier automatic runs no longer count)".to_owned()
                };
                (from.to_owned(), to)
            }
            Command::PutPlan { plan } => {
                plan::validate_plan(plan, &self.table.zones, self.table.units())
                    .map_err(CommandError::InvalidPlan)?;
                for (i, step) in plan.steps.iter().enumerate() {
                    if let Some(domain) = step.named_domain()
                        && self.table.map_of(Some(domain)).is_none()
                    {
                        return Err(CommandError::InvalidPlan(format!(
                            "steps[{i}].domain: `{domain}` is not a routing domain (GET /v1/routing lists them)"
                        )));
                    }
                }
                let before = self.plans.get(&plan.name);
                if before.is_some_and(|p| &p.plan == plan) {
                    return Ok(None);
                }
                let revision = before.map_or(1, |p| p.revision + 1);
                let from = match before {
                    Some(p) => format!("plan {} revision {}", plan.name, p.revision),
                    None => format!("no plan {}", plan.name),
                };
                Arc::make_mut(&mut next.plans).insert(
                    plan.name.clone(),
                    StoredPlan {
                        plan: plan.clone(),
                        revision,
                        updated_by: envelope.audit.by.clone(),
                        updated_ms: at_ms,
                        reason: envelope.audit.reason.clone(),
                    },
                );
                let to = format!(
                    "plan {} revision {revision}: {} step(s), {} precondition(s), RTO {} ms",
                    plan.name,
                    plan.steps.len(),
                    plan.preconditions.len(),
                    plan.rto_ms
                );
                (from, to)
            }
            Command::StartPlanRun { .. }
            | Command::PlanStepStarted { .. }
            | Command::PlanStepDone { .. }
            | Command::PlanRunHold { .. }
            | Command::PausePlanRun { .. }
            | Command::ResumePlanRun { .. }
            | Command::AbortPlanRun { .. }
            | Command::RollbackPlanRun { .. }
            | Command::FailPlanRun { .. }
            | Command::PlanRestore { .. }
            | Command::PlanCallStarted { .. }
            | Command::PlanCallDone { .. } => {
                match self.apply_run(&envelope.command, &envelope.audit, &mut next, &mut table)? {
                    Some(from_to) => from_to,
                    None => return Ok(None),
                }
            }
            Command::MoveUnits { moves } => {
                if let Some(drain) = self.active_drain().filter(|d| d.status != DrainStatus::Paused)
                {
                    return Err(CommandError::DrainRunning(drain.id));
                }
                if let Some(run) = self.active_run() {
                    return Err(CommandError::RunActive(run.id));
                }
                let (map, domains) = self.moved_maps(moves)?;
                if map == self.table.map && domains == *self.table.domains {
                    return Ok(None);
                }
                let from = describe_all_maps(&self.table);
                table.map = map;
                table.domains = Arc::new(domains);
                (from, describe_all_maps(&table))
            }
            Command::AddZone { spec } => {
                if spec.retired {
                    return Err(CommandError::InvalidMove("a new zone cannot be retired".into()));
                }
                let (zones, id) = self.table.zones.with(spec.clone())?;
                table.zones = zones;
                (
                    format!("{} zone(s)", self.table.zones.len()),
                    format!(
                        "zone {} added as index {} (lane {}, {})",
                        spec.name,
                        id.0,
                        spec.lane,
                        spec.class.as_str()
                    ),
                )
            }
            Command::RetireZone { zone } => {
                let spec = self.live_zone(*zone)?;
                let busy =
                    |what: String| Err(CommandError::ZoneBusy { zone: spec.name.clone(), what });
                let owned = self.table.map.count(*zone)
                    + self.table.domains.values().map(|m| m.count(*zone)).sum::<u32>();
                if owned > 0 {
                    return busy(format!("owns {owned} unit(s)"));
                }
                let pinned = self.table.pins.values().filter(|z| **z == *zone).count();
                if pinned > 0 {
                    return busy(format!("has {pinned} pinned user(s)"));
                }
                if self.table.global.zone == Some(*zone) {
                    return busy("takes global writes".to_owned());
                }
                table.zones = self.table.zones.retiring(*zone);
                (format!("zone {} live", spec.name), format!("zone {} retired", spec.name))
            }
            Command::AddDomain { name } => {
                if name == super::table::DEFAULT_DOMAIN || self.table.domains.contains_key(name) {
                    return Err(CommandError::DomainExists(name.clone()));
                }
                super::zone::validate_zone_name(name)?;
                if self.table.domains.len() >= super::table::MAX_DOMAINS {
                    return Err(CommandError::InvalidMove(format!(
                        "a table holds at most {} named domains",
                        super::table::MAX_DOMAINS
                    )));
                }
                Arc::make_mut(&mut table.domains).insert(name.clone(), self.table.map.clone());
                (
                    format!("{} named domain(s)", self.table.domains.len()),
                    format!("domain {name} added as a copy of the default domain"),
                )
            }
            Command::SetGlobalWriter { zone, read_only } => {
                if let Some(zone) = zone {
                    self.live_zone(*zone)?;
                }
                let next_global = GlobalWriter { zone: *zone, read_only: *read_only };
                if next_global == self.table.global {
                    return Ok(None);
                }
                table.global = next_global;
                (describe_global(&self.table), describe_global(&table))
            }
            Command::RollbackDrain { drain: id } => {
                let mut drain = self.live_drain(*id, "roll back")?.clone();
                if drain.direction == Direction::Back && drain.status == DrainStatus::Running {
                    return Ok(None);
                }
                let from = drain.state_name().to_owned();
                drain.direction = Direction::Back;
                drain.status = DrainStatus::Running;
                drain.consecutive_breaches = 0;
                drain.hold_reason = None;
                drain.pause_cause = None;
                drain.next_due_ms = at_ms;
                finish_if_arrived(&mut drain, &self.table, at_ms);
                let to = drain.state_name().to_owned();
                next.insert_drain(drain);
                (from, to)
            }
        };
        thaw_orphans(&mut next, &mut table, at_ms, envelope.command.action());
        next.table = Arc::new(table);
        let applied = Applied { version: current + 1, from, to };
        Ok(Some((next, applied)))
    }

    /// Applies a plan-run command to `next` and `table` (the table of the next version).
    /// `Ok(None)`: valid, changes nothing.
    fn apply_run(
        &self,
        command: &Command,
        audit: &Audit,
        next: &mut State,
        table: &mut RoutingTable,
    ) -> Result<Option<(String, String)>, CommandError> {
        let at_ms = audit.at_ms;
        let units = self.table.units();
        let done = |next: &mut State, run: PlanRun, from: String, to: String| {
            next.insert_run(run);
            Ok(Some((from, to)))
        };
        match command {
            Command::StartPlanRun { plan, revision, drill_hold_ms } => {
                if let Some(active) = self.active_run() {
                    return Err(CommandError::RunActive(active.id));
                }
                if let Some(active) = self.active_drain() {
                    return Err(CommandError::DrainActive(active.id));
                }
                let stored =
                    self.plans.get(plan).ok_or_else(|| CommandError::PlanNotFound(plan.clone()))?;
                if drill_hold_ms.is_some()
                    && stored.plan.steps.iter().any(|s| matches!(s, PlanStep::MoveUnits { .. }))
                {
                    return Err(CommandError::InvalidPlan(
                        "a drill restores the table it started from, and a plan with move_units steps cannot be restored yet; run it, or drill a plan without them".into(),
                    ));
                }
                if stored.revision != *revision {
                    return Err(CommandError::PlanRevisionChanged {
                        name: plan.clone(),
                        expected: *revision,
                        current: stored.revision,
                    });
                }
                let run = PlanRun {
                    id: self.next_run_id,
                    plan: stored.plan.clone(),
                    revision: *revision,
                    drill_hold_ms: *drill_hold_ms,
                    start_blue_units: self.table.blue_units(),
                    start_domain_blue_units: stored
                        .plan
                        .steps
                        .iter()
                        .filter_map(PlanStep::named_domain)
                        .filter_map(|d| Some((d.to_owned(), self.table.blue_units_in(Some(d))?)))
                        .collect(),
                    status: RunStatus::Running,
                    step: 0,
                    in_step: false,
                    drain: None,
                    hold_reason: None,
                    hold_until_ms: None,
                    rolling_back: false,
                    pins_before: Vec::new(),
                    steps: Vec::new(),
                    restore: None,
                    started_ms: at_ms,
                    started_by: audit.by.clone(),
                    reason: audit.reason.clone(),
                    switched_ms: None,
                    finished_ms: None,
                    fail_reason: None,
                };
                next.next_run_id += 1;
                let kind = if drill_hold_ms.is_some() { "drill" } else { "run" };
                let to = format!(
                    "plan {plan} revision {revision}: {kind} {} started at {}",
                    run.id,
                    describe_share(&self.table)
                );
                done(next, run, "no active plan run".to_owned(), to)
            }
            Command::PlanStepStarted { run: id, step, drain, samples } => {
                let mut run = self.run_in(*id, &[RunStatus::Running], "start a step")?.clone();
                if run.in_step || *step != run.step || *step >= run.plan.steps.len() {
                    let expected = if run.in_step { run.step + 1 } else { run.step };
                    return Err(CommandError::RunStepMismatch { id: *id, expected, got: *step });
                }
                let mut drain_id = None;
                if let Some(plan) = drain {
                    let PlanStep::MoveZone { zone, mode, .. } = &run.plan.steps[*step] else {
                        return Err(CommandError::InvalidDrain(
                            "only a zone move step starts a drain".to_owned(),
                        ));
                    };
                    if &plan.zone != zone || plan.mode != *mode {
                        return Err(CommandError::InvalidDrain(format!(
                            "step {step} moves {zone}, not {}",
                            plan.zone
                        )));
                    }
                    if let Some(active) = self.active_drain() {
                        return Err(CommandError::DrainActive(active.id));
                    }
                    validate_plan(plan, &self.table)?;
                    let d = Drain {
                        id: self.next_drain_id,
                        plan: plan.clone(),
                        start_blue_units: drain_units(&self.table, plan),
                        status: DrainStatus::Running,
                        direction: Direction::Forward,
                        next_due_ms: at_ms,
                        consecutive_breaches: 0,
                        hold_reason: None,
                        pause_cause: None,
                        steps_done: 0,
                        last_step_version: None,
                        last_step_ms: at_ms,
                        started_ms: at_ms,
                        started_by: audit.by.clone(),
                        reason: audit.reason.clone(),
                        finished_ms: None,
                        freeze: None,
                        freezes: Vec::new(),
                    };
                    drain_id = Some(d.id);
                    next.next_drain_id += 1;
                    next.insert_drain(d);
                }
                run.in_step = true;
                run.drain = drain_id;
                run.hold_reason = None;
                run.steps.push(StepRecord {
                    index: *step,
                    started_ms: at_ms,
                    converged_ms: None,
                    done_ms: None,
                    drain: drain_id,
                    samples: vec![(at_ms, samples.clone())],
                    calls: Vec::new(),
                });
                let to = match drain_id {
                    Some(d) => format!(
                        "step {} of {}: {} (drain {d})",
                        step + 1,
                        run.plan.steps.len(),
                        run.step_label(*step)
                    ),
                    None => format!(
                        "step {} of {}: {}",
                        step + 1,
                        run.plan.steps.len(),
                        run.step_label(*step)
                    ),
                };
                let from = format!("plan run {id} between steps");
                done(next, run, from, to)
            }
            Command::PlanStepDone { run: id, step, converged_ms, samples } => {
                let mut run = self.run_in(*id, &[RunStatus::Running], "finish a step")?.clone();
                if !run.in_step || *step != run.step {
                    let expected = run.step;
                    return Err(CommandError::RunStepMismatch { id: *id, expected, got: *step });
                }
                let mut from = format!("step {} of {}", step + 1, run.plan.steps.len());
                match &run.plan.steps[*step] {
                    PlanStep::MoveZone { .. } => {
                        if let Some(d) = run.drain.and_then(|d| self.drains.get(&d))
                            && d.status != DrainStatus::Completed
                        {
                            return Err(CommandError::RunState {
                                id: *id,
                                state: "waiting for its drain",
                                action: "finish the step before drain completes",
                            });
                        }
                    }
                    s @ PlanStep::Dial { .. } => {
                        if let Some(drain) = self.active_drain() {
                            return Err(CommandError::DrainActive(drain.id));
                        }
                        let domain = s.named_domain();
                        let map = self.domain_map(domain)?;
                        let to = PlanRun::step_target(
                            s,
                            &self.table.zones,
                            units,
                            map.count(ZoneId::BLUE),
                        );
                        from = describe_share_in(&self.table, domain);
                        let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, to);
                        table.set_map_of(domain, moved);
                    }
                    PlanStep::MoveUnits { moves } => {
                        if let Some(drain) = self.active_drain() {
                            return Err(CommandError::DrainActive(drain.id));
                        }
                        let mut resolved = Vec::with_capacity(moves.len());
                        for m in moves {
                            let zone = self
                                .table
                                .zones
                                .color_in(&m.zone)
                                .ok_or_else(|| ZoneError::Unknown(m.zone.clone()))?;
                            resolved.push(UnitMove {
                                units: m.units.clone(),
                                zone,
                                domain: m.domain.clone(),
                            });
                        }
                        let (map, domains) = self.moved_maps(&resolved)?;
                        from = describe_all_maps(&self.table);
                        table.map = map;
                        table.domains = Arc::new(domains);
                    }
                    PlanStep::Pin { user_id, color } => {
                        validate_user_id(user_id)?;
                        self.table.scheme.unit_of(user_id)?;
                        let before = self.table.pins.get(user_id).copied();
                        if before.is_none() && self.table.pins.len() >= MAX_PINS {
                            return Err(CommandError::TooManyPins);
                        }
                        run.pins_before.push((user_id.clone(), before));
                        Arc::make_mut(&mut table.pins).insert(user_id.clone(), *color);
                    }
                    PlanStep::Unpin { user_id } => {
                        // Unpinning a user who is not pinned is already done.
                        if let Some(before) = Arc::make_mut(&mut table.pins).remove(user_id) {
                            run.pins_before.push((user_id.clone(), Some(before)));
                        }
                    }
                    PlanStep::Http(_) => {
                        if !run.current_calls().last().is_some_and(|a| a.ok) {
                            return Err(CommandError::RunState {
                                id: *id,
                                state: "waiting for its call",
                                action: "finish the step before a call succeeded",
                            });
                        }
                    }
                    PlanStep::WaitConsumed { .. } | PlanStep::WaitPrecondition { .. } => {}
                }
                if let Some(record) = run.steps.last_mut() {
                    record.done_ms = Some(at_ms);
                    // Only a measured convergence time: a report used to show the drain's last
                    // step (or the step's end) as "converged" when nobody measured it, and said
                    // "converged +9.1 s, RTO met" while the last client acked at +12.1 s.
                    record.converged_ms = *converged_ms;
                    record.samples.push((at_ms, samples.clone()));
                }
                run.in_step = false;
                run.drain = None;
                run.hold_reason = None;
                run.step += 1;
                if run.step == run.plan.steps.len() {
                    run.switched_ms = Some(at_ms);
                    match run.drill_hold_ms {
                        Some(hold) => {
                            run.status = RunStatus::Holding;
                            run.hold_until_ms = Some(at_ms.saturating_add(hold));
                        }
                        None => {
                            run.status = RunStatus::Completed;
                            run.finished_ms = Some(at_ms);
                        }
                    }
                }
                let mut to = format!("done: {}", run.step_label(*step));
                if table.map != self.table.map {
                    to = format!("{to}; {}", describe_share(table));
                }
                if !run.is_active() || run.status == RunStatus::Holding {
                    to = format!("{to}; run {}", run.status.as_str());
                }
                done(next, run, from, to)
            }
            Command::PlanRunHold { run: id, reason } => {
                // A holding drill holds its restore too (the zone it restores into is failing).
                let mut run =
                    self.run_in(*id, &[RunStatus::Running, RunStatus::Holding], "hold")?.clone();
                let from = run.hold_reason.clone().unwrap_or_else(|| "not holding".to_owned());
                run.hold_reason = Some(reason.clone());
                done(next, run, from, reason.clone())
            }
            Command::PausePlanRun { run: id } => {
                let mut run = self
                    .run_in(*id, &[RunStatus::Running, RunStatus::Paused], "be paused")?
                    .clone();
                if run.status == RunStatus::Paused {
                    return Ok(None);
                }
                run.status = RunStatus::Paused;
                run.hold_reason = Some(format!("paused by {}: {}", audit.by, audit.reason));
                if let Some(mut d) =
                    self.linked_drain(&run).filter(|d| d.status == DrainStatus::Running).cloned()
                {
                    d.status = DrainStatus::Paused;
                    d.pause_cause = Some("operator");
                    d.hold_reason = Some(format!("paused with plan run {id} by {}", audit.by));
                    next.insert_drain(d);
                }
                done(next, run, "running".to_owned(), "paused".to_owned())
            }
            Command::ResumePlanRun { run: id } => {
                let mut run = self
                    .run_in(*id, &[RunStatus::Running, RunStatus::Paused], "be resumed")?
                    .clone();
                if run.status == RunStatus::Running {
                    return Ok(None);
                }
                run.status = RunStatus::Running;
                run.hold_reason = None;
                if let Some(mut d) =
                    self.linked_drain(&run).filter(|d| d.status == DrainStatus::Paused).cloned()
                {
                    d.status = DrainStatus::Running;
                    d.consecutive_breaches = 0;
                    d.hold_reason = None;
                    d.pause_cause = None;
                    d.next_due_ms = at_ms;
                    d.last_step_ms = at_ms;
                    finish_if_arrived(&mut d, &self.table, at_ms);
                    next.insert_drain(d);
                }
                done(next, run, "paused".to_owned(), "running".to_owned())
            }
            Command::AbortPlanRun { run: id } => {
                let mut run = self.live_run(*id, "be aborted")?.clone();
                let from = run.status.as_str().to_owned();
                self.stop_linked_drain(&run, next, at_ms);
                run.status = RunStatus::Aborted;
                run.hold_reason = None;
                run.finished_ms = Some(at_ms);
                done(next, run, from, format!("aborted at {}", describe_share(&self.table)))
            }
            Command::FailPlanRun { run: id, reason } => {
                let mut run = self.live_run(*id, "fail")?.clone();
                let from = run.status.as_str().to_owned();
                self.stop_linked_drain(&run, next, at_ms);
                run.status = RunStatus::Failed;
                run.fail_reason = Some(reason.clone());
                run.hold_reason = None;
                run.finished_ms = Some(at_ms);
                done(next, run, from, format!("failed: {reason}"))
            }
            Command::RollbackPlanRun { run: id } => {
                let mut run = self.live_run(*id, "roll back")?.clone();
                if run.status == RunStatus::Restoring {
                    return Ok(None);
                }
                let from = run.status.as_str().to_owned();
                self.stop_linked_drain(&run, next, at_ms);
                run.status = RunStatus::Restoring;
                run.rolling_back = true;
                run.hold_reason = Some(format!("rolling back: {}", audit.reason));
                done(next, run, from, "restoring the starting table".to_owned())
            }
            Command::PlanRestore { run: id } => {
                let mut run = self
                    .run_in(*id, &[RunStatus::Restoring, RunStatus::Holding], "restore")?
                    .clone();
                if run.status == RunStatus::Holding && at_ms < run.hold_until_ms.unwrap_or(0) {
                    return Err(CommandError::RunState {
                        id: *id,
                        state: "holding",
                        action: "restore before its drill hold is over",
                    });
                }
                if let Some(drain) = self.active_drain() {
                    return Err(CommandError::DrainActive(drain.id));
                }
                let from = describe_share(&self.table);
                table.map = table.map.set_count(ZoneId::BLUE, ZoneId::GREEN, run.start_blue_units);
                for (domain, blue) in &run.start_domain_blue_units {
                    if let Some(map) = table.map_of(Some(domain)) {
                        let restored = map.set_count(ZoneId::BLUE, ZoneId::GREEN, *blue);
                        table.set_map_of(Some(domain), restored);
                    }
                }
                let pins = Arc::make_mut(&mut table.pins);
                for (user, before) in run.pins_before.iter().rev() {
                    match before {
                        Some(color) => pins.insert(user.clone(), *color),
                        None => pins.remove(user),
                    };
                }
                run.restore = Some(StepRecord {
                    index: run.plan.steps.len(),
                    started_ms: at_ms,
                    converged_ms: Some(at_ms),
                    done_ms: Some(at_ms),
                    drain: None,
                    samples: Vec::new(),
                    calls: Vec::new(),
                });
                run.status =
                    if run.rolling_back { RunStatus::RolledBack } else { RunStatus::Completed };
                run.hold_reason = None;
                run.finished_ms = Some(at_ms);
                let to = format!("{} (run {})", describe_share(table), run.status.as_str());
                done(next, run, from, to)
            }
            Command::PlanCallStarted { run: id, step, attempt, caller, until_ms } => {
                let mut run = self.run_in(*id, &[RunStatus::Running], "call out")?.clone();
                if !run.in_step || *step != run.step {
                    let expected = run.step;
                    return Err(CommandError::RunStepMismatch { id: *id, expected, got: *step });
                }
                let Some(PlanStep::Http(call)) = run.plan.steps.get(*step).cloned() else {
                    return Err(CommandError::RunState {
                        id: *id,
                        state: "not at an HTTP step",
                        action: "call out",
                    });
                };
                let calls = run.current_calls();
                let expected = calls.len() as u32 + 1;
                let busy = calls.last().map(|a| {
                    if a.ok {
                        "its call already succeeded"
                    } else if a.done_ms.is_none() && at_ms < a.until_ms {
                        "an attempt's claim is still live"
                    } else {
                        ""
                    }
                });
                if let Some(state) = busy.filter(|b| !b.is_empty()) {
                    return Err(CommandError::RunState { id: *id, state, action: "claim a call" });
                }
                if *attempt != expected {
                    return Err(CommandError::CallAttemptMismatch {
                        id: *id,
                        expected,
                        got: *attempt,
                    });
                }
                if *attempt > call.retries + 1 {
                    return Err(CommandError::RunState {
                        id: *id,
                        state: "out of retries",
                        action: "call again",
                    });
                }
                if caller.trim().is_empty() || *until_ms <= at_ms {
                    return Err(CommandError::InvalidPlan(
                        "a call's claim names its caller and ends after it is made".to_owned(),
                    ));
                }
                let to = format!(
                    "calling `{}` ({} {}), attempt {attempt} of {}, claimed by {caller} for {} ms",
                    call.name,
                    call.method,
                    call.url,
                    call.retries + 1,
                    until_ms - at_ms
                );
                if let Some(record) = run.steps.last_mut() {
                    record.calls.push(CallAttempt {
                        attempt: *attempt,
                        caller: caller.clone(),
                        claimed_ms: at_ms,
                        until_ms: *until_ms,
                        done_ms: None,
                        status: None,
                        error: None,
                        ok: false,
                    });
                }
                let from = run.hold_reason.clone().unwrap_or_else(|| "not calling".to_owned());
                run.hold_reason = Some(to.clone());
                done(next, run, from, to)
            }
            Command::PlanCallDone { run: id, step, attempt, status, error } => {
                // Recorded for any run whose attempt is open, even one aborted meanwhile: the
                // call happened, and the audit says what answered.
                let mut run = self.runs.get(id).ok_or(CommandError::RunNotFound(*id))?.clone();
                let Some(PlanStep::Http(call)) = run.plan.steps.get(*step).cloned() else {
                    return Err(CommandError::RunState {
                        id: *id,
                        state: "not at an HTTP step",
                        action: "record a call",
                    });
                };
                let active = run.is_active();
                let Some(record) = run.steps.last_mut().filter(|r| r.index == *step) else {
                    return Err(CommandError::RunStepMismatch {
                        id: *id,
                        expected: run.step,
                        got: *step,
                    });
                };
                let open = record.calls.len() as u32;
                let Some(a) = record
                    .calls
                    .last_mut()
                    .filter(|a| a.attempt == *attempt && a.done_ms.is_none())
                else {
                    return Err(CommandError::CallAttemptMismatch {
                        id: *id,
                        expected: open,
                        got: *attempt,
                    });
                };
                a.done_ms = Some(at_ms);
                a.status = *status;
                a.error = error.clone();
                a.ok = status.is_some_and(|s| call.accepts(s));
                let outcome = a.outcome();
                let ok = a.ok;
                let elapsed = at_ms.saturating_sub(a.claimed_ms);
                let total = call.retries + 1;
                let to = if ok {
                    format!(
                        "call `{}` attempt {attempt} of {total} answered {outcome} after {elapsed} ms",
                        call.name
                    )
                } else if *attempt < total {
                    format!(
                        "call `{}` attempt {attempt} of {total} failed ({outcome}, expecting {}); \
                         retrying in {} ms",
                        call.name,
                        call.expects(),
                        super::plan_run::call_backoff_ms(*attempt)
                    )
                } else {
                    format!(
                        "call `{}` attempt {attempt} of {total} failed ({outcome}, expecting {}); \
                         no retries left",
                        call.name,
                        call.expects()
                    )
                };
                let from = format!("calling `{}`, attempt {attempt}", call.name);
                if active {
                    run.hold_reason = (!ok).then(|| to.clone());
                }
                done(next, run, from, to)
            }
            _ => Ok(None),
        }
    }

    fn linked_drain(&self, run: &PlanRun) -> Option<&Drain> {
        run.drain.and_then(|d| self.drains.get(&d)).filter(|d| d.is_active())
    }

    /// Aborts the run's active drain (an aborted, failed or rolled-back run stops moving users).
    fn stop_linked_drain(&self, run: &PlanRun, next: &mut State, at_ms: u64) {
        if let Some(mut d) = self.linked_drain(run).cloned() {
            d.status = DrainStatus::Aborted;
            d.hold_reason = Some(format!("stopped with plan run {}", run.id));
            d.finished_ms = Some(at_ms);
            next.insert_drain(d);
        }
    }

    fn live_run(&self, id: u64, action: &'static str) -> Result<&PlanRun, CommandError> {
        let run = self.runs.get(&id).ok_or(CommandError::RunNotFound(id))?;
        if !run.is_active() {
            return Err(CommandError::RunState { id, state: run.status.as_str(), action });
        }
        Ok(run)
    }

    fn run_in(
        &self,
        id: u64,
        statuses: &[RunStatus],
        action: &'static str,
    ) -> Result<&PlanRun, CommandError> {
        let run = self.runs.get(&id).ok_or(CommandError::RunNotFound(id))?;
        if !statuses.contains(&run.status) {
            return Err(CommandError::RunState { id, state: run.status.as_str(), action });
        }
        Ok(run)
    }

    fn insert_run(&mut self, run: PlanRun) {
        let runs = Arc::make_mut(&mut self.runs);
        runs.insert(run.id, run);
        while runs.values().filter(|r| !r.is_active()).count() > FINISHED_RUNS_KEPT {
            match runs.values().find(|r| !r.is_active()).map(|r| r.id) {
                Some(id) => runs.remove(&id),
                None => break,
            };
        }
    }

    fn insert_drain(&mut self, drain: Drain) {
        let drains = Arc::make_mut(&mut self.drains);
        drains.insert(drain.id, drain);
        // Forget the oldest finished drains beyond the limit; their history stays in the log.
        while drains.values().filter(|d| !d.is_active()).count() > FINISHED_DRAINS_KEPT {
            let oldest = drains.values().find(|d| !d.is_active()).map(|d| d.id);
            match oldest {
                Some(id) => drains.remove(&id),
                None => break,
            };
        }
    }

    /// A drain that exists and is not finished.
    fn live_drain(&self, id: u64, action: &'static str) -> Result<&Drain, CommandError> {
        let drain = self.drains.get(&id).ok_or(CommandError::DrainNotFound(id))?;
        if !drain.is_active() {
            return Err(CommandError::DrainFinished { id, state: drain.state_name(), action });
        }
        Ok(drain)
    }

    /// A drain that is running (not paused, not finished).
    fn running_drain(&self, id: u64, action: &'static str) -> Result<&Drain, CommandError> {
        let drain = self.live_drain(id, action)?;
        if drain.status != DrainStatus::Running {
            return Err(CommandError::DrainNotRunning { id, state: drain.state_name(), action });
        }
        Ok(drain)
    }

    /// A zone of the table that is not retired.
    /// The unit map of `domain` (`None`: the default domain), or `unknown_domain`.
    fn domain_map(&self, domain: Option<&str>) -> Result<&UnitMap, CommandError> {
        self.table
            .map_of(domain)
            .ok_or_else(|| CommandError::UnknownDomain(domain.unwrap_or_default().to_owned()))
    }

    fn live_zone(&self, zone: ZoneId) -> Result<&ZoneSpec, CommandError> {
        let spec = self
            .table
            .zones
            .get(zone)
            .ok_or_else(|| ZoneError::Unknown(format!("zone index {}", zone.0)))?;
        if spec.retired {
            return Err(ZoneError::Retired(spec.name.clone()).into());
        }
        Ok(spec)
    }

    /// The default domain's map and the named domains' maps after `moves` (see
    /// [`State::moved_map`]; a unit may be named once per domain).
    pub fn moved_maps(
        &self,
        moves: &[UnitMove],
    ) -> Result<(UnitMap, BTreeMap<String, UnitMap>), CommandError> {
        if moves.is_empty() {
            return Err(CommandError::InvalidMove(
                "`moves` is empty: name at least one unit set".into(),
            ));
        }
        let mut default = Vec::new();
        let mut named: BTreeMap<&str, Vec<UnitMove>> = BTreeMap::new();
        for m in moves {
            match m.domain.as_deref() {
                None | Some(super::table::DEFAULT_DOMAIN) => default.push(m.clone()),
                Some(name) => {
                    if !self.table.domains.contains_key(name) {
                        return Err(CommandError::UnknownDomain(name.to_owned()));
                    }
                    named.entry(name).or_default().push(m.clone());
                }
            }
        }
        let map =
            if default.is_empty() { self.table.map.clone() } else { self.moved_map(&default)? };
        let mut domains = (*self.table.domains).clone();
        for (name, moves) in named {
            let base = &self.table.domains[name];
            let moved = self.moved_map_from(base, &moves)?;
            domains.insert(name.to_owned(), moved);
        }
        Ok((map, domains))
    }

    /// The map after `moves`, checked: at least one move, each to a live zone, no unit named
    /// twice, every unit inside the table.
    pub fn moved_map(&self, moves: &[UnitMove]) -> Result<UnitMap, CommandError> {
        self.moved_map_from(&self.table.map, moves)
    }

    fn moved_map_from(&self, base: &UnitMap, moves: &[UnitMove]) -> Result<UnitMap, CommandError> {
        if moves.is_empty() {
            return Err(CommandError::InvalidMove(
                "`moves` is empty: name at least one unit set".into(),
            ));
        }
        let units = self.table.units();
        let mut map = base.clone();
        for (i, m) in moves.iter().enumerate() {
            self.live_zone(m.zone)?;
            if let Some(&(_, hi)) = m.units.ranges().last()
                && hi >= units
            {
                return Err(UnitSetError::OutOfRange { unit: hi, units }.into());
            }
            for earlier in &moves[..i] {
                if let Some(unit) = earlier.units.overlaps(&m.units) {
                    return Err(CommandError::InvalidMove(format!(
                        "moves[{i}] names unit {unit}, which an earlier move also names"
                    )));
                }
            }
            map = map.moved(&m.units, m.zone);
        }
        Ok(map)
    }

    /// The same state with its blue and green zones named by configuration (a file log's
    /// first two zone names are configuration, not logged state). Later zones keep their names.
    pub fn with_zones(mut self, zones: Zones) -> State {
        let renamed = self
            .table
            .zones
            .renamed_colors(zones.zone_of(ZoneId::BLUE), zones.zone_of(ZoneId::GREEN));
        self.table = Arc::new((*self.table).clone().with_zones(renamed));
        self
    }
}

/// A drain already at its destination when resumed or rolled back arrives at once.
/// Keeps a finished freeze in the drain's report (the newest [`FREEZES_KEPT`]).
fn record_freeze(drain: &mut Drain, freeze: &StepFreeze, at_ms: u64, note: Option<String>) {
    drain.freezes.push(FreezeRecord {
        step: drain.steps_done.max(1),
        units: freeze.units.len(),
        window_ms: at_ms.saturating_sub(freeze.frozen_ms),
        switch_after_ms: freeze.switched.map(|(_, ms)| ms.saturating_sub(freeze.frozen_ms)),
        note,
    });
    if drain.freezes.len() > FREEZES_KEPT {
        let excess = drain.freezes.len() - FREEZES_KEPT;
        drain.freezes.drain(..excess);
    }
}

/// Architecture invariant: units are frozen only while a running drain holds their freeze. A
/// command that pauses, aborts, rolls back or otherwise stops a drain in the middle of a freeze
/// (an operator's, or a plan run's) thaws its units here, in the same version, and the drain's
/// report says which command ended it; no path leaves units frozen with nobody to thaw them.
fn thaw_orphans(next: &mut State, table: &mut RoutingTable, at_ms: u64, action: &str) {
    let stopped: Vec<Drain> = next
        .drains
        .values()
        .filter(|d| {
            d.freeze.is_some()
                && (d.status != DrainStatus::Running || d.direction == Direction::Back)
        })
        .cloned()
        .collect();
    for mut drain in stopped {
        if let Some(freeze) = drain.freeze.take() {
            let note = format!(
                "thawed by {action} before {}",
                if freeze.switched.is_some() { "its unfreeze" } else { "its switch" }
            );
            record_freeze(&mut drain, &freeze, at_ms, Some(note));
        }
        next.insert_drain(drain);
    }
    let held: Vec<String> = next
        .drains
        .values()
        .filter_map(|d| d.freeze.as_ref().map(|_| d.plan.domain.clone()))
        .map(|d| d.unwrap_or_else(|| DEFAULT_DOMAIN.to_owned()))
        .collect();
    let orphans: Vec<String> =
        table.frozen().keys().filter(|d| !held.contains(d)).cloned().collect();
    for domain in orphans {
        table.set_frozen(Some(&domain), None);
    }
}

fn finish_if_arrived(drain: &mut Drain, table: &RoutingTable, at_ms: u64) {
    if drain_units(table, &drain.plan) == drain.heading_for() {
        arrive(drain, table.units(), at_ms);
    }
}

/// Blue units in the domain a drain moves (a drain's domain exists: `validate_plan` checked it,
/// and domains are never removed).
fn drain_units(table: &RoutingTable, plan: &DrainPlan) -> u32 {
    table.blue_units_in(plan.domain.as_deref()).unwrap_or_else(|| table.blue_units())
}

/// The drain reached where it was heading: rolled back, completed, or, when it emptied its
/// zone, settling until the zone's message backlog is consumed.
fn arrive(drain: &mut Drain, units: u32, at_ms: u64) {
    drain.status = match drain.direction {
        Direction::Back => DrainStatus::RolledBack,
        // Lanes follow the default domain: only its drain waits for the zone's backlog (a named
        // domain's users leaving a zone empty no lane half).
        Direction::Forward if drain.empties_zone(units) && drain.plan.domain.is_none() => {
            DrainStatus::Settling
        }
        Direction::Forward => DrainStatus::Completed,
    };
    if drain.status == DrainStatus::Settling {
        drain.hold_reason = Some(format!(
            "settling: waiting for {}'s message backlog to be consumed",
            drain.plan.zone
        ));
    } else {
        drain.finished_ms = Some(at_ms);
    }
}

fn validate_plan(plan: &DrainPlan, table: &RoutingTable) -> Result<(), CommandError> {
    let invalid = |why: String| Err(CommandError::InvalidDrain(why));
    if !table.zones.is_two() {
        return Err(CommandError::NeedsTwoZones("a drain"));
    }
    if table.zones.color_in(&plan.zone) != Some(plan.color) || !table.zones.contains(plan.color) {
        return invalid(format!(
            "zone `{}` does not run the {} lane",
            plan.zone,
            table.zones.get(plan.color).map_or("unknown", |z| z.lane.as_str())
        ));
    }
    if plan.target_blue_units > table.units() {
        return invalid(format!("the target is outside 0..={} units", table.units()));
    }
    if table.map_of(plan.domain.as_deref()).is_none() {
        return Err(CommandError::UnknownDomain(plan.domain.clone().unwrap_or_default()));
    }
    if plan.target_blue_units == drain_units(table, plan) {
        return invalid("the zone is already at the target share".to_owned());
    }
    if plan.step_units == 0 {
        return invalid("the step must move at least one unit".to_owned());
    }
    if plan.interval_ms == 0 {
        return invalid("the interval must be longer than zero".to_owned());
    }
    let guard = &plan.guard;
    if !(0.0..=1.0).contains(&guard.max_error_rate) || guard.max_error_rate.is_nan() {
        return invalid("guard.max_error_rate must be between 0 and 1".to_owned());
    }
    if guard.breaches == 0 {
        return invalid("guard.breaches must be at least 1".to_owned());
    }
    if let Some(window) = plan.freeze_ms
        && !(1..=MAX_FREEZE_MS).contains(&window)
    {
        return invalid(format!("the freeze window must be 1 to {MAX_FREEZE_MS} ms"));
    }
    Ok(())
}

fn describe_plan(drain: &Drain, units: u32) -> String {
    let plan = &drain.plan;
    let kind = match plan.mode {
        DrainMode::Maintenance => "drain",
        DrainMode::Evacuate => "evacuation (drain)",
    };
    let domain = plan.domain.as_deref().map(|d| format!(" in domain {d}")).unwrap_or_default();
    format!(
        "{} {} of {}{domain}: {}% -> {}% in steps of {}% every {} ms (guard: error rate <= {}% with >= {} requests, {} breach(es) -> {})",
        kind,
        drain.id,
        plan.zone,
        drain.zone_percent(drain.start_blue_units, units),
        drain.zone_percent(plan.target_blue_units, units),
        percent_of(plan.step_units, units),
        plan.interval_ms,
        plan.guard.max_error_rate * 100.0,
        plan.guard.min_requests,
        plan.guard.breaches,
        plan.guard.on_breach.as_str(),
    )
}

fn validate_audit(audit: &Audit) -> Result<(), CommandError> {
    if audit.by.trim().is_empty() {
        return Err(CommandError::MissingActor);
    }
    if audit.reason.trim().is_empty() {
        return Err(CommandError::MissingReason);
    }
    if audit.reason.len() > MAX_REASON_BYTES {
        return Err(CommandError::ReasonTooLong(audit.reason.len()));
    }
    Ok(())
}

/// [`describe_share`] of one domain's dial, named when it is not the default domain.
fn describe_share_in(table: &RoutingTable, domain: Option<&str>) -> String {
    let named = domain.filter(|d| *d != super::table::DEFAULT_DOMAIN);
    match named.zip(table.view_of(domain)) {
        Some((name, view)) => format!("domain {name}: {}", describe_share(&view)),
        None => describe_share(table),
    }
}

fn describe_share(table: &RoutingTable) -> String {
    if !table.zones.is_two() || !table.map.is_dial_form() {
        return describe_map(table);
    }
    let blue = table.blue_units();
    let units = table.units();
    format!(
        "blue {}% / green {}% ({blue}/{units} units blue)",
        percent_of(blue, units),
        percent_of(units - blue, units)
    )
}

fn describe_global(table: &RoutingTable) -> String {
    let zone = table.global.zone.map_or("no zone", |z| table.zones.zone_of(z));
    let mode = if table.global.read_only { "read-only" } else { "writable" };
    format!("global writes: {zone} ({mode})")
}

/// Every domain's map: the default's, then `domain <name>: units ...` for each named one.
fn describe_all_maps(table: &RoutingTable) -> String {
    let mut out = describe_map(table);
    for (name, map) in table.domains.iter() {
        let runs = map.runs();
        out.push_str(&format!(
            "; domain {name}: units {}",
            describe_runs(&runs, |z| table.zones.lane(z).to_owned())
        ));
    }
    out
}

/// The map as runs with lanes: `units 0-49 blue, 50-99 green`.
fn describe_map(table: &RoutingTable) -> String {
    let runs = table.map.runs();
    format!("units {}", describe_runs(&runs, |z| table.zones.lane(z).to_owned()))
}

fn describe_pin(table: &RoutingTable, user_id: &str, color: Option<ZoneId>) -> String {
    match color {
        Some(color) => format!("user {user_id} pinned {}", table.zones.lane(color)),
        None => format!("user {user_id} not pinned"),
    }
}
