//! Draining one zone among N, step by step (issue 22: "a drain or evacuation of one zone among
//! three names its receivers or spreads by headroom").
//!
//! The two-zone drain steps a dial; on an N-zone map there is no dial, so a zone drain moves the
//! source zone's units out in slices. Pure, like [`super::Drain::decide`]: time, health and load
//! readings are arguments, and [`decide_zone_step`] says what the next command should be.
//!
//! - **Which units.** Each step takes the source's lowest `step_units` units ([`next_slice`]):
//!   one fixed order, so a step moves only what it must (units of other zones never move) and a
//!   drain run again from the same map moves the same units in the same steps.
//! - **To whom.** The receivers are named, or every other live zone ([`Receivers`],
//!   [`receiving_zones`]). A step's slice is spread over them by free room under capacity
//!   ([`super::spread_by_headroom`], evenly where no capacity is known), each receiver taking a
//!   contiguous part of the slice in receiver order ([`split_slice`]); one step of the whole zone is
//!   the one-version evacuation of `POST /v1/units/evacuate`.
//! - **Guarded like the two-zone drain.** A maintenance drain holds on the source's health too;
//!   an evacuation judges only the receivers. Unknown health holds without a breach, an error
//!   rate above the guard's over enough requests is a breach ([`super::Guard`]), and a receiver
//!   that the step's gain would push over its capacity less headroom holds the step
//!   (`insufficient_capacity`), naming the zone.

use super::capacity::{Capacity, Gain, Verdict, ZoneLoad, judge_gains, spread_by_headroom};
use super::drain::{
    Direction, Drain, DrainAction, DrainMode, DrainStatus, Guard, Reading, StepConvergence,
    guard_hold,
};
use super::unit_map::{UnitMap, UnitMove, UnitSet};
use super::zone::{ZoneId, Zones};

/// Where a zone drain sends the units it moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receivers {
    /// These zones, in this order.
    Named(Vec<ZoneId>),
    /// Every other live zone, in index order.
    Spread,
}

/// A zone drain refused before it starts: the field at fault and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct ZoneDrainError {
    pub field: String,
    pub why: String,
}

fn refuse(field: impl Into<String>, why: impl Into<String>) -> ZoneDrainError {
    ZoneDrainError { field: field.into(), why: why.into() }
}

/// The zones that receive a drain of `source`, checked: the source is a live zone, every named
/// receiver is a live zone other than the source, none is named twice, and at least one is
/// left (a drain may not leave the table without a zone). `step_units` must be at least 1.
pub fn receiving_zones(
    zones: &Zones,
    source: ZoneId,
    receivers: &Receivers,
    step_units: u32,
) -> Result<Vec<ZoneId>, ZoneDrainError> {
    let live = |zone: ZoneId| zones.get(zone).is_some_and(|z| !z.retired);
    if !live(source) {
        return Err(refuse("zone", format!("zone index {} is not a live zone", source.0)));
    }
    if step_units == 0 {
        return Err(refuse("step_units", "a step must move at least one unit"));
    }
    let list: Vec<ZoneId> = match receivers {
        Receivers::Spread => zones.live().filter(|z| *z != source).collect(),
        Receivers::Named(named) => {
            for (i, zone) in named.iter().enumerate() {
                let field = format!("to[{i}]");
                if !live(*zone) {
                    return Err(refuse(field, format!("zone index {} is not a live zone", zone.0)));
                }
                if *zone == source {
                    return Err(refuse(
                        field,
                        format!("`{}` is the zone being drained", zones.zone_of(*zone)),
                    ));
                }
                if named[..i].contains(zone) {
                    return Err(refuse(
                        field,
                        format!("`{}` is named twice", zones.zone_of(*zone)),
                    ));
                }
            }
            named.clone()
        }
    };
    if list.is_empty() {
        return Err(refuse(
            "to",
            "no zone is left to receive the units (a drain may not leave the table without a zone)",
        ));
    }
    Ok(list)
}

/// The source's next `step_units` units, lowest first: the fixed order every step follows.
/// Empty when the source owns nothing (the drain has arrived).
pub fn next_slice(map: &UnitMap, source: ZoneId, step_units: u32) -> Vec<u32> {
    map.units_of(source).take(step_units as usize).collect()
}

/// Splits `slice` (ascending) over `receivers`: `counts[i]` units to `receivers[i]`, each a
/// contiguous part of the slice in receiver order, as moves in `domain`. A receiver with a count
/// of 0 gets no move. The counts must sum to at most the slice's length.
pub fn split_slice(
    slice: &[u32],
    receivers: &[ZoneId],
    counts: &[u32],
    domain: Option<&str>,
) -> Vec<UnitMove> {
    let mut moves = Vec::new();
    let mut next = 0usize;
    for (zone, &count) in receivers.iter().zip(counts) {
        let end = (next + count as usize).min(slice.len());
        if let Some(units) = UnitSet::from_sorted(&slice[next..end]) {
            moves.push(UnitMove { units, zone: *zone, domain: domain.map(str::to_owned) });
        }
        next = end;
    }
    moves
}

