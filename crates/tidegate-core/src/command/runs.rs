//! A plan run's lifecycle: `StartPlanRun`, `PlanRunHold`, `PausePlanRun`, `ResumePlanRun`,
//! `AbortPlanRun`, `FailPlanRun`, `RollbackPlanRun` and `PlanRestore` (the starting table back,
//! after a rollback or a drill's hold). A run's steps are in `run_steps.rs`, its HTTP calls in
//! `run_calls.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::describe::describe_share;
use super::drains::run_again;
use super::{Change, CommandError, Outcome, State};
use crate::drain::{Drain, DrainStatus};
use crate::plan::PlanStep;
use crate::plan_run::{PlanRun, RunStatus, StepRecord};
use crate::table::DEFAULT_DOMAIN;
use crate::zone::ZoneId;

/// Stores `run` in the next state and says the audit's words for it.
pub(super) fn updated(c: &mut Change, run: PlanRun, from: String, to: String) -> Outcome {
    c.next.insert_run(run);
    Ok(Some((from, to)))
}

pub(super) fn start(
    c: &mut Change,
    plan: &str,
    revision: u64,
    drill_hold_ms: Option<u64>,
    restores_maps: bool,
) -> Outcome {
    let s = c.before;
    s.no_active_run()?;
    s.no_units_change()?;
    s.no_active_drain()?;
    let stored = s.plans.get(plan).ok_or_else(|| CommandError::PlanNotFound(plan.to_owned()))?;
    // A record of the release before map restores: its drills of such plans were refused,
    // and a replay refuses them again.
    if drill_hold_ms.is_some()
        && !restores_maps
        && stored.plan.steps.iter().any(|s| matches!(s, PlanStep::MoveUnits { .. }))
    {
        return Err(CommandError::InvalidPlan(
            "a drill restores the table it started from, and a plan with move_units steps restores only with restores_maps; run it, or drill a plan without them".into(),
        ));
    }
    let start_maps = restores_maps.then(|| {
        let mut maps = BTreeMap::new();
        maps.insert(DEFAULT_DOMAIN.to_owned(), s.table.map.clone());
        for (name, map) in s.table.domains.iter() {
            maps.insert(name.clone(), map.clone());
        }
        maps
    });
    if stored.revision != revision {
        return Err(CommandError::PlanRevisionChanged {
            name: plan.to_owned(),
            expected: revision,
            current: stored.revision,
        });
    }
    let run = PlanRun {
        id: s.next_run_id,
        plan: stored.plan.clone(),
        revision,
        drill_hold_ms,
        start_blue_units: s.table.blue_units(),
        start_domain_blue_units: stored
            .plan
            .steps
            .iter()
            .filter_map(PlanStep::named_domain)
            .filter_map(|d| Some((d.to_owned(), s.table.blue_units_in(Some(d))?)))
            .collect(),
        start_maps,
        status: RunStatus::Running,
        step: 0,
        in_step: false,
        drain: None,
        hold_reason: None,
        hold_until_ms: None,
        rolling_back: false,
        pins_before: Vec::new(),
        step_freeze: None,
        steps: Vec::new(),
        restore: None,
        started_ms: c.at_ms(),
        started_by: c.audit.by.clone(),
        reason: c.audit.reason.clone(),
        switched_ms: None,
        finished_ms: None,
        fail_reason: None,
    };
    c.next.next_run_id += 1;
    let kind = if drill_hold_ms.is_some() { "drill" } else { "run" };
    let to = format!(
        "plan {plan} revision {revision}: {kind} {} started at {}",
        run.id,
        describe_share(&s.table)
    );
    updated(c, run, "no active plan run".to_owned(), to)
}

/// A run's current step waits (capacity, a precondition, a backlog). A holding drill holds its
/// restore too (the zone it restores into is failing).
pub(super) fn hold(c: &mut Change, id: u64, reason: &str) -> Outcome {
    let mut run = c.before.run_in(id, &[RunStatus::Running, RunStatus::Holding], "hold")?.clone();
    let from = run.hold_reason.clone().unwrap_or_else(|| "not holding".to_owned());
    run.hold_reason = Some(reason.to_owned());
    updated(c, run, from, reason.to_owned())
}

/// Pauses a run, and its drain with it.
pub(super) fn pause(c: &mut Change, id: u64) -> Outcome {
    let s = c.before;
    let audit = c.audit;
    let mut run = s.run_in(id, &[RunStatus::Running, RunStatus::Paused], "be paused")?.clone();
    if run.status == RunStatus::Paused {
        return Ok(None);
    }
    run.status = RunStatus::Paused;
    run.hold_reason = Some(format!("paused by {}: {}", audit.by, audit.reason));
    if let Some(mut d) = s.linked_drain(&run).filter(|d| d.status == DrainStatus::Running).cloned()
    {
        d.status = DrainStatus::Paused;
        d.pause_cause = Some("operator");
        d.hold_reason = Some(format!("paused with plan run {id} by {}", audit.by));
        c.next.insert_drain(d);
    }
    updated(c, run, "running".to_owned(), "paused".to_owned())
}

