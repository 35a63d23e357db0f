//! The last few minutes of each zone's health, sampled by the coordinator on a timer, so that the
//! web UI's charts show history even in a page opened in the middle of an incident.
//!
//! A fixed ring per live zone of the routing table (blue, green and any further zone): `capacity`
//! samples of (time, error rate or unknown, requests). The zones follow the table: a zone added
//! with `POST /v1/zones` gets a ring at the next tick (or read), a retired one loses it. The ring
//! is pure (time is an argument); [`run`] is the loop that only reads the table's zones, the
//! health and the clock.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::core::{Reading, RoutingTable, ZoneId};
use crate::service::health::Health;

/// How often the coordinator samples each zone.
pub const SAMPLE_EVERY_MS: u64 = 2_000;
/// How much history is kept: what the UI's charts show.
pub const KEEP_MS: u64 = 5 * 60 * 1000;

/// One reading of one zone.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub at_ms: u64,
    /// `None` when the health was unknown: the chart breaks its line instead of drawing zero.
    pub error_rate: Option<f64>,
    pub requests: Option<u64>,
}

/// A live zone of the table, as the history names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveZone {
    pub id: ZoneId,
    pub zone: String,
    pub lane: String,
}

/// The table's live (not retired) zones, in index order.
pub fn live_zones(table: &RoutingTable) -> Vec<LiveZone> {
    table
        .zones()
        .iter()
        .filter(|(_, z)| !z.retired)
        .map(|(id, z)| LiveZone { id, zone: z.name.clone(), lane: z.lane.clone() })
        .collect()
}

/// One zone's history.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub zone: LiveZone,
    pub samples: Vec<Sample>,
}

struct Ring {
    zone: LiveZone,
    samples: VecDeque<Sample>,
}

pub struct ZoneHistory {
    capacity: usize,
    /// In zone index order.
    rings: Mutex<Vec<Ring>>,
}

