//! The API contract (`src/http/openapi.json`, served at `GET /v1/openapi.json`) against the code:
//! every mounted API route is in the document and the document names no other, every error code
//! the handlers can answer is listed, and real answers of the main operations match its schemas.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use rocket::http::{ContentType, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};

/// The flag the coordinator evaluates unless `openfeature.flag_key` says otherwise.
const FLAG: &str = tidegate::core::DEFAULT_FLAG_KEY;
const DOCUMENT_FILE: &str = "src/http/openapi.json";
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

fn document() -> Value {
    serde_json::from_str(tidegate::http::openapi::DOCUMENT).expect("src/http/openapi.json is JSON")
}

/// The routes the document must describe: the API and OFREP, not the HTML UI or its assets.
fn is_api(path: &str) -> bool {
    path.starts_with("/v1/")
        || path.starts_with("/ofrep/")
        || matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Rocket's `/v1/pins/<user_id>` (or `<rest..>`) as an OpenAPI template `/v1/pins/{user_id}`.
fn template(rocket_path: &str) -> String {
    rocket_path
        .split('/')
        .map(|segment| match segment.strip_prefix('<').and_then(|s| s.strip_suffix('>')) {
            Some(name) => format!("{{{}}}", name.trim_end_matches("..")),
            None => segment.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A starting point for the document entry of a route that is missing from it.
fn skeleton(method: &str, path: &str) -> String {
    let parameters: Vec<Value> = path
        .split('/')
        .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect();
    let reads = method == "get";
    let mut operation = json!({
        "operationId": "<camelCaseName>",
        "summary": "<what it does>",
        "tags": ["<tagging|routing|drains|lanes|operations>"],
        "x-tidegate-role": if reads { "reader" } else { "operator" },
        "security": if reads {
            json!([{}, {"bearer": []}, {"session": []}])
        } else {
            json!([{"bearer": []}, {"session": [], "csrf": []}])
        },
        "responses": {
            "200": {"description": "<the answer>", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/<Schema>"}}}},
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
        },
    });
    if !reads {
        operation["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/<Request>"}}}});
        operation["responses"]["403"] = json!({"$ref": "#/components/responses/Forbidden"});
        operation["responses"]["413"] = json!({"$ref": "#/components/responses/PayloadTooLarge"});
    }
    if !parameters.is_empty() {
        operation["parameters"] = json!(parameters);
    }
    let entry = json!({ path: { method: operation } });
    serde_json::to_string_pretty(&entry).unwrap()
}

#[test]
fn every_mounted_api_route_is_in_the_document_and_the_document_names_no_other() {
    let (client, _dir) = client();
    let mounted: BTreeSet<(String, String)> = client
        .rocket()
        .routes()
        .filter(|r| is_api(r.uri.path()))
        .map(|r| (r.method.as_str().to_lowercase(), template(r.uri.path())))
        .collect();
    assert!(mounted.contains(&("put".into(), "/v1/pins/{user_id}".into())), "{mounted:?}");
    let doc = document();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if METHODS.contains(&method.as_str()) {
                documented.insert((method.clone(), path.clone()));
            }
        }
    }
    let mut problems = Vec::new();
    for (method, path) in mounted.difference(&documented) {
        problems.push(format!(
            "{} {path} is mounted but missing from {DOCUMENT_FILE}. Add it under \"paths\" \
             (merge into the existing \"{path}\" entry if there is one), fill in the <...> and \
             describe every status it can answer:\n{}",
            method.to_uppercase(),
            skeleton(method, path)
        ));
    }
    for (method, path) in documented.difference(&mounted) {
        problems.push(format!(
            "{DOCUMENT_FILE} describes {} {path}, but no such route is mounted: remove \
             paths.\"{path}\".{method} from the document (or fix its path: Rocket's `<name>` is \
             the document's `{{name}}`)",
            method.to_uppercase()
        ));
    }
    assert!(
        problems.is_empty(),
        "the API document drifted from the code:\n\n{}",
        problems.join("\n\n")
    );
}

