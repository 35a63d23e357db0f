//! Loss-less drain steps on the real binary, with a real edge and a real Router subscribed:
//! every step is freeze -> switch -> unfreeze in the audit, the edge gate refuses writes of
//! frozen users with 503 + Retry-After while reads go on, a subscriber that never applies the
//! freeze holds the step until the window and the step aborts back with no unit changed owner,
//! and a freeze survives `kill -9` of the coordinator.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::gateway::Edge;
use common::*;
use serde_json::{Value, json};
use tidegate::client::{Identity, Router, RouterOptions};

const CONFIG: &str = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n";

/// Posts healthy outcomes for both zones every 50 ms, so the maintenance guard passes.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Feeder {
    fn start(url: &str) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, url) = (Arc::clone(&stop), url.to_owned());
        let thread = std::thread::spawn(move || {
            let agent = agent();
            while !s.load(Ordering::SeqCst) {
                let body = json!([
                    {"zone": "az-b", "color": "blue", "ok": 100, "error": 0},
                    {"zone": "az-a", "color": "green", "ok": 100, "error": 0}
                ]);
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Feeder { stop, thread: Some(thread) }
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

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("tidegate.toml");
    let extra = format!("{CONFIG}[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    config
}

fn router(url: &str, id: &str, acknowledge: bool) -> Router {
    let identity =
        Identity { subscriber_id: id.into(), zone: "az-b".into(), kind: "service".into() };
    let options =
        RouterOptions { token: Some(OPERATOR_TOKEN.into()), acknowledge, ..Default::default() };
    let router = Router::connect(url, identity, options).unwrap();
    assert!(router.wait_for_version(1, Duration::from_secs(10)), "{id} got no table");
    router
}

fn start_drain(url: &str, window: &str) -> Value {
    let (status, body) = post_json(
        &format!("{url}/v1/drains"),
        OPERATOR_TOKEN,
        json!({
            "zone": "az-b", "target_percent": 30, "step_percent": 10, "interval": "200ms",
            "freeze": true, "freeze_window": window,
            "guard": {"max_error_rate": 0.02, "min_requests": 10, "breaches": 2, "on_breach": "pause"},
            "reason": "loss-less drain test"
        }),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["freeze"]["enabled"], true, "{body}");
    body
}

fn drain(url: &str) -> Value {
    get_json(&format!("{url}/v1/drains/1")).1
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    assert!(wait_until(timeout, &mut check), "timed out waiting for {what}");
}

/// The drain's audited actions, oldest first.
fn drain_actions(url: &str) -> Vec<String> {
    audit_by(url, "drain:1").into_iter().map(|(a, _)| a).filter(|a| a != "drain_hold").collect()
}

/// `(status, Retry-After, x-tidegate-refusal)` of a gate check for `user` with `method`.
fn gate(edge: &Edge, method: &str, user: &str) -> (u16, Option<String>, Option<String>) {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let response = agent
        .get(&format!("{}/v1/gate/orders", edge.url))
        .header("x-user-id", user)
        .header("x-original-method", method)
        .header("x-tidegate-token", OPERATOR_TOKEN)
        .call()
        .expect("gate answered");
    let header =
        |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    (response.status().as_u16(), header("retry-after"), header("x-tidegate-refusal"))
}

/// A user whose unit is in the (comma-separated ranges) `units`, and one whose unit is not.
fn users_in_and_out(router: &Router, units: &str) -> (String, String) {
    let set = tidegate::core::UnitSet::parse(units, 100).unwrap();
    let pick = |inside: bool| {
        (0..100_000)
            .map(|i| format!("user-{i}"))
            .find(|u| set.contains(router.tag(u).unwrap().unit) == inside)
            .unwrap()
    };
    (pick(true), pick(false))
}

#[test]
fn every_step_freezes_switches_and_unfreezes_and_the_edge_refuses_only_frozen_writes() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config, &dir.path().join("data"));
    let _feeder = Feeder::start(&server.url);
    let edge = Edge::start(&config, &server.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&server.url, "orders-1", true);
    std::thread::sleep(Duration::from_millis(1200)); // one health window of outcomes
    start_drain(&server.url, "20s");
    wait_for("the drain to complete", Duration::from_secs(30), || {
        drain(&server.url)["state"] == "completed"
    });
    let done = drain(&server.url);
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(table["blue_units"], 30, "{table}");
    assert_eq!(table["frozen"], json!({}), "nothing stays frozen: {table}");
    // Two steps (50 -> 40 -> 30), each three logged phases, in order.
    let actions = drain_actions(&server.url);
    let phases: Vec<&str> =
        actions.iter().map(String::as_str).filter(|a| *a != "drain_start").collect();
    assert_eq!(
        phases,
        [
            "drain_freeze",
            "drain_step",
            "drain_unfreeze",
            "drain_freeze",
            "drain_step",
            "drain_unfreeze"
        ],
        "{actions:?}"
    );
    let finished = done["freeze"]["finished"].as_array().unwrap();
    assert_eq!(finished.len(), 2, "{done}");
    let windows: Vec<u64> = finished.iter().map(|f| f["window_ms"].as_u64().unwrap()).collect();
    let switch_after: Vec<u64> =
        finished.iter().map(|f| f["switch_after_ms"].as_u64().unwrap()).collect();
    println!("freeze windows {windows:?} ms, freeze applied everywhere after {switch_after:?} ms");
    for f in finished {
        assert!(f["note"].is_null(), "{f}");
        assert_eq!(f["units"], 10);
    }
    drop(watcher);
    // `tidegate drain status` shows the phases and each step's freeze.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["drain", "status", "1"])
        .env("TIDEGATE_URL", &server.url)
        .env("TIDEGATE_TOKEN", OPERATOR_TOKEN)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{status}{}", String::from_utf8_lossy(&output.stderr));
    assert!(status.contains("loss-less steps: freeze, switch, unfreeze"), "{status}");
    assert!(status.contains("step 2: 10 units frozen"), "{status}");

    // A subscriber that never acknowledges holds the next move's freeze: the edge refuses the
    // frozen users' writes meanwhile, and the step aborts back at the window.
    let stuck = router(&server.url, "stuck-1", false);
    let (status, body) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({
            "zone": "az-b", "target_percent": 20, "step_percent": 10, "interval": "200ms",
            "freeze": true, "freeze_window": "3s",
            "guard": {"max_error_rate": 0.02, "min_requests": 10, "breaches": 2, "on_breach": "pause"},
            "reason": "held by a stuck subscriber"
        }),
    );
    assert_eq!(status, 201, "{body}");
    let url2 = format!("{}/v1/drains/2", server.url);
    wait_for("the freeze", Duration::from_secs(10), || {
        get_json(&url2).1["freeze"]["current"]["phase"] == "freezing"
    });
    let frozen_at = Instant::now();
    let held = get_json(&url2).1;
    let units = held["freeze"]["current"]["units"].as_str().unwrap().to_owned();
    assert_eq!(units, "20-29", "the 10 units 30 -> 20 blue moves: {held}");
    let frozen_version = held["freeze"]["current"]["frozen_version"].as_u64().unwrap();
    edge.wait_for_version(frozen_version);
    let (inside, outside) = users_in_and_out(&stuck, &units);
    let before: Vec<Value> =
        get_json(&format!("{}/v1/routing", server.url)).1["unit_map"].as_array().unwrap().clone();
    // Writes of frozen users wait; their reads and every other user's writes go on.
    let (status, retry, refusal) = gate(&edge, "POST", &inside);
    assert_eq!((status, refusal.as_deref()), (503, Some("frozen")));
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(gate(&edge, "GET", &inside).0, 200);
    assert_eq!(gate(&edge, "POST", &outside).0, 200);
    assert_eq!(gate(&edge, "DELETE", &inside).0, 503);
    // The write check over HTTP answers the same, with every answer.
    let check = |user: &str, zone: &str, version: Option<u64>| {
        let mut path = format!("{}/v1/write-check?user_id={user}&zone={zone}", edge.url);
        if let Some(v) = version {
            path.push_str(&format!("&version={v}"));
        }
        let (status, body) = get_json(&path);
        (status, body["answer"].as_str().or(body["error"].as_str()).unwrap_or("").to_owned(), body)
    };
    let owner_of = |user: &str| stuck.tag(user).unwrap().zone;
    let (status, answer, body) = check(&inside, &owner_of(&inside), Some(frozen_version));
    assert_eq!((status, answer.as_str()), (503, "frozen"), "{body}");
    let (status, answer, body) = check(&outside, &owner_of(&outside), Some(frozen_version));
    assert_eq!((status, answer.as_str()), (200, "owned"), "{body}");
    let other = if owner_of(&outside) == "az-a" { "az-b" } else { "az-a" };
    let (status, answer, body) = check(&outside, other, None);
    assert_eq!((status, answer.as_str()), (421, "misrouted"), "{body}");
    assert_eq!(body["owner_zone"], json!(owner_of(&outside)));
    let (status, answer, body) = check(&outside, &owner_of(&outside), Some(frozen_version + 5));
    assert_eq!((status, answer.as_str()), (503, "behind"), "{body}");
    assert_eq!(check(&outside, "az-q", None).0, 400);
    wait_for("the freeze to abort at its window", Duration::from_secs(15), || {
        get_json(&url2).1["state"] == "paused"
    });
    let aborted_after = frozen_at.elapsed();
    let paused = get_json(&url2).1;
    println!("a stuck subscriber held the freeze {} ms (window 3 s)", aborted_after.as_millis());
    assert!(aborted_after >= Duration::from_millis(2500), "aborted early: {paused}");
    assert_eq!(paused["pause_cause"], "freeze", "{paused}");
    let reason = paused["hold_reason"].as_str().unwrap();
    assert!(reason.contains("stuck-1"), "the hold names the stuck subscriber: {reason}");
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(table["blue_units"], 30, "no unit changed owner: {table}");
    assert_eq!(table["unit_map"].as_array().unwrap(), &before);
    assert_eq!(table["frozen"], json!({}));
    edge.wait_for_version(table["version"].as_u64().unwrap());
    assert_eq!(gate(&edge, "POST", &inside).0, 200, "writes resume after the abort");
    drop(stuck);
}

#[test]
fn a_freeze_survives_kill_9_and_the_restarted_coordinator_finishes_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let data = dir.path().join("data");
    let server = Server::start(&config, &data);
    let feeder = Feeder::start(&server.url);
    let stuck = router(&server.url, "stuck-1", false);
    std::thread::sleep(Duration::from_millis(1200));
    start_drain(&server.url, "60s");
    wait_for("the freeze", Duration::from_secs(10), || {
        drain(&server.url)["freeze"]["current"]["phase"] == "freezing"
    });
    let (_, before) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(before["frozen"], json!({"default": "40-49"}), "{before}");
    drop(feeder);
    let port = server.port();
    server.kill9();
    drop(stuck);
    let server = Server::start_at(&config, &data, port);
    let (_, after) = get_json(&format!("{}/v1/routing", server.url));
    // Replayed from the log: still frozen, nothing switched.
    assert_eq!(after["frozen"], before["frozen"], "{after}");
    assert_eq!(after["blue_units"], 50);
    let _feeder = Feeder::start(&server.url);
    // The restarted coordinator has no live subscriber left behind: the step goes on.
    wait_for("the drain to complete after the restart", Duration::from_secs(30), || {
        drain(&server.url)["state"] == "completed"
    });
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(table["blue_units"], 30);
    assert_eq!(table["frozen"], json!({}));
    let actions = drain_actions(&server.url);
    assert_eq!(actions.iter().filter(|a| *a == "drain_freeze").count(), 2, "{actions:?}");
    assert_eq!(actions.iter().filter(|a| *a == "drain_unfreeze").count(), 2, "{actions:?}");
}