impl ZoneHistory {
    /// Keeps `keep_ms / every_ms` samples per zone, for the zones `track` names.
    pub fn new(keep_ms: u64, every_ms: u64) -> ZoneHistory {
        let capacity = usize::try_from(keep_ms / every_ms.max(1)).unwrap_or(usize::MAX).max(1);
        ZoneHistory { capacity, rings: Mutex::new(Vec::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Ring>> {
        self.rings.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Follows the table's live zones: a zone not sampled yet gets an empty ring, a zone no
    /// longer live (retired) loses its ring, and a zone keeps its samples across calls. A zone is
    /// its index; a ring whose index now names another zone starts again.
    pub fn track(&self, live: &[LiveZone]) {
        let mut rings = self.lock();
        let mut old: Vec<Ring> = std::mem::take(&mut *rings);
        for zone in live {
            let kept = old
                .iter()
                .position(|r| r.zone.id == zone.id && r.zone.zone == zone.zone)
                .map(|i| old.swap_remove(i));
            let samples = kept.map(|r| r.samples).unwrap_or_default();
            rings.push(Ring { zone: zone.clone(), samples });
        }
        rings.sort_by_key(|r| r.zone.id.index());
    }

    /// Adds a sample to a tracked zone's ring (a zone not tracked is left out).
    pub fn record(&self, zone: ZoneId, sample: Sample) {
        let mut rings = self.lock();
        let Some(ring) = rings.iter_mut().find(|r| r.zone.id == zone) else {
            return;
        };
        ring.samples.push_back(sample);
        while ring.samples.len() > self.capacity {
            ring.samples.pop_front();
        }
    }

    /// Each tracked zone's samples, oldest first, in zone index order.
    pub fn snapshot(&self) -> Vec<Series> {
        self.lock()
            .iter()
            .map(|r| Series { zone: r.zone.clone(), samples: r.samples.iter().cloned().collect() })
            .collect()
    }

    /// The tracked zones, in index order.
    pub fn zones(&self) -> Vec<LiveZone> {
        self.lock().iter().map(|r| r.zone.clone()).collect()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A sample from a health reading.
pub fn sample_of(reading: &Reading, requests: Option<u64>, at_ms: u64) -> Sample {
    match reading {
        Reading::Known { error_rate, requests: counted } => {
            Sample { at_ms, error_rate: Some(*error_rate), requests: requests.or(Some(*counted)) }
        }
        Reading::Unknown { .. } => Sample { at_ms, error_rate: None, requests },
    }
}

/// Every `every` until `shutdown`: takes the table's live zones from `live`, then samples each.
/// Health reads may block (a Prometheus query), so they run on the blocking pool.
pub async fn run(
    history: Arc<ZoneHistory>,
    health: Arc<Health>,
    live: impl Fn() -> Vec<LiveZone> + Send + Sync + 'static,
    every: Duration,
    now_ms: fn() -> u64,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let live = Arc::new(live);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        let (history, health, live) =
            (Arc::clone(&history), Arc::clone(&health), Arc::clone(&live));
        let read = tokio::task::spawn_blocking(move || {
            history.track(&(*live)());
            let now = now_ms();
            for zone in history.zones() {
                let h = health.zone(&zone.zone, now);
                history.record(zone.id, sample_of(&h.reading, h.requests, now));
            }
        });
        let _ = read.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(index: u16, name: &str, lane: &str) -> LiveZone {
        LiveZone { id: ZoneId(index), zone: name.into(), lane: lane.into() }
    }

    #[test]
    fn the_ring_keeps_the_newest_samples_per_zone() {
        let history = ZoneHistory::new(10_000, 2_000);
        assert_eq!(history.capacity(), 5);
        history.track(&[zone(0, "az-b", "blue"), zone(1, "az-a", "green")]);
        for i in 0..8u64 {
            let rate = if i == 6 { None } else { Some(i as f64 / 100.0) };
            history.record(
                ZoneId::BLUE,
                Sample { at_ms: i * 2_000, error_rate: rate, requests: Some(i) },
            );
        }
        history.record(ZoneId::GREEN, Sample { at_ms: 1, error_rate: Some(0.5), requests: None });
        let snapshot = history.snapshot();
        let blue = &snapshot[0];
        assert_eq!((blue.zone.id, blue.zone.zone.as_str()), (ZoneId::BLUE, "az-b"));
        let times: Vec<u64> = blue.samples.iter().map(|s| s.at_ms).collect();
        assert_eq!(times, vec![6_000, 8_000, 10_000, 12_000, 14_000]);
        assert_eq!(blue.samples[3].error_rate, None, "unknown stays unknown");
        assert_eq!(snapshot[1].samples.len(), 1);
    }

    #[test]
    fn every_live_zone_has_a_ring_and_the_rings_follow_the_table() {
        let history = ZoneHistory::new(10_000, 2_000);
        let three = [zone(0, "az-b", "blue"), zone(1, "az-a", "green"), zone(2, "az-c", "red")];
        history.track(&three);
        let sample = |at_ms| Sample { at_ms, error_rate: Some(0.01), requests: Some(10) };
        for id in [0u16, 1, 2] {
            history.record(ZoneId(id), sample(1));
        }
        // A zone that is not tracked is never recorded.
        history.record(ZoneId(3), sample(1));
        let names: Vec<(String, usize)> =
            history.snapshot().into_iter().map(|s| (s.zone.zone, s.samples.len())).collect();
        assert_eq!(names, [("az-b".into(), 1), ("az-a".into(), 1), ("az-c".into(), 1)]);
        // A fourth zone is added: it starts empty, the others keep their samples.
        let four = [three[0].clone(), three[1].clone(), three[2].clone(), zone(3, "az-d", "teal")];
        history.track(&four);
        let lens: Vec<usize> = history.snapshot().iter().map(|s| s.samples.len()).collect();
        assert_eq!(lens, [1, 1, 1, 0]);
        // az-c is retired: its ring goes; the order stays the index order.
        history.track(&[four[0].clone(), four[1].clone(), four[3].clone()]);
        let zones: Vec<String> = history.zones().into_iter().map(|z| z.zone).collect();
        assert_eq!(zones, ["az-b", "az-a", "az-d"]);
        history.record(ZoneId(2), sample(2));
        assert!(history.snapshot().iter().all(|s| s.zone.zone != "az-c"));
    }

    #[test]
    fn unknown_health_is_sampled_as_no_rate() {
        let unknown = Reading::Unknown { why: "no data".into() };
        assert_eq!(sample_of(&unknown, None, 5).error_rate, None);
        let known = Reading::Known { error_rate: 0.25, requests: 40 };
        assert_eq!(sample_of(&known, None, 5).error_rate, Some(0.25));
        assert_eq!(sample_of(&known, None, 5).requests, Some(40));
    }
}
