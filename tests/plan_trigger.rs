//! The opt-in automatic trigger on the real binary: a plan with `trigger {zone_down_for: "2s"}`
//! starts by itself, signed `auto`, once az-b has reported 100 % errors (authenticated outcomes)
//! for 2 s; not again within its cooldown, even after a `kill -9` and restart; not while the
//! receiving zone az-a is failing too; not while an operator's drain is active (and then, once
//! the drain is aborted, it does). A `lane_consumers_gone` trigger fires once the zone's last
//! lane consumer leaves, not while it is there.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::{Value, json};

const PLAN: &str = "az-b-failing";

fn config() -> String {
    "[health]\nwindow = \"1s\"\n[drain]\ntick = \"50ms\"\n\
     [drain.evacuate]\nstep_percent = 50.0\ninterval = \"200ms\"\nmin_requests = 5\n\
     [plans]\ntriggers = true\n"
        .to_owned()
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Posts outcomes every 50 ms: a fixed 20 requests per zone per batch (whatever the share, so a
/// zone stays observable after it is evacuated), failing at each zone's configured percentage.
struct Feeder {
    stop: Arc<AtomicBool>,
    az_a_errors: Arc<AtomicU64>,
    /// When az-b was first reported at 100 % errors (ms since the epoch), 0 before.
    az_b_down_from: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Feeder {
    fn start(url: &str, az_a_percent: u64, az_b_percent: u64) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let az_a_errors = Arc::new(AtomicU64::new(az_a_percent));
        let az_b_errors = Arc::new(AtomicU64::new(az_b_percent));
        let az_b_down_from = Arc::new(AtomicU64::new(0));
        let (s, a, b, from, url) = (
            Arc::clone(&stop),
            Arc::clone(&az_a_errors),
            Arc::clone(&az_b_errors),
            Arc::clone(&az_b_down_from),
            url.to_owned(),
        );
        let thread = std::thread::spawn(move || {
            let agent = agent();
            while !s.load(Ordering::SeqCst) {
                let (a_err, b_err) = (a.load(Ordering::SeqCst) / 5, b.load(Ordering::SeqCst) / 5);
                if b_err == 20 {
                    let _ = from.compare_exchange(0, now_ms(), Ordering::SeqCst, Ordering::SeqCst);
                }
                let body = json!([
                    {"zone": "az-b", "color": "blue", "ok": 20 - b_err, "error": b_err},
                    {"zone": "az-a", "color": "green", "ok": 20 - a_err, "error": a_err}
                ]);
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Feeder { stop, az_a_errors, az_b_down_from, thread: Some(thread) }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn put_plan(server: &Server) {
    put_plan_with(server, json!({"zone_down_for": "2s"}));
}

fn put_plan_with(server: &Server, trigger: Value) {
    let (_, plans) = get_json(&format!("{}/v1/plans", server.url));
    let body = json!({
        "expected_version": plans["version"],
        "reason": "az-b failover, reviewed",
        "rto": "1m",
        "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}],
        "trigger": trigger,
        "cooldown": "1h",
    });
    let (status, plan) = put_json(&format!("{}/v1/plans/{PLAN}", server.url), OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{plan}");
}

fn runs(server: &Server) -> Vec<Value> {
    let (status, body) = get_json(&format!("{}/v1/plans/{PLAN}/runs", server.url));
    assert_eq!(status, 200, "{body}");
    body["runs"].as_array().unwrap().clone()
}

fn try_metric(server: &Server, series: &str) -> Option<f64> {
    let mut response = agent().get(&format!("{}/metrics", server.url)).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn metric(server: &Server, series: &str) -> f64 {
    try_metric(server, series).unwrap_or_else(|| panic!("{series} is not exported"))
}

fn refusals(server: &Server, reason: &str) -> f64 {
    metric(
        server,
        &format!("tidegate_plan_trigger_refusals_total{{plan=\"{PLAN}\",reason=\"{reason}\"}}"),
    )
}

fn start(dir: &std::path::Path) -> Server {
    let file = dir.join("tidegate.toml");
    std::fs::write(&file, config_toml(&config())).unwrap();
    Server::start(&file, &dir.join("data"))
}

#[test]
fn fires_once_signed_auto_and_not_again_within_the_cooldown() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    put_plan(&server);
    let triggers = format!("tidegate_plan_triggers_total{{plan=\"{PLAN}\"}}");
    // Registered at 0 (by the trigger loop's next tick) for a plan with a trigger.
    assert!(wait_until(Duration::from_secs(5), || try_metric(&server, &triggers).is_some()));
    assert_eq!(metric(&server, &triggers), 0.0);
    let feeder = Feeder::start(&server.url, 0, 100);

    assert!(wait_until(Duration::from_secs(15), || !runs(&server).is_empty()), "the trigger fires");
    let run = runs(&server).remove(0);
    assert_eq!(run["started_by"], "auto", "{run}");
    let reason = run["reason"].as_str().unwrap();
    assert!(reason.contains("az-b has been down for"), "{reason}");
    let down_from = feeder.az_b_down_from.load(Ordering::SeqCst);
    let started = run["started_ms"].as_u64().unwrap();
    assert!(
        started >= down_from + 2_000,
        "started {} ms after az-b was first reported down; the trigger waits 2 s",
        started.saturating_sub(down_from)
    );
    // The trigger's latency, for the manual (docs/src/plans.md): from az-b's first failing batch
    // to the start.
    eprintln!("trigger latency: {} ms (zone_down_for 2000 ms)", started - down_from);
    let id = run["id"].as_u64().unwrap();
    let done = wait_until(Duration::from_secs(15), || {
        runs(&server)[0]["state"].as_str() != Some("running")
    });
    assert!(done, "the run finishes: {}", runs(&server)[0]);
    assert_eq!(runs(&server)[0]["state"], "completed", "{}", runs(&server)[0]);
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(routing["blue_percent"], 0.0, "az-b (blue) is evacuated: {routing}");

    // az-b stays down (its outcomes keep failing), well past another 2 s: within the cooldown
    // nothing starts again.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(runs(&server).len(), 1, "{:?}", runs(&server));
    assert_eq!(metric(&server, &triggers), 1.0);
    assert!(refusals(&server, "cooldown") >= 1.0, "the refusal is counted");

    // The cooldown is in the replicated state: a replica that restarts after kill -9 keeps it.
    server.kill9();
    let server = start(dir.path());
    drop(feeder);
    let _feeder = Feeder::start(&server.url, 0, 100);
    std::thread::sleep(Duration::from_secs(4));
    let after = runs(&server);
    assert_eq!(after.len(), 1, "no second automatic run after a restart: {after:?}");
    assert_eq!(after[0]["id"].as_u64(), Some(id));
    assert!(refusals(&server, "cooldown") >= 1.0, "the restarted replica refused on cooldown");
    assert_eq!(metric(&server, &triggers), 0.0);
}

#[test]
fn never_while_the_receiving_zone_is_down_or_an_operator_drain_is_active() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    put_plan(&server);
    // Both zones fail: evacuating az-b into az-a would move users into errors.
    let feeder = Feeder::start(&server.url, 100, 100);
    std::thread::sleep(Duration::from_secs(4));
    assert!(runs(&server).is_empty(), "{:?}", runs(&server));
    assert!(refusals(&server, "receiving_unhealthy") >= 1.0);

    // An operator's drain is active (a slow maintenance drain of az-a toward 40 %).
    let (status, drain) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-a", "target_percent": 40, "step_percent": 5, "interval": "1h",
               "reason": "az-a maintenance"}),
    );
    assert_eq!(status, 201, "{drain}");
    feeder.az_a_errors.store(0, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(4));
    assert!(runs(&server).is_empty(), "no run while the operator's drain is active");
    assert!(refusals(&server, "busy") >= 1.0);

    // Once the operator's drain is over, the same condition fires.
    let id = drain["id"].as_u64().unwrap();
    let (status, body) = post_json(
        &format!("{}/v1/drains/{id}/abort", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "done"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(wait_until(Duration::from_secs(10), || !runs(&server).is_empty()));
    assert_eq!(runs(&server)[0]["started_by"], "auto");
}

#[test]
fn fires_when_the_zones_last_lane_consumer_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    put_plan_with(&server, json!({"lane_consumers_gone": "az-b"}));
    // Both zones healthy: only the consumers can fire this trigger.
    let _feeder = Feeder::start(&server.url, 0, 0);
    let (status, member) = post_json(
        &format!("{}/v1/lanes/orders-g/members", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "topic": "orders", "partitions": 4}),
    );
    assert_eq!(status, 201, "{member}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(runs(&server).is_empty(), "az-b has a consumer: {:?}", runs(&server));

    let id = member["member_id"].as_str().unwrap();
    let response = agent()
        .delete(&format!("{}/v1/lanes/orders-g/members/{id}", server.url))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .header("X-Tidegate-Member-Secret", member["member_secret"].as_str().unwrap())
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(wait_until(Duration::from_secs(10), || !runs(&server).is_empty()), "the trigger fires");
    let run = runs(&server).remove(0);
    assert_eq!(run["started_by"], "auto", "{run}");
    let reason = run["reason"].as_str().unwrap();
    assert!(reason.contains("every lane consumer in az-b is gone"), "{reason}");
}
