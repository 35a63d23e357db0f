//! Per-zone health: error rates from reported outcomes or from Prometheus queries.
//!
//! Either source answers the same question: what is this zone's error rate over the window, and
//! on how many requests? A source that cannot say (no data, failed or empty query, NaN) answers
//! [`Reading::Unknown`]. It never answers "healthy" by default, because a drain guard that sees
//! "healthy" when blind would move users into a failing zone.

mod prometheus;
pub mod window;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::core::{Reading, ZoneId, Zones};
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

/// Reporters send outcomes about every second: a zone without a report for longer has stopped
/// reporting (it goes silent after `health.silent_after`), and its rate is read over the time
/// its reports cover.
const STOPPED_AFTER_MS: u64 = 2_000;

/// The health service: the outcome windows plus the configured source.
pub struct Health {
    zones: Zones,
    window_ms: u64,
    /// The recent part of the window "down" and load are judged on (`health.detect_window`).
    detect_ms: u64,
    /// Reporters silent this long make a zone unknown (`health.silent_after`).
    silent_after_ms: u64,
    source: Source,
    windows: Mutex<HashMap<(String, ZoneId), Window>>,
    /// The outcome windows other replicas reported to them (`service::gate_view`), by replica:
    /// when it sent them, and per zone its windows. Outcomes count wherever they were posted.
    peers: Mutex<BTreeMap<String, PeerWindows>>,
}

struct PeerWindows {
    at_ms: u64,
    zones: Vec<(String, Window)>,
}

/// A zone's outcome window as sent to other replicas.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ZoneWindow {
    pub zone: String,
    #[serde(flatten)]
    pub window: window::WindowWire,
}

impl Health {
    pub fn new(zones: Zones, window_ms: u64, source: Source) -> Health {
        let mut windows = HashMap::new();
        for color in zones.ids() {
            for (_, zone) in zones.iter() {
                windows.insert((zone.name.clone(), color), Window::new(window_ms));
            }
        }
        Health {
            zones,
            window_ms,
            detect_ms: window_ms,
            silent_after_ms: window_ms,
            source,
            windows: Mutex::new(windows),
            peers: Mutex::new(BTreeMap::new()),
        }
    }

    /// Sets the detection window and the silence bound (each at most the window).
    pub fn with_detection(mut self, detect_ms: u64, silent_after_ms: u64) -> Health {
        self.detect_ms = detect_ms.clamp(1, self.window_ms);
        self.silent_after_ms = silent_after_ms.clamp(1, self.window_ms);
        self
    }

    pub fn detect_ms(&self) -> u64 {
        self.detect_ms
    }

    /// This replica's own outcome windows (the ones posted to it), for the other replicas.
    pub fn local_windows(&self, now_ms: u64) -> Vec<ZoneWindow> {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<ZoneWindow> = windows
            .iter()
            .filter(|(_, w)| w.last_update_ms().is_some())
            .map(|((zone, _), w)| ZoneWindow { zone: zone.clone(), window: w.to_wire(now_ms) })
            .collect();
        out.sort_by(|a, b| a.zone.cmp(&b.zone));
        out
    }

    /// Takes in the windows another replica sent at `at_ms` (replacing its older ones).
    /// Windows of a zone this replica does not know, or of another bucket width, are left out.
    pub fn receive_peer(&self, replica: &str, at_ms: u64, zones: &[ZoneWindow]) {
        let zones = zones
            .iter()
            .filter(|z| self.zones.color_in(&z.zone).is_some())
            .filter_map(|z| Some((z.zone.clone(), Window::from_wire(&z.window, self.window_ms)?)))
            .collect();
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if peers.get(replica).is_none_or(|p| p.at_ms <= at_ms) {
            peers.insert(replica.to_owned(), PeerWindows { at_ms, zones });
        }
    }

