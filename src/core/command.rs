//! Commands that change the routing state, and the pure function that applies them.
//!
//! Every change is an [`Envelope`]: a command, the version it expects (compare-and-set) and an
//! audit record. [`State::apply`] either returns the next state or says why not, without side
//! effects; the store logs accepted envelopes and rebuilds the state by applying them again.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::color::{Color, ColorZones};
use super::dial::{DialError, Share, percent_of};
use super::drain::{Direction, Drain, DrainMode, DrainPlan, DrainStatus, OnBreach, step_toward};
use super::plan::{self, Plan, StoredPlan};
use super::table::RoutingTable;
use super::unit::{UnitError, UnitScheme};
use super::validate_user_id;

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
    /// Move the dial to `blue_units` of the table's units.
    SetBlueUnits {
        blue_units: u32,
    },
    /// Force a user to a colour, whatever their unit.
    Pin {
        user_id: String,
        color: Color,
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
    /// Store (or replace) a prepared plan under its name.
    PutPlan {
        plan: Plan,
    },
}

impl Command {
    /// Every value [`Command::action`] can return.
    pub const ACTIONS: &[&str] = &[
        "dial",
        "pin",
        "unpin",
        "drain_start",
        "drain_step",
        "drain_hold",
        "drain_pause",
        "drain_resume",
        "drain_abort",
        "drain_rollback",
        "drain_complete",
    ];

