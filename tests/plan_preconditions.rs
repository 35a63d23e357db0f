//! A plan's PromQL precondition against a real Prometheus (Debian's package, started by
//! `scripts/prometheus.sh`): while the database primary is not in az-a the dry run says the plan
//! would not start and why; once Prometheus scrapes the move, it would. Never skips.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::*;
use rocket::http::{ContentType, Header, Status};
use serde_json::{Value, json};

/// A metrics target: `db_primary{zone="az-a"}` is 1 when `in_az_a` is set, plus request
/// counters so the Prometheus health source has something to read.
fn serve_target(in_az_a: Arc<AtomicU32>) -> u16 {
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
            let a = in_az_a.load(Ordering::SeqCst);
            let body = format!(
                "# TYPE db_primary gauge\ndb_primary{{zone=\"az-a\"}} {a}\ndb_primary{{zone=\"az-b\"}} {}\n",
                1 - a
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_false_promql_precondition_refuses_and_a_true_one_lets_the_plan_start() {
    let in_az_a = Arc::new(AtomicU32::new(0));
    let port = serve_target(Arc::clone(&in_az_a));
    let dir = tempfile::tempdir().unwrap();
    let prometheus =
        Prometheus::start(&dir.path().join("prometheus"), &format!("127.0.0.1:{port}"), None);
    let toml = format!(
        "[drain]\ntick = \"1h\"\n[health]\nsource = \"prometheus\"\n[health.prometheus]\nurl = \"{}\"\n",
        prometheus.url
    );
    let (client, _dir) = client_with(&config_toml(&toml));
    let routing: Value = client.get("/v1/routing").dispatch().into_json().unwrap();
    let plan = json!({
        "expected_version": routing["version"], "reason": "az-b is failing", "rto": "5m",
        "preconditions": [{"name": "db-primary-in-az-a", "promql": "db_primary{zone=\"az-a\"} == 1"}],
        "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]
    });
    let response = client
        .put("/v1/plans/az-b-failing")
        .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
        .header(ContentType::JSON)
        .body(plan.to_string())
        .dispatch();
    assert_eq!(response.status(), Status::Ok);
    let dry_run = || -> Value {
        client.post("/v1/plans/az-b-failing/dry-run").dispatch().into_json().unwrap()
    };

    let refused = dry_run();
    assert_eq!(refused["would_start"], false, "{refused}");
    assert_eq!(refused["preconditions"][0]["passed"], false, "{refused}");
    assert_eq!(refused["refusals"][0], "precondition `db-primary-in-az-a` is false");

    // The DBAs move the primary; Prometheus scrapes every second.
    in_az_a.store(1, Ordering::SeqCst);
    let started = wait_until(Duration::from_secs(20), || dry_run()["would_start"] == true);
    let ready = dry_run();
    assert!(started, "{ready}");
    assert_eq!(ready["preconditions"][0]["passed"], true);
    assert_eq!(ready["refusals"], json!([]));
}
