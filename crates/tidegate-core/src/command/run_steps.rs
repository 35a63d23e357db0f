//! A plan run's steps: `PlanStepStarted` begins the next step (a zone move starts its drain
//! here), `PlanStepDone` ends it (a dial, unit-move or pin step takes effect here).

use std::sync::Arc;

use super::describe::{describe_all_maps, describe_share, describe_share_in};
use super::runs::updated;
use super::{Change, CommandError, Outcome, drains, pins, units};
use crate::drain::{DrainPlan, DrainStatus};
use crate::plan::PlanStep;
use crate::plan_run::{PlanRun, RunStatus, StepRecord, ZoneSample};
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
    }
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
    let mut to = format!("done: {}", run.step_label(step));
    if c.table.map != s.table.map {
        to = format!("{to}; {}", describe_share(&c.table));
    }
    if !run.is_active() || run.status == RunStatus::Holding {
        to = format!("{to}; run {}", run.status.as_str());
    }
    updated(c, run, from, to)
}
