//! Drains end to end on the real binary: outcomes in, guarded steps out, kill -9 in the middle.
//!
//! Intervals are 300-400 ms and the health window 1 s so a whole drain takes a few seconds.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const CONFIG: &str = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n";

/// Posts outcomes for both zones every 50 ms: 100 requests each, with `az_a_errors` per mille
/// of az-a's failing. Follows the server across restarts through `url`.
struct Feeder {
    url: Arc<Mutex<String>>,
    az_a_errors: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Feeder {
    fn start(url: &str) -> Feeder {
        let url = Arc::new(Mutex::new(url.to_owned()));
        let az_a_errors = Arc::new(AtomicU32::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (u, e, s) = (Arc::clone(&url), Arc::clone(&az_a_errors), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let agent = agent();
            while !s.load(Ordering::SeqCst) {
                let errors = u64::from(e.load(Ordering::SeqCst)) / 10;
                let body = json!([
                    {"zone": "az-b", "color": "blue", "ok": 100, "error": 0},
                    {"zone": "az-a", "color": "green", "ok": 100 - errors, "error": errors}
                ]);
                let target = format!("{}/v1/outcomes", u.lock().unwrap());
                // The server may be down during a restart: keep trying.
                let _ = agent
                    .post(&target)
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Feeder { url, az_a_errors, stop, thread: Some(thread) }
    }

    fn errors_per_mille(&self, value: u32) {
        self.az_a_errors.store(value, Ordering::SeqCst);
    }

    fn follow(&self, url: &str) {
        *self.url.lock().unwrap() = url.to_owned();
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

fn post(url: &str, body: Value) -> (u16, Value) {
    let mut response = agent()
        .post(url)
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(body)
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("JSON"))
}

fn drain(server: &Server, id: u64) -> Value {
    get_json(&format!("{}/v1/drains/{id}", server.url)).1
}

fn wait_for(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    assert!(wait_until(timeout, &mut check), "timed out waiting for {what}");
}

fn start_server(dir: &std::path::Path) -> Server {
    let config = dir.join("tidegate.toml");
    std::fs::write(&config, config_toml(CONFIG)).unwrap();
    Server::start(&config, &dir.join("data"))
}

fn start_drain(server: &Server, interval: &str, breaches: u32, on_breach: &str) {
    let (status, body) = post(
        &format!("{}/v1/drains", server.url),
        json!({
            "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": interval,
            "guard": {"max_error_rate": 0.02, "min_requests": 100, "breaches": breaches, "on_breach": on_breach},
            "reason": "e2e drain"
        }),
    );
    assert_eq!(status, 201, "{body}");
}

fn wait_for_healthy_zones(server: &Server) {
    wait_for("both zones to report health", Duration::from_secs(10), || {
        let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
        zones["zones"].as_array().unwrap().iter().all(|z| z["error_rate"].is_number())
    });
}

/// The blue-unit counts the drain's steps moved to, from the audit log, oldest first.
fn step_targets(server: &Server) -> Vec<u64> {
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=1000", server.url));
    let steps: Vec<u64> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|e| e["action"] == "drain_step")
        .map(|e| {
            assert_eq!(e["by"], "drain:1");
            let to = e["to"].as_str().unwrap();
            let at = to.find("% (").unwrap() + 3;
            to[at..].split('/').next().unwrap().parse().unwrap()
        })
        .collect();
    steps
}

#[test]
fn the_guard_pauses_a_drain_into_a_failing_zone_and_resume_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path());
    let feeder = Feeder::start(&server.url);
    wait_for_healthy_zones(&server);
    start_drain(&server, "300ms", 2, "pause");

    wait_for("two steps", Duration::from_secs(10), || {
        drain(&server, 1)["steps_done"].as_u64() >= Some(2)
    });
    let injected = Instant::now();
    let steps_at_injection = drain(&server, 1)["steps_done"].as_u64().unwrap();
    feeder.errors_per_mille(100); // az-a, the receiving zone, now fails 10% of requests
    wait_for("the guard to pause the drain", Duration::from_secs(10), || {
        drain(&server, 1)["state"] == "paused"
    });
    let stopped_after = injected.elapsed();
    let paused = drain(&server, 1);
    println!(
        "guard stopped the drain {} ms after errors began ({} step(s) taken meanwhile; interval 300 ms, window 1 s, breaches 2)",
        stopped_after.as_millis(),
        paused["steps_done"].as_u64().unwrap() - steps_at_injection
    );
    // Counted in steps, not seconds, so a loaded machine cannot make it flaky: once the 1 s
    // window shows the errors the guard takes no step, and while the window still averages in
    // the healthy second at most `breaches` (2) checks can pass.
    let steps_meanwhile = paused["steps_done"].as_u64().unwrap() - steps_at_injection;
    assert!(steps_meanwhile <= 2, "{steps_meanwhile} steps into a failing zone");
    assert!(paused["hold_reason"].as_str().unwrap().contains("az-a"), "{paused}");
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=50", server.url));
    let breaches: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "drain_hold")
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert!(breaches.iter().any(|r| r.contains("guard breach 2/2")), "{breaches:?}");
    assert!(breaches.iter().any(|r| r.contains("guard breach 1/2")), "{breaches:?}");
    let units_when_paused = paused["current_percent"].as_f64().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        drain(&server, 1)["current_percent"].as_f64().unwrap(),
        units_when_paused,
        "a paused drain stays put"
    );

