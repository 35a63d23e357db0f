//! The opt-in automatic trigger of a plan: when its zone has been down long enough, or all of a
//! zone's lane consumers are gone, the plan may start by itself, signed `by: auto`.
//!
//! [`decide`] is pure: given the time, what the service observed (since when the zone is down,
//! since when its consumers are gone), the last automatic run, whether a run or drain is active,
//! the receiving zone's health and capacity verdict and the plan's preconditions, it says fire or
//! not, and why. It never fires within the cooldown, while any run or drain is active, when the
//! receiving zone is unhealthy or would be over capacity, or when a precondition is not true.

use super::plan::{Plan, trigger_zone};

/// What the trigger service observed and read, at `now_ms`.
#[derive(Clone, Debug)]
pub struct TriggerInputs<'a> {
    pub now_ms: u64,
    /// Since when the plan's zone has been down without a break, if it is down now (a reading
    /// that cannot be read does not break it).
    pub zone_down_since_ms: Option<u64>,
    /// Since when the plan's zone has reported nothing readable, if it is silent now.
    pub zone_silent_since_ms: Option<u64>,
    /// Since when the watched zone has had no lane consumer after having had some, if so.
    pub consumers_gone_since_ms: Option<u64>,
    /// When this plan last started automatically.
    pub last_auto_run_ms: Option<u64>,
    /// An active run or drain, described.
    pub busy: Option<String>,
    /// The receiving zone's health: `Err(why)` when it is unhealthy or unknown.
    pub receiving_health: Result<(), String>,
    /// The receiving zone's capacity verdict for the plan: `Err(why)` when it would be exceeded.
    pub receiving_capacity: Result<(), String>,
    /// The automation caps (`core::check_caps`: stop switch, once per incident, hop limit,
    /// window, share cap): `Err((kind, why))` when they hold the plan.
    pub caps: Result<(), (&'static str, String)>,
    /// Each precondition's result: `Ok(true)` passes, anything else blocks.
    pub preconditions: &'a [(String, Result<bool, String>)],
}

