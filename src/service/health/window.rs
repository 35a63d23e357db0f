//! A sliding window of ok/error counts in a fixed ring of time buckets (no clock: time is passed in).
//!
//! Why a ring: memory stays constant however many outcomes arrive, and the window slides by
//! whole buckets (1/60 of the window), which is finer than any guard interval an operator sets.

/// Number of buckets a window is cut into.
pub const BUCKETS: usize = 60;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bucket {
    /// Which bucket period this slot currently holds (time / bucket width).
    period: u64,
    ok: u64,
    error: u64,
}

/// Counts over the last `window_ms`.
#[derive(Clone, Debug)]
pub struct Window {
    bucket_ms: u64,
    buckets: [Bucket; BUCKETS],
    first_update_ms: Option<u64>,
    last_update_ms: Option<u64>,
}

/// Totals over a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Totals {
    pub ok: u64,
    pub error: u64,
}

impl Totals {
    pub fn requests(&self) -> u64 {
        self.ok + self.error
    }

    /// Errors / requests, or `None` with no requests (unknown, never "0 % errors").
    pub fn error_rate(&self) -> Option<f64> {
        let requests = self.requests();
        (requests > 0).then(|| self.error as f64 / requests as f64)
    }
}

impl Window {
    pub fn new(window_ms: u64) -> Window {
        let bucket_ms = (window_ms / BUCKETS as u64).max(1);
        Window {
            bucket_ms,
            buckets: [Bucket::default(); BUCKETS],
            first_update_ms: None,
            last_update_ms: None,
        }
    }

    pub fn record(&mut self, now_ms: u64, ok: u64, error: u64) {
        let period = now_ms / self.bucket_ms;
        let slot = &mut self.buckets[(period % BUCKETS as u64) as usize];
        if slot.period != period {
            *slot = Bucket { period, ok: 0, error: 0 };
        }
        slot.ok = slot.ok.saturating_add(ok);
        slot.error = slot.error.saturating_add(error);
        self.first_update_ms.get_or_insert(now_ms);
        self.last_update_ms = Some(now_ms);
    }

    /// How long the counts in [`Window::totals`] cover: the whole window, or less while the
    /// first report is younger than the window (so a rate is not diluted by time before it).
    pub fn span_ms(&self, now_ms: u64) -> u64 {
        let window = self.bucket_ms * BUCKETS as u64;
        match self.first_update_ms {
            None => window,
            Some(first) => (now_ms.saturating_sub(first) + self.bucket_ms).min(window),
        }
    }

    pub fn totals(&self, now_ms: u64) -> Totals {
        let now_period = now_ms / self.bucket_ms;
        let oldest = now_period.saturating_sub(BUCKETS as u64 - 1);
        self.buckets
            .iter()
            .filter(|b| (b.ok > 0 || b.error > 0) && b.period >= oldest && b.period <= now_period)
            .fold(Totals::default(), |t, b| Totals { ok: t.ok + b.ok, error: t.error + b.error })
    }

    pub fn last_update_ms(&self) -> Option<u64> {
        self.last_update_ms
    }

    pub fn first_update_ms(&self) -> Option<u64> {
        self.first_update_ms
    }

    /// The width of one bucket: the resolution of every span.
    pub fn bucket_ms(&self) -> u64 {
        self.bucket_ms
    }

    /// Totals over the newest `span_ms` of the window (whole buckets, at least one, at most the
    /// window): the part that "down" and load are judged on, so detection does not wait for a
    /// minute of healthy history to be outvoted.
    pub fn totals_recent(&self, now_ms: u64, span_ms: u64) -> Totals {
        let buckets = span_ms.div_ceil(self.bucket_ms).clamp(1, BUCKETS as u64);
        let now_period = now_ms / self.bucket_ms;
        let oldest = now_period.saturating_sub(buckets - 1);
        self.buckets
            .iter()
            .filter(|b| (b.ok > 0 || b.error > 0) && b.period >= oldest && b.period <= now_period)
            .fold(Totals::default(), |t, b| Totals { ok: t.ok + b.ok, error: t.error + b.error })
    }
}

/// A window as another replica sends it (`service::gate_view`): the bucket width, the first and
/// last report times and the buckets that hold counts, each `[period, ok, error]`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowWire {
    pub bucket_ms: u64,
    #[serde(default)]
    pub first_ms: Option<u64>,
    #[serde(default)]
    pub last_ms: Option<u64>,
    pub buckets: Vec<[u64; 3]>,
}

