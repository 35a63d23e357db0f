//! Users' traffic as services report it: outcome batches about every 50 ms, posted with a token,
//! split between az-b (blue) and az-a (green) by the current share. Each batch counts the
//! requests of the time since the previous one (at `rate`, at most 250 ms' worth: a stalled loop
//! loses traffic rather than bursting), so the rate tidegate sees does not depend on how fast
//! this loop runs on a loaded machine. Shared by the incident, plan-run and capacity tests.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{OPERATOR_TOKEN, agent};

/// What the feeder sends.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Requests per second across both zones.
    pub rate: f64,
    /// Percent of az-b's requests that fail (changeable while it runs).
    pub b_error_pct: u64,
    /// Requests per batch az-b reports at least (synthetic probes keep a zone without users
    /// observable).
    pub b_probes: u64,
    /// Read az-a's load from `GET /v1/zones` every fourth batch, for [`Traffic::peak_az_a`].
    pub watch_peak: bool,
}

pub struct Traffic {
    stop: Arc<AtomicBool>,
    b_error_pct: Arc<AtomicU64>,
    peak_az_a: Arc<Mutex<f64>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Traffic {
    /// Feeds the coordinator at `url`.
    pub fn start(url: &str, spec: Spec) -> Traffic {
        let url = url.to_owned();
        Traffic::start_with(move || url.clone(), spec)
    }

    /// Feeds whichever coordinator `url()` names at each batch (one restarted on another port).
    pub fn start_with(url: impl Fn() -> String + Send + 'static, spec: Spec) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let b_error_pct = Arc::new(AtomicU64::new(spec.b_error_pct));
        let peak_az_a = Arc::new(Mutex::new(0.0_f64));
        let (s, pct, peak) = (Arc::clone(&stop), Arc::clone(&b_error_pct), Arc::clone(&peak_az_a));
        let thread = std::thread::spawn(move || {
            let agent = agent();
            let mut blue_percent = 50.0;
            let mut n = 0u64;
            let mut last = Instant::now();
            while !s.load(Ordering::SeqCst) {
                let url = url();
                let read = |path: &str| {
                    agent
                        .get(&format!("{url}{path}"))
                        .call()
                        .ok()
                        .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                };
                if let Some(b) = read("/v1/routing").and_then(|b| b["blue_percent"].as_f64()) {
                    blue_percent = b;
                }
                if spec.watch_peak
                    && n.is_multiple_of(4)
                    && let Some(zones) = read("/v1/zones")
                {
                    for z in zones["zones"].as_array().into_iter().flatten() {
                        if z["zone"] == "az-a"
                            && let Some(rps) = z["capacity"]["load_rps"].as_f64()
                        {
                            let mut p = peak.lock().unwrap();
                            *p = (*p).max(rps);
                        }
                    }
                }
                n += 1;
                let now = Instant::now();
                let elapsed = now.duration_since(last).min(Duration::from_millis(250));
                last = now;
                let total = (spec.rate * elapsed.as_secs_f64()).round() as u64;
                let b = (total as f64 * blue_percent / 100.0).round() as u64;
                let a = total - b;
                let b = b.max(spec.b_probes);
                let b_errors = b * pct.load(Ordering::SeqCst) / 100;
                let body = json!([
                    {"zone": "az-b", "color": "blue", "ok": b - b_errors, "error": b_errors},
                    {"zone": "az-a", "color": "green", "ok": a, "error": 0}
                ]);
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Traffic { stop, b_error_pct, peak_az_a, thread: Some(thread) }
    }

    pub fn set_b_error_pct(&self, pct: u64) {
        self.b_error_pct.store(pct, Ordering::SeqCst);
    }

    /// The highest load az-a reported while the feeder ran (with `watch_peak`).
    pub fn peak_az_a(&self) -> f64 {
        *self.peak_az_a.lock().unwrap()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
