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
    // At least 1: the recorder is per process, and the other tests here catch az-b writes too.
    assert!(
        metrics.lines().any(|l| l.starts_with("tidegate_dual_owner_writes_total{")
            && l.contains("stale_zone=\"az-b\"")
            && l.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()).is_some_and(|n| n >= 1.0)),
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

const OTHER_SERVICE_TOKEN: &str = "tg_test_service_two";

/// Two service tokens besides the operators; reads then need a token.
fn client_with_services() -> (Client, tempfile::TempDir) {
    client_with(&config_toml(&format!(
        "service_tokens_sha256 = [\"{}\", \"{}\"]\n",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN),
        tidegate::config::token_sha256_hex(OTHER_SERVICE_TOKEN)
    )))
}

fn post_as(client: &Client, token: &str, body: &Value) -> (Status, Value, Option<String>) {
    let response = client
        .post("/v1/writes")
        .header(Header::new("Authorization", format!("Bearer {token}")))
        .header(ContentType::JSON)
        .body(body.to_string())
        .dispatch();
    let status = response.status();
    let retry = response.headers().get_one("Retry-After").map(str::to_owned);
    (status, response.into_json().unwrap_or(Value::Null), retry)
}

fn report_as_operator(client: &Client) -> Value {
    client
        .get("/v1/writes/dual-owners")
        .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
        .dispatch()
        .into_json()
        .unwrap()
}

