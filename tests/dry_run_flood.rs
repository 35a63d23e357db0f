//! Anonymous callers cannot exhaust the coordinator through plan dry runs: 2 000 anonymous dry
//! runs of a plan whose HTTP precondition hangs (accepts, never answers) while a drain steps
//! every second. Before, each dry run checked the precondition on a blocking thread with a 2 s
//! timeout: 1 s drain steps stretched to 12 s and the precondition's host got one call per dry
//! run. Now readers share one check per precondition per 5 s.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A host that accepts connections and never answers; counts them.
fn hanging_host() -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (port, accepted)
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn anonymous_dry_runs_never_call_out_per_request_nor_slow_a_drain() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config_toml("[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\n"))
        .unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    let (port, accepted) = hanging_host();
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let (status, plan) = put_json(
        &format!("{url}/v1/plans/evacuate-az-b"),
        OPERATOR_TOKEN,
        json!({"expected_version": routing["version"], "reason": "t", "rto": "1m",
               "preconditions": [{"name": "db", "http": format!("http://127.0.0.1:{port}/primary")}],
               "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]}),
    );
    assert_eq!(status, 200, "{plan}");

    // Healthy outcomes in both zones, and a maintenance drain that steps every second.
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (stop, url) = (Arc::clone(&stop), url.clone());
        std::thread::spawn(move || {
            let agent = agent();
            while !stop.load(Ordering::SeqCst) {
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(json!([{"zone": "az-b", "color": "blue", "ok": 50},
                                      {"zone": "az-a", "color": "green", "ok": 50}]));
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(2200));
    let (status, drain) = post_json(
        &format!("{url}/v1/drains"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 5, "interval": "1s",
               "guard": {"min_requests": 5}, "reason": "maintenance during the flood"}),
    );
    assert_eq!(status, 201, "{drain}");
    let drain_id = drain["id"].as_u64().unwrap();

    // 2 000 anonymous dry runs from 16 threads.
    let started = Instant::now();
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let agent = agent();
                (0..125)
                    .map(|_| {
                        let t = Instant::now();
                        let response = agent
                            .post(&format!("{url}/v1/plans/evacuate-az-b/dry-run"))
                            .header("Content-Type", "application/json")
                            .send("{}")
                            .unwrap();
                        assert_eq!(response.status().as_u16(), 200);
                        t.elapsed().as_millis()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let latencies: Vec<u128> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let flood = started.elapsed();
    let mut sorted = latencies.clone();
    sorted.sort();
    let calls = accepted.load(Ordering::SeqCst);
    // Let the drain take a few more steps, then read its step times from the audit.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=500"));
    let mut steps: Vec<u64> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "drain_step" && e["by"] == format!("drain:{drain_id}"))
        .map(|e| e["at_ms"].as_u64().unwrap())
        .collect::<Vec<_>>();
    steps.sort();
    let gaps: Vec<u64> = steps.windows(2).map(|w| w[1] - w[0]).collect();
    println!(
        "2000 anonymous dry runs in {} ms: p50 {} ms, p99 {} ms, max {} ms; {calls} call(s) to the hanging precondition host; drain step gaps {gaps:?} ms",
        flood.as_millis(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted[sorted.len() - 1]
    );
    let allowed = 1 + flood.as_secs() / 5 + 1;
    assert!(calls <= allowed, "{calls} outbound calls for 2000 dry runs (at most {allowed})");
    assert!(percentile(&sorted, 0.5) < 100, "dry runs answer from the shared result");
    assert!(steps.len() >= 3, "the drain kept stepping: {steps:?} {audit}");
    assert!(gaps.iter().all(|g| *g < 1_600), "1 s drain steps kept their interval: {gaps:?}");
}
