//! Real nginx (Debian's package) with the shipped `config/nginx/tidegate.conf`, asking a real
//! `tidegate edge` through `auth_request`, in front of two upstreams standing for the blue and
//! the green cluster: every user lands where the rule says, dial moves and pins are followed,
//! requests without a user ID follow the fallback, and killing the coordinator or the edge keeps
//! requests served.

mod common;

use std::time::{Duration, Instant};

use common::gateway::{Edge, Nginx, Upstream};
use common::*;
use serde_json::{Value, json};

struct Stack {
    coordinator: Option<Server>,
    edge: Option<Edge>,
    blue: Upstream,
    green: Upstream,
    nginx: Nginx,
    _dir: tempfile::TempDir,
}

fn stack(extra: &str) -> Stack {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml(extra)).unwrap();
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge/cache.json"), 0);
    edge.wait_for_version(1);
    let blue = Upstream::start("blue");
    let green = Upstream::start("green");
    let nginx = Nginx::start(&dir.path().join("nginx"), edge.port(), blue.port, green.port);
    Stack { coordinator: Some(coordinator), edge: Some(edge), blue, green, nginx, _dir: dir }
}

impl Stack {
    fn coordinator_url(&self) -> String {
        self.coordinator.as_ref().unwrap().url.clone()
    }
}

/// One request through nginx: (status, upstream that served it, the x-seen-* headers).
fn through(agent: &ureq::Agent, nginx: &str, user: Option<&str>) -> (u16, String, Value) {
    let mut request = agent.get(&format!("{nginx}/orders"));
    if let Some(user) = user {
        request = request.header("x-user-id", user);
    }
    let mut response = request.call().expect("nginx answers");
    let status = response.status().as_u16();
    let mut seen = serde_json::Map::new();
    for name in ["x-seen-color", "x-seen-zone", "x-seen-version", "x-seen-fallback"] {
        if let Some(v) = response.headers().get(name) {
            seen.insert(name.into(), json!(v.to_str().unwrap()));
        }
    }
    let body = response.body_mut().read_to_string().unwrap_or_default();
    (status, body, Value::Object(seen))
}

fn random_user() -> String {
    format!("u{:016x}", rand::random::<u64>())
}

/// The coordinator's tags for `users`, through POST /v1/tag.
fn tags(url: &str, users: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for chunk in users.chunks(10_000) {
        let (status, body) =
            post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, json!({ "user_ids": chunk }));
        assert_eq!(status, 200, "{body}");
        out.extend(body["tags"].as_array().unwrap().iter().cloned());
    }
    out
}

fn dial(url: &str, percent: f64) -> u64 {
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let (status, table) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": percent, "expected_version": routing["version"], "reason": "nginx test"}),
    );
    assert_eq!(status, 200, "{table}");
    table["version"].as_u64().unwrap()
}

#[test]
fn ten_thousand_random_users_land_on_the_upstream_the_rule_says() {
    let s = stack("initial_blue_percent = 37");
    let url = s.coordinator_url();
    let users: Vec<String> = (0..10_000).map(|_| random_user()).collect();
    let expected = tags(&url, &users);
    let agent = agent();
    let nginx = s.nginx.url();
    for (user, tag) in users.iter().zip(&expected) {
        let (status, served, seen) = through(&agent, &nginx, Some(user));
        assert_eq!(status, 200);
        assert_eq!(served, tag["color"].as_str().unwrap(), "{user}: {seen}");
        // The backend received the tag to forward to the next hop.
        assert_eq!(seen["x-seen-color"], tag["color"]);
        assert_eq!(seen["x-seen-zone"], tag["zone"]);
        assert_eq!(seen["x-seen-version"], "1");
    }
    let blue = expected.iter().filter(|t| t["color"] == "blue").count() as u64;
    assert_eq!(s.blue.served(), blue);
    assert_eq!(s.green.served(), 10_000 - blue);
    // The user ID may also come as a cookie or a query parameter of the original request.
    let user = &users[0];
    let color = expected[0]["color"].as_str().unwrap();
    let mut by_cookie = agent
        .get(&format!("{nginx}/orders"))
        .header("cookie", &format!("tidegate-user={user}"))
        .call()
        .unwrap();
    assert_eq!(by_cookie.body_mut().read_to_string().unwrap(), color);
    let mut by_query = agent.get(&format!("{nginx}/orders?x=1&user_id={user}")).call().unwrap();
    assert_eq!(by_query.body_mut().read_to_string().unwrap(), color);
}

