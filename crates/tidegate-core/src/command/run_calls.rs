//! A plan run's HTTP steps: `PlanCallStarted` claims the next attempt for one replica,
//! `PlanCallDone` records what answered.

use super::runs::updated;
use super::{Change, CommandError, Outcome};
use crate::plan::{HttpCall, PlanStep};
use crate::plan_run::{CallAttempt, PlanRun, RunStatus, call_backoff_ms};

/// `caller` (a replica) claims attempt `attempt` of the run's current HTTP step until
/// `until_ms`. Compare-and-set like every command: of two replicas deciding the same attempt,
/// one claim is logged and only its replica calls.
pub(super) fn start(
    c: &mut Change,
    id: u64,
    step: usize,
    attempt: u32,
    caller: &str,
    until_ms: u64,
) -> Outcome {
    let at_ms = c.at_ms();
    let mut run = c.before.run_in(id, &[RunStatus::Running], "call out")?.clone();
    if !run.in_step || step != run.step {
        let expected = run.step;
        return Err(CommandError::RunStepMismatch { id, expected, got: step });
    }
    let call = http_step(&run, step, "call out")?;
    let calls = run.current_calls();
    let expected = calls.len() as u32 + 1;
    let busy = calls.last().map(|a| {
        if a.ok {
            "its call already succeeded"
        } else if a.done_ms.is_none() && at_ms < a.until_ms {
            "an attempt's claim is still live"
        } else {
            ""
        }
    });
    if let Some(state) = busy.filter(|b| !b.is_empty()) {
        return Err(CommandError::RunState { id, state, action: "claim a call" });
    }
    if attempt != expected {
        return Err(CommandError::CallAttemptMismatch { id, expected, got: attempt });
    }
    if attempt > call.retries + 1 {
        return Err(CommandError::RunState { id, state: "out of retries", action: "call again" });
    }
    if caller.trim().is_empty() || until_ms <= at_ms {
        return Err(CommandError::InvalidPlan(
            "a call's claim names its caller and ends after it is made".to_owned(),
        ));
    }
    let to = format!(
        "calling `{}` ({} {}), attempt {attempt} of {}, claimed by {caller} for {} ms",
        call.name,
        call.method,
        call.url,
        call.retries + 1,
        until_ms - at_ms
    );
    if let Some(record) = run.steps.last_mut() {
        record.calls.push(CallAttempt {
            attempt,
            caller: caller.to_owned(),
            claimed_ms: at_ms,
            until_ms,
            done_ms: None,
            status: None,
            error: None,
            ok: false,
        });
    }
    let from = run.hold_reason.clone().unwrap_or_else(|| "not calling".to_owned());
    run.hold_reason = Some(to.clone());
    updated(c, run, from, to)
}

/// The result of a claimed attempt: the HTTP status, or why no answer came. Recorded for any
/// run whose attempt is open, even one aborted meanwhile: the call happened, and the audit says
/// what answered.
pub(super) fn done(
    c: &mut Change,
    id: u64,
    step: usize,
    attempt: u32,
    status: Option<u16>,
    error: Option<&String>,
) -> Outcome {
    let at_ms = c.at_ms();
    let mut run = c.before.runs.get(&id).ok_or(CommandError::RunNotFound(id))?.clone();
    let call = http_step(&run, step, "record a call")?;
    let active = run.is_active();
    let Some(record) = run.steps.last_mut().filter(|r| r.index == step) else {
        return Err(CommandError::RunStepMismatch { id, expected: run.step, got: step });
    };
    let open = record.calls.len() as u32;
    let Some(a) = record.calls.last_mut().filter(|a| a.attempt == attempt && a.done_ms.is_none())
    else {
        return Err(CommandError::CallAttemptMismatch { id, expected: open, got: attempt });
    };
    a.done_ms = Some(at_ms);
    a.status = status;
    a.error = error.cloned();
    a.ok = status.is_some_and(|s| call.accepts(s));
    let outcome = a.outcome();
    let ok = a.ok;
    let elapsed = at_ms.saturating_sub(a.claimed_ms);
    let total = call.retries + 1;
    let to = if ok {
        format!(
            "call `{}` attempt {attempt} of {total} answered {outcome} after {elapsed} ms",
            call.name
        )
    } else if attempt < total {
        format!(
            "call `{}` attempt {attempt} of {total} failed ({outcome}, expecting {}); \
             retrying in {} ms",
            call.name,
            call.expects(),
            call_backoff_ms(attempt)
        )
    } else {
        format!(
            "call `{}` attempt {attempt} of {total} failed ({outcome}, expecting {}); \
             no retries left",
            call.name,
            call.expects()
        )
    };
    let from = format!("calling `{}`, attempt {attempt}", call.name);
    if active {
        run.hold_reason = (!ok).then(|| to.clone());
    }
    updated(c, run, from, to)
}

/// The HTTP call of the run's step `step`, or why `action` is refused.
fn http_step(run: &PlanRun, step: usize, action: &'static str) -> Result<HttpCall, CommandError> {
    match run.plan.steps.get(step) {
        Some(PlanStep::Http(call)) => Ok(call.clone()),
        _ => Err(CommandError::RunState { id: run.id, state: "not at an HTTP step", action }),
    }
}
