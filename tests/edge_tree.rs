//! The fan-out tree on real binaries: `tidegate edge` re-serves the watch stream to the Routers
//! near it (its leaves), takes their acknowledgements and reports them upward, so the
//! coordinator holds one stream per edge while its convergence gates still count every leaf.
//!
//! - a leaf that stops acknowledging behind an edge holds a drain like a direct subscriber, and
//!   the hold names it with the edge it watches through; the healthy leaf and the edge are not
//!   named; the coordinator holds one stream (the edge's) for three subscribers;
//! - the edge killed with `kill -9`: its leaves fail over to the coordinator (their URL list
//!   names it second) and are counted there directly, the stuck one still named, now without
//!   an edge; the control is the same stuck leaf watching an edge that serves no watch stream
//!   (`max_leaves = 0`): it cannot hide behind it, it is refused and goes to the coordinator;
//! - an edge without a token (it could not report its leaves) refuses to register one (409
//!   `not_reporting`) and serves anonymous watchers; the re-served events are the
//!   coordinator's, byte for byte.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::gateway::Edge;
use common::*;
use serde_json::{Value, json};
use tidegate::client::{Identity, Router, RouterOptions, first_choice};

fn write_config(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let file = dir.join(format!("{name}.toml"));
    let tokens = format!(
        "service_tokens_sha256 = [\"{}\"]\n",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    );
    std::fs::write(&file, config_toml(&format!("{tokens}{extra}"))).unwrap();
    file
}

const DRAIN: &str = "[drain]\ntick = \"20ms\"\nconvergence_timeout = \"1s\"\n";

fn start_edge(dir: &Path, id: &str, coordinator: &str, edge_lines: &str) -> Edge {
    let extra = format!("[edge]\nsubscriber_id = \"{id}\"\nzone = \"az-a\"\n{edge_lines}\n");
    let config = write_config(dir, id, &extra);
    Edge::start(&config, coordinator, &dir.join(format!("{id}.json")), 0)
}

/// A subscriber ID (prefix `name`) whose first choice among two URLs is the first.
fn id_first_on_edge(name: &str) -> String {
    (0..).map(|n| format!("{name}-{n}")).find(|id| first_choice(id, 2) == 0).unwrap()
}

fn leaf(urls: &str, id: &str, zone: &str, acknowledge: bool) -> Router {
    let identity = Identity { subscriber_id: id.into(), zone: zone.into(), kind: "service".into() };
    let options = RouterOptions {
        token: Some(SERVICE_TOKEN.into()),
        acknowledge,
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        read_timeout: Duration::from_secs(2),
        ca_file: None,
        ..RouterOptions::default()
    };
    Router::connect(urls, identity, options).unwrap()
}

fn get(url: &str) -> Value {
    let mut response = agent()
        .get(url)
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .call()
        .unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.body_mut().read_json().unwrap()
}

fn subscriber<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list["subscribers"].as_array()?.iter().find(|s| s["subscriber_id"] == id)
}

/// Starts a drain of az-b (health reported good first) and waits until it pauses; returns the
/// drain and how long it took to pause.
fn drain_until_paused(url: &str) -> (Value, Duration) {
    let outcomes = json!([
        {"zone": "az-b", "color": "blue", "ok": 5000},
        {"zone": "az-a", "color": "green", "ok": 5000}
    ]);
    let (status, body) = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, outcomes);
    assert!((200..300).contains(&status), "{status} {body}");
    let started = Instant::now();
    let (status, body) = post_json(
        &format!("{url}/v1/drains"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "200ms",
               "reason": "edge tree test"}),
    );
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_u64().unwrap_or(1);
    let drain_url = format!("{url}/v1/drains/{id}");
    assert!(
        wait_until(Duration::from_secs(15), || get(&drain_url)["state"] == "paused"),
        "{}",
        get(&drain_url)
    );
    (get(&drain_url), started.elapsed())
}

