//! The dual-owner watch through `rocket::local`: a stale zone's write after the new owner's is
//! caught and counted, a correct hand-over is not, bad reports record nothing, and the report
//! is bounded.

mod common;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::Client;
use serde_json::{Value, json};

fn post(client: &Client, body: Value) -> (Status, Value) {
    let response = client
        .post("/v1/writes")
        .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
        .header(ContentType::JSON)
        .body(body.to_string())
        .dispatch();
    let status = response.status();
    (status, response.into_json().unwrap_or(Value::Null))
}

fn report(client: &Client) -> Value {
    client.get("/v1/writes/dual-owners").dispatch().into_json().unwrap()
}

/// Moves the dial so the table has versions 1..=3.
fn versions(client: &Client) {
    for (version, percent) in [(1, 40), (2, 30)] {
        let response = client
            .put("/v1/dial")
            .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
            .header(ContentType::JSON)
            .body(
                json!({"blue_percent": percent, "expected_version": version, "reason": "t"})
                    .to_string(),
            )
            .dispatch();
        assert_eq!(response.status(), Status::Ok);
    }
}

#[test]
fn a_stale_zone_writing_after_the_new_owner_is_caught_and_a_clean_handover_is_not() {
    let (client, _dir) = client();
    versions(&client);
    // A clean hand-over: az-b writes at v1, az-a takes over at v3 and writes after.
    let (status, body) = post(
        &client,
        json!({"service": "orders", "writes": [
            {"user_id": "u1", "zone": "az-b", "version": 1, "at_ms": 1000},
            {"user_id": "u1", "zone": "az-a", "version": 3, "at_ms": 2000},
            {"user_id": "u1", "zone": "az-a", "version": 3, "at_ms": 2100},
            // Reported late, but committed before the new owner's first write: no catch.
            {"user_id": "u1", "zone": "az-b", "version": 1, "at_ms": 1500}
        ]}),
    );
    assert_eq!((status, body["dual_owner_writes"].as_u64()), (Status::Ok, Some(0)), "{body}");
    assert_eq!(report(&client)["total"], 0);
    // The stale zone (still on v2) accepts u1's write after az-a's v3 write: two owners.
    let (status, body) = post(
        &client,
        json!({"service": "orders", "writes": [
            {"user_id": "u1", "zone": "blue", "version": 2, "at_ms": 2200}
        ]}),
    );
    assert_eq!((status, body["dual_owner_writes"].as_u64()), (Status::Ok, Some(1)), "{body}");
    let r = report(&client);
    assert_eq!(r["total"], 1, "{r}");
    assert_eq!(r["recent"][0]["user_id"], "u1");
    assert_eq!(r["recent"][0]["stale"]["zone"], "az-b");
    assert_eq!(r["recent"][0]["owner"]["zone"], "az-a");
    assert_eq!(r["recent"][0]["owner"]["version"], 3);
    let metrics = client.get("/metrics").dispatch().into_string().unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("tidegate_dual_owner_writes_total{")
            && l.contains("stale_zone=\"az-b\"")
            && l.ends_with(" 1")),
        "the counter: {}",
        metrics.lines().filter(|l| l.contains("dual_owner")).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn bad_reports_record_nothing_and_need_a_writer() {
    let (client, _dir) = client();
    versions(&client);
    let bad = [
        (
            json!({"service": "orders", "writes": [{"user_id": "u1", "zone": "az-q", "version": 1}]}),
            "unknown_zone",
        ),
        (
            json!({"service": "orders", "writes": [{"user_id": "", "zone": "az-a", "version": 1}]}),
            "invalid_user_id",
        ),
        (
            json!({"service": "orders", "writes": [{"user_id": "u1", "zone": "az-a", "version": 99}]}),
            "invalid_writes",
        ),
        (json!({"service": "", "writes": []}), "invalid_writes"),
    ];
    for (body, code) in bad {
        let (status, answer) = post(&client, body);
        assert_eq!(
            (status, answer["error"].as_str()),
            (Status::BadRequest, Some(code)),
            "{answer}"
        );
    }
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"user_id": format!("u{i}"), "zone": "az-a", "version": 1}))
        .collect();
    let (status, answer) = post(&client, json!({"service": "orders", "writes": many}));
    assert_eq!((status, answer["error"].as_str()), (Status::BadRequest, Some("batch_too_large")));
    // A bad observation after good ones records none of them: u1 at v3 was not remembered, so
    // a later v1 write by another zone is no catch.
    let (status, _) = post(
        &client,
        json!({"service": "orders", "writes": [
            {"user_id": "u1", "zone": "az-a", "version": 3, "at_ms": 10},
            {"user_id": "u1", "zone": "nowhere", "version": 3}
        ]}),
    );
    assert_eq!(status, Status::BadRequest);
    let (_, body) = post(
        &client,
        json!({"service": "orders", "writes": [{"user_id": "u1", "zone": "az-b", "version": 1, "at_ms": 20}]}),
    );
    assert_eq!(body["dual_owner_writes"], 0, "{body}");
    // Anonymous callers read the report but cannot post.
    let anonymous = client
        .post("/v1/writes")
        .header(ContentType::JSON)
        .body(json!({"service": "x", "writes": []}).to_string())
        .dispatch();
    assert_eq!(anonymous.status(), Status::Unauthorized);
}
