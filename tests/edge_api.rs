//! `tidegate edge` as a real process against a real coordinator: the same answers as the
//! coordinator for 100 000 random users, the gate's headers, readiness from the coordinator or
//! the cache, failover across coordinators, read-only refusals, OFREP errors, and tokens.

mod common;

use std::time::Duration;

use common::gateway::{Edge, free_port};
use common::*;
use serde_json::{Value, json};

fn write_config(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let config = dir.join("tidegate.toml");
    std::fs::write(&config, config_toml(extra)).unwrap();
    config
}

fn random_user() -> String {
    const ALPHABET: &[char] = &['a', 'b', 'z', 'Q', '0', '7', '-', '_', '.', '@', 'é', '用', '😀'];
    let len = 1 + (rand::random::<u32>() % 30) as usize;
    (0..len).map(|_| ALPHABET[(rand::random::<u32>() as usize) % ALPHABET.len()]).collect()
}

fn batch(url: &str, users: &[String]) -> Value {
    let (status, body) =
        post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, json!({ "user_ids": users }));
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn the_edge_answers_exactly_as_the_coordinator_for_100_000_random_users() {
    let dir = tempfile::tempdir().unwrap();
    // The edge acknowledges as a subscriber, a write: it needs a writer's token (an operator's
    // here, so reads stay open to the anonymous comparisons below).
    let extra = format!("initial_blue_percent = 37\n[edge]\ntoken = \"{OPERATOR_TOKEN}\"");
    let config = write_config(dir.path(), &extra);
    let coordinator = Server::start(&config, &dir.path().join("data"));
    for (user, color, version) in [("pinned-a", "green", 1), ("pinned-b", "blue", 2)] {
        let (status, _) = put_json(
            &format!("{}/v1/pins/{user}", coordinator.url),
            OPERATOR_TOKEN,
            json!({"color": color, "expected_version": version, "reason": "edge test"}),
        );
        assert_eq!(status, 200);
    }
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(3);
    let mut users: Vec<String> = (0..100_000).map(|_| random_user()).collect();
    users[0] = "pinned-a".into();
    users[1] = "pinned-b".into();
    for chunk in users.chunks(10_000) {
        let theirs = batch(&coordinator.url, chunk);
        let ours = batch(&edge.url, chunk);
        assert_eq!(ours, theirs);
    }
    // Single tags, the routing table and OFREP agree too.
    for user in &users[..200] {
        let path = format!("/v1/tag?user_id={}", urlencode(user));
        let (_, theirs) = get_json(&format!("{}{path}", coordinator.url));
        let (_, ours) = get_json(&format!("{}{path}", edge.url));
        assert_eq!(ours, theirs);
        let body = json!({"context": {"targetingKey": user}});
        let flag = "/ofrep/v1/evaluate/flags/tidegate-color";
        let (_, theirs) =
            post_json(&format!("{}{flag}", coordinator.url), OPERATOR_TOKEN, body.clone());
        let (_, ours) = post_json(&format!("{}{flag}", edge.url), OPERATOR_TOKEN, body);
        assert_eq!(ours, theirs);
    }
    let (_, theirs) = get_json(&format!("{}/v1/routing", coordinator.url));
    let (_, ours) = get_json(&format!("{}/v1/routing", edge.url));
    assert_eq!(ours, theirs);
    // The edge acknowledged its version as a subscriber of kind `edge`.
    let acked = wait_until(Duration::from_secs(10), || {
        let (_, subs) = get_json(&format!("{}/v1/subscribers", coordinator.url));
        subs.to_string().contains("\"edge\"")
    });
    assert!(acked, "the edge is not listed as a subscriber of kind edge");
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[test]
fn the_gate_answers_with_headers_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "initial_blue_percent = 60");
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let agent = agent();
    let (_, tag) = get_json(&format!("{}/v1/tag?user_id=alice", coordinator.url));
    let check = |response: &mut ureq::http::Response<ureq::Body>, source: &str| {
        assert_eq!(response.status(), 200);
        let header =
            |name: &str| response.headers().get(name).unwrap().to_str().unwrap().to_owned();
        assert_eq!(header("x-tidegate-color"), tag["color"].as_str().unwrap());
        assert_eq!(header("x-tidegate-zone"), tag["zone"].as_str().unwrap());
        assert_eq!(header("x-tidegate-version"), "1");
        assert_eq!(header("x-tidegate-source"), source);
        assert_eq!(response.body_mut().read_to_string().unwrap(), "", "no body");
    };
    let gate = format!("{}/v1/gate", edge.url);
    check(&mut agent.get(&gate).header("x-user-id", "alice").call().unwrap(), "unit");
    check(&mut agent.get(&gate).header("cookie", "tidegate-user=alice").call().unwrap(), "unit");
    check(&mut agent.get(&format!("{gate}?user_id=alice")).call().unwrap(), "unit");
    check(
        &mut agent.get(&gate).header("x-original-uri", "/shop?a=b&user_id=alice").call().unwrap(),
        "unit",
    );
    // Envoy's ext_authz sends the original method and path after its `path_prefix`.
    check(
        &mut agent.post(&format!("{gate}/shop/cart?user_id=alice")).send("ignored").unwrap(),
        "unit",
    );
    check(
        &mut agent.delete(&format!("{gate}/x")).header("x-user-id", "alice").call().unwrap(),
        "unit",
    );
    // Without a user ID: the random fallback, said so.
    let response = agent.get(&gate).call().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("x-tidegate-source").unwrap(), "fallback");
    // A bad user ID is a client error, not a routing decision.
    let long = "x".repeat(300);
    let response = agent.get(&gate).header("x-user-id", &long).call().unwrap();
    assert_eq!(response.status(), 400);
    // User IDs in the query are decoded exactly as /v1/tag decodes them: an ID that is not UTF-8
    // once decoded, or a repeated user_id, is refused on both (it used to get a colour at the
    // gate: the mangled ID's, or the first one's).
    for query in ["user_id=%FF%FE", "user_id=alice&user_id=bob"] {
        let tag = agent.get(&format!("{}/v1/tag?{query}", coordinator.url)).call().unwrap();
        assert_eq!(tag.status(), 400, "{query}");
        for response in [
            agent.get(&format!("{gate}?{query}")).call().unwrap(),
            agent.get(&gate).header("x-original-uri", &format!("/shop?{query}")).call().unwrap(),
        ] {
            assert_eq!(response.status(), 400, "{query}");
            assert!(response.headers().get("x-tidegate-color").is_none(), "{query}");
            let body: Value =
                serde_json::from_str(&response.into_body().read_to_string().unwrap()).unwrap();
            assert_eq!(body["error"], "invalid_user_id", "{query}: {body}");
        }
    }
}

