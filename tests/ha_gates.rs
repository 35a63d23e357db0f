//! One view for every gate (issue 21): three replicas on one Kafka topic (real broker, real
//! binaries), and inputs that only one replica receives.
//!
//! - Outcomes posted to one replica only: az-a's failing reporter talks to replica 1, its healthy
//!   ones to replicas 2 and 3. Alone, replicas 2 and 3 would read az-a as healthy and step a drain
//!   into it (the race the issue measured: completed, paused after 2, paused after 11). Every run
//!   must pause before any step, exactly as when every replica is fed the same mix.
//! - Every watcher on one replica, one of them stuck: the other replicas have no subscribers of
//!   their own (which used to count as 100 % converged), and must hold the drain all the same.

mod common;
mod ha_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, get_json, kafka, post_json, put_json, wait_until};
use ha_support::{Replicas, agent, drain_steps};
use serde_json::{Value, json};

const CONFIG: &str =
    "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\nconvergence_timeout = \"1500ms\"\n";

/// Posts outcome batches: `plan[i]` goes to replica `i` every 50 ms.
fn feed(urls: Vec<String>, plan: Vec<Value>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent = agent(Duration::from_millis(300));
        while !stop.load(Ordering::Relaxed) {
            for (url, body) in urls.iter().zip(&plan) {
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(body);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

fn zone_rate(url: &str, zone: &str) -> Option<f64> {
    let (_, zones) = get_json(&format!("{url}/v1/zones"));
    zones["zones"].as_array()?.iter().find(|z| z["zone"] == zone)?["error_rate"].as_f64()
}

fn drain(url: &str, id: u64) -> Value {
    get_json(&format!("{url}/v1/drains/{id}")).1
}

fn table_version(url: &str) -> u64 {
    get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap()
}

/// Starts a drain of az-b (users move into az-a, whose errors the guard watches) on `url`.
fn start_drain(url: &str, reason: &str) -> u64 {
    let (status, body) = post_json(
        &format!("{url}/v1/drains"),
        OPERATOR_TOKEN,
        json!({
            "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "200ms",
            "guard": {"max_error_rate": 0.05, "min_requests": 50, "breaches": 2, "on_breach": "pause"},
            "reason": reason
        }),
    );
    assert_eq!(status, 201, "{body}");
    body["id"].as_u64().unwrap()
}

/// Runs `runs` drains started on replica 2 and returns, per run, (steps, state) on each replica.
fn run_drains(replicas: &Replicas, runs: usize, label: &str) -> Vec<Vec<(usize, String)>> {
    let mut results = Vec::new();
    for run in 0..runs {
        let before = drain_steps(&replicas.urls[0]).len();
        let id = start_drain(&replicas.urls[1], &format!("{label} run {run}"));
        let settled = wait_until(Duration::from_secs(15), || {
            replicas.urls.iter().all(|u| drain(u, id)["state"] != "running")
        });
        assert!(
            settled,
            "{label} run {run}: the drain never stopped: {}",
            drain(&replicas.urls[0], id)
        );
        // Let any step a replica proposed late reach the others.
        std::thread::sleep(Duration::from_millis(500));
        let row: Vec<(usize, String)> = replicas
            .urls
            .iter()
            .map(|u| {
                let d = drain(u, id);
                (drain_steps(u).len() - before, d["state"].as_str().unwrap_or("?").to_owned())
            })
            .collect();
        println!("{label} run {run}: {row:?} ({})", drain(&replicas.urls[0], id)["pause_cause"]);
        results.push(row);
        // Back to the start for the next run: abort, and the dial to 50 %.
        let url = &replicas.urls[0];
        let d = drain(url, id);
        if d["state"] != "aborted" && d["state"] != "completed" {
            let (status, body) = post_json(
                &format!("{url}/v1/drains/{id}/abort"),
                OPERATOR_TOKEN,
                json!({"reason": "next run"}),
            );
            assert_eq!(status, 200, "{body}");
        }
        let (status, body) = put_json(
            &format!("{url}/v1/dial"),
            OPERATOR_TOKEN,
            json!({"blue_percent": 50, "expected_version": table_version(url), "reason": "next run"}),
        );
        assert_eq!(status, 200, "{body}");
        let v = table_version(url);
        assert!(wait_until(Duration::from_secs(5), || replicas
            .urls
            .iter()
            .all(|u| table_version(u) == v)));
    }
    results
}

#[test]
fn outcomes_reported_to_one_replica_hold_the_drain_on_every_replica_as_when_all_are_fed() {
    let topic = kafka::unique("ha-gates-outcomes");
    let replicas = Replicas::start(&kafka::bootstrap(), &topic, 3, CONFIG);
    let healthy_b = json!({"zone": "az-b", "color": "blue", "ok": 100, "error": 0});
    // az-a's failing reporter (60 % errors) reports to replica 1 only; its two healthy reporters
    // to replicas 2 and 3. Together: 150 errors in 450 requests, 33 %.
    let split = vec![
        json!([{"zone": "az-a", "color": "green", "ok": 100, "error": 150}, healthy_b]),
        json!([{"zone": "az-a", "color": "green", "ok": 100, "error": 0}, healthy_b]),
        json!([{"zone": "az-a", "color": "green", "ok": 100, "error": 0}, healthy_b]),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(replicas.urls.clone(), split, Arc::clone(&stop));
    // Every replica reads the whole mix, not its own share of it (replica 2 alone would read 0 %).
    for url in &replicas.urls {
        let seen = wait_until(Duration::from_secs(15), || {
            zone_rate(url, "az-a").is_some_and(|r| (0.25..0.40).contains(&r))
        });
        assert!(
            seen,
            "{url} reads az-a at {:?}, not the 33 % of all reports",
            zone_rate(url, "az-a")
        );
    }
    let split_runs = run_drains(&replicas, 10, "fed one replica");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();

    // The control: every replica fed the same mix.
    let mixed = json!([
        {"zone": "az-a", "color": "green", "ok": 100, "error": 50},
        {"zone": "az-b", "color": "blue", "ok": 100, "error": 0}
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(replicas.urls.clone(), vec![mixed; 3], Arc::clone(&stop));
    std::thread::sleep(Duration::from_secs(3));
    let all_runs = run_drains(&replicas, 3, "fed every replica");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();

    for (label, runs) in [("one replica fed", &split_runs), ("every replica fed", &all_runs)] {
        for (i, row) in runs.iter().enumerate() {
            for (r, (steps, state)) in row.iter().enumerate() {
                assert_eq!(
                    (*steps, state.as_str()),
                    (0, "paused"),
                    "{label}, run {i}, replica {}: the guard let a step into a zone at 33 % errors",
                    r + 1
                );
            }
        }
    }
}

#[test]
fn a_stuck_gateway_watching_one_replica_holds_the_drain_on_every_replica() {
    let topic = kafka::unique("ha-gates-subscribers");
    let replicas = Replicas::start(&kafka::bootstrap(), &topic, 3, CONFIG);
    let healthy = json!([
        {"zone": "az-a", "color": "green", "ok": 100, "error": 0},
        {"zone": "az-b", "color": "blue", "ok": 100, "error": 0}
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(replicas.urls.clone(), vec![healthy; 3], Arc::clone(&stop));
    // Two gateways, both on replica 1: one applies every version, one is stuck on the first
    // it saw but keeps heartbeating (its apply hangs, its ack thread does not).
    let r1 = replicas.urls[0].clone();
    let stuck_on = table_version(&r1);
    let gateways = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let agent = agent(Duration::from_millis(500));
            while !stop.load(Ordering::Relaxed) {
                let current =
                    get_json(&format!("{r1}/v1/routing")).1["version"].as_u64().unwrap_or(0);
                for (id, version) in [("gw-ok", current), ("gw-stuck", stuck_on)] {
                    let _ = agent
                        .post(&format!("{r1}/v1/subscribers/{id}/ack"))
                        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                        .send_json(json!({"version": version, "zone": "az-a", "kind": "gateway"}));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    for url in &replicas.urls {
        assert!(
            wait_until(Duration::from_secs(15), || zone_rate(url, "az-a") == Some(0.0)),
            "{url} never read az-a's health"
        );
    }
    // Replicas 2 and 3 count replica 1's subscribers in their convergence.
    let v = table_version(&replicas.urls[1]);
    for url in &replicas.urls[1..] {
        let counted = wait_until(Duration::from_secs(5), || {
            let (_, c) = get_json(&format!("{url}/v1/routing/convergence?version={v}"));
            c["live"] == 2
        });
        let (_, c) = get_json(&format!("{url}/v1/routing/convergence?version={v}"));
        assert!(counted, "{url} does not count replica 1's subscribers: {c}");
    }
    let started = Instant::now();
    let id = start_drain(&replicas.urls[1], "stuck gateway");
    let paused = wait_until(Duration::from_secs(15), || {
        replicas.urls.iter().all(|u| drain(u, id)["state"] == "paused")
    });
    let d = drain(&replicas.urls[2], id);
    assert!(paused, "the drain did not pause on every replica: {d}");
    println!("paused after {:?}: {}", started.elapsed(), d["pause_cause"]);
    std::thread::sleep(Duration::from_millis(500));
    for url in &replicas.urls {
        assert_eq!(
            drain_steps(url).len(),
            1,
            "{url}: a replica without watchers stepped past the stuck gateway"
        );
    }
    assert!(d.to_string().contains("gw-stuck"), "the pause names the stuck gateway: {d}");
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    gateways.join().unwrap();
}
