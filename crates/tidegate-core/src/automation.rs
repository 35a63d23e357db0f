//! The caps on automatic failover, as the seeds prescribe for any fallback: one hop, a bounded
//! share, a time window, and a human after that ("兜底要有三重限制：深度只允许一跳…比例…时限…
//! 到期后不再尝试，返回明确失败并转人工", seed 003).
//!
//! [`Automation`] is part of the replicated state (`Command::SetAutomation`): the runtime stop
//! switch and the moment automation was last *armed*. Every automatic run since then counts
//! against the caps in [`check_caps`], on every replica and across restarts, because they are
//! read from the log's state and never from a replica's memory. An operator re-arms
//! automation (`PUT /v1/automation` with `stopped: false`) once the incident is handled; that
//! clears the hop and once-per-incident holds.

/// The stop switch and the arming time, in the state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Automation {
    /// While true, no trigger starts a run (operators still can).
    pub stopped: bool,
    /// Automatic runs started before this do not count against the caps.
    pub armed_ms: u64,
    /// Who last set it, when and why (empty before anyone did).
    pub changed_by: String,
    pub changed_ms: u64,
    pub reason: String,
}

/// An automatic run since automation was armed, as the caps read it.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoRun {
    pub run: u64,
    pub plan: String,
    /// The zone it moved users out of (its plan's trigger zone).
    pub left_zone: Option<String>,
    pub started_ms: u64,
}

/// What the caps judge one trigger against.
#[derive(Clone, Debug)]
pub struct Caps<'a> {
    pub automation: &'a Automation,
    /// Automatic runs started at or after `automation.armed_ms`.
    pub runs: &'a [AutoRun],
    /// At most one automatic run per this, across every plan (`[plans] auto_window`).
    pub window_ms: u64,
    /// The largest share of users, in percent, one automatic run may move
    /// (`[plans] auto_max_share_percent`).
    pub max_share_percent: f64,
}

