//! The drain runner: the loop that reads the clock and zone health, and submits drain steps.
//!
//! All decisions are made by the pure `Drain::decide` (`Drain::decide_zone` for a zone drain
//! among N); this loop only does I/O. It wakes every
//! tick. When the active drain is due, it reads its zones' health (on a blocking thread, since the
//! Prometheus source does HTTP), asks the core what to do, and submits that through the coordinator
//! like any other command. The command is logged and audited as `drain:<id>`. After a restart the
//! loop picks up from the replayed state, so a step is never repeated or skipped.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{
    Audit, Command, CommandError, Direction, Drain, DrainAction, DrainMode, DrainStatus, Envelope,
    Inputs, MAX_REASON_BYTES, Reading, ReceiverInputs, RoutingTable, StepConvergence, UnitMove,
    ZoneDrainInputs,
};
use crate::service::capacity::Capacities;
use crate::service::coordinator::{Coordinator, SubmitError};
use crate::service::health::Health;
use crate::service::lane_membership::Lanes;
use crate::service::subscribers::{Barrier, Subscribers, name_some};
use crate::telemetry;

/// What the runner reads and writes through.
pub struct Runner {
    pub coordinator: Arc<Coordinator>,
    pub health: Arc<Health>,
    pub subscribers: Arc<Subscribers>,
    /// The MQ lanes, for the drained zone's backlog (a settling drain waits for it).
    pub lanes: Arc<Lanes>,
    /// Zone load and capacity: a forward step that would overload the receiving zone holds.
    pub capacities: Arc<Capacities>,
    /// Required fraction of subscribers on a step's version before the next step (0 = off).
    pub convergence_fraction: f64,
    pub convergence_timeout_ms: u64,
    pub tick: Duration,
    /// The clock, injected so tests can drive it.
    pub now_ms: fn() -> u64,
}

