//! One view for every safety gate across replicas: each replica sends the inputs only it has
//! (the outcomes posted to it, its subscribers' acknowledgements, and, on the lane authority,
//! the live lane members) to the others every [`GATES_EVERY`], and every gate counts its own
//! inputs plus those of the peers heard within [`PEER_FRESH_MS`].
//!
//! Why this and not the alternatives (docs/src/internals.md, "One view for every gate"):
//! - decisions carrying their inputs in the log and checked at apply cannot work, because apply
//!   is pure and cannot check a reading against the world, and a replica proposing with half
//!   the inputs is exactly the bug;
//! - replicas asking each other per decision needs every peer's URL and reachability on the
//!   hot path of every drain tick, and a slow peer would stall every replica's gate;
//! - the reports go on the presence bus (`<topic>.presence`), which every replica already reads,
//!   so they need nothing new to run, never enter the infinite-retention command log, and a
//!   replica that stops sending drops out of every gate within `PEER_FRESH_MS`: its outcomes
//!   stop counting (silence, never health) and its watchers stop counting (they reconnect to a
//!   live replica, which then counts them).
//!
//! The verdicts agree to within one report interval plus the bus's delay, not exactly: a drain
//! step is due at a time that is state, and readings near a threshold may differ for that long.
//! Every input errs on the side of waiting: a peer's subscriber that moved is counted by both for
//! a moment, and a lane authority whose term has not settled says nothing.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::service::health::{Health, ZoneWindow};
use crate::service::lane_membership::{LaneSummary, Lanes};
use crate::service::subscribers::{Subscribers, Summary};

/// How often a replica sends its gate inputs.
pub const GATES_EVERY: Duration = Duration::from_millis(500);
pub use crate::service::peer_reports::PEER_FRESH_MS;
/// The format of [`GateReport`]; a replica ignores reports of another format.
pub const FORMAT: u32 = 1;

/// What one replica sends. Distinguished on the presence bus from an announcement by `gates`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    /// [`FORMAT`].
    pub gates: u32,
    pub log_id: String,
    pub replica: String,
    /// When it was sent, by the sender's clock.
    pub at_ms: u64,
    pub outcomes: Vec<ZoneWindow>,
    pub subscribers: Summary,
    /// Only from the lane authority, once its term has settled.
    #[serde(default)]
    pub lanes: Option<LaneSummary>,
}

/// The gates' local inputs, which a report is made of and peers' reports feed.
pub struct GateInputs {
    pub health: Arc<Health>,
    pub subscribers: Arc<Subscribers>,
    pub lanes: Arc<Lanes>,
}

impl GateInputs {
    /// This replica's report at `now_ms`.
    /// `table_version` is the version this replica has applied (its subscribers' summary is
    /// as of that version).
    pub fn report(
        &self,
        log_id: &str,
        replica: &str,
        table_version: u64,
        now_ms: u64,
    ) -> GateReport {
        let subscribers = self.subscribers.summary(now_ms, table_version);
        GateReport {
            gates: FORMAT,
            log_id: log_id.to_owned(),
            replica: replica.to_owned(),
            at_ms: now_ms,
            outcomes: self.health.local_windows(now_ms),
            subscribers,
            lanes: self.lanes.summary(now_ms),
        }
    }