/// Why a trigger that fired may not start its plan: a kind for metrics and a sentence.
pub fn check_caps(
    caps: &Caps<'_>,
    plan: &str,
    receivers: &[&str],
    share_percent: f64,
    now_ms: u64,
) -> Result<(), (&'static str, String)> {
    let a = caps.automation;
    if a.stopped {
        return Err((
            "stopped",
            format!(
                "automation is stopped (by {}: {}); PUT /v1/automation to start it again",
                a.changed_by, a.reason
            ),
        ));
    }
    if let Some(run) = caps.runs.iter().find(|r| r.plan == plan) {
        return Err((
            "once_per_incident",
            format!(
                "plan {plan} already started automatically (run {}) since automation was armed: \
                 once per incident; an operator re-arms automation when the incident is handled",
                run.run
            ),
        ));
    }
    // The hop limit: no automatic move back into a zone automation emptied. Among three or
    // more zones such a zone is left out of the receivers; it holds the run when every zone
    // that could receive is one.
    let hopped: Vec<(&str, &AutoRun)> = receivers
        .iter()
        .filter_map(|z| {
            caps.runs.iter().find(|r| r.left_zone.as_deref() == Some(*z)).map(|r| (*z, r))
        })
        .collect();
    if !receivers.is_empty() && hopped.len() == receivers.len() {
        let (zone, run) = hopped[0];
        let others = if hopped.len() > 1 {
            format!(" (and {} more zones)", hopped.len() - 1)
        } else {
            String::new()
        };
        return Err((
            "hop_limit",
            format!(
                "hop limit: automatic run {} (plan {}) moved users out of {zone}{others}; no automatic \
                 move back into it until an operator re-arms automation",
                run.run, run.plan
            ),
        ));
    }
    if let Some(last) = caps.runs.iter().map(|r| r.started_ms).max()
        && now_ms.saturating_sub(last) < caps.window_ms
    {
        return Err((
            "window",
            format!(
                "another automatic run started {} s ago: at most one per {} s across all plans",
                now_ms.saturating_sub(last) / 1000,
                caps.window_ms / 1000
            ),
        ));
    }
    if share_percent > caps.max_share_percent + 1e-9 {
        return Err((
            "share_cap",
            format!(
                "the plan would move {share_percent:.1} % of users, above the {:.1} % an automatic run may move",
                caps.max_share_percent
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: u64, plan: &str, left: &str, at: u64) -> AutoRun {
        AutoRun { run: id, plan: plan.into(), left_zone: Some(left.into()), started_ms: at }
    }

    fn late(c: Caps<'_>) -> Caps<'_> {
        Caps { window_ms: 1, ..c }
    }

    fn caps<'a>(a: &'a Automation, runs: &'a [AutoRun]) -> Caps<'a> {
        Caps { automation: a, runs, window_ms: 600_000, max_share_percent: 100.0 }
    }

    #[test]
    fn the_ping_pong_stops_after_one_hop() {
        let a = Automation::default();
        // az-b failing -> az-a ran; az-a failing -> az-b would move users back into az-b.
        let runs = [run(1, "az-b-failing", "az-b", 0)];
        let e = check_caps(&caps(&a, &runs), "az-a-failing", &["az-b"], 50.0, 15_000);
        assert_eq!(e.unwrap_err().0, "hop_limit");
        // Even past the window, until an operator re-arms.
        let late = Caps { window_ms: 1, ..caps(&a, &runs) };
        let e = check_caps(&late, "az-a-failing", &["az-b"], 50.0, 9_000_000);
        assert!(e.unwrap_err().1.contains("re-arms"));
        // Re-armed: the old run no longer counts.
        assert!(check_caps(&caps(&a, &[]), "az-a-failing", &["az-b"], 50.0, 15_000).is_ok());
    }

    #[test]
    fn among_three_zones_the_hop_limit_holds_only_when_every_receiver_was_emptied() {
        let a = Automation::default();
        let runs = [run(1, "az-a-failing", "az-a", 0)];
        // az-b failing: az-c may still receive (az-a is left out of the receivers).
        assert!(
            check_caps(&late(caps(&a, &runs)), "az-b-failing", &["az-a", "az-c"], 40.0, 20_000)
                .is_ok()
        );
        // Only the emptied zone could receive: held.
        let e = check_caps(&late(caps(&a, &runs)), "az-b-failing", &["az-a"], 40.0, 20_000);
        assert_eq!(e.unwrap_err().0, "hop_limit");
        // Two runs emptied both other zones: held, and the sentence says so.
        let two = [run(1, "az-a-failing", "az-a", 0), run(2, "az-c-failing", "az-c", 5)];
        let e = check_caps(&late(caps(&a, &two)), "az-b-failing", &["az-a", "az-c"], 40.0, 20_000)
            .unwrap_err();
        assert_eq!(e.0, "hop_limit");
        assert!(e.1.contains("and 1 more zones"), "{}", e.1);
    }

    #[test]
    fn a_plan_fires_once_per_incident_and_one_run_per_window() {
        let a = Automation::default();
        let runs = [run(1, "az-b-failing", "az-b", 0)];
        let again = check_caps(&caps(&a, &runs), "az-b-failing", &["az-a"], 50.0, 60_000);
        assert_eq!(again.unwrap_err().0, "once_per_incident");
        let other = check_caps(&caps(&a, &runs), "az-c-failing", &["az-a"], 10.0, 60_000);
        assert_eq!(other.unwrap_err().0, "window");
        assert!(check_caps(&caps(&a, &runs), "az-c-failing", &["az-a"], 10.0, 600_000).is_ok());
    }

    #[test]
    fn the_switch_and_the_share_cap_hold() {
        let stopped = Automation {
            stopped: true,
            changed_by: "alice".into(),
            reason: "db failover by hand".into(),
            ..Automation::default()
        };
        let e = check_caps(&caps(&stopped, &[]), "p", &["az-a"], 10.0, 0).unwrap_err();
        assert_eq!(e.0, "stopped");
        assert!(e.1.contains("alice") && e.1.contains("db failover by hand"), "{}", e.1);
        let a = Automation::default();
        let capped = Caps { max_share_percent: 30.0, ..caps(&a, &[]) };
        assert_eq!(check_caps(&capped, "p", &["az-a"], 50.0, 0).unwrap_err().0, "share_cap");
        assert!(check_caps(&capped, "p", &["az-a"], 30.0, 0).is_ok());
    }
}