#[test]
fn readiness_says_where_the_table_came_from_and_the_cache_survives_the_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "initial_blue_percent = 25");
    let cache = dir.path().join("cache/edge.json");
    // No coordinator and no cache: not ready, and every answer says why.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let lonely = Edge::start(&config, &dead, &cache, 0);
    let (status, body) = get_json(&format!("{}/readyz", lonely.url));
    assert_eq!((status, body["error"].as_str()), (503, Some("no_table")), "{body}");
    let (status, body) = get_json(&format!("{}/v1/tag?user_id=a", lonely.url));
    assert_eq!((status, body["error"].as_str()), (503, Some("no_table")));
    let (status, body) = post_json(
        &format!("{}/ofrep/v1/evaluate/flags/tidegate-color", lonely.url),
        OPERATOR_TOKEN,
        json!({"context": {"targetingKey": "a"}}),
    );
    assert_eq!((status, body["errorCode"].as_str()), (500, Some("GENERAL")), "{body}");
    let response = agent().get(&format!("{}/v1/gate", lonely.url)).header("x-user-id", "a").call();
    assert_eq!(response.unwrap().status(), 503, "the gateway's fallback takes over");
    drop(lonely);

    // The first coordinator in the list is dead; the edge fails over to the second.
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &format!("{dead},{}", coordinator.url), &cache, 0);
    edge.wait_for_version(1);
    let (_, ready) = get_json(&format!("{}/readyz", edge.url));
    assert_eq!(ready["source"], "coordinator");
    assert_eq!(ready["coordinator_connected"], true);
    assert_eq!(ready["coordinator"], coordinator.url.as_str());
    let (_, before) = batch_of(&edge.url);
    drop(edge);
    coordinator.kill9();

    // Every coordinator gone: a new edge starts from the cache and says so.
    let edge = Edge::start(&config, &dead, &cache, 0);
    let (status, ready) = get_json(&format!("{}/readyz", edge.url));
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["source"], "cache");
    assert_eq!(ready["coordinator_connected"], false);
    assert!(ready["table_age_seconds"].as_f64().is_some());
    let (_, after) = batch_of(&edge.url);
    assert_eq!(after, before);
    let gate = agent().get(&format!("{}/v1/gate", edge.url)).header("x-user-id", "a").call();
    assert_eq!(gate.unwrap().status(), 200, "the edge answers gateway checks from its cache");
    let metrics = agent()
        .get(&format!("{}/metrics", edge.url))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(metrics.contains("tidegate_edge_coordinator_connected 0"), "{metrics}");
    assert!(metrics.contains("tidegate_routing_version 1"));
    // Every series the edge dashboard selects on job="tidegate-edge" is one the edge exports.
    let board = std::fs::read_to_string("dashboards/edge.json").expect("the edge dashboard");
    let selected: std::collections::BTreeSet<&str> = board
        .split("{job=\\\"tidegate-edge\\\"")
        .filter_map(|before| {
            before.rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next()
        })
        .filter(|name| name.starts_with("tidegate_"))
        .collect();
    assert!(selected.len() >= 4, "the edge dashboard's series: {selected:?}");
    for name in selected {
        assert!(
            metrics.contains(&format!("{name}{{")) || metrics.contains(&format!("{name} ")),
            "the edge dashboard selects {name}, which the edge does not export:\n{metrics}"
        );
    }
}

