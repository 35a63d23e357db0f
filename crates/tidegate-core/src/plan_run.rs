//! Plan runs: a stored plan executed step by step as logged commands, and drills of it.
//!
//! A run lives in the replicated state (`State::plan_runs`) and moves only through commands
//! (`StartPlanRun`, `PlanStepStarted`, `PlanStepDone`, `PlanRunHold`, `PlanRestore`, pause,
//! resume, abort, rollback, fail), so a restart replays it to its persisted step. What the next
//! command is comes from the pure [`PlanRun::decide`], given the time and what the runner read;
//! the runner loop (`service::plan_runner`) only reads and submits.
//!
//! A `MoveZone` step starts a drain (maintenance or evacuation, linked to the run) when its
//! `PlanStepStarted` applies and is done when that drain completed. Dial, pin and unpin steps take
//! effect when their `PlanStepDone` applies (a dial is judged against capacity first: the run
//! holds with `insufficient_capacity`, never forces). Wait steps are done when what they wait
//! for is true. A drill, after its last step, holds for its hold time and then restores the
//! table it started from (`PlanRestore`: the dial and every pin its steps changed), like a
//! rollback does.

use std::collections::BTreeMap;

use super::capacity::Verdict;
use super::dial::Share;
use super::drain::{Drain, DrainMode, DrainPlan, DrainStatus};
use super::plan::{HttpCall, Plan, PlanStep, StepDefaults};
use super::zone::{ZoneId, Zones};
use super::zone_drain::Receivers;

/// How long past its timeout a call's claim lasts: the claimer's time to log the result. After
/// that the claim has expired (its caller died or lost the log) and another attempt may start.
pub const CALL_CLAIM_MARGIN_MS: u64 = 5_000;
/// The wait before the first retry of a failed call; it doubles with each failure.
pub const CALL_BACKOFF_MS: u64 = 1_000;
/// The longest wait between two attempts.
pub const CALL_BACKOFF_MAX_MS: u64 = 30_000;

/// The wait before the attempt that follows `failures` failed attempts (1 s, 2 s, 4 s … 30 s).
pub fn call_backoff_ms(failures: u32) -> u64 {
    let doublings = failures.saturating_sub(1).min(16);
    CALL_BACKOFF_MS.saturating_mul(1 << doublings).min(CALL_BACKOFF_MAX_MS)
}

/// One attempt of an HTTP step: claimed by one replica (`PlanCallStarted`), then its result
/// (`PlanCallDone`). No token here: only what was called, by whom, and what answered.
#[derive(Clone, Debug, PartialEq)]
pub struct CallAttempt {
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The replica that claimed the attempt and calls.
    pub caller: String,
    pub claimed_ms: u64,
    /// The claim lapses at this time if no result was logged.
    pub until_ms: u64,
    pub done_ms: Option<u64>,
    /// The HTTP status, when an answer came.
    pub status: Option<u16>,
    /// Why the attempt failed without an HTTP answer (timeout, refused, no token).
    pub error: Option<String>,
    /// Whether the status is what the step expects.
    pub ok: bool,
}

impl CallAttempt {
    /// The attempt's outcome in words (for hold and fail reasons).
    pub fn outcome(&self) -> String {
        match (self.status, &self.error, self.done_ms) {
            (Some(status), _, _) => format!("HTTP {status}"),
            (None, Some(e), _) => e.clone(),
            (None, None, Some(_)) => "no answer".to_owned(),
            (None, None, None) => {
                format!("the claim of {} lapsed without a result (its caller stopped)", self.caller)
            }
        }
    }
}

/// How many finished runs the state remembers (active runs are always kept).
pub const FINISHED_RUNS_KEPT: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Paused,
    /// A drill after its last step: holding the evacuated table until `hold_until_ms`.
    Holding,
    /// Rolling back (or a drill restoring): the next command restores the starting table.
    Restoring,
    Completed,
    Aborted,
    RolledBack,
    Failed,
}

impl RunStatus {
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Holding,
        RunStatus::Restoring,
        RunStatus::Completed,
        RunStatus::Aborted,
        RunStatus::RolledBack,
        RunStatus::Failed,
    ];

    /// Outcomes a finished run can have (the metric labels).
    pub const OUTCOMES: [&'static str; 4] = ["completed", "aborted", "rolled_back", "failed"];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Holding => "holding",
            RunStatus::Restoring => "restoring",
            RunStatus::Completed => "completed",
            RunStatus::Aborted => "aborted",
            RunStatus::RolledBack => "rolled_back",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunStatus::Running | RunStatus::Paused | RunStatus::Holding | RunStatus::Restoring
        )
    }
}