/// A zone's free room for spreading: its capacity less headroom less its load now; `None` when
/// that is not known (no capacity configured, or an unknown capacity or load).
pub fn free_room(load: &ZoneLoad, headroom: f64) -> Option<f64> {
    match (&load.capacity, &load.load_rps) {
        (Capacity::Rps(capacity), Ok(rps)) => Some(capacity * (1.0 - headroom) - rps),
        _ => None,
    }
}

/// One receiving zone's readings for a step.
#[derive(Clone, Debug)]
pub struct ReceiverInputs<'a> {
    pub zone: ZoneId,
    pub name: &'a str,
    pub reading: &'a Reading,
    /// Its load and capacity, `None` when no capacity is configured anywhere.
    pub load: Option<&'a ZoneLoad>,
}

/// What the runner observed, for [`decide_zone_step`].
#[derive(Clone, Debug)]
pub struct StepInputs<'a> {
    /// The map of the domain being drained.
    pub map: &'a UnitMap,
    /// `None`: the default domain.
    pub domain: Option<&'a str>,
    pub source: ZoneId,
    pub source_name: &'a str,
    pub source_reading: &'a Reading,
    pub source_load: Option<&'a ZoneLoad>,
    /// The receivers, as [`receiving_zones`] lists them.
    pub receivers: &'a [ReceiverInputs<'a>],
    pub step_units: u32,
    pub mode: DrainMode,
    pub guard: &'a Guard,
    /// Breaches in a row so far (the hold's reason counts this one as the next).
    pub consecutive_breaches: u32,
    /// Fraction of a zone's capacity kept free (0..1).
    pub headroom: f64,
}

/// The next command of a zone drain, as [`decide_zone_step`] decides it.
#[derive(Clone, Debug, PartialEq)]
pub enum ZoneStep {
    /// The source owns no unit of the map.
    Arrived,
    /// Move the next slice: one move per receiver that gets units, with each receiver's
    /// capacity verdict (`Unchecked` without a capacity).
    Move { moves: Vec<UnitMove>, verdicts: Vec<(ZoneId, Verdict)> },
    /// Do not move now: unknown health, a guard breach, or a receiver's capacity.
    Hold { breach: bool, zone: String, reason: String },
}

/// The next step of a zone drain: the source's next slice spread over the receivers by free
/// room, or a hold. The receivers' health is judged first (and the source's, for maintenance),
/// in order, then each receiver's projected load with the units it would gain.
pub fn decide_zone_step(inputs: &StepInputs<'_>) -> ZoneStep {
    let slice = next_slice(inputs.map, inputs.source, inputs.step_units);
    if slice.is_empty() {
        return ZoneStep::Arrived;
    }
    // Chosen again at every step: a receiver whose health is unknown (dead, silent, or idle:
    // owning nothing it reports nothing) gets nothing while another reads known, as
    // `choose_receivers` decides at the start; the step holds on it only when every receiver
    // is unknown. (A drain used to hold forever on a receiver that died after it started.)
    let known = |r: &&ReceiverInputs<'_>| matches!(r.reading, Reading::Known { .. });
    let any_known = inputs.receivers.iter().any(|r| known(&r));
    let receivers: Vec<&ReceiverInputs<'_>> =
        inputs.receivers.iter().filter(|r| !any_known || known(r)).collect();
    let mut health = Vec::with_capacity(receivers.len() + 1);
    if inputs.mode == DrainMode::Maintenance {
        health.push((inputs.source_name, inputs.source_reading, "draining"));
    }
    health.extend(receivers.iter().map(|r| (r.name, r.reading, "receiving")));
    for (zone, reading, role) in health {
        if let Some((breach, reason)) =
            guard_hold(inputs.guard, inputs.consecutive_breaches, zone, role, reading)
        {
            return ZoneStep::Hold { breach, zone: zone.to_owned(), reason };
        }
    }
    let rooms: Vec<Option<f64>> =
        receivers.iter().map(|r| r.load.and_then(|l| free_room(l, inputs.headroom))).collect();
    let counts = spread_by_headroom(slice.len() as u32, &rooms);
    let source_units = inputs.map.count(inputs.source);
    let mut verdicts = Vec::with_capacity(receivers.len());
    for (r, &count) in receivers.iter().zip(&counts) {
        let verdict = match (inputs.source_load, r.load) {
            (Some(source), Some(receiving)) if count > 0 => judge_gains(
                &[Gain { moved_units: count, source_units, source }],
                inputs.map.count(r.zone),
                receiving,
                inputs.headroom,
            ),
            _ => Verdict::Unchecked,
        };
        if verdict.blocks() {
            return ZoneStep::Hold {
                breach: false,
                zone: r.name.to_owned(),
                reason: format!("holding: insufficient_capacity: {}", verdict.explain()),
            };
        }
        verdicts.push((r.zone, verdict));
    }
    let zones: Vec<ZoneId> = receivers.iter().map(|r| r.zone).collect();
    ZoneStep::Move { moves: split_slice(&slice, &zones, &counts, inputs.domain), verdicts }
}