fn identity(token: &str) -> String {
    format!("service:{}", &tidegate::config::token_sha256_hex(token)[..12])
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn write(user: &str, zone: &str, version: u64, at_ms: u64) -> Value {
    json!({"user_id": user, "zone": zone, "version": version, "at_ms": at_ms})
}

#[test]
fn a_service_token_reports_only_under_its_own_name() {
    let (client, _dir) = client_with_services();
    versions(&client);
    let t = now_ms();
    // The forgery: a page raised under another service's name.
    let forged = json!({"service": "orders", "writes": [
        write("u1", "az-a", 3, t), write("u1", "az-b", 1, t + 1)
    ]});
    let (status, v, _) = post_as(&client, SERVICE_TOKEN, &forged);
    assert_eq!((status, v["error"].as_str()), (Status::Forbidden, Some("service_mismatch")), "{v}");
    assert_eq!(report_as_operator(&client)["total"], 0, "nothing recorded");
    // Under its own name (omitted, or spelled out) it is recorded, and attributed to the token.
    let own = json!({"writes": [write("u1", "az-a", 3, t), write("u1", "az-b", 1, t + 1)]});
    let (status, v, _) = post_as(&client, SERVICE_TOKEN, &own);
    assert_eq!((status, v["dual_owner_writes"].as_u64()), (Status::Ok, Some(1)), "{v}");
    assert_eq!(v["service"], identity(SERVICE_TOKEN));
    let named = json!({"service": identity(SERVICE_TOKEN), "writes": []});
    assert_eq!(post_as(&client, SERVICE_TOKEN, &named).0, Status::Ok);
    let r = report_as_operator(&client);
    assert_eq!(r["recent"][0]["service"], identity(SERVICE_TOKEN), "{r}");
    assert_eq!(r["by_service"][identity(SERVICE_TOKEN)], 1, "{r}");
    assert!(r["by_service"].get("orders").is_none(), "{r}");
    // The control: an operator may report for any service.
    let (status, v, _) = post_as(&client, OPERATOR_TOKEN, &forged);
    assert_eq!((status, v["service"].as_str()), (Status::Ok, Some("orders")), "{v}");
}

#[test]
fn a_future_at_ms_cannot_hide_a_real_catch() {
    let (client, _dir) = client_with_services();
    versions(&client);
    let t = now_ms();
    let orders = |writes: Vec<Value>| {
        post_as(&client, OPERATOR_TOKEN, &json!({"service": "orders", "writes": writes}))
    };
    assert_eq!(orders(vec![write("u1", "az-a", 3, t)]).0, Status::Ok);
    // Planted first: a newer write a day ahead, which would stay u1's newest and hide az-b's.
    let (status, v, _) = orders(vec![write("u1", "az-a", 3, t + 86_400_000)]);
    assert_eq!((status, v["error"].as_str()), (Status::BadRequest, Some("write_in_future")), "{v}");
    // Another service plants the same (within the skew, so accepted) in its own writes only.
    let planted = json!({"writes": [write("u1", "az-a", 3, t + 4_000)]});
    assert_eq!(post_as(&client, SERVICE_TOKEN, &planted).0, Status::Ok);
    let (status, v, _) = orders(vec![write("u1", "az-b", 2, t + 1_000)]);
    assert_eq!((status, v["dual_owner_writes"].as_u64()), (Status::Ok, Some(1)), "{v}");
    // The control: what a planted time did when it was accepted into the same writes (u2, a
    // time within the skew): the stale write before it is not caught.
    assert_eq!(orders(vec![write("u2", "az-a", 3, t + 4_000)]).0, Status::Ok);
    let (_, v, _) = orders(vec![write("u2", "az-b", 2, t + 1_000)]);
    assert_eq!(v["dual_owner_writes"], 0, "{v}");
    assert_eq!(report_as_operator(&client)["by_service"]["orders"], 1);
}

#[test]
fn a_flood_from_another_service_does_not_evict_a_real_catch() {
    let (client, _dir) = client_with_services();
    versions(&client);
    let t = now_ms();
    let orders = |writes: Vec<Value>| {
        post_as(&client, OPERATOR_TOKEN, &json!({"service": "orders", "writes": writes})).1
    };
    orders(vec![write("u1", "az-a", 3, t)]);
    // The flooding service's own first user, then 10 000 filler users (its bound), 1000 a report.
    let own = |writes: Vec<Value>| post_as(&client, SERVICE_TOKEN, &json!({"writes": writes}));
    assert_eq!(own(vec![write("b-first", "az-a", 3, t)]).0, Status::Ok);
    for batch in 0..10 {
        let filler: Vec<Value> =
            (0..1000).map(|i| write(&format!("filler-{batch}-{i}"), "az-a", 1, t)).collect();
        let (status, v, _) = own(filler);
        assert_eq!(status, Status::Ok, "{v}");
    }
    // The control: the flood evicted the flooder's own first user (the old shared map evicted
    // everyone's oldest users this way), so its stale write is no catch.
    let (_, v, _) = own(vec![write("b-first", "az-b", 2, t + 100)]);
    assert_eq!(v["dual_owner_writes"], 0, "{v}");
    // orders' owner write survived: the real stale write is caught and listed.
    let v = orders(vec![write("u1", "az-b", 2, t + 100)]);
    assert_eq!(v["dual_owner_writes"], 1, "{v}");
    let r = report_as_operator(&client);
    assert_eq!((r["total"].as_u64(), r["recent"][0]["user_id"].as_str()), (Some(1), Some("u1")));
}

#[test]
fn a_service_reporting_too_fast_gets_429_and_others_still_report() {
    let (client, _dir) = client_with_services();
    versions(&client);
    let t = now_ms();
    let batch: Vec<Value> = (0..1000).map(|i| write(&format!("u{i}"), "az-a", 1, t)).collect();
    let body = json!({"writes": batch});
    let started = std::time::Instant::now();
    let mut accepted = 0u64;
    let refused = loop {
        let (status, v, retry) = post_as(&client, SERVICE_TOKEN, &body);
        if status != Status::Ok {
            break (status, v, retry);
        }
        accepted += 1000;
        assert!(accepted <= 200_000, "never limited");
    };
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (status, v, retry) = refused;
    assert_eq!(
        (status, v["error"].as_str()),
        (Status::TooManyRequests, Some("rate_limited")),
        "{v}"
    );
    assert!(v["detail"].as_str().is_some_and(|d| !d.is_empty()), "{v}");
    assert_eq!(retry.as_deref(), Some("1"), "Retry-After");
    // The burst plus what the rate refilled meanwhile, and not less than the burst.
    assert!(accepted >= 20_000 && accepted <= 20_000 + 10 * elapsed_ms + 1000, "{accepted}");
    // Another service is not slowed by it.
    assert_eq!(post_as(&client, OTHER_SERVICE_TOKEN, &body).0, Status::Ok);
}
