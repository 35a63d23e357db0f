//! The commands that change the routing state: what each one says, the record format it needs
//! and its short name in the audit log.

use crate::channel::Channel;
use crate::drain::DrainPlan;
use crate::plan::{Plan, PlanStep};
use crate::plan_run::ZoneSample;
use crate::staged::PinChange;
use crate::table::GlobalWriter;
use crate::unit_map::UnitMove;
use crate::zone::{ZoneId, ZoneSpec};

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
    /// A zone drain among N moves its next slice of units: out of the drained zone to its
    /// receivers (forward), or back to it (rollback). The split over the receivers depends on
    /// their load when the runner decided, so the moves are part of the record.
    ZoneDrainStep {
        drain: u64,
        moves: Vec<UnitMove>,
    },
    /// A loss-less step of a zone drain among N begins: freeze the units these moves give away;
    /// the switch follows as a `ZoneDrainStep` with the same moves.
    ZoneDrainFreeze {
        drain: u64,
        moves: Vec<UnitMove>,
    },
    /// A loss-less drain step begins: freeze the units the step to `blue_units` moves (their
    /// writes are refused until the unfreeze); the switch follows as a `DrainStep`.
    DrainFreeze {
        drain: u64,
        blue_units: u32,
    },
    /// A loss-less channel change begins: freeze the writes whose owner putting `next` (or, with
    /// `None`, deleting the channel) moves; the switch follows once every live subscriber has
    /// the freeze (`SwitchChannel`), the unfreeze once every one has the switch.
    FreezeChannel {
        name: String,
        next: Option<Channel>,
        window_ms: u64,
    },
    /// The channel change in progress switches: the channel is put (or deleted).
    SwitchChannel {
        name: String,
    },
    /// The channel change in progress ends: after its switch, or `aborted` back without it.
    UnfreezeChannel {
        name: String,
        aborted: bool,
    },
    /// A loss-less change of owner begins (`PUT /v1/units`, `PUT /v1/dial`, `PUT`/`DELETE
    /// /v1/pins/{user}` with `freeze`): freeze the units these moves give to another zone and the
    /// units of the users whose pin changes their owner; `SwitchUnits` follows once every live
    /// subscriber has the freeze, `UnfreezeUnits` once every one has the switch.
    FreezeUnits {
        moves: Vec<UnitMove>,
        pins: Vec<PinChange>,
        /// A loss-less move of the global writer (`PUT /v1/global-writer`): global writes are
        /// frozen until the unfreeze; the switch sets this zone and read-only flag.
        global: Option<GlobalWriter>,
        window_ms: u64,
    },
    /// A hold begins: a freeze in place that moves nothing (`POST /v1/holds`, a plan's `hold`
    /// step), of these units and, with `global`, of global writes, so a data-layer action (a
    /// replica's catch-up, a promote) runs while nobody writes them. Held once every live
    /// subscriber has the freeze (`SwitchUnits`); a change of owner of held units is then made
    /// at once; released by `UnfreezeUnits`, at the latest after `hold_ms`.
    HoldUnits {
        units: Vec<crate::staged::HeldUnits>,
        global: bool,
        window_ms: u64,
        hold_ms: u64,
    },
    /// The change in progress switches: its moves are made, as `MoveUnits` makes them, and its
    /// pins, as `Pin` and `Unpin` make them.
    SwitchUnits,
    /// The unit move in progress ends: after its switch, or `aborted` back without it.
    UnfreezeUnits {
        aborted: bool,
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
        /// The run keeps the unit maps it starts from, and its restore (a drill's, or a
        /// rollback's) gives them back exactly: what a plan with `move_units` steps needs, since
        /// a dial position cannot say where units given to a third zone came from (format level
        /// 7; runs logged without it restore dial positions only, as they always did).
        restores_maps: bool,
    },
    /// A run starts its next step (a zone move starts its drain here).
    PlanStepStarted {
        run: u64,
        step: usize,
        drain: Option<DrainPlan>,
        samples: Vec<ZoneSample>,
    },
    /// A run's current step is done (a dial or pin step takes effect here).
    /// A plan step that changes owners (dial, unit moves, pin, unpin), in a plan with a
    /// `freeze_window`, begins loss-lessly: what it moves is frozen as a unit move freezes it;
    /// the switch makes it, and the unfreeze ends the step (or fails the run when the freeze is
    /// undone at its window).
    PlanStepFreeze {
        run: u64,
        step: usize,
    },
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
    /// Create or replace a release channel (resolved: its users are units and IDs).
    PutChannel {
        channel: Channel,
    },
    /// Remove a release channel: by an operator, or `expired` (the coordinator, at its expiry).
    DeleteChannel {
        name: String,
        expired: bool,
    },
}