/// Runs until `shutdown` completes.
pub async fn run(runner: Runner, shutdown: impl Future<Output = ()>) {
    let Runner { coordinator, tick, now_ms, .. } = &runner;
    let (coordinator, tick, now_ms) = (Arc::clone(coordinator), *tick, *now_ms);
    tokio::pin!(shutdown);
    // Repeated identical "health unknown" holds are logged once; after that the loop only waits
    // out the interval (remembered here), so the log does not fill with copies of one sentence.
    let mut quiet_until: HashMap<u64, u64> = HashMap::new();
    // The first tick comes one period after start, not at once: a freshly started process (or
    // test client) gets a moment before the first decision.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let now = now_ms();
        let state = coordinator.state();
        let Some(drain) = state.active_drain().cloned() else { continue };
        if !drain.is_due(now) || quiet_until.get(&drain.id).is_some_and(|until| now < *until) {
            continue;
        }
        // A named domain's drain reads and steps that domain's dial: judge it on the table as
        // the domain sees it (its map in the default place).
        let Some(view) = state.table().view_of(drain.plan.domain.as_deref()) else { continue };
        let table_arc = Arc::new(view);
        let table = &*table_arc;
        // A loss-less step in progress waits on its barrier alone: every live subscriber on the
        // freeze's version before the switch, on the switch's before the unfreeze.
        if let Some(version) = drain.freeze_barrier_version() {
            let counted = freeze_barrier(&runner, &drain, version, now);
            let barrier = counted.freeze_barrier();
            let command = match drain.decide_freeze(now, &barrier) {
                Some(DrainAction::Switch { blue_units }) => {
                    let reason = format!(
                        "step {} of {}: {} (the freeze); switching to {blue_units} blue units",
                        drain.steps_done + 1,
                        drain.steps_total(),
                        counted.passed_because()
                    );
                    (Command::DrainStep { drain: drain.id, blue_units }, reason)
                }
                Some(DrainAction::Move { moves, .. }) => {
                    let reason = format!(
                        "step {} of {}: {} (the freeze); moving units {}",
                        drain.steps_done + 1,
                        drain.steps_total(),
                        counted.passed_because(),
                        describe_moves(&moves, table)
                    );
                    (Command::ZoneDrainStep { drain: drain.id, moves }, reason)
                }
                Some(DrainAction::Unfreeze { aborted, reason }) => {
                    if aborted {
                        telemetry::count_drain_hold(&drain.plan.zone, false);
                    }
                    (Command::DrainUnfreeze { drain: drain.id, aborted }, reason)
                }
                _ => continue,
            };
            tracing::info!(
                drain = drain.id,
                action = command.0.action(),
                barrier_version = version,
                all_applied = barrier.all_applied,
                "drain freeze phase"
            );
            submit(&coordinator, state.version(), drain.id, now, command.0, command.1).await;
            continue;
        }
        if drain.status == DrainStatus::Settling {
            // Only the backlog matters now; health is not read (a Prometheus source would be
            // queried on every tick otherwise).
            // The step that emptied the zone was logged at `last_step_ms`: only a lag reading
            // started after it can say the backlog is consumed.
            let backlog = runner.lanes.total_half_lag(drain.plan.color, drain.last_step_ms, now);
            let unread = Reading::Unknown { why: "not read while settling".into() };
            let inputs = Inputs {
                blue_units: table.blue_units(),
                now_ms: now,
                receiving_zone: "",
                draining: &unread,
                receiving: &unread,
                convergence: &StepConvergence::Disabled,
                backlog,
                capacity: None,
            };
            if drain.decide(&inputs) == Some(DrainAction::Complete) {
                // The final step waits for convergence like every other: "completed" means every
                // (waited-for) subscriber applied the table that emptied the zone.
                let (convergence, not_waited) = step_convergence(&runner, &drain, now);
                if let StepConvergence::Measured { fraction, required, timeout_ms, behind, .. } =
                    &convergence
                    && fraction < required
                {
                    let waited = now.saturating_sub(drain.last_step_ms);
                    if waited >= *timeout_ms && drain.pause_cause.is_none() {
                        let reason = format!(
                            "the final step's version {} reached only {:.0}% of subscribers (needs {:.0}%) after {waited} ms; behind: {behind}",
                            drain.last_step_version.unwrap_or(0),
                            fraction * 100.0,
                            required * 100.0,
                        );
                        let command = Command::PauseDrain { drain: drain.id };
                        submit(&coordinator, state.version(), drain.id, now, command, reason).await;
                    }
                    continue;
                }
                let mut reason = format!(
                    "{}'s message backlog is consumed and every subscriber applied the final table",
                    drain.plan.zone
                );
                if let Some(note) = not_waited {
                    reason.push_str(&format!("; {note}"));
                }
                let command = Command::CompleteDrain { drain: drain.id };
                submit(&coordinator, state.version(), drain.id, now, command, reason).await;
            }
            continue;
        }
        let decided = if drain.is_zone_drain() {
            decide_zone(&runner, &drain, &table_arc, now).await
        } else {
            decide_dial(&runner, &drain, &table_arc, now).await
        };
        let Some(Decision { action, capacity_note, source_note, not_waited }) = decided else {
            continue;
        };
        let command = match action {
            DrainAction::Step { blue_units } => Command::DrainStep { drain: drain.id, blue_units },
            DrainAction::Freeze { blue_units } => {
                Command::DrainFreeze { drain: drain.id, blue_units }
            }
            DrainAction::Move { moves, .. } => Command::ZoneDrainStep { drain: drain.id, moves },
            DrainAction::FreezeMoves { moves } => {
                Command::ZoneDrainFreeze { drain: drain.id, moves }
            }
            // Decided by `decide_freeze` above, never by `decide`.
            DrainAction::Switch { .. } | DrainAction::Unfreeze { .. } => continue,
            // Only a settling drain completes, and that case was handled above.
            DrainAction::Complete => continue,
            DrainAction::Pause { reason } => {
                quiet_until.remove(&drain.id);
                submit(
                    &coordinator,
                    state.version(),
                    drain.id,
                    now,
                    Command::PauseDrain { drain: drain.id },
                    reason,
                )
                .await;
                continue;
            }
            DrainAction::Hold { breach: false, reason, .. }
                if drain.hold_reason.as_deref() == Some(reason.as_str()) =>
            {
                quiet_until.insert(drain.id, now + drain.plan.interval_ms);
                continue;
            }
            DrainAction::Hold { breach, zone, reason } => {
                telemetry::count_drain_hold(&zone, breach);
                Command::DrainHold { drain: drain.id, breach, reason: truncate_reason(reason) }
            }
        };
        quiet_until.remove(&drain.id);
        let reason = match &command {
            Command::DrainStep { .. }
            | Command::DrainFreeze { .. }
            | Command::ZoneDrainStep { .. }
            | Command::ZoneDrainFreeze { .. } => {
                let what = match &command {
                    Command::DrainFreeze { blue_units, .. } => {
                        format!("freezing the units of the move to {blue_units} blue units")
                    }
                    Command::DrainStep { blue_units, .. } => {
                        format!("moving to {blue_units} blue units")
                    }
                    Command::ZoneDrainStep { moves, .. } => {
                        format!("moving units {}", describe_moves(moves, table))
                    }
                    Command::ZoneDrainFreeze { moves, .. } => {
                        format!("freezing the units of the move {}", describe_moves(moves, table))
                    }
                    _ => String::new(),
                };
                let mut reason = format!(
                    "step {} of {}: {}{what}",
                    drain.steps_done + 1,
                    drain.steps_total(),
                    if drain.direction == Direction::Forward { "guard passed, " } else { "" },
                );
                for note in [capacity_note, source_note, not_waited].into_iter().flatten() {
                    reason.push_str(&format!("; {note}"));
                }
                reason
            }
            Command::DrainHold { reason, .. } => reason.clone(),
            _ => String::new(),
        };
        submit(&coordinator, state.version(), drain.id, now, command, reason).await;
    }
}

