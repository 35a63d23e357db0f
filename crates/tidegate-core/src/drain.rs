//! Zone drains: a plan that steps one zone's share toward a target, guarded by error rates.
//!
//! The state machine is pure. [`Drain::decide`] looks at a drain, the routing table, the time and
//! the health readings, and says which command (if any) should happen next; [`super::State::apply`]
//! applies that command like any other. A runner outside the core only does the I/O: it reads the
//! clock and the health sources, and submits what `decide` returns through the log. Replaying the
//! log therefore rebuilds a drain exactly where it was, step for step.
//!
//! ```text
//!            start                 guard ok, step          reaches target
//!   ──────▶ running ───────────────────────────────▶ running ───────────▶ completed
//!             │  ▲ resume            breaches x N (pause)    │ abort
//!     pause   ▼  │                                           ▼
//!           paused ◀──────────────── running           aborted
//!             │ rollback / breaches x N (rollback)
//!             ▼
//!        rolling back ── steps back to the start ──▶ rolled_back
//! ```

use super::capacity::{Verdict, ZoneLoad, judge};
use super::dial::percent_of;
use super::zone::ZoneId;

/// Why a zone is drained, which decides whose health guards the drain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DrainMode {
    /// Planned work: both zones must be healthy, and unknown health anywhere holds.
    #[default]
    Maintenance,
    /// Moving users out of a failing zone: only the receiving zone (and its capacity) is
    /// judged. The source zone's errors and unknown health are reported, never a reason to hold,
    /// since they are exactly why the zone is being evacuated.
    Evacuate,
}

impl DrainMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainMode::Maintenance => "maintenance",
            DrainMode::Evacuate => "evacuate",
        }
    }

    pub fn parse(text: &str) -> Option<DrainMode> {
        match text {
            "maintenance" => Some(DrainMode::Maintenance),
            "evacuate" => Some(DrainMode::Evacuate),
            _ => None,
        }
    }
}

/// What the guard does once `breaches` consecutive checks failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnBreach {
    Pause,
    Rollback,
}

impl OnBreach {
    pub fn as_str(self) -> &'static str {
        match self {
            OnBreach::Pause => "pause",
            OnBreach::Rollback => "rollback",
        }
    }
}

/// The health guard of a drain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Guard {
    /// A zone whose error rate is above this (0..=1) fails the check...
    pub max_error_rate: f64,
    /// ...provided at least this many requests were seen in the window.
    pub min_requests: u64,
    /// Consecutive failed checks before `on_breach` happens.
    pub breaches: u32,
    pub on_breach: OnBreach,
}

/// What an operator asked for, in units of the routing table.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainPlan {
    /// The zone being drained (or restored) and the colour that runs in it.
    pub zone: String,
    pub color: ZoneId,
    /// The blue-unit count the drain moves toward. On a zone drain among N (`receivers` set):
    /// the units the drained zone keeps at the end (there is no dial to count in).
    pub target_blue_units: u32,
    /// Units moved per step (at least 1).
    pub step_units: u32,
    pub interval_ms: u64,
    pub guard: Guard,
    pub mode: DrainMode,
    /// The routing domain whose dial the drain moves (`None`: the default domain). One drain
    /// runs at a time, in whichever domain.
    pub domain: Option<String>,
    /// Loss-less steps: each forward step freezes the units it moves, switches them once every
    /// live subscriber applied the freeze, and unfreezes them once every live subscriber
    /// applied the switch. The value is the freeze's maximum window in ms: a freeze not applied
    /// everywhere by then is aborted back (unfrozen without switching) and the drain pauses.
    /// `None`: steps switch at once.
    pub freeze_ms: Option<u64>,
    /// `None`: a two-zone drain that steps the dial. `Some`: a zone drain among N that moves
    /// the drained zone's units out in slices to these zones (named by the operator, or every
    /// other live zone when the drain started), spread by their free room
    /// ([`super::zone_drain`]).
    pub receivers: Option<Vec<ZoneId>>,
}

