//! Prometheus metrics: names, help texts and the process-wide recorder.
//!
//! Every metric tidegate exports is named in [`METRICS`] with its help text; the tidy test checks
//! that nothing is recorded under a name that is not listed here, so dashboards and alerts can
//! rely on this table.

use std::sync::OnceLock;

use metrics::{Counter, Histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::core::{Reading, RoutingTable, State, ZoneId, Zones};

pub const TAG_REQUESTS: &str = "tidegate_tag_requests_total";
pub const TAG_DURATION: &str = "tidegate_tag_duration_seconds";
pub const CHANGES: &str = "tidegate_changes_total";
pub const DIAL_CHANGES: &str = "tidegate_dial_changes_total";
pub const BLUE_RATIO: &str = "tidegate_routing_blue_ratio";
pub const BLUE_UNITS: &str = "tidegate_routing_blue_units";
pub const ROUTING_VERSION: &str = "tidegate_routing_version";
pub const PINS: &str = "tidegate_routing_pins";
pub const API_ERRORS: &str = "tidegate_api_errors_total";
pub const LOG_APPEND_DURATION: &str = "tidegate_log_append_duration_seconds";
pub const ZONE_REQUESTS: &str = "tidegate_zone_requests_total";
pub const ZONE_ERRORS: &str = "tidegate_zone_errors_total";
pub const ZONE_ERROR_RATIO: &str = "tidegate_zone_error_ratio";
pub const ZONE_WINDOW_REQUESTS: &str = "tidegate_zone_window_requests";
pub const ZONE_HEALTH_KNOWN: &str = "tidegate_zone_health_known";
pub const ZONE_SHARE: &str = "tidegate_zone_share_ratio";
pub const DRAIN_ACTIVE: &str = "tidegate_drain_active";
pub const DRAIN_CAPACITY_HELD: &str = "tidegate_drain_capacity_held";
pub const ZONE_CAN_ABSORB: &str = "tidegate_zone_can_absorb";
pub const ZONE_PINNED_USERS: &str = "tidegate_zone_pinned_users";
pub const DRAIN_STATE: &str = "tidegate_drain_state";
pub const PLAN_RUNS: &str = "tidegate_plan_runs_total";
pub const PLAN_RUN_DURATION: &str = "tidegate_plan_run_duration_seconds";
pub const PLAN_RUN_ACTIVE: &str = "tidegate_plan_run_active";
pub const PLAN_RUN_OVER_RTO: &str = "tidegate_plan_run_over_rto";
pub const DRAIN_STEPS_DONE: &str = "tidegate_drain_steps_done";
pub const DRAIN_STEPS_PLANNED: &str = "tidegate_drain_steps_planned";
pub const DRAIN_BREACHES: &str = "tidegate_drain_guard_breaches_total";
pub const DRAIN_HOLDS: &str = "tidegate_drain_holds_total";
pub const SUBSCRIBERS: &str = "tidegate_subscribers";
pub const DRAIN_PAUSED: &str = "tidegate_drain_paused";
pub const FROZEN_UNITS: &str = "tidegate_frozen_units";
pub const DUAL_OWNER_WRITES: &str = "tidegate_dual_owner_writes_total";
pub use crate::client::metrics::{CLIENT_MISROUTED, CLIENT_WRITE_CHECKS};
pub const UI_LOGINS: &str = "tidegate_ui_logins_total";
pub const LANE_LAG: &str = "tidegate_lane_lag_messages";
pub const LANE_PARTITION_LAG: &str = "tidegate_lane_partition_lag_messages";
pub const LANE_MESSAGES: &str = "tidegate_lane_messages_total";
pub const LANE_MEMBERS: &str = "tidegate_lane_members";
pub const LANE_ASSIGNED: &str = "tidegate_lane_assigned_partitions";
pub const LANE_GENERATION: &str = "tidegate_lane_generation";
pub const LANE_LAG_ERRORS: &str = "tidegate_lane_lag_read_errors_total";
// Counted by the lane producer and consumer (`tidegate_client::kafka`), named by the client.
pub use crate::client::metrics::{LANE_CONSUMED, LANE_HANDOVERS, LANE_PRODUCED};
pub const EDGE_CONNECTED: &str = "tidegate_edge_coordinator_connected";
pub const EDGE_TABLE_AGE: &str = "tidegate_edge_table_age_seconds";
pub const TABLE_CONFIRMED_AGE: &str = "tidegate_table_confirmed_age_seconds";
pub const TABLE_LEASE: &str = "tidegate_table_lease_seconds";
pub const EDGE_LEAVES: &str = "tidegate_edge_leaves";
pub const EDGE_GATE: &str = "tidegate_edge_gate_requests_total";
pub const EDGE_GATE_CALLER_REFUSED: &str = "tidegate_edge_gate_caller_refused_total";
pub const EDGE_WRITE_CHECKS: &str = "tidegate_edge_write_checks_total";
pub const NODE_ID_CONFLICTS: &str = "tidegate_node_id_conflicts_total";
pub const PRESENCE_DROPPED: &str = "tidegate_presence_dropped_total";
pub const OFREP_EVALUATIONS: &str = "tidegate_ofrep_evaluations_total";
pub const PLAN_TRIGGERS: &str = "tidegate_plan_triggers_total";
pub const PLAN_TRIGGER_REFUSALS: &str = "tidegate_plan_trigger_refusals_total";
pub const CONNECTIONS_LIMIT: &str = "tidegate_connections_limit";
pub const CONNECTIONS_REFUSED: &str = "tidegate_connections_refused_total";
pub const CONNECTIONS_EVICTED: &str = "tidegate_connections_evicted_total";
pub const CONNECTION_TIMEOUTS: &str = "tidegate_connection_timeouts_total";

/// Kind, name, unit and help text of every metric.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "gauge",
        CONNECTIONS_LIMIT,
        "Most connections this process serves at once over all its listeners (server.max_connections or edge.max_connections, else derived from the open-file limit).",
    ),
    (
        "counter",
        CONNECTIONS_REFUSED,
        "Connections refused with 503 too_many_connections: at the limit, every open connection had completed a request and the newcomer's client held as many as any other.",
    ),
    (
        "counter",
        CONNECTIONS_EVICTED,
        "Connections closed to admit a new one at the limit: the oldest that had not completed a request head (idle or half-sent), else the oldest of the client holding the most connections.",
    ),
    (
        "counter",
        CONNECTION_TIMEOUTS,
        "Connections closed by a timeout, by kind: header (no complete first request head within header_read_timeout) or idle (a kept-alive connection idle past idle_timeout).",
    ),
    ("gauge", EDGE_CONNECTED, "1 while the edge's watch stream to a coordinator is open, else 0."),
    (
        "gauge",
        EDGE_LEAVES,
        "Live subscribers watching through the edge (the fan-out tree), as last reported to the coordinator.",
    ),
    (
        "gauge",
        EDGE_TABLE_AGE,
        "Seconds since the edge received (or cached) the routing table it serves.",
    ),
    (
        "gauge",
        TABLE_CONFIRMED_AGE,
        "Seconds since this process's routing table was last confirmed current (a coordinator: its newest confirmation through its log; an edge: the newest confirmation it received). Past tidegate_table_lease_seconds its write checks answer unconfirmed.",
    ),
    (
        "gauge",
        TABLE_LEASE,
        "The table lease in seconds (`[subscribers] lease`, or the one the edge's coordinator announced; 0: none).",
    ),
    (
        "counter",
        EDGE_GATE,
        "Gateway checks answered by the edge, by colour and source (`unit`, `pin`, `fallback`, or `frozen` for a write refused while its unit is frozen).",
    ),
    (
        "counter",
        EDGE_WRITE_CHECKS,
        "Write checks answered by the edge (GET /v1/write-check), by answer: owned, misrouted, behind, frozen, unconfirmed.",
    ),
    (
        "counter",
        EDGE_GATE_CALLER_REFUSED,
        "Gateway checks refused because the gateway's own token was wrong or missing (answered 500, so the gateway serves its fallback).",
    ),
    (
        "counter",
        NODE_ID_CONFLICTS,
        "Announcements heard from another live process using this replica's node id (the later one stops).",
    ),
    (
        "counter",
        PRESENCE_DROPPED,
        "Messages on the presence topic (announcements, gate reports) dropped because store.kafka.presence_key is set and they are not signed with it, by reason: unsigned or bad_signature.",
    ),
    ("counter", OFREP_EVALUATIONS, "OpenFeature flag evaluations, by reason or error code."),
    ("counter", TAG_REQUESTS, "Users tagged, by the colour and zone they were given."),
    (
        "histogram",
        TAG_DURATION,
        "Time to tag one user inside the handler, in seconds (the first 64 per worker thread, then one in 64, are timed).",
    ),
    ("counter", CHANGES, "Accepted state changes, by action (dial, pin, unpin)."),
    ("counter", DIAL_CHANGES, "Accepted moves of the blue/green dial."),
    ("gauge", BLUE_RATIO, "Current share of units routed to blue, as a ratio (0-1)."),
    ("gauge", BLUE_UNITS, "Current number of units routed to blue."),
    ("gauge", ROUTING_VERSION, "Version of the routing table currently served."),
    ("gauge", PINS, "Number of users pinned to a colour."),
    ("counter", API_ERRORS, "API requests answered with an error, by error code."),
    (
        "histogram",
        LOG_APPEND_DURATION,
        "Time to append and fsync one command-log entry, in seconds.",
    ),
    ("counter", ZONE_REQUESTS, "Requests reported through POST /v1/outcomes, by zone and colour."),
    (
        "counter",
        ZONE_ERRORS,
        "Failed requests reported through POST /v1/outcomes, by zone and colour.",
    ),
    (
        "gauge",
        ZONE_ERROR_RATIO,
        "Error ratio (0-1) of each zone over the health window, as the drain guard sees it.",
    ),
    ("gauge", ZONE_WINDOW_REQUESTS, "Requests seen per zone over the health window."),
    (
        "gauge",
        ZONE_HEALTH_KNOWN,
        "1 when the zone's health is known, 0 when the source cannot tell.",
    ),
    ("gauge", ZONE_SHARE, "Share of users routed to each zone, as a ratio (0-1)."),
    (
        "gauge",
        ZONE_PINNED_USERS,
        "Users pinned to each zone (a pin outranks the unit map: they stay when the zone is evacuated).",
    ),
    ("gauge", DRAIN_ACTIVE, "1 while a drain is running or paused, by drained zone."),
    (
        "gauge",
        DRAIN_CAPACITY_HELD,
        "1 while the active drain (an operator's or a plan's) holds because the receiving zone lacks capacity (or its load is unknown), by drained zone.",
    ),
    (
        "gauge",
        ZONE_CAN_ABSORB,
        "Whether zone `zone` could take every user of zone `from` now within its allowed load (1), could not (0), or cannot tell (NaN); only for zones with a capacity.",
    ),
    (
        "counter",
        PLAN_RUNS,
        "Finished plan runs, by plan, outcome (completed, aborted, rolled_back, failed) and drill (true/false), counted by the replica that logged the finishing command.",
    ),
    (
        "gauge",
        PLAN_RUN_DURATION,
        "Switch time of the plan's latest run in seconds: start to last step done (so far, while it runs).",
    ),
    ("gauge", PLAN_RUN_ACTIVE, "1 while a run (or drill) of the plan is active, else 0."),
    (
        "gauge",
        PLAN_RUN_OVER_RTO,
        "1 while the plan's active run has been switching for longer than its RTO, else 0.",
    ),
    ("gauge", DRAIN_STATE, "State of the latest drain: 1 for its current state, 0 for the others."),
    ("gauge", DRAIN_STEPS_DONE, "Steps the latest drain has taken toward its target."),
    ("gauge", DRAIN_STEPS_PLANNED, "Steps the latest drain needs from start to target."),
    (
        "counter",
        DRAIN_BREACHES,
        "Guard checks that found a zone above the drain's error-rate limit.",
    ),
    ("counter", DRAIN_HOLDS, "Drain steps held by the guard, by kind (breach, unknown)."),
    (
        "gauge",
        DRAIN_PAUSED,
        "1 when the latest drain is paused, by cause (guard, convergence, operator, freeze: a loss-less step's freeze was not applied everywhere within its window).",
    ),
    ("gauge", SUBSCRIBERS, "Routing-table subscribers by state: current, behind or stale."),
    (
        "counter",
        DUAL_OWNER_WRITES,
        "Writes services reported (POST /v1/writes) that show a user written by two zones: a write at an older routing version, by another zone, committed at or after the user's newest-version write. By the stale zone and the owner zone.",
    ),
    (
        "gauge",
        FROZEN_UNITS,
        "Units whose writes a loss-less move in progress freezes, by domain (0 between moves).",
    ),
    (
        "counter",
        CLIENT_MISROUTED,
        "Writes refused by the client library's ownership check, by the colour that owns the user.",
    ),
    (
        "counter",
        CLIENT_WRITE_CHECKS,
        "Write checks of the client library (Router::check_write), by answer: owned, misrouted, behind, frozen, unconfirmed.",
    ),
    ("counter", UI_LOGINS, "Logins to the operator web UI, by outcome (ok, failed)."),
    (
        "counter",
        PLAN_TRIGGERS,
        "Plan runs this replica started automatically (signed by auto) because the plan's trigger fired, by plan.",
    ),
    (
        "counter",
        PLAN_TRIGGER_REFUSALS,
        "Times a plan's trigger condition held but the run was refused, counted once per refusal episode (when the reason changes), by plan and reason (cooldown, busy, receiving_unhealthy, capacity, precondition, start_refused).",
    ),
    (
        "gauge",
        LANE_LAG,
        "Messages in a lane topic's half not yet committed by the group (high watermark minus committed offset), by group, topic, half and zone.",
    ),
    (
        "gauge",
        LANE_PARTITION_LAG,
        "Messages in one partition of a lane topic not yet committed by the group, by group, topic, partition and half.",
    ),
    (
        "counter",
        LANE_MESSAGES,
        "Messages written to each half of a lane topic (the sum of its partitions' high watermarks, read from Kafka), by topic and half.",
    ),
    ("gauge", LANE_MEMBERS, "Live consumers registered in a lane group, by group and zone."),
    (
        "gauge",
        LANE_ASSIGNED,
        "Partitions a lane group's consumers in each zone may read now, by group and zone.",
    ),
    (
        "gauge",
        LANE_GENERATION,
        "Generation of a lane group's assignment; it grows whenever the assignment changes.",
    ),
    ("counter", LANE_LAG_ERRORS, "Failed reads of a lane group's offsets from Kafka, by group."),
    (
        "counter",
        LANE_PRODUCED,
        "Messages a lane producer had acknowledged by Kafka, by topic and colour (half).",
    ),
    (
        "counter",
        LANE_CONSUMED,
        "Messages handed to a lane consumer's application, by group, topic and zone.",
    ),
    (
        "counter",
        LANE_HANDOVERS,
        "Lane consumer handovers at a new routing version, by group, topic, zone and outcome (released, timed_out).",
    ),
];

