//! Every endpoint through `rocket::local`, including the error paths.

mod common;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};

fn bearer(token: &str) -> Header<'static> {
    Header::new("Authorization", format!("Bearer {token}"))
}

fn body(response: LocalResponse<'_>) -> Value {
    assert_eq!(response.content_type(), Some(ContentType::JSON), "every answer is JSON");
    response.into_json().expect("JSON body")
}

/// Asserts an error response: status, code, and a non-empty human detail.
fn assert_error(response: LocalResponse<'_>, status: Status, code: &str) -> Value {
    assert_eq!(response.status(), status);
    let value = body(response);
    assert_eq!(value["error"], code, "{value}");
    assert!(value["detail"].as_str().is_some_and(|d| d.len() > 10), "{value}");
    value
}

fn dial<'c>(client: &'c Client, token: &str, body: Value) -> LocalResponse<'c> {
    client
        .put("/v1/dial")
        .header(bearer(token))
        .header(ContentType::JSON)
        .body(body.to_string())
        .dispatch()
}

#[test]
fn tag_returns_colour_unit_zone_version_and_headers() {
    let (client, _dir) = client();
    let response = client.get("/v1/tag?user_id=alice").dispatch();
    assert_eq!(response.status(), Status::Ok);
    assert_eq!(response.headers().get_one("x-tidegate-color"), Some("green"));
    assert_eq!(response.headers().get_one("x-tidegate-version"), Some("1"));
    let v = body(response);
    // alice hashes to unit 80 (golden vector); 80 >= 50 blue units, so green, in az-a.
    assert_eq!(
        v,
        json!({"user_id": "alice", "color": "green", "unit": 80, "zone": "az-a", "version": 1, "pinned": false})
    );
}

#[test]
fn tag_percent_decodes_user_ids() {
    let (client, _dir) = client();
    let v = body(client.get("/v1/tag?user_id=m%C3%BCller%20x").dispatch());
    assert_eq!(v["user_id"], "müller x");
}