/// The longest freeze window a drain accepts: ten minutes of refused writes is an outage, not
/// a move.
pub const MAX_FREEZE_MS: u64 = 600_000;

/// The freeze window drains take when asked to freeze without one: 30 s.
pub const DEFAULT_FREEZE_MS: u64 = 30_000;

/// How many finished freezes a drain keeps for its report.
pub const FREEZES_KEPT: usize = 100;

/// The freeze of the step in progress (loss-less steps, [`DrainPlan::freeze_ms`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StepFreeze {
    /// The blue units the step switches to.
    pub blue_units: u32,
    /// The units whose owner the step changes, frozen for writes.
    pub units: super::unit_map::UnitSet,
    /// The version that froze them, and when.
    pub frozen_version: u64,
    pub frozen_ms: u64,
    /// The version that switched them, and when, once switched.
    pub switched: Option<(u64, u64)>,
    /// On a zone drain among N: the moves the switch makes (`blue_units` is then unused).
    pub moves: Option<Vec<super::unit_map::UnitMove>>,
}

/// A finished freeze, for the drain's report: how long the units' writes were refused, next
/// to how long each barrier took.
#[derive(Clone, Debug, PartialEq)]
pub struct FreezeRecord {
    /// The step number (1-based) the freeze belonged to.
    pub step: u32,
    pub units: u32,
    /// From freeze to unfreeze.
    pub window_ms: u64,
    /// From freeze to the switch (every live subscriber applied the freeze), if it switched.
    pub switch_after_ms: Option<u64>,
    /// Why it ended without a clean unfreeze (aborted back, thawed by an operator action).
    pub note: Option<String>,
}

/// What the runner measured of a freeze's barrier: whether every live subscriber runs the
/// version the barrier waits for (the freeze, then the switch), and who does not.
#[derive(Clone, Debug, PartialEq)]
pub struct FreezeBarrier {
    pub version: u64,
    pub all_applied: bool,
    pub behind: String,
}

/// The longest interval between drain steps that the API and the config accept: a day. Longer
/// is a mistake (a drain that moves once a week is a manual change), and the bound keeps
/// `now + interval` far from overflowing.
pub const MAX_DRAIN_INTERVAL_MS: u64 = 24 * 3_600_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainStatus {
    Running,
    Paused,
    /// A full drain reached its target (the zone has no users) and waits for the zone's
    /// message-queue half to be consumed before it reports completed.
    Settling,
    Completed,
    Aborted,
    RolledBack,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Toward the plan's target.
    Forward,
    /// Back toward the share the drain started from.
    Back,
}

/// One health reading of a zone over the guard's window.
#[derive(Clone, Debug, PartialEq)]
pub enum Reading {
    Known {
        error_rate: f64,
        requests: u64,
    },
    /// No data, a failed query, an empty result: never treated as healthy.
    Unknown {
        why: String,
    },
}

/// How far the previous step has spread, for the convergence gate. The runner measures it for
/// `Drain::last_step_version`; `Disabled` when the deployment does not gate steps on it.
#[derive(Clone, Debug, PartialEq)]
pub enum StepConvergence {
    Disabled,
    Measured {
        /// The version the measurement is for.
        version: u64,
        /// Fraction of live subscribers on that version or newer (1.0 with none).
        fraction: f64,
        /// Required fraction and how long to wait for it before pausing.
        required: f64,
        timeout_ms: u64,
        /// Who is behind, for the pause reason.
        behind: String,
    },
}