/// One zone's errors at a moment of the run (sampled into the log with each step boundary).
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneSample {
    pub zone: String,
    /// `None`: the zone's health was unknown then.
    pub error_rate: Option<f64>,
    pub requests: u64,
}

/// The timeline of one step (or of the restore, index = number of steps).
#[derive(Clone, Debug, PartialEq)]
pub struct StepRecord {
    pub index: usize,
    pub started_ms: u64,
    /// When the step's change reached the subscribers (if measured), else when it was made.
    pub converged_ms: Option<u64>,
    /// When the step was done (a drain completed, with its MQ half settled; a wait passed).
    pub done_ms: Option<u64>,
    /// The drain a `MoveZone` step started.
    pub drain: Option<u64>,
    /// Zone errors when the step started and when it was done.
    pub samples: Vec<(u64, Vec<ZoneSample>)>,
    /// An HTTP step's attempts, in order.
    pub calls: Vec<CallAttempt>,
}

/// A run of a plan. Part of the replicated state.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanRun {
    pub id: u64,
    /// The plan as it was when the run started (a later revision does not change a run).
    pub plan: Plan,
    pub revision: u64,
    /// A drill's hold after the last step, before the restore.
    pub drill_hold_ms: Option<u64>,
    pub start_blue_units: u32,
    /// The blue units of each named domain a dial or zone-move step names, when the run
    /// started: what its restore gives back.
    pub start_domain_blue_units: BTreeMap<String, u32>,
    /// Every domain's unit map when the run started (the default domain under its name), on
    /// a run started with `restores_maps`: its restore gives these back exactly. `None`: the
    /// restore moves dials back to `start_blue_units` and `start_domain_blue_units`.
    pub start_maps: Option<BTreeMap<String, crate::unit_map::UnitMap>>,
    pub status: RunStatus,
    /// The current step (while `in_step`) or the next one.
    pub step: usize,
    pub in_step: bool,
    /// The drain the current `MoveZone` step started.
    pub drain: Option<u64>,
    pub hold_reason: Option<String>,
    pub hold_until_ms: Option<u64>,
    /// Restoring because of a rollback (else a drill's restore).
    pub rolling_back: bool,
    /// Pins the steps changed, with what they were before, in order.
    pub pins_before: Vec<(String, Option<ZoneId>)>,
    /// The version that froze the current step's change of owner, while that loss-less change
    /// (a dial, unit-move or pin step of a plan with a `freeze_window`) is in progress: the
    /// step ends with its unfreeze.
    pub step_freeze: Option<u64>,
    pub steps: Vec<StepRecord>,
    pub restore: Option<StepRecord>,
    pub started_ms: u64,
    pub started_by: String,
    pub reason: String,
    /// When the last forward step was done (the switch is complete).
    pub switched_ms: Option<u64>,
    pub finished_ms: Option<u64>,
    pub fail_reason: Option<String>,
}

/// What the runner read for [`PlanRun::decide`].
#[derive(Clone, Debug)]
pub struct RunReadings<'a> {
    pub now_ms: u64,
    pub zones: &'a Zones,
    pub units: u32,
    /// The blue units of the current step's domain (the default domain for steps without one).
    pub blue_units: u32,
    /// For a `MoveZone` step on a table of three or more zones: the units its zone owns in the
    /// step's domain (0 otherwise).
    pub zone_units: u32,
    /// The drain the current step started, as the state has it now.
    pub drain: Option<&'a Drain>,
    /// How drains of each mode step (from the configuration).
    pub maintenance: StepDefaults,
    pub evacuate: StepDefaults,
    /// For a `Dial` step: whether moving to its target fits the receiving zone.
    pub dial_capacity: Verdict,
    /// For a `WaitPrecondition` step: the check's result now.
    pub precondition: Option<Result<bool, String>>,
    /// For a `WaitConsumed` step: the zone's unconsumed messages (`None`: unknown).
    pub backlog: Option<u64>,
    /// For a drill whose hold is over: whether the zone its restore moves users back into is
    /// healthy (`Err(why)` when it is failing or its health is unknown).
    pub restore_into: Result<(), String>,
    /// For a `MoveZone` step about to start on a table of three or more zones: the zones the
    /// runner judged may receive (by health, and for an automatic run the hop limit), or why
    /// none may. `None`: every other live zone.
    pub receivers: Option<Result<Vec<ZoneId>, String>>,
}