#[test]
fn bad_user_ids_are_client_errors() {
    let (client, _dir) = client();
    assert_error(client.get("/v1/tag?user_id=").dispatch(), Status::BadRequest, "invalid_user_id");
    // Not UTF-8: replacing the byte with U+FFFD would make all such IDs collide.
    assert_error(
        client.get("/v1/tag?user_id=%FF").dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
    assert_error(
        client.get("/v1/tag?user_id=a%C3").dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
    // A repeated parameter is ambiguous, not "no user" (which gets a random colour).
    assert_error(
        client.get("/v1/tag?user_id=a&user_id=b").dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
    assert_error(
        client.get("/v1/tag?user_id=a%0Ab").dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
    let long = "x".repeat(257);
    let v = assert_error(
        client.get(format!("/v1/tag?user_id={long}")).dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
    assert!(v["detail"].as_str().unwrap().contains("257"));
    let ok = "x".repeat(256);
    assert_eq!(client.get(format!("/v1/tag?user_id={ok}")).dispatch().status(), Status::Ok);
}

#[test]
fn untagged_requests_follow_the_fallback() {
    let (client, _dir) = client_with(&config_toml("initial_blue_percent = 100"));
    let v = body(client.get("/v1/tag").dispatch());
    assert_eq!((v["color"].as_str(), v["user_id"].is_null()), (Some("blue"), true));

    let (client, _dir) = client_with(&config_toml("fallback = \"reject\""));
    assert_error(client.get("/v1/tag").dispatch(), Status::BadRequest, "missing_user_id");
}

#[test]
fn batch_tags_match_single_tags() {
    let (client, _dir) = client();
    let ids: Vec<String> = (0..500).map(|i| format!("user-{i}")).collect();
    let response = client
        .post("/v1/tag")
        .header(ContentType::JSON)
        .body(json!({"user_ids": ids}).to_string())
        .dispatch();
    assert_eq!(response.status(), Status::Ok);
    let v = body(response);
    assert_eq!(v["version"], 1);
    let tags = v["tags"].as_array().unwrap();
    assert_eq!(tags.len(), 500);
    for (id, tag) in ids.iter().zip(tags).step_by(25) {
        let single = body(client.get(format!("/v1/tag?user_id={id}")).dispatch());
        assert_eq!(tag["user_id"], single["user_id"]);
        assert_eq!(tag["color"], single["color"]);
        assert_eq!(tag["unit"], single["unit"]);
        assert_eq!(tag["zone"], single["zone"]);
    }
    let blue = tags.iter().filter(|t| t["color"] == "blue").count();
    assert!((200..300).contains(&blue), "about half of 500 should be blue, got {blue}");
}

#[test]
fn batch_limits_and_bad_bodies() {
    let (client, _dir) = client();
    let too_many: Vec<String> = (0..10_001).map(|i| i.to_string()).collect();
    let post =
        |body: String| client.post("/v1/tag").header(ContentType::JSON).body(body).dispatch();
    assert_error(
        post(json!({"user_ids": too_many}).to_string()),
        Status::BadRequest,
        "batch_too_large",
    );
    let v = assert_error(
        post(json!({"user_ids": ["ok", ""]}).to_string()),
        Status::BadRequest,
        "invalid_user_id",
    );
    assert_eq!(v["index"], 1);
    assert_error(post("{not json".into()), Status::BadRequest, "invalid_json");
    assert_error(post(json!({"users": []}).to_string()), Status::BadRequest, "invalid_json");
    let huge = format!("{{\"user_ids\": [\"{}\"]}}", "x".repeat(5 * 1024 * 1024));
    assert_error(post(huge), Status::PayloadTooLarge, "body_too_large");
}

#[test]
fn routing_shows_the_table() {
    let (client, _dir) = client();
    let v = body(client.get("/v1/routing").dispatch());
    assert_eq!(v["version"], 1);
    assert_eq!(v["units"], 100);
    assert_eq!(v["blue_units"], 50);
    assert_eq!(v["blue_percent"], 50.0);
    assert_eq!(v["colors"], json!({"blue": "az-b", "green": "az-a"}));
    assert_eq!(v["pins"], json!({}));
}

#[test]
fn dial_moves_the_split_and_bumps_the_version() {
    let (client, _dir) = client();
    let response = dial(
        &client,
        OPERATOR_TOKEN,
        json!({"blue_percent": 30, "expected_version": 1, "reason": "drill"}),
    );
    assert_eq!(response.status(), Status::Ok);
    let v = body(response);
    assert_eq!(
        (v["version"].as_u64(), v["blue_units"].as_u64(), v["changed"].as_bool()),
        (Some(2), Some(30), Some(true))
    );
    // alice (unit 80) stays green; a blue user in unit 30..49 turns green.
    assert_eq!(body(client.get("/v1/tag?user_id=alice").dispatch())["version"], 2);
    // Same value again: accepted, nothing spent.
    let v = body(dial(
        &client,
        OPERATOR_TOKEN,
        json!({"blue_units": 30, "expected_version": 2, "reason": "again"}),
    ));
    assert_eq!((v["version"].as_u64(), v["changed"].as_bool()), (Some(2), Some(false)));
}

#[test]
fn dial_errors() {
    let (client, _dir) = client();
    let v = assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": 30, "expected_version": 7, "reason": "x"}),
        ),
        Status::Conflict,
        "version_conflict",
    );
    assert_eq!(v["current_version"], 1);
    assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": 101, "expected_version": 1, "reason": "x"}),
        ),
        Status::BadRequest,
        "invalid_dial",
    );
    let v = assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": 33.5, "expected_version": 1, "reason": "x"}),
        ),
        Status::BadRequest,
        "invalid_dial",
    );
    assert!(v["detail"].as_str().unwrap().contains("33 and 34"), "{v}");
    assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": 30, "blue_units": 30, "expected_version": 1, "reason": "x"}),
        ),
        Status::BadRequest,
        "invalid_dial",
    );
    assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": 30, "expected_version": 1, "reason": ""}),
        ),
        Status::BadRequest,
        "invalid_reason",
    );
    assert_error(
        dial(&client, OPERATOR_TOKEN, json!({"blue_percent": 30, "reason": "no version"})),
        Status::BadRequest,
        "invalid_json",
    );
    assert_error(
        dial(
            &client,
            OPERATOR_TOKEN,
            json!({"blue_percent": "thirty", "expected_version": 1, "reason": "x"}),
        ),
        Status::BadRequest,
        "invalid_json",
    );
    // Nothing above changed anything.
    assert_eq!(body(client.get("/v1/routing").dispatch())["version"], 1);
}