fn batch_of(url: &str) -> (u16, Value) {
    let users: Vec<String> = (0..1000).map(|i| format!("user-{i}")).collect();
    (200, batch(url, &users))
}

#[test]
fn the_edge_is_read_only_and_follows_service_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = format!(
        "service_tokens_sha256 = [\"{}\"]\n[edge]\ntoken = \"{SERVICE_TOKEN}\"",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    );
    let config = write_config(dir.path(), &tokens);
    let coordinator = Server::start(&config, &dir.path().join("data"));
    // The edge reads the watch stream with its `[edge] token`.
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let agent = agent();
    for path in ["/v1/tag?user_id=a", "/v1/routing", "/v1/gate?user_id=a"] {
        let response = agent.get(&format!("{}{path}", edge.url)).call().unwrap();
        // The gate answers a refused caller with 500 (the gateway serves its fallback): a 401
        // there is what nginx reads as "refuse this user".
        let refused = if path.starts_with("/v1/gate") { 500 } else { 401 };
        assert_eq!(response.status(), refused, "anonymous {path}");
        for token in [SERVICE_TOKEN, VIEWER_TOKEN] {
            let response = agent
                .get(&format!("{}{path}", edge.url))
                .header("Authorization", &format!("Bearer {token}"))
                .call()
                .unwrap();
            assert_eq!(response.status(), 200, "{path} with {token}");
        }
    }
    // The gateway's own header carries its token; a wrong one is refused with 500, never 401.
    let gate = format!("{}/v1/gate?user_id=a", edge.url);
    let response = agent.get(&gate).header("x-tidegate-token", SERVICE_TOKEN).call().unwrap();
    assert_eq!(response.status(), 200);
    let response = agent.get(&gate).header("x-tidegate-token", "tg_wrong").call().unwrap();
    assert_eq!(response.status(), 500);
    // An application's own Authorization header is not a tidegate token: it is ignored (here the
    // caller is then anonymous, which these tokens refuse).
    let response = agent.get(&gate).header("Authorization", "Basic dXNlcjpwdw==").call().unwrap();
    assert_eq!(response.status(), 500);
    let response = agent
        .get(&gate)
        .header("Authorization", "Basic dXNlcjpwdw==")
        .header("x-tidegate-token", SERVICE_TOKEN)
        .call()
        .unwrap();
    assert_eq!(response.status(), 200, "the gateway's token wins over the application's header");
    let (status, body) = post_json(
        &format!("{}/ofrep/v1/evaluate/flags", edge.url),
        "tg_not_a_token",
        json!({"context": {"targetingKey": "a"}}),
    );
    assert_eq!((status, body["error"].as_str()), (401, Some("unauthorized")));
    // Changes go to the coordinator; the edge refuses them, whoever asks.
    for token in [OPERATOR_TOKEN, VIEWER_TOKEN] {
        let (status, body) = put_json(
            &format!("{}/v1/dial", edge.url),
            token,
            json!({"blue_percent": 10, "expected_version": 1, "reason": "no"}),
        );
        assert_eq!((status, body["error"].as_str()), (405, Some("read_only")), "{body}");
    }
    let (status, body) = post_json(
        &format!("{}/v1/drains", edge.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "to": 0, "reason": "no"}),
    );
    assert_eq!((status, body["error"].as_str()), (405, Some("read_only")), "{body}");
    let response = agent.get(&format!("{}/healthz", edge.url)).call().unwrap();
    assert_eq!(response.status(), 200, "health stays open for probes");
}

