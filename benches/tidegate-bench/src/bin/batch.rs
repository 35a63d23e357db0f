//! `POST /v1/tag` with 10 000 IDs against local `Router::tag` calls, alternating in one run:
//! IDs tagged per second over HTTP ÷ `Router::tag` calls per second on one thread.
//!
//! ```sh
//! cargo run --release --manifest-path benches/tidegate-bench/Cargo.toml --bin batch -- http://127.0.0.1:8080 5 3
//! ```
//!
//! (URL ROUNDS SECONDS.) `scripts/bench.sh` runs it against the tidegate it started. One client thread on each side;
//! the router gets its table from the same coordinator's watch stream. Prints one line per
//! round and `batch_ratio_p50_min_max=P50/MIN/MAX` plus the two rates' p50s.

use std::time::{Duration, Instant};

use tidegate::client::{Identity, Router, RouterOptions};

const IDS: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let main = args.next().expect("usage: batch_bench URL ROUNDS SECONDS [POST_URL]");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let seconds: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    // The batches may go to another listener of the same coordinator (the fast tag port); the
    // local Router watches the main one.
    let url = args.next().unwrap_or_else(|| main.clone());
    let window = Duration::from_secs_f64(seconds);

    let ids: Vec<String> = (0..IDS).map(|_| format!("user-{}", rand::random::<u64>())).collect();
    let body = serde_json::to_vec(&serde_json::json!({ "user_ids": ids })).expect("serialises");
    let agent = ureq::Agent::new_with_defaults();
    let post = || {
        let mut response = agent
            .post(format!("{url}/v1/tag"))
            .content_type("application/json")
            .send(&body[..])
            .unwrap_or_else(|e| panic!("POST {url}/v1/tag: {e}"));
        let text = response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .expect("a batch answer");
        text.len()
    };
    // One answer is checked in full: every ID tagged, in order.
    {
        let mut response = agent
            .post(format!("{url}/v1/tag"))
            .content_type("application/json")
            .send(&body[..])
            .expect("POST /v1/tag");
        let value: serde_json::Value =
            response.body_mut().with_config().limit(64 * 1024 * 1024).read_json().expect("json");
        let tags = value["tags"].as_array().expect("a tags array");
        assert_eq!(tags.len(), IDS, "every ID tagged");
        assert_eq!(tags[IDS - 1]["user_id"], ids[IDS - 1].as_str(), "in order");
    }

    let options = RouterOptions { acknowledge: false, ..RouterOptions::default() };
    let identity = Identity {
        subscriber_id: "batch-bench".into(),
        zone: "bench".into(),
        kind: "bench".into(),
    };
    let router = Router::connect(&main, identity, options).expect("router");
    let deadline = Instant::now() + Duration::from_secs(10);
    while router.version().is_none() {
        assert!(Instant::now() < deadline, "the router got no table within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    let (mut http, mut local, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let started = Instant::now();
        let mut tagged = 0usize;
        while started.elapsed() < window {
            std::hint::black_box(post());
            tagged += IDS;
        }
        let http_rate = tagged as f64 / started.elapsed().as_secs_f64();

        let started = Instant::now();
        let mut calls = 0usize;
        while started.elapsed() < window {
            for id in &ids {
                std::hint::black_box(router.tag(id).expect("tag"));
            }
            calls += IDS;
        }
        let local_rate = calls as f64 / started.elapsed().as_secs_f64();
        println!(
            "round {round}: POST /v1/tag {http_rate:.0} IDs/s, Router::tag {local_rate:.0} calls/s, \
             ratio {:.3}",
            http_rate / local_rate
        );
        http.push(http_rate);
        local.push(local_rate);
        ratios.push(http_rate / local_rate);
    }
    let (p, lo, hi) = dist(&ratios);
    println!("batch_ratio_p50_min_max={p:.3}/{lo:.3}/{hi:.3}");
    println!("batch_http_ids_per_s_p50={:.0}", dist(&http).0);
    println!("batch_local_calls_per_s_p50={:.0}", dist(&local).0);
}

/// p50, min, max.
fn dist(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let p50 = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (p50, v[0], v[n - 1])
}