/// Every `ApiError` code written in `src/http` as `ApiError::new(status, "code", ..)`,
/// `ApiError::bad_request("code", ..)` or a catcher arm `=> ("code", ..)`, and every `Failure`
/// code of the framework-free answers both HTTP listeners render (`Failure::new(status, "code",
/// ..)`, `Failure::bad_request("code", ..)`) in `src/service/{tag_answer,edge,bearer,subscribers}.rs`
/// and `src/http_fast`.
fn codes_in_source() -> BTreeSet<String> {
    fn literal_after(text: &str) -> Option<String> {
        let text = text.trim_start();
        let rest = text.strip_prefix('"')?;
        let end = rest.find('"')?;
        let code = &rest[..end];
        code.chars().all(|c| c.is_ascii_lowercase() || c == '_').then(|| code.to_owned())
    }
    fn walk(dir: &Path, codes: &mut BTreeSet<String>) {
        let paths: Vec<_> = if dir.is_dir() {
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
        } else {
            vec![dir.to_path_buf()]
        };
        for path in paths {
            if path.is_dir() {
                walk(&path, codes);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, _) in text.match_indices("bad_request(") {
                    codes.extend(literal_after(&text[i + "bad_request(".len()..]));
                }
                for constructor in ["ApiError::new(", "Failure::new("] {
                    for (i, _) in text.match_indices(constructor) {
                        let rest = &text[i + constructor.len()..];
                        if let Some(comma) = rest.find(',') {
                            codes.extend(literal_after(&rest[comma + 1..]));
                        }
                    }
                }
                // The default catcher's arms (only error.rs maps statuses to codes this way).
                let arms = if path.ends_with("error.rs") { text.as_str() } else { "" };
                for (i, _) in arms.match_indices("=> (") {
                    codes.extend(literal_after(&text[i + "=> (".len()..]));
                }
            }
        }
    }
    let mut codes = BTreeSet::new();
    for place in [
        "src/http",
        "src/http_fast",
        "src/service/tag_answer.rs",
        "src/service/edge.rs",
        "src/service/bearer.rs",
        "src/service/subscribers.rs",
    ] {
        walk(Path::new(place), &mut codes);
    }
    codes
}

#[test]
fn the_error_schema_lists_every_code_the_handlers_answer() {
    let doc = document();
    let listed: BTreeSet<String> =
        doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
            .as_array()
            .expect("Error.error has an enum of codes")
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect();
    let used = codes_in_source();
    for known in ["version_conflict", "invalid_user_id", "unauthorized", "not_found", "internal"] {
        assert!(used.contains(known), "the scan of src/http missed `{known}`: {used:?}");
    }
    let missing: Vec<_> = used.difference(&listed).collect();
    let unused: Vec<_> = listed.difference(&used).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "{DOCUMENT_FILE}: components.schemas.Error.properties.error.enum must list exactly the \
         codes in src/http. Add: {missing:?}. Remove (no longer answered): {unused:?}"
    );
}

/// Resolves a local `$ref` such as `#/components/responses/NotFound`.
fn pointer<'d>(doc: &'d Value, reference: &str) -> Option<&'d Value> {
    doc.pointer(reference.strip_prefix('#')?)
}

#[test]
fn every_reference_in_the_document_resolves() {
    fn walk(doc: &Value, value: &Value, at: &str, broken: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref")
                    && pointer(doc, r).is_none()
                {
                    broken.push(format!("{at}: {r}"));
                }
                for (k, v) in map {
                    walk(doc, v, &format!("{at}/{k}"), broken);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(doc, v, &format!("{at}/{i}"), broken);
                }
            }
            _ => {}
        }
    }
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut broken = Vec::new();
    walk(&doc, &doc, "#", &mut broken);
    assert!(broken.is_empty(), "unresolved $refs in {DOCUMENT_FILE}: {broken:?}");
    // Every schema must compile as JSON Schema 2020-12 (OpenAPI 3.1's dialect).
    for (name, _) in doc["components"]["schemas"].as_object().unwrap() {
        let schema = json!({"$ref": format!("#/components/schemas/{name}"), "components": doc["components"]});
        jsonschema::draft202012::new(&schema)
            .unwrap_or_else(|e| panic!("components.schemas.{name} is not valid JSON Schema: {e}"));
    }
}