    /// Every window that counts for `zone` at `now_ms`: this replica's and those of the peers
    /// heard from within `gate_view::PEER_FRESH_MS` (a replica that stopped reporting drops out:
    /// its outcomes are not seen any more, which reads as silence, never as health).
    fn zone_windows(&self, zone: &str, now_ms: u64) -> Vec<Window> {
        let mut out = Vec::new();
        {
            let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
            for color in self.zones.ids() {
                if let Some(w) = windows.get(&(zone.to_owned(), color)) {
                    out.push(w.clone());
                }
            }
        }
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|_, p| {
            now_ms.saturating_sub(p.at_ms) <= crate::service::peer_reports::PEER_FRESH_MS
        });
        for p in peers.values() {
            out.extend(p.zones.iter().filter(|(z, _)| z == zone).map(|(_, w)| w.clone()));
        }
        out
    }

    /// Why the zone's reporters count as silent at `now_ms`, if they do: nothing reported for
    /// `silent_after` (or ever). Silence is "unknown", never "healthy" (outcome source only).
    fn silence(&self, zone: &str, last: Option<u64>, now_ms: u64) -> Option<String> {
        match last {
            None => Some(format!(
                "no outcomes reported for {zone} in the last {}",
                crate::duration::format_duration_ms(self.window_ms)
            )),
            Some(at) if now_ms.saturating_sub(at) >= self.silent_after_ms => Some(format!(
                "silent: no outcomes reported for {zone} for {} (health.silent_after {})",
                crate::duration::format_duration_ms(now_ms.saturating_sub(at)),
                crate::duration::format_duration_ms(self.silent_after_ms)
            )),
            Some(_) => None,
        }
    }

    /// The zone's health over the detection window: what "down" is judged on (the zone
    /// states, the triggers), so a zone that starts failing is down within `detect_window`
    /// instead of once its errors outweigh a whole window of healthy history.
    pub fn recent(&self, zone: &str, now_ms: u64) -> Reading {
        match &self.source {
            Source::Outcomes => {
                let mut totals = Totals::default();
                let mut last = None;
                for w in self.zone_windows(zone, now_ms) {
                    let t = w.totals_recent(now_ms, self.detect_ms);
                    totals = Totals { ok: totals.ok + t.ok, error: totals.error + t.error };
                    last = last.max(w.last_update_ms());
                }
                if let Some(why) = self.silence(zone, last, now_ms) {
                    return Reading::Unknown { why };
                }
                match totals.error_rate() {
                    Some(error_rate) => Reading::Known { error_rate, requests: totals.requests() },
                    None => Reading::Unknown {
                        why: format!(
                            "no requests reported for {zone} in the last {}",
                            crate::duration::format_duration_ms(self.detect_ms)
                        ),
                    },
                }
            }
            Source::Prometheus(_) => self.zone(zone, now_ms).reading,
        }
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
        color: ZoneId,
        ok: u64,
        error: u64,
        now_ms: u64,
    ) -> Result<(), OutcomeError> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = windows.get_mut(&(zone.to_owned(), color)).ok_or_else(|| {
            OutcomeError::UnknownZone { zone: zone.to_owned(), known: self.zones.names() }
        })?;
        window.record(now_ms, ok, error);
        telemetry::count_outcomes(
            zone,
            self.zones.get(color).map_or("unknown", |z| z.lane.as_str()),
            ok,
            error,
        );
        Ok(())
    }

    /// Outcome totals of a zone (all colours), with the time of the last report.
    fn outcome_totals(&self, zone: &str, now_ms: u64) -> (Totals, Option<u64>) {
        let mut totals = Totals::default();
        let mut last = None;
        for w in self.zone_windows(zone, now_ms) {
            let t = w.totals(now_ms);
            totals = Totals { ok: totals.ok + t.ok, error: totals.error + t.error };
            last = last.max(w.last_update_ms());
        }
        (totals, last)
    }

    /// The zone's load in requests per second, or why it is unknown. Outcomes: the requests
    /// reported in the window over the time the window covers. Prometheus: the load query.
    /// Blocks on the network with the Prometheus source.
    pub fn load_rps(&self, zone: &str, now_ms: u64) -> Result<f64, String> {
        match &self.source {
            Source::Outcomes => {
                // The load over the detection window, once the window has seen that much time:
                // right after a start (or a zone's first report) it is unknown, not low. The
                // first seconds used to read 199-1 520 rps for a 4 000 rps zone, and capacity
                // accepted every move.
                let mut requests = 0;
                let mut first: Option<u64> = None;
                let mut last = None;
                let mut bucket_ms = 1;
                for w in self.zone_windows(zone, now_ms) {
                    requests += w.totals_recent(now_ms, self.detect_ms).requests();
                    bucket_ms = w.bucket_ms();
                    last = last.max(w.last_update_ms());
                    if let Some(f) = w.first_update_ms() {
                        first = Some(first.map_or(f, |x: u64| x.min(f)));
                    }
                }
                if let Some(why) = self.silence(zone, last, now_ms) {
                    return Err(why);
                }
                // The span the recent totals cover: whole buckets back from the current one,
                // which has run for `now % bucket` so far.
                let buckets = self.detect_ms.div_ceil(bucket_ms).clamp(1, window::BUCKETS as u64);
                let mut span_ms = (buckets - 1) * bucket_ms + now_ms % bucket_ms + 1;
                // A zone whose reports stopped (not yet silent): the requests in the window
                // cover the time up to its last report only. Over the whole span its rate read
                // lower every second until it went silent (580, 12, 561 rps for a real 1 200),
                // and that reading was remembered as the silent zone's last known load.
                let quiet_ms = last.map_or(0, |l| now_ms.saturating_sub(l));
                // (Plus a bucket: a report carries the traffic before it.)
                if quiet_ms > (2 * bucket_ms).max(STOPPED_AFTER_MS) {
                    span_ms = (span_ms.saturating_sub(quiet_ms) + bucket_ms).min(span_ms);
                }
                let covered = first.map_or(0, |f| now_ms.saturating_sub(f));
                if covered < span_ms {
                    return Err(format!(
                        "{zone}'s load is not measured yet: outcomes cover {} of the {} needed (health.detect_window)",
                        crate::duration::format_duration_ms(covered),
                        crate::duration::format_duration_ms(span_ms)
                    ));
                }
                if requests == 0 {
                    return Err(format!(
                        "no outcomes reported for {zone} in the last {}",
                        crate::duration::format_duration_ms(self.detect_ms)
                    ));
                }
                Ok(requests as f64 * 1000.0 / span_ms as f64)
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
                let silent = self.silence(zone, last, now_ms);
                let reading = match totals.error_rate() {
                    _ if silent.is_some() => Reading::Unknown { why: silent.unwrap_or_default() },
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