/// Every drain state name, for the one-hot state gauge.
const DRAIN_STATES: [&str; 7] =
    ["running", "paused", "settling", "rolling_back", "completed", "aborted", "rolled_back"];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global recorder once per process and returns its handle.
///
/// Why once per process: the `metrics` facade has one global recorder; tests build many Rocket
/// instances in one process and must all share it.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let latency_buckets = [
                0.000_001, 0.000_002, 0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25,
                0.000_5, 0.001, 0.005, 0.025, 0.1,
            ];
            let fsync_buckets =
                [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0];
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(TAG_DURATION.into()), &latency_buckets)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(LOG_APPEND_DURATION.into()),
                        &fsync_buckets,
                    )
                })
                .expect("bucket lists are non-empty constants")
                .build_recorder();
            let handle = recorder.handle();
            spawn_upkeep(handle.clone());
            // Another recorder may already be installed by an embedding application; then our
            // handle renders only what we record through it, which is still correct output.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            prime();
            handle
        })
        .clone()
}

/// How often the recorder's upkeep runs.
pub const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs the recorder's upkeep on a timer.
///
/// Why: histogram samples are buffered until something drains them, which `render` (a scrape)
/// does and nothing else; with no Prometheus scraping, every tag would keep its sample (about
/// 21 bytes) forever. Upkeep folds the buffers into the histograms, so memory stays flat.
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned =
        std::thread::Builder::new().name("tidegate-metrics-upkeep".into()).spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the metrics upkeep thread: {e}");
    }
}