/// Checks a real answer against the document: the status is described for the operation, the
/// content type is the described one, described headers are present and the body matches the
/// schema. Returns the body (JSON, or a string for other content).
fn conforms(method: &str, path: &str, response: LocalResponse<'_>) -> Value {
    let doc = document();
    let status = response.status().code.to_string();
    let operation = &doc["paths"][path][method];
    assert!(operation.is_object(), "{} {path} is not in the document", method.to_uppercase());
    let mut described = &operation["responses"][status.as_str()];
    if described.is_null() {
        described = &operation["responses"]["default"];
    }
    assert!(
        described.is_object(),
        "{} {path} answered {status}, which it does not describe",
        method.to_uppercase()
    );
    if let Some(r) = described["$ref"].as_str() {
        described = pointer(&doc, r).expect("response $ref resolves");
    }
    for (header, _) in described["headers"].as_object().into_iter().flatten() {
        assert!(
            response.headers().get_one(header).is_some(),
            "{method} {path} {status}: no `{header}` header"
        );
    }
    let content = described["content"].as_object().expect("described content");
    let content_type = response.content_type().expect("a content type");
    let media = format!("{}/{}", content_type.top(), content_type.sub());
    let schema = &content.get(&media).unwrap_or_else(|| {
        panic!("{method} {path} {status}: `{media}` is not the described content {content:?}")
    })["schema"];
    let text = response.into_string().expect("a body");
    let instance: Value = if media == "application/json" {
        serde_json::from_str(&text).expect("a JSON body")
    } else {
        Value::String(text)
    };
    let mut root = schema.clone();
    root.as_object_mut().unwrap().insert("components".into(), doc["components"].clone());
    let validator = jsonschema::draft202012::new(&root).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} {path} answered {status} with a body that does not match the document:\n{}\nbody: {instance}",
        method.to_uppercase(),
        errors.join("\n")
    );
    instance
}

fn bearer(token: &str) -> Header<'static> {
    Header::new("Authorization", format!("Bearer {token}"))
}

fn send<'c>(
    client: &'c Client,
    method: rocket::http::Method,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> LocalResponse<'c> {
    let mut request = client.req(method, uri.to_owned());
    if let Some(token) = token {
        request = request.header(bearer(token));
    }
    if let Some(body) = body {
        request = request.header(ContentType::JSON).body(body.to_string());
    }
    request.dispatch()
}

#[test]
fn the_document_is_served_to_anyone_even_where_reads_need_a_token() {
    let toml = format!(
        "service_tokens_sha256 = [\"{}\"]\n",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    );
    let (client, _dir) = client_with(&config_toml(&toml));
    assert_eq!(client.get("/v1/routing").dispatch().status(), Status::Unauthorized);
    let response = client.get("/v1/openapi.json").dispatch();
    assert_eq!(response.status(), Status::Ok);
    let served = conforms("get", "/v1/openapi.json", response);
    assert_eq!(served, document());
}

