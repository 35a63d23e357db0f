//! Plan steps that call out, on the real binary: "promote the replica, wait until it is primary,
//! then evacuate az-b". A tiny HTTP server plays the database admin API: it records every call
//! (method, path, token header) and answers its precondition endpoint 2xx only once promoted.
//! The run completes, the action was called exactly once with the token, the audit has the call
//! without the token, and the evacuation came after the promotion. A control shows the wait
//! really waits (without the action the precondition stays false and nobody moves); a failing
//! action (500 every time) is tried `1 + retries` times and then fails the run with the status.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::traffic::{Spec, Traffic};
use common::*;
use serde_json::{Value, json};

const TOKEN: &str = "s3cret-admin-token-7f2a";

/// One request the admin API received.
#[derive(Clone, Debug)]
struct Call {
    method: String,
    path: String,
    authorization: Option<String>,
    at_ms: u64,
}

struct Admin {
    port: u16,
    calls: Arc<Mutex<Vec<Call>>>,
    promoted: Arc<AtomicBool>,
}

impl Admin {
    fn promote_calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.path.starts_with("/promote"))
            .cloned()
            .collect()
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The admin API: `/promote…` answers `promote_status` (and promotes on 2xx), `/primary`
/// answers 200 once promoted and 503 before.
fn admin(promote_status: &'static str) -> Admin {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let promoted = Arc::new(AtomicBool::new(false));
    let (log, flag) = (Arc::clone(&calls), Arc::clone(&promoted));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            let mut parts = request.split_whitespace();
            let method = parts.next().unwrap_or("").to_owned();
            let path = parts.next().unwrap_or("").to_owned();
            let mut authorization = None;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("authorization")
                {
                    authorization = Some(value.trim().to_owned());
                }
                line.clear();
            }
            let status = if path.starts_with("/promote") {
                log.lock().unwrap().push(Call {
                    method,
                    path: path.clone(),
                    authorization,
                    at_ms: now_ms(),
                });
                if promote_status.starts_with('2') {
                    flag.store(true, Ordering::SeqCst);
                }
                promote_status
            } else if flag.load(Ordering::SeqCst) {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    Admin { port, calls, promoted }
}

const TRAFFIC: Spec = Spec { rate: 3000.0, b_error_pct: 60, b_probes: 10, watch_peak: false };

fn start(dir: &std::path::Path) -> (Server, Traffic) {
    let file = dir.join("tidegate.toml");
    let toml = "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\n\
                [drain.evacuate]\nstep_percent = 25.0\ninterval = \"500ms\"\nmin_requests = 20\n";
    std::fs::write(&file, config_toml(toml)).unwrap();
    let server = Server::start_with_env(&file, &dir.join("data"), 0, &[("DB_ADMIN_TOKEN", TOKEN)]);
    let traffic = Traffic::start(&server.url, TRAFFIC);
    let ready = wait_until(Duration::from_secs(10), || {
        let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
        zones["zones"].as_array().unwrap().iter().all(|z| z["error_rate"].is_number())
    });
    assert!(ready, "both zones report health");
    std::thread::sleep(Duration::from_millis(2200));
    (server, traffic)
}

fn blue_percent(server: &Server) -> f64 {
    get_json(&format!("{}/v1/routing", server.url)).1["blue_percent"].as_f64().unwrap()
}

fn put_plan(server: &Server, name: &str, body: Value) -> (u16, Value) {
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    let mut body = body;
    body["expected_version"] = routing["version"].clone();
    body["reason"] = json!("prepared for the az-b incident");
    put_json(&format!("{}/v1/plans/{name}", server.url), OPERATOR_TOKEN, body)
}

fn run(server: &Server, name: &str) -> u64 {
    let (status, run) = post_json(
        &format!("{}/v1/plans/{name}/run", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "az-b fails"}),
    );
    assert_eq!(status, 201, "{run}");
    run["id"].as_u64().unwrap()
}

fn report(server: &Server, name: &str, id: u64) -> Value {
    get_json(&format!("{}/v1/plans/{name}/runs/{id}", server.url)).1
}

fn finished(server: &Server, name: &str, id: u64) -> Value {
    let done = wait_until(Duration::from_secs(40), || report(server, name, id)["active"] == false);
    let r = report(server, name, id);
    assert!(done, "run {id} did not finish: {r}");
    r
}

fn audit(server: &Server) -> Vec<Value> {
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=1000", server.url));
    let mut entries = audit["entries"].as_array().unwrap().clone();
    entries.reverse();
    entries
}