impl Default for TriggerInputs<'_> {
    /// Nothing observed, nothing busy, the receiving zone healthy with room, no preconditions.
    fn default() -> Self {
        TriggerInputs {
            now_ms: 0,
            zone_down_since_ms: None,
            zone_silent_since_ms: None,
            consumers_gone_since_ms: None,
            last_auto_run_ms: None,
            busy: None,
            receiving_health: Ok(()),
            receiving_capacity: Ok(()),
            caps: Ok(()),
            preconditions: &[],
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TriggerDecision {
    /// Nothing has happened that the trigger watches.
    Quiet,
    /// The condition holds but the run must not start: a short kind for metrics (`cooldown`,
    /// `busy`, `receiving_unhealthy`, `capacity`, `precondition`) and why, for people.
    Blocked { kind: &'static str, why: String },
    /// Start the run; the reason names the trigger.
    Fire(String),
}

/// Whether the plan's trigger fires now.
pub fn decide(plan: &Plan, input: &TriggerInputs<'_>) -> TriggerDecision {
    let Some(t) = &plan.trigger else { return TriggerDecision::Quiet };
    let now = input.now_ms;
    let mut fired = None;
    if let (Some(limit), Some(since), Some(zone)) =
        (t.zone_down_for_ms, input.zone_down_since_ms, trigger_zone(plan))
        && now.saturating_sub(since) >= limit
    {
        fired = Some(format!(
            "automatic: {zone} has been down for {} s (trigger zone_down_for {} s)",
            now.saturating_sub(since) / 1000,
            limit / 1000
        ));
    }
    if fired.is_none()
        && let (Some(limit), Some(since), Some(zone)) =
            (t.zone_silent_for_ms, input.zone_silent_since_ms, trigger_zone(plan))
        && now.saturating_sub(since) >= limit
    {
        fired = Some(format!(
            "automatic: {zone} has reported nothing readable for {} s (trigger zone_silent_for {} s)",
            now.saturating_sub(since) / 1000,
            limit / 1000
        ));
    }
    if fired.is_none()
        && let (Some(zone), Some(since)) = (&t.lane_consumers_gone, input.consumers_gone_since_ms)
        && now.saturating_sub(since) >= t.lane_consumers_gone_for_ms
    {
        fired = Some(format!(
            "automatic: every lane consumer in {zone} has been gone for {} s",
            now.saturating_sub(since) / 1000
        ));
    }
    let Some(reason) = fired else { return TriggerDecision::Quiet };
    if let Err((kind, why)) = &input.caps {
        return blocked(kind, why.clone());
    }
    if let Some(last) = input.last_auto_run_ms
        && now.saturating_sub(last) < t.cooldown_ms
    {
        return blocked(
            "cooldown",
            format!(
                "within the cooldown: the last automatic run started {} s ago, cooldown {} s",
                now.saturating_sub(last) / 1000,
                t.cooldown_ms / 1000
            ),
        );
    }
    if let Some(busy) = &input.busy {
        return blocked("busy", busy.clone());
    }
    if let Err(why) = &input.receiving_health {
        return blocked("receiving_unhealthy", format!("the receiving zone is not healthy: {why}"));
    }
    if let Err(why) = &input.receiving_capacity {
        return blocked("capacity", format!("the receiving zone lacks capacity: {why}"));
    }
    for (name, result) in input.preconditions {
        match result {
            Ok(true) => {}
            Ok(false) => {
                return blocked("precondition", format!("precondition `{name}` is false"));
            }
            Err(e) => {
                return blocked(
                    "precondition",
                    format!("precondition `{name}` could not be checked: {e}"),
                );
            }
        }
    }
    TriggerDecision::Fire(reason)
}

fn blocked(kind: &'static str, why: String) -> TriggerDecision {
    TriggerDecision::Blocked { kind, why }
}

/// Every refusal kind, for registering the refusal counter at zero.
pub const REFUSAL_KINDS: [&str; 10] = [
    "cooldown",
    "busy",
    "receiving_unhealthy",
    "capacity",
    "precondition",
    "stopped",
    "once_per_incident",
    "hop_limit",
    "window",
    "share_cap",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DrainMode;
    use crate::plan::{PlanStep, Trigger, validate_trigger};

    fn plan(trigger: Trigger) -> Plan {
        Plan {
            name: "az-b-failing".into(),
            preconditions: vec![],
            steps: vec![PlanStep::MoveZone {
                zone: "az-b".into(),
                to_percent: 0.0,
                mode: DrainMode::Evacuate,
                domain: None,
            }],
            rto_ms: 300_000,
            trigger: Some(trigger),
            freeze_ms: None,
        }
    }

    fn down_for_30s() -> Plan {
        plan(Trigger {
            zone_down_for_ms: Some(30_000),
            zone_silent_for_ms: None,
            lane_consumers_gone: None,
            lane_consumers_gone_for_ms: 0,
            cooldown_ms: 600_000,
        })
    }

    /// az-b down since t=0; at t=31 s everything else is fine.
    fn firing() -> TriggerInputs<'static> {
        TriggerInputs {
            now_ms: 31_000,
            zone_down_since_ms: Some(0),
            receiving_health: Ok(()),
            receiving_capacity: Ok(()),
            ..TriggerInputs::default()
        }
    }

    fn blocked(d: TriggerDecision, needle: &str) {
        match d {
            TriggerDecision::Blocked { why, .. } => assert!(why.contains(needle), "{why}"),
            other => panic!("expected blocked ({needle}), got {other:?}"),
        }
    }

    #[test]
    fn fires_once_the_zone_has_been_down_long_enough() {
        let p = down_for_30s();
        assert!(
            matches!(decide(&p, &firing()), TriggerDecision::Fire(r) if r.contains("az-b has been down for 31 s"))
        );
        let early = TriggerInputs { now_ms: 29_999, ..firing() };
        assert_eq!(decide(&p, &early), TriggerDecision::Quiet);
        let up = TriggerInputs { zone_down_since_ms: None, ..firing() };
        assert_eq!(decide(&p, &up), TriggerDecision::Quiet);
    }

    #[test]
    fn a_plan_without_a_trigger_never_fires() {
        let p = Plan { trigger: None, ..down_for_30s() };
        assert_eq!(decide(&p, &firing()), TriggerDecision::Quiet);
    }

    #[test]
    fn fires_when_the_lane_consumers_are_gone() {
        let p = plan(Trigger {
            zone_down_for_ms: None,
            zone_silent_for_ms: None,
            lane_consumers_gone: Some("az-b".into()),
            lane_consumers_gone_for_ms: 10_000,
            cooldown_ms: 60_000,
        });
        let gone = TriggerInputs {
            zone_down_since_ms: None,
            consumers_gone_since_ms: Some(5),
            ..firing()
        };
        assert!(
            matches!(decide(&p, &gone), TriggerDecision::Fire(r) if r.contains("lane consumer in az-b"))
        );
        // Gone for less than the minimum duration: a consumer restart, not an incident.
        let brief = TriggerInputs { consumers_gone_since_ms: Some(25_000), ..gone.clone() };
        assert_eq!(decide(&p, &brief), TriggerDecision::Quiet);
        let present = TriggerInputs { consumers_gone_since_ms: None, ..gone };
        assert_eq!(decide(&p, &present), TriggerDecision::Quiet);
    }

    #[test]
    fn never_within_the_cooldown() {
        let p = down_for_30s();
        blocked(
            decide(&p, &TriggerInputs { last_auto_run_ms: Some(1_000), ..firing() }),
            "cooldown",
        );
        let after = TriggerInputs { now_ms: 700_000, last_auto_run_ms: Some(1_000), ..firing() };
        assert!(matches!(decide(&p, &after), TriggerDecision::Fire(_)));
    }

    #[test]
    fn a_silent_zone_fires_zone_silent_for_and_caps_hold_a_fired_trigger() {
        let p = plan(Trigger {
            zone_down_for_ms: Some(30_000),
            zone_silent_for_ms: Some(20_000),
            lane_consumers_gone: None,
            lane_consumers_gone_for_ms: 0,
            cooldown_ms: 600_000,
        });
        let silent = TriggerInputs {
            zone_down_since_ms: None,
            zone_silent_since_ms: Some(10_000),
            ..firing()
        };
        assert!(
            matches!(decide(&p, &silent), TriggerDecision::Fire(r) if r.contains("reported nothing readable for 21 s"))
        );
        let capped = TriggerInputs { caps: Err(("hop_limit", "hop limit: …".into())), ..silent };
        assert!(matches!(decide(&p, &capped), TriggerDecision::Blocked { kind: "hop_limit", .. }));
    }

    #[test]
    fn never_while_a_run_or_drain_is_active() {
        let busy = TriggerInputs { busy: Some("drain 3 of az-b is running".into()), ..firing() };
        blocked(decide(&down_for_30s(), &busy), "drain 3");
    }

    #[test]
    fn never_when_the_receiving_zone_is_unhealthy() {
        let sick = TriggerInputs { receiving_health: Err("az-a errors 9%".into()), ..firing() };
        blocked(decide(&down_for_30s(), &sick), "not healthy: az-a errors 9%");
    }

    #[test]
    fn never_over_capacity() {
        let full = TriggerInputs { receiving_capacity: Err("1200 of 900 rps".into()), ..firing() };
        blocked(decide(&down_for_30s(), &full), "lacks capacity");
    }

    #[test]
    fn never_when_a_precondition_is_false_or_unknown() {
        let false_ = [("db".to_owned(), Ok(false))];
        blocked(
            decide(&down_for_30s(), &TriggerInputs { preconditions: &false_, ..firing() }),
            "`db` is false",
        );
        let unknown = [("db".to_owned(), Err("timeout".to_owned()))];
        blocked(
            decide(&down_for_30s(), &TriggerInputs { preconditions: &unknown, ..firing() }),
            "could not be checked",
        );
        let true_ = [("db".to_owned(), Ok(true))];
        assert!(matches!(
            decide(&down_for_30s(), &TriggerInputs { preconditions: &true_, ..firing() }),
            TriggerDecision::Fire(_)
        ));
    }

    #[test]
    fn validation_names_the_field() {
        let zones = ["az-a", "az-b"];
        let bad = |t: Trigger| validate_trigger(&plan(t), &zones).unwrap_err();
        let t = |down: Option<u64>, silent: Option<u64>, gone: Option<&str>, cooldown_ms| Trigger {
            zone_down_for_ms: down,
            zone_silent_for_ms: silent,
            lane_consumers_gone: gone.map(str::to_owned),
            lane_consumers_gone_for_ms: 0,
            cooldown_ms,
        };
        assert!(bad(t(None, None, None, 1)).starts_with("trigger:"));
        assert!(bad(t(Some(1), None, Some("az-c"), 1)).starts_with("trigger.lane_consumers_gone"));
        assert!(bad(t(Some(1), None, None, 0)).starts_with("cooldown"));
        assert!(bad(t(Some(0), None, None, 1)).starts_with("trigger.zone_down_for"));
        assert!(bad(t(None, Some(0), None, 1)).starts_with("trigger.zone_silent_for"));
        let no_zone = Plan {
            steps: vec![PlanStep::Dial { blue_percent: 0.0, domain: None }],
            ..down_for_30s()
        };
        assert!(
            validate_trigger(&no_zone, &zones).unwrap_err().starts_with("trigger.zone_down_for")
        );
        assert!(validate_trigger(&down_for_30s(), &zones).is_ok());
    }
}
