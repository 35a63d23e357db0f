//! The loop that moves loss-less changes through their phases: a channel change
//! (`ChannelChange`) and a unit move (`UnitsChange`, `PUT /v1/units` or `PUT /v1/dial` with
//! `freeze`). Every tick it measures the barrier of each change in progress (every live
//! subscriber, on every replica, on the version it waits for), asks the pure `decide` what comes
//! next, and submits it signed `channels` or `units`. Any replica may submit; of two racing, one
//! record applies and the other loses the version race. A switch the core refuses (the table
//! changed under the freeze, e.g. another channel took one of its services) ends the change
//! without switching, with the refusal as its reason.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{
    Audit, Command, CommandError, Envelope, FreezeBarrier, MAX_REASON_BYTES, Phases, StagedStep,
};
use crate::service::coordinator::{Coordinator, SubmitError};
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
        if let Some(change) = state.channel_change().cloned() {
            let name = change.name.clone();
            let staged = Staged {
                by: "channels",
                what: format!("channel {name}"),
                phases: &change.phases,
                switch: Command::SwitchChannel { name: name.clone() },
                unfreeze: Box::new(move |aborted| Command::UnfreezeChannel {
                    name: name.clone(),
                    aborted,
                }),
            };
            advance(&coordinator, &subscribers, now, staged, |b| change.decide(now, b)).await;
        }
        if let Some(change) = coordinator.state().units_change().cloned() {
            let staged = Staged {
                by: "units",
                what: "the unit move".to_owned(),
                phases: &change.phases,
                switch: Command::SwitchUnits,
                unfreeze: Box::new(|aborted| Command::UnfreezeUnits { aborted }),
            };
            advance(&coordinator, &subscribers, now, staged, |b| change.decide(now, b)).await;
        }
    }
}

/// A change in progress, as the loop advances it.
struct Staged<'a> {
    /// Who signs its phases in the audit.
    by: &'static str,
    what: String,
    phases: &'a Phases,
    switch: Command,
    unfreeze: Box<dyn Fn(bool) -> Command + Send>,
}

async fn advance(
    coordinator: &Arc<Coordinator>,
    subscribers: &Subscribers,
    now: u64,
    staged: Staged<'_>,
    decide: impl Fn(&FreezeBarrier) -> Option<StagedStep>,
) {
    let version = staged.phases.barrier_version();
    let counted = subscribers.barrier(version, now, None);
    let Some(step) = decide(&counted.freeze_barrier()) else { return };
    let what = &staged.what;
    let (command, reason) = match step {
        StagedStep::Switch => (
            staged.switch,
            format!("the freeze of {what}: {}; switching", counted.passed_because()),
        ),
        StagedStep::Unfreeze { aborted, reason } => ((staged.unfreeze)(aborted), reason),
    };
    let action = command.action();
    let is_switch = matches!(command, Command::SwitchChannel { .. } | Command::SwitchUnits);
    let expected = coordinator.state().version();
    match submit(coordinator, staged.by, expected, now, command, reason).await {
        Ok(()) => {
            tracing::info!(change = %what, action, barrier_version = version, live = counted.live, lease_out = counted.lease_out, "loss-less change phase")
        }
        Err(SubmitError::Command(e))
            if is_switch && !matches!(e, CommandError::VersionConflict { .. }) =>
        {
            tracing::warn!(change = %what, error = %e, "switch refused; ending the change without it");
            let reason = format!(
                "the switch of {what} was refused ({e}); unfrozen without switching, nothing changed"
            );
            let version = coordinator.state().version();
            let command = (staged.unfreeze)(true);
            if let Err(e) = submit(coordinator, staged.by, version, now, command, reason).await {
                tracing::debug!(change = %what, error = %e, "unfreeze not applied");
            }
        }
        // Another replica moved it first, or any change raced this one: the next tick looks
        // again at the new state.
        Err(e) => tracing::debug!(change = %what, error = %e, "loss-less change phase not applied"),
    }
}

async fn submit(
    coordinator: &Arc<Coordinator>,
    by: &str,
    expected_version: u64,
    now: u64,
    command: Command,
    mut reason: String,
) -> Result<(), SubmitError> {
    if reason.len() > MAX_REASON_BYTES {
        let mut cut = MAX_REASON_BYTES;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
    }
    let envelope =
        Envelope { expected_version, command, audit: Audit { by: by.into(), at_ms: now, reason } };
    let coordinator = Arc::clone(coordinator);
    match tokio::task::spawn_blocking(move || coordinator.submit(&envelope)).await {
        Ok(result) => result.map(|_| ()),
        Err(e) => {
            tracing::warn!(error = %e, "loss-less change task failed");
            Ok(())
        }
    }
}