/// The same three phases for a drain of one zone among three (issue 22 meets issue 23): each
/// slice of az-c is frozen, switched to az-a and az-b once every live subscriber applied the
/// freeze, and unfrozen once every one applied the switch; a stuck subscriber holds a slice
/// frozen (the edge refuses only those users' writes) until the window aborts it back.
#[test]
fn a_lossless_drain_among_three_zones_freezes_each_slice() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!(
        "initial_blue_percent = 50\n{CONFIG}[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n[zones.az-c]\nlane = \"red\"\n"
    );
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let stop = Arc::new(AtomicBool::new(false));
    {
        let (stop, url) = (Arc::clone(&stop), url.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let body = json!([
                    {"zone": "az-b", "color": "blue", "ok": 100},
                    {"zone": "az-a", "color": "green", "ok": 100},
                    {"zone": "az-c", "color": "red", "ok": 100}
                ]);
                let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
    }
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "60-99", "zone": "az-c"}], "expected_version": table["version"], "reason": "az-c"}),
    );
    assert_eq!(status, 200, "{body}");
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    let watcher = router(&url, "orders-1", true);
    std::thread::sleep(Duration::from_millis(1200));
    let start = |target: u32, window: &str| {
        let (status, body) = post_json(
            &format!("{url}/v1/drains"),
            OPERATOR_TOKEN,
            json!({
                "zone": "az-c", "target_percent": target, "step_percent": 10, "interval": "200ms",
                "to": ["az-a", "az-b"], "freeze": true, "freeze_window": window,
                "guard": {"max_error_rate": 0.02, "min_requests": 10, "breaches": 2},
                "reason": "loss-less az-c"
            }),
        );
        assert_eq!(status, 201, "{body}");
        body["id"].as_u64().unwrap()
    };
    let id = start(20, "20s");
    let drain_of = |id: u64| get_json(&format!("{url}/v1/drains/{id}")).1;
    wait_for("the drain to complete", Duration::from_secs(30), || {
        drain_of(id)["state"] == "completed"
    });
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(table["frozen"], json!({}), "nothing stays frozen: {table}");
    assert_eq!(table["zones"][2]["units"], 20, "{table}");
    let phases: Vec<String> =
        drain_actions(&url).into_iter().filter(|a| a != "drain_start").collect();
    assert_eq!(
        phases,
        [
            "drain_freeze",
            "drain_step",
            "drain_unfreeze",
            "drain_freeze",
            "drain_step",
            "drain_unfreeze"
        ],
        "two slices, three phases each"
    );
    let finished = drain_of(id)["freeze"]["finished"].clone();
    println!("zone drain freezes: {finished}");
    assert_eq!(finished.as_array().unwrap().len(), 2);

    // A subscriber that never applies anything holds the next slice frozen.
    let stuck = router(&url, "stuck-1", false);
    let id = start(0, "3s");
    wait_for("the freeze", Duration::from_secs(10), || {
        drain_of(id)["freeze"]["current"]["phase"] == "freezing"
    });
    let held = drain_of(id);
    let current = &held["freeze"]["current"];
    assert_eq!(current["units"], "80-89", "az-c's lowest 10 units: {held}");
    let moves = current["moves"].as_array().unwrap();
    assert_eq!(moves.len(), 2, "{held}");
    edge.wait_for_version(current["frozen_version"].as_u64().unwrap());
    let (inside, outside) = users_in_and_out(&stuck, "80-89");
    let (status, retry, refusal) = gate(&edge, "POST", &inside);
    assert_eq!((status, retry.as_deref(), refusal.as_deref()), (503, Some("1"), Some("frozen")));
    assert_eq!(gate(&edge, "GET", &inside).0, 200, "reads go on");
    assert_eq!(gate(&edge, "POST", &outside).0, 200, "other users write");
    wait_for("the freeze to abort", Duration::from_secs(15), || drain_of(id)["state"] == "paused");
    let paused = drain_of(id);
    assert!(paused["hold_reason"].as_str().unwrap().contains("stuck-1"), "{paused}");
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(table["zones"][2]["units"], 20, "no unit changed owner: {table}");
    assert_eq!(table["frozen"], json!({}));
    stop.store(true, Ordering::SeqCst);
    drop((stuck, watcher));
}

/// `(status, x-tidegate-refusal)` of a gate check for `user` with `method`, for a call of
/// `service`.
fn gate_for(edge: &Edge, method: &str, user: &str, service: &str) -> (u16, Option<String>) {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let response = agent
        .get(&format!("{}/v1/gate/orders", edge.url))
        .header("x-user-id", user)
        .header("x-original-method", method)
        .header("x-tidegate-service", service)
        .header("x-tidegate-token", OPERATOR_TOKEN)
        .call()
        .expect("gate answered");
    let refusal = response
        .headers()
        .get("x-tidegate-refusal")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), refusal)
}

/// Runs the CLI against `url` as the operator with a 20 s freeze window; asserts it succeeded
/// and returns what it printed.
fn cli_ok(url: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(args)
        .args(["--freeze-window", "20s"])
        .env("TIDEGATE_URL", url)
        .env("TIDEGATE_TOKEN", OPERATOR_TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    said
}

/// A loss-less channel change (issue 24 on the rules of issue 23), on the real binary with a real
/// edge and Routers subscribed. Widening `orders-v2` from units 40-44 to 40-49 (green) freezes
/// exactly the `orders` writes of units 45-49, which blue owns by the map: the Router and the
/// edge gate answer `frozen`, while those users' `billing` writes and every other user's go on.
/// The change switches once every live subscriber has the freeze and unfreezes once every one
/// has the switch: three audited phases. A subscriber that never applies the freeze holds the
/// change until its window, and the change is undone with the channel as it was, naming it.
#[test]
fn a_loss_less_channel_change_freezes_only_its_writes_and_a_stuck_subscriber_undoes_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&url, "orders-1", true);
    let put = |units: &str, freeze: Option<&str>| {
        let version = get_json(&format!("{url}/v1/routing")).1["version"].clone();
        let mut body = json!({"services": ["orders"], "zone": "green", "units": units,
                              "expected_version": version, "reason": "orders 2.4 release"});
        if let Some(window) = freeze {
            body["freeze"] = json!(true);
            body["freeze_window"] = json!(window);
        }
        put_json(&format!("{url}/v1/channels/orders-v2"), OPERATOR_TOKEN, body)
    };
    let (status, body) = put("40-44", None);
    assert_eq!(status, 200, "{body}");
    let (moving, other) = users_in_and_out(&watcher, "45-49");
    let blue = tidegate::core::ZoneId::BLUE;
    let green = tidegate::core::ZoneId(1);
    let check = |r: &Router, user: &str, service: &str, zone| {
        r.check_write_for(None, service, user, zone, None).unwrap().check.as_str()
    };
    assert_eq!(check(&watcher, &moving, "orders", blue), "owned", "blue owns 45-49 by the map");

    // The dry run says what the change would freeze.
    let version = get_json(&format!("{url}/v1/routing")).1["version"].clone();
    let (status, dry) = put_json(
        &format!("{url}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "green", "units": "40-49", "freeze": true,
               "expected_version": version, "reason": "preview", "dry_run": true}),
    );
    assert_eq!(status, 200, "{dry}");
    assert_eq!(
        (dry["freeze"]["units"].as_str(), &dry["freeze"]["services"]),
        (Some("45-49"), &json!(["orders"]))
    );

    // Loss-less, every subscriber applying: freeze, switch, unfreeze.
    let started = Instant::now();
    let (status, body) = put("40-49", Some("10s"));
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        (body["change"]["phase"].as_str(), body["change"]["units"].as_str()),
        (Some("freezing"), Some("45-49")),
        "{body}"
    );
    wait_for("the change to end", Duration::from_secs(10), || {
        get_json(&format!("{url}/v1/channels")).1["change"].is_null()
    });
    println!("a channel change with 2 live subscribers took {} ms", started.elapsed().as_millis());
    let (_, channel) = get_json(&format!("{url}/v1/channels/orders-v2"));
    assert_eq!(channel["units"], "40-49", "{channel}");
    let phases = audit_by(&url, "channels");
    let actions: Vec<&str> = phases.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["channel_switch", "channel_unfreeze"], "{phases:?}");
    assert!(phases[0].1.contains("every live subscriber (2 of 2)"), "{phases:?}");
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert!(table["channel_freeze"].is_null(), "{table}");
    assert!(watcher.wait_for_version(table["version"].as_u64().unwrap(), Duration::from_secs(5)));
    assert_eq!(check(&watcher, &moving, "orders", green), "owned");
    assert_eq!(check(&watcher, &moving, "orders", blue), "misrouted");

    // A subscriber that never applies the freeze: narrowing back to 40-44 holds in `freezing`.
    let stuck = router(&url, "stuck-1", false);
    let (status, body) = put("40-44", Some("3s"));
    assert_eq!(status, 202, "{body}");
    let frozen_at = Instant::now();
    let frozen_version = body["change"]["frozen_version"].as_u64().unwrap();
    edge.wait_for_version(frozen_version);
    assert!(watcher.wait_for_version(frozen_version, Duration::from_secs(5)));
    // Frozen: the moving user's orders writes, at the Router and the edge gate, in either zone;
    // their reads, their billing writes and other users' writes go on.
    assert_eq!(check(&watcher, &moving, "orders", green), "frozen");
    assert_eq!(check(&watcher, &moving, "orders", blue), "frozen");
    assert_eq!(check(&watcher, &moving, "billing", blue), "owned");
    assert_eq!(check(&watcher, &other, "orders", watcher.tag(&other).unwrap().color), "owned");
    assert_eq!(gate_for(&edge, "POST", &moving, "orders"), (503, Some("frozen".into())));
    assert_eq!(gate_for(&edge, "GET", &moving, "orders").0, 200);
    assert_eq!(gate_for(&edge, "POST", &moving, "billing").0, 200);
    assert_eq!(gate_for(&edge, "POST", &other, "orders").0, 200);
    // OFREP says so in its metadata, for the service's context only.
    let ofrep = |user: &str, service: &str| {
        let body = json!({"context": {"targetingKey": user, "service": service}});
        let (status, v) = post_json(
            &format!("{url}/ofrep/v1/evaluate/flags/tidegate-color"),
            OPERATOR_TOKEN,
            body,
        );
        assert_eq!(status, 200, "{v}");
        v["metadata"]["writeFrozen"].as_bool().unwrap_or(false)
    };
    assert!(ofrep(&moving, "orders"), "OFREP: the moving user's orders writes are frozen");
    assert!(!ofrep(&moving, "billing"));
    assert!(!ofrep(&other, "orders"));
    // The channel takes no other change meanwhile.
    let (status, body) = put("40-41", None);
    assert_eq!((status, body["error"].as_str()), (409, Some("channel_changing")), "{body}");
    assert_eq!(get_json(&format!("{url}/v1/channels")).1["change"]["phase"], "freezing");
    wait_for("the freeze to be undone at its window", Duration::from_secs(15), || {
        get_json(&format!("{url}/v1/channels")).1["change"].is_null()
    });
    let held = frozen_at.elapsed();
    println!("a stuck subscriber held the channel freeze {} ms (window 3 s)", held.as_millis());
    assert!(held >= Duration::from_millis(2500), "undone early");
    let (action, reason) = audit_by(&url, "channels").pop().unwrap();
    assert_eq!(action, "channel_unfreeze");
    assert!(reason.contains("stuck-1") && reason.contains("the channel is unchanged"), "{reason}");
    let (_, channel) = get_json(&format!("{url}/v1/channels/orders-v2"));
    assert_eq!(channel["units"], "40-49", "the channel is as it was: {channel}");
    let version = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    edge.wait_for_version(version);
    assert_eq!(gate_for(&edge, "POST", &moving, "orders").0, 200, "writes resume");
    drop(stuck);

    // The CLI: a loss-less delete says what it froze, waits for the change to end (the dropped
    // stuck subscriber stops counting a few seconds after it left) and says how it ended.
    let said = cli_ok(
        &url,
        &["channels", "delete", "orders-v2", "--reason", "orders 2.4 released", "--freeze"],
    );
    assert!(said.contains("channel orders-v2 delete in progress (freezing): writes of orders frozen for units 40-49"), "{said}");
    assert!(said.contains("channel orders-v2's writes unfrozen after"), "{said}");
    assert_eq!(get_json(&format!("{url}/v1/channels/orders-v2")).0, 404);
    println!("{said}");
    drop(watcher);
}

