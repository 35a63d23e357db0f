//! The loop that removes release channels at their expiry: every tick it asks the core which
//! channels are due (`core::expired_channels`, time as an argument) and submits
//! `DeleteChannel { expired: true }` for each, signed `channels`. Tagging never reads a clock: a
//! channel routes until the removal is logged, on every replica and subscriber alike. Any replica
//! may submit; of two replicas racing, one record applies and the other loses the version race.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{Audit, Command, Envelope, expired_channels};
use crate::service::coordinator::Coordinator;

/// Runs until `shutdown` completes, checking every `tick`.
pub async fn run(
    coordinator: Arc<Coordinator>,
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
        let due: Vec<(String, u64)> = expired_channels(state.table(), now)
            .map(|c| (c.name.clone(), c.expires_at_ms.unwrap_or(now)))
            .collect();
        for (name, at) in due {
            let envelope = Envelope {
                expected_version: coordinator.state().version(),
                command: Command::DeleteChannel { name: name.clone(), expired: true },
                audit: Audit {
                    by: "channels".into(),
                    at_ms: now,
                    reason: format!("release channel {name} expired at {at} ms"),
                },
            };
            let coordinator = Arc::clone(&coordinator);
            match tokio::task::spawn_blocking(move || coordinator.submit(&envelope)).await {
                Ok(Ok(_)) => tracing::info!(channel = %name, expires_at_ms = at, "channel expired"),
                // Another replica removed it first, or any change raced this one: the next tick
                // looks again at the new state.
                Ok(Err(e)) => {
                    tracing::debug!(channel = %name, error = %e, "channel expiry not applied")
                }
                Err(e) => tracing::warn!(channel = %name, error = %e, "channel expiry task failed"),
            }
        }
    }
}