#[test]
fn a_stuck_leaf_behind_an_edge_holds_the_drain_and_is_named_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "coordinator", DRAIN);
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge =
        start_edge(dir.path(), "edge-1", &coordinator.url, &format!("token = \"{SERVICE_TOKEN}\""));
    edge.wait_for_version(1);
    let healthy = leaf(&edge.url, "healthy-leaf", "az-a", true);
    let stuck = leaf(&edge.url, "stuck-leaf", "az-b", false);
    assert!(healthy.wait_for_version(1, Duration::from_secs(10)));
    assert!(stuck.wait_for_version(1, Duration::from_secs(10)));
    // The coordinator learns of both leaves through the edge's report, not from streams of
    // their own: it holds one stream, the edge's.
    let subscribers_url = format!("{}/v1/subscribers", coordinator.url);
    assert!(
        wait_until(Duration::from_secs(10), || {
            let list = get(&subscribers_url);
            subscriber(&list, "edge-1").is_some_and(|e| e["leaves"] == 2)
        }),
        "{}",
        get(&subscribers_url)
    );
    let list = get(&subscribers_url);
    let ids: Vec<&str> = list["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["subscriber_id"].as_str())
        .collect();
    assert_eq!(ids, ["edge-1"], "the leaves hold no stream of their own to the coordinator");
    let convergence = format!("{}/v1/routing/convergence", coordinator.url);
    assert_eq!(get(&convergence)["live"], 3, "{}", get(&convergence));

    let (drain, held) = drain_until_paused(&coordinator.url);
    let reason = drain["hold_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("stuck-leaf") && reason.contains("via edge edge-1"), "{drain}");
    assert!(!reason.contains("healthy-leaf") && !reason.contains("edge-1 ("), "{drain}");
    assert!(held >= Duration::from_secs(1), "paused after {held:?}, before the 1 s timeout");
    // The healthy leaf and the edge catch up with the pause (itself a change); the stuck leaf
    // stays behind, named with its edge.
    let mut last = Value::Null;
    let only_stuck = wait_until(Duration::from_secs(5), || {
        last = get(&convergence);
        let behind = last["behind"].as_array().cloned().unwrap_or_default();
        behind.len() == 1
            && behind[0]["subscriber_id"] == "stuck-leaf"
            && behind[0]["via"] == "edge-1"
    });
    assert!(only_stuck, "{last}");
    let current = last["current_version"].as_u64().unwrap();
    assert!(wait_until(Duration::from_secs(5), || healthy.acked_version() == current));
    assert_eq!(stuck.version(), Some(current), "the stuck leaf applies, it only never acks");
    assert_eq!(stuck.acked_version(), 0);
    // The edge's own registry answers the same (its subscribers are the leaves).
    let metrics = agent()
        .get(&format!("{}/metrics", edge.url))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(metrics.contains("tidegate_edge_leaves 2"), "{metrics}");
    println!("FIGURE edge_tree_stuck_leaf paused_after={held:?} live=3 streams_at_coordinator=1");
}

#[test]
fn leaves_fail_over_to_the_coordinator_when_their_edge_dies_and_cannot_hide_behind_one_that_serves_no_stream()
 {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "coordinator", DRAIN);
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge =
        start_edge(dir.path(), "edge-2", &coordinator.url, &format!("token = \"{SERVICE_TOKEN}\""));
    edge.wait_for_version(1);
    let id = id_first_on_edge("stuck");
    let stuck = leaf(&format!("{},{}", edge.url, coordinator.url), &id, "az-b", false);
    assert!(stuck.wait_for_version(1, Duration::from_secs(10)));
    let subscribers_url = format!("{}/v1/subscribers", coordinator.url);
    assert!(wait_until(Duration::from_secs(10), || {
        subscriber(&get(&subscribers_url), "edge-2").is_some_and(|e| e["leaves"] == 1)
    }));
    let killed = Instant::now();
    edge.kill9();
    // The leaf moves to the coordinator and registers there itself.
    let moved = wait_until(Duration::from_secs(15), || {
        subscriber(&get(&subscribers_url), &id).is_some_and(|s| s["streams"] == 1)
    });
    assert!(moved, "{}", get(&subscribers_url));
    let moved_after = killed.elapsed();
    let (drain, _) = drain_until_paused(&coordinator.url);
    let reason = drain["hold_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&id) && !reason.contains("via edge"), "{drain}");
    println!("FIGURE edge_tree_failover leaf_on_coordinator_after={moved_after:?}");

    // Control: an edge that serves no watch stream refuses the leaf (404), which goes on to the
    // coordinator, so it is counted there, never nowhere.
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "coordinator", DRAIN);
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let closed = start_edge(
        dir.path(),
        "edge-closed",
        &coordinator.url,
        &format!("token = \"{SERVICE_TOKEN}\"\nmax_leaves = 0"),
    );
    closed.wait_for_version(1);
    let response = agent().get(&format!("{}/v1/routing/watch", closed.url)).call().unwrap();
    assert_eq!(response.status(), 404);
    let id = id_first_on_edge("hidden");
    let _hidden = leaf(&format!("{},{}", closed.url, coordinator.url), &id, "az-b", false);
    let subscribers_url = format!("{}/v1/subscribers", coordinator.url);
    assert!(wait_until(Duration::from_secs(10), || {
        subscriber(&get(&subscribers_url), &id).is_some_and(|s| s["streams"] == 1)
    }));
}

