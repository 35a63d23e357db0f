//! Drain, zone and outcome endpoints through `rocket::local` (the runner is parked: tick = 1h).

mod common;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};

fn config() -> String {
    config_toml("[drain]\ntick = \"1h\"\ninterval = \"30s\"")
}

fn auth(token: &str) -> Header<'static> {
    Header::new("Authorization", format!("Bearer {token}"))
}

fn post<'c>(client: &'c Client, path: &str, token: &str, body: Value) -> LocalResponse<'c> {
    client
        .post(path.to_owned())
        .header(auth(token))
        .header(ContentType::JSON)
        .body(body.to_string())
        .dispatch()
}

fn json_of(response: LocalResponse<'_>) -> Value {
    response.into_json().expect("a JSON body")
}

fn error_code(response: LocalResponse<'_>, status: Status) -> String {
    assert_eq!(response.status(), status);
    let v = json_of(response);
    assert!(v["detail"].as_str().is_some_and(|d| !d.is_empty()), "{v}");
    v["error"].as_str().unwrap().to_owned()
}

fn drain_request() -> Value {
    json!({
        "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "30s",
        "guard": {"max_error_rate": 0.02, "min_requests": 100, "breaches": 2, "on_breach": "pause"},
        "reason": "maintenance of az-b"
    })
}

#[test]
fn starting_a_drain_returns_201_with_the_plan() {
    let (client, _dir) = client_with(&config());
    let response = post(&client, "/v1/drains", OPERATOR_TOKEN, drain_request());
    assert_eq!(response.status(), Status::Created);
    let d = json_of(response);
    assert_eq!(d["id"], 1);
    assert_eq!(d["zone"], "az-b");
    assert_eq!(d["receiving_zone"], "az-a");
    assert_eq!(d["state"], "running");
    assert_eq!(
        (d["from_percent"].as_f64(), d["target_percent"].as_f64(), d["current_percent"].as_f64()),
        (Some(50.0), Some(0.0), Some(50.0))
    );
    assert_eq!((d["steps_total"].as_u64(), d["steps_done"].as_u64()), (Some(5), Some(0)));
    assert_eq!(d["interval"], "30s");
    assert_eq!(d["guard"]["on_breach"], "pause");
    assert_eq!(d["started_by"], "alice");

    assert_eq!(json_of(client.get("/v1/drains/current").dispatch())["id"], 1);
    assert_eq!(json_of(client.get("/v1/drains/1").dispatch())["reason"], "maintenance of az-b");
    assert_eq!(json_of(client.get("/v1/drains").dispatch())["drains"].as_array().unwrap().len(), 1);
    let audit = json_of(client.get("/v1/audit?limit=1").dispatch());
    assert_eq!(audit["entries"][0]["action"], "drain_start");
    assert_eq!(audit["entries"][0]["by"], "alice");
}

#[test]
fn drain_requests_are_validated() {
    let (client, _dir) = client_with(&config());
    let cases = [
        (json!({"zone": "az-z"}), "unknown_zone"),
        (json!({"target_percent": 50}), "invalid_drain"),
        (json!({"target_percent": 120}), "invalid_drain"),
        (json!({"step_percent": 0}), "invalid_drain"),
        (json!({"step_percent": 2.5}), "invalid_drain"),
        (json!({"interval": "30"}), "invalid_drain"),
        (json!({"interval": "5ms"}), "invalid_drain"),
        (json!({"interval": "18446744073709551615ms"}), "invalid_drain"),
        (json!({"interval": "25h"}), "invalid_drain"),
        (json!({"guard": {"on_breach": "panic"}}), "invalid_drain"),
        (json!({"guard": {"max_error_rate": 2}}), "invalid_drain"),
        (json!({"guard": {"breaches": 0}}), "invalid_drain"),
        (json!({"reason": ""}), "invalid_reason"),
        (json!({"guard": {"max": 1}}), "invalid_json"),
    ];
    for (patch, code) in cases {
        let mut body = drain_request();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        assert_eq!(
            error_code(
                post(&client, "/v1/drains", OPERATOR_TOKEN, body.clone()),
                Status::BadRequest
            ),
            code,
            "{body}"
        );
    }
    assert_eq!(
        error_code(client.get("/v1/drains/current").dispatch(), Status::NotFound),
        "no_active_drain"
    );
    assert_eq!(
        error_code(client.get("/v1/drains/7").dispatch(), Status::NotFound),
        "drain_not_found"
    );
    assert_eq!(
        error_code(client.get("/v1/drains/x").dispatch(), Status::BadRequest),
        "invalid_drain_id"
    );
}

