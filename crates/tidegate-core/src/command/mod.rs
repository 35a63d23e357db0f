//! Commands that change the routing state, and the pure function that applies them.
//!
//! Every change is an [`Envelope`]: a command, the version it expects (compare-and-set) and an
//! audit record. [`State::apply`] either returns the next state or says why not, without side
//! effects; the store logs accepted envelopes and rebuilds the state by applying them again.
//!
//! The files, by what they hold: `commands.rs` (the [`Command`] enum, its format level and
//! audit action), `envelope.rs` (genesis, audit, envelope, applied), `error.rs`
//! ([`CommandError`]), `state.rs` ([`State`] and its lookups), `describe.rs` (the audit's
//! from/to words). The rest apply one family of commands each, an arm a function of the change
//! and the command's fields: `dial.rs`, `pins.rs`, `drains.rs` (a drain's lifecycle),
//! `drain_steps.rs` (a drain's step and its freeze), `plans.rs`, `runs.rs` (a plan run's
//! lifecycle), `run_steps.rs` (a run's steps), `run_calls.rs` (a run's HTTP calls), `units.rs`,
//! `zones.rs`, `domains.rs` and `automation.rs`.

mod automation;
mod channels;
mod commands;
mod describe;
mod dial;
mod domains;
mod drain_steps;
mod drains;
mod envelope;
mod error;
mod pins;
mod plans;
mod run_calls;
mod run_steps;
mod runs;
mod state;
mod units;
mod zones;

pub use commands::{Command, FORMAT_LEVEL};
pub use envelope::{Applied, Audit, Envelope, Genesis, MAX_REASON_BYTES};
pub use error::CommandError;
pub use pins::MAX_PINS;
pub use state::{FINISHED_DRAINS_KEPT, State};

use crate::table::RoutingTable;

/// One command being applied: the state before it, its audit record, and the next state and
/// table (at the next version) that the command's arm builds.
struct Change<'a> {
    before: &'a State,
    audit: &'a Audit,
    next: State,
    table: RoutingTable,
}

impl Change<'_> {
    /// When the command was made (the audit's clock, read by the caller).
    fn at_ms(&self) -> u64 {
        self.audit.at_ms
    }

    /// The version the command makes.
    fn version(&self) -> u64 {
        self.table.version
    }
}

/// What an arm returns: the audit's `(from, to)` words, or `None` when the command is valid but
/// changes nothing (no version is spent).
type Outcome = Result<Option<(String, String)>, CommandError>;

/// An arm's words for a change it made.
fn changed(from: impl Into<String>, to: impl Into<String>) -> Outcome {
    Ok(Some((from.into(), to.into())))
}

impl State {
    /// Applies an envelope. `Ok(None)` means the command is valid but changes nothing (moving
    /// the dial to where it already is): no version is spent and nothing needs logging.
    pub fn apply(&self, envelope: &Envelope) -> Result<Option<(State, Applied)>, CommandError> {
        let current = self.version();
        if envelope.expected_version != current {
            return Err(CommandError::VersionConflict {
                expected: envelope.expected_version,
                current,
            });
        }
        envelope::validate_audit(&envelope.audit)?;
        let mut table = (*self.table).clone();
        table.version = current + 1;
        let mut c = Change { before: self, audit: &envelope.audit, next: self.clone(), table };
        let Some((from, to)) = dispatch(&mut c, &envelope.command)? else {
            return Ok(None);
        };
        let Change { mut next, mut table, .. } = c;
        drain_steps::thaw_orphans(
            &mut next,
            &mut table,
            envelope.audit.at_ms,
            envelope.command.action(),
        );
        // Every command that changes a map may evacuate or restore a channel's zone.
        let to = crate::channel_apply::settle(&self.table, &mut table, to);
        next.table = std::sync::Arc::new(table);
        Ok(Some((next, Applied { version: current + 1, from, to })))
    }
}

