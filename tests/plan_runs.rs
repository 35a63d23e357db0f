//! Plan runs on the real binary. az-b fails 60 % of its requests; the plan "evacuate-az-b"
//! (evacuate az-b, then wait for its MQ half) is refused while its HTTP precondition is false,
//! drilled (run, hold, restore, report marked as a drill), and run for real: `kill -9` in the
//! middle of the run, and the restarted process resumes it at its persisted step, with every step
//! started and done exactly once in the audit. A PromQL precondition is checked against a real
//! Prometheus. Prints the switch time (run start to the last step converged) against the RTO.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::traffic::{Spec, Traffic};
use common::*;
use serde_json::{Value, json};

/// A tiny HTTP endpoint answering `status` (e.g. "200 OK") and `body` to every request.
fn serve(status: Arc<Mutex<(String, String)>>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let (status, body) = status.lock().unwrap().clone();
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Requests per second across both zones, split by the current share.
const RATE: f64 = 4000.0;

fn config(capacity_rps: u32) -> String {
    format!(
        "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\n\
         [drain.evacuate]\nstep_percent = 25.0\ninterval = \"1s\"\nmin_requests = 20\n\
         [capacity]\nheadroom = 0.1\n[zones.az-a]\ncapacity_rps = {capacity_rps}\n"
    )
}

/// az-b fails 60 % of its own requests (until a test changes it); synthetic probes keep az-b
/// observable once it has no users (a drill restores into it only when its health is known and
/// good); az-a's peak load is watched.
const TRAFFIC: Spec = Spec { rate: RATE, b_error_pct: 60, b_probes: 10, watch_peak: true };

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

fn blue_percent(server: &Server) -> f64 {
    get_json(&format!("{}/v1/routing", server.url)).1["blue_percent"].as_f64().unwrap()
}

fn report(server: &Server, id: u64) -> Value {
    get_json(&format!("{}/v1/plans/evacuate-az-b/runs/{id}", server.url)).1
}

fn finished(server: &Server, id: u64) -> Value {
    let done = wait_until(Duration::from_secs(40), || report(server, id)["active"] == false);
    let r = report(server, id);
    assert!(done, "run {id} did not finish: {r}");
    r
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_plan_is_refused_drilled_and_run_through_a_kill_9_of_the_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let (server, traffic) = start(dir.path(), 5000);
    // Services in az-a that acknowledge every table: the report's convergence times are
    // measured from their acknowledgements (with nobody acknowledging there is no time).
    let _routers: Vec<tidegate::client::Router> = (0..2)
        .map(|i| {
            let options = tidegate::client::RouterOptions {
                backoff_min: Duration::from_millis(20),
                backoff_max: Duration::from_millis(200),
                read_timeout: Duration::from_secs(3),
                token: Some(OPERATOR_TOKEN.into()),
                ..Default::default()
            };
            let identity = tidegate::client::Identity {
                subscriber_id: format!("svc-a-{i}"),
                zone: "az-a".into(),
                kind: "service".into(),
            };
            tidegate::client::Router::connect(&server.url, identity, options).unwrap()
        })
        .collect();
    let db = Arc::new(Mutex::new(("503 Service Unavailable".to_owned(), "replica".to_owned())));
    let db_port = serve(Arc::clone(&db));
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    let plan = json!({
        "expected_version": routing["version"], "reason": "prepared for az-b failing", "rto": "30s",
        "preconditions": [{"name": "db-primary-in-az-a", "http": format!("http://127.0.0.1:{db_port}/primary")}],
        "steps": [
            {"type": "evacuate", "zone": "az-b", "to_percent": 0},
            {"type": "wait_consumed", "zone": "az-b"}
        ]
    });
    let (status, stored) =
        put_json(&format!("{}/v1/plans/evacuate-az-b", server.url), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{stored}");
    let run_url = format!("{}/v1/plans/evacuate-az-b/run", server.url);
    let drill_url = format!("{}/v1/plans/evacuate-az-b/drill", server.url);

    // The database primary is still in az-b: the run is refused and names the precondition.
    let (status, refused) = post_json(
        &run_url,
        OPERATOR_TOKEN,
        json!({"reason": "az-b fails 60%", "plan_revision": 1}),
    );
    assert_eq!(
        (status, refused["error"].as_str()),
        (409, Some("precondition_failed")),
        "{refused}"
    );
    assert_eq!(
        (refused["precondition"].as_str(), &refused["value"]),
        (Some("db-primary-in-az-a"), &json!(false))
    );
    assert_eq!(blue_percent(&server), 50.0, "a refused run moves nobody");
    *db.lock().unwrap() = ("200 OK".to_owned(), "primary".to_owned());

    // Drills: run, hold, restore; the report is marked as a drill.
    let mut converged = Vec::new();
    let mut last_drill = 0;
    for i in 0..3 {
        let (status, drill) = post_json(
            &drill_url,
            OPERATOR_TOKEN,
            json!({"reason": format!("quarterly drill {i}"), "hold": "500ms"}),
        );
        assert_eq!(status, 201, "{drill}");
        let id = drill["id"].as_u64().unwrap();
        if i == 0 {
            // During the incident (az-b still failing) the drill does not restore users into
            // az-b: it holds, and says why, until az-b is healthy again.
            let held = wait_until(Duration::from_secs(20), || {
                report(&server, id)["hold_reason"]
                    .as_str()
                    .is_some_and(|h| h.contains("drill restore held: az-b fails"))
            });
            assert!(held, "{}", report(&server, id));
            std::thread::sleep(Duration::from_millis(1000));
            assert_eq!(blue_percent(&server), 0.0, "no restore into a failing zone");
            traffic.set_b_error_pct(0);
        }
        let r = finished(&server, id);
        assert_eq!(
            (r["drill"].as_bool(), r["outcome"].as_str()),
            (Some(true), Some("completed")),
            "{r}"
        );
        let timeline = r["timeline"].as_array().unwrap();
        assert_eq!(timeline.len(), 3, "two steps and the restore: {r}");
        assert_eq!(timeline[2]["phase"], "restore");
        assert_eq!(blue_percent(&server), 50.0, "the drill restored the table it started from");
        assert_eq!(r["met"], true, "{r}");
        let az_b = r["errors"].as_array().unwrap().iter().find(|z| z["zone"] == "az-b").cloned();
        if i == 0 {
            assert!(az_b.unwrap()["max_error_rate"].as_f64().unwrap() > 0.5, "{r}");
        }
        assert_eq!(r["timeline"][0]["convergence_measured"], true, "{r}");
        converged.push(r["last_converged_after_ms"].as_u64().unwrap());
        last_drill = id;
        std::thread::sleep(Duration::from_millis(2200)); // a fresh health window
    }
    let (_, plan) = get_json(&format!("{}/v1/plans/evacuate-az-b", server.url));
    assert_eq!(plan["last_drill"]["id"], last_drill, "{plan}");

    // The real run, with a kill -9 after its first drain step.
    traffic.set_b_error_pct(60);
    std::thread::sleep(Duration::from_millis(2200)); // a window of az-b failing again
    let started = Instant::now();
    let (status, run) = post_json(&run_url, OPERATOR_TOKEN, json!({"reason": "az-b fails 60%"}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_u64().unwrap();
    assert!(wait_until(Duration::from_secs(20), || blue_percent(&server) == 25.0));
    let port = server.port();
    server.kill9();
    let file = dir.path().join("tidegate.toml");
    let server = Server::start_at(&file, &dir.path().join("data"), port);
    let r = report(&server, id);
    assert_eq!((r["state"].as_str(), r["step"].as_u64()), (Some("running"), Some(0)), "{r}");
    let r = finished(&server, id);
    let took = started.elapsed();
    assert_eq!(r["outcome"], "completed", "{r}");
    assert_eq!(blue_percent(&server), 0.0);
    // Every step started and done exactly once, in order; the drain stepped exactly twice.
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=500", server.url));
    let mut entries: Vec<&Value> = audit["entries"].as_array().unwrap().iter().collect();
    entries.sort_by_key(|e| e["version"].as_u64());
    let by_run: Vec<String> = entries
        .iter()
        .filter(|e| e["by"] == format!("plan:{id}"))
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        by_run,
        ["plan_step_start", "plan_step_done", "plan_step_start", "plan_step_done"],
        "{audit}"
    );
    let drain_id = r["timeline"][0]["drain_id"].as_u64().unwrap();
    let steps = entries
        .iter()
        .filter(|e| e["action"] == "drain_step" && e["by"] == format!("drain:{drain_id}"))
        .count();
    assert_eq!(steps, 2, "no drain step repeated or skipped across the kill -9");
    converged.push(r["last_converged_after_ms"].as_u64().unwrap());
    println!(
        "real run (kill -9 after step 1): {} ms wall clock, switch {} ms, last step converged after {} ms, RTO {} ms: {}",
        took.as_millis(),
        r["switch_ms"],
        r["last_converged_after_ms"],
        r["rto_ms"],
        r["rto_verdict"]
    );
    let mut sorted = converged.clone();
    sorted.sort_unstable();
    println!(
        "plan run to last step converged over {} runs (3 drills + 1 run with a kill -9): p50 {} ms, min {} ms, max {} ms (RTO 30000 ms); each: {converged:?}",
        sorted.len(),
        percentile(&sorted, 0.5),
        sorted[0],
        sorted[sorted.len() - 1]
    );
    let peak = traffic.peak_az_a();
    println!("az-a peak load {peak:.0} rps (allowed 4500, capacity 5000)");
    assert!(peak <= 5000.0, "az-a stayed under its capacity: {peak}");
    let metrics = agent()
        .get(&format!("{}/metrics", server.url))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let counted = metrics.lines().any(|l| {
        l.starts_with("tidegate_plan_runs_total{")
            && l.contains("plan=\"evacuate-az-b\"")
            && l.contains("outcome=\"completed\"")
            && l.contains("drill=\"false\"")
            && l.ends_with(" 1")
    });
    assert!(counted, "the restarted process counted the run it finished:\n{metrics}");
}

#[test]
fn a_false_promql_precondition_refuses_the_run_until_prometheus_sees_it_true() {
    let db =
        Arc::new(Mutex::new(("200 OK".to_owned(), "db_primary{zone=\"az-a\"} 0\n".to_owned())));
    let port = serve(Arc::clone(&db));
    let dir = tempfile::tempdir().unwrap();
    let prometheus =
        Prometheus::start(&dir.path().join("prometheus"), &format!("127.0.0.1:{port}"), None);
    let toml = format!(
        "[drain]\ntick = \"50ms\"\n[health]\nsource = \"prometheus\"\n[health.prometheus]\nurl = \"{}\"\n",
        prometheus.url
    );
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config_toml(&toml)).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    let plan = json!({
        "expected_version": routing["version"], "reason": "az-b failing", "rto": "1m",
        "preconditions": [{"name": "db-primary-in-az-a", "promql": "db_primary{zone=\"az-a\"} == 1"}],
        "steps": [{"type": "dial", "blue_percent": 0}]
    });
    let (status, _) =
        put_json(&format!("{}/v1/plans/az-b-failing", server.url), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200);
    let run_url = format!("{}/v1/plans/az-b-failing/run", server.url);
    let dry_url = format!("{}/v1/plans/az-b-failing/dry-run", server.url);
    // Prometheus has scraped the target at least once (the value is 0: false, not unknown).
    assert!(wait_until(Duration::from_secs(20), || {
        prometheus.query("db_primary")["data"]["result"].as_array().is_some_and(|r| !r.is_empty())
    }));
    let (status, refused) = post_json(&run_url, OPERATOR_TOKEN, json!({"reason": "evacuate"}));
    assert_eq!(
        (status, refused["error"].as_str()),
        (409, Some("precondition_failed")),
        "{refused}"
    );
    assert!(refused["detail"].as_str().unwrap().contains("db_primary"), "{refused}");
    assert_eq!(blue_percent(&server), 50.0);
    db.lock().unwrap().1 = "db_primary{zone=\"az-a\"} 1\n".to_owned();
    assert!(wait_until(Duration::from_secs(20), || {
        post_json(&dry_url, OPERATOR_TOKEN, json!({})).1["would_start"] == true
    }));
    let (status, run) = post_json(&run_url, OPERATOR_TOKEN, json!({"reason": "evacuate"}));
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_u64().unwrap();
    let url = format!("{}/v1/plans/az-b-failing/runs/{id}", server.url);
    assert!(wait_until(Duration::from_secs(20), || get_json(&url).1["outcome"] == "completed"));
    assert_eq!(blue_percent(&server), 0.0);
}

/// "Wait for the replica promotion, then evacuate": the promotion has not happened when the run
/// starts. The run starts (the precondition gates the step that waits for it, not the start),
/// holds at that step naming the precondition, and evacuates once the promotion is made during
/// the run. Before, every precondition was checked before the run and this plan was refused.
#[test]
fn a_plan_waits_for_a_promotion_made_during_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path(), 5000);
    let db = Arc::new(Mutex::new(("503 Service Unavailable".to_owned(), "replica".to_owned())));
    let db_port = serve(Arc::clone(&db));
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    let plan = json!({
        "expected_version": routing["version"], "reason": "promote, then evacuate", "rto": "30s",
        "preconditions": [{"name": "db-primary-in-az-a", "http": format!("http://127.0.0.1:{db_port}/primary")}],
        "steps": [
            {"type": "wait_precondition", "name": "db-primary-in-az-a"},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0}
        ]
    });
    let (status, stored) =
        put_json(&format!("{}/v1/plans/evacuate-az-b", server.url), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{stored}");
    let (status, run) = post_json(
        &format!("{}/v1/plans/evacuate-az-b/run", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "az-b fails; the DBA promotes az-a's replica now"}),
    );
    assert_eq!(status, 201, "the run starts while the precondition is still false: {run}");
    let id = run["id"].as_u64().unwrap();
    let held = wait_until(Duration::from_secs(10), || {
        report(&server, id)["hold_reason"]
            .as_str()
            .is_some_and(|h| h.contains("db-primary-in-az-a"))
    });
    assert!(held, "{}", report(&server, id));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(blue_percent(&server), 50.0, "nobody moves before the promotion");
    let promoted = Instant::now();
    *db.lock().unwrap() = ("200 OK".to_owned(), "primary".to_owned());
    let r = finished(&server, id);
    assert_eq!(r["outcome"], "completed", "{r}");
    assert_eq!(blue_percent(&server), 0.0);
    println!("promotion -> evacuation completed: {} ms", promoted.elapsed().as_millis());
}
