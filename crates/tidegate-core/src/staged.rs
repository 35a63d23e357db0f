//! Staged changes (pure): a change made loss-lessly in three logged phases: freeze the writes
//! it moves, switch once every live subscriber applied the freeze, unfreeze once every live
//! subscriber applied the switch. A channel change ([`crate::ChannelChange`]) and a unit move
//! ([`UnitsChange`]: `PUT /v1/units` or `PUT /v1/dial` with `freeze`) share these phases and
//! their rule, [`Phases::decide`]; a drain step's freeze follows the same rule in
//! `Drain::decide_freeze`.

use super::drain::FreezeBarrier;
use super::unit_map::{UnitMove, UnitSet};
use super::zone::ZoneId;

/// Where a staged change is: frozen at a version (and when), switched at a version once it is,
/// and the window that bounds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phases {
    /// The version that froze the writes, and when.
    pub frozen_version: u64,
    pub frozen_ms: u64,
    /// The freeze's maximum window: a freeze not applied everywhere by then is undone without
    /// switching; a switch not applied everywhere by then is unfrozen anyway.
    pub window_ms: u64,
    /// The version that switched the change, and when, once switched.
    pub switched: Option<(u64, u64)>,
}

/// What a staged change does next.
#[derive(Clone, Debug, PartialEq)]
pub enum StagedStep {
    /// Every live subscriber applied the freeze: make the change.
    Switch,
    /// End the freeze: after the switch, or `aborted` back without switching.
    Unfreeze { aborted: bool, reason: String },
}

impl Phases {
    /// The version the barrier waits for: the freeze's until it switched, then the switch's.
    pub fn barrier_version(&self) -> u64 {
        self.switched.map_or(self.frozen_version, |(v, _)| v)
    }

    /// The next phase at `now_ms`, given the barrier (whether every live subscriber runs the
    /// version it waits for) of the change called `what`; `unchanged` says what an undone change
    /// leaves. The reasoning is a drain step's ([`crate::Drain::decide_freeze`]): the switch
    /// waits for every live subscriber, never a fraction; past the window, an unswitched freeze
    /// is undone (nothing moved), and a switched one is unfrozen (every subscriber applied the
    /// freeze, so a late one still refuses these writes).
    pub fn decide(
        &self,
        now_ms: u64,
        barrier: &FreezeBarrier,
        what: &str,
        unchanged: &str,
    ) -> Option<StagedStep> {
        if barrier.version != self.barrier_version() {
            return None;
        }
        let held = now_ms.saturating_sub(self.frozen_ms);
        match self.switched {
            None if barrier.all_applied => Some(StagedStep::Switch),
            None => (held >= self.window_ms).then(|| StagedStep::Unfreeze {
                aborted: true,
                reason: format!(
                    "the freeze of {what} (version {}) was not applied by every live subscriber within {} ms; behind: {}; unfrozen without switching, {unchanged}",
                    self.frozen_version, self.window_ms, barrier.behind
                ),
            }),
            Some((v, _)) if barrier.all_applied => Some(StagedStep::Unfreeze {
                aborted: false,
                reason: format!(
                    "every live subscriber applied the switch of {what} (version {v}); its writes resume"
                ),
            }),
            Some((v, _)) => (held >= self.window_ms).then(|| StagedStep::Unfreeze {
                aborted: false,
                reason: format!(
                    "the switch of {what} (version {v}) is not applied by every live subscriber after {held} ms; behind: {} (they applied the freeze, so they refuse these writes until they catch up); its writes resume",
                    barrier.behind
                ),
            }),
        }
    }
}

/// One user's pin as a loss-less change makes it: pinned to `zone`, or unpinned (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinChange {
    pub user_id: String,
    pub zone: Option<ZoneId>,
}

/// A loss-less change of owner in progress, in the replicated state: its unit moves (switched
/// as one `MoveUnits` would make them), its pin changes (made at the same switch) and its
/// phases. Its frozen units are the table's `frozen`: the units that change owner and the units
/// of the users whose pin changes their owner.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitsChange {
    pub moves: Vec<UnitMove>,
    pub pins: Vec<PinChange>,
    pub phases: Phases,
    /// The plan run and step this change is (a loss-less plan step), which its unfreeze ends.
    pub run: Option<(u64, usize)>,
    /// The global writer the switch sets (a loss-less global-writer move): global writes are
    /// frozen from the freeze to the unfreeze.
    pub global: Option<crate::global_writer::GlobalWriter>,
    /// A hold (a freeze in place, `HoldUnits`): it moves nothing, and once every live
    /// subscriber applied it (its "switch": held) it lasts until released, or at most this long.
    pub hold_ms: Option<u64>,
}

/// Units a hold freezes in place, in one domain (`None`: the default domain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldUnits {
    pub domain: Option<String>,
    pub units: UnitSet,
}

/// `units 0-19 in default, global writes`: what a hold freezes, for labels and the audit.
pub fn describe_held(units: &[HeldUnits], global: bool) -> String {
    let mut words: Vec<String> = units
        .iter()
        .map(|h| format!("units {} in {}", h.units, h.domain.as_deref().unwrap_or("default")))
        .collect();
    if global {
        words.push("global writes".into());
    }
    words.join(", ")
}

/// The longest a hold may last once held: long enough for a data-layer action (a replica's
/// catch-up and promote), short enough that a forgotten hold does not refuse writes for a day.
pub const MAX_HOLD_MS: u64 = 3_600_000;

impl UnitsChange {
    /// Whether this is a hold (a freeze in place) that every live subscriber has applied: the
    /// writes of its units (and global writes, if it holds them) are refused everywhere, so a
    /// change of their owner may be made at once inside it.
    pub fn is_held(&self) -> bool {
        self.hold_ms.is_some() && self.phases.switched.is_some()
    }

    /// The next phase at `now_ms`, given the barrier (see [`Phases::decide`]). A hold is "switched"
    /// (held) once every live subscriber applied its freeze, and then ends only when released or
    /// after `hold_ms`.
    pub fn decide(&self, now_ms: u64, barrier: &FreezeBarrier) -> Option<StagedStep> {
        if let Some(hold_ms) = self.hold_ms {
            return match self.phases.switched {
                None => self.phases.decide(now_ms, barrier, "the hold", "nothing was held"),
                Some((v, at)) => (now_ms.saturating_sub(at) >= hold_ms).then(|| {
                    StagedStep::Unfreeze {
                        aborted: false,
                        reason: format!(
                            "the hold (held since version {v}) ran its longest, {hold_ms} ms, without a release; its writes resume"
                        ),
                    }
                }),
            };
        }
        if self.global.is_some() && self.moves.is_empty() && self.pins.is_empty() {
            self.phases.decide(
                now_ms,
                barrier,
                "the global-writer move",
                "the global writer is unchanged",
            )
        } else if self.moves.is_empty() {
            self.phases.decide(now_ms, barrier, "the pin change", "no user changed owner")
        } else {
            self.phases.decide(now_ms, barrier, "the unit move", "no unit changed owner")
        }
    }
}