/// The next command a run needs.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Start step `step`; with a drain plan when it is a zone move that moves someone.
    StartStep { step: usize, drain: Option<DrainPlan> },
    /// Step `step` is done (its effect, for dial and pin steps, applies now).
    DoneStep { step: usize },
    /// Step `step` changes owners loss-lessly (the plan has a `freeze_window`): freeze what it
    /// moves; the switch and the unfreeze follow as for a unit move, and the unfreeze ends it.
    FreezeStep { step: usize },
    /// The current step waits; the reason is logged once per change.
    Hold { reason: String },
    /// The step cannot succeed (its drain was aborted or rolled back).
    Fail { reason: String },
    /// Restore the table the run started from (rollback, or a drill's hold is over).
    Restore,
    /// Claim attempt `attempt` of the current HTTP step until `until_ms`; the replica whose claim
    /// is logged calls, then logs the result.
    Call { step: usize, attempt: u32, until_ms: u64 },
}

impl PlanRun {
    pub fn is_active(&self) -> bool {
        self.status.is_active()
    }

    pub fn is_drill(&self) -> bool {
        self.drill_hold_ms.is_some()
    }

    /// The blue-unit count a dial step or a zone move heads for, from the current count.
    pub fn step_target(step: &PlanStep, zones: &Zones, units: u32, blue: u32) -> u32 {
        match step {
            PlanStep::MoveZone { zone, to_percent, .. } => {
                let share = Share::from_percent(*to_percent, units).map_or(blue, |s| s.blue_units);
                match zones.color_in(zone) {
                    Some(ZoneId::BLUE) => share,
                    Some(ZoneId::GREEN) => units - share,
                    _ => blue,
                }
            }
            PlanStep::Dial { blue_percent, .. } => {
                Share::from_percent(*blue_percent, units).map_or(blue, |s| s.blue_units)
            }
            _ => blue,
        }
    }

    /// The next command for this run at `readings.now_ms`; `None` when it waits quietly.
    pub fn decide(&self, r: &RunReadings<'_>) -> Option<Decision> {
        match self.status {
            RunStatus::Restoring => return Some(Decision::Restore),
            RunStatus::Holding => {
                if r.now_ms < self.hold_until_ms.unwrap_or(0) {
                    return None;
                }
                // A drill during an incident must not send users back into a failing zone.
                return Some(match &r.restore_into {
                    Ok(()) => Decision::Restore,
                    Err(why) => Decision::Hold {
                        reason: format!(
                            "drill restore held: {why}; the drill keeps the evacuated table until \
                             the zone is healthy, or an operator aborts it"
                        ),
                    },
                });
            }
            RunStatus::Running => {}
            _ => return None,
        }
        let step = self.plan.steps.get(self.step)?;
        if !self.in_step
            && let PlanStep::MoveZone { zone, to_percent, mode, domain } = step
            && !r.zones.is_two()
        {
            return Some(self.start_zone_drain(r, zone, *to_percent, *mode, domain));
        }
        if !self.in_step {
            let drain = match step {
                PlanStep::MoveZone { zone, mode, domain, .. } => {
                    let target = Self::step_target(step, r.zones, r.units, r.blue_units);
                    let color = r.zones.color_in(zone)?;
                    (target != r.blue_units).then(|| {
                        let d =
                            if *mode == DrainMode::Evacuate { r.evacuate } else { r.maintenance };
                        DrainPlan {
                            zone: zone.clone(),
                            color,
                            target_blue_units: target,
                            step_units: d.step_units.max(1),
                            interval_ms: d.interval_ms.max(1),
                            guard: d.guard,
                            mode: *mode,
                            domain: domain.clone().filter(|d| d != super::table::DEFAULT_DOMAIN),
                            // Loss-less when the plan says so (its `freeze_window`).
                            freeze_ms: self.plan.freeze_ms,
                            receivers: None,
                        }
                    })
                }
                _ => None,
            };
            return Some(Decision::StartStep { step: self.step, drain });
        }
        let done = Some(Decision::DoneStep { step: self.step });
        let hold = |reason: String| Some(Decision::Hold { reason });
        // A step that changes owners, in a plan with a `freeze_window`: frozen first, and it
        // ends with its change's unfreeze (the run waits for that quietly).
        let moves_owners = matches!(
            step,
            PlanStep::Dial { .. }
                | PlanStep::MoveUnits { .. }
                | PlanStep::Pin { .. }
                | PlanStep::Unpin { .. }
        );
        if moves_owners && self.step_freeze.is_some() {
            return None;
        }
        // A hold step freezes in place, and its switch (held) ends it.
        if matches!(step, PlanStep::Hold { .. }) {
            return self.step_freeze.is_none().then_some(Decision::FreezeStep { step: self.step });
        }
        let done = if moves_owners && self.plan.freeze_ms.is_some() {
            Some(Decision::FreezeStep { step: self.step })
        } else {
            done
        };
        match step {
            PlanStep::MoveZone { zone, .. } => {
                let Some(id) = self.drain else { return done };
                match r.drain {
                    None => done,
                    Some(d) if d.id != id => done,
                    Some(d) => match d.status {
                        DrainStatus::Completed => done,
                        DrainStatus::Aborted | DrainStatus::RolledBack => Some(Decision::Fail {
                            reason: format!(
                                "drain {id} of {zone} was {}; the step cannot complete",
                                d.state_name()
                            ),
                        }),
                        // The drain waits for itself (its hold reason is the run's too).
                        _ => None,
                    },
                }
            }
            PlanStep::Dial { .. } => {
                if r.dial_capacity.blocks() {
                    hold(format!("holding: insufficient_capacity: {}", r.dial_capacity.explain()))
                } else {
                    done
                }
            }
            PlanStep::Pin { .. } | PlanStep::Unpin { .. } => done,
            // The runner judges the move like a dial (`dial_capacity`).
            PlanStep::MoveUnits { .. } => {
                if r.dial_capacity.blocks() {
                    hold(format!("holding: insufficient_capacity: {}", r.dial_capacity.explain()))
                } else {
                    done
                }
            }
            PlanStep::WaitConsumed { zone } => match r.backlog {
                Some(0) => done,
                Some(n) => {
                    hold(format!("waiting for {n} message(s) in {zone}'s MQ half to be consumed"))
                }
                None => hold(format!("waiting: {zone}'s MQ backlog is unknown")),
            },
            PlanStep::Http(call) => self.decide_call(call, r.now_ms),
            PlanStep::Hold { .. } => None,
            PlanStep::Release => done,
            PlanStep::WaitPrecondition { name } => match &r.precondition {
                Some(Ok(true)) => done,
                Some(Ok(false)) => hold(format!("waiting for precondition `{name}` (false)")),
                Some(Err(why)) => {
                    hold(format!("waiting for precondition `{name}` (cannot be checked: {why})"))
                }
                None => hold(format!("waiting for precondition `{name}` (not checked)")),
            },
        }
    }