fn promote_step(port: u16, retries: u32) -> Value {
    json!({
        "type": "http", "name": "promote-replica",
        "url": format!("http://127.0.0.1:{port}/promote?zone=az-a"),
        "method": "POST", "token_env": "DB_ADMIN_TOKEN", "timeout": "2s", "retries": retries
    })
}

#[test]
fn a_plan_promotes_the_replica_waits_for_it_then_evacuates() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path());
    let db = admin("200 OK");
    let primary = json!([{"name": "db-primary-in-az-a",
        "http": format!("http://127.0.0.1:{}/primary", db.port)}]);

    // The control: without the action, the precondition is false and the wait really waits.
    let (status, stored) = put_plan(
        &server,
        "wait-only",
        json!({"rto": "1m", "preconditions": primary, "steps": [
            {"type": "wait_precondition", "name": "db-primary-in-az-a"},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0}
        ]}),
    );
    assert_eq!(status, 200, "{stored}");
    let control = run(&server, "wait-only");
    let held = wait_until(Duration::from_secs(10), || {
        report(&server, "wait-only", control)["hold_reason"]
            .as_str()
            .is_some_and(|h| h.contains("db-primary-in-az-a") && h.contains("false"))
    });
    assert!(held, "{}", report(&server, "wait-only", control));
    std::thread::sleep(Duration::from_millis(2000));
    assert_eq!(blue_percent(&server), 50.0, "nobody moves while the replica is not primary");
    assert!(!db.promoted.load(Ordering::SeqCst));
    let (status, aborted) = post_json(
        &format!("{}/v1/plans/wait-only/runs/{control}/abort", server.url),
        OPERATOR_TOKEN,
        json!({"reason": "control done"}),
    );
    assert_eq!(status, 200, "{aborted}");

    // The plan that calls out.
    let (status, stored) = put_plan(
        &server,
        "promote-then-evacuate",
        json!({"rto": "1m", "preconditions": primary, "steps": [
            promote_step(db.port, 2),
            {"type": "wait_precondition", "name": "db-primary-in-az-a"},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0}
        ]}),
    );
    assert_eq!(status, 200, "{stored}");
    assert_eq!(stored["steps"][0]["token_env"], "DB_ADMIN_TOKEN", "{stored}");
    // The dry run lists the call and does not make it.
    let (status, dry) = post_json(
        &format!("{}/v1/plans/promote-then-evacuate/dry-run", server.url),
        OPERATOR_TOKEN,
        json!({}),
    );
    assert_eq!(status, 200, "{dry}");
    let listed = dry["steps"][0]["description"].as_str().unwrap();
    assert!(
        listed.contains("POST")
            && listed.contains("/promote?zone=az-a")
            && listed.contains("not called"),
        "{dry}"
    );
    assert_eq!(dry["would_start"], true, "the step's precondition does not gate the start: {dry}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(db.promote_calls().is_empty(), "a dry run calls nothing");

    let started = Instant::now();
    let id = run(&server, "promote-then-evacuate");
    let r = finished(&server, "promote-then-evacuate", id);
    assert_eq!(r["outcome"], "completed", "{r}");
    assert_eq!(blue_percent(&server), 0.0);
    println!("promote -> wait -> evacuate completed in {} ms", started.elapsed().as_millis());

    let calls = db.promote_calls();
    assert_eq!(calls.len(), 1, "called exactly once: {calls:?}");
    assert_eq!(calls[0].method, "POST");
    assert_eq!(calls[0].path, "/promote?zone=az-a");
    assert_eq!(calls[0].authorization.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));

    // The report's timeline has the attempt: who, when, what answered.
    let attempts = r["timeline"][0]["calls"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{r}");
    assert_eq!(attempts[0]["status"], 200);
    assert_eq!(attempts[0]["ok"], true);
    assert!(attempts[0]["caller"].as_str().is_some_and(|c| !c.is_empty()), "{r}");

    // The audit has the claim and the result, with the URL and the status; the evacuation's
    // first step came after the promotion.
    let entries = audit(&server);
    let claim: Vec<&Value> = entries.iter().filter(|e| e["action"] == "plan_call_start").collect();
    let result: Vec<&Value> = entries.iter().filter(|e| e["action"] == "plan_call_done").collect();
    assert_eq!((claim.len(), result.len()), (1, 1), "{entries:?}");
    assert_eq!(claim[0]["by"], format!("plan:{id}"));
    assert!(claim[0]["to"].as_str().unwrap().contains("/promote?zone=az-a"), "{}", claim[0]);
    assert!(result[0]["to"].as_str().unwrap().contains("HTTP 200"), "{}", result[0]);
    let first_move =
        entries.iter().find(|e| e["action"] == "drain_step").expect("the evacuation stepped");
    assert!(first_move["at_ms"].as_u64() >= result[0]["at_ms"].as_u64());
    assert!(first_move["at_ms"].as_u64().unwrap() >= calls[0].at_ms, "evacuated after the call");
    let precondition_done = entries
        .iter()
        .position(|e| {
            e["action"] == "plan_step_done" && e["to"].as_str().unwrap().contains("precondition")
        })
        .unwrap();
    let result_at = entries.iter().position(|e| e["action"] == "plan_call_done").unwrap();
    let move_at = entries.iter().position(|e| e["action"] == "drain_step").unwrap();
    assert!(result_at < precondition_done && precondition_done < move_at, "{entries:?}");

    // No secret anywhere: audit, plan body, report, logs.
    let everything = format!(
        "{}{}{}{}",
        serde_json::to_string(&entries).unwrap(),
        get_json(&format!("{}/v1/plans/promote-then-evacuate", server.url)).1,
        r,
        server.stderr()
    );
    assert!(!everything.contains(TOKEN), "the token leaked");
    let log = std::fs::read_to_string(dir.path().join("data/tidegate.log")).unwrap();
    assert!(!log.contains(TOKEN), "the token is in the log");
    assert!(log.contains("plan_call_started"), "the claim is logged");
}