/// A drain and its progress. Part of the replicated state.
#[derive(Clone, Debug, PartialEq)]
pub struct Drain {
    pub id: u64,
    pub plan: DrainPlan,
    /// The blue units when the drain started; on a zone drain among N, the drained zone's unit
    /// count then.
    pub start_blue_units: u32,
    /// A zone drain among N: the units the drained zone owned when the drain started, which a
    /// rollback returns to it. `None` on a two-zone drain (its start is a dial position).
    pub start_units: Option<super::unit_map::UnitSet>,
    pub status: DrainStatus,
    pub direction: Direction,
    /// When the next check (and step) is due, in ms since the epoch.
    pub next_due_ms: u64,
    pub consecutive_breaches: u32,
    /// Why the drain is not moving, when it is not (guard hold, pause, ...).
    pub hold_reason: Option<String>,
    /// Who paused it, while paused: "guard", "convergence" or "operator".
    pub pause_cause: Option<&'static str>,
    pub steps_done: u32,
    /// The routing version the latest step produced, and when: the convergence gate waits for
    /// subscribers to apply it before the next step.
    pub last_step_version: Option<u64>,
    pub last_step_ms: u64,
    pub started_ms: u64,
    pub started_by: String,
    pub reason: String,
    pub finished_ms: Option<u64>,
    /// The freeze of the step in progress, on a drain with loss-less steps.
    pub freeze: Option<StepFreeze>,
    /// Finished freezes, oldest first (at most [`FREEZES_KEPT`]).
    pub freezes: Vec<FreezeRecord>,
}

/// The next command a drain needs, as decided by [`Drain::decide`].
#[derive(Clone, Debug, PartialEq)]
pub enum DrainAction {
    Step {
        blue_units: u32,
    },
    Hold {
        breach: bool,
        /// The zone whose reading caused the hold (the draining or the receiving zone).
        zone: String,
        reason: String,
    },
    /// The previous step did not reach enough subscribers in time.
    Pause {
        reason: String,
    },
    /// A settling drain's zone has no backlog left: report it completed.
    Complete,
    /// A zone drain among N moves a slice of units (forward: out of the drained zone to its
    /// receivers; back: returned to it), with each receiver's capacity verdict on forward steps.
    Move {
        moves: Vec<super::unit_map::UnitMove>,
        verdicts: Vec<(ZoneId, Verdict)>,
    },
    /// A loss-less step begins: freeze the units the step to `blue_units` moves.
    Freeze {
        blue_units: u32,
    },
    /// A loss-less step of a zone drain among N begins: freeze the units these moves give
    /// away (the switch then makes exactly these moves).
    FreezeMoves {
        moves: Vec<super::unit_map::UnitMove>,
    },
    /// Every live subscriber applied the freeze: switch the frozen units (a `DrainStep`).
    Switch {
        blue_units: u32,
    },
    /// End the freeze: after the switch (`aborted: false`), or back without switching because
    /// the freeze was not applied everywhere within the window (`aborted: true`, the drain
    /// pauses). `reason` says which, for the audit.
    Unfreeze {
        aborted: bool,
        reason: String,
    },
}

/// What the runner observed, for [`Drain::decide`].
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub blue_units: u32,
    pub now_ms: u64,
    pub receiving_zone: &'a str,
    pub draining: &'a Reading,
    pub receiving: &'a Reading,
    pub convergence: &'a StepConvergence,
    /// Messages not yet consumed in the drained zone's half of the MQ lanes (0 when the
    /// deployment has no lanes), `None` while unknown.
    pub backlog: Option<u64>,
    /// Both zones' load and capacity, `None` when no zone has a capacity configured.
    pub capacity: Option<&'a CapacityInputs>,
}

/// The load and capacity readings a forward step is judged against.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityInputs {
    /// Units in the routing table.
    pub units: u32,
    pub draining: ZoneLoad,
    pub receiving: ZoneLoad,
    /// Fraction of a zone's capacity kept free (0..1).
    pub headroom: f64,
}

impl Drain {
    pub fn is_active(&self) -> bool {
        matches!(self.status, DrainStatus::Running | DrainStatus::Paused | DrainStatus::Settling)
    }

    /// The blue-unit count this drain is currently heading for.
    pub fn heading_for(&self) -> u32 {
        match self.direction {
            Direction::Forward => self.plan.target_blue_units,
            Direction::Back => self.start_blue_units,
        }
    }

    /// The zone receiving the users this drain moves: the other lane on a two-zone drain, the
    /// first receiver on a zone drain among N (see [`Drain::receiving_zones`]).
    pub fn receiving_color(&self) -> ZoneId {
        match &self.plan.receivers {
            Some(list) => list.first().copied().unwrap_or_else(|| counterpart(self.plan.color)),
            None => counterpart(self.plan.color),
        }
    }

