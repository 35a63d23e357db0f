//! Per-zone health: error rates from reported outcomes or from Prometheus queries.
//!
//! Either source answers the same question: what is this zone's error rate over the window, and
//! on how many requests? A source that cannot say (no data, failed or empty query, NaN) answers
//! [`Reading::Unknown`]. It never answers "healthy" by default, because a drain guard that sees
//! "healthy" when blind would move users into a failing zone.

mod prometheus;
pub mod window;

use std::collections::HashMap;
use std::sync::Mutex;

use crate::core::{Color, ColorZones, Reading};
use crate::telemetry;
pub use prometheus::PrometheusSource;
use window::{Totals, Window};

/// Where error rates come from.
pub enum Source {
    /// Batches posted to `POST /v1/outcomes`.
    Outcomes,
    /// PromQL queries against a Prometheus server.
    Prometheus(PrometheusSource),
}

/// The health of one zone, for `GET /v1/zones` and the drain guard.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneHealth {
    pub zone: String,
    pub reading: Reading,
    /// Requests and errors in the window, when the source counts them.
    pub requests: Option<u64>,
    pub errors: Option<u64>,
    pub source: &'static str,
    pub last_update_ms: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    #[error("zone `{zone}` is not one of this tidegate's zones ({known})")]
    UnknownZone { zone: String, known: String },
}

/// The health service: the outcome windows plus the configured source.
pub struct Health {
    zones: ColorZones,
    window_ms: u64,
    source: Source,
    windows: Mutex<HashMap<(String, Color), Window>>,
}

impl Health {
    pub fn new(zones: ColorZones, window_ms: u64, source: Source) -> Health {
        let mut windows = HashMap::new();
        for color in Color::ALL {
            for zone in [&zones.blue, &zones.green] {
                windows.insert((zone.clone(), color), Window::new(window_ms));
            }
        }
        Health { zones, window_ms, source, windows: Mutex::new(windows) }
    }

    pub fn window_ms(&self) -> u64 {
        self.window_ms
    }

    pub fn source_name(&self) -> &'static str {
        match self.source {
            Source::Outcomes => "outcomes",
            Source::Prometheus(_) => "prometheus",
        }
    }

    /// Records a batch of outcomes reported by a service in `zone` serving `color`.
    pub fn record(
        &self,
        zone: &str,
        color: Color,
        ok: u64,
        error: u64,
        now_ms: u64,
    ) -> Result<(), OutcomeError> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = windows.get_mut(&(zone.to_owned(), color)).ok_or_else(|| {
            OutcomeError::UnknownZone {
                zone: zone.to_owned(),
                known: format!("{}, {}", self.zones.blue, self.zones.green),
            }
        })?;
        window.record(now_ms, ok, error);
        telemetry::count_outcomes(zone, color, ok, error);
        Ok(())
    }

    /// Outcome totals of a zone (all colours), with the time of the last report.
    fn outcome_totals(&self, zone: &str, now_ms: u64) -> (Totals, Option<u64>) {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let mut totals = Totals::default();
        let mut last = None;
        for color in Color::ALL {
            if let Some(w) = windows.get(&(zone.to_owned(), color)) {
                let t = w.totals(now_ms);
                totals = Totals { ok: totals.ok + t.ok, error: totals.error + t.error };
                last = last.max(w.last_update_ms());
            }
        }
        (totals, last)
    }

    /// The zone's load in requests per second, or why it is unknown. Outcomes: the requests
    /// reported in the window over the time the window covers. Prometheus: the load query.
    /// Blocks on the network with the Prometheus source.
    pub fn load_rps(&self, zone: &str, now_ms: u64) -> Result<f64, String> {
        match &self.source {
            Source::Outcomes => {
                let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
                let mut requests = 0;
                let mut span_ms = 0;
                for color in Color::ALL {
                    if let Some(w) = windows.get(&(zone.to_owned(), color)) {
                        requests += w.totals(now_ms).requests();
                        if w.last_update_ms().is_some() {
                            span_ms = span_ms.max(w.span_ms(now_ms));
                        }
                    }
                }
                if requests == 0 {
                    return Err(format!(
                        "no outcomes reported for {zone} in the last {}",
                        crate::duration::format_duration_ms(self.window_ms)
                    ));
                }
                Ok(requests as f64 * 1000.0 / span_ms.max(1) as f64)
            }
            Source::Prometheus(prometheus) => prometheus.load(zone),
        }
    }

    /// Runs a PromQL expression (plan preconditions); only the Prometheus source has queries.
    pub fn promql_truth(&self, query: &str) -> Result<bool, String> {
        match &self.source {
            Source::Outcomes => {
                Err("PromQL preconditions need health.source = \"prometheus\"".into())
            }
            Source::Prometheus(prometheus) => prometheus.truth(query),
        }
    }

    /// Runs a capacity query for `zone`; only the Prometheus source has queries.
    pub fn capacity_query(&self, query: &str, zone: &str) -> Result<f64, String> {
        match &self.source {
            Source::Outcomes => Err("a capacity query needs the Prometheus health source".into()),
            Source::Prometheus(prometheus) => match prometheus.query(query, zone)? {
                rps if rps > 0.0 => Ok(rps),
                rps => Err(format!("the capacity query for {zone} returned {rps}")),
            },
        }
    }

    /// The zone's health now. Blocks on the network with the Prometheus source: call it from a
    /// blocking context.
    pub fn zone(&self, zone: &str, now_ms: u64) -> ZoneHealth {
        let health = match &self.source {
            Source::Outcomes => {
                let (totals, last) = self.outcome_totals(zone, now_ms);
                let reading = match totals.error_rate() {
                    Some(error_rate) => Reading::Known { error_rate, requests: totals.requests() },
                    None => Reading::Unknown {
                        why: format!(
                            "no outcomes reported for {zone} in the last {}",
                            crate::duration::format_duration_ms(self.window_ms)
                        ),
                    },
                };
                ZoneHealth {
                    zone: zone.to_owned(),
                    reading,
                    requests: Some(totals.requests()),
                    errors: Some(totals.error),
                    source: "outcomes",
                    last_update_ms: last,
                }
            }
            Source::Prometheus(prometheus) => {
                let (reading, requests) = prometheus.read(zone);
                let known = matches!(reading, Reading::Known { .. });
                ZoneHealth {
                    zone: zone.to_owned(),
                    reading,
                    requests,
                    errors: None,
                    source: "prometheus",
                    last_update_ms: known.then_some(now_ms),
                }
            }
        };
        telemetry::publish_zone_health(&health.zone, &health.reading, health.requests);
        health
    }
}