/// Registers at zero the counters whose label sets are known up front, so they are exported
/// (and `rate()` works) before the first event instead of appearing out of nowhere.
fn prime() {
    for outcome in ["ok", "failed"] {
        metrics::counter!(UI_LOGINS, "outcome" => outcome).increment(0);
    }
    metrics::counter!(DIAL_CHANGES).increment(0);
    metrics::counter!(NODE_ID_CONFLICTS).increment(0);
    for reason in ["unsigned", "bad_signature"] {
        metrics::counter!(PRESENCE_DROPPED, "reason" => reason).increment(0);
    }
    metrics::counter!(CONNECTIONS_REFUSED).increment(0);
    metrics::counter!(CONNECTIONS_EVICTED).increment(0);
    for kind in ["header", "idle"] {
        metrics::counter!(CONNECTION_TIMEOUTS, "kind" => kind).increment(0);
    }
    for action in crate::core::Command::ACTIONS {
        metrics::counter!(CHANGES, "action" => *action).increment(0);
    }
    for kind in ["breach", "unknown"] {
        metrics::counter!(DRAIN_HOLDS, "kind" => kind).increment(0);
    }
}

/// Registers at zero the counters labelled by this deployment's zones.
pub fn prime_zones(zones: &crate::core::Zones) {
    for (_, zone) in zones.iter() {
        let zone = &zone.name;
        metrics::counter!(DRAIN_BREACHES, "zone" => zone.clone()).increment(0);
        for (_, spec) in zones.iter() {
            let labels = [("zone", zone.clone()), ("color", spec.lane.clone())];
            metrics::counter!(ZONE_REQUESTS, &labels).increment(0);
            metrics::counter!(ZONE_ERRORS, &labels).increment(0);
            if spec.name != *zone {
                let pair = [("stale_zone", zone.clone()), ("owner_zone", spec.name.clone())];
                metrics::counter!(DUAL_OWNER_WRITES, &pair).increment(0);
            }
        }
    }
}

