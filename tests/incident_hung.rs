//! Convergence that fits the incident, on the real binary: az-b fails 60 % of its requests and
//! two of its watchers hang (their streams stay open, they never acknowledge). The evacuation of
//! az-b does not wait for them (they are the failure) and names them in its steps; a hung
//! watcher in the *receiving* zone still pauses it (the control: the gate still works). The final
//! step of a drain waits for convergence too: `completed` comes only after the last client
//! acknowledged the table that emptied the zone.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::traffic::{Spec, Traffic};
use common::*;
use serde_json::{Value, json};
use tidegate::client::{Identity, Router, RouterOptions};

/// Requests per second across both zones, split by the current share.
const RATE: f64 = 2000.0;

fn config() -> String {
    "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\nconvergence_timeout = \"3s\"\n\
     [drain.evacuate]\nstep_percent = 25.0\ninterval = \"300ms\"\nmin_requests = 20\n"
        .to_owned()
}

/// A watcher that registers, keeps its stream open and never acknowledges: a hung client.
fn hung_watcher(url: &str, id: &str, zone: &str) -> TcpStream {
    let addr = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /v1/routing/watch?subscriber_id={id}&zone={zone}&kind=gateway HTTP/1.1\r\n\
         Host: {addr}\r\nAuthorization: Bearer {OPERATOR_TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    // Read the head and the first event so the registration is certainly done, then hang.
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "watch opened");
    stream
}

fn routers(url: &str, zone: &str, n: usize) -> Vec<Router> {
    (0..n)
        .map(|i| {
            let options = RouterOptions {
                backoff_min: Duration::from_millis(20),
                backoff_max: Duration::from_millis(200),
                read_timeout: Duration::from_secs(3),
                token: Some(OPERATOR_TOKEN.into()),
                ..RouterOptions::default()
            };
            let identity = Identity {
                subscriber_id: format!("ok-{zone}-{i}"),
                zone: zone.into(),
                kind: "service".into(),
            };
            Router::connect(url, identity, options).unwrap()
        })
        .collect()
}

fn start(dir: &std::path::Path, b_error_pct: u64) -> (Server, Traffic) {
    let file = dir.join("tidegate.toml");
    std::fs::write(&file, config_toml(&config())).unwrap();
    let server = Server::start(&file, &dir.join("data"));
    let traffic = Traffic::start(
        &server.url,
        Spec { rate: RATE, b_error_pct, b_probes: 0, watch_peak: false },
    );
    let ready = wait_until(Duration::from_secs(10), || {
        let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
        zones["zones"].as_array().unwrap().iter().all(|z| z["error_rate"].is_number())
    });
    assert!(ready, "both zones report health");
    std::thread::sleep(Duration::from_millis(2200));
    (server, traffic)
}

fn drain(server: &Server, id: u64) -> Value {
    get_json(&format!("{}/v1/drains/{id}", server.url)).1
}

fn evacuate(server: &Server) -> u64 {
    let (status, drain) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "mode": "evacuate", "reason": "az-b fails 60%"}),
    );
    assert_eq!(status, 201, "{drain}");
    drain["id"].as_u64().unwrap()
}

fn wait_for_subscribers(server: &Server, n: usize) {
    let ok = wait_until(Duration::from_secs(10), || {
        let (_, subs) = get_json(&format!("{}/v1/subscribers", server.url));
        subs["subscribers"].as_array().is_some_and(|s| s.len() >= n)
    });
    assert!(ok, "{n} subscribers registered");
}

fn audit_reasons(server: &Server, action: &str, by: &str) -> Vec<String> {
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=200", server.url));
    audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == action && e["by"] == by)
        .map(|e| e["reason"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_evacuation_does_not_wait_for_hung_clients_of_the_zone_it_evacuates() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path(), 60);
    let _good_a = routers(&server.url, "az-a", 4);
    let _good_b = routers(&server.url, "az-b", 4);
    let _hung: Vec<TcpStream> =
        (1..=2).map(|i| hung_watcher(&server.url, &format!("hung-{i}"), "az-b")).collect();
    wait_for_subscribers(&server, 10);

    let started = Instant::now();
    let id = evacuate(&server);
    // Two steps of 25 % 300 ms apart, then the final table applied by every waited-for client.
    // Before the fix it paused after the 3 s convergence timeout at 25 %.
    let done = wait_until(Duration::from_secs(15), || {
        let d = drain(&server, id);
        d["state"] == "completed" || d["state"] == "paused"
    });
    let body = drain(&server, id);
    assert!(done, "{body}");
    assert_eq!(body["state"], "completed", "the evacuation finished: {body}");
    let took = started.elapsed();
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(routing["blue_percent"], 0.0, "every az-b user moved out");
    println!(
        "evacuation of az-b with 2 hung az-b watchers of 10: completed in {} ms (convergence timeout 3000 ms)",
        took.as_millis()
    );
    // Each step names whom it stopped waiting for.
    let steps = audit_reasons(&server, "drain_step", &format!("drain:{id}"));
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps.iter().any(|s| s.starts_with("step 2 of 2")), "{steps:?}");
    // The audit is newest first: the second step is the one after a step to wait for.
    for step in steps.iter().filter(|s| s.starts_with("step 2 of 2")) {
        assert!(
            step.contains("not waiting for 2 subscriber(s) of the evacuated zone az-b")
                && step.contains("hung-1")
                && step.contains("hung-2"),
            "{step}"
        );
    }
    let completed = audit_reasons(&server, "drain_complete", &format!("drain:{id}"));
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert!(completed[0].contains("hung-1"), "{}", completed[0]);
}