/// The newest record format this release reads and writes. A command of a higher
/// [`Command::format_level`] than some live replica supports must not be written: that replica
/// would stop at it (ARCHITECTURE.md, "replicas, upgrades").
pub const FORMAT_LEVEL: u32 = 10;

impl Command {
    /// The record format a command needs every replica to read: 1 for the commands of the first
    /// replicated release, 2 for those added since (the automation switch, plan call-outs), 3
    /// for the N-zone model (unit moves, zone lifecycle, the global writer, a pin to a third zone,
    /// a named domain's dial or drain), 4 for loss-less moves (a drain that freezes), 5 for a
    /// plan whose dial or zone-move step names a domain, 6 for release channels, 7 for zone
    /// drains among N and plan runs that restore unit maps, 8 for loss-less channel changes and
    /// unit moves, 9 for loss-less pin changes and plan steps (and the one freeze rule: a
    /// freeze covers pinned users too), 10 for holds (a freeze in place).
    pub fn format_level(&self) -> u32 {
        match self {
            Command::HoldUnits { .. } => 10,
            Command::PutPlan { plan }
                if plan
                    .steps
                    .iter()
                    .any(|s| matches!(s, PlanStep::Hold { .. } | PlanStep::Release)) =>
            {
                10
            }
            Command::FreezeUnits { pins, global, .. } if !pins.is_empty() || global.is_some() => 9,
            Command::PlanStepFreeze { .. } => 9,
            Command::PutPlan { plan } if plan.freeze_ms.is_some() => 8,
            Command::FreezeChannel { .. }
            | Command::SwitchChannel { .. }
            | Command::UnfreezeChannel { .. }
            | Command::FreezeUnits { .. }
            | Command::SwitchUnits
            | Command::UnfreezeUnits { .. } => 8,
            Command::ZoneDrainStep { .. } | Command::ZoneDrainFreeze { .. } => 7,
            Command::StartPlanRun { restores_maps: true, .. } => 7,
            Command::StartDrain { plan } if plan.receivers.is_some() => 7,
            Command::PlanStepStarted { drain: Some(plan), .. } if plan.receivers.is_some() => 7,
            Command::PutChannel { .. } | Command::DeleteChannel { .. } => 6,
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
        "channel_put",
        "channel_delete",
        "channel_freeze",
        "channel_switch",
        "channel_unfreeze",
        "units_freeze",
        "units_hold",
        "units_switch",
        "units_unfreeze",
        "channel_expire",
    ];

    /// A short name for the audit log and metrics.
    pub fn action(&self) -> &'static str {
        match self {
            Command::SetBlueUnits { .. } => "dial",
            Command::Pin { .. } => "pin",
            Command::Unpin { .. } => "unpin",
            Command::StartDrain { .. } => "drain_start",
            Command::DrainStep { .. } | Command::ZoneDrainStep { .. } => "drain_step",
            Command::DrainFreeze { .. } | Command::ZoneDrainFreeze { .. } => "drain_freeze",
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
            Command::PlanStepFreeze { .. } => "plan_step_freeze",
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
            Command::PutChannel { .. } => "channel_put",
            Command::FreezeChannel { .. } => "channel_freeze",
            Command::SwitchChannel { .. } => "channel_switch",
            Command::UnfreezeChannel { .. } => "channel_unfreeze",
            Command::FreezeUnits { .. } => "units_freeze",
            Command::HoldUnits { .. } => "units_hold",
            Command::SwitchUnits => "units_switch",
            Command::UnfreezeUnits { .. } => "units_unfreeze",
            Command::DeleteChannel { expired: false, .. } => "channel_delete",
            Command::DeleteChannel { expired: true, .. } => "channel_expire",
        }
    }
}