/// The answers of a move frozen by the embedded `[freeze] by_default` (the request says nothing
/// about freezing: 200 at its end, with `loss_less`) and of one asked with `"freeze": true`
/// (202 with `change`) match the document, for the dial and the unit move.
#[test]
fn answers_of_default_frozen_moves_match_the_document() {
    use rocket::http::Method::Put;
    let (client, _dir) = client_with(&config_toml("[freeze]\nwindow = \"30s\"\n"));
    let op = Some(OPERATOR_TOKEN);
    let dial = json!({"blue_percent": 40, "expected_version": 1, "reason": "contract test"});
    let table = conforms("put", "/v1/dial", send(&client, Put, "/v1/dial", op, Some(dial)));
    assert_eq!(
        (&table["blue_units"], &table["loss_less"]["frozen_version"]),
        (&json!(40), &json!(2))
    );
    let v = table["version"].as_u64().unwrap();
    let moves = json!({"moves": [{"units": "0-4", "zone": "green"}], "expected_version": v, "reason": "contract test"});
    let table = conforms("put", "/v1/units", send(&client, Put, "/v1/units", op, Some(moves)));
    assert_eq!(table["moved_units"], 5, "{table}");
    assert!(table["loss_less"]["unfrozen_version"].as_u64() > Some(v), "{table}");
    let v = table["version"].as_u64().unwrap();
    let asked = json!({"blue_percent": 30, "freeze": true, "expected_version": v, "reason": "contract test"});
    let table = conforms("put", "/v1/dial", send(&client, Put, "/v1/dial", op, Some(asked)));
    assert!(table["change"].is_object() && table["loss_less"].is_null(), "{table}");
}