#[test]
fn an_edge_without_a_token_registers_no_leaf_and_re_serves_the_coordinators_events() {
    // No service tokens: anyone may read, so an edge without a token follows the coordinator.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("coordinator.toml");
    std::fs::write(&config, config_toml("")).unwrap();
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge_config = dir.path().join("edge-anon.toml");
    std::fs::write(&edge_config, config_toml("[edge]\nsubscriber_id = \"edge-anon\"\n")).unwrap();
    let edge = Edge::start(&edge_config, &coordinator.url, &dir.path().join("edge-anon.json"), 0);
    edge.wait_for_version(1);
    let quick: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(2)))
        .build()
        .into();
    let mut response = quick
        .get(&format!("{}/v1/routing/watch?subscriber_id=leaf-1&zone=az-a&kind=service", edge.url))
        .call()
        .unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.body_mut().read_json().unwrap();
    assert_eq!(body["error"], "not_reporting", "{body}");
    let (status, _) = post_json(
        &format!("{}/v1/subscribers/leaf-1/ack", edge.url),
        SERVICE_TOKEN,
        json!({"version": 1, "zone": "az-a"}),
    );
    assert_eq!(status, 409);
    // Anonymous watchers get the coordinator's event, byte for byte.
    let first_event = |url: &str| -> String {
        let response = quick.get(&format!("{url}/v1/routing/watch")).call().unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let mut reader = response.into_body().into_reader();
        let mut text = Vec::new();
        let mut byte = [0u8; 1];
        while !text.ends_with(b"\n\n") {
            reader.read_exact(&mut byte).unwrap();
            text.push(byte[0]);
        }
        String::from_utf8(text).unwrap()
    };
    let direct = first_event(&coordinator.url);
    assert!(direct.starts_with("id:1\nevent:routing\ndata:{"), "{direct}");
    assert_eq!(first_event(&edge.url), direct);
}

