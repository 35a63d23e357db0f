//! `tidegate edge` on the fast path (issue 27): one coordinator, two edges on the same
//! configuration, one on Rocket alone (`[edge] fast_path = false`) and one with the default
//! dispatcher (`http_fast::edge`), and the same requests sent to both with the answers compared
//! (status, body, headers): tags, batches, and the gateway check with every place it reads a user
//! from, every method, writes, domains, release channels, tokens and signatures; plus the rest
//! of the edge's API through the dispatcher, mixed on one kept-alive connection.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::gateway::Edge;
use common::*;
use serde_json::json;
use tidegate::config::token_sha256_hex;

/// The coordinator and the two edges: `rocket` (fast path off) and `fast` (the default).
struct Edges {
    _coordinator: Server,
    rocket: Edge,
    fast: Edge,
    _dir: tempfile::TempDir,
}

const TAG_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// Starts a coordinator on `extra` (with an operator token for the edges' acks, the `search`
/// domain and a release channel of units 0-49 of `orders` to az-b), then both edges.
fn start(extra: &str) -> Edges {
    let dir = tempfile::tempdir().unwrap();
    let common = format!(
        "{extra}\n[channels]\nservices = [\"orders\", \"billing\"]\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"\ntag_key = \"{TAG_KEY}\"\n"
    );
    let fast_config = dir.path().join("fast.toml");
    std::fs::write(&fast_config, config_toml(&common)).unwrap();
    let rocket_config = dir.path().join("rocket.toml");
    std::fs::write(&rocket_config, config_toml(&format!("{common}fast_path = false\n"))).unwrap();
    let coordinator = Server::start(&fast_config, &dir.path().join("data"));
    let url = &coordinator.url;
    let version = |url: &str| {
        let (_, routing) = get_json_with(&format!("{url}/v1/routing"), Some(OPERATOR_TOKEN));
        routing["version"].as_u64().unwrap()
    };
    let (status, body) = post_json(
        &format!("{url}/v1/domains"),
        OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": version(url), "reason": "edge test"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_json(
        &format!("{url}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "az-b", "units": "0-49",
               "expected_version": version(url), "reason": "edge test"}),
    );
    assert_eq!(status, 200, "{body}");
    let want = version(url);
    let rocket = Edge::start(&rocket_config, url, &dir.path().join("rocket-cache.json"), 0);
    let fast = Edge::start(&fast_config, url, &dir.path().join("fast-cache.json"), 0);
    for edge in [&rocket, &fast] {
        let ready = wait_until(Duration::from_secs(15), || {
            let (status, body) = get_json(&format!("{}/readyz", edge.url));
            status == 200 && body["version"].as_u64() == Some(want)
        });
        assert!(ready, "edge never reached version {want}; stderr:\n{}", edge.stderr());
    }
    Edges { _coordinator: coordinator, rocket, fast, _dir: dir }
}

fn get_json_with(url: &str, token: Option<&str>) -> (u16, serde_json::Value) {
    let mut request = agent().get(url);
    if let Some(token) = token {
        request = request.header("authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().expect("request sent");
    (response.status().as_u16(), response.body_mut().read_json().expect("JSON body"))
}

/// One request of the table.
struct Case {
    name: &'static str,
    method: &'static str,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
}

fn request(name: &'static str, method: &'static str, path: &str) -> Case {
    Case { name, method, path: path.to_owned(), headers: vec![], body: None }
}

fn get(name: &'static str, path: &str) -> Case {
    request(name, "GET", path)
}

fn batch(name: &'static str, body: impl Into<Vec<u8>>) -> Case {
    let mut case = request(name, "POST", "/v1/tag");
    case.headers.push(("content-type", "application/json".into()));
    case.body = Some(body.into());
    case
}

impl Case {
    /// Sets header `name` (replacing an earlier value).
    fn header(mut self, name: &'static str, value: &str) -> Case {
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value.to_owned()));
        self
    }

    /// Adds one more header `name`, after the ones already there.
    fn also(mut self, name: &'static str, value: &str) -> Case {
        self.headers.push((name, value.to_owned()));
        self
    }

    fn token(self, token: &str) -> Case {
        self.header("authorization", &format!("Bearer {token}"))
    }

    fn body(mut self, body: &str) -> Case {
        self.body = Some(body.as_bytes().to_vec());
        self
    }
}