#[test]
fn a_hung_client_in_the_receiving_zone_still_pauses_the_evacuation() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path(), 60);
    let _good = routers(&server.url, "az-a", 4);
    let _hung = hung_watcher(&server.url, "hung-a", "az-a");
    wait_for_subscribers(&server, 5);
    let id = evacuate(&server);
    let paused = wait_until(Duration::from_secs(15), || drain(&server, id)["state"] == "paused");
    let body = drain(&server, id);
    assert!(paused, "{body}");
    assert_eq!(body["steps_done"], 1, "held after the first step: {body}");
    assert!(body["hold_reason"].as_str().unwrap().contains("hung-a"), "{body}");

    // Resume goes on without the straggler at once (it does not wait another full timeout).
    let resumed_at = Instant::now();
    let (status, answer) = post_json(
        &format!("{}/v1/drains/{id}/resume", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "hung-a is a dead gateway; go on"}),
    );
    assert_eq!(status, 200, "{answer}");
    let stepped = wait_until(Duration::from_secs(2), || drain(&server, id)["steps_done"] == 2);
    assert!(stepped, "the resumed evacuation stepped within 2 s: {}", drain(&server, id));
    println!(
        "resume after a convergence pause: next step {} ms later (timeout 3000 ms)",
        resumed_at.elapsed().as_millis()
    );
}

#[test]
fn the_final_step_waits_for_the_last_acknowledgement() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path(), 0);
    let _good = routers(&server.url, "az-a", 2);
    // A slow gateway: applies the newest version 1 s after it sees a new one.
    let _slow = hung_watcher(&server.url, "slow-gw", "az-a");
    wait_for_subscribers(&server, 3);
    let acks = Arc::new(Mutex::new(Vec::<(u64, Instant)>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let acker = {
        let (url, acks, stop) = (server.url.clone(), Arc::clone(&acks), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut acked = 0;
            while !stop.load(Ordering::SeqCst) {
                let version = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
                if version > acked {
                    std::thread::sleep(Duration::from_millis(1000));
                    let version =
                        get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
                    let (status, body) = post_json(
                        &format!("{url}/v1/subscribers/slow-gw/ack"),
                        OPERATOR_TOKEN,
                        json!({"version": version}),
                    );
                    assert_eq!(status, 200, "{body}");
                    acked = version;
                    acks.lock().unwrap().push((version, Instant::now()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let (status, body) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 50, "interval": "200ms",
               "guard": {"min_requests": 20}, "reason": "maintenance of az-b"}),
    );
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_u64().unwrap();
    let completed =
        wait_until(Duration::from_secs(15), || drain(&server, id)["state"] == "completed");
    let completed_at = Instant::now();
    assert!(completed, "{}", drain(&server, id));
    stop.store(true, Ordering::SeqCst);
    acker.join().unwrap();
    // The version the final step made, from the audit; the slow gateway's first
    // acknowledgement of it (or of a newer one) came before the drain was seen completed. (Its
    // later acknowledgements, of the completion itself, may come after.)
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=200", server.url));
    let final_version = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "drain_step" && e["by"] == format!("drain:{id}"))
        .filter_map(|e| e["version"].as_u64())
        .max()
        .expect("the drain stepped");
    let acked_at = acks
        .lock()
        .unwrap()
        .iter()
        .find(|(v, _)| *v >= final_version)
        .map(|(_, at)| *at)
        .expect("the slow gateway acknowledged the final table");
    assert!(
        acked_at <= completed_at,
        "completed only after the slow gateway acknowledged the final table"
    );
    let done = audit_reasons(&server, "drain_complete", &format!("drain:{id}"));
    assert!(done[0].contains("every subscriber applied the final table"), "{done:?}");
}
