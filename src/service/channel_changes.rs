//! The loop that moves a loss-less channel change through its phases: every tick it measures
//! the barrier of the change in progress (every live subscriber, on every replica, on the
//! version it waits for), asks the pure `ChannelChange::decide` what comes next, and submits it
//! signed `channels`. Any replica may submit; of two racing, one record applies and the other
//! loses the version race. A switch the core refuses (the table changed under the freeze, e.g.
//! another channel took one of its services) ends the change without switching, with the
//! refusal as its reason.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{Audit, ChannelStep, Command, Envelope, FreezeBarrier, MAX_REASON_BYTES};
use crate::service::coordinator::Coordinator;
use crate::service::subscribers::Subscribers;

/// Runs until `shutdown` completes, checking every `tick`.
pub async fn run(
    coordinator: Arc<Coordinator>,
    subscribers: Arc<Subscribers>,
    tick: Duration,
    now_ms: fn() -> u64,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticker.tick() => {}
        }
        let now = now_ms();
        let state = coordinator.state();
        let Some(change) = state.channel_change().cloned() else { continue };
        let version = change.barrier_version();
        let c = subscribers.convergence_excluding(version, now, None);
        let barrier = FreezeBarrier {
            version,
            all_applied: c.converged >= c.live,
            behind: crate::service::drain_runner::name_some(&c.behind),
        };
        let Some(step) = change.decide(now, &barrier) else { continue };
        let name = change.name.clone();
        let (command, reason) = match step {
            ChannelStep::Switch => (
                Command::SwitchChannel { name: name.clone() },
                format!(
                    "every live subscriber ({} of {}) applied the freeze of channel {name} (version {version}); switching",
                    c.converged, c.live
                ),
            ),
            ChannelStep::Unfreeze { aborted, reason } => {
                (Command::UnfreezeChannel { name: name.clone(), aborted }, reason)
            }
        };
        let action = command.action();
        match submit(&coordinator, state.version(), now, command, reason).await {
            Ok(()) => {
                tracing::info!(channel = %name, action, barrier_version = version, live = c.live, "channel change phase")
            }
            Err(crate::service::coordinator::SubmitError::Command(e))
                if action == "channel_switch"
                    && !matches!(e, crate::core::CommandError::VersionConflict { .. }) =>
            {
                tracing::warn!(channel = %name, error = %e, "channel switch refused; ending the change without it");
                let reason = format!(
                    "the switch of channel {name} was refused ({e}); unfrozen without switching, the channel is unchanged"
                );
                let command = Command::UnfreezeChannel { name: name.clone(), aborted: true };
                let version = coordinator.state().version();
                if let Err(e) = submit(&coordinator, version, now, command, reason).await {
                    tracing::debug!(channel = %name, error = %e, "channel unfreeze not applied");
                }
            }
            // Another replica moved it first, or any change raced this one: the next tick
            // looks again at the new state.
            Err(e) => {
                tracing::debug!(channel = %name, error = %e, "channel change phase not applied")
            }
        }
    }
}

async fn submit(
    coordinator: &Arc<Coordinator>,
    expected_version: u64,
    now: u64,
    command: Command,
    mut reason: String,
) -> Result<(), crate::service::coordinator::SubmitError> {
    if reason.len() > MAX_REASON_BYTES {
        let mut cut = MAX_REASON_BYTES;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    let envelope = Envelope {
        expected_version,
        command,
        audit: Audit { by: "channels".into(), at_ms: now, reason },
    };
    let coordinator = Arc::clone(coordinator);
    match tokio::task::spawn_blocking(move || coordinator.submit(&envelope)).await {
        Ok(result) => result.map(|_| ()),
        Err(e) => {
            tracing::warn!(error = %e, "channel change task failed");
            Ok(())
        }
    }
}