fn describe() {
    for (kind, name, help) in METRICS {
        match *kind {
            "counter" => metrics::describe_counter!(*name, *help),
            "gauge" => metrics::describe_gauge!(*name, *help),
            _ => metrics::describe_histogram!(*name, Unit::Seconds, *help),
        }
    }
}

/// Pre-registered metric handles for the tagging hot path (no registry lookup per request).
/// One tag request in this many (per thread) is timed for the tag latency histogram.
pub const TAG_TIMING_SAMPLE: u32 = 64;

pub struct TagCounters {
    /// One counter per zone, by index.
    zones: Vec<Counter>,
    duration: Histogram,
}

impl TagCounters {
    pub fn new(table: &RoutingTable) -> TagCounters {
        TagCounters::for_zones(table.zones())
    }

    /// Counters labelled with the zone of each colour.
    pub fn for_zones(zones: &Zones) -> TagCounters {
        let counter = |color: ZoneId| {
            metrics::counter!(
                TAG_REQUESTS,
                "color" => zones.lane(color).to_owned(),
                "zone" => zones.zone_of(color).to_owned()
            )
        };
        TagCounters {
            zones: zones.ids().map(counter).collect(),
            duration: metrics::histogram!(TAG_DURATION),
        }
    }

    #[inline]
    pub fn count(&self, color: ZoneId, n: u64) {
        if let Some(counter) = self.zones.get(color.index()) {
            counter.increment(n);
        }
    }

