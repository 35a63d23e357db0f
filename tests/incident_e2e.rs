//! The incident path on the real binary: az-b fails 60 % of its requests (reported through
//! authenticated outcomes). A maintenance drain of az-b holds; an evacuation empties it while
//! az-a stays under its capacity; with az-a's capacity too small the evacuation holds with
//! `insufficient_capacity`, and the dial is refused with 409 unless forced (audited).

mod common;

use std::time::{Duration, Instant};

use common::traffic::{Spec, Traffic};
use common::*;
use serde_json::{Value, json};

/// Requests per second across both zones, split by the current share.
const RATE: f64 = 4000.0;

fn config(capacity_rps: u32) -> String {
    format!(
        "[health]\nwindow = \"2s\"\npublish_interval = \"200ms\"\n[drain]\ntick = \"20ms\"\n\
         [drain.evacuate]\nstep_percent = 25.0\ninterval = \"300ms\"\nmin_requests = 20\n\
         [capacity]\nheadroom = 0.1\n[zones.az-a]\ncapacity_rps = {capacity_rps}\n"
    )
}

/// az-b fails 60 % of its own requests; az-a's peak load is watched.
const TRAFFIC: Spec = Spec { rate: RATE, b_error_pct: 60, b_probes: 0, watch_peak: true };

fn start(dir: &std::path::Path, capacity_rps: u32) -> (Server, Traffic) {
    let file = dir.join("tidegate.toml");
    std::fs::write(&file, config_toml(&config(capacity_rps))).unwrap();
    let server = Server::start(&file, &dir.join("data"));
    let traffic = Traffic::start(&server.url, TRAFFIC);
    let ready = wait_until(Duration::from_secs(10), || {
        let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
        zones["zones"].as_array().unwrap().iter().all(|z| {
            z["error_rate"].is_number() && z["capacity"]["load_rps"].as_f64() > Some(1000.0)
        })
    });
    assert!(ready, "both zones report health and load");
    // A full window of steady traffic before anything is measured or judged.
    std::thread::sleep(Duration::from_millis(2200));
    (server, traffic)
}

fn drain(server: &Server, id: u64) -> Value {
    get_json(&format!("{}/v1/drains/{id}", server.url)).1
}

fn start_drain(server: &Server, body: Value) -> u64 {
    let (status, drain) = post_json(&format!("{}/v1/drains", server.url), OPERATOR_TOKEN, body);
    assert_eq!(status, 201, "{drain}");
    drain["id"].as_u64().unwrap()
}

fn blue_percent(server: &Server) -> f64 {
    get_json(&format!("{}/v1/routing", server.url)).1["blue_percent"].as_f64().unwrap()
}

#[test]
fn a_failing_zone_holds_maintenance_but_is_evacuated_within_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let (server, traffic) = start(dir.path(), 5000);
    let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
    let az_a = zones["zones"].as_array().unwrap().iter().find(|z| z["zone"] == "az-a").unwrap();
    let before = az_a["capacity"]["load_rps"].as_f64().unwrap();
    assert_eq!(az_a["capacity"]["capacity_rps"], 5000.0, "{az_a}");
    assert_eq!(az_a["capacity"]["allowed_rps"], 4500.0, "{az_a}");

    // Maintenance: az-b's own errors hold it, and the guard pauses it.
    let maintenance = start_drain(
        &server,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 25, "interval": "300ms",
               "guard": {"min_requests": 20, "breaches": 2, "on_breach": "pause"},
               "reason": "planned maintenance"}),
    );
    assert!(
        wait_until(Duration::from_secs(10), || drain(&server, maintenance)["state"] == "paused")
    );
    let held = drain(&server, maintenance);
    assert_eq!(held["mode"], "maintenance");
    assert!(held["hold_reason"].as_str().unwrap().contains("draining zone az-b"), "{held}");
    assert_eq!(
        held["steps_done"], 0,
        "a maintenance drain never moves users out of a failing zone"
    );
    assert_eq!(blue_percent(&server), 50.0);
    let (status, _) = post_json(
        &format!("{}/v1/drains/{maintenance}/abort", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "az-b is failing: evacuate instead"}),
    );
    assert_eq!(status, 200);

    // Evacuation: only az-a (healthy, with headroom) is judged.
    let started = Instant::now();
    let evacuation = start_drain(
        &server,
        json!({"zone": "az-b", "target_percent": 0, "mode": "evacuate", "reason": "az-b fails 60%"}),
    );
    let body = drain(&server, evacuation);
    assert_eq!(
        (body["mode"].as_str(), body["step_percent"].as_f64()),
        (Some("evacuate"), Some(25.0))
    );
    assert_eq!(body["interval_ms"], 300, "the [drain.evacuate] defaults apply");
    assert!(
        wait_until(Duration::from_secs(20), || drain(&server, evacuation)["state"] == "completed")
    );
    let took = started.elapsed();
    assert_eq!(blue_percent(&server), 0.0);
    let done = drain(&server, evacuation);
    assert_eq!(done["steps_done"], 2);
    println!(
        "evacuation of az-b 50% -> 0% (2 steps of 25%, interval 300 ms): {} ms from start to completed",
        took.as_millis()
    );
    // Steps are logged with the source zone's (unjudged) health and the capacity projection.
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=100", server.url));
    let steps: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "drain_step" && e["by"] == format!("drain:{evacuation}"))
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(steps.len(), 2, "{steps:?}");
    for step in &steps {
        assert!(step.contains("evacuating az-b: its error rate is"), "{step}");
        assert!(step.contains("within its allowed 4500 rps"), "{step}");
    }
    // Let the window see the whole load on az-a, then check it stayed under its capacity.
    std::thread::sleep(Duration::from_millis(2500));
    let peak = traffic.peak_az_a();
    println!(
        "az-a load: {before:.0} rps before, peak {peak:.0} rps during the run (allowed 4500, capacity 5000)"
    );
    assert!(peak > before * 1.5, "az-a took over az-b's load: {before} -> {peak}");
    assert!(peak <= 5000.0, "az-a stayed under its capacity: {peak}");
}

