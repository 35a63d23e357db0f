//! Starting a plan run: the one function both the HTTP route (`POST /v1/plans/{name}/run` and
//! `/drill`) and the automatic trigger (`service::plan_trigger`) call.
//!
//! It checks the reviewed revision, that no run or drain is active and that every precondition
//! is true, then appends `StartPlanRun` through the coordinator. The append is a compare-and-set
//! on the state version, and `State::apply` refuses it while a run or drain is active, so two
//! callers racing (two replicas' triggers, an operator and a trigger) start one run at most.
//! Blocking: preconditions may do HTTP and the log fsyncs.

use crate::core::{Audit, CheckKind, Command, CommandError, Envelope, PlanRun, State};
use crate::service::coordinator::{Coordinator, SubmitError, Submitted};
use crate::service::preconditions::Preconditions;

/// What to start, by whom and why.
#[derive(Clone, Debug)]
pub struct StartRequest {
    pub plan: String,
    /// The revision the caller reviewed; `None` runs the current one.
    pub plan_revision: Option<u64>,
    /// The state version the caller saw; `None` uses the current one (retried on a race).
    pub expected_version: Option<u64>,
    /// `Some(hold)` starts a drill that holds the switched table this long, then restores.
    pub drill_hold_ms: Option<u64>,
    pub by: String,
    pub reason: String,
    pub now_ms: u64,
}

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("there is no plan `{0}`")]
    PlanNotFound(String),
    #[error(
        "plan `{plan}` is at revision {current}, not the reviewed revision {reviewed}; review it again"
    )]
    RevisionChanged { plan: String, current: u64, reviewed: u64 },
    #[error("{detail}")]
    RunActive { detail: String },
    #[error("{detail}")]
    DrainActive { detail: String },
    #[error(
        "precondition `{name}` ({check}) {why}; the run did not start",
        why = match value { Some(_) => "is false".to_owned(), None => format!("could not be checked ({})", error.as_deref().unwrap_or("")) }
    )]
    PreconditionFailed {
        name: String,
        check: String,
        /// `Some(false)` when it was false, `None` when it could not be checked.
        value: Option<bool>,
        error: Option<String>,
    },
    #[error(transparent)]
    Submit(#[from] SubmitError),
}

/// Why a run could not start now (an active run or drain), described for people.
pub fn busy_reason(state: &State) -> Option<String> {
    if let Some(r) = state.active_run() {
        return Some(format!(
            "plan run {} of {} is {}; another run cannot start while it is active",
            r.id,
            r.plan.name,
            r.status.as_str()
        ));
    }
    state.active_drain().map(|d| {
        format!(
            "drain {} of {} is {}; a run cannot start while it is active",
            d.id,
            d.plan.zone,
            d.state_name()
        )
    })
}

/// Checks and starts a run; on success the state after it and the new run's ID.
pub fn start(
    coordinator: &Coordinator,
    preconditions: &Preconditions,
    request: StartRequest,
) -> Result<(Submitted, u64), StartError> {
    let state = coordinator.state();
    let name = request.plan.as_str();
    let stored = state.plan(name).ok_or_else(|| StartError::PlanNotFound(name.to_owned()))?;
    let revision = request.plan_revision.unwrap_or(stored.revision);
    if revision != stored.revision {
        return Err(StartError::RevisionChanged {
            plan: name.to_owned(),
            current: stored.revision,
            reviewed: revision,
        });
    }
    // A plan that moves unit sets, or moves a zone among three or more zones (a zone drain),
    // needs its maps back on restore.
    let among_n = !state.table().zones().is_two();
    let restores_maps = stored.plan.steps.iter().any(|s| match s {
        crate::core::PlanStep::MoveUnits { .. } => true,
        crate::core::PlanStep::MoveZone { .. } => among_n,
        _ => false,
    });
    if let Some(detail) = busy_reason(&state) {
        return Err(if state.active_run().is_some() {
            StartError::RunActive { detail }
        } else {
            StartError::DrainActive { detail }
        });
    }
    // A precondition a `wait_precondition` step names is that step's gate, not the start's.
    let list: Vec<_> = crate::core::start_preconditions(&stored.plan).cloned().collect();
    drop(state);
    for (p, (_, result)) in list.iter().zip(preconditions.check_all(&list)) {
        let (value, error) = match result {
            Ok(true) => continue,
            Ok(false) => (Some(false), None),
            Err(e) => (None, Some(e)),
        };
        let check = match &p.check {
            CheckKind::Promql(q) => format!("promql `{q}`"),
            CheckKind::Http(u) => format!("http {u}"),
        };
        return Err(StartError::PreconditionFailed { name: p.name.clone(), check, value, error });
    }
    let command = Command::StartPlanRun {
        plan: name.to_owned(),
        revision,
        drill_hold_ms: request.drill_hold_ms,
        // Only a plan that moves unit sets (or zones among three or more) needs its maps back
        // (format level 7): other plans' runs stay readable by replicas of the release before.
        restores_maps,
    };
    const RETRIES: u32 = 3;
    let mut attempt = 0;
    loop {
        let expected = request.expected_version.unwrap_or_else(|| coordinator.state().version());
        let envelope = Envelope {
            expected_version: expected,
            command: command.clone(),
            audit: Audit {
                by: request.by.clone(),
                at_ms: request.now_ms,
                reason: request.reason.clone(),
            },
        };
        match coordinator.submit(&envelope) {
            Err(SubmitError::Command(CommandError::VersionConflict { .. }))
                if request.expected_version.is_none() && attempt < RETRIES =>
            {
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
            Ok(submitted) => {
                let id = newest_run(&submitted.state).map(|r| r.id).unwrap_or_default();
                return Ok((submitted, id));
            }
        }
    }
}

fn newest_run(state: &State) -> Option<&PlanRun> {
    state.plan_runs().next_back()
}