    #[inline]
    pub fn time(&self, seconds: f64) {
        self.duration.record(seconds);
    }

    /// True for the first [`TAG_TIMING_SAMPLE`] tag requests on this thread, then for one in
    /// [`TAG_TIMING_SAMPLE`]: only those read the clock and record a latency sample (a quiet
    /// instance still reports every request). Why sample: the histogram keeps every sample until
    /// the next scrape, and two clock reads plus a sample cost as much as the tag itself.
    #[inline]
    pub fn sample_timing(&self) -> bool {
        thread_local! {
            static SEEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        }
        SEEN.with(|seen| {
            let n = seen.get().wrapping_add(1);
            seen.set(n);
            n <= TAG_TIMING_SAMPLE || n % TAG_TIMING_SAMPLE == 0
        })
    }
}

/// What decided a gateway check (`source` of `tidegate_edge_gate_requests_total`).
pub const GATE_SOURCES: [&str; 5] = ["unit", "pin", "channel", "fallback", "frozen"];

/// Pre-registered `tidegate_edge_gate_requests_total` handles, by zone and source, so the gate
/// (one call per user request behind nginx) does no registry lookup or label allocation.
pub struct GateCounters {
    /// Per zone index: its lane, and one counter per [`GATE_SOURCES`] entry.
    zones: Vec<(String, [Counter; GATE_SOURCES.len()])>,
}

impl GateCounters {
    pub fn for_zones(zones: &Zones) -> GateCounters {
        let zones = zones
            .ids()
            .map(|color| {
                let lane = zones.lane(color).to_owned();
                let counters = GATE_SOURCES
                    .map(|source| metrics::counter!(EDGE_GATE, "color" => lane.clone(), "source" => source));
                (lane, counters)
            })
            .collect();
        GateCounters { zones }
    }

    /// Counts one check of `lane` (zone `color` of the table) decided by `source`; a zone or
    /// source not registered at start (a zone added since) goes through the registry.
    #[inline]
    pub fn count(&self, color: ZoneId, lane: &str, source: &'static str) {
        let registered = self.zones.get(color.index()).filter(|(l, _)| l == lane);
        match (registered, GATE_SOURCES.iter().position(|s| *s == source)) {
            (Some((_, counters)), Some(i)) => counters[i].increment(1),
            _ => count_gate(lane, source),
        }
    }
}

/// Updates every gauge that describes the state: the table, zone shares and the latest drain.
pub fn publish_state(state: &State) {
    let table = state.table();
    publish_table(table);
    for color in table.zones().ids() {
        let ratio = f64::from(table.units_of(color)) / f64::from(table.units());
        metrics::gauge!(ZONE_SHARE, "zone" => table.zone_of(color).to_owned(), "color" => table.lane(color).to_owned())
            .set(ratio);
        let pinned = table.pins().values().filter(|z| **z == color).count();
        metrics::gauge!(ZONE_PINNED_USERS, "zone" => table.zone_of(color).to_owned())
            .set(pinned as f64);
    }
    // Units whose writes a move in progress freezes, by domain (0 between moves).
    for domain in std::iter::once(crate::core::DEFAULT_DOMAIN)
        .chain(table.domains().keys().map(String::as_str))
    {
        let frozen = table.frozen_in(Some(domain)).map_or(0, |set| set.len());
        metrics::gauge!(FROZEN_UNITS, "domain" => domain.to_owned()).set(f64::from(frozen));
    }
    if let Some(drain) = state.drains().next_back() {
        for name in DRAIN_STATES {
            let on = if drain.state_name() == name { 1.0 } else { 0.0 };
            metrics::gauge!(DRAIN_STATE, "state" => name).set(on);
        }
        metrics::gauge!(DRAIN_STEPS_DONE).set(f64::from(drain.steps_done));
        for cause in ["guard", "convergence", "operator", "freeze"] {
            let on = drain.status == crate::core::DrainStatus::Paused
                && drain.pause_cause == Some(cause);
            metrics::gauge!(DRAIN_PAUSED, "cause" => cause).set(if on { 1.0 } else { 0.0 });
        }
        metrics::gauge!(DRAIN_STEPS_PLANNED).set(f64::from(drain.steps_total()));
    }
    publish_runs(state);
    for zone in table.zones().iter().map(|(_, z)| &z.name) {
        let active = state.active_drain().is_some_and(|d| &d.plan.zone == zone);
        metrics::gauge!(DRAIN_ACTIVE, "zone" => zone.clone()).set(if active { 1.0 } else { 0.0 });
        let held = state.active_drain().is_some_and(|d| {
            &d.plan.zone == zone
                && d.status == crate::core::DrainStatus::Running
                && d.hold_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("holding: insufficient_capacity"))
        });
        metrics::gauge!(DRAIN_CAPACITY_HELD, "zone" => zone.clone()).set(if held {
            1.0
        } else {
            0.0
        });
    }
}