#[test]
fn one_drain_at_a_time_and_the_dial_waits_for_it() {
    let (client, _dir) = client_with(&config());
    assert_eq!(
        post(&client, "/v1/drains", OPERATOR_TOKEN, drain_request()).status(),
        Status::Created
    );
    let mut second = drain_request();
    second["zone"] = json!("az-a");
    let response = post(&client, "/v1/drains", OPERATOR_TOKEN, second);
    assert_eq!(response.status(), Status::Conflict);
    assert_eq!(json_of(response)["drain_id"], 1);

    let version = json_of(client.get("/v1/routing").dispatch())["version"].clone();
    let dial = |expected: &Value| {
        client
            .put("/v1/dial")
            .header(auth(OPERATOR_TOKEN))
            .body(
                json!({"blue_percent": 20, "expected_version": expected, "reason": "manual"})
                    .to_string(),
            )
            .dispatch()
    };
    assert_eq!(error_code(dial(&version), Status::Conflict), "drain_active");

    let paused = json_of(post(
        &client,
        "/v1/drains/1/pause",
        OPERATOR_TOKEN,
        json!({"reason": "look first"}),
    ));
    assert_eq!(paused["state"], "paused");
    assert!(paused["hold_reason"].as_str().unwrap().contains("alice"));
    let version = json_of(client.get("/v1/routing").dispatch())["version"].clone();
    assert_eq!(dial(&version).status(), Status::Ok, "a paused drain frees the dial");
}

#[test]
fn pause_resume_rollback_abort() {
    let (client, _dir) = client_with(&config());
    post(&client, "/v1/drains", OPERATOR_TOKEN, drain_request());
    let act = |action: &str| {
        post(
            &client,
            &format!("/v1/drains/1/{action}"),
            OPERATOR_TOKEN,
            json!({"reason": format!("{action} it")}),
        )
    };
    assert_eq!(json_of(act("pause"))["state"], "paused");
    let again = json_of(act("pause"));
    assert_eq!(
        (again["state"].as_str(), again["changed"].as_bool()),
        (Some("paused"), Some(false))
    );
    assert_eq!(json_of(act("resume"))["state"], "running");
    // Rolling back at the start share finishes at once: nothing to move back.
    assert_eq!(json_of(act("rollback"))["state"], "rolled_back");
    assert_eq!(error_code(act("resume"), Status::Conflict), "drain_state");
    assert_eq!(error_code(act("explode"), Status::NotFound), "not_found");

    post(&client, "/v1/drains", OPERATOR_TOKEN, drain_request());
    let aborted = json_of(post(
        &client,
        "/v1/drains/2/abort",
        OPERATOR_TOKEN,
        json!({"reason": "cancelled"}),
    ));
    assert_eq!(aborted["state"], "aborted");
    assert!(aborted["finished_at"].is_string());
    let actions: Vec<String> = json_of(client.get("/v1/audit?limit=8").dispatch())["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        actions[..6],
        [
            "drain_abort",
            "drain_start",
            "drain_rollback",
            "drain_resume",
            "drain_pause",
            "drain_start"
        ]
    );
}

#[test]
fn drain_controls_need_an_operator() {
    let (client, _dir) = client_with(&config());
    assert_eq!(
        error_code(post(&client, "/v1/drains", VIEWER_TOKEN, drain_request()), Status::Forbidden),
        "forbidden"
    );
    let anonymous = client.post("/v1/drains").body(drain_request().to_string()).dispatch();
    assert_eq!(error_code(anonymous, Status::Unauthorized), "unauthorized");
    post(&client, "/v1/drains", OPERATOR_TOKEN, drain_request());
    assert_eq!(
        error_code(
            post(&client, "/v1/drains/1/abort", VIEWER_TOKEN, json!({"reason": "x"})),
            Status::Forbidden
        ),
        "forbidden"
    );
    assert_eq!(
        error_code(
            post(&client, "/v1/drains/1/abort", OPERATOR_TOKEN, json!({})),
            Status::BadRequest
        ),
        "invalid_json"
    );
}