/// Loss-less dial and unit moves (issue 23): `PUT /v1/dial` and `PUT /v1/units` with `freeze`
/// freeze exactly the units that change owner, move them once every live subscriber has the
/// freeze and unfreeze once every one has the move: three audited phases. Nothing else changes a
/// map meanwhile (409 `units_changing`), and a subscriber that never applies the freeze holds it
/// until the window, when it is undone with no unit moved, naming the subscriber.
#[test]
fn loss_less_dial_and_unit_moves_freeze_what_they_move_and_a_stuck_subscriber_undoes_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&url, "orders-1", true);
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].clone();
    let changes = || get_json(&format!("{url}/v1/changes")).1;

    // The dial, loss-lessly: 50 -> 40 % blue freezes units 40-49, then moves them.
    let started = Instant::now();
    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 40, "freeze": true, "freeze_window": "10s",
               "expected_version": version(), "reason": "loss-less dial"}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["change"]["frozen"], json!({"default": "40-49"}), "{body}");
    assert_eq!(body["blue_units"], 50, "nothing moved at the freeze");
    wait_for("the dial move to end", Duration::from_secs(10), || changes()["units"].is_null());
    println!(
        "a loss-less dial move with 2 live subscribers took {} ms",
        started.elapsed().as_millis()
    );
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(40), &json!({})));
    let actions: Vec<String> = audit_by(&url, "units").into_iter().map(|(a, _)| a).collect();
    assert_eq!(actions, ["units_switch", "units_unfreeze"]);
    let (moving, _) = users_in_and_out(&watcher, "40-49");
    assert!(watcher.wait_for_version(table["version"].as_u64().unwrap(), Duration::from_secs(5)));
    let green = tidegate::core::ZoneId(1);
    assert_eq!(watcher.check_write(&moving, green, None).unwrap().check.as_str(), "owned");

    // A unit move held by a subscriber that never applies the freeze: undone at its window.
    let stuck = router(&url, "stuck-1", false);
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-9", "zone": "green"}], "freeze": true, "freeze_window": "3s",
               "expected_version": version(), "reason": "held by a stuck subscriber"}),
    );
    assert_eq!(status, 202, "{body}");
    let frozen_at = Instant::now();
    assert_eq!(
        (body["moved_units"].as_u64(), &body["change"]["frozen"]),
        (Some(0), &json!({"default": "0-9"}))
    );
    let frozen_version = body["change"]["frozen_version"].as_u64().unwrap();
    edge.wait_for_version(frozen_version);
    let (inside, outside) = users_in_and_out(&watcher, "0-9");
    assert_eq!(gate(&edge, "POST", &inside).2.as_deref(), Some("frozen"));
    assert_eq!(gate(&edge, "GET", &inside).0, 200);
    assert_eq!(gate(&edge, "POST", &outside).0, 200);
    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 30, "expected_version": version(), "reason": "too early"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("units_changing")), "{body}");
    wait_for("the move to be undone", Duration::from_secs(15), || changes()["units"].is_null());
    let held = frozen_at.elapsed();
    println!("a stuck subscriber held the unit move {} ms (window 3 s)", held.as_millis());
    assert!(held >= Duration::from_millis(2500));
    let (action, reason) = audit_by(&url, "units").pop().unwrap();
    assert_eq!(action, "units_unfreeze");
    assert!(reason.contains("stuck-1") && reason.contains("no unit changed owner"), "{reason}");
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(40), &json!({})), "{table}");
    edge.wait_for_version(table["version"].as_u64().unwrap());
    assert_eq!(gate(&edge, "POST", &inside).0, 200, "writes resume");
    drop(stuck);

    // The CLI: a loss-less dial move says what it froze, waits, and says how it ended.
    let said =
        cli_ok(&url, &["dial", "set", "30", "--reason", "loss-less from the CLI", "--freeze"]);
    assert!(said.contains("units 30-39 in default frozen for a loss-less move"), "{said}");
    assert!(said.contains("the moved units unfrozen after"), "{said}");
    assert_eq!(get_json(&format!("{url}/v1/routing")).1["blue_units"], 30);
    println!("{said}");

    // An evacuation chooses: speed first by default, loss-less with `freeze`.
    let (status, body) = post_json(
        &format!("{url}/v1/units/evacuate"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "freeze": true, "expected_version": version(),
               "reason": "evacuate az-b loss-lessly"}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["change"]["frozen"], json!({"default": "0-29"}), "{body}");
    wait_for("the evacuation to end", Duration::from_secs(10), || changes()["units"].is_null());
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(0), &json!({})));
    drop(watcher);
}

/// A plan's zone moves are loss-less when the plan says so (`freeze_window`, issue 23): its
/// drain step runs as a drain started with `freeze`, every step freeze -> switch -> unfreeze;
/// the dry run says so, and the plan shows its window.
#[test]
fn a_plans_drain_step_freezes_each_step_when_the_plan_has_a_freeze_window() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!("{CONFIG}interval = \"200ms\"\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let _feeder = Feeder::start(&url);
    let watcher = router(&url, "orders-1", true);
    std::thread::sleep(Duration::from_millis(1200)); // one health window of outcomes
    let version = get_json(&format!("{url}/v1/routing")).1["version"].clone();
    let plan = json!({
        "expected_version": version, "reason": "maintenance of az-b, loss-less",
        "rto": "5m", "freeze_window": "10s",
        "steps": [{"type": "drain", "zone": "az-b", "to_percent": 30}]
    });
    let (status, stored) =
        put_json(&format!("{url}/v1/plans/az-b-maintenance"), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{stored}");
    let (_, shown) = get_json(&format!("{url}/v1/plans/az-b-maintenance"));
    assert_eq!(shown["freeze_window"], "10s", "{shown}");
    let (status, dry) =
        post_json(&format!("{url}/v1/plans/az-b-maintenance/dry-run"), OPERATOR_TOKEN, json!({}));
    assert_eq!(status, 200, "{dry}");
    let said = dry["steps"][0]["description"].as_str().unwrap();
    assert!(said.contains("loss-less: each step freezes its units"), "{said}");
    let (status, body) = post_json(
        &format!("{url}/v1/plans/az-b-maintenance/run"),
        OPERATOR_TOKEN,
        json!({"reason": "rack maintenance"}),
    );
    assert_eq!(status, 201, "{body}");
    let run = body["id"].as_u64().unwrap();
    wait_for("the run to complete", Duration::from_secs(30), || {
        get_json(&format!("{url}/v1/plans/az-b-maintenance/runs/{run}")).1["state"] == "completed"
    });
    let (_, table) = get_json(&format!("{url}/v1/routing"));
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(30), &json!({})));
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1000"));
    let phases: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| ["drain_freeze", "drain_step", "drain_unfreeze"].contains(a))
        .collect();
    let step = ["drain_freeze", "drain_step", "drain_unfreeze"];
    assert_eq!(phases, [step, step].concat(), "50 -> 40 -> 30, each step in three phases");
    drop(watcher);
}

