//! A drain across three replicas on one Kafka topic (real broker, real binaries): the drain runs
//! on every replica, a replica is killed with SIGKILL mid-drain and another is paused with
//! SIGSTOP past two steps and woken; the drain goes on within two step intervals, and the
//! decided history holds every step of the plan exactly once, in order, never early.

mod common;
mod ha_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, get_json, kafka, wait_until};
use ha_support::{Replicas, converge, distribution, drain_steps, feed_outcomes, now_ms};
use serde_json::{Value, json};

const INTERVAL_MS: u64 = 1000;
const CONFIG: &str = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n";

fn drain(url: &str) -> Value {
    get_json(&format!("{url}/v1/drains/1")).1
}

#[test]
fn a_drain_goes_on_after_its_replica_is_killed_and_a_paused_replica_cannot_repeat_a_step() {
    let topic = kafka::unique("ha-drain");
    let mut replicas = Replicas::start(&kafka::bootstrap(), &topic, 3, CONFIG);
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed_outcomes(replicas.urls.clone(), Arc::clone(&stop));
    for url in &replicas.urls {
        let healthy = wait_until(Duration::from_secs(10), || {
            let (_, zones) = get_json(&format!("{url}/v1/zones"));
            zones["zones"].as_array().unwrap().iter().all(|z| z["error_rate"].is_number())
        });
        assert!(healthy, "{url} never saw both zones' health");
    }
    let (status, body) = common::post_json(
        &format!("{}/v1/drains", replicas.urls[0]),
        OPERATOR_TOKEN,
        json!({
            "zone": "az-b", "target_percent": 0, "step_percent": 5, "interval": format!("{INTERVAL_MS}ms"),
            "guard": {"max_error_rate": 0.02, "min_requests": 100, "breaches": 2, "on_breach": "pause"},
            "reason": "ha drain"
        }),
    );
    assert_eq!(status, 201, "{body}");
    // Plan: 50 -> 45 -> ... -> 0 blue units, ten steps.
    let plan: Vec<u64> = (0..10).map(|i| 45 - 5 * i).collect();

    // Two steps in, kill -9 a replica (the audit names the drain, not the proposing replica, so
    // replica 1, where the drain was started).
    let url2 = replicas.urls[1].clone();
    assert!(
        wait_until(Duration::from_secs(10), || drain_steps(&url2).len() >= 2),
        "no second step"
    );
    replicas.kill9(0);
    let killed_ms = now_ms();
    let killed = Instant::now();
    assert!(
        wait_until(Duration::from_secs(5), || drain_steps(&url2)
            .iter()
            .any(|(_, at)| *at > killed_ms)),
        "no step after the kill: {:?}",
        drain_steps(&url2)
    );
    let resumed_after = killed.elapsed();

    // Pause replica 2 for more than two intervals, wake it: its runner's state is stale.
    let before_pause = drain_steps(&url2).len();
    replicas.signal(1, "-STOP");
    std::thread::sleep(Duration::from_millis(2 * INTERVAL_MS + 800));
    replicas.signal(1, "-CONT");
    let url3 = replicas.urls[2].clone();
    assert!(
        drain_steps(&url3).len() >= before_pause + 2,
        "the drain stalled while replica 2 slept"
    );
    // Replica 1 comes back and replays; the drain completes.
    replicas.restart(0);
    let done = wait_until(Duration::from_secs(20), || drain(&url3)["state"] == "completed");
    assert!(done, "the drain did not complete: {}", drain(&url3));
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    converge(&replicas, Duration::from_secs(10));

    // Every replica applied each step of the plan once, in order, and never before it was due.
    let applied = drain_steps(&url3);
    let targets: Vec<u64> = applied.iter().map(|(to, _)| *to).collect();
    assert_eq!(targets, plan, "steps repeated, skipped or out of order: {applied:?}");
    for url in &replicas.urls {
        assert_eq!(drain_steps(url), applied, "{url} decided other steps");
    }
    let gaps: Vec<Duration> =
        applied.windows(2).map(|w| Duration::from_millis(w[1].1 - w[0].1)).collect();
    for (i, gap) in gaps.iter().enumerate() {
        assert!(gap.as_millis() as u64 >= INTERVAL_MS, "step {} came early: {gaps:?}", i + 2);
    }
    // The step after the kill came within two intervals of the one before it.
    let after_kill = applied.iter().position(|(_, at)| *at > killed_ms).unwrap();
    let across = applied[after_kill].1 - applied[after_kill - 1].1;
    assert!(across <= 2 * INTERVAL_MS, "the drain took {across} ms to go on after the kill");
    println!(
        "ha drain: interval {INTERVAL_MS} ms; the step after the kill came {across} ms after the one before it, {} ms after the kill",
        resumed_after.as_millis()
    );
    println!("ha drain: {}", distribution("gap between consecutive steps", &gaps));
}