/// What the runner observed for a zone drain among N, for [`Drain::decide_zone`].
#[derive(Clone, Debug)]
pub struct ZoneDrainInputs<'a> {
    /// The map of the drain's domain.
    pub map: &'a UnitMap,
    pub now_ms: u64,
    pub source_reading: &'a Reading,
    pub source_load: Option<&'a ZoneLoad>,
    /// The drain's receivers in its order ([`Drain::receiving_zones`]).
    pub receivers: &'a [ReceiverInputs<'a>],
    pub convergence: &'a StepConvergence,
    /// Fraction of a zone's capacity kept free (0..1).
    pub headroom: f64,
}

impl Drain {
    /// The units the next step of a zone drain among N moves, ascending; empty once it has
    /// arrived where it is heading.
    ///
    /// Forward: the drained zone's lowest units, at most a step, never below the units it keeps
    /// (the plan's target). Back: of the units the zone owned at the start and no longer owns,
    /// the highest, at most a step: the reverse of the forward order, as the dial's rollback
    /// returns the last users moved first.
    pub fn zone_slice(&self, map: &UnitMap) -> Vec<u32> {
        let source = self.plan.color;
        match self.direction {
            Direction::Forward => {
                let have = map.count(source);
                let take =
                    have.saturating_sub(self.plan.target_blue_units).min(self.plan.step_units);
                next_slice(map, source, take)
            }
            Direction::Back => {
                let Some(start) = &self.start_units else { return Vec::new() };
                let mut away: Vec<u32> = start.iter().filter(|u| map.owner(*u) != source).collect();
                let keep = away.len().saturating_sub(self.plan.step_units as usize);
                away.drain(..keep);
                away
            }
        }
    }

    /// The next command of a zone drain among N at `now_ms`: a forward slice spread over the
    /// receivers (guarded like [`decide_zone_step`]), a rollback slice returned to the drained
    /// zone (never guarded, as [`Drain::decide`] explains), a hold or a convergence pause.
    /// `None` when nothing is due. A settling drain is decided by [`Drain::decide`], on its
    /// backlog alone.
    pub fn decide_zone(&self, inputs: &ZoneDrainInputs<'_>) -> Option<DrainAction> {
        if !self.is_due(inputs.now_ms) || self.status != DrainStatus::Running {
            return None;
        }
        if self.freeze.is_some() {
            return None;
        }
        let slice = self.zone_slice(inputs.map);
        let units = UnitSet::from_sorted(&slice)?;
        if let Some(wait) = self.convergence_gate(inputs.now_ms, inputs.convergence) {
            return wait;
        }
        if self.direction == Direction::Back {
            let back = UnitMove { units, zone: self.plan.color, domain: self.plan.domain.clone() };
            return Some(DrainAction::Move { moves: vec![back], verdicts: Vec::new() });
        }
        let step = decide_zone_step(&StepInputs {
            map: inputs.map,
            domain: self.plan.domain.as_deref(),
            source: self.plan.color,
            source_name: &self.plan.zone,
            source_reading: inputs.source_reading,
            source_load: inputs.source_load,
            receivers: inputs.receivers,
            step_units: slice.len() as u32,
            mode: self.plan.mode,
            guard: &self.plan.guard,
            consecutive_breaches: self.consecutive_breaches,
            headroom: inputs.headroom,
        });
        match step {
            ZoneStep::Arrived => None,
            // A loss-less step freezes the slice first; the switch follows on its barrier
            // (`Drain::decide_freeze`), with the same moves.
            ZoneStep::Move { moves, .. } if self.plan.freeze_ms.is_some() => {
                Some(DrainAction::FreezeMoves { moves })
            }
            ZoneStep::Move { moves, verdicts } => Some(DrainAction::Move { moves, verdicts }),
            ZoneStep::Hold { breach, zone, reason } => {
                Some(DrainAction::Hold { breach, zone, reason })
            }
        }
    }
}