#[test]
fn changes_need_an_operator_token() {
    let (client, _dir) = client();
    let change = json!({"blue_percent": 30, "expected_version": 1, "reason": "x"});
    let anonymous =
        client.put("/v1/dial").header(ContentType::JSON).body(change.to_string()).dispatch();
    assert_error(anonymous, Status::Unauthorized, "unauthorized");
    assert_error(dial(&client, "tg_wrong", change.clone()), Status::Unauthorized, "unauthorized");
    let malformed = client
        .put("/v1/dial")
        .header(Header::new("Authorization", "Basic abc"))
        .body(change.to_string())
        .dispatch();
    assert_error(malformed, Status::Unauthorized, "unauthorized");
    let v =
        assert_error(dial(&client, VIEWER_TOKEN, change.clone()), Status::Forbidden, "forbidden");
    assert!(v["detail"].as_str().unwrap().contains("victor"));
    assert_eq!(dial(&client, OPERATOR_TOKEN, change).status(), Status::Ok);
}

#[test]
fn pins_win_and_are_audited() {
    let (client, _dir) = client();
    let pin = client
        .put("/v1/pins/alice")
        .header(bearer(OPERATOR_TOKEN))
        .body(json!({"color": "blue", "expected_version": 1, "reason": "tester"}).to_string())
        .dispatch();
    assert_eq!(pin.status(), Status::Ok);
    assert_eq!(body(pin)["pins"], json!({"alice": "blue"}));
    let tag = body(client.get("/v1/tag?user_id=alice").dispatch());
    assert_eq!(
        (tag["color"].as_str(), tag["pinned"].as_bool(), tag["unit"].as_u64()),
        (Some("blue"), Some(true), Some(80))
    );

    let bad = client
        .put("/v1/pins/bob")
        .header(bearer(OPERATOR_TOKEN))
        .body(json!({"color": "purple", "expected_version": 2, "reason": "x"}).to_string())
        .dispatch();
    assert_error(bad, Status::BadRequest, "invalid_color");
    let missing = client
        .delete("/v1/pins/nobody")
        .header(bearer(OPERATOR_TOKEN))
        .body(json!({"expected_version": 2, "reason": "x"}).to_string())
        .dispatch();
    assert_error(missing, Status::NotFound, "pin_not_found");
    let unpin = client
        .delete("/v1/pins/alice")
        .header(bearer(OPERATOR_TOKEN))
        .body(json!({"expected_version": 2, "reason": "done testing"}).to_string())
        .dispatch();
    assert_eq!(unpin.status(), Status::Ok);
    assert_eq!(body(client.get("/v1/tag?user_id=alice").dispatch())["color"], "green");

    let audit = body(client.get("/v1/audit?limit=2").dispatch());
    let entries = audit["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["version"], 3);
    assert_eq!(entries[0]["action"], "unpin");
    assert_eq!(entries[0]["by"], "alice");
    assert_eq!(entries[0]["reason"], "done testing");
    assert_eq!(entries[1]["action"], "pin");
    assert!(entries[1]["at"].as_str().unwrap().ends_with('Z'));
    assert_error(client.get("/v1/audit?limit=0").dispatch(), Status::BadRequest, "invalid_limit");
    assert_error(client.get("/v1/audit?limit=abc").dispatch(), Status::BadRequest, "invalid_limit");
}

#[test]
fn service_tokens_close_the_read_endpoints() {
    let toml = config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    ));
    let (client, _dir) = client_with(&toml);
    assert_error(client.get("/v1/tag?user_id=a").dispatch(), Status::Unauthorized, "unauthorized");
    assert_error(client.get("/v1/routing").dispatch(), Status::Unauthorized, "unauthorized");
    assert_eq!(
        client.get("/v1/tag?user_id=a").header(bearer(SERVICE_TOKEN)).dispatch().status(),
        Status::Ok
    );
    assert_eq!(
        client.get("/v1/routing").header(bearer(VIEWER_TOKEN)).dispatch().status(),
        Status::Ok
    );
    let change = json!({"blue_percent": 30, "expected_version": 1, "reason": "x"});
    assert_error(dial(&client, SERVICE_TOKEN, change), Status::Forbidden, "forbidden");
    // Health stays open for probes.
    assert_eq!(client.get("/healthz").dispatch().status(), Status::Ok);
}