/// The headers that are part of an answer (not `date`, which moves with the clock).
const COMPARED: [&str; 16] = [
    "content-type",
    "content-length",
    "server",
    "permissions-policy",
    "x-content-type-options",
    "x-frame-options",
    "retry-after",
    "x-tidegate-color",
    "x-tidegate-zone",
    "x-tidegate-version",
    "x-tidegate-source",
    "x-tidegate-channel",
    "x-tidegate-signature",
    "x-tidegate-global-writer",
    "x-tidegate-global-read-only",
    "x-tidegate-refusal",
];

#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    headers: Vec<(&'static str, Option<String>)>,
    body: String,
}

fn send(agent: &ureq::Agent, base: &str, case: &Case) -> Seen {
    let url = format!("{base}{}", case.path);
    let builder = ureq::http::Request::builder().method(case.method).uri(&url);
    let builder =
        case.headers.iter().fold(builder, |b, (name, value)| b.header(*name, value.as_str()));
    let request = builder.body(case.body.clone().unwrap_or_default()).unwrap();
    let mut response = agent.run(request).unwrap_or_else(|e| panic!("{}: {url}: {e}", case.name));
    let headers = COMPARED
        .iter()
        .map(|name| {
            let value = response.headers().get(*name).map(|v| v.to_str().unwrap().to_owned());
            (*name, value)
        })
        .collect();
    let status = response.status().as_u16();
    let body = response.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
    Seen { status, headers, body }
}

/// Sends every case to both edges (one kept-alive connection each, so tag and gate requests mix
/// with the rest of the API on it) and asserts the answers are the same; returns the statuses.
fn same_answers(edges: &Edges, cases: &[Case]) -> Vec<u16> {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    cases
        .iter()
        .map(|case| {
            let rocket = send(&agent, &edges.rocket.url, case);
            let fast = send(&agent, &edges.fast.url, case);
            assert_eq!(fast, rocket, "case `{}`: the fast path answered differently", case.name);
            eprintln!("{:>3} {}", rocket.status, case.name);
            rocket.status
        })
        .collect()
}

fn ids(n: usize) -> String {
    let ids: Vec<String> = (0..n).map(|i| format!("\"user-{i}\"")).collect();
    format!("{{\"user_ids\":[{}]}}", ids.join(","))
}