#[test]
fn a_failing_action_is_retried_then_fails_the_run_with_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _traffic) = start(dir.path());
    let db = admin("500 Internal Server Error");
    let primary = json!([{"name": "db-primary-in-az-a",
        "http": format!("http://127.0.0.1:{}/primary", db.port)}]);

    // Validation names the field.
    for (step, field) in [
        (json!({"type": "http", "name": "p", "url": "ftp://x/"}), "steps[0].url"),
        (
            json!({"type": "http", "name": "p", "url": "https://admin:pw@db/promote"}),
            "steps[0].url",
        ),
        (
            json!({"type": "http", "name": "p", "url": "https://db/", "token_env": "Bearer abc"}),
            "steps[0].token_env",
        ),
        (
            json!({"type": "http", "name": "p", "url": "https://db/", "method": "BREW"}),
            "steps[0].method",
        ),
        (
            json!({"type": "http", "name": "p", "url": "https://db/", "timeout": "5"}),
            "steps[0].timeout",
        ),
        (
            json!({"type": "http", "name": "p", "url": "https://db/", "retries": 99}),
            "steps[0].retries",
        ),
    ] {
        let (status, refused) = put_plan(&server, "bad", json!({"rto": "1m", "steps": [step]}));
        assert_eq!(status, 400, "{refused}");
        assert!(refused["detail"].as_str().unwrap().contains(field), "{field}: {refused}");
    }

    let (status, stored) = put_plan(
        &server,
        "promote-then-evacuate",
        json!({"rto": "1m", "preconditions": primary, "steps": [
            promote_step(db.port, 2),
            {"type": "wait_precondition", "name": "db-primary-in-az-a"},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0}
        ]}),
    );
    assert_eq!(status, 200, "{stored}");
    let started = Instant::now();
    let id = run(&server, "promote-then-evacuate");
    let r = finished(&server, "promote-then-evacuate", id);
    let took = started.elapsed();
    assert_eq!(r["outcome"], "failed", "{r}");
    let why = r["fail_reason"].as_str().unwrap();
    assert!(why.contains("HTTP 500") && why.contains("promote-replica"), "{why}");
    assert!(why.contains("3 time(s)"), "{why}");
    let calls = db.promote_calls();
    assert_eq!(calls.len(), 3, "1 attempt + 2 retries: {calls:?}");
    // Backoff: 1 s after the first failure, 2 s after the second.
    let gaps: Vec<u64> = calls.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    assert!(gaps[0] >= 1000 && gaps[1] >= 2000, "backoff between attempts: {gaps:?} ms");
    assert_eq!(blue_percent(&server), 50.0, "nobody moved");
    let attempts = r["timeline"][0]["calls"].as_array().unwrap();
    assert_eq!(attempts.len(), 3);
    assert!(attempts.iter().all(|a| a["status"] == 500 && a["ok"] == false), "{r}");
    let done = audit(&server).into_iter().filter(|e| e["action"] == "plan_call_done").count();
    assert_eq!(done, 3);
    println!("3 failed attempts, gaps {gaps:?} ms, run failed after {} ms", took.as_millis());
}
