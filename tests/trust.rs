//! The trust model (docs/src/trust-model.md): who may call every write route, JSON-only bodies,
//! the `Bearer` scheme, lane member secrets and IDs, subscriber ownership and per-caller limits.

mod common;

use std::collections::BTreeSet;

use common::{OPERATOR_TOKEN, SERVICE_TOKEN, VIEWER_TOKEN, client_in, client_with, config_toml};
use rocket::http::{ContentType, Header, Method, Status};
use rocket::local::blocking::Client;
use serde_json::{Value, json};
use tidegate::config::token_sha256_hex;

const OTHER_SERVICE_TOKEN: &str = "tg_test_service_two";

/// Operator alice, viewer victor and two service tokens, plus `extra` (top-level keys first).
fn toml(extra: &str) -> String {
    config_toml(&format!(
        "service_tokens_sha256 = [\"{}\", \"{}\"]\n{extra}",
        token_sha256_hex(SERVICE_TOKEN),
        token_sha256_hex(OTHER_SERVICE_TOKEN)
    ))
}

fn bearer(token: &str) -> Header<'static> {
    Header::new("Authorization", format!("Bearer {token}"))
}

fn secret_header(secret: &str) -> Header<'static> {
    Header::new("X-Tidegate-Member-Secret", secret.to_owned())
}