#[test]
fn answers_of_the_main_operations_match_the_document() {
    use rocket::http::Method::{Delete, Get, Post, Put};
    let (client, _dir) = client();
    let op = Some(OPERATOR_TOKEN);

    conforms("get", "/v1/tag", send(&client, Get, "/v1/tag?user_id=alice", None, None));
    conforms("get", "/v1/tag", send(&client, Get, "/v1/tag", None, None));
    conforms(
        "post",
        "/v1/tag",
        send(&client, Post, "/v1/tag", None, Some(json!({"user_ids": ["a", "b"]}))),
    );
    let table = conforms("get", "/v1/routing", send(&client, Get, "/v1/routing", None, None));
    let v = table["version"].as_u64().unwrap();
    let dial = json!({"blue_percent": 40, "expected_version": v, "reason": "contract test"});
    let table = conforms("put", "/v1/dial", send(&client, Put, "/v1/dial", op, Some(dial)));
    assert_eq!(table["changed"], true);
    let v = table["version"].as_u64().unwrap();
    let pin = json!({"color": "blue", "expected_version": v, "reason": "contract test"});
    let table =
        conforms("put", "/v1/pins/{user_id}", send(&client, Put, "/v1/pins/bob", op, Some(pin)));
    assert_eq!(table["pins"]["bob"], "blue");
    let v = table["version"].as_u64().unwrap();
    let unpin = json!({"expected_version": v, "reason": "contract test"});
    conforms(
        "delete",
        "/v1/pins/{user_id}",
        send(&client, Delete, "/v1/pins/bob", op, Some(unpin)),
    );
    let audit = conforms("get", "/v1/audit", send(&client, Get, "/v1/audit?limit=10", None, None));
    assert_eq!(audit["entries"][0]["by"], "alice", "{audit}");

    let outcomes = json!([{"zone": "az-a", "color": "green", "ok": 90, "error": 10}, {"zone": "az-b", "color": "blue", "ok": 5}]);
    conforms("post", "/v1/outcomes", send(&client, Post, "/v1/outcomes", op, Some(outcomes)));
    let zones = conforms("get", "/v1/zones", send(&client, Get, "/v1/zones", None, None));
    assert_eq!(zones["zones"][0]["requests"], 5, "{zones}");

    let drain = json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "1h", "reason": "contract test"});
    let started =
        conforms("post", "/v1/drains", send(&client, Post, "/v1/drains", op, Some(drain)));
    let id = started["id"].as_u64().unwrap();
    conforms("get", "/v1/drains/current", send(&client, Get, "/v1/drains/current", None, None));
    conforms("get", "/v1/drains/{id}", send(&client, Get, &format!("/v1/drains/{id}"), None, None));
    let pause = json!({"reason": "contract test"});
    let paused = conforms(
        "post",
        "/v1/drains/{id}/{action}",
        send(&client, Post, &format!("/v1/drains/{id}/pause"), op, Some(pause)),
    );
    assert_eq!(paused["state"], "paused");
    assert_eq!(paused["pause_cause"], "operator");
    let restore = json!({"reason": "contract test"});
    let refused = conforms(
        "post",
        "/v1/zones/{zone}/restore",
        send(&client, Post, "/v1/zones/az-b/restore", op, Some(restore)),
    );
    assert_eq!(refused["error"], "drain_active");
    let abort = json!({"reason": "contract test"});
    conforms(
        "post",
        "/v1/drains/{id}/{action}",
        send(&client, Post, &format!("/v1/drains/{id}/abort"), op, Some(abort)),
    );
    let drains = conforms("get", "/v1/drains", send(&client, Get, "/v1/drains", None, None));
    assert_eq!(drains["drains"][0]["state"], "aborted");
    let restore = json!({"reason": "contract test", "target_percent": 60, "interval": "1h"});
    conforms(
        "post",
        "/v1/zones/{zone}/restore",
        send(&client, Post, "/v1/zones/az-b/restore", op, Some(restore)),
    );

    let ack = json!({"version": 1, "zone": "az-a", "kind": "gateway"});
    conforms(
        "post",
        "/v1/subscribers/{id}/ack",
        send(&client, Post, "/v1/subscribers/gw-1/ack", op, Some(ack)),
    );
    let subscribers =
        conforms("get", "/v1/subscribers", send(&client, Get, "/v1/subscribers", None, None));
    assert_eq!(subscribers["subscribers"][0]["state"], "behind");
    conforms(
        "get",
        "/v1/routing/convergence",
        send(&client, Get, "/v1/routing/convergence?version=1", None, None),
    );

    let member = json!({"name": "b1", "zone": "az-b", "topic": "orders", "partitions": 4});
    let joined = conforms(
        "post",
        "/v1/lanes/{group}/members",
        send(&client, Post, "/v1/lanes/g1/members", op, Some(member)),
    );
    let member_id = joined["member_id"].as_str().unwrap_or_else(|| panic!("{joined}")).to_owned();
    assert!(member_id.starts_with("b1-"), "{joined}");
    let secret = Header::new(
        "X-Tidegate-Member-Secret",
        joined["member_secret"]
            .as_str()
            .unwrap_or_else(|| panic!("a member secret: {joined}"))
            .to_owned(),
    );
    let holding = json!({"holding": [0, 1]});
    let beat = conforms(
        "post",
        "/v1/lanes/{group}/members/{member}/heartbeat",
        client
            .post(format!("/v1/lanes/g1/members/{member_id}/heartbeat"))
            .header(bearer(OPERATOR_TOKEN))
            .header(secret.clone())
            .header(ContentType::JSON)
            .body(holding.to_string())
            .dispatch(),
    );
    assert_eq!(beat["member_id"], member_id.as_str(), "{beat}");
    conforms("get", "/v1/lanes/{group}", send(&client, Get, "/v1/lanes/g1", None, None));
    conforms("get", "/v1/lanes", send(&client, Get, "/v1/lanes", None, None));
    let left = conforms(
        "delete",
        "/v1/lanes/{group}/members/{member}",
        client
            .delete(format!("/v1/lanes/g1/members/{member_id}"))
            .header(bearer(OPERATOR_TOKEN))
            .header(secret)
            .dispatch(),
    );
    assert!(left.get("error").is_none(), "{left}");

    let history =
        conforms("get", "/v1/zones/history", send(&client, Get, "/v1/zones/history", None, None));
    assert_eq!(history["zones"].as_array().map(Vec::len), Some(2), "{history}");

    let v =
        conforms("get", "/v1/routing", send(&client, Get, "/v1/routing", None, None))["version"]
            .as_u64()
            .unwrap();
    let plan = json!({
        "expected_version": v,
        "reason": "contract test",
        "rto": "1m",
        "steps": [
            {"type": "evacuate", "zone": "az-b", "to_percent": 0},
            {"type": "wait_consumed", "zone": "az-b"}
        ]
    });
    let stored = conforms(
        "put",
        "/v1/plans/{name}",
        send(&client, Put, "/v1/plans/az-b-failing", op, Some(plan)),
    );
    assert_eq!(stored["changed"], true, "{stored}");
    let read = conforms(
        "get",
        "/v1/plans/{name}",
        send(&client, Get, "/v1/plans/az-b-failing", None, None),
    );
    assert_eq!(read["revision"], stored["revision"]);
    let listed = conforms("get", "/v1/plans", send(&client, Get, "/v1/plans", None, None));
    assert_eq!(listed["plans"][0]["name"], "az-b-failing");
    let dry = conforms(
        "post",
        "/v1/plans/{name}/dry-run",
        send(&client, Post, "/v1/plans/az-b-failing/dry-run", None, None),
    );
    assert_eq!(dry["plan"], "az-b-failing");
    assert_eq!(dry["steps"].as_array().map(Vec::len), Some(2), "{dry}");
    let run = json!({"reason": "contract test", "plan_revision": read["revision"]});
    // The restore drain started above is still active: a run is refused until it ends.
    let refused = conforms(
        "post",
        "/v1/plans/{name}/run",
        send(&client, Post, "/v1/plans/az-b-failing/run", op, Some(run.clone())),
    );
    assert_eq!(refused["error"], "drain_active", "{refused}");
    let current = send(&client, Get, "/v1/drains/current", None, None).into_json::<Value>();
    let drain = current.unwrap()["id"].as_u64().unwrap();
    let abort = json!({"reason": "contract test"});
    send(&client, Post, &format!("/v1/drains/{drain}/abort"), op, Some(abort));
    let run = conforms(
        "post",
        "/v1/plans/{name}/run",
        send(&client, Post, "/v1/plans/az-b-failing/run", op, Some(run)),
    );
    let started = (run["drill"].as_bool(), run["state"].as_str());
    assert_eq!(started, (Some(false), Some("running")), "{run}");
    let id = run["id"].as_u64().unwrap();
    let report = conforms(
        "get",
        "/v1/plans/{name}/runs/{id}",
        send(&client, Get, &format!("/v1/plans/az-b-failing/runs/{id}"), None, None),
    );
    assert_eq!(report["rto_ms"], 60_000, "{report}");
    let busy = json!({"reason": "contract test", "hold": "1s"});
    let busy = conforms(
        "post",
        "/v1/plans/{name}/drill",
        send(&client, Post, "/v1/plans/az-b-failing/drill", op, Some(busy)),
    );
    assert_eq!(busy["error"], "plan_run_active", "{busy}");
    let abort = json!({"reason": "contract test"});
    let aborted = conforms(
        "post",
        "/v1/plans/{name}/runs/{id}/{action}",
        send(&client, Post, &format!("/v1/plans/az-b-failing/runs/{id}/abort"), op, Some(abort)),
    );
    assert_eq!(aborted["state"], "aborted", "{aborted}");
    let runs = conforms(
        "get",
        "/v1/plans/{name}/runs",
        send(&client, Get, "/v1/plans/az-b-failing/runs", None, None),
    );
    assert_eq!(runs["runs"][0]["outcome"], "aborted", "{runs}");
    let e = conforms("get", "/v1/plans/{name}", send(&client, Get, "/v1/plans/nope", None, None));
    assert_eq!(e["error"], "plan_not_found");
    let cluster = conforms("get", "/v1/cluster", send(&client, Get, "/v1/cluster", None, None));
    assert_eq!(cluster["log"]["kind"], "file", "{cluster}");

    let context = json!({"context": {"targetingKey": "alice"}});
    let flag = conforms(
        "post",
        "/ofrep/v1/evaluate/flags/{key}",
        send(
            &client,
            Post,
            &format!("/ofrep/v1/evaluate/flags/{FLAG}"),
            None,
            Some(context.clone()),
        ),
    );
    assert_eq!(flag["key"], FLAG);
    let flags = conforms(
        "post",
        "/ofrep/v1/evaluate/flags",
        send(&client, Post, "/ofrep/v1/evaluate/flags", None, Some(context)),
    );
    assert_eq!(flags["flags"][0]["key"], FLAG);
    let missing = conforms(
        "post",
        "/ofrep/v1/evaluate/flags/{key}",
        send(
            &client,
            Post,
            "/ofrep/v1/evaluate/flags/no-such-flag",
            None,
            Some(json!({"context": {"targetingKey": "alice"}})),
        ),
    );
    assert_eq!(missing["errorCode"], "FLAG_NOT_FOUND", "{missing}");

    conforms("get", "/healthz", send(&client, Get, "/healthz", None, None));
    conforms("get", "/readyz", send(&client, Get, "/readyz", None, None));
    conforms("get", "/metrics", send(&client, Get, "/metrics", None, None));
}

