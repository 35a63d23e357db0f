//! The client library against the real binary: equality with the server, 100 subscribers
//! converging, surviving a coordinator restart, and a stuck subscriber holding a drain.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use tidegate::client::{Identity, Origin, Router, RouterOptions};

fn identity(id: &str, zone: &str) -> Identity {
    Identity { subscriber_id: id.into(), zone: zone.into(), kind: "test".into() }
}

fn fast() -> RouterOptions {
    RouterOptions {
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        read_timeout: Duration::from_secs(3),
        // Registering as a subscriber and acknowledging are writes.
        token: Some(OPERATOR_TOKEN.into()),
        ..RouterOptions::default()
    }
}

fn server(dir: &std::path::Path, extra: &str) -> (Server, std::path::PathBuf) {
    let config = dir.join("tidegate.toml");
    std::fs::write(&config, config_toml(extra)).unwrap();
    (Server::start(&config, &dir.join("data")), config)
}

fn dial(url: &str, percent: u64) -> (Value, Instant) {
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let (status, table) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": percent, "expected_version": routing["version"], "reason": "client test"}),
    );
    let answered = Instant::now();
    assert_eq!(status, 200, "{table}");
    (table, answered)
}

/// A random user ID of 1..=40 characters, mixing ASCII, digits and some multi-byte characters.
fn random_id() -> String {
    const ALPHABET: &[char] =
        &['a', 'b', 'z', 'Q', '0', '7', '-', '_', '.', '@', 'é', 'ü', '用', '户', '😀', ' '];
    let len = 1 + (rand::random::<u32>() % 40) as usize;
    (0..len).map(|_| ALPHABET[(rand::random::<u32>() as usize) % ALPHABET.len()]).collect()
}

