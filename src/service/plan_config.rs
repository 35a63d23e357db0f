//! Plans declared in config (`[plans.<name>]`), and the body of `PUT /v1/plans/{name}` they
//! share: [`PlanBody`] and [`to_plan`], whose errors name the field.
//!
//! At start-up a replica compares each declared plan with the log's and, if it is absent or
//! different, appends `PutPlan` with the state version it read (a compare-and-set) and the reason
//! "config", so several replicas starting together apply it once. Replay never reads config: the
//! state comes only from the log, and a plan removed from config stays in the log.

use serde::Deserialize;
use serde_json::Value;

use crate::core::{Audit, Command, CommandError, Envelope, Plan, Zones, validate_plan};
use crate::duration::parse_duration_ms;
use crate::service::coordinator::{Coordinator, SubmitError};
use crate::store::{WirePlan, WirePrecondition, WireStep, WireTrigger};

/// Who and why, in the audit, for a plan appended from config.
pub const CONFIG: &str = "config";

/// A plan's fields, as in the `PUT` body (less `expected_version` and `reason`) and in config.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanBody {
    /// Recovery time objective, e.g. `5m`.
    pub rto: String,
    #[serde(default)]
    pub preconditions: Vec<WirePrecondition>,
    pub steps: Vec<WireStep>,
    /// Opt-in automatic start: `{"zone_down_for": "30s"}` and/or `{"lane_consumers_gone": zone}`.
    #[serde(default)]
    pub trigger: Option<TriggerBody>,
    /// At most one automatic run per this, e.g. `30m`; required with a trigger.
    #[serde(default)]
    pub cooldown: Option<String>,
    /// Loss-less zone moves: each drain or evacuate step freezes its units for at most this
    /// window (e.g. `30s`), as a drain started with `freeze` does. Absent: at once.
    #[serde(default)]
    pub freeze_window: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerBody {
    #[serde(default)]
    pub zone_down_for: Option<String>,
    #[serde(default)]
    pub zone_silent_for: Option<String>,
    #[serde(default)]
    pub lane_consumers_gone: Option<String>,
    /// How long every consumer must be gone (default `30s`: a rolling restart is not an
    /// incident).
    #[serde(default)]
    pub lane_consumers_gone_for: Option<String>,
}

/// `trigger.lane_consumers_gone_for` when a body leaves it out.
pub const DEFAULT_CONSUMERS_GONE_FOR_MS: u64 = 30_000;

/// The plan `name` of a body; the error starts with the field (`rto: ...`).
pub fn to_plan(name: &str, body: PlanBody, zones: &Zones) -> Result<Plan, String> {
    let rto_ms = parse_duration_ms(&body.rto).map_err(|e| format!("rto: {e}"))?;
    let trigger = wire_trigger(body.trigger, body.cooldown.as_deref())?;
    let freeze_ms = body
        .freeze_window
        .as_deref()
        .map(|w| parse_duration_ms(w).map_err(|e| format!("freeze_window: {e}")))
        .transpose()?;
    let wire = WirePlan {
        name: name.to_owned(),
        preconditions: body.preconditions,
        steps: body.steps,
        rto_ms,
        trigger,
        freeze_ms,
    };
    wire.to_plan(zones)
}

/// The trigger and cooldown of a body, in the log's form; errors name the field.
fn wire_trigger(
    trigger: Option<TriggerBody>,
    cooldown: Option<&str>,
) -> Result<Option<WireTrigger>, String> {
    let Some(t) = trigger else {
        return match cooldown {
            Some(_) => Err("cooldown: only a plan with a trigger has a cooldown".into()),
            None => Ok(None),
        };
    };
    let zone_down_for_ms = t
        .zone_down_for
        .as_deref()
        .map(parse_duration_ms)
        .transpose()
        .map_err(|e| format!("trigger.zone_down_for: {e}"))?;
    let zone_silent_for_ms = t
        .zone_silent_for
        .as_deref()
        .map(parse_duration_ms)
        .transpose()
        .map_err(|e| format!("trigger.zone_silent_for: {e}"))?;
    let lane_consumers_gone_for_ms = match (&t.lane_consumers_gone, &t.lane_consumers_gone_for) {
        (_, Some(d)) if t.lane_consumers_gone.is_none() => {
            return Err(format!(
                "trigger.lane_consumers_gone_for: `{d}` needs trigger.lane_consumers_gone"
            ));
        }
        (Some(_), Some(d)) => {
            parse_duration_ms(d).map_err(|e| format!("trigger.lane_consumers_gone_for: {e}"))?
        }
        (Some(_), None) => DEFAULT_CONSUMERS_GONE_FOR_MS,
        (None, _) => 0,
    };
    let cooldown = cooldown.ok_or("cooldown: a plan with a trigger needs one, e.g. \"30m\"")?;
    let cooldown_ms = parse_duration_ms(cooldown).map_err(|e| format!("cooldown: {e}"))?;
    Ok(Some(WireTrigger {
        zone_down_for_ms,
        zone_silent_for_ms,
        lane_consumers_gone: t.lane_consumers_gone,
        lane_consumers_gone_for_ms,
        cooldown_ms,
    }))
}

/// A declared plan that cannot be used: the configuration key and why.
#[derive(Debug, thiserror::Error)]
#[error("configuration key `{key}`: {reason}")]
pub struct DeclaredPlanError {
    pub key: String,
    pub reason: String,
}

/// Parses and validates every declared plan against the zones and unit count; the error names
/// the key (`plans.<name>.<field>`).
pub fn parse_declared<'a>(
    declared: impl IntoIterator<Item = (&'a String, &'a Value)>,
    zones: &Zones,
    units: u32,
) -> Result<Vec<Plan>, DeclaredPlanError> {
    let mut plans = Vec::new();
    for (name, value) in declared {
        let key = format!("plans.{name}");
        let named = |why: String| match why.split_once(": ") {
            Some((field, rest)) if !field.contains(' ') => {
                DeclaredPlanError { key: format!("{key}.{field}"), reason: rest.to_owned() }
            }
            _ => DeclaredPlanError { key: key.clone(), reason: why },
        };
        let body: PlanBody = serde_json::from_value(value.clone())
            .map_err(|e| DeclaredPlanError { key: key.clone(), reason: e.to_string() })?;
        let plan = to_plan(name, body, zones).map_err(named)?;
        validate_plan(&plan, zones, units).map_err(named)?;
        plans.push(plan);
    }
    Ok(plans)
}

/// Appends each plan whose stored form differs (or is absent), as `config`. Returns the names
/// appended. Blocking: the log fsyncs.
pub fn apply_declared(
    coordinator: &Coordinator,
    plans: &[Plan],
    now_ms: u64,
) -> Result<Vec<String>, SubmitError> {
    const RETRIES: u32 = 5;
    let mut appended = Vec::new();
    for plan in plans {
        let mut attempt = 0;
        loop {
            let state = coordinator.state();
            if state.plan(&plan.name).is_some_and(|stored| &stored.plan == plan) {
                break;
            }
            let envelope = Envelope {
                expected_version: state.version(),
                command: Command::PutPlan { plan: plan.clone() },
                audit: Audit { by: CONFIG.to_owned(), at_ms: now_ms, reason: CONFIG.to_owned() },
            };
            match coordinator.submit(&envelope) {
                Ok(_) => {
                    appended.push(plan.name.clone());
                    break;
                }
                // Another replica (or caller) appended first: compare again with the new state.
                Err(SubmitError::Command(CommandError::VersionConflict { .. }))
                    if attempt < RETRIES =>
                {
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(appended)
}