#[test]
fn outcomes_feed_the_zone_view() {
    let (client, _dir) = client_with(&config());
    let zones = json_of(client.get("/v1/zones").dispatch());
    let az_b = &zones["zones"][0];
    assert_eq!(
        (az_b["zone"].as_str(), az_b["color"].as_str(), az_b["state"].as_str()),
        (Some("az-b"), Some("blue"), Some("unknown"))
    );
    assert!(az_b["error_rate"].is_null(), "no outcomes yet: unknown, not 0 (and not active)");
    assert!(az_b["unknown_reason"].as_str().unwrap().contains("no outcomes"));

    let batch = json!([
        {"zone": "az-b", "color": "blue", "ok": 950, "error": 50},
        {"zone": "az-a", "color": "green", "ok": 400, "error": 600}
    ]);
    let response = post(&client, "/v1/outcomes", OPERATOR_TOKEN, batch);
    assert_eq!(response.status(), Status::Ok);
    assert_eq!(json_of(response)["accepted"], 2);
    let single = post(
        &client,
        "/v1/outcomes",
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "color": "green", "ok": 1000}),
    );
    assert_eq!(single.status(), Status::Ok);

    let zones = json_of(client.get("/v1/zones").dispatch());
    let (b, a) = (&zones["zones"][0], &zones["zones"][1]);
    assert_eq!((b["requests"].as_u64(), b["errors"].as_u64()), (Some(2000), Some(50)));
    assert!((b["error_rate"].as_f64().unwrap() - 0.025).abs() < 1e-9);
    assert_eq!(a["state"], "down", "60% errors is above health.down_error_rate");
    assert_eq!(b["source"], "outcomes");
    assert!(b["last_update"].as_str().unwrap().ends_with('Z'));

    let bad = [
        (json!({"zone": "az-q", "color": "blue", "ok": 1}), "unknown_zone"),
        (json!({"zone": "az-a", "color": "red", "ok": 1}), "invalid_color"),
        (json!({"zone": "az-a", "color": "blue", "ok": -1}), "invalid_json"),
        (
            json!([{"zone": "az-a", "color": "blue", "ok": 1}, {"zone": "nope", "color": "blue"}]),
            "unknown_zone",
        ),
    ];
    for (body, code) in bad {
        assert_eq!(
            error_code(post(&client, "/v1/outcomes", OPERATOR_TOKEN, body), Status::BadRequest),
            code
        );
    }
    // The rejected batch list recorded nothing, not even its valid first half.
    let zones = json_of(client.get("/v1/zones").dispatch());
    assert_eq!(zones["zones"][1]["requests"], 1000);
}

#[test]
fn restore_brings_a_drained_zone_back_to_its_old_share() {
    let (client, _dir) = client_with(&config());
    // Drain az-b all the way by hand-driven steps: pause, move the dial, resume completes it.
    post(
        &client,
        "/v1/drains",
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "reason": "maintenance"}),
    );
    post(&client, "/v1/drains/1/pause", OPERATOR_TOKEN, json!({"reason": "fast forward"}));
    let version = json_of(client.get("/v1/routing").dispatch())["version"].clone();
    client
        .put("/v1/dial")
        .header(auth(OPERATOR_TOKEN))
        .body(
            json!({"blue_percent": 0, "expected_version": version, "reason": "drained by hand"})
                .to_string(),
        )
        .dispatch();
    // At 0 % the drain settles (it would wait for az-b's MQ backlog); the operator completes it.
    assert_eq!(
        json_of(post(&client, "/v1/drains/1/resume", OPERATOR_TOKEN, json!({"reason": "finish"})))
            ["state"],
        "settling"
    );
    let done = json_of(post(
        &client,
        "/v1/drains/1/complete",
        OPERATOR_TOKEN,
        json!({"reason": "no lanes"}),
    ));
    assert_eq!(
        (done["state"].as_str(), done["backlog_messages"].as_u64()),
        (Some("completed"), None)
    );
    assert_eq!(json_of(client.get("/v1/zones").dispatch())["zones"][0]["state"], "drained");

    let response = post(
        &client,
        "/v1/zones/az-b/restore",
        OPERATOR_TOKEN,
        json!({"reason": "maintenance done", "step_percent": 25}),
    );
    assert_eq!(response.status(), Status::Created);
    let restore = json_of(response);
    assert_eq!(
        (restore["from_percent"].as_f64(), restore["target_percent"].as_f64()),
        (Some(0.0), Some(50.0))
    );
    assert_eq!(restore["steps_total"], 2);
    assert_eq!(json_of(client.get("/v1/zones").dispatch())["zones"][0]["state"], "restoring");
    assert_eq!(
        error_code(
            post(&client, "/v1/zones/az-x/restore", OPERATOR_TOKEN, json!({"reason": "x"})),
            Status::BadRequest
        ),
        "unknown_zone"
    );
}