/// Resumes a run, and its drain with it.
pub(super) fn resume(c: &mut Change, id: u64) -> Outcome {
    let s = c.before;
    let at_ms = c.at_ms();
    let mut run = s.run_in(id, &[RunStatus::Running, RunStatus::Paused], "be resumed")?.clone();
    if run.status == RunStatus::Running {
        return Ok(None);
    }
    run.status = RunStatus::Running;
    run.hold_reason = None;
    if let Some(mut d) = s.linked_drain(&run).filter(|d| d.status == DrainStatus::Paused).cloned() {
        d.last_step_ms = at_ms;
        run_again(&mut d, &s.table, at_ms);
        c.next.insert_drain(d);
    }
    updated(c, run, "paused".to_owned(), "running".to_owned())
}

pub(super) fn abort(c: &mut Change, id: u64) -> Outcome {
    let s = c.before;
    let mut run = s.live_run(id, "be aborted")?.clone();
    let from = run.status.as_str().to_owned();
    s.stop_linked_drain(&run, &mut c.next, c.audit.at_ms);
    run.status = RunStatus::Aborted;
    run.hold_reason = None;
    run.finished_ms = Some(c.at_ms());
    updated(c, run, from, format!("aborted at {}", describe_share(&s.table)))
}

/// A run cannot go on (its drain was aborted or rolled back).
pub(super) fn fail(c: &mut Change, id: u64, reason: &str) -> Outcome {
    let s = c.before;
    let mut run = s.live_run(id, "fail")?.clone();
    let from = run.status.as_str().to_owned();
    s.stop_linked_drain(&run, &mut c.next, c.audit.at_ms);
    run.status = RunStatus::Failed;
    run.fail_reason = Some(reason.to_owned());
    run.hold_reason = None;
    run.finished_ms = Some(c.at_ms());
    updated(c, run, from, format!("failed: {reason}"))
}

/// Rolls a run back: its drain stops and the starting table is restored next (`PlanRestore`).
pub(super) fn roll_back(c: &mut Change, id: u64) -> Outcome {
    let s = c.before;
    let mut run = s.live_run(id, "roll back")?.clone();
    if run.status == RunStatus::Restoring {
        return Ok(None);
    }
    let from = run.status.as_str().to_owned();
    s.stop_linked_drain(&run, &mut c.next, c.audit.at_ms);
    run.status = RunStatus::Restoring;
    run.rolling_back = true;
    run.hold_reason = Some(format!("rolling back: {}", c.audit.reason));
    updated(c, run, from, "restoring the starting table".to_owned())
}

/// Restores the table a run started from: every dial it moved, and its pins, newest first.
pub(super) fn restore(c: &mut Change, id: u64) -> Outcome {
    let s = c.before;
    let at_ms = c.at_ms();
    let mut run = s.run_in(id, &[RunStatus::Restoring, RunStatus::Holding], "restore")?.clone();
    // A loss-less step's change still in progress would switch after the restore.
    s.no_units_change()?;
    if run.status == RunStatus::Holding && at_ms < run.hold_until_ms.unwrap_or(0) {
        return Err(CommandError::RunState {
            id,
            state: "holding",
            action: "restore before its drill hold is over",
        });
    }
    s.no_active_drain()?;
    let from = describe_share(&s.table);
    let table = &mut c.table;
    if let Some(maps) = &run.start_maps {
        // Every domain's map as it was: unit moves, zone moves and dials alike. Nothing else
        // moved units meanwhile (unit moves, dials and drains are refused while a run is live).
        for (domain, map) in maps {
            table.set_map_of(Some(domain), map.clone());
        }
    } else {
        table.map = table.map.set_count(ZoneId::BLUE, ZoneId::GREEN, run.start_blue_units);
        for (domain, blue) in &run.start_domain_blue_units {
            if let Some(map) = table.map_of(Some(domain)) {
                let restored = map.set_count(ZoneId::BLUE, ZoneId::GREEN, *blue);
                table.set_map_of(Some(domain), restored);
            }
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
    run.status = if run.rolling_back { RunStatus::RolledBack } else { RunStatus::Completed };
    run.hold_reason = None;
    run.finished_ms = Some(at_ms);
    let to = format!("{} (run {})", describe_share(table), run.status.as_str());
    updated(c, run, from, to)
}

impl State {
    /// The run's drain, while it is active.
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
}