#[test]
fn digits_mode_refuses_non_numeric_ids() {
    let (client, _dir) = client_with(&config_toml("[units]\nmode = \"digits\"\ncount = 100"));
    let v = body(client.get("/v1/tag?user_id=2088102122524333").dispatch());
    assert_eq!(v["unit"], 33);
    assert_eq!(v["color"], "blue");
    assert_error(
        client.get("/v1/tag?user_id=alice").dispatch(),
        Status::BadRequest,
        "invalid_user_id",
    );
}

#[test]
fn health_readiness_and_metrics() {
    let (client, _dir) = client();
    assert_eq!(body(client.get("/healthz").dispatch())["status"], "ok");
    let ready = body(client.get("/readyz").dispatch());
    assert_eq!(ready["status"], "ready");
    client.get("/v1/tag?user_id=alice").dispatch();
    dial(
        &client,
        OPERATOR_TOKEN,
        json!({"blue_percent": 20, "expected_version": 1, "reason": "m"}),
    );
    let response = client.get("/metrics").dispatch();
    assert_eq!(response.status(), Status::Ok);
    let text = response.into_string().unwrap();
    for name in [
        "tidegate_tag_requests_total",
        "tidegate_dial_changes_total",
        "tidegate_routing_blue_ratio",
        "tidegate_routing_version",
    ] {
        assert!(text.contains(&format!("# HELP {name} ")), "no HELP for {name}");
    }
    assert!(text.contains("tidegate_tag_requests_total{color=\"green\",zone=\"az-a\"}"), "{text}");
}

#[test]
fn unknown_routes_and_methods_get_json_errors() {
    let (client, _dir) = client();
    assert_error(client.get("/v1/nothing").dispatch(), Status::NotFound, "not_found");
    assert_error(client.post("/v1/routing").dispatch(), Status::NotFound, "not_found");
}

#[test]
fn the_routing_json_decodes_to_the_same_table() {
    let (client, _dir) = client_with(&config_toml("initial_blue_percent = 37"));
    client
        .put("/v1/pins/qa%2F1")
        .header(bearer(OPERATOR_TOKEN))
        .body(json!({"color": "green", "expected_version": 1, "reason": "qa"}).to_string())
        .dispatch();
    let routing = body(client.get("/v1/routing").dispatch());
    let table = tidegate::client::decode_table(&routing).unwrap();
    assert_eq!((table.version(), table.blue_units(), table.units()), (2, 37, 100));
    for id in ["alice", "bob", "qa/1", "user-77"] {
        let server =
            body(client.get(format!("/v1/tag?user_id={}", id.replace('/', "%2F"))).dispatch());
        let local = table.tag(id).unwrap();
        assert_eq!(
            (table.lane(local.color), u64::from(local.unit.0)),
            (server["color"].as_str().unwrap(), server["unit"].as_u64().unwrap()),
            "{id}"
        );
    }
}