pub fn count_node_id_conflict() {
    metrics::counter!(NODE_ID_CONFLICTS).increment(1);
}

/// A presence message dropped for `reason` (`unsigned`, `bad_signature`).
pub fn count_presence_dropped(reason: &'static str) {
    metrics::counter!(PRESENCE_DROPPED, "reason" => reason).increment(1);
}

pub fn count_gate_caller_refused() {
    metrics::counter!(EDGE_GATE_CALLER_REFUSED).increment(1);
}

/// Whether `zone` could take every user of `from` now (`None`: unknown), for the standing gauge.
pub fn publish_can_absorb(zone: &str, from: &str, can: Option<bool>) {
    let value = match can {
        Some(true) => 1.0,
        Some(false) => 0.0,
        None => f64::NAN,
    };
    metrics::gauge!(ZONE_CAN_ABSORB, "zone" => zone.to_owned(), "from" => from.to_owned())
        .set(value);
}

pub fn count_outcomes(zone: &str, lane: &str, ok: u64, error: u64) {
    let labels = [("zone", zone.to_owned()), ("color", lane.to_owned())];
    metrics::counter!(ZONE_REQUESTS, &labels).increment(ok + error);
    metrics::counter!(ZONE_ERRORS, &labels).increment(error);
}

/// Publishes one zone's health reading; `requests` is the window's request count when the source
/// counts requests.
pub fn publish_zone_health(zone: &str, reading: &Reading, requests: Option<u64>) {
    let zone = zone.to_owned();
    match reading {
        Reading::Known { error_rate, .. } => {
            metrics::gauge!(ZONE_ERROR_RATIO, "zone" => zone.clone()).set(*error_rate);
            metrics::gauge!(ZONE_HEALTH_KNOWN, "zone" => zone.clone()).set(1.0);
        }
        Reading::Unknown { .. } => {
            // Cleared, not frozen at the last ratio: NaN matches no alert threshold and shows as
            // a gap, where a stale ratio would look like a live reading.
            metrics::gauge!(ZONE_ERROR_RATIO, "zone" => zone.clone()).set(f64::NAN);
            metrics::gauge!(ZONE_HEALTH_KNOWN, "zone" => zone.clone()).set(0.0);
        }
    }
    let requests = requests.map_or(f64::NAN, |r| r as f64);
    metrics::gauge!(ZONE_WINDOW_REQUESTS, "zone" => zone).set(requests);
}

pub fn publish_subscribers(current: u64, behind: u64, stale: u64) {
    metrics::gauge!(SUBSCRIBERS, "state" => "current").set(current as f64);
    metrics::gauge!(SUBSCRIBERS, "state" => "behind").set(behind as f64);
    metrics::gauge!(SUBSCRIBERS, "state" => "stale").set(stale as f64);
}

/// Counts a drain hold; `zone` is the zone the hold is about (for a breach, the zone whose error
/// rate was too high, which may be the receiving zone).
pub fn count_drain_hold(zone: &str, breach: bool) {
    let kind = if breach { "breach" } else { "unknown" };
    metrics::counter!(DRAIN_HOLDS, "kind" => kind).increment(1);
    if breach {
        metrics::counter!(DRAIN_BREACHES, "zone" => zone.to_owned()).increment(1);
    }
}

/// Updates the gauges that describe the table being served.
pub fn publish_table(table: &RoutingTable) {
    metrics::gauge!(BLUE_RATIO).set(table.blue_percent() / 100.0);
    metrics::gauge!(BLUE_UNITS).set(f64::from(table.blue_units()));
    metrics::gauge!(ROUTING_VERSION).set(table.version() as f64);
    metrics::gauge!(PINS).set(table.pins().len() as f64);
}