/// The response head (without `date`) and the first event of a watch request on a raw socket,
/// sent after `before` (whole requests) on the same connection: with nothing before it the
/// edge serves the stream without hyper (`raw_watch`), after a tag request through hyper.
fn watch_on_socket(base: &str, before: &str, query: &str, token: Option<&str>) -> (String, String) {
    use std::io::Write;
    let mut socket = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(socket, "{before}GET /v1/routing/watch{query} HTTP/1.1\r\nHost: x\r\n{auth}\r\n")
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = socket.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        // The watch answer is the last head on the connection.
        let Some(start) = text.rfind("HTTP/1.1 ") else { continue };
        let Some((head, rest)) = text[start..].split_once("\r\n\r\n") else { continue };
        let mut lines: Vec<&str> = head.lines().filter(|l| !l.starts_with("date:")).collect();
        lines[1..].sort_unstable();
        let head = lines.join("\n").to_ascii_lowercase();
        if !head.starts_with("http/1.1 200") {
            if rest.ends_with('}') {
                return (head, rest.to_owned());
            }
            continue;
        }
        if let Some(at) = rest.find("id:")
            && let Some(len) = rest[at..].find("\n\n")
        {
            return (head, rest[at..at + len + 2].to_owned());
        }
    }
}

/// A leaf's first request on a connection is its watch stream, served by the edge without
/// hyper's two buffers per connection: it answers as the hyper path does (head, event,
/// refusals), and a leaf registered on it is reported upward like any other.
#[test]
fn the_edges_raw_watch_path_answers_as_its_hyper_path_and_registers_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let coordinator =
        Server::start(&write_config(dir.path(), "coordinator", ""), &dir.path().join("data"));
    let token = format!("token = \"{SERVICE_TOKEN}\"");
    let edge = start_edge(dir.path(), "edge-raw", &coordinator.url, &token);
    edge.wait_for_version(1);
    // Reads need a token here (the coordinator's service token hash is set).
    let tag_first = format!(
        "GET /v1/tag?user_id=u HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SERVICE_TOKEN}\r\n\r\n"
    );
    let reader = Some(SERVICE_TOKEN);
    let raw = watch_on_socket(&edge.url, "", "", reader);
    let hyper = watch_on_socket(&edge.url, &tag_first, "", reader);
    assert!(raw.0.starts_with("http/1.1 200"), "{raw:?}");
    assert!(raw.0.contains("server: tidegate-edge"), "{}", raw.0);
    assert!(raw.1.starts_with("id:1\nevent:routing\n"), "{}", raw.1);
    assert_eq!(raw, hyper);
    // Refusals alike: an anonymous watcher (401), with or without a subscriber ID.
    let register = "?subscriber_id=raw-leaf&zone=az-a&kind=test";
    let anonymous = watch_on_socket(&edge.url, "", register, None);
    assert!(anonymous.0.starts_with("http/1.1 401"), "{anonymous:?}");
    // The raw path closes a refused watch connection (it carries nothing else); hyper keeps it
    // open: this is how the test knows which path answered.
    assert!(anonymous.0.contains("connection: close"), "{}", anonymous.0);
    let (head, body) = watch_on_socket(&edge.url, &tag_first, register, None);
    assert!(!head.contains("connection: close"), "{head}");
    assert_eq!(
        (head.replace("connection: close\n", ""), body),
        (anonymous.0.replace("connection: close\n", ""), anonymous.1.clone())
    );
    // Registered on the raw path: the coordinator counts the leaf through the edge's report.
    let (head, event) = watch_on_socket(&edge.url, "", register, Some(SERVICE_TOKEN));
    assert!(head.starts_with("http/1.1 200") && event.contains("event:routing"), "{head}");
    let url = format!("{}/v1/subscribers", coordinator.url);
    assert!(
        wait_until(Duration::from_secs(5), || {
            subscriber(&get(&url), "edge-raw").is_some_and(|e| e["leaves"] == 1)
        }),
        "{}",
        get(&url)
    );
    // An edge that serves no watch stream refuses on both paths alike (404, named by the edge).
    let none =
        start_edge(dir.path(), "edge-none", &coordinator.url, &format!("{token}\nmax_leaves = 0"));
    none.wait_for_version(1);
    let refused = watch_on_socket(&none.url, "", "", reader);
    assert!(refused.0.starts_with("http/1.1 404"), "{refused:?}");
    assert!(refused.0.contains("server: tidegate-edge"), "{}", refused.0);
    assert_eq!(refused, watch_on_socket(&none.url, &tag_first, "", reader));
}