#[test]
fn tags_and_gate_checks_answer_byte_for_byte_as_the_rocket_edge() {
    // `reject` makes a missing user ID an error, so no answer is random.
    let edges = start(
        "fallback = \"reject\"\ninitial_blue_percent = 40\n[limits]\nmax_batch = 3\nmax_body_bytes = 1024",
    );
    let too_big = format!("{{\"user_ids\":[\"{}\"]}}", "x".repeat(2000));
    let gate = "/v1/gate";
    let cases = vec![
        get("tag", "/v1/tag?user_id=user-42"),
        get("tag in a domain", "/v1/tag?user_id=user-42&domain=search"),
        get("tag in an unknown domain", "/v1/tag?user_id=user-42&domain=serach"),
        get("tag for a channel's service", "/v1/tag?user_id=user-42&service=orders"),
        get("tag for an invalid service", "/v1/tag?user_id=u&service=Orders!"),
        get("tag with other parameters", "/v1/tag?x=1&user_id=caf%C3%A9+au+lait&y"),
        get("tag without a user", "/v1/tag"),
        get("tag of an empty user", "/v1/tag?user_id="),
        get("tag of a control character", "/v1/tag?user_id=a%01b"),
        get("tag of a user given twice", "/v1/tag?user_id=a&user_id=b"),
        get("tag not UTF-8", "/v1/tag?user_id=%ff%fe"),
        get("tag with an unknown token", "/v1/tag?user_id=u").token("tg_nobody"),
        get("tag not a bearer", "/v1/tag?user_id=u").header("authorization", "Basic dTpw"),
        request("tag HEAD", "HEAD", "/v1/tag?user_id=user-42"),
        batch("batch", ids(3)),
        batch("batch in a domain", r#"{"user_ids":["a","b"],"domain":"search"}"#),
        batch("batch over the limit", ids(4)),
        batch("batch with a bad ID", "{\"user_ids\":[\"a\",\"\"]}"),
        batch("batch not JSON", "{\"user_ids\":["),
        batch("batch unknown field", "{\"user_ids\":[],\"x\":1}"),
        batch("batch not UTF-8", b"{\"user_ids\":[\"\xff\"]}".to_vec()),
        batch("batch over the body limit", too_big),
        batch("batch as a form", "user_ids=a")
            .header("content-type", "application/x-www-form-urlencoded"),
        batch("batch with an unknown token", ids(1)).token("tg_nobody"),
        get("gate by header", gate).header("x-user-id", "alice"),
        get("gate by cookie", gate).header("cookie", "tidegate-user=alice"),
        get("gate by a cookie among others", gate)
            .header("cookie", "a=1; tidegate-user=caf%C3%A9; b=2"),
        get("gate by the last of two cookies", gate)
            .header("cookie", "tidegate-user=first")
            .also("cookie", "tidegate-user=last"),
        get("gate header before cookie", gate)
            .header("x-user-id", "alice")
            .header("cookie", "tidegate-user=bob"),
        get("gate empty header, then cookie", gate)
            .header("x-user-id", "")
            .header("cookie", "tidegate-user=bob"),
        get("gate by query", &format!("{gate}?user_id=alice")),
        get("gate by the original URI", gate).header("x-original-uri", "/shop?a=b&user_id=alice"),
        get("gate query given twice", &format!("{gate}?user_id=a&user_id=b")),
        get("gate original URI not UTF-8", gate).header("x-original-uri", "/shop?user_id=%FF%FE"),
        get("gate without a user", gate),
        get("gate user too long", gate).header("x-user-id", &"x".repeat(300)),
        get("gate with a trailing path", "/v1/gate/shop/cart?user_id=alice"),
        get("gate with a slash only", "/v1/gate/").header("x-user-id", "alice"),
        request("gate POST, Envoy style", "POST", "/v1/gate/shop/cart?user_id=alice")
            .body("ignored"),
        request("gate PUT", "PUT", "/v1/gate/x").header("x-user-id", "alice"),
        request("gate DELETE", "DELETE", "/v1/gate/x").header("x-user-id", "alice"),
        request("gate PATCH", "PATCH", "/v1/gate/x").header("x-user-id", "alice"),
        request("gate PATCH without a user", "PATCH", "/v1/gate/x"),
        get("gate original write without a user", gate).header("x-original-method", "POST"),
        get("gate original read", gate)
            .header("x-original-method", " get ")
            .header("x-user-id", "alice"),
        get("gate in a domain", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-domain", "search"),
        get("gate in an unknown domain", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-domain", "serach"),
        get("gate for a channel's service", gate)
            .header("x-user-id", "user-3")
            .header("x-tidegate-service", "orders"),
        get("gate for another service", gate)
            .header("x-user-id", "user-3")
            .header("x-tidegate-service", "billing"),
        get("gate for an invalid service", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-service", "Orders!"),
        get("gate ignores the application's Authorization", gate)
            .header("x-user-id", "alice")
            .header("authorization", "Bearer the-apps-own-token"),
        request("gate HEAD (Rocket's)", "HEAD", "/v1/gate").header("x-user-id", "alice"),
        get("routing (Rocket's)", "/v1/routing"),
        get("write check (Rocket's)", "/v1/write-check?user_id=alice&zone=az-a"),
        request("read-only PUT (Rocket's)", "PUT", "/v1/dial").body("{}"),
        get("no such path (Rocket's)", "/v1/nothing"),
        get("gateway is not the gate (Rocket's)", "/v1/gateway"),
        get("health (Rocket's)", "/healthz"),
    ];
    let statuses = same_answers(&edges, &cases);
    for want in [200, 400, 401, 403, 404, 413, 415] {
        assert!(statuses.contains(&want), "no case answered {want}: {statuses:?}");
    }
    // The table meant what it says: the channel decided for `orders` for a user of units 0-49.
    let agent = agent();
    let channel = agent
        .get(&format!("{}{gate}", edges.fast.url))
        .header("x-user-id", "user-3")
        .header("x-tidegate-service", "orders")
        .call()
        .unwrap();
    let source = channel.headers().get("x-tidegate-source").unwrap().to_str().unwrap();
    let (_, tag) = get_json(&format!("{}/v1/tag?user_id=user-3", edges.fast.url));
    if tag["unit"].as_u64().unwrap() < 50 {
        assert_eq!(source, "channel");
    } else {
        assert_eq!(source, "unit");
    }
}

#[test]
fn gateway_and_service_tokens_are_checked_alike() {
    let edges =
        start(&format!("service_tokens_sha256 = [\"{}\"]", token_sha256_hex(SERVICE_TOKEN)));
    let gate = "/v1/gate";
    let cases = vec![
        get("tag anonymous", "/v1/tag?user_id=u"),
        get("tag service token", "/v1/tag?user_id=u").token(SERVICE_TOKEN),
        get("tag viewer token", "/v1/tag?user_id=u").token(VIEWER_TOKEN),
        batch("batch anonymous", ids(2)),
        batch("batch service token", ids(2)).token(SERVICE_TOKEN),
        get("gate anonymous", gate).header("x-user-id", "alice"),
        get("gate token header", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-token", SERVICE_TOKEN),
        get("gate token header with spaces", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-token", &format!(" {SERVICE_TOKEN} ")),
        get("gate wrong token header", gate)
            .header("x-user-id", "alice")
            .header("x-tidegate-token", "tg_rotated"),
        get("gate token in Authorization", gate).header("x-user-id", "alice").token(SERVICE_TOKEN),
        get("gate the application's Authorization", gate)
            .header("x-user-id", "alice")
            .token("the-apps-own"),
        get("routing anonymous (Rocket's)", "/v1/routing"),
        get("routing with a token (Rocket's)", "/v1/routing").token(SERVICE_TOKEN),
    ];
    let statuses = same_answers(&edges, &cases);
    assert_eq!(statuses, [401, 200, 200, 401, 200, 500, 200, 200, 500, 200, 500, 401, 200]);
}

/// One raw keep-alive connection to the fast edge: a tag, the routing table (Rocket's, over the
/// dispatcher's pipe), a gate check and the readiness answer, in that order, each answered.
#[test]
fn one_connection_may_mix_the_fast_path_and_the_rest_of_the_api() {
    let edges = start("initial_blue_percent = 30");
    let port = edges.fast.port();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut seen = Vec::new();
    for (path, extra) in [
        ("/v1/tag?user_id=alice", ""),
        ("/v1/routing", ""),
        ("/v1/gate", "x-user-id: alice\r\n"),
        ("/readyz", ""),
    ] {
        write!(stream, "GET {path} HTTP/1.1\r\nhost: x\r\n{extra}\r\n").unwrap();
        let head = read_head(&mut stream);
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
            .map_or(0, |n| n.trim().parse().unwrap());
        let mut body = vec![0; length];
        stream.read_exact(&mut body).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        seen.push((path, head, String::from_utf8(body).unwrap()));
    }
    assert!(seen[0].2.contains("\"color\""), "{:?}", seen[0]);
    assert!(seen[1].2.contains("\"unit_map\""), "{:?}", seen[1]);
    assert!(seen[2].1.to_ascii_lowercase().contains("x-tidegate-source: unit"), "{:?}", seen[2]);
    assert!(seen[3].2.contains("\"ready\""), "{:?}", seen[3]);
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}
