//! The drain runner: the loop that reads the clock and zone health, and submits drain steps.
//!
//! All decisions are made by the pure `Drain::decide`; this loop only does I/O. It wakes every
//! tick. When the active drain is due, it reads both zones' health (on a blocking thread, since the
//! Prometheus source does HTTP), asks the core what to do, and submits that through the coordinator
//! like any other command. The command is logged and audited as `drain:<id>`. After a restart the
//! loop picks up from the replayed state, so a step is never repeated or skipped.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::coordinator::{Coordinator, SubmitError};
use crate::core::{Audit, Command, CommandError, DrainAction, Envelope};
use crate::health::Health;
use crate::telemetry;

/// Runs until `shutdown` completes. `now_ms` is the clock (injected for tests).
pub async fn run(
    coordinator: Arc<Coordinator>,
    health: Arc<Health>,
    tick: Duration,
    now_ms: fn() -> u64,
    shutdown: impl Future<Output = ()>,
) {
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
        let table = state.table();
        let receiving_zone = table.zone_of(drain.receiving_color()).to_owned();
        let draining_zone = drain.plan.zone.clone();
        let health_for_check = Arc::clone(&health);
        let zones = (draining_zone.clone(), receiving_zone.clone());
        let readings = tokio::task::spawn_blocking(move || {
            let h = health_for_check;
            (h.zone(&zones.0, now).reading, h.zone(&zones.1, now).reading)
        })
        .await;
        let Ok((draining, receiving)) = readings else { continue };
        let Some(action) =
            drain.decide(table.blue_units(), now, &receiving_zone, &draining, &receiving)
        else {
            continue;
        };
        let command = match action {
            DrainAction::Step { blue_units } => Command::DrainStep { drain: drain.id, blue_units },
            DrainAction::Hold { breach: false, reason }
                if drain.hold_reason.as_deref() == Some(reason.as_str()) =>
            {
                quiet_until.insert(drain.id, now + drain.plan.interval_ms);
                continue;
            }
            DrainAction::Hold { breach, reason } => {
                telemetry::count_drain_hold(&draining_zone, breach);
                Command::DrainHold { drain: drain.id, breach, reason }
            }
        };
        quiet_until.remove(&drain.id);
        let reason = match &command {
            Command::DrainStep { blue_units, .. } => format!(
                "step {} of {}: guard passed, moving to {blue_units} blue units",
                drain.steps_done + 1,
                drain.steps_total()
            ),
            Command::DrainHold { reason, .. } => reason.clone(),
            _ => unreachable!("the runner only submits steps and holds"),
        };
        let envelope = Envelope {
            expected_version: state.version(),
            command,
            audit: Audit { by: format!("drain:{}", drain.id), at_ms: now, reason },
        };
        let coordinator = Arc::clone(&coordinator);
        match tokio::task::spawn_blocking(move || coordinator.submit(&envelope)).await {
            Ok(Ok(_)) => {}
            // Someone else changed the state between our read and our write (an operator paused
            // the drain, say): the next tick decides again from the new state.
            Ok(Err(SubmitError::Command(CommandError::VersionConflict { .. }))) => {}
            Ok(Err(e)) => eprintln!("tidegate: drain {}: could not submit: {e}", drain.id),
            Err(e) => eprintln!("tidegate: drain {}: runner task failed: {e}", drain.id),
        }
    }
}