/// What the runner decided for a running drain, with the notes its step's audit reason carries.
struct Decision {
    action: DrainAction,
    /// The receivers' capacity verdicts, on a forward step.
    capacity_note: Option<String>,
    /// An evacuation's word on the zone it empties (not judged).
    source_note: Option<String>,
    /// Whom the convergence gate did not wait for.
    not_waited: Option<String>,
}

/// A two-zone drain: reads both zones' health (and capacity, for forward steps) on a blocking
/// thread, since the Prometheus source does HTTP, and asks [`Drain::decide`].
async fn decide_dial(
    runner: &Runner,
    drain: &Drain,
    table: &Arc<RoutingTable>,
    now: u64,
) -> Option<Decision> {
    let receiving_zone = table.zone_of(drain.receiving_color()).to_owned();
    let health = Arc::clone(&runner.health);
    let capacities = Arc::clone(&runner.capacities);
    let zones = (drain.plan.zone.clone(), receiving_zone.clone());
    let table_arc = Arc::clone(table);
    let forward = drain.direction == Direction::Forward;
    let judged = drain.clone();
    let readings = tokio::task::spawn_blocking(move || {
        // Capacity is read only for forward steps: rollbacks are not judged.
        let capacity = forward.then(|| capacities.drain_inputs(&table_arc, &judged, now)).flatten();
        (health.zone(&zones.0, now).reading, health.zone(&zones.1, now).reading, capacity)
    })
    .await;
    let (draining, receiving, capacity) = readings.ok()?;
    let (convergence, not_waited) = step_convergence(runner, drain, now);
    let inputs = Inputs {
        blue_units: table.blue_units(),
        now_ms: now,
        receiving_zone: &receiving_zone,
        draining: &draining,
        receiving: &receiving,
        convergence: &convergence,
        backlog: None,
        capacity: capacity.as_ref(),
    };
    let action = drain.decide(&inputs)?;
    let capacity_note = match (&action, &capacity) {
        (DrainAction::Step { blue_units } | DrainAction::Freeze { blue_units }, Some(c)) => {
            let verdict = drain.capacity_verdict(table.blue_units(), *blue_units, c);
            Some(format!("capacity: {}", verdict.explain()))
        }
        _ => None,
    };
    let source_note = forward.then(|| drain.source_note(&draining)).flatten();
    Some(Decision { action, capacity_note, source_note, not_waited })
}

