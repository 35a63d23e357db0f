//! A plan run's steps: `PlanStepStarted` begins the next step (a zone move starts its drain
//! here), `PlanStepDone` ends it (a dial, unit-move or pin step takes effect here).

use std::sync::Arc;

use super::describe::{describe_all_maps, describe_share, describe_share_in};
use super::runs::updated;
use super::{Change, CommandError, Outcome, drains, pins, units};
use crate::drain::{DrainPlan, DrainStatus};
use crate::plan::PlanStep;
use crate::plan_run::{PlanRun, RunStatus, StepRecord, ZoneSample};
use crate::staged::PinChange;
use crate::zone::ZoneId;

pub(super) fn start(
    c: &mut Change,
    id: u64,
    step: usize,
    drain: Option<&DrainPlan>,
    samples: &[ZoneSample],
) -> Outcome {
    let s = c.before;
    let at_ms = c.at_ms();
    let mut run = s.run_in(id, &[RunStatus::Running], "start a step")?.clone();
    if run.in_step || step != run.step || step >= run.plan.steps.len() {
        let expected = if run.in_step { run.step + 1 } else { run.step };
        return Err(CommandError::RunStepMismatch { id, expected, got: step });
    }
    let mut drain_id = None;
    if let Some(plan) = drain {
        let PlanStep::MoveZone { zone, mode, .. } = &run.plan.steps[step] else {
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
        s.no_active_drain()?;
        drain_id = Some(drains::begin(c, plan)?.id);
    }
    run.in_step = true;
    run.drain = drain_id;
    run.hold_reason = None;
    run.steps.push(StepRecord {
        index: step,
        started_ms: at_ms,
        converged_ms: None,
        done_ms: None,
        drain: drain_id,
        samples: vec![(at_ms, samples.to_vec())],
        calls: Vec::new(),
    });
    let label = format!("step {} of {}: {}", step + 1, run.plan.steps.len(), run.step_label(step));
    let to = match drain_id {
        Some(d) => format!("{label} (drain {d})"),
        None => label,
    };
    updated(c, run, format!("plan run {id} between steps"), to)
}

pub(super) fn done(
    c: &mut Change,
    id: u64,
    step: usize,
    converged_ms: Option<u64>,
    samples: &[ZoneSample],
) -> Outcome {
    let s = c.before;
    let at_ms = c.at_ms();
    let mut run = s.run_in(id, &[RunStatus::Running], "finish a step")?.clone();
    if !run.in_step || step != run.step {
        let expected = run.step;
        return Err(CommandError::RunStepMismatch { id, expected, got: step });
    }
    let mut from = format!("step {} of {}", step + 1, run.plan.steps.len());
    match &run.plan.steps[step] {
        PlanStep::MoveZone { .. } => {
            if let Some(d) = run.drain.and_then(|d| s.drains.get(&d))
                && d.status != DrainStatus::Completed
            {
                return Err(CommandError::RunState {
                    id,
                    state: "waiting for its drain",
                    action: "finish the step before drain completes",
                });
            }
        }
        dial @ PlanStep::Dial { .. } => {
            s.no_active_drain()?;
            let domain = dial.named_domain();
            let map = s.domain_map(domain)?;
            let to = PlanRun::step_target(
                dial,
                &s.table.zones,
                s.table.units(),
                map.count(ZoneId::BLUE),
            );
            from = describe_share_in(&s.table, domain);
            let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, to);
            c.table.set_map_of(domain, moved);
        }
        PlanStep::MoveUnits { moves } => {
            s.no_active_drain()?;
            let resolved = units::resolve(&s.table.zones, moves)?;
            units::move_in_table(c, &resolved)?;
            from = describe_all_maps(&s.table);
        }
        PlanStep::Pin { user_id, color } => {
            let before = pins::check_pin(&s.table, user_id)?;
            pins::check_room(&s.table, before)?;
            run.pins_before.push((user_id.clone(), before));
            Arc::make_mut(&mut c.table.pins).insert(user_id.clone(), *color);
        }
        PlanStep::Unpin { user_id } => {
            // Unpinning a user who is not pinned is already done.
            if let Some(before) = Arc::make_mut(&mut c.table.pins).remove(user_id) {
                run.pins_before.push((user_id.clone(), Some(before)));
            }
        }
        PlanStep::Http(_) => {
            if !run.current_calls().last().is_some_and(|a| a.ok) {
                return Err(CommandError::RunState {
                    id,
                    state: "waiting for its call",
                    action: "finish the step before a call succeeded",
                });
            }
        }
        PlanStep::WaitConsumed { .. } | PlanStep::WaitPrecondition { .. } => {}
        PlanStep::Hold { .. } => {
            return Err(CommandError::RunState {
                id,
                state: "at a hold step",
                action: "finish it before every live subscriber has the freeze (its switch ends it)",
            });
        }
        PlanStep::Release => {
            if let Some(released) = units::release_in(c) {
                from = format!("{from}; {released}");
            }
        }
    }
    finish(&mut run, at_ms, converged_ms, samples);
    let mut to = format!("done: {}", run.step_label(step));
    if c.table.map != s.table.map {
        to = format!("{to}; {}", describe_share(&c.table));
    }
    if !run.is_active() || run.status == RunStatus::Holding {
        to = format!("{to}; run {}", run.status.as_str());
    }
    updated(c, run, from, to)
}