/// A staged unit move and a staged channel change survive `kill -9` of the coordinator in
/// `freezing`: the restarted coordinator replays the freeze from the log (nothing switched, the
/// same units frozen), waits for the previous subscribers to reconnect, is held by the stuck one
/// when it is back until its lease has run out (or until it is gone), and switches and unfreezes
/// each once. The audit shows one switch and one unfreeze per change.
#[test]
fn staged_unit_and_channel_changes_survive_kill_9_in_freezing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let data = dir.path().join("data");
    let server = Server::start(&config, &data);
    let url = server.url.clone();
    let version = |url: &str| get_json(&format!("{url}/v1/routing")).1["version"].clone();
    let stuck = router(&url, "stuck-1", false);

    // A unit move held in `freezing` by a subscriber that never applies it.
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-9", "zone": "green"}], "freeze": true, "freeze_window": "60s",
               "expected_version": version(&url), "reason": "move 0-9 loss-lessly"}),
    );
    assert_eq!(status, 202, "{body}");
    let (_, before) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(
        (before["frozen"].clone(), before["blue_units"].clone()),
        (json!({"default": "0-9"}), json!(50))
    );
    let port = server.port();
    server.kill9();
    let server = Server::start_at(&config, &data, port);
    let (_, replayed) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(replayed["frozen"], before["frozen"], "the freeze was not replayed: {replayed}");
    assert_eq!(replayed["blue_units"], 50, "a unit switched before its freeze converged");
    // Nobody is connected to the new process at first, yet the barrier does not pass at once: a
    // replayed freeze waits for the previous subscribers to reconnect (10 s). The stuck Router
    // comes back, keeps its lease and never acknowledges: it holds the change until its lease
    // has provably run out since the restarted coordinator saw the freeze (lease + skew + the
    // longest write, 8.5 s), no longer: by then it has applied the freeze or answers
    // `unconfirmed`, and any write it let through has committed.
    std::thread::sleep(Duration::from_secs(5));
    let (_, held) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!((held["blue_units"].as_u64(), &held["frozen"]), (Some(50), &before["frozen"]));
    let (_, subscribers) = get_json(&format!("{}/v1/subscribers", server.url));
    assert!(subscribers.to_string().contains("stuck-1"), "stuck-1 is not back: {subscribers}");
    wait_for("the unit move to end after the restart", Duration::from_secs(30), || {
        get_json(&format!("{}/v1/changes", server.url)).1["units"].is_null()
    });
    let (_, subscribers) = get_json(&format!("{}/v1/subscribers", server.url));
    assert!(subscribers.to_string().contains("stuck-1"), "stuck-1 left early: {subscribers}");
    drop(stuck);
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(40), &json!({})), "{table}");
    let audit = audit_by(&server.url, "units");
    let switch = audit.iter().find(|(a, _)| a == "units_switch").map(|(_, r)| r.clone());
    assert!(
        switch
            .as_deref()
            .is_some_and(|r| r.contains("whose leases ran out") && r.contains("stuck-1")),
        "the switch names the subscriber it stopped waiting for: {switch:?}"
    );
    let actions: Vec<String> = audit.into_iter().map(|(a, _)| a).collect();
    assert_eq!(actions, ["units_switch", "units_unfreeze"], "each phase once");

    // A channel change held the same way.
    let url = server.url.clone();
    let stuck = router(&url, "stuck-2", false);
    let (status, body) = put_json(
        &format!("{url}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "blue", "units": "40-44", "freeze": true,
               "freeze_window": "60s", "expected_version": version(&url),
               "reason": "orders 2.4 to blue loss-lessly"}),
    );
    assert_eq!(status, 202, "{body}");
    let (_, before) = get_json(&format!("{url}/v1/routing"));
    assert!(!before["channel_freeze"].is_null(), "{before}");
    let port = server.port();
    server.kill9();
    let server = Server::start_at(&config, &data, port);
    let url = server.url.clone();
    let (_, replayed) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(replayed["channel_freeze"], before["channel_freeze"], "{replayed}");
    assert!(
        get_json(&format!("{url}/v1/channels/orders-v2")).0 == 404,
        "the channel switched before its freeze converged"
    );
    drop(stuck);
    wait_for("the channel change to end after the restart", Duration::from_secs(30), || {
        get_json(&format!("{url}/v1/channels")).1["change"].is_null()
    });
    let (status, channel) = get_json(&format!("{url}/v1/channels/orders-v2"));
    assert_eq!((status, channel["units"].as_str()), (200, Some("40-44")), "{channel}");
    assert!(get_json(&format!("{url}/v1/routing")).1["channel_freeze"].is_null());
    let actions: Vec<String> = audit_by(&url, "channels").into_iter().map(|(a, _)| a).collect();
    assert_eq!(actions, ["channel_switch", "channel_unfreeze"], "each phase once");
}

/// `[freeze] by_default` (issue 23): a dial move, a unit move and a maintenance drain that do
/// not say `freeze` are loss-less (the dial and the move answer 202 and run three audited phases,
/// the drain's steps freeze); `"freeze": false` and an evacuation (speed first) move at once. The
/// control, the same dial on a coordinator without the setting, moves at once.
#[test]
fn with_freeze_by_default_moves_freeze_unless_told_not_to() {
    let started = Instant::now();
    let routing = |url: &str| get_json(&format!("{url}/v1/routing")).1;
    let dial = |url: &str, body: Value| put_json(&format!("{url}/v1/dial"), OPERATOR_TOKEN, body);

    // Control: with `by_default = false` a dial moves at once, in one version.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!("{CONFIG}[freeze]\nby_default = false\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let (status, body) = dial(
        &server.url,
        json!({"blue_percent": 40, "expected_version": 1, "reason": "control: at once"}),
    );
    assert_eq!((status, &body["blue_units"], &body["version"]), (200, &json!(40), &json!(2)));
    assert!(body["change"].is_null() && body["loss_less"].is_null(), "{body}");
    drop(server);

    // The embedded default (only the window is configured here).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!("{CONFIG}[freeze]\nwindow = \"20s\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let _feeder = Feeder::start(&url);
    let subscriber = router(&url, "sub-default", true);
    let settled = |url: &str, blue: u64| {
        wait_for(&format!("blue_units {blue} and no freeze"), Duration::from_secs(20), || {
            let t = routing(url);
            t["blue_units"] == blue && t["frozen"] == json!({})
        });
    };

    // 1. A dial that says nothing about freezing: frozen, switched, unfrozen, and answered
    // once it has ended, with the table after it (the contract of an unfrozen dial).
    let asked = Instant::now();
    let (status, body) = dial(
        &url,
        json!({"blue_percent": 40, "expected_version": 1, "reason": "frozen by default"}),
    );
    let took = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["blue_units"], &body["frozen"]), (&json!(40), &json!({})), "{body}");
    assert_eq!(body["loss_less"]["by_default"], true, "{body}");
    assert_eq!(body["loss_less"]["frozen_version"], 2, "{body}");
    assert_eq!(body["loss_less"]["unfrozen_version"], 4, "{body}");
    assert_eq!(body["version"], 4, "freeze, switch, unfreeze: {body}");
    assert!(body["change"].is_null(), "{body}");
    let phases: Vec<String> = audit_by(&url, "units").into_iter().map(|(a, _)| a).collect();
    assert_eq!(phases, ["units_switch", "units_unfreeze"]);
    println!(
        "default-frozen dial answered in {} ms (frozen for {} ms)",
        took.as_millis(),
        body["loss_less"]["frozen_ms"]
    );
    assert!(subscriber.wait_for_version(4, Duration::from_secs(10)));

    // What the default costs a caller: ten dials frozen by default against ten at once, in
    // alternating rounds, with the acknowledging Router connected.
    let (mut frozen, mut at_once) = (Vec::new(), Vec::new());
    let mut version = 4;
    for round in 0..20 {
        // Frozen by default 40 -> 45, at once 45 -> 40: every dial moves five units.
        let percent = if round % 2 == 0 { 45 } else { 40 };
        let mut request =
            json!({"blue_percent": percent, "expected_version": version, "reason": "cost"});
        if round % 2 == 1 {
            request["freeze"] = json!(false);
        }
        let asked = Instant::now();
        let (status, body) = dial(&url, request);
        let took = asked.elapsed().as_secs_f64() * 1000.0;
        assert_eq!((status, &body["blue_units"]), (200, &json!(percent)), "{body}");
        let steps = if round % 2 == 1 { 1 } else { 3 };
        assert_eq!(body["version"], version + steps, "{body}");
        version += steps;
        if round % 2 == 1 { at_once.push(took) } else { frozen.push(took) }
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        format!("p50 {:.0} ms (min {:.0}, max {:.0})", v[v.len() / 2], v[0], v[v.len() - 1])
    };
    println!(
        "a dial frozen by default answers in {}; at once in {}",
        spread(&mut frozen),
        spread(&mut at_once)
    );
    assert!(subscriber.wait_for_version(version, Duration::from_secs(10)));

    // 2. `"freeze": false` moves at once; `"freeze": true` answers 202 with the change.
    let (status, body) = dial(
        &url,
        json!({"blue_percent": 45, "freeze": false, "expected_version": version, "reason": "now"}),
    );
    assert_eq!(
        (status, &body["blue_units"], &body["version"]),
        (200, &json!(45), &json!(version + 1))
    );
    let (status, body) = dial(
        &url,
        json!({"blue_percent": 40, "freeze": true, "expected_version": version + 1, "reason": "asked"}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["change"]["moves"][0]["units"], "40-44", "{body}");
    assert_eq!(body["blue_units"], 45, "nothing moved before the freeze: {body}");
    settled(&url, 40);

    // 3. A unit move without `freeze`: frozen too (its window is `[freeze] window`), answered
    // at its end with what it moved.
    let version = routing(&url)["version"].clone();
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-4", "zone": "green"}], "expected_version": version,
               "reason": "move frozen by default"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["moved_units"], &body["frozen"]), (&json!(5), &json!({})), "{body}");
    assert_eq!(
        (&body["unit_map"][0]["units"], &body["unit_map"][0]["lane"]),
        (&json!("0-4"), &json!("green"))
    );
    assert!(
        body["loss_less"]["unfrozen_version"].as_u64()
            > body["loss_less"]["frozen_version"].as_u64()
    );

    // 4. A subscriber that never acknowledges holds a default freeze to its window; the move is
    // undone and the answer says so, naming it: 409 freeze_aborted, nothing moved.
    let deaf = router(&url, "sub-deaf", false);
    let before = routing(&url);
    let asked = Instant::now();
    let (status, body) = dial(
        &url,
        json!({"blue_percent": 30, "freeze_window": "1s", "expected_version": before["version"],
               "reason": "held by a deaf subscriber"}),
    );
    let took = asked.elapsed();
    assert_eq!((status, body["error"].as_str()), (409, Some("freeze_aborted")), "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("sub-deaf") && detail.contains("no unit changed owner"), "{detail}");
    assert!(took >= Duration::from_secs(1), "answered before the window: {took:?}");
    let after = routing(&url);
    assert_eq!((&after["unit_map"], &after["frozen"]), (&before["unit_map"], &json!({})));
    println!("held default freeze answered 409 after {} ms", took.as_millis());
    drop(deaf);
    // Once it has gone, the same dial goes through.
    let version = routing(&url)["version"].clone();
    wait_for("the deaf subscriber to leave", Duration::from_secs(20), || {
        let list = get_json(&format!("{url}/v1/subscribers")).1;
        list["subscribers"].as_array().is_some_and(|s| {
            s.iter().all(|s| s["subscriber_id"] != "sub-deaf" || s["state"] == "stale")
        })
    });
    let (status, body) = dial(
        &url,
        json!({"blue_percent": 30, "expected_version": version, "reason": "once it left"}),
    );
    assert_eq!((status, &body["blue_units"]), (200, &json!(30)), "{body}");
    println!("the same dial once it left: frozen for {} ms", body["loss_less"]["frozen_ms"]);

    // The CLI without --freeze waits for such a move's end too.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["dial", "set", "35", "--reason", "cli, frozen by default"])
        .env("TIDEGATE_URL", &url)
        .env("TIDEGATE_TOKEN", OPERATOR_TOKEN)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    let table = routing(&url);
    assert_eq!((&table["blue_units"], &table["frozen"]), (&json!(35), &json!({})), "{said}");
    assert!(said.contains("loss-less (frozen by default)"), "{said}");
    assert!(said.contains("unfrozen after"), "{said}");
    println!("cli: {said}");

    // 4. A maintenance drain's steps freeze; an evacuation's do not.
    let drain_body = |mode: &str, target: u64| {
        json!({"zone": "az-b", "target_percent": target, "step_percent": 10, "interval": "200ms",
               "mode": mode, "reason": format!("{mode} drain"),
               "guard": {"max_error_rate": 0.5, "min_requests": 10, "breaches": 2, "on_breach": "pause"}})
    };
    let (status, body) =
        post_json(&format!("{url}/v1/drains"), OPERATOR_TOKEN, drain_body("maintenance", 30));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["freeze"]["enabled"], true, "{body}");
    let id = body["id"].as_u64().unwrap();
    let done = wait_until(Duration::from_secs(30), || {
        get_json(&format!("{url}/v1/drains/{id}")).1["state"] == "completed"
    });
    let drain = get_json(&format!("{url}/v1/drains/{id}")).1;
    assert!(done, "the drain did not complete: {drain}");
    let freezes = drain["freeze"]["finished"].as_array().unwrap();
    assert_eq!(freezes.len(), 1, "its one step froze its 5 units: {drain}");
    assert_eq!(freezes[0]["units"], 5, "{drain}");
    let (status, body) =
        post_json(&format!("{url}/v1/drains"), OPERATOR_TOKEN, drain_body("evacuate", 20));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["freeze"]["enabled"], false, "an evacuation is speed first: {body}");
    eprintln!("freeze by default test: {:.1} s", started.elapsed().as_secs_f64());
}