/// A zone drain among N: reads the drained zone's and every receiver's health (and, for
/// forward steps with capacities configured, their loads) on a blocking thread, and asks
/// [`Drain::decide_zone`]. `table` is the drain's domain as the domain sees it (its map in the
/// default place).
async fn decide_zone(
    runner: &Runner,
    drain: &Drain,
    table: &Arc<RoutingTable>,
    now: u64,
) -> Option<Decision> {
    let receivers = drain.receiving_zones();
    let names: Vec<String> = receivers.iter().map(|z| table.zone_of(*z).to_owned()).collect();
    let health = Arc::clone(&runner.health);
    let capacities = Arc::clone(&runner.capacities);
    let forward = drain.direction == Direction::Forward;
    let (source, read_names) = (drain.plan.zone.clone(), names.clone());
    let readings = tokio::task::spawn_blocking(move || {
        let loads = (forward && capacities.is_configured()).then(|| {
            std::iter::once(&source)
                .chain(&read_names)
                .map(|zone| capacities.zone(zone, now))
                .collect::<Vec<_>>()
        });
        let source_reading = health.zone(&source, now).reading;
        let receiving: Vec<Reading> =
            read_names.iter().map(|zone| health.zone(zone, now).reading).collect();
        (source_reading, receiving, loads)
    })
    .await;
    let (source_reading, receiving, loads) = readings.ok()?;
    let inputs: Vec<ReceiverInputs<'_>> = receivers
        .iter()
        .zip(&names)
        .zip(&receiving)
        .enumerate()
        .map(|(i, ((zone, name), reading))| ReceiverInputs {
            zone: *zone,
            name,
            reading,
            load: loads.as_ref().and_then(|l| l.get(i + 1)),
        })
        .collect();
    let (convergence, not_waited) = step_convergence(runner, drain, now);
    let action = drain.decide_zone(&ZoneDrainInputs {
        map: table.map_of(None)?,
        now_ms: now,
        source_reading: &source_reading,
        source_load: loads.as_ref().and_then(|l| l.first()),
        receivers: &inputs,
        convergence: &convergence,
        headroom: runner.capacities.headroom(),
    })?;
    let capacity_note = match &action {
        DrainAction::Move { verdicts, .. } if loads.is_some() => Some(format!(
            "capacity: {}",
            verdicts
                .iter()
                .map(|(zone, v)| format!("{}: {}", table.zone_of(*zone), v.explain()))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        _ => None,
    };
    let source_note = forward.then(|| drain.source_note(&source_reading)).flatten();
    Some(Decision { action, capacity_note, source_note, not_waited })
}

/// A step's moves for its audit reason: `0-4 to az-a, 5-9 to az-b`.
fn describe_moves(moves: &[UnitMove], table: &RoutingTable) -> String {
    moves
        .iter()
        .map(|m| format!("{} to {}", m.units, table.zone_of(m.zone)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How far the drain's latest step has spread, and who it does not wait for.
///
/// An evacuation does not wait for the subscribers of the zone it evacuates: that zone is the
/// failure, and its hung clients would otherwise hold its users in it (two hung watchers out of
/// 100 stopped an evacuation at 25 %). They are named in the second value, for the step's audit
/// reason, so the report says whom the evacuation stopped waiting for.
fn step_convergence(runner: &Runner, drain: &Drain, now: u64) -> (StepConvergence, Option<String>) {
    let Some(version) = drain.last_step_version else { return (StepConvergence::Disabled, None) };
    if runner.convergence_fraction <= 0.0 {
        return (StepConvergence::Disabled, None);
    }
    let excluded_zone =
        (drain.plan.mode == DrainMode::Evacuate).then_some(drain.plan.zone.as_str());
    let c = runner.subscribers.convergence_excluding(version, now, excluded_zone);
    let not_waited = (!c.excluded.is_empty()).then(|| {
        format!(
            "not waiting for {} subscriber(s) of the evacuated zone {}: {}",
            c.excluded.len(),
            drain.plan.zone,
            name_some(&c.excluded)
        )
    });
    let convergence = StepConvergence::Measured {
        version,
        fraction: c.fraction(),
        required: runner.convergence_fraction,
        timeout_ms: runner.convergence_timeout_ms,
        behind: name_some(&c.behind),
    };
    (convergence, not_waited)
}

/// The barrier of a step's freeze (`Subscribers::barrier`): every live subscriber of every
/// replica on `version`, or its lease ran out since. An evacuation does not wait for the
/// evacuated zone's unleased subscribers, as its convergence gate does not.
fn freeze_barrier(runner: &Runner, drain: &Drain, version: u64, now: u64) -> Barrier {
    let excluded_zone =
        (drain.plan.mode == DrainMode::Evacuate).then_some(drain.plan.zone.as_str());
    runner.subscribers.barrier(version, now, excluded_zone)
}

/// Submits a drain command as `drain:<id>` on a blocking thread (the log fsyncs).
///
/// Reasons built here quote stragglers and Prometheus errors, so they are cut to the audit
/// limit. If the core still refuses the command, the drain is held with the refusal as its
/// reason, which moves its next due time forward: it must not show `running` with a step due in
/// the past while every tick is refused again.
async fn submit(
    coordinator: &Arc<Coordinator>,
    expected_version: u64,
    drain: u64,
    now: u64,
    command: Command,
    reason: String,
) {
    let was_hold = matches!(command, Command::DrainHold { .. });
    let refused =
        match submit_once(coordinator, expected_version, drain, now, command, reason).await {
            Some(SubmitError::Command(e)) if !was_hold => e,
            Some(e) => {
                tracing::info!("drain {drain}: could not submit: {e}");
                return;
            }
            None => return,
        };
    tracing::info!("drain {drain}: the core refused the runner's command: {refused}");
    let hold = Command::DrainHold {
        drain,
        breach: false,
        reason: truncate_reason(format!(
            "holding: the drain runner's command was refused: {refused}"
        )),
    };
    let reason = truncate_reason(format!("the drain runner's command was refused: {refused}"));
    let version = coordinator.state().version();
    if let Some(e) = submit_once(coordinator, version, drain, now, hold, reason).await {
        tracing::info!("drain {drain}: could not hold the drain either: {e}");
    }
}

/// One attempt; `None` when it was logged or lost a version race (the next tick decides again
/// from the new state), else the error.
async fn submit_once(
    coordinator: &Arc<Coordinator>,
    expected_version: u64,
    drain: u64,
    now: u64,
    command: Command,
    reason: String,
) -> Option<SubmitError> {
    let envelope = Envelope {
        expected_version,
        command,
        audit: Audit { by: format!("drain:{drain}"), at_ms: now, reason: truncate_reason(reason) },
    };
    let coordinator = Arc::clone(coordinator);
    match tokio::task::spawn_blocking(move || coordinator.submit(&envelope)).await {
        Ok(Ok(_)) => None,
        Ok(Err(SubmitError::Command(CommandError::VersionConflict { .. }))) => None,
        Ok(Err(e)) => Some(e),
        Err(e) => {
            tracing::info!("drain {drain}: runner task failed: {e}");
            None
        }
    }
}

/// Cuts `reason` to [`MAX_REASON_BYTES`] on a character boundary, marking the cut with "…".
pub fn truncate_reason(mut reason: String) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason;
    }
    let mut end = MAX_REASON_BYTES - '…'.len_utf8();
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason.truncate(end);
    reason.push('…');
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_cut_to_the_limit_on_a_character_boundary() {
        let long = "é".repeat(700); // 1400 bytes
        let cut = truncate_reason(long);
        assert!(cut.len() <= MAX_REASON_BYTES && cut.ends_with('…'), "{}", cut.len());
        assert_eq!(truncate_reason("short".into()), "short");
    }
}