    /// Every zone receiving the users this drain moves, in order.
    pub fn receiving_zones(&self) -> Vec<ZoneId> {
        match &self.plan.receivers {
            Some(list) => list.clone(),
            None => vec![counterpart(self.plan.color)],
        }
    }

    /// Whether this is a zone drain among N (it moves unit slices, not a dial).
    pub fn is_zone_drain(&self) -> bool {
        self.plan.receivers.is_some()
    }

    /// Steps needed from the start to the target.
    pub fn steps_total(&self) -> u32 {
        self.start_blue_units.abs_diff(self.plan.target_blue_units).div_ceil(self.plan.step_units)
    }

    /// The zone's share in percent for a blue-unit count (on a zone drain among N, for the
    /// drained zone's unit count).
    pub fn zone_percent(&self, blue_units: u32, units: u32) -> f64 {
        if self.plan.color == ZoneId::BLUE || self.is_zone_drain() {
            percent_of(blue_units, units)
        } else {
            percent_of(units - blue_units, units)
        }
    }

    /// The state name operators see.
    pub fn state_name(&self) -> &'static str {
        match (self.status, self.direction) {
            (DrainStatus::Running, Direction::Forward) => "running",
            (DrainStatus::Running, Direction::Back) => "rolling_back",
            (DrainStatus::Paused, _) => "paused",
            (DrainStatus::Settling, _) => "settling",
            (DrainStatus::Completed, _) => "completed",
            (DrainStatus::Aborted, _) => "aborted",
            (DrainStatus::RolledBack, _) => "rolled_back",
        }
    }

    /// Whether a check is due at `now_ms`. The runner asks this before it reads health.
    /// A settling drain is checked on every tick: it only waits for the backlog.
    pub fn is_due(&self, now_ms: u64) -> bool {
        match self.status {
            DrainStatus::Running => now_ms >= self.next_due_ms,
            DrainStatus::Settling => true,
            _ => false,
        }
    }

    /// Whether reaching the target empties the drained zone (its share becomes 0). Only such
    /// drains settle: a zone that keeps users keeps consuming its half anyway.
    pub fn empties_zone(&self, units: u32) -> bool {
        self.zone_percent(self.plan.target_blue_units, units) == 0.0
    }

    /// The next command for this drain at `now_ms`, given the current blue units and the
    /// readings of the draining zone and the receiving zone. `None` when nothing is due.
    ///
    /// Why rolling back skips the guard: a rollback is the guard's own remedy, moving users back
    /// to where they were healthy; holding it because the receiving zone is failing would keep
    /// users exactly where the errors are.
    ///
    /// Why forward steps wait for convergence: "do not declare a switch complete until all nodes
    /// run the new version". Moving more users while gateways still route by the previous table
    /// would split users between layers. Rollback steps do not wait, for the reason above.
    ///
    /// Why a settling drain waits for the backlog: the drained zone's consumers still own its
    /// half of each lane topic until the half is consumed; calling the zone drained earlier would
    /// invite an operator to stop consumers with messages left behind.
    pub fn decide(&self, inputs: &Inputs<'_>) -> Option<DrainAction> {
        let Inputs {
            blue_units,
            now_ms,
            receiving_zone,
            draining,
            receiving,
            convergence,
            backlog,
            capacity,
        } = *inputs;
        if !self.is_due(now_ms) {
            return None;
        }
        if self.status == DrainStatus::Settling {
            return (backlog == Some(0)).then_some(DrainAction::Complete);
        }
        // A step's freeze in progress is decided by `decide_freeze`, on its barrier alone.
        if self.freeze.is_some() {
            return None;
        }
        let target = self.heading_for();
        if blue_units == target {
            return None;
        }
        if let Some(wait) = self.convergence_gate(now_ms, convergence) {
            return wait;
        }
        if self.direction == Direction::Forward {
            let mut zones = vec![(receiving_zone, receiving, "receiving")];
            if self.plan.mode == DrainMode::Maintenance {
                zones.insert(0, (self.plan.zone.as_str(), draining, "draining"));
            }
            for (zone, reading, role) in zones {
                if let Some((breach, reason)) =
                    guard_hold(&self.plan.guard, self.consecutive_breaches, zone, role, reading)
                {
                    return Some(DrainAction::Hold { breach, zone: zone.to_owned(), reason });
                }
            }
        }
        let next = step_toward(blue_units, target, self.plan.step_units);
        if self.direction == Direction::Forward
            && let Some(verdict) = capacity.map(|c| self.capacity_verdict(blue_units, next, c))
            && verdict.blocks()
        {
            return Some(DrainAction::Hold {
                breach: false,
                zone: receiving_zone.to_owned(),
                reason: format!("holding: insufficient_capacity: {}", verdict.explain()),
            });
        }
        if self.direction == Direction::Forward && self.plan.freeze_ms.is_some() {
            return Some(DrainAction::Freeze { blue_units: next });
        }
        Some(DrainAction::Step { blue_units: next })
    }

    /// The convergence gate before a forward step: `None` lets the step go, `Some(None)` waits
    /// (the previous step's version has not reached enough subscribers yet), `Some(Some(pause))`
    /// pauses (it has not within the timeout). Rollback steps never wait.
    pub(crate) fn convergence_gate(
        &self,
        now_ms: u64,
        convergence: &StepConvergence,
    ) -> Option<Option<DrainAction>> {
        if self.direction != Direction::Forward {
            return None;
        }
        let (
            Some(step_version),
            StepConvergence::Measured { version, fraction, required, timeout_ms, behind },
        ) = (self.last_step_version, convergence)
        else {
            return None;
        };
        if *version != step_version || fraction >= required {
            return None;
        }
        let waited = now_ms.saturating_sub(self.last_step_ms);
        if waited < *timeout_ms {
            return Some(None);
        }
        Some(Some(DrainAction::Pause {
            reason: format!(
                "version {step_version} reached only {:.0}% of subscribers (needs {:.0}%) after {} ms; behind: {behind}; resume to go on without them",
                fraction * 100.0,
                required * 100.0,
                waited
            ),
        }))
    }

    /// The next command of a step's freeze at `now_ms`, given its barrier (whether every live
    /// subscriber runs the version it waits for). `None` when there is no freeze or nothing to
    /// do yet.
    ///
    /// Why "every live subscriber" and not the convergence fraction: a subscriber still on the
    /// table before the freeze accepts the old owner's writes; switching while one does lets two
    /// zones write for the same user. Why the switch barrier may be passed at the window: every
    /// live subscriber applied the freeze before the switch, so one that has not applied the
    /// switch still refuses those writes; unfreezing then cannot let the old owner write.
    pub fn decide_freeze(&self, now_ms: u64, barrier: &FreezeBarrier) -> Option<DrainAction> {
        let freeze = self.freeze.as_ref()?;
        if self.status != DrainStatus::Running {
            return None;
        }
        let window = self.plan.freeze_ms.unwrap_or(DEFAULT_FREEZE_MS);
        let held = now_ms.saturating_sub(freeze.frozen_ms);
        match freeze.switched {
            None => {
                if barrier.version != freeze.frozen_version {
                    return None;
                }
                if barrier.all_applied {
                    return Some(match &freeze.moves {
                        Some(moves) => {
                            DrainAction::Move { moves: moves.clone(), verdicts: Vec::new() }
                        }
                        None => DrainAction::Switch { blue_units: freeze.blue_units },
                    });
                }
                (held >= window).then(|| DrainAction::Unfreeze {
                    aborted: true,
                    reason: format!(
                        "freeze of units {} (version {}) not applied by every live subscriber within {window} ms; behind: {}; unfrozen without switching, no unit changed owner; resume to try the step again",
                        freeze.units, freeze.frozen_version, barrier.behind
                    ),
                })
            }
            Some((switched_version, _)) => {
                if barrier.version != switched_version {
                    return None;
                }
                if barrier.all_applied {
                    return Some(DrainAction::Unfreeze {
                        aborted: false,
                        reason: format!(
                            "every live subscriber applied the switch of units {} (version {switched_version}); writes resume",
                            freeze.units
                        ),
                    });
                }
                (held >= window).then(|| DrainAction::Unfreeze {
                    aborted: false,
                    reason: format!(
                        "the switch of units {} (version {switched_version}) is not applied by every live subscriber after {held} ms; behind: {} (they applied the freeze, so they refuse these writes until they catch up); writes resume",
                        freeze.units, barrier.behind
                    ),
                })
            }
        }
    }

    /// The version a step's freeze waits for: the freeze's until it switched, then the
    /// switch's. `None` without a freeze.
    pub fn freeze_barrier_version(&self) -> Option<u64> {
        let freeze = self.freeze.as_ref()?;
        Some(freeze.switched.map_or(freeze.frozen_version, |(v, _)| v))
    }

    /// Whether moving the dial from `blue_units` to `next` fits the receiving zone's capacity.
    ///
    /// Why rolling back is not judged: like the guard, a rollback returns users to where they
    /// were served before the drain began.
    pub fn capacity_verdict(&self, blue_units: u32, next: u32, c: &CapacityInputs) -> Verdict {
        let zone_units =
            |color: ZoneId| if color == ZoneId::BLUE { blue_units } else { c.units - blue_units };
        judge(
            blue_units.abs_diff(next),
            zone_units(self.plan.color),
            zone_units(self.receiving_color()),
            &c.draining,
            &c.receiving,
            c.headroom,
        )
    }

    /// What an evacuation reports (and logs with each step) about the zone it empties, whose
    /// health does not hold it. `None` for maintenance drains, where that health is judged.
    pub fn source_note(&self, draining: &Reading) -> Option<String> {
        if self.plan.mode != DrainMode::Evacuate {
            return None;
        }
        let zone = &self.plan.zone;
        Some(match draining {
            Reading::Known { error_rate, requests } => format!(
                "evacuating {zone}: its error rate is {:.2}% over {requests} requests (not judged)",
                error_rate * 100.0
            ),
            Reading::Unknown { why } => {
                format!("evacuating {zone}: its health is unknown ({why}; not judged)")
            }
        })
    }
}