#[test]
fn local_tags_equal_the_servers_for_100_000_random_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), "initial_blue_percent = 37");
    put_json(
        &format!("{}/v1/pins/pinned-user", server.url),
        OPERATOR_TOKEN,
        json!({"color": "green", "expected_version": 1, "reason": "pin"}),
    );
    let router = Router::connect(&server.url, identity("equality", "az-a"), fast()).unwrap();
    assert!(router.wait_for_version(2, Duration::from_secs(10)), "{}", router.status());
    let mut checked = 0;
    let mut blue = 0;
    for batch in 0..10 {
        let mut ids: Vec<String> = (0..10_000).map(|_| random_id()).collect();
        if batch == 0 {
            ids[0] = "pinned-user".into();
        }
        let mut response = agent()
            .post(&format!("{}/v1/tag", server.url))
            .send_json(json!({"user_ids": ids}))
            .unwrap();
        let body: Value = response.body_mut().read_json().unwrap();
        for (id, server_tag) in ids.iter().zip(body["tags"].as_array().unwrap()) {
            let local = router.tag(id).unwrap();
            assert_eq!(&*local.lane, server_tag["color"], "{id:?}");
            assert_eq!(u64::from(local.unit), server_tag["unit"].as_u64().unwrap(), "{id:?}");
            assert_eq!(server_tag["zone"], *local.zone, "{id:?}");
            assert_eq!(local.pinned, server_tag["pinned"].as_bool().unwrap(), "{id:?}");
            assert_eq!(local.version, body["version"].as_u64().unwrap());
            blue += usize::from(local.color == tidegate::core::ZoneId::BLUE);
            checked += 1;
        }
    }
    assert_eq!(checked, 100_000);
    assert!((33_000..41_000).contains(&blue), "about 37% blue, got {blue}");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_dial_change_reaches_and_is_acknowledged_by_100_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), "");
    let routers: Vec<Router> = (0..100)
        .map(|i| {
            Router::connect(
                &server.url,
                identity(&format!("sub-{i}"), if i % 2 == 0 { "az-a" } else { "az-b" }),
                fast(),
            )
            .unwrap()
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(20), || routers.iter().all(|r| r.acked_version() >= 1)),
        "not every subscriber connected"
    );
    let mut delays = Vec::new();
    let mut received = Vec::new();
    for round in 0..20u64 {
        let (table, answered) = dial(&server.url, if round % 2 == 0 { 30 } else { 60 });
        let version = table["version"].as_u64().unwrap();
        // A tight 1 ms poll so the measured delays are the subscribers', not the poll's.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !routers.iter().all(|r| r.version() >= Some(version)) {
            assert!(Instant::now() < deadline, "round {round}: not all subscribers got v{version}");
            std::thread::sleep(Duration::from_millis(1));
        }
        received.push(answered.elapsed());
        while !routers.iter().all(|r| r.acked_version() >= version) {
            assert!(
                Instant::now() < deadline,
                "round {round}: not all subscribers acknowledged v{version}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        delays.push(answered.elapsed());
        let (_, convergence) =
            get_json(&format!("{}/v1/routing/convergence?version={version}", server.url));
        assert_eq!(
            (convergence["live"].as_u64(), convergence["converged"].as_u64()),
            (Some(100), Some(100)),
            "{convergence}"
        );
        assert_eq!(convergence["complete"], true);
    }
    delays.sort();
    received.sort();
    println!(
        "PUT /v1/dial response -> all 100 subscribers applied the table: p50 {:?}, p99 {:?}",
        percentile(&received, 0.5),
        percentile(&received, 0.99)
    );
    println!(
        "PUT /v1/dial response -> last of 100 acks: p50 {:?}, p99 {:?}, max {:?} over {} changes ({} build, 100 client threads in this process)",
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays.last().unwrap(),
        delays.len(),
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    let (_, subscribers) = get_json(&format!("{}/v1/subscribers", server.url));
    let list = subscribers["subscribers"].as_array().unwrap();
    assert_eq!(list.len(), 100);
    assert!(list.iter().all(|s| s["state"] == "current" && s["lag"] == 0), "{subscribers}");
    let metrics = agent()
        .get(&format!("{}/metrics", server.url))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(metrics.contains("tidegate_subscribers{state=\"current\"} 100"), "subscriber gauge");
}

#[test]
fn clients_keep_tagging_through_a_coordinator_restart_and_resume_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (server, config) = server(dir.path(), "");
    let cache = dir.path().join("table-cache.json");
    let options = RouterOptions { cache_path: Some(cache.clone()), ..fast() };
    let routers: Vec<Router> = (0..3)
        .map(|i| {
            Router::connect(&server.url, identity(&format!("svc-{i}"), "az-a"), options.clone())
                .unwrap()
        })
        .collect();
    let (table, _) = dial(&server.url, 20);
    let version = table["version"].as_u64().unwrap();
    assert!(wait_until(Duration::from_secs(10), || routers
        .iter()
        .all(|r| r.version() == Some(version))));
    let before: Vec<_> = (0..50).map(|i| routers[0].tag(&format!("u{i}")).unwrap()).collect();
    let port = server.port();
    server.kill9();

    // Coordinator down: the routers keep their table, and say so.
    assert!(wait_until(Duration::from_secs(10), || routers.iter().all(|r| !r.status().connected)));
    for router in &routers {
        assert_eq!(router.version(), Some(version));
        assert_eq!(
            (0..50).map(|i| router.tag(&format!("u{i}")).unwrap()).collect::<Vec<_>>(),
            before
        );
        assert!(
            router.status().to_string().contains("coordinator unreachable"),
            "{}",
            router.status()
        );
    }
    // A service starting now comes up from the disk cache.
    let late = Router::connect(
        &format!("http://127.0.0.1:{port}"),
        identity("late", "az-b"),
        options.clone(),
    )
    .unwrap();
    assert_eq!((late.status().origin, late.version()), (Origin::DiskCache, Some(version)));
    assert_eq!(late.tag("u1").unwrap(), before[1]);

    let server = Server::start_at(&config, &dir.path().join("data"), port);
    assert!(
        wait_until(Duration::from_secs(10), || routers
            .iter()
            .chain([&late])
            .all(|r| r.status().connected)),
        "clients did not reconnect"
    );
    // Resumed from their version: the coordinator sees them as current without a new push.
    // (A router says it is connected when its stream's answer arrives; the coordinator may
    // count the stream a moment later, so this waits, with no new version in between. Asked at
    // once, it failed once in 11 runs.)
    let mut convergence = serde_json::Value::Null;
    let counted = wait_until(Duration::from_secs(5), || {
        convergence = get_json(&format!("{}/v1/routing/convergence", server.url)).1;
        (convergence["live"].as_u64(), convergence["converged"].as_u64()) == (Some(4), Some(4))
    });
    assert!(counted, "{convergence}");
    assert_eq!(convergence["current_version"].as_u64(), Some(version), "no new version was pushed");
    let (table, _) = dial(&server.url, 70);
    let next = table["version"].as_u64().unwrap();
    assert_eq!(next, version + 1);
    assert!(wait_until(Duration::from_secs(10), || routers
        .iter()
        .chain([&late])
        .all(|r| r.version() == Some(next))));
    assert_eq!(late.status().origin, Origin::Coordinator);
}