/// A TCP proxy a test can cut: while `cut`, it closes its connections to the coordinator (the
/// coordinator sees the stream end, as when a middlebox or the kernel gives up on it) but keeps
/// the client's side open and silent, and holds new connections without an answer: what a
/// client in a zone cut off by the network sees.
struct CutProxy {
    url: String,
    cut: Arc<AtomicBool>,
}

impl CutProxy {
    fn start(upstream: &str) -> CutProxy {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let cut = Arc::new(AtomicBool::new(false));
        let c = Arc::clone(&cut);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming().map_while(Result::ok) {
                if c.load(Ordering::SeqCst) {
                    held.push(client); // never answered
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                for (mut from, mut to, down) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap(), false),
                    (server.try_clone().unwrap(), client.try_clone().unwrap(), true),
                ] {
                    let (c, server) = (Arc::clone(&c), server.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 8192];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if c.load(Ordering::SeqCst) {
                                // Cut: the coordinator's side goes, the client hears nothing.
                                let _ = server.shutdown(Shutdown::Both);
                                if down {
                                    break;
                                }
                                continue;
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    });
                }
                // The coordinator's side is closed at once when the cut comes, not at its
                // next write (a heartbeat away).
                let (c, server) = (Arc::clone(&c), server);
                std::thread::spawn(move || {
                    while !c.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let _ = server.shutdown(Shutdown::Both);
                });
                held.push(client);
            }
        });
        CutProxy { url, cut }
    }
}

/// Issue 45: a subscriber whose stream is cut (not killed) during a loss-less move. The
/// coordinator sees its stream close; the subscriber goes on answering from its table. The
/// barrier counts it for its lease (plus the clock skew and the longest write), so the switch
/// comes after its write checks stopped answering `owned` (`unconfirmed`). The control is a
/// watcher that keeps no lease, cut the same way: it is counted only for the reconnect grace,
/// and the same move switches before a lease could have run out, which is the window in which
/// a cut-off zone wrote users another zone had taken over.
#[test]
fn a_cut_subscriber_answers_unconfirmed_before_the_move_that_left_it_behind_switches() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    // Lease 2 s, skew 200 ms, longest write 300 ms: a subscriber that left is counted 2.5 s.
    // stale_after 10 s: one that keeps no lease is counted 1 s (a tenth) to reconnect.
    let extra = format!(
        "{CONFIG}[subscribers]\nheartbeat = \"500ms\"\nlease = \"2s\"\nmax_clock_skew = \"200ms\"\n\
         max_write = \"300ms\"\nstale_after = \"10s\"\n"
    );
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let blue = tidegate::core::ZoneId::BLUE;
    let zone_of_unit = |unit: u32| {
        let table =
            tidegate::client::decode_table(&get_json(&format!("{url}/v1/routing")).1).unwrap();
        table.color_of_unit(tidegate::core::Unit(unit))
    };

    // A move of `units` to green while the subscriber behind `proxy` is cut: when its write
    // check first answered `unconfirmed` (if `router`), and when the units switched, both from
    // the cut.
    let cut_and_move = |proxy: &CutProxy, router: Option<&Router>, user: &str, units: &str| {
        let first: u32 = units.split('-').next().unwrap().parse().unwrap();
        proxy.cut.store(true, Ordering::SeqCst);
        let cut_at = Instant::now();
        let (status, body) = put_json(
            &format!("{url}/v1/units"),
            OPERATOR_TOKEN,
            json!({"moves": [{"units": units, "zone": "green"}], "freeze": true,
                   "freeze_window": "20s", "expected_version": version(),
                   "reason": "move away from a cut zone"}),
        );
        assert_eq!(status, 202, "{body}");
        let (mut unconfirmed, mut switched) = (None, None);
        while switched.is_none() || (router.is_some() && unconfirmed.is_none()) {
            assert!(cut_at.elapsed() < Duration::from_secs(15), "no switch or no unconfirmed");
            if let Some(router) = router
                && unconfirmed.is_none()
            {
                let answer = router.check_write(user, blue, None).unwrap();
                match answer.check.as_str() {
                    "owned" => {}
                    "unconfirmed" => unconfirmed = Some(cut_at.elapsed()),
                    other => panic!("the cut subscriber answered {other}"),
                }
            }
            if switched.is_none() && zone_of_unit(first) != blue {
                switched = Some(cut_at.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (unconfirmed, switched.unwrap())
    };

    // The Router, through a proxy, keeps the lease.
    let proxy = CutProxy::start(&url);
    let identity =
        Identity { subscriber_id: "cut-svc".into(), zone: "az-b".into(), kind: "service".into() };
    let options = RouterOptions { token: Some(OPERATOR_TOKEN.into()), ..Default::default() };
    let router = Router::connect(&proxy.url, identity, options).unwrap();
    assert!(router.wait_for_version(version(), Duration::from_secs(10)));
    wait_for("the Router's ack", Duration::from_secs(10), || router.acked_version() == version());
    let user = (0..100_000)
        .map(|i| format!("user-{i}"))
        .find(|u| router.tag(u).unwrap().unit < 10)
        .unwrap();
    assert_eq!(router.check_write(&user, blue, None).unwrap().check.as_str(), "owned");
    let (unconfirmed, switched) = cut_and_move(&proxy, Some(&router), &user, "0-9");
    let unconfirmed = unconfirmed.unwrap();
    println!(
        "cut subscriber with a 2 s lease: unconfirmed {} ms after the cut, switch {} ms after it",
        unconfirmed.as_millis(),
        switched.as_millis()
    );
    assert!(
        unconfirmed < switched,
        "the switch ({switched:?}) came before unconfirmed ({unconfirmed:?})"
    );
    assert!(
        switched >= Duration::from_millis(2_300),
        "switched after {switched:?}, within the lease"
    );
    let (_, reason) =
        audit_by(&url, "units").into_iter().find(|(a, _)| a == "units_switch").unwrap();
    println!("switch: {reason}");
    drop(router);
    // The move unfreezes once every live subscriber has the switch: wait for its end.
    wait_for("the first move to end", Duration::from_secs(20), || {
        get_json(&format!("{url}/v1/changes")).1["units"].is_null()
    });

    // The control: a raw watcher that keeps no lease (no `lease=1`), cut the same way.
    let legacy = CutProxy::start(&url);
    let watch =
        format!("{}/v1/routing/watch?subscriber_id=legacy-svc&zone=az-b&kind=service", legacy.url);
    let reader = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        if let Ok(mut response) =
            agent.get(&watch).header("Authorization", &format!("Bearer {OPERATOR_TOKEN}")).call()
        {
            let mut body = response.body_mut().as_reader();
            let _ = std::io::copy(&mut body, &mut std::io::sink());
        }
    });
    wait_for("the legacy watcher", Duration::from_secs(10), || {
        get_json(&format!("{url}/v1/subscribers")).1.to_string().contains("legacy-svc")
    });
    let (_, switched_legacy) = cut_and_move(&legacy, None, &user, "10-19");
    println!(
        "control, a cut watcher that keeps no lease: switch {} ms after the cut (a Router's 2 s lease would still hold)",
        switched_legacy.as_millis()
    );
    assert!(
        switched_legacy < Duration::from_millis(2_000),
        "control: the barrier waited {switched_legacy:?} for a watcher without a lease"
    );
    drop(reader);
}

/// Sends `method` to `url` with a JSON body, an operator token and, if given, an idempotency key.
fn send(method: &str, url: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(url)
        .header("Authorization", format!("Bearer {OPERATOR_TOKEN}"))
        .header("Content-Type", "application/json");
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let request = request.body(body.to_string()).unwrap();
    let mut response = agent().run(request).expect("request sent");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("JSON body"))
}

