//! Triggers and declared plans on three replicas of one Kafka command topic (real broker, real
//! binaries started together): the declared plan is appended once, and with az-b failing on
//! every replica, every replica's trigger fires but exactly one run starts (the start is a
//! compare-and-set and is refused while a run is active), signed `auto`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::kafka;
use common::*;
use serde_json::{Value, json};

fn replica_config(dir: &Path, topic: &str, n: usize) -> std::path::PathBuf {
    let extra = format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n\
         [node]\nid = \"r{n}\"\nzone = \"zone-{n}\"\n\
         [health]\nwindow = \"1s\"\n[drain]\ntick = \"50ms\"\n\
         [drain.evacuate]\nstep_percent = 50.0\ninterval = \"200ms\"\nmin_requests = 5\n\
         [plans]\ntriggers = true\n\
         [plans.az-b-failing]\nrto = \"1m\"\ncooldown = \"1h\"\n\
         steps = [{{type = \"evacuate\", zone = \"az-b\", to_percent = 0}}]\n\
         trigger = {{zone_down_for = \"2s\"}}\n",
        kafka::bootstrap()
    );
    let file = dir.join(format!("r{n}.toml"));
    std::fs::write(&file, config_toml(&extra)).unwrap();
    file
}

fn audit(server: &Server) -> Vec<Value> {
    let (_, body) = get_json(&format!("{}/v1/audit?limit=1000", server.url));
    body["entries"].as_array().unwrap().clone()
}

/// The value of a series exported exactly as `series`, 0 when absent.
fn metric(server: &Server, series: &str) -> f64 {
    let mut response = agent().get(&format!("{}/metrics", server.url)).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn runs(server: &Server) -> Vec<Value> {
    get_json(&format!("{}/v1/plans/az-b-failing/runs", server.url)).1["runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn three_replicas_append_the_declared_plan_once_and_start_one_automatic_run() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-trigger");
    let configs: Vec<_> = (1..=3).map(|n| replica_config(dir.path(), &topic, n)).collect();
    // Started together: each compares the declared plan with the log and may try to append it.
    let replicas: Vec<Server> = std::thread::scope(|s| {
        let handles: Vec<_> = configs
            .iter()
            .enumerate()
            .map(|(i, file)| {
                let data = dir.path().join(format!("data-{}", i + 1));
                s.spawn(move || Server::start(file, &data))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &replicas {
        assert!(wait_until(Duration::from_secs(10), || {
            get_json(&format!("{}/v1/plans/az-b-failing", r.url)).1["revision"] == 1
        }));
    }
    let puts = |r: &Server| audit(r).iter().filter(|e| e["by"] == "config").count();
    assert_eq!(puts(&replicas[0]), 1, "appended once: {:?}", audit(&replicas[0]));

    // az-b fails on every replica (outcomes are per replica): every trigger loop fires.
    let stop = Arc::new(AtomicBool::new(false));
    let feeders: Vec<_> = replicas
        .iter()
        .map(|r| {
            let (url, stop) = (r.url.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let agent = agent();
                while !stop.load(Ordering::SeqCst) {
                    let body = json!([
                        {"zone": "az-b", "color": "blue", "ok": 0, "error": 20},
                        {"zone": "az-a", "color": "green", "ok": 20, "error": 0}
                    ]);
                    let _ = agent
                        .post(&format!("{url}/v1/outcomes"))
                        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                        .send_json(&body);
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(20), || !runs(&replicas[0]).is_empty()),
        "the trigger fires"
    );
    // Long enough for every replica to have fired and for the run to finish.
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::SeqCst);
    for f in feeders {
        f.join().unwrap();
    }
    let mut fired = 0.0;
    for r in &replicas {
        let started = metric(r, "tidegate_plan_triggers_total{plan=\"az-b-failing\"}");
        let refused: f64 = ["busy", "start_refused", "cooldown", "once_per_incident"]
            .iter()
            .map(|reason| {
                metric(r, &format!("tidegate_plan_trigger_refusals_total{{plan=\"az-b-failing\",reason=\"{reason}\"}}"))
            })
            .sum();
        assert!(started + refused >= 1.0, "{}'s trigger saw az-b down", r.url);
        fired += started;
        assert_eq!(puts(r), 1);
        let list = runs(r);
        assert_eq!(list.len(), 1, "exactly one run on {}: {list:?}", r.url);
        assert_eq!(list[0]["started_by"], "auto");
        let starts = audit(r).iter().filter(|e| e["action"] == "plan_run_start").count();
        assert_eq!(starts, 1, "one StartPlanRun in the log");
    }
    assert_eq!(fired, 1.0, "one replica started the run");
}