/// The plan-run gauges, and every plan's run counters registered at zero.
fn publish_runs(state: &State) {
    let active = state.active_run();
    for stored in state.plans() {
        let plan = stored.plan.name.clone();
        for outcome in crate::core::RunStatus::OUTCOMES {
            for drill in ["false", "true"] {
                let labels = [
                    ("plan", plan.clone()),
                    ("outcome", outcome.to_owned()),
                    ("drill", drill.to_owned()),
                ];
                metrics::counter!(PLAN_RUNS, &labels).increment(0);
            }
        }
        let on = active.is_some_and(|r| r.plan.name == plan);
        metrics::gauge!(PLAN_RUN_ACTIVE, "plan" => plan.clone()).set(if on { 1.0 } else { 0.0 });
    }
    if let Some(run) = state.plan_runs().next_back() {
        let plan = run.plan.name.clone();
        let switch = run.switched_ms.or(run.finished_ms).map(|t| t.saturating_sub(run.started_ms));
        if let Some(ms) = switch {
            metrics::gauge!(PLAN_RUN_DURATION, "plan" => plan).set(ms as f64 / 1000.0);
        }
    }
}

/// Updates the gauges that move with time while a run is active (called by the plan runner).
pub fn publish_run_progress(state: &State, now_ms: u64) {
    if let Some(run) = state.active_run() {
        let plan = run.plan.name.clone();
        let switching = run.switched_ms.is_none();
        let secs = run.switch_ms(now_ms) as f64 / 1000.0;
        if switching {
            metrics::gauge!(PLAN_RUN_DURATION, "plan" => plan.clone()).set(secs);
        }
        let over = switching && run.switch_ms(now_ms) > run.plan.rto_ms;
        metrics::gauge!(PLAN_RUN_OVER_RTO, "plan" => plan).set(if over { 1.0 } else { 0.0 });
    }
    for stored in state.plans() {
        if state.active_run().is_none_or(|r| r.plan.name != stored.plan.name) {
            metrics::gauge!(PLAN_RUN_OVER_RTO, "plan" => stored.plan.name.clone()).set(0.0);
        }
    }
}

/// Counts a run that `command` just finished (outcome and drill as labels).
pub fn count_run_end(state: &State, command: &crate::core::Command) {
    use crate::core::Command as C;
    let id = match command {
        C::PlanStepDone { run, .. }
        | C::AbortPlanRun { run }
        | C::FailPlanRun { run, .. }
        | C::PlanRestore { run } => *run,
        _ => return,
    };
    if let Some(run) = state.plan_run(id).filter(|r| !r.is_active()) {
        let labels = [
            ("plan", run.plan.name.clone()),
            ("outcome", run.status.as_str().to_owned()),
            ("drill", run.is_drill().to_string()),
        ];
        metrics::counter!(PLAN_RUNS, &labels).increment(1);
    }
}

pub fn count_change(action: &'static str) {
    metrics::counter!(CHANGES, "action" => action).increment(1);
    if action == "dial" {
        metrics::counter!(DIAL_CHANGES).increment(1);
    }
}

pub fn count_ui_login(ok: bool) {
    metrics::counter!(UI_LOGINS, "outcome" => if ok { "ok" } else { "failed" }).increment(1);
}

/// Registers at zero the trigger counters of a plan that has a trigger.
pub fn prime_plan_trigger(plan: &str) {
    metrics::counter!(PLAN_TRIGGERS, "plan" => plan.to_owned()).increment(0);
    for reason in crate::core::TRIGGER_REFUSAL_KINDS.into_iter().chain(["start_refused"]) {
        let labels = [("plan", plan.to_owned()), ("reason", reason.to_owned())];
        metrics::counter!(PLAN_TRIGGER_REFUSALS, &labels).increment(0);
    }
}

pub fn count_plan_trigger(plan: &str) {
    metrics::counter!(PLAN_TRIGGERS, "plan" => plan.to_owned()).increment(1);
}

pub fn count_plan_trigger_refusal(plan: &str, reason: &'static str) {
    metrics::counter!(PLAN_TRIGGER_REFUSALS, "plan" => plan.to_owned(), "reason" => reason)
        .increment(1);
}

pub fn count_api_error(code: &'static str) {
    metrics::counter!(API_ERRORS, "code" => code).increment(1);
}

/// Gauges of one lane group in one zone. `lag` is `None` while unknown (the gauge keeps its
/// last value; `GET /v1/lanes/{group}` says `null`).
pub fn publish_lane(
    group: &str,
    topic: &str,
    zone: &str,
    lane: &str,
    members: usize,
    assigned: usize,
    lag: Option<u64>,
) {
    let zone_labels = [("group", group.to_owned()), ("zone", zone.to_owned())];
    metrics::gauge!(LANE_MEMBERS, &zone_labels).set(members as f64);
    metrics::gauge!(LANE_ASSIGNED, &zone_labels).set(assigned as f64);
    if let Some(lag) = lag {
        let labels = [
            ("group", group.to_owned()),
            ("topic", topic.to_owned()),
            ("half", lane.to_owned()),
            ("zone", zone.to_owned()),
        ];
        metrics::gauge!(LANE_LAG, &labels).set(lag as f64);
    }
}

