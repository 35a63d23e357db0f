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
    az_b_errors: Arc<AtomicU64>,
    /// While set, az-b's reporters send nothing (a zone that dies silently).
    az_b_silent: Arc<AtomicBool>,
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
        let az_b_silent = Arc::new(AtomicBool::new(false));
        let (s, a, b, from, silent, url) = (
            Arc::clone(&stop),
            Arc::clone(&az_a_errors),
            Arc::clone(&az_b_errors),
            Arc::clone(&az_b_down_from),
            Arc::clone(&az_b_silent),
            url.to_owned(),
        );
        let thread = std::thread::spawn(move || {
            let agent = agent();
            while !s.load(Ordering::SeqCst) {
                let (a_err, b_err) = (a.load(Ordering::SeqCst) / 5, b.load(Ordering::SeqCst) / 5);
                if b_err == 20 {
                    let _ = from.compare_exchange(0, now_ms(), Ordering::SeqCst, Ordering::SeqCst);
                }
                let mut body = json!([
                    {"zone": "az-a", "color": "green", "ok": 20 - a_err, "error": a_err}
                ]);
                if !silent.load(Ordering::SeqCst) {
                    body.as_array_mut().unwrap().push(
                        json!({"zone": "az-b", "color": "blue", "ok": 20 - b_err, "error": b_err}),
                    );
                }
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Feeder { stop, az_a_errors, az_b_errors, az_b_silent, az_b_down_from, thread: Some(thread) }
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
    put_named_plan(server, PLAN, "az-b", trigger);
}

/// A plan `name` that evacuates `zone` when its trigger fires.
fn put_named_plan(server: &Server, name: &str, zone: &str, trigger: Value) {
    let (_, plans) = get_json(&format!("{}/v1/plans", server.url));
    let body = json!({
        "expected_version": plans["version"],
        "reason": format!("{zone} failover, reviewed"),
        "rto": "1m",
        "steps": [{"type": "evacuate", "zone": zone, "to_percent": 0}],
        "trigger": trigger,
        "cooldown": "1h",
    });
    let (status, plan) = put_json(&format!("{}/v1/plans/{name}", server.url), OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{plan}");
}

fn runs(server: &Server) -> Vec<Value> {
    runs_of(server, PLAN)
}

fn runs_of(server: &Server, plan: &str) -> Vec<Value> {
    let (status, body) = get_json(&format!("{}/v1/plans/{plan}/runs", server.url));
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
    refusals_of(server, PLAN, reason)
}

fn refusals_of(server: &Server, plan: &str, reason: &str) -> f64 {
    metric(
        server,
        &format!("tidegate_plan_trigger_refusals_total{{plan=\"{plan}\",reason=\"{reason}\"}}"),
    )
}

fn set_automation(server: &Server, stopped: bool, reason: &str) -> Value {
    let (_, now) = get_json(&format!("{}/v1/automation", server.url));
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    let _ = now;
    let (status, body) = put_json(
        &format!("{}/v1/automation", server.url),
        OPERATOR_TOKEN,
        json!({"stopped": stopped, "expected_version": routing["version"], "reason": reason}),
    );
    assert_eq!(status, 200, "{body}");
    body
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

    // az-b stays down (its outcomes keep failing), well past another 2 s: once per incident,
    // nothing starts again (before the caps it refired every cooldown while the zone was down).
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(runs(&server).len(), 1, "{:?}", runs(&server));
    assert_eq!(metric(&server, &triggers), 1.0);
    assert!(refusals(&server, "once_per_incident") >= 1.0, "the refusal is counted");

    // The caps are in the replicated state: a replica that restarts after kill -9 keeps them.
    server.kill9();
    let server = start(dir.path());
    drop(feeder);
    let _feeder = Feeder::start(&server.url, 0, 100);
    std::thread::sleep(Duration::from_secs(4));
    let after = runs(&server);
    assert_eq!(after.len(), 1, "no second automatic run after a restart: {after:?}");
    assert_eq!(after[0]["id"].as_u64(), Some(id));
    assert!(
        refusals(&server, "once_per_incident") >= 1.0,
        "the restarted replica refused: once per incident"
    );
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
    put_plan_with(&server, json!({"lane_consumers_gone": "az-b", "lane_consumers_gone_for": "1s"}));
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
    assert!(reason.contains("every lane consumer in az-b has been gone for"), "{reason}");
}

/// Two plans that fail over into each other: az-b fails, its plan moves every user to az-a; then
/// az-a fails under the load. Before the caps, the second plan moved everyone back into az-b
/// 14.9 s later with nobody involved. Now the hop limit holds it and names why, until an
/// operator re-arms automation (the control: then it fires).
#[test]
fn automatic_failover_makes_one_hop_and_waits_for_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    put_named_plan(&server, PLAN, "az-b", json!({"zone_down_for": "1s"}));
    put_named_plan(&server, "az-a-failing", "az-a", json!({"zone_down_for": "1s"}));
    let feeder = Feeder::start(&server.url, 0, 100);
    assert!(wait_until(Duration::from_secs(15), || !runs(&server).is_empty()), "az-b's plan fires");
    let done = wait_until(Duration::from_secs(15), || runs(&server)[0]["state"] == "completed");
    assert!(done, "{}", runs(&server)[0]);
    // az-b recovers, az-a fails under the moved load.
    feeder.az_b_errors.store(0, Ordering::SeqCst);
    feeder.az_a_errors.store(100, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(5));
    assert!(runs_of(&server, "az-a-failing").is_empty(), "no automatic move back into az-b");
    assert!(refusals_of(&server, "az-a-failing", "hop_limit") >= 1.0);
    let (_, automation) = get_json(&format!("{}/v1/automation", server.url));
    let counted = &automation["runs_since_armed"];
    assert_eq!(counted.as_array().unwrap().len(), 1, "{automation}");
    assert_eq!(counted[0]["left_zone"], "az-b", "{automation}");

    // An operator looked at it and re-arms: the same condition now fires the second plan.
    let armed = set_automation(&server, false, "az-b is fixed; az-a is overloaded");
    assert_eq!(armed["runs_since_armed"].as_array().unwrap().len(), 0, "{armed}");
    assert!(
        wait_until(Duration::from_secs(10), || !runs_of(&server, "az-a-failing").is_empty()),
        "after re-arming, az-a's plan fires"
    );
    let run = runs_of(&server, "az-a-failing").remove(0);
    assert_eq!(run["started_by"], "auto", "{run}");
}

/// The runtime stop switch holds every trigger, is audited, and survives a `kill -9`.
#[test]
fn the_stop_switch_holds_every_trigger_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    put_plan(&server);
    let stopped = set_automation(&server, true, "database failover in progress by hand");
    assert_eq!(stopped["stopped"], true, "{stopped}");
    assert_eq!(stopped["changed_by"], "alice", "{stopped}");
    let _feeder = Feeder::start(&server.url, 0, 100);
    std::thread::sleep(Duration::from_secs(4));
    assert!(runs(&server).is_empty(), "stopped: {:?}", runs(&server));
    assert!(refusals(&server, "stopped") >= 1.0);
    server.kill9();
    let server = start(dir.path());
    let (_, automation) = get_json(&format!("{}/v1/automation", server.url));
    assert_eq!(automation["stopped"], true, "the switch survives a restart: {automation}");
    drop(_feeder);
    let _feeder = Feeder::start(&server.url, 0, 100);
    std::thread::sleep(Duration::from_secs(4));
    assert!(runs(&server).is_empty(), "still stopped after the restart");
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=20", server.url));
    let entry = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "automation_stop")
        .cloned()
        .expect("the stop is audited");
    assert_eq!(entry["by"], "alice");
    // Started again: it fires.
    set_automation(&server, false, "handled");
    assert!(wait_until(Duration::from_secs(10), || !runs(&server).is_empty()));
}