/// Whether the guard holds a step on `zone`'s reading (`role`: "draining" or "receiving"), and
/// why: unknown health holds without a breach, an error rate above the guard's over at least
/// its minimum of requests is breach number `consecutive_breaches + 1`. `None`: healthy. The
/// two-zone drain and a zone drain among N ([`super::decide_zone_step`]) judge alike.
pub(crate) fn guard_hold(
    guard: &Guard,
    consecutive_breaches: u32,
    zone: &str,
    role: &str,
    reading: &Reading,
) -> Option<(bool, String)> {
    match reading {
        Reading::Unknown { why } => {
            Some((false, format!("holding: health of {role} zone {zone} is unknown ({why})")))
        }
        Reading::Known { error_rate, requests }
            if *requests >= guard.min_requests && *error_rate > guard.max_error_rate =>
        {
            Some((
                true,
                format!(
                    "guard breach {}/{}: {role} zone {zone} has an error rate of {:.2}% over {requests} requests, above {:.2}%",
                    consecutive_breaches + 1,
                    guard.breaches,
                    error_rate * 100.0,
                    guard.max_error_rate * 100.0
                ),
            ))
        }
        Reading::Known { .. } => None,
    }
}

/// One step from `from` toward `to`, never past it.
pub fn step_toward(from: u32, to: u32, step: u32) -> u32 {
    if from < to { from.saturating_add(step).min(to) } else { from.saturating_sub(step).max(to) }
}

/// The other lane of the two-zone dial: blue for green, green for blue.
pub fn counterpart(color: ZoneId) -> ZoneId {
    if color == ZoneId::BLUE { ZoneId::GREEN } else { ZoneId::BLUE }
}
