//! The coordinator's OpenFeature Remote Evaluation Protocol endpoints through `rocket::local`:
//! values, reasons and metadata, every error code, the bulk ETag, and authentication.

mod common;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};

fn bearer(token: &str) -> Header<'static> {
    Header::new("Authorization", format!("Bearer {token}"))
}

fn evaluate<'c>(client: &'c Client, key: &str, body: &str) -> LocalResponse<'c> {
    client
        .post(format!("/ofrep/v1/evaluate/flags/{key}"))
        .header(ContentType::JSON)
        .body(body)
        .dispatch()
}

fn ofrep_error(response: LocalResponse<'_>, status: Status, code: &str) -> Value {
    assert_eq!(response.status(), status);
    let value: Value = response.into_json().expect("JSON body");
    assert_eq!(value["errorCode"], code, "{value}");
    assert!(value["errorDetails"].as_str().is_some_and(|d| d.len() > 10), "{value}");
    value
}

fn tag(client: &Client, user: &str) -> Value {
    client.get(format!("/v1/tag?user_id={user}")).dispatch().into_json().unwrap()
}

#[test]
fn the_colour_flag_agrees_with_the_tag_and_says_why() {
    let (client, _dir) = client();
    for i in 0..300 {
        let user = format!("user-{i}");
        let expected = tag(&client, &user);
        let body = json!({"context": {"targetingKey": user, "plan": "gold"}}).to_string();
        let response = evaluate(&client, "tidegate-color", &body);
        assert_eq!(response.status(), Status::Ok);
        let value: Value = response.into_json().unwrap();
        assert_eq!(value["key"], "tidegate-color");
        assert_eq!(value["value"], expected["color"], "{user}");
        assert_eq!(value["variant"], expected["color"]);
        assert_eq!(value["reason"], "SPLIT");
        assert_eq!(value["metadata"]["unit"], expected["unit"]);
        assert_eq!(value["metadata"]["zone"], expected["zone"]);
        assert_eq!(value["metadata"]["version"], expected["version"]);
        assert_eq!(value["metadata"]["pinned"], false);
    }
}

#[test]
fn a_pin_is_a_targeting_match_and_no_key_is_the_default() {
    let (client, _dir) = client();
    let user = "pinned-user";
    let color = tag(&client, user)["color"].as_str().unwrap().to_owned();
    let other = if color == "blue" { "green" } else { "blue" };
    let pinned = client
        .put(format!("/v1/pins/{user}"))
        .header(bearer(OPERATOR_TOKEN))
        .header(ContentType::JSON)
        .body(json!({"color": other, "expected_version": 1, "reason": "test"}).to_string())
        .dispatch();
    assert_eq!(pinned.status(), Status::Ok);
    let value: Value = evaluate(
        &client,
        "tidegate-color",
        &json!({"context": {"targetingKey": user}}).to_string(),
    )
    .into_json()
    .unwrap();
    assert_eq!(value["value"], other);
    assert_eq!(value["reason"], "TARGETING_MATCH");
    assert_eq!(value["metadata"]["pinned"], true);
    assert_eq!(value["metadata"]["version"], 2);

    // The random fallback (the default): a colour, reason DEFAULT, no unit.
    for body in [r#"{"context": {}}"#, r#"{"context": {"targetingKey": null}}"#, "{}"] {
        let value: Value = evaluate(&client, "tidegate-color", body).into_json().unwrap();
        assert_eq!(value["reason"], "DEFAULT", "{body}");
        assert!(value["value"] == "blue" || value["value"] == "green");
        assert!(value["metadata"].get("unit").is_none());
    }
}

