//! A drain's steps: `DrainStep` switches the next slice of units; a loss-less drain first
//! freezes it (`DrainFreeze`) and thaws it after the switch (`DrainUnfreeze`). Also the
//! invariant that no units stay frozen once their drain stops ([`thaw_orphans`]).

use super::describe::describe_share_in;
use super::drains::{arrive, finish_if_arrived};
use super::{Change, CommandError, Outcome, State, changed};
use crate::drain::{
    Direction, Drain, DrainStatus, FREEZES_KEPT, FreezeRecord, StepFreeze, step_toward,
};
use crate::table::{DEFAULT_DOMAIN, RoutingTable};
use crate::unit_map::{UnitMap, UnitMove, UnitSet};
use crate::zone::ZoneId;

pub(super) fn step(c: &mut Change, id: u64, blue_units: u32) -> Outcome {
    let s = c.before;
    s.no_units_change()?;
    let (at_ms, version) = (c.at_ms(), c.version());
    let mut drain = s.running_drain(id, "step")?.clone();
    let target = drain.heading_for();
    let map = next_step(s, &drain, blue_units)?;
    let domain = drain.plan.domain.clone();
    // A loss-less step switches only what it froze, and only once.
    let lossless = drain.direction == Direction::Forward && drain.plan.freeze_ms.is_some();
    match &mut drain.freeze {
        Some(f) if f.switched.is_none() && f.blue_units == blue_units => {
            f.switched = Some((version, at_ms));
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
    let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, blue_units);
    c.table.set_map_of(domain.as_deref(), moved);
    if record_step(&mut drain, at_ms, version) && blue_units == target {
        arrive(&mut drain, s.table.units(), at_ms);
    }
    let from = describe_share_in(&s.table, domain.as_deref());
    let to = format!("{} ({})", describe_share_in(&c.table, domain.as_deref()), drain.state_name());
    c.next.insert_drain(drain);
    changed(from, to)
}

/// A zone drain among N moves its next slice: exactly the units [`Drain::zone_slice`] names,
/// forward to the drain's receivers, back to the drained zone, all in the drain's domain. A
/// loss-less step switches only the moves its freeze named, once.
pub(super) fn zone_step(c: &mut Change, id: u64, moves: &[UnitMove]) -> Outcome {
    let s = c.before;
    s.no_units_change()?;
    let (at_ms, version) = (c.at_ms(), c.version());
    let mut drain = s.running_drain(id, "step")?.clone();
    check_zone_moves(s, &drain, moves)?;
    let lossless = drain.direction == Direction::Forward && drain.plan.freeze_ms.is_some();
    match &mut drain.freeze {
        Some(f) if f.switched.is_none() && f.moves.as_deref() == Some(moves) => {
            f.switched = Some((version, at_ms));
        }
        Some(f) => {
            return Err(CommandError::InvalidDrain(format!(
                "drain {id}'s step froze units {}; it switches exactly the moves it froze, once{}",
                f.units,
                if f.switched.is_some() { " (and has switched them)" } else { "" }
            )));
        }
        None if lossless => {
            return Err(CommandError::InvalidDrain(format!(
                "drain {id} moves loss-lessly: a step freezes its units (drain_freeze) before it switches them"
            )));
        }
        None => {}
    }
    let domain = drain.plan.domain.clone();
    let from = describe_map_in(&s.table, domain.as_deref());
    super::units::move_in_table(c, moves)?;
    if record_step(&mut drain, at_ms, version)
        && c.table.map_of(domain.as_deref()).is_some_and(|m| drain.zone_slice(m).is_empty())
    {
        arrive(&mut drain, c.table.units(), at_ms);
    }
    let to = format!("{} ({})", describe_map_in(&c.table, domain.as_deref()), drain.state_name());
    c.next.insert_drain(drain);
    changed(from, to)
}

/// A loss-less step of a zone drain among N begins: the units of its next slice refuse writes
/// until the switch (the same moves, `ZoneDrainStep`) is applied everywhere.
pub(super) fn zone_freeze(c: &mut Change, id: u64, moves: &[UnitMove]) -> Outcome {
    let s = c.before;
    s.no_units_change()?;
    let (at_ms, version) = (c.at_ms(), c.version());
    let mut drain = s.running_drain(id, "freeze")?.clone();
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
    let units = check_zone_moves(s, &drain, moves)?;
    let domain = drain.plan.domain.clone();
    c.table.set_frozen(domain.as_deref(), Some(units.clone()));
    drain.consecutive_breaches = 0;
    drain.next_due_ms = at_ms;
    drain.hold_reason = Some(format!(
        "frozen: units {units} refuse writes until every live subscriber applies version {version}"
    ));
    let from = describe_map_in(&s.table, domain.as_deref());
    let to = format!("{from}; units {units} frozen for the step");
    drain.freeze = Some(StepFreeze {
        blue_units: 0,
        units,
        frozen_version: version,
        frozen_ms: at_ms,
        switched: None,
        moves: Some(moves.to_vec()),
    });
    c.next.insert_drain(drain);
    changed(from, to)
}

/// Checks that `moves` are a zone drain's next step: exactly its next slice, to its receivers
/// (forward) or back to the drained zone, in its domain. Returns the slice.
fn check_zone_moves(s: &State, drain: &Drain, moves: &[UnitMove]) -> Result<UnitSet, CommandError> {
    let id = drain.id;
    let invalid = |why: String| Err(CommandError::InvalidDrain(why));
    let Some(receivers) = &drain.plan.receivers else {
        return invalid(format!(
            "drain {id} steps the blue-green dial (drain_step with blue units), not unit slices"
        ));
    };
    let domain = drain.plan.domain.as_deref();
    let expected = drain.zone_slice(s.domain_map(domain)?);
    let Some(slice) = UnitSet::from_sorted(&expected) else {
        return invalid(format!("drain {id} has no unit left to move where it is heading"));
    };
    let mut got: Vec<u32> = moves.iter().flat_map(|m| m.units.iter()).collect();
    got.sort_unstable();
    if got != expected {
        let got = UnitSet::from_sorted(&got).map_or_else(|| "none".to_owned(), |g| g.to_string());
        return invalid(format!("drain {id}'s next step moves units {slice}, not {got}"));
    }
    for (i, m) in moves.iter().enumerate() {
        if m.domain.as_deref().filter(|d| *d != DEFAULT_DOMAIN) != domain {
            return invalid(format!("moves[{i}]: drain {id} moves units of its own domain only"));
        }
        let allowed = match drain.direction {
            Direction::Forward => receivers.contains(&m.zone),
            Direction::Back => m.zone == drain.plan.color,
        };
        if !allowed {
            return invalid(format!(
                "moves[{i}]: drain {id} {}, not to `{}`",
                match drain.direction {
                    Direction::Forward => "gives units to its receivers only",
                    Direction::Back => "returns units to the drained zone only",
                },
                s.table.zones.zone_of(m.zone)
            ));
        }
    }
    Ok(slice)
}

/// A step (of the dial or of a zone drain) was applied at `version`: count it, clear the guard,
/// and schedule the next decision. Returns whether the drain may arrive now: a loss-less step
/// stays frozen until its unfreeze (due as soon as the switch is applied everywhere), and the
/// drain arrives (or waits its interval) from there.
fn record_step(drain: &mut Drain, at_ms: u64, version: u64) -> bool {
    match drain.direction {
        Direction::Forward => drain.steps_done += 1,
        Direction::Back => drain.steps_done = drain.steps_done.saturating_sub(1),
    }
    drain.consecutive_breaches = 0;
    drain.hold_reason = None;
    drain.last_step_version = Some(version);
    drain.last_step_ms = at_ms;
    if drain.freeze.is_some() {
        drain.next_due_ms = at_ms;
        drain.hold_reason = Some(format!(
            "switched; units stay frozen until every live subscriber applies version {version}"
        ));
        return false;
    }
    drain.next_due_ms = at_ms.saturating_add(drain.plan.interval_ms);
    true
}

/// One domain's map as runs with lanes, named when it is not the default domain.
fn describe_map_in(table: &RoutingTable, domain: Option<&str>) -> String {
    let runs = table.map_of(domain).map(UnitMap::runs).unwrap_or_default();
    let units = crate::unit_map::describe_runs(&runs, |z| table.zones.lane(z).to_owned());
    match domain.filter(|d| *d != DEFAULT_DOMAIN) {
        Some(name) => format!("domain {name}: units {units}"),
        None => format!("units {units}"),
    }
}

pub(super) fn freeze(c: &mut Change, id: u64, blue_units: u32) -> Outcome {
    let s = c.before;
    s.no_units_change()?;
    let (at_ms, version) = (c.at_ms(), c.version());
    let mut drain = s.running_drain(id, "freeze")?.clone();
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
    let map = next_step(s, &drain, blue_units)?;
    let domain = drain.plan.domain.clone();
    let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, blue_units);
    let Some(units) = UnitSet::from_sorted(&map.diff(&moved)) else {
        return Err(CommandError::InvalidDrain(format!(
            "drain {id}'s step to {blue_units} blue units moves no unit"
        )));
    };
    c.table.set_frozen(domain.as_deref(), Some(units.clone()));
    drain.consecutive_breaches = 0;
    drain.next_due_ms = at_ms;
    drain.hold_reason = Some(format!(
        "frozen: units {units} refuse writes until every live subscriber applies version {version}"
    ));
    let from = describe_share_in(&s.table, domain.as_deref());
    let to = format!("{from}; units {units} frozen for the step to {blue_units}");
    drain.freeze = Some(StepFreeze {
        blue_units,
        units,
        frozen_version: version,
        frozen_ms: at_ms,
        switched: None,
        moves: None,
    });
    c.next.insert_drain(drain);
    changed(from, to)
}

