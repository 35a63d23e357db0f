//! The last few minutes of each zone's health, sampled by the coordinator on a timer, so that the
//! web UI's charts show history even in a page opened in the middle of an incident.
//!
//! A fixed ring per zone: `capacity` samples of (time, error rate or unknown, requests). The ring
//! is pure (time is an argument); [`run`] is the loop that only reads the health and the clock.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::core::{Reading, ZoneId};
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

pub struct ZoneHistory {
    zones: [String; 2],
    capacity: usize,
    rings: Mutex<[VecDeque<Sample>; 2]>,
}

impl ZoneHistory {
    /// Keeps `keep_ms / every_ms` samples for the blue and the green zone.
    pub fn new(blue_zone: &str, green_zone: &str, keep_ms: u64, every_ms: u64) -> ZoneHistory {
        let capacity = usize::try_from(keep_ms / every_ms.max(1)).unwrap_or(usize::MAX).max(1);
        ZoneHistory {
            zones: [blue_zone.to_owned(), green_zone.to_owned()],
            capacity,
            rings: Mutex::new([VecDeque::new(), VecDeque::new()]),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [VecDeque<Sample>; 2]> {
        self.rings.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn record(&self, color: ZoneId, sample: Sample) {
        if color.index() > 1 {
            return;
        }
        let mut rings = self.lock();
        let ring = &mut rings[index(color)];
        ring.push_back(sample);
        while ring.len() > self.capacity {
            ring.pop_front();
        }
    }

    /// Each zone's samples, oldest first: (colour, zone, samples).
    pub fn snapshot(&self) -> Vec<(ZoneId, String, Vec<Sample>)> {
        let rings = self.lock();
        [ZoneId::BLUE, ZoneId::GREEN]
            .into_iter()
            .map(|c| (c, self.zones[index(c)].clone(), rings[index(c)].iter().cloned().collect()))
            .collect()
    }

    /// The sampled zones with their colours.
    pub fn zones(&self) -> [(ZoneId, String); 2] {
        [(ZoneId::BLUE, self.zones[0].clone()), (ZoneId::GREEN, self.zones[1].clone())]
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// The ring of a colour; the history samples the two colours' zones only (a third zone's
/// health is in `GET /v1/zones`, not yet in the charts).
fn index(color: ZoneId) -> usize {
    color.index().min(1)
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

/// Samples both zones every `every` until `shutdown`. Health reads may block (a Prometheus
/// query), so they run on the blocking pool.
pub async fn run(
    history: Arc<ZoneHistory>,
    health: Arc<Health>,
    every: Duration,
    now_ms: fn() -> u64,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        let (history, health) = (Arc::clone(&history), Arc::clone(&health));
        let read = tokio::task::spawn_blocking(move || {
            let now = now_ms();
            for (color, zone) in history.zones() {
                let h = health.zone(&zone, now);
                history.record(color, sample_of(&h.reading, h.requests, now));
            }
        });
        let _ = read.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_samples_per_zone() {
        let history = ZoneHistory::new("az-b", "az-a", 10_000, 2_000);
        assert_eq!(history.capacity(), 5);
        for i in 0..8u64 {
            let rate = if i == 6 { None } else { Some(i as f64 / 100.0) };
            history.record(
                ZoneId::BLUE,
                Sample { at_ms: i * 2_000, error_rate: rate, requests: Some(i) },
            );
        }
        history.record(ZoneId::GREEN, Sample { at_ms: 1, error_rate: Some(0.5), requests: None });
        let snapshot = history.snapshot();
        let (color, zone, blue) = &snapshot[0];
        assert_eq!((*color, zone.as_str()), (ZoneId::BLUE, "az-b"));
        let times: Vec<u64> = blue.iter().map(|s| s.at_ms).collect();
        assert_eq!(times, vec![6_000, 8_000, 10_000, 12_000, 14_000]);
        assert_eq!(blue[3].error_rate, None, "unknown stays unknown");
        assert_eq!(snapshot[1].2.len(), 1);
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