#[test]
fn a_dial_move_is_followed_by_nginx_within_a_measured_bound() {
    let s = stack("initial_blue_percent = 50");
    let url = s.coordinator_url();
    // Users whose unit lies in [30, 50): blue at 50 %, green at 30 %.
    let users: Vec<String> = (0..2_000).map(|_| random_user()).collect();
    let movers: Vec<String> = users
        .iter()
        .zip(tags(&url, &users))
        .filter(|(_, t)| (30..50).contains(&t["unit"].as_u64().unwrap()))
        .map(|(u, _)| u.clone())
        .take(5)
        .collect();
    assert_eq!(movers.len(), 5);
    let agent = agent();
    let nginx = s.nginx.url();
    let mut lags = Vec::new();
    for round in 0..10 {
        let (percent, want) = if round % 2 == 0 { (30.0, "green") } else { (50.0, "blue") };
        let user = &movers[round % movers.len()];
        dial(&url, percent);
        let moved_at = Instant::now();
        loop {
            let (_, served, _) = through(&agent, &nginx, Some(user));
            if served == want {
                break;
            }
            assert!(moved_at.elapsed() < Duration::from_secs(5), "nginx never followed the dial");
        }
        lags.push(moved_at.elapsed());
    }
    lags.sort();
    println!(
        "dial -> nginx routes the moved user: p50 {:?}, max {:?}, min {:?} over {} moves",
        lags[lags.len() / 2],
        lags[lags.len() - 1],
        lags[0],
        lags.len()
    );
    // The bound we report in the manual (docs/src/edge.md): well under a second on this machine.
    assert!(lags[lags.len() - 1] < Duration::from_secs(2), "{lags:?}");
}

#[test]
fn a_pinned_user_lands_on_the_pin_and_untagged_requests_follow_the_fallback() {
    let s = stack("initial_blue_percent = 100");
    let url = s.coordinator_url();
    let agent = agent();
    let nginx = s.nginx.url();
    let (status, _) = put_json(
        &format!("{url}/v1/pins/vip-1"),
        OPERATOR_TOKEN,
        json!({"color": "green", "expected_version": 1, "reason": "pin test"}),
    );
    assert_eq!(status, 200);
    s.edge.as_ref().unwrap().wait_for_version(2);
    let (_, served, _) = through(&agent, &nginx, Some("vip-1"));
    assert_eq!(served, "green", "the pin wins over the 100 % blue dial");
    let (_, served, _) = through(&agent, &nginx, Some("vip-2"));
    assert_eq!(served, "blue");
    // No user ID: the random fallback draws by share, and at 100 % blue that is always blue.
    for _ in 0..200 {
        let (status, served, seen) = through(&agent, &nginx, None);
        assert_eq!((status, served.as_str()), (200, "blue"));
        assert_eq!(seen["x-seen-color"], "blue");
    }
    // At 0 % blue it is always green.
    dial(&url, 0.0);
    s.edge.as_ref().unwrap().wait_for_version(3);
    for _ in 0..200 {
        let (_, served, _) = through(&agent, &nginx, None);
        assert_eq!(served, "green");
    }
}

#[test]
fn the_reject_fallback_refuses_requests_without_a_user_id() {
    let s = stack("fallback = \"reject\"");
    let agent = agent();
    let (status, _, _) = through(&agent, &s.nginx.url(), None);
    assert_eq!(status, 403, "nginx turns the gate's 403 into a refusal");
    let (status, _, _) = through(&agent, &s.nginx.url(), Some("someone"));
    assert_eq!(status, 200);
}

