//! Prometheus metrics: names, help texts and the process-wide recorder.
//!
//! Every metric tidegate exports is named in [`METRICS`] with its help text; the tidy test checks
//! that nothing is recorded under a name that is not listed here, so dashboards and alerts can
//! rely on this table.

use std::sync::OnceLock;

use metrics::{Counter, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::core::{Color, RoutingTable};

pub const TAG_REQUESTS: &str = "tidegate_tag_requests_total";
pub const TAG_DURATION: &str = "tidegate_tag_duration_seconds";
pub const CHANGES: &str = "tidegate_changes_total";
pub const DIAL_CHANGES: &str = "tidegate_dial_changes_total";
pub const BLUE_PERCENT: &str = "tidegate_blue_percent";
pub const BLUE_UNITS: &str = "tidegate_blue_units";
pub const ROUTING_VERSION: &str = "tidegate_routing_version";
pub const PINS: &str = "tidegate_pins";
pub const API_ERRORS: &str = "tidegate_api_errors_total";
pub const LOG_APPEND_DURATION: &str = "tidegate_log_append_duration_seconds";

/// Kind, name, unit and help text of every metric.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "counter",
        TAG_REQUESTS,
        "Users tagged, by the colour and zone they were given.",
    ),
    (
        "histogram",
        TAG_DURATION,
        "Time to tag one user inside the handler, in seconds.",
    ),
    (
        "counter",
        CHANGES,
        "Accepted state changes, by action (dial, pin, unpin).",
    ),
    (
        "counter",
        DIAL_CHANGES,
        "Accepted moves of the blue/green dial.",
    ),
    (
        "gauge",
        BLUE_PERCENT,
        "Current share of units routed to blue, in percent (0-100).",
    ),
    (
        "gauge",
        BLUE_UNITS,
        "Current number of units routed to blue.",
    ),
    (
        "gauge",
        ROUTING_VERSION,
        "Version of the routing table currently served.",
    ),
    ("gauge", PINS, "Number of users pinned to a colour."),
    (
        "counter",
        API_ERRORS,
        "API requests answered with an error, by error code.",
    ),
    (
        "histogram",
        LOG_APPEND_DURATION,
        "Time to append and fsync one command-log entry, in seconds.",
    ),
];

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
            let fsync_buckets = [
                0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
            ];
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
            // Another recorder may already be installed by an embedding application; then our
            // handle renders only what we record through it, which is still correct output.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
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

/// Pre-registered counter handles for the tagging hot path (no label lookup per request).
pub struct TagCounters {
    blue: Counter,
    green: Counter,
}

impl TagCounters {
    pub fn new(table: &RoutingTable) -> TagCounters {
        let counter = |color: Color| {
            metrics::counter!(
                TAG_REQUESTS,
                "color" => color.as_str(),
                "zone" => table.zone_of(color).to_owned()
            )
        };
        TagCounters {
            blue: counter(Color::Blue),
            green: counter(Color::Green),
        }
    }

    #[inline]
    pub fn count(&self, color: Color, n: u64) {
        match color {
            Color::Blue => self.blue.increment(n),
            Color::Green => self.green.increment(n),
        }
    }
}

/// Updates the gauges that describe the table being served.
pub fn publish_table(table: &RoutingTable) {
    metrics::gauge!(BLUE_PERCENT).set(table.blue_percent());
    metrics::gauge!(BLUE_UNITS).set(f64::from(table.blue_units()));
    metrics::gauge!(ROUTING_VERSION).set(table.version() as f64);
    metrics::gauge!(PINS).set(table.pins().len() as f64);
}

pub fn count_change(action: &'static str) {
    metrics::counter!(CHANGES, "action" => action).increment(1);
    if action == "dial" {
        metrics::counter!(DIAL_CHANGES).increment(1);
    }
}

pub fn count_api_error(code: &'static str) {
    metrics::counter!(API_ERRORS, "code" => code).increment(1);
}