pub(super) fn unfreeze(c: &mut Change, id: u64, aborted: bool) -> Outcome {
    let at_ms = c.at_ms();
    let mut drain = c.before.running_drain(id, "unfreeze")?.clone();
    let Some(freeze) = drain.freeze.take() else {
        return Err(CommandError::InvalidDrain(format!("drain {id} has no freeze")));
    };
    if aborted != freeze.switched.is_none() {
        return Err(CommandError::InvalidDrain(format!(
            "drain {id}'s freeze of units {} {}",
            freeze.units,
            if aborted {
                "has switched: it can only be unfrozen"
            } else {
                "has not switched: it can only be aborted back"
            }
        )));
    }
    c.table.set_frozen(drain.plan.domain.as_deref(), None);
    let from = format!("units {} frozen", freeze.units);
    let reason = &c.audit.reason;
    record_freeze(&mut drain, &freeze, at_ms, aborted.then(|| reason.clone()));
    if aborted {
        drain.status = DrainStatus::Paused;
        drain.pause_cause = Some("freeze");
        drain.hold_reason = Some(format!("paused: {reason}"));
        drain.next_due_ms = at_ms;
    } else {
        let switched_ms = freeze.switched.map_or(at_ms, |(_, ms)| ms);
        drain.hold_reason = None;
        drain.next_due_ms = switched_ms.saturating_add(drain.plan.interval_ms).max(at_ms);
        finish_if_arrived(&mut drain, &c.table, at_ms);
    }
    let to = format!(
        "units {} writable ({}{})",
        freeze.units,
        if aborted { "aborted back, not switched; " } else { "" },
        drain.state_name()
    );
    c.next.insert_drain(drain);
    changed(from, to)
}