#[test]
fn a_subscriber_that_stops_acknowledging_holds_a_drain_step_then_pauses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), "[drain]\ntick = \"20ms\"\nconvergence_timeout = \"1s\"");
    let healthy = Router::connect(&server.url, identity("healthy-gw", "az-a"), fast()).unwrap();
    let stuck = Router::connect(
        &server.url,
        identity("stuck-gw", "az-b"),
        RouterOptions { acknowledge: false, ..fast() },
    )
    .unwrap();
    assert!(
        healthy.wait_for_version(1, Duration::from_secs(10))
            && stuck.wait_for_version(1, Duration::from_secs(10))
    );
    let batch = json!([{"zone": "az-b", "color": "blue", "ok": 5000}, {"zone": "az-a", "color": "green", "ok": 5000}]);
    post_json(&format!("{}/v1/outcomes", server.url), OPERATOR_TOKEN, batch);

    let started = Instant::now();
    let (status, body) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "200ms", "reason": "convergence test"}),
    );
    assert_eq!(status, 201, "{body}");
    let drain = || get_json(&format!("{}/v1/drains/1", server.url)).1;
    assert!(wait_until(Duration::from_secs(10), || drain()["state"] == "paused"), "{}", drain());
    let paused = drain();
    assert_eq!(paused["steps_done"], 1, "the second step waited for the first to converge");
    let reason = paused["hold_reason"].as_str().unwrap();
    assert!(reason.contains("stuck-gw") && reason.contains("50% of subscribers"), "{reason}");
    assert!(!reason.contains("healthy-gw"), "{reason}");
    assert!(started.elapsed() >= Duration::from_secs(1), "paused only after the 1 s timeout");
    let (_, convergence) = get_json(&format!("{}/v1/routing/convergence", server.url));
    assert_eq!(convergence["behind"][0]["subscriber_id"], "stuck-gw");
    assert!(convergence["behind"][0]["behind_for_ms"].as_u64().unwrap() >= 1000);
}

#[test]
fn a_router_without_a_table_yet_answers_none_instead_of_panicking() {
    use tidegate::service::table_source::TableSource;
    // Nothing listens on port 1 and there is no disk cache: no table can arrive.
    let router =
        Router::connect("http://127.0.0.1:1", identity("no-table", "az-a"), fast()).unwrap();
    assert!(router.current_table().is_none());
}

/// Opens `GET /v1/routing/watch` on a raw socket with `headers` and returns what arrives
/// within `wait` (the stream never ends on its own).
fn watch_raw(port: u16, query: &str, headers: &str, wait: Duration) -> String {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        socket,
        "GET /v1/routing/watch{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Accept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let deadline = Instant::now() + wait;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    while Instant::now() < deadline {
        socket.set_read_timeout(Some(deadline - Instant::now())).unwrap();
        match socket.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

#[test]
fn a_last_event_id_ahead_of_the_server_still_gets_the_table() {
    // A client that held version 9 of a log that was since replaced (restored, or a fresh data
    // directory) must not be left with no event at all: it gets the server's table.
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = server(dir.path(), "");
    let text = watch_raw(server.port(), "", "Last-Event-ID: 9\r\n", Duration::from_secs(2));
    assert!(text.contains("event:routing") && text.contains("id:1"), "{text}");
    // And a client that holds the current version gets nothing new on connect.
    let text = watch_raw(server.port(), "", "Last-Event-ID: 1\r\n", Duration::from_millis(500));
    assert!(!text.contains("event:routing"), "{text}");
}

#[test]
fn a_long_straggler_list_still_pauses_the_drain_with_a_reason_cut_to_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) =
        server(dir.path(), "[drain]\ntick = \"20ms\"\nconvergence_timeout = \"300ms\"");
    // Six subscribers with the longest IDs and zone labels allowed, stuck on version 1: the
    // runner's "behind: ..." list alone is longer than the 1024-byte audit limit.
    for i in 0..6 {
        let id = format!("{i}{}", "s".repeat(127));
        let zone = format!("{i}{}", "z".repeat(63));
        let (status, body) = post_json(
            &format!("{}/v1/subscribers/{id}/ack", server.url),
            OPERATOR_TOKEN,
            json!({"version": 1, "zone": zone, "kind": "gateway"}),
        );
        assert_eq!(status, 200, "{body}");
    }
    let batch = json!([{"zone": "az-b", "color": "blue", "ok": 5000}, {"zone": "az-a", "color": "green", "ok": 5000}]);
    // Outcomes are a signal that steers drains: they need a writer's token.
    let (status, body) = post_json(&format!("{}/v1/outcomes", server.url), OPERATOR_TOKEN, batch);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "100ms", "reason": "long reason test"}),
    );
    assert_eq!(status, 201, "{body}");
    let drain = || get_json(&format!("{}/v1/drains/1", server.url)).1;
    assert!(wait_until(Duration::from_secs(10), || drain()["state"] == "paused"), "{}", drain());
    let (_, audit) = get_json(&format!("{}/v1/audit", server.url));
    let reason = audit["entries"][0]["reason"].as_str().unwrap().to_owned();
    assert!(reason.len() <= 1024 && reason.contains("behind:"), "{} bytes: {reason}", reason.len());
}