#[test]
fn with_a_tag_key_the_gate_signs_each_tag_and_a_service_trusts_only_signed_tags() {
    use tidegate::client::{Source, TagKey, resolve_signed};
    let dir = tempfile::tempdir().unwrap();
    let key_hex = "3c".repeat(32);
    let config = write_config(dir.path(), &format!("[edge]\ntag_key = \"{key_hex}\""));
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge.json"), 0);
    edge.wait_for_version(1);
    let key = TagKey::new(&hex::decode(&key_hex).unwrap()).unwrap();
    let agent = agent();
    let gate = format!("{}/v1/gate", edge.url);
    let response = agent.get(&gate).header("x-user-id", "alice").call().unwrap();
    let header = |name: &str| response.headers().get(name).unwrap().to_str().unwrap().to_owned();
    let (color, version, signature) =
        (header("x-tidegate-color"), header("x-tidegate-version"), header("x-tidegate-signature"));
    let version: u64 = version.parse().unwrap();
    assert!(key.verify(&color, version, "alice", &signature), "the gate's signature checks");
    // Without a user ID nothing is signed (there is no user to bind the tag to).
    let anonymous = agent.get(&gate).call().unwrap();
    assert!(anonymous.headers().get("x-tidegate-signature").is_none());

    // A service with the same key: the gate's headers are trusted, a forged colour is not.
    let table =
        tidegate::client::decode_table(&get_json(&format!("{}/v1/routing", coordinator.url)).1)
            .unwrap();
    let router = tidegate::client::Router::fixed(table);
    let version_text = version.to_string();
    let signed = [
        ("x-tidegate-color", color.as_str()),
        ("x-tidegate-version", version_text.as_str()),
        ("x-tidegate-signature", signature.as_str()),
    ];
    fn find<'h>(headers: &'h [(&str, &'h str)], name: &str) -> Option<&'h str> {
        headers.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
    let got = resolve_signed(&router, |n| find(&signed, n), "alice", &key).unwrap();
    assert_eq!((got.lane.as_str(), got.source), (color.as_str(), Source::Propagated));
    let other = if color == "blue" { "green" } else { "blue" };
    for forged in [
        vec![("x-tidegate-color", other), ("x-tidegate-version", version_text.as_str())],
        vec![
            ("x-tidegate-color", other),
            ("x-tidegate-version", version_text.as_str()),
            ("x-tidegate-signature", signature.as_str()),
        ],
    ] {
        let got = resolve_signed(&router, |n| find(&forged, n), "alice", &key).unwrap();
        assert_eq!(
            (got.lane.as_str(), got.source),
            (color.as_str(), Source::Recomputed),
            "a forged tag is not trusted"
        );
    }
    // The same signature for another user does not carry over either.
    let moved = resolve_signed(&router, |n| find(&signed, n), "bob", &key).unwrap();
    assert_eq!(moved.source, Source::Recomputed);

    // A tag the gate decided for a service is signed for that service. A channel routes every
    // `orders` call of alice to the other lane; her `orders` tag is trusted by `orders`' check
    // only: replayed to `billing` (which the channel does not route) or to the global rule it
    // is recomputed, and lands on the map's lane.
    let (status, body) = put_json(
        &format!("{}/v1/channels/orders-v2", coordinator.url),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": other, "percent": 100,
               "expected_version": version, "reason": "signed tags per service"}),
    );
    assert_eq!(status, 200, "{body}");
    edge.wait_for_version(version + 1);
    let response = agent
        .get(&gate)
        .header("x-user-id", "alice")
        .header("x-tidegate-service", "orders")
        .call()
        .unwrap();
    let header = |name: &str| response.headers().get(name).unwrap().to_str().unwrap().to_owned();
    let (lane, signature) = (header("x-tidegate-color"), header("x-tidegate-signature"));
    let version_text = header("x-tidegate-version");
    assert_eq!(lane, other, "the channel routes alice's orders calls");
    let at: u64 = version_text.parse().unwrap();
    assert!(key.verify_for(&lane, at, "alice", None, Some("orders"), &signature));
    assert!(!key.verify(&lane, at, "alice", &signature), "not a global-rule signature");
    let table =
        tidegate::client::decode_table(&get_json(&format!("{}/v1/routing", coordinator.url)).1)
            .unwrap();
    let router = tidegate::client::Router::fixed(table);
    let orders = [
        ("x-tidegate-color", lane.as_str()),
        ("x-tidegate-version", version_text.as_str()),
        ("x-tidegate-signature", signature.as_str()),
    ];
    use tidegate::client::resolve_signed_for;
    let got =
        resolve_signed_for(&router, |n| find(&orders, n), "alice", &key, None, Some("orders"))
            .unwrap();
    assert_eq!((got.lane.as_str(), got.source), (other, Source::Propagated));
    let replayed =
        resolve_signed_for(&router, |n| find(&orders, n), "alice", &key, None, Some("billing"))
            .unwrap();
    assert_eq!((replayed.lane.as_str(), replayed.source), (color.as_str(), Source::Recomputed));
    let global = resolve_signed(&router, |n| find(&orders, n), "alice", &key).unwrap();
    assert_eq!((global.lane.as_str(), global.source), (color.as_str(), Source::Recomputed));
}