/// Issue 46: a pin changes its user's owner, so it goes through the same freeze -> switch ->
/// unfreeze as a unit move (`[freeze] by_default`, on in the embedded defaults). With every
/// subscriber acknowledging, `PUT /v1/pins/{user}` answers 200 once the pin is made and thawed
/// (three versions), and right after that 200 neither the edge nor a Router answers `owned` for
/// the old owner (20 tries each). A subscriber that never acknowledges holds the pin's freeze to
/// its window: 409 `freeze_aborted`, the pin not made, and a retry with the same key gets the
/// same 409. `"freeze": false` pins at once; a pin that changes no owner is a record, at once.
#[test]
fn a_pin_is_loss_less_by_default_and_a_subscriber_that_never_acknowledges_undoes_it() {
    let dir = tempfile::tempdir().unwrap();
    // The embedded `[freeze] by_default` (the harness turns it off unless `[freeze]` is named).
    let config = dir.path().join("tidegate.toml");
    let extra =
        format!("{CONFIG}[freeze]\nwindow = \"20s\"\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&url, "orders-1", true);
    let routing = || get_json(&format!("{url}/v1/routing")).1;
    let lane_zone = |lane: &str| {
        routing()["zones"].as_array().unwrap().iter().find(|z| z["lane"] == lane).unwrap()["name"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (blue_zone, green_zone) = (lane_zone("blue"), lane_zone("green"));
    let blue_users: Vec<String> = (0..100_000)
        .map(|i| format!("user-{i}"))
        .filter(|u| watcher.tag(u).unwrap().lane == "blue")
        .take(3)
        .collect();
    let pins = |user: &str| format!("{url}/v1/pins/{user}");

    // 1. By default: frozen, pinned, thawed; answered once it has ended.
    let user = &blue_users[0];
    let before = routing()["version"].as_u64().unwrap();
    let asked = Instant::now();
    let (status, body) = send(
        "PUT",
        &pins(user),
        None,
        json!({"color": "green", "expected_version": before, "reason": "pin, loss-less"}),
    );
    let took = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], before + 3, "freeze, switch, unfreeze: {body}");
    assert_eq!(body["loss_less"]["by_default"], true, "{body}");
    assert_eq!(body["frozen"], json!({}), "{body}");
    let phases: Vec<String> = audit_by(&url, "units").into_iter().map(|(a, _)| a).collect();
    assert_eq!(phases, ["units_switch", "units_unfreeze"]);
    // Right after the 200: no `owned` for the old owner, on the edge or the Router.
    let mut owned_by_old = 0;
    for _ in 0..20 {
        let path = format!("{}/v1/write-check?user_id={user}&zone={blue_zone}", edge.url);
        if get_json(&path).1["answer"] == "owned" {
            owned_by_old += 1;
        }
        if watcher.check_write(user, tidegate::core::ZoneId::BLUE, None).is_ok_and(|a| a.is_owned())
        {
            owned_by_old += 1;
        }
    }
    assert_eq!(owned_by_old, 0, "answered owned for the old owner after the pin's 200");
    let path = format!("{}/v1/write-check?user_id={user}&zone={green_zone}", edge.url);
    assert_eq!(get_json(&path).1["answer"], "owned");
    println!("[figures] loss-less pin answered in {} ms", took.as_millis());
    // Control (printed, not asserted: a race): a pin at once, `"freeze": false`, and the same
    // 20 tries right after its 200.
    let control = &blue_users[2];
    let v = routing()["version"].as_u64().unwrap();
    let (status, _) = send(
        "PUT",
        &pins(control),
        None,
        json!({"color": "green", "expected_version": v, "reason": "control", "freeze": false}),
    );
    assert_eq!(status, 200);
    let control_owned = (0..20)
        .filter(|_| {
            let path = format!("{}/v1/write-check?user_id={control}&zone={blue_zone}", edge.url);
            get_json(&path).1["answer"] == "owned"
        })
        .count();
    println!(
        "[figures] right after a pin's 200: loss-less 0 of 40 owned by the old owner; at once (control) {control_owned} of 20 on the edge"
    );

    // 2. A pin that changes no owner (blue user to blue) is a record only: one version, at once.
    let other = &blue_users[1];
    let v = routing()["version"].as_u64().unwrap();
    let (status, body) = send(
        "PUT",
        &pins(other),
        None,
        json!({"color": "blue", "expected_version": v, "reason": "same owner"}),
    );
    assert_eq!((status, &body["version"]), (200, &json!(v + 1)), "{body}");
    assert!(body["loss_less"].is_null(), "{body}");

    // 3. A subscriber that never acknowledges holds the unpin's freeze to its window: 409, the
    // pin stays, and the keyed retry answers the same 409, not the freeze's 202.
    let deaf = router(&url, "sub-deaf", false);
    let v = routing()["version"].as_u64().unwrap();
    let unpin = json!({"expected_version": v, "reason": "unpin held", "freeze_window": "1s"});
    let (status, body) = send("DELETE", &pins(user), Some("unpin-1"), unpin.clone());
    assert_eq!((status, body["error"].as_str()), (409, Some("freeze_aborted")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("sub-deaf"), "{body}");
    let table = routing();
    assert_eq!(table["pins"][user.as_str()], "green", "the pin stays: {table}");
    assert_eq!(table["frozen"], json!({}), "{table}");
    let (status, again) = send("DELETE", &pins(user), Some("unpin-1"), unpin);
    assert_eq!((status, again["error"].as_str()), (409, Some("freeze_aborted")), "{again}");
    // `"freeze": false` is the explicit way out: at once, one version, the deaf one or not.
    let v = routing()["version"].as_u64().unwrap();
    let (status, body) = send(
        "DELETE",
        &pins(user),
        None,
        json!({"expected_version": v, "reason": "at once", "freeze": false}),
    );
    assert_eq!((status, &body["version"]), (200, &json!(v + 1)), "{body}");
    assert!(body["pins"].get(user.as_str()).is_none(), "{body}");
    drop(deaf);
}

/// Issue 46: a loss-less move held by a subscriber that never acknowledges is cancelled by an
/// operator in well under a second (undone, nothing moved, audited as cancelled), and an
/// evacuation started during such a held move pre-empts it instead of waiting for its window.
#[test]
fn a_held_move_is_cancelled_at_once_and_an_evacuation_pre_empts_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let _deaf = router(&url, "sub-deaf", false);
    let routing = || get_json(&format!("{url}/v1/routing")).1;
    let cancel = |v: u64| {
        send(
            "POST",
            &format!("{url}/v1/changes/cancel"),
            None,
            json!({"expected_version": v, "reason": "operator gave up"}),
        )
    };
    let held_move = |units: &str| {
        let v = routing()["version"].as_u64().unwrap();
        let (status, body) = send(
            "PUT",
            &format!("{url}/v1/units"),
            None,
            json!({"moves": [{"units": units, "zone": "green"}], "freeze": true,
                   "freeze_window": "60s", "expected_version": v, "reason": "held"}),
        );
        assert_eq!(status, 202, "{body}");
        body
    };
    // Nothing to cancel.
    let v = routing()["version"].as_u64().unwrap();
    let (status, body) = cancel(v);
    assert_eq!((status, body["error"].as_str()), (409, Some("no_change_in_progress")), "{body}");

    // 1. Cancel: undone at once, nothing moved.
    let before = routing();
    let held = held_move("0-9");
    let frozen_version = held["version"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(300)); // held: the deaf subscriber never applies it
    assert_eq!(get_json(&format!("{url}/v1/changes")).1["units"]["phase"], "freezing");
    let asked = Instant::now();
    let (status, body) = cancel(frozen_version);
    let took = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cancelled"]["frozen_version"], frozen_version, "{body}");
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
    let after = routing();
    assert_eq!((&after["unit_map"], &after["frozen"]), (&before["unit_map"], &json!({})));
    assert!(get_json(&format!("{url}/v1/changes")).1["units"].is_null());
    let (action, reason) = audit_by(&url, "alice").into_iter().last().unwrap();
    assert_eq!(action, "units_unfreeze");
    assert!(reason.starts_with("cancelled: operator gave up"), "{reason}");
    println!("[figures] a held move cancelled in {} ms", took.as_millis());

    // 2. An evacuation during a held move pre-empts it: done long before the 60 s window.
    let held = held_move("10-19");
    let v = held["version"].as_u64().unwrap();
    let asked = Instant::now();
    let (status, body) = send(
        "POST",
        &format!("{url}/v1/units/evacuate"),
        None,
        json!({"zone": "blue", "expected_version": v, "reason": "zone lost"}),
    );
    let took = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["blue_units"], 0, "{body}");
    assert!(took < Duration::from_secs(2), "evacuation took {took:?}");
    let reasons: Vec<String> = audit_by(&url, "alice").into_iter().map(|(_, r)| r).collect();
    assert!(reasons.iter().any(|r| r.starts_with("pre-empted by an evacuation")), "{reasons:?}");
    assert!(get_json(&format!("{url}/v1/changes")).1["units"].is_null());
    println!("[figures] an evacuation during a held move answered in {} ms", took.as_millis());
}

/// Issue 46: a plan with a `freeze_window` makes its dial, unit-move, pin and unpin steps
/// loss-less: each step freezes what it moves (`plan_step_freeze`), switches once every live
/// subscriber has the freeze, and ends with its unfreeze. With a subscriber that never
/// acknowledges, the first such step is undone at the window and the run fails with nothing
/// moved. Control: the same plan without `freeze_window` takes effect at once (no freeze).
#[test]
fn a_plans_dial_move_and_pin_steps_are_loss_less_with_a_freeze_window() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let watcher = router(&url, "orders-1", true);
    let user = (0..100_000)
        .map(|i| format!("user-{i}"))
        .find(|u| {
            let t = watcher.tag(u).unwrap();
            t.lane == "blue" && t.unit >= 10
        })
        .unwrap();
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let put_plan = |name: &str, freeze: Option<&str>| {
        let mut plan = json!({
            "expected_version": version(), "reason": "loss-less steps", "rto": "5m",
            "steps": [
                {"type": "pin", "user_id": user, "color": "green"},
                {"type": "dial", "blue_percent": 40},
                {"type": "move_units", "moves": [{"units": "0-4", "zone": "az-a"}]},
                {"type": "unpin", "user_id": user}
            ]
        });
        if let Some(window) = freeze {
            plan["freeze_window"] = json!(window);
        }
        let (status, body) = put_json(&format!("{url}/v1/plans/{name}"), OPERATOR_TOKEN, plan);
        assert_eq!(status, 200, "{body}");
    };
    let run = |name: &str| {
        let (status, body) = post_json(
            &format!("{url}/v1/plans/{name}/run"),
            OPERATOR_TOKEN,
            json!({"reason": "test"}),
        );
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_u64().unwrap();
        let mut last = Value::Null;
        wait_until(Duration::from_secs(30), || {
            last = get_json(&format!("{url}/v1/plans/{name}/runs/{id}")).1;
            ["completed", "failed"].contains(&last["state"].as_str().unwrap_or(""))
        });
        last
    };
    let actions = |from: usize| -> Vec<String> {
        let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1000"));
        let all: Vec<String> = audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .map(|e| e["action"].as_str().unwrap().to_owned())
            .collect();
        all[from..].to_vec()
    };
    let audit_len =
        || get_json(&format!("{url}/v1/audit?limit=1000")).1["entries"].as_array().unwrap().len();

    // 1. Loss-less: every step is freeze -> switch -> unfreeze.
    put_plan("lossless", Some("5s"));
    let from = audit_len();
    let done = run("lossless");
    assert_eq!(done["state"], "completed", "{done}");
    let table = get_json(&format!("{url}/v1/routing")).1;
    assert_eq!((&table["blue_units"], &table["frozen"]), (&json!(35), &json!({})), "{table}");
    assert!(table["pins"].get(user.as_str()).is_none(), "{table}");
    let steps: Vec<String> = actions(from)
        .into_iter()
        .filter(|a| a.starts_with("plan_step") || a.starts_with("units_"))
        .collect();
    let step = ["plan_step_start", "plan_step_freeze", "units_switch", "units_unfreeze"];
    assert_eq!(steps, [step, step, step, step].concat(), "{steps:?}");

    // 2. Control: the same plan without a freeze_window moves at once.
    put_plan("at-once", None);
    let from = audit_len();
    assert_eq!(run("at-once")["state"], "completed");
    let steps = actions(from);
    assert!(!steps.iter().any(|a| a.starts_with("units_")), "{steps:?}");

    // 3. A subscriber that never acknowledges: the first step's freeze is undone at its
    // window, the run fails, nothing moved.
    put_plan("held", Some("1s"));
    let _deaf = router(&url, "sub-deaf", false);
    let before = get_json(&format!("{url}/v1/routing")).1;
    let failed = run("held");
    assert_eq!(failed["state"], "failed", "{failed}");
    let reason = failed["fail_reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("nothing moved"), "{failed}");
    let after = get_json(&format!("{url}/v1/routing")).1;
    assert_eq!((&after["unit_map"], &after["pins"]), (&before["unit_map"], &before["pins"]));
    assert_eq!(after["frozen"], json!({}));
}