    /// The attempts of the current step (an HTTP step's calls so far).
    pub fn current_calls(&self) -> &[CallAttempt] {
        match self.steps.last() {
            Some(r) if self.in_step && r.index == self.step => &r.calls,
            _ => &[],
        }
    }

    /// An HTTP step: done after a successful attempt; quiet while an attempt's claim is live or
    /// a retry's backoff runs; the next attempt's claim when due; failed once every attempt
    /// (`1 + retries`) failed or lapsed.
    fn decide_call(&self, call: &HttpCall, now_ms: u64) -> Option<Decision> {
        let calls = self.current_calls();
        let claim = Decision::Call {
            step: self.step,
            attempt: calls.len() as u32 + 1,
            until_ms: now_ms.saturating_add(call.timeout_ms).saturating_add(CALL_CLAIM_MARGIN_MS),
        };
        let Some(last) = calls.last() else { return Some(claim) };
        if last.ok {
            return Some(Decision::DoneStep { step: self.step });
        }
        if last.done_ms.is_none() && now_ms < last.until_ms {
            return None;
        }
        let failed = calls.len() as u32;
        if failed > call.retries {
            return Some(Decision::Fail {
                reason: format!(
                    "call `{}` ({} {}) failed {failed} time(s), expecting {}; last: {}",
                    call.name,
                    call.method,
                    call.url,
                    call.expects(),
                    last.outcome()
                ),
            });
        }
        let ended = last.done_ms.unwrap_or(last.until_ms);
        if now_ms < ended.saturating_add(call_backoff_ms(failed)) {
            return None;
        }
        Some(claim)
    }

    /// The switch time: from the start to the last forward step done (or to `now_ms` while the
    /// steps still run).
    pub fn switch_ms(&self, now_ms: u64) -> u64 {
        self.switched_ms
            .unwrap_or(self.finished_ms.unwrap_or(now_ms))
            .saturating_sub(self.started_ms)
    }

    /// Whether the switch met the RTO: `None` while it is not known yet.
    pub fn met_rto(&self) -> Option<bool> {
        match self.switched_ms {
            Some(_) => Some(self.switch_ms(0) <= self.plan.rto_ms),
            None if self.is_active() => None,
            None => Some(false),
        }
    }