    feeder.errors_per_mille(0);
    std::thread::sleep(Duration::from_millis(1200)); // let the 1 s window forget the errors
    let (status, resumed) =
        post(&format!("{}/v1/drains/1/resume", server.url), json!({"reason": "az-a fixed"}));
    assert_eq!((status, resumed["state"].as_str()), (200, Some("running")));
    wait_for("the drain to complete", Duration::from_secs(10), || {
        drain(&server, 1)["state"] == "completed"
    });
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(table["blue_units"], 0);
    assert_eq!(step_targets(&server), vec![40, 30, 20, 10, 0]);
    let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
    assert_eq!(zones["zones"][0]["state"], "drained");
}

#[test]
fn a_breach_with_rollback_returns_users_to_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path());
    let feeder = Feeder::start(&server.url);
    wait_for_healthy_zones(&server);
    start_drain(&server, "300ms", 1, "rollback");
    wait_for("two steps", Duration::from_secs(10), || {
        drain(&server, 1)["steps_done"].as_u64() >= Some(2)
    });
    feeder.errors_per_mille(200);
    wait_for("the rollback to finish", Duration::from_secs(15), || {
        drain(&server, 1)["state"] == "rolled_back"
    });
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(table["blue_units"], 50);
    let steps = step_targets(&server);
    assert_eq!(steps.last(), Some(&50), "{steps:?}");
    // Forward steps went down by 10, backward steps up by 10: never a jump.
    assert!(steps.windows(2).all(|w| w[0].abs_diff(w[1]) == 10), "{steps:?}");
}

#[test]
fn kill_9_in_the_middle_of_a_drain_resumes_at_the_persisted_step() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path());
    let feeder = Feeder::start(&server.url);
    wait_for_healthy_zones(&server);
    start_drain(&server, "400ms", 2, "pause");
    wait_for("two steps", Duration::from_secs(10), || {
        drain(&server, 1)["steps_done"].as_u64() >= Some(2)
    });
    let before = drain(&server, 1);
    server.kill9();

    let server = start_server(dir.path());
    feeder.follow(&server.url);
    let after = drain(&server, 1);
    assert_eq!(
        after["steps_done"], before["steps_done"],
        "the persisted step, no more and no less"
    );
    assert_eq!(after["state"], "running");
    wait_for("the drain to complete after the restart", Duration::from_secs(15), || {
        drain(&server, 1)["state"] == "completed"
    });
    assert_eq!(step_targets(&server), vec![40, 30, 20, 10, 0], "no step repeated or skipped");
    assert_eq!(drain(&server, 1)["steps_done"], 5);
}