fn send(
    client: &Client,
    method: Method,
    path: &str,
    token: Option<&str>,
    extra: Vec<Header<'static>>,
    body: Option<&Value>,
) -> (Status, Value) {
    let mut request = client.req(method, path.to_owned());
    if let Some(token) = token {
        request = request.header(bearer(token));
    }
    for header in extra {
        request = request.header(header);
    }
    if let Some(body) = body {
        request = request.header(ContentType::JSON).body(body.to_string());
    }
    let response = request.dispatch();
    let status = response.status();
    let is_json = response.content_type().is_some_and(|ct| ct.is_json());
    let value = if is_json {
        serde_json::from_str(&response.into_string().unwrap_or_default()).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    (status, value)
}

/// Registers a lane member; returns (member ID, secret).
fn register(client: &Client, token: &str, group: &str, name: &str) -> (Status, String, String) {
    let body = json!({"name": name, "zone": "az-b", "topic": "orders", "partitions": 4});
    let (status, v) = send(
        client,
        Method::Post,
        &format!("/v1/lanes/{group}/members"),
        Some(token),
        vec![],
        Some(&body),
    );
    let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
    (status, text("member_id"), text("member_secret"))
}

fn version(client: &Client) -> u64 {
    let (_, v) = send(client, Method::Get, "/v1/routing", Some(OPERATOR_TOKEN), vec![], None);
    v["version"].as_u64().unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Who {
    Anonymous,
    Viewer,
    Service,
    Operator,
}

impl Who {
    fn token(self) -> Option<&'static str> {
        match self {
            Who::Anonymous => None,
            Who::Viewer => Some(VIEWER_TOKEN),
            Who::Service => Some(SERVICE_TOKEN),
            Who::Operator => Some(OPERATOR_TOKEN),
        }
    }
}

/// Builds a request for a caller: (path, extra headers, body); may set things up first.
type MakeRequest = Box<dyn Fn(&Client, Who) -> (String, Vec<Header<'static>>, Value)>;

/// One write route: how to build a request for a caller, and what each caller gets.
struct Route {
    method: Method,
    /// The route as Rocket lists it, to check the table covers every write route.
    pattern: &'static str,
    /// (path, extra headers, body) for a caller; may set things up first (a member to beat).
    request: MakeRequest,
    /// Expected status for anonymous, viewer, service, operator.
    expect: [u16; 4],
}

fn no_setup(path: &'static str, body: Value) -> MakeRequest {
    Box::new(move |_, _| (path.to_owned(), vec![], body.clone()))
}

fn write_routes() -> Vec<Route> {
    let outcome = json!({"zone": "az-a", "color": "green", "ok": 0, "error": 1000});
    vec![
        Route {
            method: Method::Post,
            pattern: "/v1/outcomes",
            request: no_setup("/v1/outcomes", outcome),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/writes",
            request: no_setup(
                "/v1/writes",
                // No `service`: each caller reports under its own identity.
                json!({"writes": [{"user_id": "u1", "zone": "az-a", "version": 1}]}),
            ),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/subscribers/<id>/ack",
            request: Box::new(|_, who| {
                let path = format!("/v1/subscribers/gw-{who:?}/ack");
                (path, vec![], json!({"version": 1, "zone": "az-a", "kind": "gateway"}))
            }),
            expect: [401, 403, 200, 200],
        },
        // An edge's leaves report: the subscriber the ack above registered for the same caller
        // (the table runs in order), so a writer reports for its own edge.
        Route {
            method: Method::Post,
            pattern: "/v1/subscribers/<id>/leaves",
            request: Box::new(|_, who| {
                let path = format!("/v1/subscribers/gw-{who:?}/leaves");
                let summary = json!({"counts": [["az-a", 1, 2]], "behind": [], "table_version": 1});
                (path, vec![], json!({ "summary": summary }))
            }),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/lanes/<group>/members",
            request: Box::new(|_, who| {
                let body = json!({"zone": "az-b", "topic": "orders", "partitions": 4});
                (format!("/v1/lanes/g-{who:?}/members"), vec![], body)
            }),
            expect: [401, 403, 201, 201],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/lanes/<group>/members/<member>/heartbeat",
            request: Box::new(|client, _| {
                let (_, id, secret) = register(client, SERVICE_TOKEN, "beats", "m");
                let path = format!("/v1/lanes/beats/members/{id}/heartbeat");
                (path, vec![secret_header(&secret)], json!({"holding": []}))
            }),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: Method::Delete,
            pattern: "/v1/lanes/<group>/members/<member>",
            request: Box::new(|client, _| {
                let (_, id, secret) = register(client, SERVICE_TOKEN, "leaves", "m");
                (
                    format!("/v1/lanes/leaves/members/{id}"),
                    vec![secret_header(&secret)],
                    Value::Null,
                )
            }),
            expect: [401, 403, 200, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/dial",
            request: Box::new(|client, _| {
                let body =
                    json!({"blue_percent": 40, "expected_version": version(client), "reason": "t"});
                ("/v1/dial".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/pins/<user_id>",
            request: Box::new(|client, _| {
                let body =
                    json!({"color": "blue", "expected_version": version(client), "reason": "t"});
                ("/v1/pins/u1".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Delete,
            pattern: "/v1/pins/<user_id>",
            request: Box::new(|client, _| {
                let body = json!({"expected_version": version(client), "reason": "t"});
                ("/v1/pins/u1".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/drains",
            request: no_setup(
                "/v1/drains",
                json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "30s", "reason": "t"}),
            ),
            expect: [401, 403, 403, 201],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/drains/<id>/<action>",
            request: Box::new(|client, _| {
                let (_, v) =
                    send(client, Method::Get, "/v1/drains", Some(OPERATOR_TOKEN), vec![], None);
                let id = v["drains"][0]["id"].to_string().trim_matches('"').to_owned();
                (format!("/v1/drains/{id}/pause"), vec![], json!({"reason": "t"}))
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/zones/<zone>/restore",
            request: no_setup("/v1/zones/az-a/restore", json!({"reason": "t"})),
            // The operator passes the gate; az-a was never drained, so the change itself is refused.
            expect: [401, 403, 403, 409],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/plans/<name>",
            request: Box::new(|client, _| {
                let body = json!({
                    "expected_version": version(client), "reason": "t", "rto": "1m",
                    "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]
                });
                ("/v1/plans/az-b-failing".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/automation",
            request: Box::new(|client, _| {
                let body =
                    json!({"stopped": true, "expected_version": version(client), "reason": "t"});
                ("/v1/automation".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/plans/<name>/dry-run",
            // A read that changes nothing: every reader passes the gate (and learns the plan is
            // not there); anonymous only while no service tokens are configured.
            request: no_setup("/v1/plans/no-such-plan/dry-run", json!({})),
            expect: [401, 404, 404, 404],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/plans/<name>/run",
            request: no_setup("/v1/plans/az-b-failing/run", json!({"reason": "t"})),
            // The operator passes the gate; the drain started above is still active.
            expect: [401, 403, 403, 409],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/plans/<name>/drill",
            request: no_setup("/v1/plans/az-b-failing/drill", json!({"reason": "t", "hold": "1s"})),
            expect: [401, 403, 403, 409],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/plans/<name>/runs/<id>/<action>",
            request: no_setup("/v1/plans/az-b-failing/runs/1/pause", json!({"reason": "t"})),
            // The operator passes the gate; there is no run 1.
            expect: [401, 403, 403, 404],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/tag",
            request: no_setup("/v1/tag", json!({"user_ids": ["a"]})),
            // A batch read: anonymous only while no service tokens are configured.
            expect: [401, 200, 200, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/units",
            request: Box::new(|client, _| {
                let mut body = json!({"moves": [{"units": "0-4", "zone": "az-a"}]});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/units".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/zones",
            request: Box::new(|client, _| {
                let mut body = json!({"name": "az-c", "lane": "red"});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/zones".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/zones/<zone>/retire",
            request: Box::new(|client, _| {
                let mut body = json!({});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/zones/az-c/retire".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/global-writer",
            request: Box::new(|client, _| {
                let mut body = json!({"zone": "az-a"});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/global-writer".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/domains",
            request: Box::new(|client, _| {
                let mut body = json!({"name": "search"});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/domains".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Put,
            pattern: "/v1/channels/<name>",
            request: Box::new(|client, _| {
                let mut body = json!({"services": ["orders"], "zone": "az-a", "percent": 10});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/channels/orders-v2".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Delete,
            pattern: "/v1/channels/<name>",
            request: Box::new(|client, _| {
                let mut body = json!({});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/channels/orders-v2".to_owned(), vec![], body)
            }),
            // The operator passes the gate; the channel was made by the row above.
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/units/evacuate",
            request: Box::new(|client, _| {
                // Named receivers: the outcomes rows above left az-a failing, which an
                // evacuation that names none would skip (409 no_receiver).
                let mut body = json!({"zone": "az-b", "to": ["az-a"]});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/units/evacuate".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/changes/cancel",
            request: Box::new(|client, _| {
                let mut body = json!({});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/changes/cancel".to_owned(), vec![], body)
            }),
            // The operator passes the gate; nothing is in progress to cancel.
            expect: [401, 403, 403, 409],
        },
        Route {
            method: Method::Post,
            pattern: "/v1/holds",
            request: Box::new(|client, _| {
                let mut body = json!({"units": [{"units": "0-4"}], "hold": "1s"});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/holds".to_owned(), vec![], body)
            }),
            expect: [401, 403, 403, 200],
        },
        Route {
            method: Method::Delete,
            pattern: "/v1/holds",
            request: Box::new(|client, _| {
                let mut body = json!({});
                body["expected_version"] = json!(version(client));
                body["reason"] = json!("t");
                ("/v1/holds".to_owned(), vec![], body)
            }),
            // The operator passes the gate: it releases the hold of the row above.
            expect: [401, 403, 403, 200],
        },
    ]
}

#[test]
fn every_write_route_admits_exactly_the_callers_of_the_trust_model() {
    let (client, _dir) = client_with(&toml(""));
    let routes = write_routes();
    // Every route that takes a body or changes something is in the table.
    let listed: BTreeSet<(String, String)> =
        routes.iter().map(|r| (r.method.to_string(), r.pattern.to_owned())).collect();
    for route in client.rocket().routes() {
        let path = route.uri.path().to_string();
        if route.method != Method::Get && path.starts_with("/v1/") {
            let key = (route.method.to_string(), path.clone());
            assert!(listed.contains(&key), "write route {key:?} is missing from this test's table");
        }
    }
    let mut failures = Vec::new();
    for route in &routes {
        for (i, who) in
            [Who::Anonymous, Who::Viewer, Who::Service, Who::Operator].into_iter().enumerate()
        {
            let (path, headers, body) = (route.request)(&client, who);
            let body = (!body.is_null()).then_some(body);
            let (status, v) =
                send(&client, route.method, &path, who.token(), headers, body.as_ref());
            if status.code != route.expect[i] {
                failures.push(format!(
                    "{} {path} as {who:?}: {} (expected {}) {v}",
                    route.method, status.code, route.expect[i]
                ));
            }
            if status.code >= 400 {
                assert!(
                    v["error"].is_string() && v["detail"].is_string(),
                    "{path} as {who:?}: {v}"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn without_service_tokens_anonymous_callers_still_read_but_never_write() {
    let (client, _dir) = client_with(&config_toml(""));
    let (status, _) = send(&client, Method::Get, "/v1/routing", None, vec![], None);
    assert_eq!(status, Status::Ok);
    let outcome = json!({"zone": "az-a", "color": "green", "ok": 0, "error": 1000});
    let (status, v) = send(&client, Method::Post, "/v1/outcomes", None, vec![], Some(&outcome));
    assert_eq!((status, v["error"].as_str()), (Status::Unauthorized, Some("unauthorized")), "{v}");
    let ack = json!({"version": 1, "zone": "az-a", "kind": "gateway"});
    let (status, _) =
        send(&client, Method::Post, "/v1/subscribers/gw/ack", None, vec![], Some(&ack));
    assert_eq!(status, Status::Unauthorized);
    // Watching is a read; registering as a subscriber while watching is not.
    let (status, _) =
        send(&client, Method::Get, "/v1/routing/watch?subscriber_id=gw", None, vec![], None);
    assert_eq!(status, Status::Unauthorized);
    let (status, v) = send(&client, Method::Get, "/v1/subscribers", None, vec![], None);
    assert_eq!((status, v["subscribers"].as_array().map(Vec::len)), (Status::Ok, Some(0)));
    let (status, _, _) = register(&client, VIEWER_TOKEN, "g", "m");
    assert_eq!(status, Status::Forbidden);
}

fn raw_post(
    client: &Client,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> (Status, Value) {
    let mut request = client.post(path.to_owned()).header(bearer(OPERATOR_TOKEN));
    if let Some(ct) = content_type {
        request = request.header(Header::new("Content-Type", ct.to_owned()));
    }
    let response =
        request.header(Header::new("Content-Length", body.len().to_string())).body(body).dispatch();
    let status = response.status();
    (status, serde_json::from_str(&response.into_string().unwrap()).unwrap())
}

#[test]
fn a_body_that_is_not_declared_json_is_refused_with_415() {
    let (client, _dir) = client_with(&toml(""));
    let outcome = json!({"zone": "az-a", "color": "green", "ok": 0, "error": 1000}).to_string();
    // What a web page can send without a CORS preflight: text/plain, a form, or no type at all.
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let (status, v) = raw_post(&client, "/v1/outcomes", ct, &outcome);
        assert_eq!(status, Status::UnsupportedMediaType, "{ct:?}: {v}");
        assert_eq!(v["error"], "unsupported_media_type", "{ct:?}");
        assert!(v["detail"].as_str().unwrap().contains("application/json"), "{v}");
    }
    let (status, _) = raw_post(
        &client,
        "/v1/subscribers/gw/ack",
        Some("text/plain"),
        r#"{"version":1,"zone":"az-a"}"#,
    );
    assert_eq!(status, Status::UnsupportedMediaType);
    let dial = json!({"blue_percent": 40, "expected_version": 1, "reason": "t"}).to_string();
    let response = client
        .put("/v1/dial")
        .header(bearer(OPERATOR_TOKEN))
        .header(ContentType::Plain)
        .body(dial.clone())
        .dispatch();
    assert_eq!(response.status(), Status::UnsupportedMediaType);
    // Declared JSON is fine, also with parameters or a +json type.
    let (status, v) =
        raw_post(&client, "/v1/outcomes", Some("application/json; charset=utf-8"), &outcome);
    assert_eq!(status, Status::Ok, "{v}");
    let (status, v) =
        raw_post(&client, "/v1/outcomes", Some("application/merge-patch+json"), &outcome);
    assert_eq!(status, Status::Ok, "{v}");
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let (client, _dir) = client_with(&toml(""));
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let response = client
            .get("/v1/routing")
            .header(Header::new("Authorization", format!("{scheme} {SERVICE_TOKEN}")))
            .dispatch();
        assert_eq!(response.status(), Status::Ok, "{scheme}");
    }
    let response = client
        .get("/v1/routing")
        .header(Header::new("Authorization", format!("Basic {SERVICE_TOKEN}")))
        .dispatch();
    assert_eq!(response.status(), Status::Unauthorized);
}

#[test]
fn heartbeat_and_leave_need_the_members_own_secret() {
    let (client, _dir) = client_with(&toml(""));
    let (status, b1, b1_secret) = register(&client, SERVICE_TOKEN, "orders", "b1");
    assert_eq!(status, Status::Created);
    assert_eq!(b1_secret.len(), 64, "an HMAC-SHA256 in hex");
    let (_, b2, b2_secret) = register(&client, SERVICE_TOKEN, "orders", "b2");
    let beat = json!({"holding": [0, 1, 2, 3]});
    let path = format!("/v1/lanes/orders/members/{b1}/heartbeat");
    let (status, v) = send(&client, Method::Post, &path, Some(SERVICE_TOKEN), vec![], Some(&beat));
    assert_eq!(
        (status, v["error"].as_str()),
        (Status::Unauthorized, Some("member_secret_required"))
    );
    // Another member's secret, even from the same token, does not speak for b1.
    let (status, v) = send(
        &client,
        Method::Post,
        &path,
        Some(SERVICE_TOKEN),
        vec![secret_header(&b2_secret)],
        Some(&beat),
    );
    assert_eq!((status, v["error"].as_str()), (Status::Forbidden, Some("member_secret_mismatch")));
    let leave = format!("/v1/lanes/orders/members/{b1}");
    let (status, _) = send(&client, Method::Delete, &leave, Some(SERVICE_TOKEN), vec![], None);
    assert_eq!(status, Status::Unauthorized);
    let (status, _) = send(
        &client,
        Method::Delete,
        &leave,
        Some(SERVICE_TOKEN),
        vec![secret_header(&b2_secret)],
        None,
    );
    assert_eq!(status, Status::Forbidden);
    let (_, group) =
        send(&client, Method::Get, "/v1/lanes/orders", Some(SERVICE_TOKEN), vec![], None);
    assert_eq!(group["members"].as_array().unwrap().len(), 2, "nothing above removed b1: {group}");
    // The real member, with its secret, may heartbeat (with any writer token) and leave.
    let (status, _) = send(
        &client,
        Method::Post,
        &path,
        Some(OTHER_SERVICE_TOKEN),
        vec![secret_header(&b1_secret)],
        Some(&beat),
    );
    assert_eq!(status, Status::Ok);
    let (status, _) = send(
        &client,
        Method::Delete,
        &leave,
        Some(SERVICE_TOKEN),
        vec![secret_header(&b1_secret)],
        None,
    );
    assert_eq!(status, Status::Ok);
    let path = format!("/v1/lanes/orders/members/{b2}/heartbeat");
    let (status, _) = send(
        &client,
        Method::Post,
        &path,
        Some(SERVICE_TOKEN),
        vec![secret_header(&b2_secret)],
        Some(&beat),
    );
    assert_eq!(status, Status::Ok);
}

#[test]
fn member_ids_are_never_reused_across_restarts_and_secrets_verify_on_any_replica_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = BTreeSet::new();
    let mut first = None;
    for _restart in 0..3 {
        let client = client_in(&toml(""), dir.path());
        for _ in 0..5 {
            let (status, id, secret) = register(&client, SERVICE_TOKEN, "orders", "b");
            assert_eq!(status, Status::Created);
            assert!(seen.insert(id.clone()), "member ID {id} was handed out twice");
            first.get_or_insert((id, secret));
        }
    }
    // The generated key is kept in the data directory: the first run's secret still verifies
    // (the member itself is gone after the restart, so the answer is "register again").
    let (id, secret) = first.unwrap();
    let client = client_in(&toml(""), dir.path());
    let path = format!("/v1/lanes/orders/members/{id}/heartbeat");
    let beat = json!({"holding": []});
    let (status, v) = send(
        &client,
        Method::Post,
        &path,
        Some(SERVICE_TOKEN),
        vec![secret_header(&secret)],
        Some(&beat),
    );
    assert_eq!((status, v["error"].as_str()), (Status::NotFound, Some("member_not_found")), "{v}");
    // Two replicas with separate data directories but the same configured key verify each
    // other's secrets; a replica with another key does not.
    let key = "[lanes]\nmember_key = \"5d1e0b7f2c4a9e8d3b6f1a0c7e2d4b9f8a3c6e1d0b7f2a4c9e8d3b6f1a0c7e2d\"\n";
    let (a, _a_dir) = client_with(&toml(key));
    let (b, _b_dir) = client_with(&toml(key));
    let (_, id, secret) = register(&a, SERVICE_TOKEN, "orders", "b");
    let path = format!("/v1/lanes/orders/members/{id}/heartbeat");
    let (status, _) = send(
        &b,
        Method::Post,
        &path,
        Some(SERVICE_TOKEN),
        vec![secret_header(&secret)],
        Some(&beat),
    );
    assert_eq!(
        status,
        Status::NotFound,
        "replica b accepts the secret (and does not know the member)"
    );
    let (c, _c_dir) = client_with(&toml(""));
    let (status, _) = send(
        &c,
        Method::Post,
        &path,
        Some(SERVICE_TOKEN),
        vec![secret_header(&secret)],
        Some(&beat),
    );
    assert_eq!(status, Status::Forbidden);
}

#[test]
fn acks_for_a_subscriber_come_only_from_the_identity_that_registered_it() {
    let (client, _dir) = client_with(&toml(""));
    let ack = |token: &str, version: u64| {
        let body = json!({"version": version, "zone": "az-a", "kind": "gateway"});
        send(&client, Method::Post, "/v1/subscribers/gw-1/ack", Some(token), vec![], Some(&body))
    };
    assert_eq!(ack(SERVICE_TOKEN, 1).0, Status::Ok);
    for token in [OTHER_SERVICE_TOKEN, OPERATOR_TOKEN] {
        let (status, v) = ack(token, 1);
        assert_eq!(
            (status, v["error"].as_str()),
            (Status::Forbidden, Some("not_subscriber_owner")),
            "{v}"
        );
    }
    // A watch stream under the same subscriber ID from another identity is refused as well.
    let (status, _) = send(
        &client,
        Method::Get,
        "/v1/routing/watch?subscriber_id=gw-1&zone=az-a&kind=gateway",
        Some(OTHER_SERVICE_TOKEN),
        vec![],
        None,
    );
    assert_eq!(status, Status::Forbidden);
    assert_eq!(ack(SERVICE_TOKEN, 1).0, Status::Ok, "the owner still may");
    let (_, list) = send(&client, Method::Get, "/v1/subscribers", Some(VIEWER_TOKEN), vec![], None);
    let owner = list["subscribers"][0]["owner"].as_str().unwrap();
    let hash = token_sha256_hex(SERVICE_TOKEN);
    assert_eq!(owner, format!("service:{}", &hash[..12]), "named by its hash, never the token");
}

/// An edge's leaves report is bounded: a count that overflows or passes the most any edge
/// serves, and a leaf said to lack a version since before it was committed (56 years behind),
/// are refused; only the edge's owner reports for it. The control: the same edge's honest
/// report counts, and the forged one would have counted (a million leaves, 56 years behind).
#[test]
fn an_edges_leaves_report_with_a_forged_count_or_lag_is_refused() {
    let (client, _dir) = client_with(&toml(""));
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let now_ms = || now().as_millis() as u64;
    // The edge registers by acknowledging the current version.
    let current = version(&client);
    let ack = json!({"version": current, "zone": "az-a", "kind": "edge"});
    let (status, _) = send(
        &client,
        Method::Post,
        "/v1/subscribers/edge-1/ack",
        Some(SERVICE_TOKEN),
        vec![],
        Some(&ack),
    );
    assert_eq!(status, Status::Ok);
    // A new version the edge's leaf lacks; the coordinator records when it was committed.
    let dial = json!({"blue_percent": 40, "expected_version": current, "reason": "t"});
    let (status, _) =
        send(&client, Method::Put, "/v1/dial", Some(OPERATOR_TOKEN), vec![], Some(&dial));
    assert_eq!(status, Status::Ok);
    let committed_ms = now_ms();
    std::thread::sleep(std::time::Duration::from_millis(50));
    let leaves = |token: &str, counts: Value, missing_since_ms: u64| {
        let leaf = json!({"id": "leaf-1", "zone": "az-a", "kind": "service",
            "applied_version": current, "missing_since_ms": missing_since_ms});
        let body =
            json!({"summary": {"counts": counts, "behind": [leaf], "table_version": current + 1}});
        send(
            &client,
            Method::Post,
            "/v1/subscribers/edge-1/leaves",
            Some(token),
            vec![],
            Some(&body),
        )
    };
    let fifty_six_years_ms = 56 * 365 * 86_400_000;
    let refused = [
        (json!([["az-a", current, u64::MAX], ["az-b", current, 2]]), committed_ms, "wraps"),
        (json!([["az-a", current, 1_000_000]]), committed_ms, "a million leaves"),
        (json!([["az-a", current, 1]]), now_ms() - fifty_six_years_ms, "56 years behind"),
        (json!([["az-a", current, 1]]), now_ms() + 3_600_000, "behind since an hour from now"),
    ];
    for (counts, since, what) in refused {
        let (status, v) = leaves(SERVICE_TOKEN, counts, since);
        assert_eq!(
            (status, v["error"].as_str()),
            (Status::BadRequest, Some("invalid_summary")),
            "{what}: {v}"
        );
    }
    let (status, v) = leaves(OTHER_SERVICE_TOKEN, json!([["az-a", current, 1]]), committed_ms);
    assert_eq!((status, v["error"].as_str()), (Status::Forbidden, Some("not_subscriber_owner")));
    let convergence = |client: &Client| {
        let path = format!("/v1/routing/convergence?version={}", current + 1);
        send(client, Method::Get, &path, Some(OPERATOR_TOKEN), vec![], None).1
    };
    let c = convergence(&client);
    assert_eq!(
        (c["live"].as_u64(), c["behind"].as_array().map(Vec::len)),
        (Some(1), Some(1)),
        "{c}"
    );
    assert_eq!(c["behind"][0]["subscriber_id"], "edge-1", "nothing forged counted: {c}");
    // The control: the honest report (the leaf lacks the new version since it was committed)
    // counts, behind for no longer than since the commit.
    let (status, v) = leaves(SERVICE_TOKEN, json!([["az-a", current, 1]]), committed_ms);
    assert_eq!((status, v["leaves"].as_u64()), (Status::Ok, Some(1)), "{v}");
    let c = convergence(&client);
    assert_eq!(c["live"].as_u64(), Some(2), "{c}");
    let leaf = c["behind"].as_array().unwrap().iter().find(|b| b["subscriber_id"] == "leaf-1");
    let behind_for_ms =
        leaf.unwrap_or_else(|| panic!("the leaf counts: {c}"))["behind_for_ms"].as_u64().unwrap();
    assert!(behind_for_ms < 60_000, "{c}");
}

#[test]
fn a_flooding_token_hits_its_own_limits_and_the_others_still_register() {
    let extra = "[subscribers]\nmax_per_caller = 5\n[lanes]\nmax_members_per_caller = 3\nmax_groups_per_caller = 2\n";
    let (client, _dir) = client_with(&toml(extra));
    let ack = |token: &str, id: &str| {
        let body = json!({"version": 1, "zone": "az-a", "kind": "gateway"});
        send(
            &client,
            Method::Post,
            &format!("/v1/subscribers/{id}/ack"),
            Some(token),
            vec![],
            Some(&body),
        )
    };
    for i in 0..5 {
        assert_eq!(ack(SERVICE_TOKEN, &format!("flood-{i}")).0, Status::Ok);
    }
    let (status, v) = ack(SERVICE_TOKEN, "flood-5");
    assert_eq!(
        (status, v["error"].as_str()),
        (Status::TooManyRequests, Some("caller_limit")),
        "{v}"
    );
    assert!(v["detail"].as_str().unwrap().contains("subscribers.max_per_caller"), "{v}");
    let (status, _) = send(
        &client,
        Method::Get,
        "/v1/routing/watch?subscriber_id=flood-6",
        Some(SERVICE_TOKEN),
        vec![],
        None,
    );
    assert_eq!(status, Status::TooManyRequests);
    assert_eq!(
        ack(OTHER_SERVICE_TOKEN, "real-gateway").0,
        Status::Ok,
        "another token still registers"
    );

    // Lane members: three per caller, in at most two groups it creates.
    for group in ["f1", "f2", "f2"] {
        assert_eq!(register(&client, SERVICE_TOKEN, group, "flood").0, Status::Created);
    }
    let (status, ..) = register(&client, SERVICE_TOKEN, "f1", "flood");
    assert_eq!(status, Status::TooManyRequests, "a fourth member");
    assert_eq!(register(&client, OTHER_SERVICE_TOKEN, "f1", "real").0, Status::Created);
    assert_eq!(register(&client, OTHER_SERVICE_TOKEN, "orders", "real").0, Status::Created);
    // Groups: a caller with room for members still cannot create more than two groups.
    let (status, v) = send(
        &client,
        Method::Post,
        "/v1/lanes/f3/members",
        Some(OPERATOR_TOKEN),
        vec![],
        Some(&json!({"zone": "az-b", "topic": "orders", "partitions": 4})),
    );
    assert_eq!(status, Status::Created, "{v}");
    let (status, _) = send(
        &client,
        Method::Post,
        "/v1/lanes/f4/members",
        Some(OPERATOR_TOKEN),
        vec![],
        Some(&json!({"zone": "az-b", "topic": "orders", "partitions": 4})),
    );
    assert_eq!(status, Status::Created);
    let (status, v) = send(
        &client,
        Method::Post,
        "/v1/lanes/f5/members",
        Some(OPERATOR_TOKEN),
        vec![],
        Some(&json!({"zone": "az-b", "topic": "orders", "partitions": 4})),
    );
    assert_eq!(
        (status, v["error"].as_str()),
        (Status::TooManyRequests, Some("caller_limit")),
        "{v}"
    );
    assert!(v["detail"].as_str().unwrap().contains("lanes.max_groups_per_caller"), "{v}");
}

#[test]
fn the_lane_client_sends_its_token_and_secret_and_a_refused_secret_means_register_again() {
    use tidegate::client::lanes::{LaneClient, LaneClientError};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, toml("")).unwrap();
    let server = common::Server::start(&config, &dir.path().join("data"));
    let timeout = std::time::Duration::from_secs(5);
    let anonymous = LaneClient::new(&server.url, None, timeout);
    match anonymous.register("orders", Some("b1"), "az-b", "orders", 4) {
        Err(LaneClientError::Api { status: 401, .. }) => {}
        other => panic!("an anonymous member must be refused: {other:?}"),
    }
    let client = LaneClient::new(&server.url, Some(SERVICE_TOKEN.to_owned()), timeout);
    let b1 = client.register("orders", Some("b1"), "az-b", "orders", 4).unwrap();
    let b2 = client.register("orders", Some("b2"), "az-b", "orders", 4).unwrap();
    assert!(b1.member_id.starts_with("b1-") && b1.member_id != b2.member_id);
    let (s1, s2) = (b1.member_secret.unwrap(), b2.member_secret.unwrap());
    let beat = client.heartbeat("orders", &b1.member_id, &s1, &[]).unwrap();
    assert_eq!(beat.member_id, b1.member_id);
    assert!(matches!(
        client.heartbeat("orders", &b1.member_id, &s2, &[]),
        Err(LaneClientError::MemberGone(_))
    ));
    // Over a real socket too, a text/plain body (what a web page may send without a preflight)
    // is refused before it is read.
    let response = common::agent()
        .post(&format!("{}/v1/outcomes", server.url))
        .header("Authorization", &format!("Bearer {SERVICE_TOKEN}"))
        .header("Content-Type", "text/plain")
        .send(r#"{"zone": "az-a", "color": "green", "ok": 0, "error": 1000}"#)
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
    client.leave("orders", &b1.member_id, &s1).unwrap();
    assert!(matches!(
        client.heartbeat("orders", &b1.member_id, &s1, &[]),
        Err(LaneClientError::MemberGone(_))
    ));
}

#[test]
fn bad_trust_settings_name_their_key() {
    use figment::Figment;
    use figment::providers::{Format, Serialized, Toml};
    use tidegate::config::{Config, Overrides, Settings};
    let cases = [
        ("[lanes]\nmember_key = \"not hex\"", "lanes.member_key"),
        (
            "[lanes]\nmember_key = \"00000000000000000000000000000000000000000000000000000000000000\"",
            "lanes.member_key",
        ),
        ("[lanes]\nmax_members_per_caller = 0", "lanes.max_members_per_caller"),
        ("[lanes]\nmax_groups_per_caller = 0", "lanes.max_groups_per_caller"),
        ("[subscribers]\nmax_per_caller = 0", "subscribers.max_per_caller"),
    ];
    for (toml, key) in cases {
        let figment =
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(toml));
        let error = Config::from_figment(figment, &Overrides::default()).unwrap_err().to_string();
        assert!(error.contains(key), "{toml}: {error}");
    }
}