    /// Starts a `MoveZone` step on a table of three or more zones: a zone drain among N, as
    /// `POST /v1/drains` starts one without `to`. The zone keeps `to_percent` of the units (its
    /// lowest ones) and gives the rest, a step at a time, to every other live zone by free room.
    /// A zone move there only gives units away (`move_units` gives a zone more), and needs a run
    /// that keeps its unit maps ([`PlanRun::start_maps`]): its restore is a map, not a dial.
    fn start_zone_drain(
        &self,
        r: &RunReadings<'_>,
        zone: &str,
        to_percent: f64,
        mode: DrainMode,
        domain: &Option<String>,
    ) -> Decision {
        let step = self.step;
        let fail = |reason: String| Decision::Fail { reason };
        let Some(color) = r.zones.color_in(zone) else {
            return fail(format!("step {}: zone `{zone}` is not in the table", step + 1));
        };
        if self.start_maps.is_none() {
            return fail(format!(
                "step {}: a zone move among {} zones is a zone drain, and this run was started without its unit maps (a record of the release before); start it again",
                step + 1,
                r.zones.len()
            ));
        }
        let keep = Share::from_percent(to_percent, r.units).map_or(r.zone_units, |s| s.blue_units);
        if keep > r.zone_units {
            return fail(format!(
                "step {}: {zone} owns {} units and the step asks for {keep}; among {} zones a zone move only gives units away (a move_units step gives a zone more)",
                step + 1,
                r.zone_units,
                r.zones.len()
            ));
        }
        if keep == r.zone_units {
            return Decision::StartStep { step, drain: None };
        }
        let asked = match &r.receivers {
            None => Receivers::Spread,
            Some(Ok(list)) => Receivers::Named(list.clone()),
            Some(Err(why)) => {
                return fail(format!(
                    "step {}: no zone may receive {zone}'s units: {why}",
                    step + 1
                ));
            }
        };
        let receivers = match super::zone_drain::receiving_zones(r.zones, color, &asked, 1) {
            Ok(list) => list,
            Err(e) => return fail(format!("step {}: {e}", step + 1)),
        };
        let d = if mode == DrainMode::Evacuate { r.evacuate } else { r.maintenance };
        Decision::StartStep {
            step,
            drain: Some(DrainPlan {
                zone: zone.to_owned(),
                color,
                target_blue_units: keep,
                step_units: d.step_units.max(1),
                interval_ms: d.interval_ms.max(1),
                guard: d.guard,
                mode,
                domain: domain.clone().filter(|d| d != super::table::DEFAULT_DOMAIN),
                freeze_ms: self.plan.freeze_ms,
                receivers: Some(receivers),
            }),
        }
    }

    /// The name of a step, for audit records and reports.
    pub fn step_label(&self, index: usize) -> String {
        match self.plan.steps.get(index) {
            Some(PlanStep::MoveZone { zone, to_percent, mode, domain }) => {
                let verb = if *mode == DrainMode::Evacuate { "evacuate" } else { "drain" };
                format!("{verb} {zone} to {to_percent}%{}", in_domain(domain))
            }
            Some(PlanStep::Dial { blue_percent, domain }) => {
                format!("set the dial to {blue_percent}% blue{}", in_domain(domain))
            }
            Some(PlanStep::Pin { user_id, color }) => {
                format!("pin {user_id} to {}", color.default_lane())
            }
            Some(PlanStep::Unpin { user_id }) => format!("unpin {user_id}"),
            Some(PlanStep::MoveUnits { moves }) => super::plan::describe_moves(moves),
            Some(PlanStep::WaitConsumed { zone }) => {
                format!("wait until {zone}'s MQ half is consumed")
            }
            Some(PlanStep::WaitPrecondition { name }) => format!("wait for precondition `{name}`"),
            Some(PlanStep::Hold { units, global, hold_ms }) => format!(
                "hold {} (frozen in place, at most {hold_ms} ms)",
                super::staged::describe_held(units, *global)
            ),
            Some(PlanStep::Release) => "release the hold".to_owned(),
            Some(PlanStep::Http(call)) => {
                format!("call `{}` ({} {})", call.name, call.method, call.url)
            }
            None => "restore the starting table".to_owned(),
        }
    }
}

/// ` in search` for a step of a named domain, nothing for the default one.
fn in_domain(domain: &Option<String>) -> String {
    match domain.as_deref() {
        Some(d) if d != super::table::DEFAULT_DOMAIN => format!(" in {d}"),
        _ => String::new(),
    }
}