#[test]
fn killing_the_coordinator_leaves_routing_unchanged_and_killing_the_edge_falls_back() {
    let mut s = stack("initial_blue_percent = 42");
    let url = s.coordinator_url();
    let users: Vec<String> = (0..2_000).map(|_| random_user()).collect();
    let expected = tags(&url, &users);
    let agent = agent();
    let nginx = s.nginx.url();

    s.coordinator.take().unwrap().kill9();
    let edge_url = s.edge.as_ref().unwrap().url.clone();
    let said_so = wait_until(Duration::from_secs(10), || {
        let (status, body) = get_json(&format!("{edge_url}/readyz"));
        status == 200 && body["coordinator_connected"] == false
    });
    assert!(said_so, "the edge must say it lost the coordinator");
    let (_, ready) = get_json(&format!("{edge_url}/readyz"));
    assert_eq!(ready["source"], "coordinator");
    assert!(ready["detail"].as_str().unwrap().contains("unreachable"), "{ready}");
    for (user, tag) in users.iter().zip(&expected) {
        let (status, served, _) = through(&agent, &nginx, Some(user));
        assert_eq!((status, served.as_str()), (200, tag["color"].as_str().unwrap()), "{user}");
    }

    s.edge.take().unwrap().kill9();
    let (blue_before, green_before) = (s.blue.served(), s.green.served());
    for user in &users[..1_000] {
        let (status, served, seen) = through(&agent, &nginx, Some(user));
        assert_eq!(status, 200, "the fallback serves every request");
        assert_eq!(served, "blue", "the fallback upstream is blue (green is its backup)");
        assert_eq!(seen["x-seen-fallback"], "edge-unreachable");
        assert!(seen.get("x-seen-color").is_none(), "no colour is invented: {seen}");
    }
    assert_eq!(s.blue.served() - blue_before, 1_000);
    assert_eq!(s.green.served(), green_before);
}

