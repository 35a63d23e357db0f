//! Which zones may receive a zone's users when nobody named them: one judgement for the
//! evacuation route, a plan's zone move among three or more zones, and the automatic trigger.
//!
//! The rule itself is pure ([`crate::core::choose_receivers`]); this module only reads each
//! candidate's health and whether a drain is moving it. Blocking: a Prometheus health source
//! queries over the network.

use crate::core::{AutoRun, Reading, ReceiverHealth, RoutingTable, State, ZoneId};
use crate::service::health::Health;

/// The receivers chosen, and the candidates left out with why (one sentence each).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Choice {
    pub chosen: Vec<ZoneId>,
    pub skipped: Vec<(ZoneId, String)>,
}

impl Choice {
    /// The reasons, in zone order, for an answer or an audit record.
    pub fn skipped_reasons(&self) -> Vec<String> {
        self.skipped.iter().map(|(_, why)| why.clone()).collect()
    }
}

/// The live zones but `source` that may receive its users: never a failing zone (errors above
/// `max_error_rate`) or one a drain is moving users out of; one of unknown health (dead, silent,
/// or idle: owning nothing it reports no outcomes) only when no candidate is known healthy.
pub fn choose(
    health: &Health,
    state: &State,
    table: &RoutingTable,
    source: ZoneId,
    max_error_rate: f64,
    now_ms: u64,
) -> Choice {
    let draining = state.active_drain().map(|d| d.plan.zone.clone());
    let candidates: Vec<(ZoneId, String, ReceiverHealth)> = table
        .zones()
        .live()
        .filter(|z| *z != source)
        .map(|zone| {
            let name = table.zone_of(zone).to_owned();
            let judged = match health.zone(&name, now_ms).reading {
                _ if draining.as_deref() == Some(name.as_str()) => ReceiverHealth::Draining,
                Reading::Known { error_rate, .. } if error_rate > max_error_rate => {
                    ReceiverHealth::Failing { error_rate }
                }
                Reading::Known { .. } => ReceiverHealth::Healthy,
                Reading::Unknown { why } => ReceiverHealth::Unknown { why },
            };
            (zone, name, judged)
        })
        .collect();
    let (chosen, skipped) = crate::core::choose_receivers(&candidates, max_error_rate);
    Choice { chosen, skipped }
}

/// An automatic run's receivers: [`choose`]'s, without the zones an automatic run since
/// automation was armed moved users out of (the hop limit: no automatic move back into a zone
/// automation emptied).
pub fn for_automatic_run(mut choice: Choice, table: &RoutingTable, runs: &[AutoRun]) -> Choice {
    let mut kept = Vec::new();
    for zone in std::mem::take(&mut choice.chosen) {
        let name = table.zone_of(zone);
        if let Some(run) = runs.iter().find(|r| r.left_zone.as_deref() == Some(name)) {
            choice.skipped.push((
                zone,
                format!(
                    "{name}: hop limit (automatic run {} of plan {} moved users out of it)",
                    run.run, run.plan
                ),
            ));
        } else {
            kept.push(zone);
        }
    }
    choice.chosen = kept;
    choice.skipped.sort_by_key(|(z, _)| z.index());
    choice
}