#[test]
fn every_error_code_the_coordinator_can_give() {
    let (client, _dir) = client_with(&config_toml("fallback = \"reject\""));
    let good = r#"{"context": {"targetingKey": "u1"}}"#;
    let v = ofrep_error(evaluate(&client, "dark-mode", good), Status::NotFound, "FLAG_NOT_FOUND");
    assert_eq!(v["key"], "dark-mode");
    ofrep_error(
        evaluate(&client, "tidegate-color", "{not json"),
        Status::BadRequest,
        "PARSE_ERROR",
    );
    ofrep_error(evaluate(&client, "tidegate-color", "[1]"), Status::BadRequest, "PARSE_ERROR");
    ofrep_error(
        evaluate(&client, "tidegate-color", r#"{"context": {}}"#),
        Status::BadRequest,
        "TARGETING_KEY_MISSING",
    );
    ofrep_error(
        evaluate(&client, "tidegate-color", r#"{"context": {"targetingKey": 42}}"#),
        Status::BadRequest,
        "INVALID_CONTEXT",
    );
    ofrep_error(
        evaluate(&client, "tidegate-color", r#"{"context": "u1"}"#),
        Status::BadRequest,
        "INVALID_CONTEXT",
    );
    let long = "x".repeat(300);
    ofrep_error(
        evaluate(
            &client,
            "tidegate-color",
            &json!({"context": {"targetingKey": long}}).to_string(),
        ),
        Status::BadRequest,
        "INVALID_CONTEXT",
    );
    // The bulk endpoint reports context errors without a key.
    let bulk = client
        .post("/ofrep/v1/evaluate/flags")
        .header(ContentType::JSON)
        .body(r#"{"context": {}}"#)
        .dispatch();
    let v = ofrep_error(bulk, Status::BadRequest, "TARGETING_KEY_MISSING");
    assert!(v.get("key").is_none());
}

#[test]
fn the_flag_key_is_configurable() {
    let (client, _dir) = client_with(&config_toml("[openfeature]\nflag_key = \"checkout-lane\""));
    let good = r#"{"context": {"targetingKey": "u1"}}"#;
    assert_eq!(evaluate(&client, "checkout-lane", good).status(), Status::Ok);
    ofrep_error(evaluate(&client, "tidegate-color", good), Status::NotFound, "FLAG_NOT_FOUND");
}

#[test]
fn bulk_evaluation_carries_an_etag_that_changes_with_the_version() {
    let (client, _dir) = client();
    let body = r#"{"context": {"targetingKey": "user-7"}}"#;
    let bulk = |etag: Option<&str>| {
        let mut request =
            client.post("/ofrep/v1/evaluate/flags").header(ContentType::JSON).body(body);
        if let Some(etag) = etag {
            request = request.header(Header::new("If-None-Match", etag.to_owned()));
        }
        request.dispatch()
    };
    let first = bulk(None);
    assert_eq!(first.status(), Status::Ok);
    let etag = first.headers().get_one("ETag").expect("an ETag").to_owned();
    let value: Value = first.into_json().unwrap();
    let flags = value["flags"].as_array().unwrap();
    assert_eq!(flags.len(), 1);
    assert_eq!(flags[0]["key"], "tidegate-color");
    assert_eq!(flags[0]["value"], tag(&client, "user-7")["color"]);

    let again = bulk(Some(&etag));
    assert_eq!(again.status(), Status::NotModified);
    assert_eq!(again.headers().get_one("ETag"), Some(etag.as_str()));
    assert_eq!(bulk(Some("\"v1-0000000000000000\"")).status(), Status::Ok);

    // Another user at the same version has another ETag.
    let other = client
        .post("/ofrep/v1/evaluate/flags")
        .header(ContentType::JSON)
        .body(r#"{"context": {"targetingKey": "user-8"}}"#)
        .dispatch();
    assert_ne!(other.headers().get_one("ETag"), Some(etag.as_str()));

    // A dial move makes the cached answer stale.
    let moved = client
        .put("/v1/dial")
        .header(bearer(OPERATOR_TOKEN))
        .header(ContentType::JSON)
        .body(json!({"blue_percent": 30, "expected_version": 1, "reason": "test"}).to_string())
        .dispatch();
    assert_eq!(moved.status(), Status::Ok);
    let after = bulk(Some(&etag));
    assert_eq!(after.status(), Status::Ok);
    assert_ne!(after.headers().get_one("ETag"), Some(etag.as_str()));
}

#[test]
fn ofrep_is_read_api_and_follows_service_tokens() {
    let toml = config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    ));
    let (client, _dir) = client_with(&toml);
    let good = r#"{"context": {"targetingKey": "u1"}}"#;
    for path in ["/ofrep/v1/evaluate/flags/tidegate-color", "/ofrep/v1/evaluate/flags"] {
        let anonymous = client.post(path).header(ContentType::JSON).body(good).dispatch();
        assert_eq!(anonymous.status(), Status::Unauthorized);
        let value: Value = anonymous.into_json().unwrap();
        assert_eq!(value["error"], "unauthorized");
        for token in [SERVICE_TOKEN, VIEWER_TOKEN, OPERATOR_TOKEN] {
            let ok = client
                .post(path)
                .header(ContentType::JSON)
                .header(bearer(token))
                .body(good)
                .dispatch();
            assert_eq!(ok.status(), Status::Ok, "{path} with {token}");
        }
        let wrong = client
            .post(path)
            .header(ContentType::JSON)
            .header(bearer("tg_not_a_token"))
            .body(good)
            .dispatch();
        assert_eq!(wrong.status(), Status::Unauthorized);
    }
}

/// A context naming its `service` gets that service's release channel (pin > channel > map), as
/// `GET /v1/tag?service=` does: `TARGETING_MATCH` with `source: channel` and the channel's name;
/// other services and contexts without one keep the map. The bulk ETag names the service. A
/// suspended channel with `reject` answers 503 `GENERAL`; a bad service name is INVALID_CONTEXT.
#[test]
fn a_context_with_a_service_follows_its_release_channel() {
    let (client, _dir) = client();
    let operator = || bearer(OPERATOR_TOKEN);
    let version = tag(&client, "x")["version"].as_u64().unwrap();
    let put = client
        .put("/v1/channels/orders-v2")
        .header(ContentType::JSON)
        .header(operator())
        .body(
            json!({"services": ["orders"], "zone": "green", "percent": 30, "fallback": "reject",
                   "expected_version": version, "reason": "orders v2", "force": true})
            .to_string(),
        )
        .dispatch();
    assert_eq!(put.status(), Status::Ok, "{:?}", put.into_string());
    let mut by_channel = 0;
    for i in 0..300 {
        let user = format!("user-{i}");
        let expected: Value = client
            .get(format!("/v1/tag?user_id={user}&service=orders"))
            .dispatch()
            .into_json()
            .unwrap();
        let body = json!({"context": {"targetingKey": user, "service": "orders"}}).to_string();
        let value: Value = evaluate(&client, "tidegate-color", &body).into_json().unwrap();
        assert_eq!(value["value"], expected["color"], "{user}: {value} vs {expected}");
        let global = tag(&client, &user);
        let plain = json!({"context": {"targetingKey": user, "service": "billing"}}).to_string();
        let other: Value = evaluate(&client, "tidegate-color", &plain).into_json().unwrap();
        assert_eq!(other["value"], global["color"], "{user}: billing follows the map");
        assert_eq!(other["metadata"]["source"], "unit");
        if expected["reason"] == "channel:orders-v2" {
            by_channel += 1;
            assert_eq!(value["reason"], "TARGETING_MATCH", "{value}");
            assert_eq!(value["metadata"]["source"], "channel");
            assert_eq!(value["metadata"]["channel"], "orders-v2");
            assert_eq!(value["metadata"]["pinned"], false);
        } else {
            assert_eq!(value["reason"], "SPLIT", "{value}");
            assert!(value["metadata"].get("channel").is_none(), "{value}");
        }
    }
    assert!((50..=130).contains(&by_channel), "about 30% by the channel: {by_channel}");
    // The bulk ETag names the service: the same user for another service is another answer.
    let bulk = |service: &str| {
        let body = json!({"context": {"targetingKey": "user-1", "service": service}}).to_string();
        let response =
            client.post("/ofrep/v1/evaluate/flags").header(ContentType::JSON).body(body).dispatch();
        response.headers().get_one("ETag").unwrap().to_owned()
    };
    assert_ne!(bulk("orders"), bulk("billing"));
    // Green gives up its last unit: the channel is suspended, and `reject` refuses its users.
    let channel_user = (0..300)
        .map(|i| format!("user-{i}"))
        .find(|u| {
            let t: Value = client
                .get(format!("/v1/tag?user_id={u}&service=orders"))
                .dispatch()
                .into_json()
                .unwrap();
            t["reason"] == "channel:orders-v2"
        })
        .unwrap();
    let version = tag(&client, "x")["version"].as_u64().unwrap();
    let dial = client
        .put("/v1/dial")
        .header(ContentType::JSON)
        .header(operator())
        .body(json!({"blue_percent": 100, "expected_version": version, "reason": "green out", "force": true}).to_string())
        .dispatch();
    assert_eq!(dial.status(), Status::Ok, "{:?}", dial.into_string());
    let body = json!({"context": {"targetingKey": channel_user, "service": "orders"}}).to_string();
    let refused = ofrep_error(
        evaluate(&client, "tidegate-color", &body),
        Status::ServiceUnavailable,
        "GENERAL",
    );
    assert!(refused["errorDetails"].as_str().unwrap().contains("orders-v2"), "{refused}");
    let body = json!({"context": {"targetingKey": channel_user}}).to_string();
    assert_eq!(
        evaluate(&client, "tidegate-color", &body).status(),
        Status::Ok,
        "without a service: the map"
    );
    let body = json!({"context": {"targetingKey": "user-1", "service": "Orders!"}}).to_string();
    ofrep_error(evaluate(&client, "tidegate-color", &body), Status::BadRequest, "INVALID_CONTEXT");
    let body = json!({"context": {"targetingKey": "user-1", "service": 7}}).to_string();
    ofrep_error(evaluate(&client, "tidegate-color", &body), Status::BadRequest, "INVALID_CONTEXT");
}