/// With service tokens configured, a gateway whose tidegate token is wrong (rotated, mistyped)
/// keeps serving every user through the fallback (labelled `gate-caller-refused`) instead of
/// turning every request into a 401, and the edge counts it for the alert; with the right token
/// users are routed by the rule. The application's own `Authorization` header is not taken for a
/// tidegate token and reaches the backend; client-sent `x-tidegate-*` headers never do.
#[test]
fn a_wrong_gateway_token_falls_back_and_the_applications_own_headers_are_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    let extra = format!(
        "service_tokens_sha256 = [\"{}\"]\n[edge]\ntoken = \"{SERVICE_TOKEN}\"\n",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    );
    std::fs::write(&config, config_toml(&extra)).unwrap();
    let coordinator = Server::start(&config, &dir.path().join("data"));
    let edge = Edge::start(&config, &coordinator.url, &dir.path().join("edge/cache.json"), 0);
    edge.wait_for_version(1);
    let (blue, green) = (Upstream::start("blue"), Upstream::start("green"));
    let with_token = |token: &'static str| {
        move |conf: String| {
            let line = "# set $tidegate_gateway_token \"<service token>\";";
            assert!(conf.contains(line), "the shipped config documents the gateway token line");
            conf.replace(line, &format!("set $tidegate_gateway_token \"{token}\";"))
        }
    };
    let agent = agent();
    let users: Vec<String> = (0..200).map(|_| random_user()).collect();

    // A wrong token: every request is still served, through the fallback, and counted.
    let wrong = Nginx::start_edited(
        &dir.path().join("nginx-wrong"),
        edge.port(),
        blue.port,
        green.port,
        with_token("tg_rotated_away"),
    );
    for user in &users {
        let (status, _, seen) = through(&agent, &wrong.url(), Some(user));
        assert_eq!(status, 200, "a wrong gateway token never refuses the user");
        assert_eq!(seen["x-seen-fallback"], "gate-caller-refused", "{seen}");
        assert!(seen.get("x-seen-color").is_none_or(|c| c == ""), "{seen}");
    }
    let mut metrics = agent.get(&format!("{}/metrics", edge.url)).call().unwrap();
    let text = metrics.body_mut().read_to_string().unwrap();
    let refused: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("tidegate_edge_gate_caller_refused_total ")?.parse().ok())
        .expect("the refusals are counted");
    assert!(refused >= 200.0, "{refused}");
    // The page: the shipped TidegateGateCallerRefused rule (its `for: 1m` cut to 3 s) fires in
    // a real Prometheus scraping the edge, while users keep being served through the fallback.
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("dashboards/rules/tidegate.rules.yml"),
    )
    .unwrap();
    let at = shipped.find("alert: TidegateGateCallerRefused").expect("the rule is shipped");
    let for_at = at + shipped[at..].find("for: 1m").expect("its for: 1m");
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, format!("{}for: 3s{}", &shipped[..for_at], &shipped[for_at + 7..]))
        .unwrap();
    let prometheus = Prometheus::start_job(
        &dir.path().join("prometheus"),
        &format!("127.0.0.1:{}", edge.port()),
        Some(&rules),
        "tidegate-edge",
    );
    let firing = || {
        prometheus.query(r#"ALERTS{alertname="TidegateGateCallerRefused", alertstate="firing"}"#)
            ["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    };
    let paged = Instant::now();
    let fired = wait_until(Duration::from_secs(30), || {
        for user in users.iter().take(20) {
            let (status, _, _) = through(&agent, &wrong.url(), Some(user));
            assert_eq!(status, 200, "still served while the alert is pending");
        }
        firing()
    });
    assert!(fired, "TidegateGateCallerRefused never fired");
    println!("TidegateGateCallerRefused fired {:?} after scraping began", paged.elapsed());

    // The right token: users are routed by the rule, and the headers are the gateway's.
    let right = Nginx::start_edited(
        &dir.path().join("nginx-right"),
        edge.port(),
        blue.port,
        green.port,
        with_token(SERVICE_TOKEN),
    );
    let tagged = tags(&coordinator.url, &users);
    for (user, tag) in users.iter().zip(&tagged) {
        let mut response = agent
            .get(&format!("{}/orders", right.url()))
            .header("x-user-id", user)
            .header("Authorization", "Bearer the-applications-own-session")
            .header("x-tidegate-color", "forged")
            .header("x-tidegate-fallback", "forged")
            .header("x-tidegate-domain", "forged")
            .header("x-tidegate-service", "forged")
            .header("x-tidegate-hop", "1")
            .header("x-tidegate-channel", "forged")
            .call()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let header =
            |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(header("x-seen-color").as_deref(), tag["color"].as_str(), "{user}");
        assert_eq!(
            header("x-seen-authorization").as_deref(),
            Some("Bearer the-applications-own-session"),
            "the application's Authorization reaches the backend"
        );
        assert!(header("x-seen-fallback").is_none_or(|f| f.is_empty()), "no forged fallback");
        for forged in ["x-seen-domain", "x-seen-service", "x-seen-hop", "x-seen-channel"] {
            assert!(header(forged).is_none(), "{forged} reached the backend");
        }
        let body = response.body_mut().read_to_string().unwrap();
        assert_eq!(body, tag["color"].as_str().unwrap(), "served by the tagged colour");
    }
}

/// The shipped file as is, in front of an edge that asks no gateway token: a client's own
/// `x-tidegate-token` and `x-tidegate-domain` never reach the gate, so they neither send it to
/// the fallback (counted as a refused gateway, paging on-call) nor pick another routing domain.
#[test]
fn a_clients_own_tidegate_headers_never_steer_the_gate() {
    let stack = stack("");
    let url = stack.coordinator_url();
    let agent = agent();
    let users: Vec<String> = (0..200).map(|_| random_user()).collect();
    let tagged = tags(&url, &users);
    let edge = stack.edge.as_ref().unwrap();
    let before = metric_value(&agent, &edge.url, "tidegate_edge_gate_caller_refused_total");
    let (mut routed, mut fell_back) = (0, 0);
    for (user, tag) in users.iter().zip(&tagged) {
        let mut response = agent
            .get(&format!("{}/orders", stack.nginx.url()))
            .header("x-user-id", user)
            .header("x-tidegate-token", "anything")
            .header("x-tidegate-domain", "no-such-domain")
            .call()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let fallback = response.headers().get("x-seen-fallback").is_some();
        let body = response.body_mut().read_to_string().unwrap();
        if fallback {
            fell_back += 1;
        } else if body == tag["color"].as_str().unwrap() {
            routed += 1;
        }
    }
    let after = metric_value(&agent, &edge.url, "tidegate_edge_gate_caller_refused_total");
    println!("client-sent tokens: {routed} routed by the rule, {fell_back} fell back");
    assert_eq!(
        (routed, fell_back),
        (users.len(), 0),
        "a client's token or domain steered the gate"
    );
    assert_eq!(after, before, "no refused gateway counted for a client's header");
}

fn metric_value(agent: &ureq::Agent, url: &str, name: &str) -> f64 {
    let mut metrics = agent.get(&format!("{url}/metrics")).call().unwrap();
    let text = metrics.body_mut().read_to_string().unwrap();
    text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0.0)
}

/// A release channel through nginx: the shipped config names the service of `/orders` in the
/// gate's subrequest, so a channel of `orders` moves those users' `/orders` requests to its zone
/// while their `/payments` requests keep the global map's zone. Every user lands where
/// `POST /v1/tag` says for that service.
#[test]
fn a_release_channel_moves_only_its_services_requests_through_nginx() {
    let stack = stack("initial_blue_percent = 100\n");
    let url = stack.coordinator_url();
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let (status, body) = put_json(
        &format!("{url}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "green", "percent": 10,
               "expected_version": routing["version"], "reason": "release orders v2"}),
    );
    assert_eq!(status, 200, "{body}");
    let version = body["version"].as_u64().or(routing["version"].as_u64().map(|v| v + 1)).unwrap();
    stack.edge.as_ref().unwrap().wait_for_version(version);
    let users: Vec<String> = (0..2_000).map(|_| random_user()).collect();
    let body = json!({"user_ids": users, "service": "orders"});
    let (status, answer) = post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{answer}");
    let expected: Vec<String> = answer["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["color"].as_str().unwrap().to_owned())
        .collect();
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut on_green = 0;
    for (user, lane) in users.iter().zip(&expected) {
        // The service is matched on the normalised path: spellings of /orders that nginx
        // itself serves as /orders must not skip the channel.
        for path in [
            "/orders",
            "/orders/42?x=1",
            "//orders/42",
            "/%6Frders/42",
            "/./orders/42",
            "/payments",
        ] {
            let response =
                agent.get(&format!("{}{path}", stack.nginx.url())).header("x-user-id", user).call();
            let mut response = response.expect("nginx answers");
            assert_eq!(response.status().as_u16(), 200, "{user} {path}");
            let served = response.body_mut().read_to_string().unwrap();
            let want = if path == "/payments" { "blue" } else { lane.as_str() };
            assert_eq!(
                served, want,
                "{user} on {path}: the gate must follow the rule for the path's service"
            );
        }
        on_green += usize::from(lane == "green");
    }
    println!("{on_green} of {} users on the orders-v2 channel (green) for /orders", users.len());
    assert!((100..=300).contains(&on_green), "about 10% of users: {on_green}");

    // A third zone whose lane (red) this gateway has no upstream for: its users are served by
    // the fallback, labelled, with no colour; never by blue under their own label.
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let (status, body) = post_json(
        &format!("{url}/v1/zones"),
        OPERATOR_TOKEN,
        json!({"name": "az-c", "lane": "red", "expected_version": routing["version"], "reason": "third zone"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-29", "zone": "az-c"}], "expected_version": body["version"], "reason": "az-c takes 30 units"}),
    );
    assert_eq!(status, 200, "{body}");
    stack.edge.as_ref().unwrap().wait_for_version(body["version"].as_u64().unwrap());
    let body = json!({"user_ids": users, "service": "orders"});
    let (status, answer) = post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{answer}");
    let mut red = 0;
    for (user, tag) in users.iter().zip(answer["tags"].as_array().unwrap()).take(500) {
        let (status, served, seen) = through(&agent, &stack.nginx.url(), Some(user));
        assert_eq!(status, 200);
        if tag["color"] == "red" {
            red += 1;
            assert_eq!(seen["x-seen-fallback"], "lane-not-configured", "{user}: {seen}");
            assert!(seen.get("x-seen-color").is_none(), "{user}: {seen}");
            assert!(seen.get("x-seen-zone").is_none(), "{user}: {seen}");
        } else {
            assert_eq!(served, tag["color"].as_str().unwrap(), "{user}");
            assert!(seen.get("x-seen-fallback").is_none(), "{user}: {seen}");
        }
    }
    println!("{red} of 500 users in the red lane went to the fallback, labelled");
    assert!(red > 50, "az-c owns 30 % of the units: {red}");
}
