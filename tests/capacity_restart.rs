//! Capacity that cannot be fooled by a restart, on the real binary: right after a `kill -9` and
//! a restart the outcome window holds a few batches, and the load it read was 199-1 520 rps for a
//! zone carrying 2 000; a move to 4 000 rps against 3 150 allowed was accepted 15 times of 15.
//! Now a load the detection window has not covered is unknown, and unknown refuses.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::traffic::{Spec, Traffic};
use common::*;
use serde_json::{Value, json};

const RATE: f64 = 4000.0;

fn config() -> String {
    "[health]\nwindow = \"4s\"\n[capacity]\nheadroom = 0.1\n[zones.az-a]\ncapacity_rps = 3500\n"
        .to_owned()
}

fn dial(url: &str, percent: f64) -> (u16, Value) {
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": percent, "expected_version": routing["version"], "reason": "capacity test"}),
    )
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn right_after_a_restart_capacity_refuses_instead_of_reading_a_low_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config_toml(&config())).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let port = Arc::new(AtomicU64::new(u64::from(port_of(&server.url))));
    let feeding = Arc::clone(&port);
    let spec = Spec { rate: RATE, b_error_pct: 0, b_probes: 0, watch_peak: false };
    let traffic = Traffic::start_with(
        move || format!("http://127.0.0.1:{}", feeding.load(Ordering::SeqCst)),
        spec,
    );
    // Warm: the whole move is refused on its measured load, a small one fits (the control).
    std::thread::sleep(Duration::from_millis(4500));
    let (status, body) = dial(&server.url, 0.0);
    assert_eq!((status, body["error"].as_str()), (409, Some("insufficient_capacity")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("above its allowed 3150"), "{body}");
    let (status, body) = dial(&server.url, 45.0);
    assert_eq!(status, 200, "a move that fits is accepted: {body}");

    let url = server.url.clone();
    server.kill9();
    let server = Server::start_at(&file, &dir.path().join("data"), port_of(&url));
    let restarted = Instant::now();
    let mut tries = 0;
    let mut reasons = Vec::new();
    while restarted.elapsed() < Duration::from_secs(3) {
        let (status, body) = dial(&server.url, 0.0);
        tries += 1;
        assert_ne!(
            status,
            200,
            "try {tries}, {} ms after the restart: {body}",
            restarted.elapsed().as_millis()
        );
        assert_eq!(body["error"], "insufficient_capacity", "{body}");
        reasons.push(body["detail"].as_str().unwrap().to_owned());
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(tries >= 10, "{tries} tries");
    assert!(reasons.iter().any(|r| r.contains("not measured yet")), "{reasons:?}");
    println!("{tries} moves to 4 000 rps in the 3 s after kill -9 and restart: 0 accepted");
    drop(traffic);
}