#[test]
fn error_answers_match_the_document() {
    use rocket::http::Method::{Get, Post, Put};
    let (client, _dir) = client();
    let dial = json!({"blue_percent": 40, "expected_version": 1, "reason": "contract test"});
    let e = conforms("put", "/v1/dial", send(&client, Put, "/v1/dial", None, Some(dial.clone())));
    assert_eq!(e["error"], "unauthorized");
    let e =
        conforms("put", "/v1/dial", send(&client, Put, "/v1/dial", Some(VIEWER_TOKEN), Some(dial)));
    assert_eq!(e["error"], "forbidden");
    let stale = json!({"blue_percent": 40, "expected_version": 7, "reason": "contract test"});
    let e = conforms(
        "put",
        "/v1/dial",
        send(&client, Put, "/v1/dial", Some(OPERATOR_TOKEN), Some(stale)),
    );
    assert_eq!(
        (e["error"].as_str(), e["current_version"].as_u64()),
        (Some("version_conflict"), Some(1))
    );
    let e = conforms("get", "/v1/drains/{id}", send(&client, Get, "/v1/drains/99", None, None));
    assert_eq!(e["error"], "drain_not_found");
    let e = conforms("get", "/v1/drains/{id}", send(&client, Get, "/v1/drains/x", None, None));
    assert_eq!(e["error"], "invalid_drain_id");
    let e =
        conforms("get", "/v1/drains/current", send(&client, Get, "/v1/drains/current", None, None));
    assert_eq!(e["error"], "no_active_drain");
    let e = conforms(
        "post",
        "/v1/tag",
        send(&client, Post, "/v1/tag", None, Some(json!({"users": []}))),
    );
    assert_eq!(e["error"], "invalid_json");
    let text = client
        .post("/v1/outcomes")
        .header(bearer(OPERATOR_TOKEN))
        .header(ContentType::Plain)
        .body("[]")
        .dispatch();
    let e = conforms("post", "/v1/outcomes", text);
    assert_eq!(e["error"], "unsupported_media_type");
    let e = conforms(
        "post",
        "/v1/outcomes",
        send(&client, Post, "/v1/outcomes", Some(VIEWER_TOKEN), Some(json!([]))),
    );
    assert_eq!(e["error"], "forbidden");
    let e = conforms("get", "/v1/tag", send(&client, Get, "/v1/tag?user_id=", None, None));
    assert_eq!(e["error"], "invalid_user_id");
    let e = conforms("get", "/v1/audit", send(&client, Get, "/v1/audit?limit=0", None, None));
    assert_eq!(e["error"], "invalid_limit");
    let e = conforms("get", "/v1/audit", send(&client, Get, "/v1/audit?before=0", None, None));
    assert_eq!(e["error"], "invalid_before");
    let e = conforms("get", "/v1/lanes/{group}", send(&client, Get, "/v1/lanes/nope", None, None));
    assert_eq!(e["error"], "group_not_found");
    let e = conforms(
        "post",
        "/v1/subscribers/{id}/ack",
        send(
            &client,
            Post,
            "/v1/subscribers/gw/ack",
            Some("not-a-token"),
            Some(json!({"version": 1})),
        ),
    );
    assert_eq!(e["error"], "unauthorized");
}