/// A zone that dies silently (its reporters stop with it) is `unknown`, never `active`, and a
/// `zone_silent_for` trigger evacuates it. Before, it looked healthy and nothing fired.
#[test]
fn a_silent_zone_is_unknown_and_fires_zone_silent_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(
        &file,
        config_toml(&config().replace("window = \"1s\"", "window = \"2s\"\nsilent_after = \"1s\"")),
    )
    .unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    put_plan_with(&server, json!({"zone_silent_for": "2s"}));
    let feeder = Feeder::start(&server.url, 0, 0);
    let zone_state = |zone: &str| {
        let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
        zones["zones"].as_array().unwrap().iter().find(|z| z["zone"] == zone).unwrap()["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(wait_until(Duration::from_secs(5), || zone_state("az-b") == "active"));
    let silent_from = now_ms();
    feeder.az_b_silent.store(true, Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(5), || zone_state("az-b") == "unknown"),
        "a silent zone is unknown: {}",
        zone_state("az-b")
    );
    let unknown_after = now_ms() - silent_from;
    assert!(wait_until(Duration::from_secs(10), || !runs(&server).is_empty()), "the trigger fires");
    let run = runs(&server).remove(0);
    assert_eq!(run["started_by"], "auto", "{run}");
    assert!(run["reason"].as_str().unwrap().contains("reported nothing readable"), "{run}");
    let fired_after = run["started_ms"].as_u64().unwrap() - silent_from;
    eprintln!(
        "silent zone: unknown after {unknown_after} ms (silent_after 1000 ms), run started after {fired_after} ms (zone_silent_for 2000 ms)"
    );
    assert!(fired_after >= 2_000, "the trigger waited zone_silent_for: {fired_after} ms");
}