/// The arm of each command.
fn dispatch(c: &mut Change, command: &Command) -> Outcome {
    use Command as C;
    match command {
        C::SetBlueUnits { blue_units, domain } => dial::set(c, *blue_units, domain.as_deref()),
        C::Pin { user_id, color } => pins::pin(c, user_id, *color),
        C::Unpin { user_id } => pins::unpin(c, user_id),
        C::StartDrain { plan } => drains::start(c, plan),
        C::DrainStep { drain, blue_units } => drain_steps::step(c, *drain, *blue_units),
        C::ZoneDrainStep { drain, moves } => drain_steps::zone_step(c, *drain, moves),
        C::ZoneDrainFreeze { drain, moves } => drain_steps::zone_freeze(c, *drain, moves),
        C::DrainFreeze { drain, blue_units } => drain_steps::freeze(c, *drain, *blue_units),
        C::DrainUnfreeze { drain, aborted } => drain_steps::unfreeze(c, *drain, *aborted),
        C::DrainHold { drain, breach, reason } => drains::hold(c, *drain, *breach, reason),
        C::PauseDrain { drain } => drains::pause(c, *drain),
        C::ResumeDrain { drain } => drains::resume(c, *drain),
        C::AbortDrain { drain } => drains::abort(c, *drain),
        C::RollbackDrain { drain } => drains::roll_back(c, *drain),
        C::CompleteDrain { drain } => drains::complete(c, *drain),
        C::SetAutomation { stopped } => automation::set(c, *stopped),
        C::PutPlan { plan } => plans::put(c, plan),
        C::PutChannel { channel } => channels::put(c, channel),
        C::DeleteChannel { name, expired } => channels::delete(c, name, *expired),
        C::FreezeChannel { name, next, window_ms } => {
            channels::freeze(c, name, next.as_ref(), *window_ms)
        }
        C::SwitchChannel { name } => channels::switch(c, name),
        C::UnfreezeChannel { name, aborted } => channels::unfreeze(c, name, *aborted),
        C::StartPlanRun { plan, revision, drill_hold_ms, restores_maps } => {
            runs::start(c, plan, *revision, *drill_hold_ms, *restores_maps)
        }
        C::PlanStepStarted { run, step, drain, samples } => {
            run_steps::start(c, *run, *step, drain.as_ref(), samples)
        }
        C::PlanStepFreeze { run, step } => run_steps::freeze(c, *run, *step),
        C::PlanStepDone { run, step, converged_ms, samples } => {
            run_steps::done(c, *run, *step, *converged_ms, samples)
        }
        C::PlanRunHold { run, reason } => runs::hold(c, *run, reason),
        C::PausePlanRun { run } => runs::pause(c, *run),
        C::ResumePlanRun { run } => runs::resume(c, *run),
        C::AbortPlanRun { run } => runs::abort(c, *run),
        C::RollbackPlanRun { run } => runs::roll_back(c, *run),
        C::FailPlanRun { run, reason } => runs::fail(c, *run, reason),
        C::PlanRestore { run } => runs::restore(c, *run),
        C::PlanCallStarted { run, step, attempt, caller, until_ms } => {
            run_calls::start(c, *run, *step, *attempt, caller, *until_ms)
        }
        C::PlanCallDone { run, step, attempt, status, error } => {
            run_calls::done(c, *run, *step, *attempt, *status, error.as_ref())
        }
        C::MoveUnits { moves } => units::move_units(c, moves),
        C::FreezeUnits { moves, pins, global, window_ms } => {
            units::freeze(c, moves, pins, *global, *window_ms)
        }
        C::HoldUnits { units, global, window_ms, hold_ms } => {
            units::hold(c, units, *global, *window_ms, *hold_ms)
        }
        C::SwitchUnits => units::switch(c),
        C::UnfreezeUnits { aborted } => units::unfreeze(c, *aborted),
        C::AddZone { spec } => zones::add(c, spec),
        C::RetireZone { zone } => zones::retire(c, *zone),
        C::SetGlobalWriter { zone, read_only } => zones::set_global_writer(c, *zone, *read_only),
        C::AddDomain { name } => domains::add(c, name),
    }
}
