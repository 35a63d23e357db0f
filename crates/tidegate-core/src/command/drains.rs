//! A drain's lifecycle: `StartDrain`, `DrainHold` (the guard), `PauseDrain`, `ResumeDrain`,
//! `AbortDrain`, `RollbackDrain` and `CompleteDrain`. Its steps and their freezes are in
//! `drain_steps.rs`.

use super::describe::describe_share;
use super::{Change, CommandError, Outcome, changed};
use crate::dial::percent_of;
use crate::drain::{Direction, Drain, DrainMode, DrainPlan, DrainStatus, MAX_FREEZE_MS, OnBreach};
use crate::table::RoutingTable;
use crate::unit_map::UnitSet;
use crate::zone_drain::{Receivers, receiving_zones};

pub(super) fn start(c: &mut Change, plan: &DrainPlan) -> Outcome {
    c.before.no_active_drain()?;
    c.before.no_active_run()?;
    c.before.no_units_change()?;
    let units = c.before.table.units();
    let zones = c.before.table.zones.clone();
    let to = describe_plan(begin(c, plan)?, units, &zones);
    changed("no active drain", to)
}

/// Checks `plan` and starts its drain under the next drain ID, running from now: the drain of
/// `StartDrain` and of a plan run's zone-move step. The caller has refused an active drain.
pub(super) fn begin<'c>(c: &'c mut Change, plan: &DrainPlan) -> Result<&'c Drain, CommandError> {
    let s = c.before;
    validate_drain(plan, &s.table)?;
    let at_ms = c.at_ms();
    let id = s.next_drain_id;
    c.next.next_drain_id += 1;
    c.next.insert_drain(Drain {
        id,
        plan: plan.clone(),
        start_blue_units: drain_units(&s.table, plan),
        start_units: plan.receivers.as_ref().and_then(|_| {
            let map = s.table.map_of(plan.domain.as_deref())?;
            UnitSet::from_sorted(&map.units_of(plan.color).collect::<Vec<_>>())
        }),
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
        started_by: c.audit.by.clone(),
        reason: c.audit.reason.clone(),
        finished_ms: None,
        freeze: None,
        freezes: Vec::new(),
    });
    c.next.drains.get(&id).ok_or(CommandError::DrainNotFound(id))
}

/// The guard held a step: unknown health, or a breach, which after `guard.breaches` in a row
/// pauses the drain or turns it back.
pub(super) fn hold(c: &mut Change, id: u64, breach: bool, reason: &str) -> Outcome {
    let at_ms = c.at_ms();
    let mut drain = c.before.running_drain(id, "hold")?.clone();
    let from = drain.state_name().to_owned();
    drain.next_due_ms = at_ms.saturating_add(drain.plan.interval_ms);
    drain.hold_reason = Some(reason.to_owned());
    if breach {
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
                    // Before its first step there is nothing to step back: done.
                    finish_if_arrived(&mut drain, &c.before.table, at_ms);
                }
            }
        }
    }
    let to = format!("{}: {}", drain.state_name(), drain.hold_reason.as_deref().unwrap_or(""));
    c.next.insert_drain(drain);
    changed(from, to)
}

pub(super) fn pause(c: &mut Change, id: u64) -> Outcome {
    let mut drain = c.before.live_drain(id, "be paused")?.clone();
    if drain.status == DrainStatus::Paused {
        return Ok(None);
    }
    let audit = c.audit;
    drain.status = DrainStatus::Paused;
    // The runner pauses as `drain:<id>` only when a step failed to converge.
    let by_runner = audit.by.starts_with("drain:");
    drain.pause_cause = Some(if by_runner { "convergence" } else { "operator" });
    drain.hold_reason = Some(format!("paused by {}: {}", audit.by, audit.reason));
    c.next.insert_drain(drain);
    changed("running", "paused")
}

pub(super) fn resume(c: &mut Change, id: u64) -> Outcome {
    let at_ms = c.at_ms();
    let mut drain = c.before.live_drain(id, "be resumed")?.clone();
    if drain.status == DrainStatus::Running {
        return Ok(None);
    }
    // Resuming a drain the convergence gate paused is the operator's decision to go on without
    // the stragglers it named: the gate is waived for that step (it used to restart the
    // timeout, so a resume waited a full timeout and paused again). Other pauses keep the step
    // clock: a timeout already spent stays spent.
    if drain.pause_cause == Some("convergence") {
        drain.last_step_version = None;
    }
    run_again(&mut drain, &c.before.table, at_ms);
    let to = drain.state_name().to_owned();
    c.next.insert_drain(drain);
    changed("paused", to)
}

pub(super) fn abort(c: &mut Change, id: u64) -> Outcome {
    let mut drain = c.before.live_drain(id, "be aborted")?.clone();
    let from = drain.state_name().to_owned();
    drain.status = DrainStatus::Aborted;
    drain.hold_reason = None;
    drain.finished_ms = Some(c.at_ms());
    c.next.insert_drain(drain);
    changed(from, format!("aborted at {}", describe_share(&c.before.table)))
}

pub(super) fn roll_back(c: &mut Change, id: u64) -> Outcome {
    let at_ms = c.at_ms();
    let mut drain = c.before.live_drain(id, "roll back")?.clone();
    if drain.direction == Direction::Back && drain.status == DrainStatus::Running {
        return Ok(None);
    }
    let from = drain.state_name().to_owned();
    drain.direction = Direction::Back;
    run_again(&mut drain, &c.before.table, at_ms);
    let to = drain.state_name().to_owned();
    c.next.insert_drain(drain);
    changed(from, to)
}