#[test]
fn a_malformed_idempotency_key_is_refused_after_the_caller_is_checked() {
    let (client, _dir) = client();
    let send = |token: Option<&str>, key: &str, path: &str| {
        let mut request = client
            .put(path.to_owned())
            .header(Header::new("Idempotency-Key", key.to_owned()))
            .header(ContentType::JSON);
        if let Some(token) = token {
            request = request.header(bearer(token));
        }
        let body = if path == "/v1/dial" {
            json!({"blue_units": 20, "expected_version": 1, "reason": "k"})
        } else {
            json!({"color": "blue", "expected_version": 1, "reason": "k"})
        };
        request.body(body.to_string()).dispatch()
    };
    for path in ["/v1/dial", "/v1/pins/alice"] {
        // Anonymous and viewer callers are refused before the key is even looked at.
        assert_eq!(send(None, "has space", path).status(), Status::Unauthorized);
        assert_eq!(send(Some(VIEWER_TOKEN), "has space", path).status(), Status::Forbidden);
        let bad = assert_error(
            send(Some(OPERATOR_TOKEN), "has space", path),
            Status::BadRequest,
            "invalid_idempotency_key",
        );
        assert!(bad["detail"].as_str().unwrap().contains("Idempotency-Key"), "{bad}");
        let long = "k".repeat(129);
        assert_error(
            send(Some(OPERATOR_TOKEN), &long, path),
            Status::BadRequest,
            "invalid_idempotency_key",
        );
    }
    // A well-formed key on the embedded log: the change is decided as usual.
    let response = client
        .put("/v1/dial")
        .header(bearer(OPERATOR_TOKEN))
        .header(Header::new("Idempotency-Key", "w1-1-0f"))
        .header(ContentType::JSON)
        .body(json!({"blue_units": 20, "expected_version": 1, "reason": "k"}).to_string())
        .dispatch();
    assert_eq!(body(response)["version"], 2);
}

#[test]
fn an_idempotency_key_is_the_callers_own_and_bound_to_its_request() {
    const BOB_TOKEN: &str = "tg_test_operator_bob";
    let bob = format!(
        "[[operators]]\nname = \"bob\"\ntoken_sha256 = \"{}\"\nrole = \"operator\"\n",
        tidegate::config::token_sha256_hex(BOB_TOKEN)
    );
    let (client, _dir) = client_with(&config_toml(&bob));
    let send = |token: &str, key: &str, body: Value| {
        client
            .put("/v1/dial")
            .header(bearer(token))
            .header(Header::new("Idempotency-Key", key.to_owned()))
            .header(ContentType::JSON)
            .body(body.to_string())
            .dispatch()
    };
    let first = json!({"blue_units": 20, "expected_version": 1, "reason": "k"});
    let answer = send(OPERATOR_TOKEN, "shared-key", first.clone());
    assert_eq!(answer.status(), Status::Ok);
    let answer = body(answer);
    assert_eq!((answer["version"].as_u64(), answer["blue_units"].as_u64()), (Some(2), Some(20)));
    // The same request again (a retry of an unknown outcome): the first answer, not a conflict.
    let again = send(OPERATOR_TOKEN, "shared-key", first.clone());
    assert_eq!(again.status(), Status::Ok);
    assert_eq!(body(again), answer);
    // The same key for another change: refused, and nothing changes.
    let other = json!({"blue_units": 70, "expected_version": 2, "reason": "k"});
    let refused = assert_error(
        send(OPERATOR_TOKEN, "shared-key", other),
        Status::UnprocessableEntity,
        "idempotency_key_reused",
    );
    assert!(refused["detail"].as_str().unwrap().contains("shared-key"), "{refused}");
    let pin = client
        .put("/v1/pins/alice")
        .header(bearer(OPERATOR_TOKEN))
        .header(Header::new("Idempotency-Key", "shared-key"))
        .header(ContentType::JSON)
        .body(json!({"color": "green", "expected_version": 2, "reason": "k"}).to_string())
        .dispatch();
    assert_error(pin, Status::UnprocessableEntity, "idempotency_key_reused");
    let routing = body(client.get("/v1/routing").dispatch());
    assert_eq!((routing["version"].as_u64(), routing["blue_units"].as_u64()), (Some(2), Some(20)));
    // Another caller's identical key is their own: bob's change is decided, and his answer is
    // his change, never alice's result.
    let bobs = send(
        BOB_TOKEN,
        "shared-key",
        json!({"blue_units": 30, "expected_version": 2, "reason": "b"}),
    );
    assert_eq!(bobs.status(), Status::Ok);
    let bobs = body(bobs);
    assert_eq!((bobs["version"].as_u64(), bobs["blue_units"].as_u64()), (Some(3), Some(30)));
    // And bob sending alice's exact request under that key is a new change of his (a stale one).
    assert_error(send(BOB_TOKEN, "shared-key-2", first), Status::Conflict, "version_conflict");
}