impl Window {
    /// The counts still inside the window at `now_ms`, for another replica.
    pub fn to_wire(&self, now_ms: u64) -> WindowWire {
        let now_period = now_ms / self.bucket_ms;
        let oldest = now_period.saturating_sub(BUCKETS as u64 - 1);
        let mut buckets: Vec<[u64; 3]> = self
            .buckets
            .iter()
            .filter(|b| (b.ok > 0 || b.error > 0) && b.period >= oldest && b.period <= now_period)
            .map(|b| [b.period, b.ok, b.error])
            .collect();
        buckets.sort_unstable();
        WindowWire {
            bucket_ms: self.bucket_ms,
            first_ms: self.first_update_ms,
            last_ms: self.last_update_ms,
            buckets,
        }
    }

    /// Rebuilds another replica's window; `None` when its buckets are not this replica's width
    /// (replicas configured with different `health.window`s cannot add their counts).
    pub fn from_wire(wire: &WindowWire, window_ms: u64) -> Option<Window> {
        let mut w = Window::new(window_ms);
        if wire.bucket_ms != w.bucket_ms || wire.buckets.len() > BUCKETS {
            return None;
        }
        for [period, ok, error] in &wire.buckets {
            let slot = &mut w.buckets[(period % BUCKETS as u64) as usize];
            if slot.period <= *period {
                *slot = Bucket { period: *period, ok: *ok, error: *error };
            }
        }
        w.first_update_ms = wire.first_ms;
        w.last_update_ms = wire.last_ms;
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_slide_out_of_the_window() {
        let mut w = Window::new(60_000);
        w.record(1_000, 90, 10);
        w.record(30_000, 50, 50);
        assert_eq!(w.totals(30_000), Totals { ok: 140, error: 60 });
        assert_eq!(w.totals(30_000).error_rate(), Some(0.3));
        // 61 s after the first batch it has left the window; the second is still in.
        assert_eq!(w.totals(61_500), Totals { ok: 50, error: 50 });
        assert_eq!(w.totals(200_000), Totals::default());
        assert_eq!(w.totals(200_000).error_rate(), None);
    }

    #[test]
    fn the_span_grows_until_the_window_is_full() {
        let mut w = Window::new(60_000);
        w.record(10_000, 1, 0);
        assert_eq!(w.span_ms(10_000), 1_000);
        assert_eq!(w.span_ms(20_000), 11_000);
        assert_eq!(w.span_ms(100_000), 60_000);
    }

    #[test]
    fn recent_totals_read_only_the_newest_buckets() {
        let mut w = Window::new(60_000);
        w.record(1_000, 100, 0);
        w.record(50_000, 0, 10);
        assert_eq!(w.totals(50_000), Totals { ok: 100, error: 10 });
        // The last 10 s hold only the errors: a zone that just started failing reads 100 %.
        assert_eq!(w.totals_recent(50_000, 10_000), Totals { ok: 0, error: 10 });
        assert_eq!(w.totals_recent(50_000, 600_000), w.totals(50_000), "capped at the window");
    }

    #[test]
    fn a_window_sent_to_another_replica_counts_the_same_there() {
        let mut w = Window::new(60_000);
        w.record(1_000, 90, 10);
        w.record(30_000, 50, 50);
        w.record(61_500, 7, 0);
        let wire = w.to_wire(61_500);
        assert_eq!(wire.buckets.len(), 2, "the first bucket left the window: {wire:?}");
        let back = Window::from_wire(&wire, 60_000).unwrap();
        assert_eq!(back.totals(61_500), w.totals(61_500));
        assert_eq!(back.totals_recent(61_500, 10_000), Totals { ok: 7, error: 0 });
        assert_eq!(back.last_update_ms(), Some(61_500));
        assert!(Window::from_wire(&wire, 10_000).is_none(), "another bucket width");
    }

    #[test]
    fn a_reused_slot_forgets_its_old_period() {
        let mut w = Window::new(60_000);
        w.record(0, 5, 5);
        w.record(60_000, 1, 0); // same slot, one full window later
        assert_eq!(w.totals(60_000), Totals { ok: 1, error: 0 });
    }
}