/// A settling drain is done: its zone's backlog is consumed.
pub(super) fn complete(c: &mut Change, id: u64) -> Outcome {
    let mut drain = c.before.live_drain(id, "complete")?.clone();
    if drain.status != DrainStatus::Settling {
        return Err(CommandError::DrainNotRunning {
            id,
            state: drain.state_name(),
            action: "complete (only a settling drain can)",
        });
    }
    drain.status = DrainStatus::Completed;
    drain.hold_reason = None;
    drain.finished_ms = Some(c.at_ms());
    c.next.insert_drain(drain);
    changed("settling", "completed")
}

/// A paused, held or turned drain runs again from now, with a clean guard and no hold or pause
/// cause; if it is already where it is heading, it arrives at once.
pub(super) fn run_again(drain: &mut Drain, table: &RoutingTable, at_ms: u64) {
    drain.status = DrainStatus::Running;
    drain.consecutive_breaches = 0;
    drain.hold_reason = None;
    drain.pause_cause = None;
    drain.next_due_ms = at_ms;
    finish_if_arrived(drain, table, at_ms);
}

/// A drain already at its destination when resumed or rolled back arrives at once.
pub(super) fn finish_if_arrived(drain: &mut Drain, table: &RoutingTable, at_ms: u64) {
    let arrived = if drain.is_zone_drain() {
        table.map_of(drain.plan.domain.as_deref()).is_some_and(|m| drain.zone_slice(m).is_empty())
    } else {
        drain_units(table, &drain.plan) == drain.heading_for()
    };
    if arrived {
        arrive(drain, table.units(), at_ms);
    }
}

/// Blue units in the domain a drain moves (a drain's domain exists: `validate_drain` checked
/// it, and domains are never removed); on a zone drain among N, the drained zone's units.
fn drain_units(table: &RoutingTable, plan: &DrainPlan) -> u32 {
    if plan.receivers.is_some() {
        return table.map_of(plan.domain.as_deref()).map_or(0, |m| m.count(plan.color));
    }
    table.blue_units_in(plan.domain.as_deref()).unwrap_or_else(|| table.blue_units())
}

/// The drain reached where it was heading: rolled back, completed, or, when it emptied its
/// zone, settling until the zone's message backlog is consumed.
pub(super) fn arrive(drain: &mut Drain, units: u32, at_ms: u64) {
    drain.status = match drain.direction {
        Direction::Back => DrainStatus::RolledBack,
        // Lanes follow the default domain: only its drain waits for the zone's backlog (a named
        // domain's users leaving a zone empty no lane half).
        Direction::Forward if drain.empties_zone(units) && drain.plan.domain.is_none() => {
            DrainStatus::Settling
        }
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

fn validate_drain(plan: &DrainPlan, table: &RoutingTable) -> Result<(), CommandError> {
    let invalid = |why: String| Err(CommandError::InvalidDrain(why));
    if let Some(receivers) = &plan.receivers {
        validate_zone_drain(plan, receivers, table)?;
    } else if !table.zones.is_two() {
        return Err(CommandError::NeedsTwoZones("a drain"));
    }
    if table.zones.color_in(&plan.zone) != Some(plan.color) || !table.zones.contains(plan.color) {
        return invalid(format!(
            "zone `{}` does not run the {} lane",
            plan.zone,
            table.zones.get(plan.color).map_or("unknown", |z| z.lane.as_str())
        ));
    }
    if plan.target_blue_units > table.units() {
        return invalid(format!("the target is outside 0..={} units", table.units()));
    }
    if table.map_of(plan.domain.as_deref()).is_none() {
        return Err(CommandError::UnknownDomain(plan.domain.clone().unwrap_or_default()));
    }
    if plan.target_blue_units == drain_units(table, plan) {
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
    if let Some(window) = plan.freeze_ms
        && !(1..=MAX_FREEZE_MS).contains(&window)
    {
        return invalid(format!("the freeze window must be 1 to {MAX_FREEZE_MS} ms"));
    }
    Ok(())
}

/// A zone drain among N: on a table of more (or fewer) than two zones, with receivers that
/// [`receiving_zones`] accepts.
fn validate_zone_drain(
    plan: &DrainPlan,
    receivers: &[crate::zone::ZoneId],
    table: &RoutingTable,
) -> Result<(), CommandError> {
    let invalid = |why: String| Err(CommandError::InvalidDrain(why));
    if table.zones.is_two() {
        return invalid(
            "a two-zone table drains by its blue-green dial; receivers are for tables of three or more zones"
                .to_owned(),
        );
    }
    let named = Receivers::Named(receivers.to_vec());
    if let Err(e) = receiving_zones(&table.zones, plan.color, &named, plan.step_units.max(1)) {
        return invalid(e.to_string());
    }
    if let Some(map) = table.map_of(plan.domain.as_deref())
        && plan.target_blue_units >= map.count(plan.color)
    {
        return invalid(format!(
            "zone `{}` owns {} units: a drain to {} units moves none",
            plan.zone,
            map.count(plan.color),
            plan.target_blue_units
        ));
    }
    Ok(())
}

fn describe_plan(drain: &Drain, units: u32, zones: &crate::zone::Zones) -> String {
    let plan = &drain.plan;
    let kind = match plan.mode {
        DrainMode::Maintenance => "drain",
        DrainMode::Evacuate => "evacuation (drain)",
    };
    let mut domain = plan.domain.as_deref().map(|d| format!(" in domain {d}")).unwrap_or_default();
    if let Some(receivers) = &plan.receivers {
        let names: Vec<&str> = receivers.iter().map(|z| zones.zone_of(*z)).collect();
        domain.push_str(&format!(" to {}", names.join(", ")));
    }
    format!(
        "{} {} of {}{domain}: {}% -> {}% in steps of {}% every {} ms (guard: error rate <= {}% with >= {} requests, {} breach(es) -> {})",
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