    /// Takes in a payload from the bus if it is another replica's report of this log; says
    /// whether it was one (else it may be an announcement).
    pub fn receive(&self, payload: &[u8], log_id: &str, me: &str) -> bool {
        let Ok(report) = serde_json::from_slice::<GateReport>(payload) else { return false };
        if report.gates != FORMAT || report.log_id != log_id || report.replica == me {
            return true;
        }
        self.health.receive_peer(&report.replica, report.at_ms, &report.outcomes);
        self.subscribers.receive_peer(&report.replica, report.at_ms, report.subscribers);
        if let Some(lanes) = report.lanes {
            self.lanes.receive_peer(&report.replica, report.at_ms, lanes);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Reading, ZoneId, Zones};
    use crate::service::health::Source;

    fn zones() -> Zones {
        Zones::two("az-a", "az-b")
    }

    fn health() -> Arc<Health> {
        Arc::new(Health::new(zones(), 10_000, Source::Outcomes).with_detection(10_000, 10_000))
    }

    fn reading_rate(r: Reading) -> f64 {
        match r {
            Reading::Known { error_rate, .. } => error_rate,
            Reading::Unknown { why } => panic!("unknown: {why}"),
        }
    }

    #[test]
    fn outcomes_posted_to_another_replica_count_here_until_it_stops_sending() {
        let (here, there) = (health(), health());
        there.record("az-b", ZoneId::BLUE, 40, 60, 1_000).unwrap();
        here.record("az-b", ZoneId::BLUE, 100, 0, 1_000).unwrap();
        // Alone, this replica thinks az-b is healthy.
        assert_eq!(reading_rate(here.recent("az-b", 1_200)), 0.0);
        here.receive_peer("r2", 1_100, &there.local_windows(1_100));
        assert_eq!(reading_rate(here.recent("az-b", 1_200)), 0.3);
        // An older report never replaces a newer one.
        here.receive_peer("r2", 900, &[]);
        assert_eq!(reading_rate(here.recent("az-b", 1_200)), 0.3);
        // The peer's outcomes stop counting once it has been silent for PEER_FRESH_MS.
        assert_eq!(reading_rate(here.recent("az-b", 1_100 + PEER_FRESH_MS + 1)), 0.0);
        // A zone only a silent peer heard of is unknown, never healthy.
        let lonely = health();
        lonely.receive_peer("r2", 1_100, &there.local_windows(1_100));
        assert!(matches!(lonely.recent("az-a", 1_200), Reading::Unknown { .. }));
    }

    fn lanes() -> Lanes {
        use crate::core::{RoutingTable, UnitMode, UnitScheme};
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let table = RoutingTable::from_parts(1, scheme, 50, Default::default(), zones()).unwrap();
        let config = crate::config::LanesConfig {
            session_timeout_ms: 1_000,
            heartbeat_interval_ms: 200,
            lag_interval_ms: 200,
            kafka_bootstrap: None,
            max_groups: 4,
            max_members: 8,
            member_key: None,
            previous_member_key: None,
            max_groups_per_caller: 4,
            max_members_per_caller: 100,
            lease_ms: 400,
        };
        Lanes::new(zones(), config, Arc::new(arc_swap::ArcSwap::from_pointee(table)), None)
    }

    #[test]
    fn a_report_round_trips_and_a_replica_ignores_its_own_and_other_logs() {
        let mk = || GateInputs {
            health: health(),
            subscribers: Arc::new(Subscribers::new(10_000, 100)),
            lanes: Arc::new(lanes()),
        };
        let (a, b) = (mk(), mk());
        a.health.record("az-a", ZoneId::GREEN, 5, 5, 1_000).unwrap();
        let payload = serde_json::to_vec(&a.report("log", "r1", 1, 1_000)).unwrap();
        assert!(b.receive(&payload, "other-log", "r2"));
        assert!(matches!(b.health.recent("az-a", 1_000), Reading::Unknown { .. }));
        assert!(b.receive(&payload, "log", "r1"), "its own report");
        assert!(matches!(b.health.recent("az-a", 1_000), Reading::Unknown { .. }));
        assert!(b.receive(&payload, "log", "r2"));
        assert_eq!(reading_rate(b.health.recent("az-a", 1_000)), 0.5);
        // A presence announcement is not a report.
        assert!(!b.receive(br#"{"log_id":"log","id":"r1","zone":"az-a","url":"u","applied_version":1,"started_at_ms":0,"at_ms":1}"#, "log", "r2"));
    }
}