/// The map of the drain's domain, once `blue_units` is checked to be exactly the drain's next
/// step (a step, and the freeze before it, go one step toward where the drain is heading).
fn next_step<'s>(
    s: &'s State,
    drain: &Drain,
    blue_units: u32,
) -> Result<&'s UnitMap, CommandError> {
    if drain.is_zone_drain() {
        return Err(CommandError::InvalidDrain(format!(
            "drain {} moves unit slices among N zones (zone_drain_step), not the dial",
            drain.id
        )));
    }
    let map = s.domain_map(drain.plan.domain.as_deref())?;
    let now = map.count(ZoneId::BLUE);
    let target = drain.heading_for();
    let expected = step_toward(now, target, drain.plan.step_units);
    if now == target || blue_units != expected {
        return Err(CommandError::DrainStepMismatch { id: drain.id, expected, got: blue_units });
    }
    Ok(map)
}

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

/// Architecture invariant: units are frozen only while a running drain or a loss-less unit move
/// holds their freeze (the two never overlap: a unit move freezes only with no running drain,
/// and no drain steps or starts while it runs). A
/// command that pauses, aborts, rolls back or otherwise stops a drain in the middle of a freeze
/// (an operator's, or a plan run's) thaws its units here, in the same version, and the drain's
/// report says which command ended it; no path leaves units frozen with nobody to thaw them.
pub(super) fn thaw_orphans(next: &mut State, table: &mut RoutingTable, at_ms: u64, action: &str) {
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
    if next.units_change.is_some() {
        // A loss-less unit move holds every frozen unit until its own unfreeze.
        return;
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
