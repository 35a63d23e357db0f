//! A plan run across three replicas on one Kafka topic (real broker, real binaries): the plan
//! runner works on every replica, so while the run evacuates az-b the replica it was started on is
//! killed with SIGKILL and another is paused with SIGSTOP and woken. The run completes on the
//! others, and every replica's decided history holds each run step started and done exactly once,
//! in order, and each drain step once: duplicates proposed by several runners are refused at
//! apply (a step is accepted only as exactly the run's next one).

mod common;
mod ha_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, get_json, kafka, post_json, put_json, wait_until};
use ha_support::{Replicas, audit_entries, converge, drain_steps, feed_outcomes, now_ms};
use serde_json::json;

const INTERVAL_MS: u64 = 600;
const CONFIG: &str = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n\
    [drain.evacuate]\nstep_percent = 10.0\ninterval = \"600ms\"\nmin_requests = 20\n";

/// The run's own records on a replica: (action, to), oldest first.
fn run_records(url: &str, id: u64) -> Vec<(String, String)> {
    audit_entries(url)
        .iter()
        .filter(|e| e["by"] == format!("plan:{id}"))
        .map(|e| (e["action"].as_str().unwrap().to_owned(), e["to"].to_string()))
        .collect()
}

#[test]
fn a_plan_run_goes_on_after_its_replica_is_killed_and_no_step_is_applied_twice() {
    let topic = kafka::unique("ha-plan-run");
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
    let url0 = replicas.urls[0].clone();
    let (_, plans) = get_json(&format!("{url0}/v1/plans"));
    let (status, body) = put_json(
        &format!("{url0}/v1/plans/evacuate-az-b"),
        OPERATOR_TOKEN,
        json!({
            "expected_version": plans["version"], "reason": "ha plan run", "rto": "1m",
            "steps": [
                {"type": "evacuate", "zone": "az-b", "to_percent": 0},
                {"type": "pin", "user_id": "tester-1", "color": "green"}
            ]
        }),
    );
    assert_eq!(status, 200, "{body}");
    let (status, run) = post_json(
        &format!("{url0}/v1/plans/evacuate-az-b/run"),
        OPERATOR_TOKEN,
        json!({"reason": "az-b is failing"}),
    );
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_u64().unwrap();

    // Two drain steps in, kill -9 the replica the run was started on.
    let url2 = replicas.urls[2].clone();
    assert!(wait_until(Duration::from_secs(15), || drain_steps(&url2).len() >= 2), "no step");
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
    // Pause replica 1 past two intervals and wake it: its runner's view is stale.
    replicas.signal(1, "-STOP");
    std::thread::sleep(Duration::from_millis(2 * INTERVAL_MS + 300));
    replicas.signal(1, "-CONT");
    let report = || get_json(&format!("{url2}/v1/plans/evacuate-az-b/runs/{id}")).1;
    let done = wait_until(Duration::from_secs(30), || report()["state"] == "completed");
    assert!(done, "the run did not complete: {}", report());
    replicas.restart(0);
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    converge(&replicas, Duration::from_secs(15));

    // Every replica decided the same run history: each step started and done once, in order.
    let records = run_records(&url2, id);
    let actions: Vec<&str> = records.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        ["plan_step_start", "plan_step_done", "plan_step_start", "plan_step_done"],
        "{records:?}"
    );
    let steps = drain_steps(&url2);
    let targets: Vec<u64> = steps.iter().map(|(to, _)| *to).collect();
    assert_eq!(targets, [40, 30, 20, 10, 0], "drain steps repeated, skipped or out of order");
    for url in &replicas.urls {
        assert_eq!(run_records(url, id), records, "{url} decided another run history");
        assert_eq!(drain_steps(url), steps, "{url} decided other drain steps");
    }
    let after_kill = steps.iter().position(|(_, at)| *at > killed_ms).unwrap();
    let across = steps[after_kill].1 - steps[after_kill - 1].1;
    assert!(across <= 2 * INTERVAL_MS, "the run took {across} ms to go on after the kill");
    let r = report();
    assert_eq!(r["outcome"], "completed", "{r}");
    let (_, routing) = get_json(&format!("{url2}/v1/routing"));
    assert_eq!(routing["blue_percent"], 0.0, "{routing}");
    assert_eq!(routing["pins"]["tester-1"], "green", "{routing}");
    println!(
        "ha plan run: interval {INTERVAL_MS} ms; the drain step after the kill came {across} ms after the one before it ({} ms after the kill); switch {} ms against an RTO of {} ms",
        resumed_after.as_millis(),
        r["switch_ms"],
        r["rto_ms"]
    );
}