/// Ends the current step of `run` at `at_ms`: its record, then the next step, or the run's
/// switch (completed, or a drill's hold). `PlanStepDone` and the unfreeze of a loss-less step
/// end steps here.
pub(super) fn finish(
    run: &mut PlanRun,
    at_ms: u64,
    converged_ms: Option<u64>,
    samples: &[ZoneSample],
) {
    if let Some(record) = run.steps.last_mut() {
        record.done_ms = Some(at_ms);
        // Only a measured convergence time: a report used to show the drain's last step (or
        // the step's end) as "converged" when nobody measured it, and said "converged +9.1 s,
        // RTO met" while the last client acked at +12.1 s.
        record.converged_ms = converged_ms;
        record.samples.push((at_ms, samples.to_vec()));
    }
    run.in_step = false;
    run.drain = None;
    run.hold_reason = None;
    run.step_freeze = None;
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
}

/// `PlanStepFreeze`: a dial, unit-move, pin or unpin step of a plan with a `freeze_window`
/// begins loss-lessly. Its change of owner is frozen as `FreezeUnits` freezes a unit move (the
/// units that change owner, the units of users whose pin changes their owner); the staged loop
/// switches it once every live subscriber has the freeze, and its unfreeze ends the step. A
/// step that changes no owner (a dial at its target already) is done at once, as
/// `PlanStepDone` does it.
pub(super) fn freeze(c: &mut Change, id: u64, step: usize) -> Outcome {
    let s = c.before;
    let mut run = s.run_in(id, &[RunStatus::Running], "freeze a step")?.clone();
    if !run.in_step || step != run.step || run.step_freeze.is_some() {
        let expected = run.step;
        return Err(CommandError::RunStepMismatch { id, expected, got: step });
    }
    let Some(window_ms) = run.plan.freeze_ms else {
        return Err(CommandError::RunState {
            id,
            state: "without a freeze_window",
            action: "freeze a step",
        });
    };
    let (moves, pins) = match &run.plan.steps[step] {
        dial @ PlanStep::Dial { .. } => {
            s.no_active_drain()?;
            let domain = dial.named_domain();
            let map = s.domain_map(domain)?;
            let to = PlanRun::step_target(
                dial,
                &s.table.zones,
                s.table.units(),
                map.count(ZoneId::BLUE),
            );
            let next = map.set_count(ZoneId::BLUE, ZoneId::GREEN, to);
            let units = crate::unit_map::UnitSet::from_sorted(&map.diff(&next)).unwrap_or_default();
            if units.is_empty() {
                return done(c, id, step, None, &[]);
            }
            let zone = if to < map.count(ZoneId::BLUE) { ZoneId::GREEN } else { ZoneId::BLUE };
            let domain = domain.map(str::to_owned);
            (vec![crate::unit_map::UnitMove { units, zone, domain }], Vec::new())
        }
        PlanStep::MoveUnits { moves } => {
            s.no_active_drain()?;
            (units::resolve(&s.table.zones, moves)?, Vec::new())
        }
        PlanStep::Pin { user_id, color } => {
            let before = pins::check_pin(&s.table, user_id)?;
            pins::check_room(&s.table, before)?;
            run.pins_before.push((user_id.clone(), before));
            (Vec::new(), vec![PinChange { user_id: user_id.clone(), zone: Some(*color) }])
        }
        PlanStep::Unpin { user_id } => match s.table.pins.get(user_id) {
            Some(before) => {
                run.pins_before.push((user_id.clone(), Some(*before)));
                (Vec::new(), vec![PinChange { user_id: user_id.clone(), zone: None }])
            }
            None => return done(c, id, step, None, &[]),
        },
        PlanStep::Hold { units: held, global, hold_ms } => {
            let (held, global, hold_ms) = (held.clone(), *global, *hold_ms);
            let run_step = Some((id, step));
            let Some((_, frozen)) =
                units::hold_for(c, &held, global, window_ms, hold_ms, run_step)?
            else {
                return done(c, id, step, None, &[]);
            };
            run.step_freeze = Some(c.version());
            let label =
                format!("step {} of {}: {}", step + 1, run.plan.steps.len(), run.step_label(step));
            return updated(c, run, label, frozen);
        }
        _ => {
            return Err(CommandError::RunState {
                id,
                state: "at a step that moves no owner",
                action: "freeze it",
            });
        }
    };
    let staging = units::Staging {
        moves: &moves,
        pins: &pins,
        global: None,
        window_ms,
        run: Some((id, step)),
    };
    let Some((_, frozen)) = units::begin(c, staging)? else {
        // Nothing changes owner (a pin to the zone the map gives its user): done at once.
        return done(c, id, step, None, &[]);
    };
    if c.next.units_change.as_ref().is_none_or(|u| u.phases.frozen_version != c.version()) {
        // Made at once inside the plan's held hold, which froze everything it moves.
        finish(&mut run, c.at_ms(), None, &[]);
        let label = format!(
            "step {} of {}: {} (inside the hold)",
            step + 1,
            run.plan.steps.len(),
            run.step_label(step)
        );
        return updated(c, run, label, frozen);
    }
    run.step_freeze = Some(c.version());
    let label = format!("step {} of {}: {}", step + 1, run.plan.steps.len(), run.step_label(step));
    updated(c, run, label, frozen)
}
