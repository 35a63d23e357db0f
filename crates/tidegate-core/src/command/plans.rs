//! Prepared plans: `PutPlan` stores (or replaces) a plan under its name, at the next revision.
//! Runs of a plan are in `runs.rs`, `run_steps.rs` and `run_calls.rs`.

use std::sync::Arc;

use super::{Change, CommandError, Outcome, changed};
use crate::plan::{self, Plan, StoredPlan};

pub(super) fn put(c: &mut Change, plan: &Plan) -> Outcome {
    let s = c.before;
    plan::validate_plan(plan, &s.table.zones, s.table.units())
        .map_err(CommandError::InvalidPlan)?;
    for (i, step) in plan.steps.iter().enumerate() {
        if let Some(domain) = step.named_domain()
            && s.table.map_of(Some(domain)).is_none()
        {
            return Err(CommandError::InvalidPlan(format!(
                "steps[{i}].domain: `{domain}` is not a routing domain (GET /v1/routing lists them)"
            )));
        }
    }
    let before = s.plans.get(&plan.name);
    if before.is_some_and(|p| &p.plan == plan) {
        return Ok(None);
    }
    let revision = before.map_or(1, |p| p.revision + 1);
    let from = match before {
        Some(p) => format!("plan {} revision {}", plan.name, p.revision),
        None => format!("no plan {}", plan.name),
    };
    Arc::make_mut(&mut c.next.plans).insert(
        plan.name.clone(),
        StoredPlan {
            plan: plan.clone(),
            revision,
            updated_by: c.audit.by.clone(),
            updated_ms: c.audit.at_ms,
            reason: c.audit.reason.clone(),
        },
    );
    let to = format!(
        "plan {} revision {revision}: {} step(s), {} precondition(s), RTO {} ms",
        plan.name,
        plan.steps.len(),
        plan.preconditions.len(),
        plan.rto_ms
    );
    changed(from, to)
}
