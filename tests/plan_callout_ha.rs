//! An HTTP step on two replicas of one Kafka command topic (real broker, real binaries): both
//! plan runners tick on the same run, both decide the same claim, and the action is called once
//! per run. The admin API answers the promotion after 300 ms, so the other replica ticks (every
//! 50 ms) through the whole call while the claim is live.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::kafka;
use common::*;
use serde_json::{Value, json};

const TOKEN: &str = "ha-admin-token-91c3";

/// The admin API: `/promote` (after 300 ms) records the call and its authorization header and
/// promotes; `/primary` answers 200 once promoted, 503 before.
/// The authorization header of each promote call, in order.
type Calls = Arc<Mutex<Vec<Option<String>>>>;

fn admin() -> (u16, Calls, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let promoted = Arc::new(AtomicBool::new(false));
    let (log, flag) = (Arc::clone(&calls), Arc::clone(&promoted));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (log, flag) = (Arc::clone(&log), Arc::clone(&flag));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    return;
                }
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
                // Whatever follows the head (nothing: the call sends `content-length: 0`); read so
                // that closing never resets the connection under the caller.
                let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
                let mut rest = Vec::new();
                let _ = std::io::Read::read_to_end(&mut reader, &mut rest);
                if !rest.is_empty() {
                    eprintln!(
                        "admin API: {} byte(s) after the head: {:?}",
                        rest.len(),
                        String::from_utf8_lossy(&rest)
                    );
                }
                let status = if request.contains("/promote") {
                    log.lock().unwrap().push(authorization);
                    std::thread::sleep(Duration::from_millis(300));
                    flag.store(true, Ordering::SeqCst);
                    "200 OK"
                } else if flag.load(Ordering::SeqCst) {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            });
        }
    });
    (port, calls, promoted)
}

fn replica_config(dir: &Path, topic: &str, n: usize, admin: u16) -> std::path::PathBuf {
    let extra = format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n\
         [node]\nid = \"r{n}\"\nzone = \"zone-{n}\"\n\
         [drain]\ntick = \"50ms\"\n\
         [plans.promote-then-switch]\nrto = \"1m\"\n\
         preconditions = [{{name = \"primary\", http = \"http://127.0.0.1:{admin}/primary\"}}]\n\
         steps = [\n\
         {{type = \"http\", name = \"promote-replica\", url = \"http://127.0.0.1:{admin}/promote?zone=az-a\", \
           token_env = \"DB_ADMIN_TOKEN\", timeout = \"2s\", retries = 1}},\n\
         {{type = \"wait_precondition\", name = \"primary\"}},\n\
         {{type = \"dial\", blue_percent = 0}}]\n",
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

fn run_report(server: &Server, id: u64) -> Value {
    get_json(&format!("{}/v1/plans/promote-then-switch/runs/{id}", server.url)).1
}

#[test]
fn two_replicas_call_the_action_once_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-callout");
    let (port, calls, promoted) = admin();
    let configs: Vec<_> = (1..=2).map(|n| replica_config(dir.path(), &topic, n, port)).collect();
    let replicas: Vec<Server> = std::thread::scope(|s| {
        let handles: Vec<_> = configs
            .iter()
            .enumerate()
            .map(|(i, file)| {
                let data = dir.path().join(format!("data-{}", i + 1));
                s.spawn(move || {
                    Server::start_with_env(file, &data, 0, &[("DB_ADMIN_TOKEN", TOKEN)])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &replicas {
        assert!(wait_until(Duration::from_secs(15), || {
            get_json(&format!("{}/v1/plans/promote-then-switch", r.url)).1["revision"] == 1
        }));
    }
    const ROUNDS: usize = 4;
    let mut callers = Vec::new();
    for round in 0..ROUNDS {
        promoted.store(false, Ordering::SeqCst);
        let starter = &replicas[round % 2];
        if round > 0 {
            let (_, routing) = get_json(&format!("{}/v1/routing", starter.url));
            let (status, body) = put_json(
                &format!("{}/v1/dial", starter.url),
                OPERATOR_TOKEN,
                json!({"blue_percent": 50, "expected_version": routing["version"], "reason": "next round"}),
            );
            assert_eq!(status, 200, "{body}");
        }
        let (status, run) = post_json(
            &format!("{}/v1/plans/promote-then-switch/run", starter.url),
            OPERATOR_TOKEN,
            json!({"reason": format!("round {round}")}),
        );
        assert_eq!(status, 201, "{run}");
        let id = run["id"].as_u64().unwrap();
        for r in &replicas {
            let done =
                wait_until(Duration::from_secs(30), || run_report(r, id)["outcome"] == "completed");
            assert!(done, "round {round}: {}", run_report(r, id));
        }
        let report = run_report(&replicas[0], id);
        let attempts = report["timeline"][0]["calls"].as_array().unwrap().clone();
        assert_eq!(attempts.len(), 1, "round {round}: one attempt: {report}");
        callers.push(attempts[0]["caller"].as_str().unwrap().to_owned());
        assert_eq!(calls.lock().unwrap().len(), round + 1, "round {round}: called once");
    }
    let calls = calls.lock().unwrap().clone();
    assert!(calls.iter().all(|a| a.as_deref() == Some(&format!("Bearer {TOKEN}") as &str)));
    for r in &replicas {
        let entries = audit(r);
        let count = |action: &str| entries.iter().filter(|e| e["action"] == action).count();
        assert_eq!((count("plan_call_start"), count("plan_call_done")), (ROUNDS, ROUNDS));
        assert!(!serde_json::to_string(&entries).unwrap().contains(TOKEN));
        assert!(!r.stderr().contains(TOKEN));
    }
    println!("{ROUNDS} runs on 2 replicas: {} calls, claimed by {callers:?}", calls.len());
}