/// Issue 46: a release channel's put or delete changes its users' owner for its services, so it
/// freezes by default as a unit move does (`[freeze] by_default`): answered 200 at its end with
/// `loss_less`; held by a subscriber that never acknowledges, 409 `freeze_aborted` and the
/// channel unchanged; `"freeze": false` at once. Control: with `by_default = false` the put is
/// at once (one version).
#[test]
fn a_channel_change_is_loss_less_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!("{CONFIG}[freeze]\nwindow = \"20s\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let _watcher = router(&url, "orders-1", true);
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let put = |units: &str, extra: Value| {
        let mut body = json!({"services": ["orders"], "zone": "green", "units": units,
                              "expected_version": version(), "reason": "orders 2.4"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        put_json(&format!("{url}/v1/channels/orders-v2"), OPERATOR_TOKEN, body)
    };
    let v = version();
    let (status, body) = put("40-44", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], v + 3, "freeze, switch, unfreeze: {body}");
    assert_eq!(body["loss_less"]["by_default"], true, "{body}");
    let phases: Vec<String> = audit_by(&url, "channels").into_iter().map(|(a, _)| a).collect();
    assert_eq!(phases, ["channel_switch", "channel_unfreeze"]);

    // Held by a subscriber that never acknowledges: 409, the channel unchanged.
    let deaf = router(&url, "sub-deaf", false);
    let (status, body) = put("40-49", json!({"freeze_window": "1s"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("freeze_aborted")), "{body}");
    let channel = get_json(&format!("{url}/v1/channels/orders-v2")).1;
    assert_eq!(channel["units"], "40-44", "{channel}");
    // `"freeze": false`: at once.
    let v = version();
    let (status, body) = put("40-49", json!({"freeze": false}));
    assert_eq!((status, &body["version"]), (200, &json!(v + 1)), "{body}");
    drop(deaf);
    drop(server);

    // Control: `by_default = false` puts at once.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml(&format!("{CONFIG}[freeze]\nby_default = false\n")))
        .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let body = json!({"services": ["orders"], "zone": "green", "units": "40-44",
                      "expected_version": 1, "reason": "control"});
    let (status, body) =
        put_json(&format!("{}/v1/channels/orders-v2", server.url), OPERATOR_TOKEN, body);
    assert_eq!((status, &body["version"]), (200, &json!(2)), "{body}");
}

/// One writer of global data per zone, on its own Router: in a loop, a write scope around the
/// global write check and, when `owned`, a commit of 0-15 ms, recorded with its end time.
struct GlobalWriters {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Vec<(u64, String)>>>,
}

impl GlobalWriters {
    fn start(url: &str, zones: &[&str]) -> GlobalWriters {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = zones
            .iter()
            .map(|zone| {
                let (stop, url, zone) = (Arc::clone(&stop), url.to_owned(), zone.to_string());
                let writer = router(&url, &format!("global-writer-{zone}"), true);
                std::thread::spawn(move || {
                    let local = writer.table().unwrap().zones().resolve(&zone).unwrap();
                    let mut commits = Vec::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let scope = writer.write_scope();
                        let check = writer.check_global_write(local, None).unwrap();
                        if check == tidegate::core::GlobalWriteCheck::Owned {
                            std::thread::sleep(Duration::from_millis(n * 7 % 16));
                            commits.push((now_ms(), zone.clone()));
                        }
                        drop(scope);
                        if check != tidegate::core::GlobalWriteCheck::Owned {
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                    commits
                })
            })
            .collect();
        GlobalWriters { stop, threads }
    }

    fn stop(self) -> Vec<(u64, String)> {
        self.stop.store(true, Ordering::SeqCst);
        let mut all: Vec<(u64, String)> =
            self.threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort();
        all
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Commits of global data by a zone that was not the global writer when they committed: the
/// writer at a commit's end is the one the last `units_switch` (or at-once `global_writer`)
/// before it set, by the audit's times. Old writers commit before they acknowledge the freeze,
/// so before the switch; new ones after the unfreeze.
fn misplaced_global_commits(url: &str, first: &str, commits: &[(u64, String)]) -> usize {
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1000"));
    let mut switches: Vec<(u64, String)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "units_switch" || e["action"] == "global_writer")
        .filter_map(|e| {
            let to = e["to"].as_str()?;
            let zone = to.split("global writes: ").nth(1)?.split(' ').next()?.to_owned();
            Some((e["at_ms"].as_u64()?, zone))
        })
        .collect();
    switches.sort();
    commits
        .iter()
        .filter(|(t, zone)| {
            let writer =
                switches.iter().rev().find(|(at, _)| at < t).map_or(first, |(_, z)| z.as_str());
            writer != zone
        })
        .count()
}

/// Issue 46: moving the global writer is loss-less by default: global writes freeze everywhere,
/// the writer switches once every live subscriber has the freeze, and they resume once every
/// one has the switch. 100 moves between az-a and az-b, with a writer of global rows in each
/// zone checking every write (`Router::check_global_write` in a write scope): 0 global rows
/// committed by a zone that was not the global writer. Control: 20 moves with `"freeze":
/// false` misplace global rows.
#[test]
fn a_hundred_global_writer_moves_leave_no_global_row_to_a_non_writer() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml(&format!("{CONFIG}[freeze]\nwindow = \"20s\"\n"))).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let set = |zone: &str, freeze: bool| {
        let (status, body) = put_json(
            &format!("{url}/v1/global-writer"),
            OPERATOR_TOKEN,
            json!({"zone": zone, "expected_version": version(), "reason": "move", "freeze": freeze}),
        );
        assert!(status == 200 || status == 202, "{status} {body}");
        body
    };
    set("az-b", false);
    // The table publishes whether global writes are frozen (not between moves).
    let body = set("az-b", false);
    assert_eq!(body["global_writer"]["frozen"], false, "{body}");

    let writers = GlobalWriters::start(&url, &["az-a", "az-b"]);
    std::thread::sleep(Duration::from_millis(300));
    let mut took = Vec::new();
    for i in 0..100 {
        let zone = if i % 2 == 0 { "az-a" } else { "az-b" };
        let asked = Instant::now();
        let (status, body) = put_json(
            &format!("{url}/v1/global-writer"),
            OPERATOR_TOKEN,
            json!({"zone": zone, "expected_version": version(), "reason": "loss-less move"}),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["loss_less"]["by_default"], true, "{body}");
        assert_eq!(
            (&body["global_writer"]["zone"], &body["global_writer"]["frozen"]),
            (&json!(zone), &json!(false))
        );
        took.push(asked.elapsed().as_millis() as u64);
    }
    std::thread::sleep(Duration::from_millis(300));
    let commits = writers.stop();
    let misplaced = misplaced_global_commits(&url, "az-b", &commits);
    took.sort();
    println!(
        "[figures] 100 loss-less global-writer moves: {} global commits, {misplaced} by a non-writer; a move answered in p50 {} ms, p99 {} ms (min {}, max {})",
        commits.len(),
        took[49],
        took[98],
        took[0],
        took[99]
    );
    assert!(commits.len() > 100, "the writers wrote too little: {}", commits.len());
    assert_eq!(misplaced, 0, "global rows committed by a zone that was not the global writer");
    drop(server);

    // Control: the same writers, 20 moves at once (`"freeze": false`).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml(&format!("{CONFIG}[freeze]\nwindow = \"20s\"\n"))).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let put = |zone: &str| {
        let (status, body) = put_json(
            &format!("{url}/v1/global-writer"),
            OPERATOR_TOKEN,
            json!({"zone": zone, "expected_version": version(), "reason": "at once", "freeze": false}),
        );
        assert_eq!(status, 200, "{body}");
    };
    put("az-b");
    let writers = GlobalWriters::start(&url, &["az-a", "az-b"]);
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..20 {
        put(if i % 2 == 0 { "az-a" } else { "az-b" });
        std::thread::sleep(Duration::from_millis(100));
    }
    let commits = writers.stop();
    let misplaced = misplaced_global_commits(&url, "az-b", &commits);
    println!(
        "[figures] control, 20 global-writer moves at once: {} global commits, {misplaced} by a non-writer",
        commits.len()
    );
    assert!(misplaced > 0, "the control misplaced nothing: the check above proves nothing");
}

/// How the table test below checks one change of owner on the edge: the write check of `user`
/// (for `service`), or the global write check, at a zone.
#[derive(Clone)]
enum Probe {
    User { user: String, service: Option<&'static str> },
    Global,
}

fn edge_answer(edge: &Edge, probe: &Probe, zone: &str) -> String {
    let path = match probe {
        Probe::User { user, service: None } => format!("user_id={user}&zone={zone}"),
        Probe::User { user, service: Some(s) } => format!("user_id={user}&zone={zone}&service={s}"),
        Probe::Global => format!("global=true&zone={zone}"),
    };
    let body = get_json(&format!("{}/v1/write-check?{path}", edge.url)).1;
    body["answer"].as_str().or(body["error"].as_str()).unwrap_or_default().to_owned()
}

/// Issue 46, the table test: every operation of the served OpenAPI whose request takes `freeze`
/// changes an owner, and each one (bar the two documented exceptions) is loss-less by default.
/// With one subscriber that never acknowledges and a 1 s window, each answers 409
/// `freeze_aborted` and moves nothing; once it has gone, each completes, and right after each
/// 200, 20 tries of the edge's write check give 0 `owned` answers for the old owner.
#[test]
fn every_change_of_owner_in_the_api_is_loss_less_by_default() {
    let document: Value = serde_json::from_str(tidegate::http::openapi::DOCUMENT).unwrap();
    let schemas = &document["components"]["schemas"];
    let mut freezing: Vec<String> = Vec::new();
    for ops in document["paths"].as_object().unwrap().values() {
        for op in ops.as_object().unwrap().values() {
            let reference = &op["requestBody"]["content"]["application/json"]["schema"]["$ref"];
            let Some(name) = reference.as_str().and_then(|r| r.rsplit('/').next()) else {
                continue;
            };
            if schemas[name]["properties"].get("freeze").is_some() {
                freezing.push(op["operationId"].as_str().unwrap().to_owned());
            }
        }
    }
    freezing.sort();
    // Drains freeze each step (every_step_freezes_switches_and_unfreezes_...); an evacuation is
    // speed first and freezes only when asked (docs/src/drains.md).
    let exceptions = ["evacuateUnits", "startDrain"];
    let mut known = vec![
        "deleteChannel",
        "moveUnits",
        "pinUser",
        "putChannel",
        "setDial",
        "setGlobalWriter",
        "unpinUser",
    ];
    known.extend(exceptions);
    known.sort();
    assert_eq!(freezing, known, "an operation that takes `freeze` is missing from this test");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra =
        format!("{CONFIG}[freeze]\nwindow = \"20s\"\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&url, "orders-1", true);
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let in_units = |set: &str, skip: &[&String]| {
        let set = tidegate::core::UnitSet::parse(set, 100).unwrap();
        (0..100_000)
            .map(|i| format!("user-{i}"))
            .find(|u| set.contains(watcher.tag(u).unwrap().unit) && !skip.contains(&u))
            .unwrap()
    };
    let (pinned, unpinned) = (in_units("30-34", &[]), in_units("35-39", &[]));
    let (dialled, moved) = (in_units("45-49", &[]), in_units("0-4", &[]));
    let (released, deleted) = (in_units("10-14", &[]), in_units("20-24", &[]));
    // Setup at once: a writer of global data, a pinned user to unpin, a channel to delete.
    let at_once = |method: &str, path: &str, body: Value| {
        let mut body = body;
        body["expected_version"] = json!(version());
        body["reason"] = json!("setup");
        body["freeze"] = json!(false);
        let (status, answer) = send(method, &format!("{url}{path}"), None, body);
        assert_eq!(status, 200, "{path}: {answer}");
    };
    at_once("PUT", "/v1/global-writer", json!({"zone": "az-b"}));
    at_once("PUT", &format!("/v1/pins/{unpinned}"), json!({"color": "green"}));
    at_once(
        "PUT",
        "/v1/channels/billing-old",
        json!({"services": ["billing"], "zone": "az-a", "units": "20-24"}),
    );
    // Each operation: its request, and the probe with the owner before and after it.
    let ops: Vec<(&str, &str, String, Value, Probe, &str, &str)> = vec![
        (
            "setDial",
            "PUT",
            "/v1/dial".into(),
            json!({"blue_percent": 45}),
            Probe::User { user: dialled.clone(), service: None },
            "az-b",
            "az-a",
        ),
        (
            "moveUnits",
            "PUT",
            "/v1/units".into(),
            json!({"moves": [{"units": "0-4", "zone": "az-a"}]}),
            Probe::User { user: moved.clone(), service: None },
            "az-b",
            "az-a",
        ),
        (
            "pinUser",
            "PUT",
            format!("/v1/pins/{pinned}"),
            json!({"color": "green"}),
            Probe::User { user: pinned.clone(), service: None },
            "az-b",
            "az-a",
        ),
        (
            "unpinUser",
            "DELETE",
            format!("/v1/pins/{unpinned}"),
            json!({}),
            Probe::User { user: unpinned.clone(), service: None },
            "az-a",
            "az-b",
        ),
        (
            "setGlobalWriter",
            "PUT",
            "/v1/global-writer".into(),
            json!({"zone": "az-a"}),
            Probe::Global,
            "az-b",
            "az-a",
        ),
        (
            "putChannel",
            "PUT",
            "/v1/channels/orders-v2".into(),
            json!({"services": ["orders"], "zone": "az-a", "units": "10-14"}),
            Probe::User { user: released.clone(), service: Some("orders") },
            "az-b",
            "az-a",
        ),
        (
            "deleteChannel",
            "DELETE",
            "/v1/channels/billing-old".into(),
            json!({}),
            Probe::User { user: deleted.clone(), service: Some("billing") },
            "az-a",
            "az-b",
        ),
    ];
    let shape = || {
        let t = get_json(&format!("{url}/v1/routing")).1;
        json!([t["unit_map"], t["pins"], t["channels"], t["global_writer"]])
    };

    // 1. Held by a subscriber that never acknowledges: 409 freeze_aborted, nothing moved.
    let deaf = router(&url, "sub-deaf", false);
    for (name, method, path, body, ..) in &ops {
        let before = shape();
        let mut body = body.clone();
        body["expected_version"] = json!(version());
        body["reason"] = json!(format!("{name}, held"));
        body["freeze_window"] = json!("1s");
        let (status, answer) = send(method, &format!("{url}{path}"), None, body);
        assert_eq!(
            (status, answer["error"].as_str()),
            (409, Some("freeze_aborted")),
            "{name}: {answer}"
        );
        assert_eq!(shape(), before, "{name} moved something");
    }
    // Gone: its stream closes, and the barrier stops waiting for it after the reconnect grace.
    drop(deaf);

    // 2. Every one completes, and right after its 200 the old owner is never `owned`.
    let mut owned_by_old = BTreeMap::new();
    let mut took = Vec::new();
    for (name, method, path, body, probe, old, new) in &ops {
        let mut body = body.clone();
        body["expected_version"] = json!(version());
        body["reason"] = json!(format!("{name}, loss-less"));
        let asked = Instant::now();
        let (status, answer) = send(method, &format!("{url}{path}"), None, body);
        took.push((*name, asked.elapsed().as_millis()));
        assert_eq!(status, 200, "{name}: {answer}");
        assert_eq!(answer["loss_less"]["by_default"], true, "{name}: {answer}");
        let owned = (0..20).filter(|_| edge_answer(&edge, probe, old) == "owned").count();
        owned_by_old.insert(*name, owned);
        wait_for(&format!("{name}: the new owner owns"), Duration::from_secs(5), || {
            edge_answer(&edge, probe, new) == "owned"
        });
    }
    println!(
        "[figures] owned answers for the old owner in 20 tries right after each 200: {owned_by_old:?}"
    );
    println!("[figures] each change answered after (ms): {took:?}");
    assert!(owned_by_old.values().all(|n| *n == 0), "{owned_by_old:?}");
}

/// Issue 46, a freeze in place: `POST /v1/holds` freezes units 0-19 and global writes with
/// nothing moved and answers once every live subscriber refuses them (the edge answers
/// `frozen` for a held user in either zone and for a global write, `owned` outside); inside the
/// hold a unit move and a global-writer move are made at once (one version each, their writes
/// still refused), and `DELETE /v1/holds` thaws them with the new owners. A subscriber that never
/// acknowledges undoes a hold at its window: 409 `freeze_aborted`, nothing held.
#[test]
fn a_hold_freezes_in_place_moves_inside_it_at_once_and_a_deaf_subscriber_undoes_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra =
        format!("{CONFIG}[freeze]\nwindow = \"20s\"\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"\n");
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = server.url.clone();
    let edge = Edge::start(&config, &url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let watcher = router(&url, "orders-1", true);
    let routing = || get_json(&format!("{url}/v1/routing")).1;
    let version = || routing()["version"].as_u64().unwrap();
    let zone_of = |lane: &str| {
        routing()["zones"].as_array().unwrap().iter().find(|z| z["lane"] == lane).unwrap()["name"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (blue, green) = (zone_of("blue"), zone_of("green"));
    let holds = format!("{url}/v1/holds");
    let (held_user, free_user) = users_in_and_out(&watcher, "0-19");
    let held_user = (0..100_000)
        .map(|i| format!("user-{i}"))
        .find(|u| {
            let t = watcher.tag(u).unwrap();
            t.unit < 20 && t.lane == "blue"
        })
        .unwrap_or(held_user);
    let free_owner = watcher.tag(&free_user).unwrap().zone.to_string();
    let (status, body) = send(
        "PUT",
        &format!("{url}/v1/global-writer"),
        None,
        json!({"zone": blue, "freeze": false, "expected_version": version(), "reason": "setup"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        send("DELETE", &holds, None, json!({"expected_version": version(), "reason": "none"}));
    assert_eq!((status, body["error"].as_str()), (409, Some("no_hold")), "{body}");
    let (status, body) = send(
        "POST",
        &holds,
        None,
        json!({"units": [{"units": "0-200"}], "hold": "30s", "expected_version": version(), "reason": "bad"}),
    );
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_hold")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("units[0].units"), "{body}");

    // 1. Held: nothing moved, the held users' and global writes refused everywhere.
    let before = routing();
    let asked = Instant::now();
    let (status, body) = send(
        "POST",
        &holds,
        None,
        json!({"units": [{"units": "0-19"}], "global": true, "hold": "30s",
               "expected_version": before["version"], "reason": "promote the orders replica"}),
    );
    let held_in = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["held"].as_bool(), body["hold"]["phase"].as_str()),
        (Some(true), Some("held"))
    );
    assert_eq!(body["hold"]["kind"], "hold", "{body}");
    let during = routing();
    assert_eq!(during["unit_map"], before["unit_map"], "a hold moves nothing");
    assert_eq!(during["frozen"], json!({"default": "0-19"}), "{during}");
    edge.wait_for_version(during["version"].as_u64().unwrap());
    for zone in [&blue, &green] {
        let answer =
            edge_answer(&edge, &Probe::User { user: held_user.clone(), service: None }, zone);
        assert_eq!(answer, "frozen", "{held_user} in {zone}");
        assert_eq!(edge_answer(&edge, &Probe::Global, zone), "frozen", "global in {zone}");
    }
    let free = Probe::User { user: free_user.clone(), service: None };
    assert_eq!(edge_answer(&edge, &free, &free_owner), "owned");

    // 2. Inside the hold: moves of held units and of the global writer are made at once.
    let v = version();
    let (status, body) = send(
        "PUT",
        &format!("{url}/v1/units"),
        None,
        json!({"moves": [{"units": "0-19", "zone": green}], "expected_version": v, "reason": "after the promote"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["version"].as_u64(), body["within_hold"].as_bool()),
        (Some(v + 1), Some(true)),
        "{body} {:?}",
        audit_by(&url, "alice")
    );
    let (status, body) = send(
        "PUT",
        &format!("{url}/v1/global-writer"),
        None,
        json!({"zone": green, "expected_version": v + 1, "reason": "after the promote"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["version"].as_u64(), body["within_hold"].as_bool()),
        (Some(v + 2), Some(true))
    );
    edge.wait_for_version(v + 2);
    let held = Probe::User { user: held_user.clone(), service: None };
    assert_eq!(edge_answer(&edge, &held, &green), "frozen", "still held after the move");
    // A unit the hold does not cover waits for it to end.
    let (status, body) = send(
        "PUT",
        &format!("{url}/v1/units"),
        None,
        json!({"moves": [{"units": "20-29", "zone": green}], "expected_version": v + 2, "reason": "outside"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("units_changing")), "{body}");

    // 3. Released: the new owners take the writes.
    let (status, body) =
        send("DELETE", &holds, None, json!({"expected_version": v + 2, "reason": "promote done"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["released"]["was_held"], true, "{body}");
    edge.wait_for_version(v + 3);
    assert_eq!(edge_answer(&edge, &held, &green), "owned");
    assert_ne!(edge_answer(&edge, &held, &blue), "owned");
    assert_eq!(edge_answer(&edge, &Probe::Global, &green), "owned");
    assert_ne!(edge_answer(&edge, &Probe::Global, &blue), "owned");
    let actions: Vec<String> = audit_by(&url, "alice").into_iter().map(|(a, _)| a).collect();
    let expected =
        ["global_writer", "units_hold", "units_freeze", "units_freeze", "units_unfreeze"];
    assert_eq!(actions, expected, "the setup, the hold, two changes inside it, the release");
    let units: Vec<String> = audit_by(&url, "units").into_iter().map(|(a, _)| a).collect();
    assert_eq!(units, ["units_switch"], "held by the loop; nothing else of its own");
    println!("[figures] a hold of 20 units and global writes held in {} ms", held_in.as_millis());

    // 4. A subscriber that never acknowledges undoes the hold at its window.
    let _deaf = router(&url, "sub-deaf", false);
    let asked = Instant::now();
    let (status, body) = send(
        "POST",
        &holds,
        None,
        json!({"units": [{"units": "40-49"}], "hold": "30s", "freeze_window": "1s",
               "expected_version": version(), "reason": "will not hold"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("freeze_aborted")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("sub-deaf"), "{body}");
    assert!(asked.elapsed() < Duration::from_secs(5), "{:?}", asked.elapsed());
    assert_eq!(routing()["frozen"], json!({}));
    assert!(get_json(&format!("{url}/v1/changes")).1["units"].is_null());
}