    /// A short name for the audit log and metrics.
    pub fn action(&self) -> &'static str {
        match self {
            Command::SetBlueUnits { .. } => "dial",
            Command::Pin { .. } => "pin",
            Command::Unpin { .. } => "unpin",
            Command::StartDrain { .. } => "drain_start",
            Command::DrainStep { .. } => "drain_step",
            Command::DrainHold { .. } => "drain_hold",
            Command::PauseDrain { .. } => "drain_pause",
            Command::ResumeDrain { .. } => "drain_resume",
            Command::AbortDrain { .. } => "drain_abort",
            Command::RollbackDrain { .. } => "drain_rollback",
            Command::CompleteDrain { .. } => "drain_complete",
            Command::PutPlan { .. } => "plan_put",
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
}

impl State {
    /// The state right after the genesis record (version 1).
    pub fn genesis(genesis: Genesis, zones: ColorZones) -> Result<State, DialError> {
        Share::from_units(u64::from(genesis.blue_units), genesis.scheme.count())?;
        Ok(State {
            table: Arc::new(RoutingTable {
                version: 1,
                scheme: genesis.scheme,
                blue_units: genesis.blue_units,
                pins: Arc::new(BTreeMap::new()),
                zones,
            }),
            drains: Arc::new(BTreeMap::new()),
            next_drain_id: 1,
            plans: Arc::new(BTreeMap::new()),
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
    ) -> State {
        State {
            table: Arc::new(table),
            drains: Arc::new(drains.into_iter().map(|d| (d.id, d)).collect()),
            next_drain_id,
            plans: Arc::new(plans.into_iter().map(|p| (p.plan.name.clone(), p)).collect()),
        }
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
            Command::SetBlueUnits { blue_units } => {
                if let Some(drain) = self.active_drain().filter(|d| d.status != DrainStatus::Paused)
                {
                    return Err(CommandError::DrainRunning(drain.id));
                }
                let share = Share::from_units(u64::from(*blue_units), self.table.units())?;
                if share.blue_units == self.table.blue_units {
                    return Ok(None);
                }
                table.blue_units = share.blue_units;
                (describe_share(&self.table), describe_share(&table))
            }
            Command::Pin { user_id, color } => {
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
                (describe_pin(user_id, before), describe_pin(user_id, Some(*color)))
            }
            Command::Unpin { user_id } => {
                let before = Arc::make_mut(&mut table.pins)
                    .remove(user_id)
                    .ok_or_else(|| CommandError::PinNotFound(user_id.clone()))?;
                (describe_pin(user_id, Some(before)), describe_pin(user_id, None))
            }
            Command::StartDrain { plan } => {
                if let Some(active) = self.active_drain() {
                    return Err(CommandError::DrainActive(active.id));
                }
                validate_plan(plan, &self.table)?;
                let drain = Drain {
                    id: self.next_drain_id,
                    plan: plan.clone(),
                    start_blue_units: self.table.blue_units,
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
                };
                let to = describe_plan(&drain, self.table.units());
                next.next_drain_id += 1;
                next.insert_drain(drain);
                ("no active drain".to_owned(), to)
            }
            Command::DrainStep { drain: id, blue_units } => {
                let mut drain = self.running_drain(*id, "step")?.clone();
                let target = drain.heading_for();
                let expected = step_toward(self.table.blue_units, target, drain.plan.step_units);
                if self.table.blue_units == target || *blue_units != expected {
                    return Err(CommandError::DrainStepMismatch {
                        id: *id,
                        expected,
                        got: *blue_units,
                    });
                }
                table.blue_units = *blue_units;
                match drain.direction {
                    Direction::Forward => drain.steps_done += 1,
                    Direction::Back => drain.steps_done = drain.steps_done.saturating_sub(1),
                }
                drain.consecutive_breaches = 0;
                drain.hold_reason = None;
                drain.next_due_ms = at_ms.saturating_add(drain.plan.interval_ms);
                drain.last_step_version = Some(current + 1);
                drain.last_step_ms = at_ms;
                if *blue_units == target {
                    arrive(&mut drain, self.table.units(), at_ms);
                }
                let from = describe_share(&self.table);
                let to = format!("{} ({})", describe_share(&table), drain.state_name());
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
                drain.pause_cause = None;
                drain.next_due_ms = at_ms;
                // Stragglers of the previous step get a fresh convergence timeout.
                drain.last_step_ms = at_ms;
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
            Command::PutPlan { plan } => {
                plan::validate_plan(plan, &self.table.zones, self.table.units())
                    .map_err(CommandError::InvalidPlan)?;
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
        next.table = Arc::new(table);
        let applied = Applied { version: current + 1, from, to };
        Ok(Some((next, applied)))
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

    /// The same state under another colour-to-zone mapping (configuration, not logged state).
    pub fn with_zones(mut self, zones: ColorZones) -> State {
        self.table = Arc::new((*self.table).clone().with_zones(zones));
        self
    }
}

/// A drain already at its destination when resumed or rolled back arrives at once.
fn finish_if_arrived(drain: &mut Drain, table: &RoutingTable, at_ms: u64) {
    if table.blue_units == drain.heading_for() {
        arrive(drain, table.units(), at_ms);
    }
}

/// The drain reached where it was heading: rolled back, completed, or, when it emptied its
/// zone, settling until the zone's message backlog is consumed.
fn arrive(drain: &mut Drain, units: u32, at_ms: u64) {
    drain.status = match drain.direction {
        Direction::Back => DrainStatus::RolledBack,
        Direction::Forward if drain.empties_zone(units) => DrainStatus::Settling,
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
    if table.zones.color_in(&plan.zone) != Some(plan.color) {
        return invalid(format!("zone `{}` does not run the {} colour", plan.zone, plan.color));
    }
    if plan.target_blue_units > table.units() {
        return invalid(format!("the target is outside 0..={} units", table.units()));
    }
    if plan.target_blue_units == table.blue_units {
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
    Ok(())
}

fn describe_plan(drain: &Drain, units: u32) -> String {
    let plan = &drain.plan;
    let kind = match plan.mode {
        DrainMode::Maintenance => "drain",
        DrainMode::Evacuate => "evacuation (drain)",
    };
    format!(
        "{} {} of {}: {}% -> {}% in steps of {}% every {} ms (guard: error rate <= {}% with >= {} requests, {} breach(es) -> {})",
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

fn describe_share(table: &RoutingTable) -> String {
    let blue = table.blue_units;
    let units = table.units();
    format!(
        "blue {}% / green {}% ({blue}/{units} units blue)",
        percent_of(blue, units),
        percent_of(units - blue, units)
    )
}

fn describe_pin(user_id: &str, color: Option<Color>) -> String {
    match color {
        Some(color) => format!("user {user_id} pinned {color}"),
        None => format!("user {user_id} not pinned"),
    }
}