#[test]
fn too_small_a_receiving_zone_holds_the_evacuation_and_refuses_the_dial() {
    let dir = tempfile::tempdir().unwrap();
    // az-a carries about half the traffic (2000 rps); 2600 less 10 % leaves 2340, and a 25 % step adds
    // half of az-b's load on top.
    let (server, _traffic) = start(dir.path(), 2600);
    let evacuation = start_drain(
        &server,
        json!({"zone": "az-b", "target_percent": 0, "mode": "evacuate", "reason": "az-b fails 60%"}),
    );
    assert!(wait_until(Duration::from_secs(10), || {
        drain(&server, evacuation)["hold_reason"]
            .as_str()
            .is_some_and(|r| r.contains("insufficient_capacity"))
    }));
    std::thread::sleep(Duration::from_millis(1000));
    let held = drain(&server, evacuation);
    assert_eq!(held["state"], "running", "a capacity hold is not a breach: {held}");
    assert_eq!(held["steps_done"], 0, "{held}");
    assert!(held["hold_reason"].as_str().unwrap().contains("above its allowed 2340 rps"), "{held}");
    assert_eq!(blue_percent(&server), 50.0);
    // The hold pages (an operator's drain held by capacity), and the standing gauge said so
    // before anyone asked: az-a cannot take az-b's users; az-b (no capacity configured) is not
    // asked.
    let metric = |series: &str| {
        let mut r = agent().get(&format!("{}/metrics", server.url)).call().unwrap();
        let text = r.body_mut().read_to_string().unwrap();
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse::<f64>().ok())
    };
    assert_eq!(metric("tidegate_drain_capacity_held{zone=\"az-b\"}"), Some(1.0));
    assert_eq!(metric("tidegate_drain_capacity_held{zone=\"az-a\"}"), Some(0.0));
    assert_eq!(metric("tidegate_zone_can_absorb{zone=\"az-a\",from=\"az-b\"}"), Some(0.0));
    assert_eq!(metric("tidegate_zone_can_absorb{zone=\"az-b\",from=\"az-a\"}"), None);
    let (status, _) = post_json(
        &format!("{}/v1/drains/{evacuation}/pause", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "az-a cannot take it; try the dial"}),
    );
    assert_eq!(status, 200);

    let version = get_json(&format!("{}/v1/routing", server.url)).1["version"].as_u64().unwrap();
    let dial = format!("{}/v1/dial", server.url);
    let (status, refused) = put_json(
        &dial,
        OPERATOR_TOKEN,
        json!({"blue_percent": 0, "expected_version": version, "reason": "all to az-a"}),
    );
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"], "insufficient_capacity");
    assert_eq!(refused["zone"], "az-a");
    assert_eq!(refused["allowed_rps"], 2340.0);
    assert!(refused["projected_rps"].as_f64().unwrap() > 2340.0, "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("2340 rps"), "{refused}");
    // A small move that fits is allowed.
    let (status, moved) = put_json(
        &dial,
        OPERATOR_TOKEN,
        json!({"blue_percent": 48, "expected_version": version, "reason": "a little to az-a"}),
    );
    assert_eq!(status, 200, "{moved}");
    // Viewers cannot force; operators can, and the audit says so.
    let version = moved["version"].as_u64().unwrap();
    let body = json!({"blue_percent": 0, "expected_version": version, "reason": "az-b is gone", "force": true});
    let (status, _) = put_json(&dial, VIEWER_TOKEN, body.clone());
    assert_eq!(status, 403);
    let (status, forced) = put_json(&dial, OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{forced}");
    assert_eq!(forced["blue_percent"], 0.0);
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=5", server.url));
    let last = &audit["entries"][0];
    assert_eq!(last["action"], "dial");
    assert!(last["reason"].as_str().unwrap().contains("[forced: insufficient_capacity"), "{last}");
}