#[test]
fn a_dropped_router_leaves_the_subscribers_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) =
        server(dir.path(), "[subscribers]\nstale_after = \"30s\"\nheartbeat = \"200ms\"");
    let state = || {
        let (_, list) = get_json(&format!("{}/v1/subscribers", server.url));
        list["subscribers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subscriber_id"] == "short-lived")
            .map(|s| s["state"].as_str().unwrap().to_owned())
    };
    let router = Router::connect(&server.url, identity("short-lived", "az-a"), fast()).unwrap();
    assert!(router.wait_for_version(1, Duration::from_secs(10)));
    assert!(wait_until(Duration::from_secs(5), || state().as_deref() == Some("current")));
    let dropped = Instant::now();
    drop(router);
    // Not live until stale_after (30 s): gone from the convergence gate within a heartbeat or so.
    assert!(
        wait_until(Duration::from_secs(5), || state().as_deref() == Some("stale")),
        "still {:?} {:?} after the drop",
        state(),
        dropped.elapsed()
    );
}

/// `[subscribers] require_lease` (issue 45): a subscriber that does not keep the table lease (a
/// client of an older release: no `lease=1`) is refused with 409 `lease_required`, by the fast
/// path's raw watch (the default main port), by Rocket's watch route (`fast_path = false`) and
/// when it registers by polling; a Router of this release (which keeps the lease) registers.
/// Without the setting the same request is taken.
#[test]
fn require_lease_refuses_unleased_subscribers_and_takes_routers() {
    let auth = format!("Authorization: Bearer {OPERATOR_TOKEN}\r\n");
    let old = "?subscriber_id=old-1&zone=az-a&kind=service";
    for fast_path in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let extra =
            format!("[server]\nfast_path = {fast_path}\n[subscribers]\nrequire_lease = true\n");
        let (server, _) = server(dir.path(), &extra);
        let refused = watch_raw(server.port(), old, &auth, Duration::from_millis(800));
        assert!(
            refused.starts_with("HTTP/1.1 409") && refused.contains("lease_required"),
            "fast_path = {fast_path}: {refused}"
        );
        let (status, body) = post_json(
            &format!("{}/v1/subscribers/poller-1/ack", server.url),
            OPERATOR_TOKEN,
            json!({"version": 1, "zone": "az-a", "kind": "service"}),
        );
        assert_eq!((status, body["error"].as_str()), (409, Some("lease_required")), "{body}");
        let leased =
            watch_raw(server.port(), &format!("{old}&lease=1"), &auth, Duration::from_millis(800));
        assert!(leased.starts_with("HTTP/1.1 200"), "fast_path = {fast_path}: {leased}");
        let router = Router::connect(&server.url, identity("new-1", "az-a"), fast()).unwrap();
        assert!(router.wait_for_version(1, Duration::from_secs(10)));
        let listed = wait_until(Duration::from_secs(5), || {
            get_json(&format!("{}/v1/subscribers", server.url)).1.to_string().contains("new-1")
        });
        assert!(listed, "the Router registered (fast_path = {fast_path})");
    }

    // Control: without the setting the unleased watch is taken.
    let dir = tempfile::tempdir().unwrap();
    let (open, _) = server(dir.path(), "");
    let taken = watch_raw(open.port(), old, &auth, Duration::from_millis(800));
    assert!(taken.starts_with("HTTP/1.1 200"), "{taken}");
}