/// Per-partition lag and the messages written to each half, from one lag reading.
///
/// Why the coordinator exports the produce side too: producers live in many services, but the
/// high watermarks it reads for lag already say how many messages each half received, so the
/// lanes dashboard can show the produce rate per half from one scrape target.
pub fn publish_lane_offsets(
    group: &str,
    topic: &str,
    lane: crate::core::LaneConfig,
    zones: &Zones,
    partitions: &[crate::core::PartitionOffsets],
) {
    let lane_name =
        |z: ZoneId| zones.get(z).map_or_else(|| z.default_lane().into_owned(), |s| s.lane.clone());
    let mut written = vec![0u64; lane.zones() as usize];
    for p in partitions {
        let Ok(color) = lane.color_of(p.partition) else { continue };
        let lag = crate::core::partition_lag(p.low, p.high, p.committed);
        let labels = [
            ("group", group.to_owned()),
            ("topic", topic.to_owned()),
            ("partition", p.partition.to_string()),
            ("half", lane_name(color)),
        ];
        metrics::gauge!(LANE_PARTITION_LAG, &labels).set(lag as f64);
        written[color.index()] += u64::try_from(p.high).unwrap_or(0);
    }
    for (i, total) in written.iter().enumerate() {
        let labels = [("topic", topic.to_owned()), ("half", lane_name(ZoneId(i as u16)))];
        metrics::counter!(LANE_MESSAGES, &labels).absolute(*total);
    }
}

pub fn publish_lane_generation(group: &str, generation: u64) {
    metrics::gauge!(LANE_GENERATION, "group" => group.to_owned()).set(generation as f64);
    // Exported at 0 from the group's first appearance, so a rate of failures is 0, not absent.
    metrics::counter!(LANE_LAG_ERRORS, "group" => group.to_owned()).increment(0);
}

pub fn count_lane_lag_error(group: &str) {
    metrics::counter!(LANE_LAG_ERRORS, "group" => group.to_owned()).increment(1);
}

/// The edge's view of its coordinator, set at each scrape.
pub fn publish_edge(connected: bool, table_age_seconds: Option<f64>) {
    metrics::gauge!(EDGE_CONNECTED).set(if connected { 1.0 } else { 0.0 });
    if let Some(age) = table_age_seconds {
        metrics::gauge!(EDGE_TABLE_AGE).set(age);
    }
}

/// How old this process's newest confirmation is (`None`: never confirmed; published as the
/// lease plus one second, so the alert fires), and the lease it is held to.
pub fn publish_lease(confirmed_age_seconds: Option<f64>, lease_seconds: f64) {
    metrics::gauge!(TABLE_LEASE).set(lease_seconds);
    let never = if lease_seconds > 0.0 { lease_seconds + 1.0 } else { 0.0 };
    metrics::gauge!(TABLE_CONFIRMED_AGE).set(confirmed_age_seconds.unwrap_or(never));
}

/// How many live leaves the edge last reported upward.
pub fn edge_leaves(leaves: u64) {
    metrics::gauge!(EDGE_LEAVES).set(leaves as f64);
}

/// Counts one OFREP evaluation by its reason or error code.
pub fn count_ofrep(outcome: &'static str) {
    metrics::counter!(OFREP_EVALUATIONS, "outcome" => outcome).increment(1);
}

/// Counts one gateway check.
/// Counts a write that showed its user written by two zones (`service::write_watch`).
pub fn count_dual_owner_write(stale_zone: &str, owner_zone: &str) {
    metrics::counter!(DUAL_OWNER_WRITES, "stale_zone" => stale_zone.to_owned(), "owner_zone" => owner_zone.to_owned())
        .increment(1);
}

/// Counts an edge write check by its answer (`owned`, `misrouted`, `behind`, `frozen`,
/// `unconfirmed`).
pub fn count_write_check(answer: &'static str) {
    metrics::counter!(EDGE_WRITE_CHECKS, "answer" => answer).increment(1);
}

pub fn count_gate(lane: &str, source: &'static str) {
    metrics::counter!(EDGE_GATE, "color" => lane.to_owned(), "source" => source).increment(1);
}

/// The connection guard's limit (`service::connections`).
pub fn set_connections_limit(limit: usize) {
    metrics::gauge!(CONNECTIONS_LIMIT).set(limit as f64);
}

/// Counts one of the connection guard's events: `refused`, `evicted`, or a timeout of kind
/// `header` or `idle`.
pub fn connection_event(event: &'static str) {
    match event {
        "refused" => metrics::counter!(CONNECTIONS_REFUSED).increment(1),
        "evicted" => metrics::counter!(CONNECTIONS_EVICTED).increment(1),
        kind => metrics::counter!(CONNECTION_TIMEOUTS, "kind" => kind).increment(1),
    }
}
