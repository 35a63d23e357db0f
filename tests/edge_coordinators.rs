//! `tidegate edge` against coordinators that fail for real (real binaries):
//!
//! - two replicas on the Kafka shared log, one SIGSTOPped: every edge on it leaves it within
//!   `edge.coordinator_timeout` (the default, 8 s, against the default 5 s heartbeat) and serves
//!   a change made on the other one; edges whose first choice is the other replica never notice;
//!   an edge with nowhere else to go says `stalled` in `/readyz`; the distribution is printed,
//!   and a control edge with the old 20 s bound stays on the stale table for more than 14 s;
//! - the same over `https://`, with the CA from `[client] ca_file`, and refused with another CA;
//! - an edge restarted from its cache keeps the log id and refuses a table from another log;
//! - an edge whose bound is shorter than the coordinator's heartbeat learns the heartbeat from the
//!   watch stream and stays connected (it used to refuse to start, or, given a matching copy of
//!   the heartbeat, flap whenever the coordinators' setting changed).

mod common;
mod ha_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::gateway::Edge;
use common::*;
use ha_support::{Replicas, distribution};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use serde_json::{Value, json};
use tidegate::client::first_choice;

const ROUNDS: usize = 4;

/// The default bound and the coordinators' default heartbeat.
const BOUND: Duration = Duration::from_secs(8);
const HEARTBEAT: Duration = Duration::from_secs(5);

fn quick() -> ureq::Agent {
    ha_support::agent(Duration::from_millis(500))
}

fn readyz(edge: &Edge) -> Value {
    ha_support::try_get(&quick(), &format!("{}/readyz", edge.url))
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// A subscriber ID (prefix `name`) whose first choice among two coordinators is `index`.
fn id_starting_at(name: &str, index: usize) -> String {
    (0..).map(|n| format!("{name}-{n}")).find(|id| first_choice(id, 2) == index).unwrap()
}

/// An edge configuration: `[edge]` with `subscriber_id`, `zone` and `edge_lines`, then `other`.
fn edge_config(dir: &Path, subscriber_id: &str, edge_lines: &str, other: &str) -> PathBuf {
    let file = dir.join(format!("{subscriber_id}.toml"));
    let toml = format!(
        "[edge]\nsubscriber_id = \"{subscriber_id}\"\nzone = \"az-a\"\n{edge_lines}\n{other}\n"
    );
    std::fs::write(&file, config_toml(&toml)).unwrap();
    file
}

fn start_edge(dir: &Path, id: &str, coordinators: &str, edge_lines: &str, other: &str) -> Edge {
    let config = edge_config(dir, id, edge_lines, other);
    Edge::start(&config, coordinators, &dir.join(format!("{id}.json")), 0)
}

/// A dial change on `url`, expecting the version it serves; returns the new version.
fn dial(url: &str, blue_units: u32) -> u64 {
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let version = routing["version"].as_u64().unwrap();
    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_units": blue_units, "expected_version": version, "reason": "edge stall"}),
    );
    assert_eq!(status, 200, "{body}");
    body["version"].as_u64().unwrap()
}

fn serves(edge: &Edge, version: u64) -> bool {
    readyz(edge)["version"].as_u64().is_some_and(|v| v >= version)
}

fn on(edge: &Edge, url: &str) -> bool {
    let ready = readyz(edge);
    ready["coordinator_connected"] == true && ready["coordinator"].as_str() == Some(url)
}

#[test]
fn every_edge_leaves_a_sigstopped_coordinator_within_the_bound() {
    let topic = common::kafka::unique("edge-stall");
    let replicas = Replicas::start(&common::kafka::bootstrap(), &topic, 2, "");
    let dir = tempfile::tempdir().unwrap();
    let both = replicas.urls.join(",");
    let edge = |id: String, coordinators: &str, lines: &str| {
        start_edge(dir.path(), &id, coordinators, lines, "")
    };
    // Four edges whose first choice is replica 0, two whose first choice is replica 1 (the
    // default subscriber ID `edge-<host>-<port>` spreads the same way).
    let mut edges: Vec<Edge> =
        (0..4).map(|n| edge(id_starting_at(&format!("first{n}"), 0), &both, "")).collect();
    edges.extend((0..2).map(|n| edge(id_starting_at(&format!("second{n}"), 1), &both, "")));
    // With nowhere else to go, an edge must say so.
    let solo = edge("solo".into(), &replicas.urls[0], "");
    // The control: the old 20 s bound.
    let control = edge(id_starting_at("control", 0), &both, "coordinator_timeout = \"20s\"");
    for e in edges.iter().chain([&solo, &control]) {
        e.wait_for_version(1);
    }
    for (i, e) in edges.iter().chain([&solo, &control]).enumerate() {
        let expected = &replicas.urls[usize::from(i == 4 || i == 5)];
        assert!(wait_until(Duration::from_secs(10), || on(e, expected)), "{}", readyz(e));
    }

    let mut left = Vec::new();
    let mut control_stale = None;
    let mut victim = 0;
    for round in 0..ROUNDS {
        let live = 1 - victim;
        let watching: Vec<usize> =
            (0..edges.len()).filter(|&i| on(&edges[i], &replicas.urls[victim])).collect();
        let elsewhere: Vec<usize> = (0..edges.len()).filter(|i| !watching.contains(i)).collect();
        assert_eq!(watching.len(), if round == 0 { 4 } else { 6 }, "round {round}");
        replicas.signal(victim, "-STOP");
        let stopped = Instant::now();
        let version = dial(&replicas.urls[live], 10 + round as u32 * 10);
        let mut pending = watching.clone();
        let mut elsewhere_at = None;
        let mut solo_stalled = false;
        while !pending.is_empty() && stopped.elapsed() < BOUND + Duration::from_secs(10) {
            pending.retain(|&i| {
                let done = serves(&edges[i], version);
                if done {
                    left.push(stopped.elapsed());
                }
                !done
            });
            if elsewhere_at.is_none() && elsewhere.iter().all(|&i| serves(&edges[i], version)) {
                elsewhere_at = Some(stopped.elapsed());
            }
            if round == 0 && !solo_stalled {
                let ready = readyz(&solo);
                solo_stalled = ready["coordinator_state"] == "stalled";
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            pending.is_empty(),
            "round {round}: edges {pending:?} never left the stopped replica"
        );
        for &i in &watching {
            assert!(on(&edges[i], &replicas.urls[live]), "round {round}: {}", readyz(&edges[i]));
        }
        if round == 0 {
            let at = elsewhere_at.expect("the edges on the live replica follow");
            assert!(at < Duration::from_secs(2), "the edges on the live replica took {at:?}");
            // The edge with only the stopped replica: stalled, on the stale table, and says so.
            assert!(wait_until(BOUND, || readyz(&solo)["coordinator_state"] == "stalled"));
            let ready = readyz(&solo);
            assert_eq!(ready["coordinator_connected"], false, "{ready}");
            assert!(ready["version"].as_u64().unwrap() < version, "{ready}");
            assert!(ready["detail"].as_str().unwrap().contains("stalled"), "{ready}");
            assert!(ready["last_error"].as_str().unwrap().contains("stalled"), "{ready}");
            // The control is still on the stale table long after every edge with the default
            // bound left; then it leaves too, at its own bound.
            while !serves(&control, version) && stopped.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let stale = stopped.elapsed();
            assert!(serves(&control, version), "the control never left: {}", readyz(&control));
            assert!(stale > Duration::from_secs(14), "the control left after {stale:?}");
            control_stale = Some(stale);
        }
        replicas.signal(victim, "-CONT");
        // The resumed replica catches up before it serves a later round's change.
        assert!(wait_until(Duration::from_secs(15), || {
            get_json(&format!("{}/v1/routing", replicas.urls[victim])).1["version"] == version
        }));
        victim = live;
    }
    drop(control);
    let (min, max) = (*left.iter().min().unwrap(), *left.iter().max().unwrap());
    println!(
        "edge stall: {}",
        distribution(
            "SIGSTOP of the watched replica to the edge serving a change made on the other (coordinator_timeout 8s, heartbeat 5s)",
            &left
        )
    );
    println!(
        "edge stall control (coordinator_timeout 20s): stale for {:?}",
        control_stale.unwrap()
    );
    // Left by the bound: not before the next heartbeat was due, and within the bound plus the
    // reconnect and the poll.
    assert!(min >= BOUND - HEARTBEAT - Duration::from_millis(200), "left after {min:?}");
    assert!(max <= BOUND + Duration::from_millis(1500), "left after {max:?}");
}

/// A CA, and a certificate for `localhost` and 127.0.0.1 that it signed (PEM files in `dir`):
/// `(ca, certs, key)`.
fn make_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca = make_ca("tidegate edge test CA");
    let issuer = Issuer::new(ca.0, ca.1);
    let mut params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "tidegate edge test server");
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let paths = (dir.join("ca.pem"), dir.join("server.pem"), dir.join("key.pem"));
    std::fs::write(&paths.0, ca.2).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

fn make_ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

#[test]
fn an_edge_watches_two_coordinators_over_tls_and_fails_over_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, certs, key) = make_pki(dir.path());
    let tls =
        format!("[server.tls]\ncerts = \"{}\"\nkey = \"{}\"\n", certs.display(), key.display());
    let topic = common::kafka::unique("edge-tls");
    let mut replicas = Replicas::start(&common::kafka::bootstrap(), &topic, 2, &tls);
    assert!(
        replicas.urls.iter().all(|u| u.starts_with("https://127.0.0.1:")),
        "{:?}",
        replicas.urls
    );
    let both = replicas.urls.join(",");
    let trusted = format!("[client]\nca_file = \"{}\"\n", ca.display());
    let id = id_starting_at("tls", 0);
    let edge = start_edge(dir.path(), &id, &both, "", &trusted);
    edge.wait_for_version(1);
    assert!(
        wait_until(Duration::from_secs(10), || on(&edge, &replicas.urls[0])),
        "{}",
        readyz(&edge)
    );
    // The replica it watches dies; a change on the other one reaches the edge over TLS.
    replicas.kill9(0);
    let agent =
        tidegate::client::tls::agent(&replicas.urls[1], Duration::from_secs(5), Some(&ca)).unwrap();
    let (_, routing) =
        ha_support::try_get(&agent, &format!("{}/v1/routing", replicas.urls[1])).unwrap();
    let mut answer = agent
        .put(&format!("{}/v1/dial", replicas.urls[1]))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(
            json!({"blue_units": 42, "expected_version": routing["version"], "reason": "tls"}),
        )
        .unwrap();
    assert_eq!(answer.status(), 200);
    let version = answer.body_mut().read_json::<Value>().unwrap()["version"].as_u64().unwrap();
    edge.wait_for_version(version);
    assert!(on(&edge, &replicas.urls[1]), "{}", readyz(&edge));
    let tagged = ha_support::try_get(&quick(), &format!("{}/v1/routing", edge.url)).unwrap().1;
    assert_eq!(
        (tagged["blue_units"].as_u64(), tagged["log_id"].as_str()),
        (Some(42), routing["log_id"].as_str())
    );

    // Another CA: the edge never takes a table, and says why.
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, make_ca("someone else's CA").2).unwrap();
    let untrusting = start_edge(
        dir.path(),
        "untrusting",
        &replicas.urls[1],
        "",
        &format!("[client]\nca_file = \"{}\"\n", other.display()),
    );
    let mut last = Value::Null;
    let refused = wait_until(Duration::from_secs(10), || {
        last = readyz(&untrusting);
        last["error"] == "no_table"
            && last["detail"].as_str().is_some_and(|d| d.contains("certificate"))
    });
    assert!(refused, "{last}");

    // A CA file that cannot be read stops the edge at start, naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["edge", "--port", "0", "--coordinator", &both, "--ca-file", "/nonexistent/ca.pem"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("/nonexistent/ca.pem"), "{stderr}");
}

#[test]
fn an_edge_restarted_from_its_cache_keeps_the_log_id_and_refuses_another_logs_table() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("coordinator.toml");
    std::fs::write(&config, config_toml("")).unwrap();
    let cache = dir.path().join("edge.json");
    let edge_file = edge_config(dir.path(), "cached", "", "");
    let old = Server::start(&config, &dir.path().join("old-data"));
    let old_log =
        get_json(&format!("{}/v1/routing", old.url)).1["log_id"].as_str().unwrap().to_owned();
    let edge = Edge::start(&edge_file, &old.url, &cache, 0);
    edge.wait_for_version(1);
    let version = dial(&old.url, 30);
    edge.wait_for_version(version);
    // The edge serves a table before its cache write lands (it is written after it is taken):
    // wait for the file, or a kill -9 in between restarts it from the version before.
    let cached = wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&cache).is_ok_and(|text| {
            serde_json::from_str::<Value>(&text).is_ok_and(|v| v["version"] == version)
        })
    });
    assert!(cached, "the cache never held version {version}");
    edge.kill9();
    old.kill9();

    // A coordinator on another log (a fresh data directory), ahead of the cached version.
    let new = Server::start(&config, &dir.path().join("new-data"));
    let mut new_version = 1;
    for units in [11, 12, 13, 14] {
        new_version = dial(&new.url, units);
    }
    assert!(new_version > version);
    let new_log =
        get_json(&format!("{}/v1/routing", new.url)).1["log_id"].as_str().unwrap().to_owned();
    assert_ne!(new_log, old_log);
    let edge = Edge::start(&edge_file, &new.url, &cache, 0);
    let routing = get_json(&format!("{}/v1/routing", edge.url)).1;
    assert_eq!(routing["log_id"], old_log.as_str(), "the cache kept the log id: {routing}");
    assert_eq!(routing["version"], version);
    let mut ready = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            ready = readyz(&edge);
            ready["refused"].is_string()
        }),
        "the refusal never showed: {ready}"
    );
    let refused = ready["refused"].as_str().unwrap();
    assert!(refused.contains(&new_log) && refused.contains(&old_log), "{refused}");
    assert!(ready["detail"].as_str().unwrap().contains("refused the table"), "{ready}");
    assert_eq!(
        (ready["version"].as_u64(), ready["log_id"].as_str()),
        (Some(version), Some(old_log.as_str()))
    );
    let routing = get_json(&format!("{}/v1/routing", edge.url)).1;
    assert_eq!(
        (routing["blue_units"].as_u64(), routing["log_id"].as_str()),
        (Some(30), Some(old_log.as_str()))
    );
    drop(edge);
    drop(new);

    // The same log again (the old data directory): followed as before.
    let old = Server::start(&config, &dir.path().join("old-data"));
    let edge = Edge::start(&edge_file, &old.url, &cache, 0);
    let next = dial(&old.url, 31);
    edge.wait_for_version(next);
    let ready = readyz(&edge);
    assert!(ready["refused"].is_null(), "{ready}");
    assert_eq!(ready["log_id"], old_log.as_str());
}

/// The coordinator sends a heartbeat every 3 s; the edge's own bound says 1.5 s and its own
/// `[subscribers] heartbeat` is the 5 s default. The edge takes the coordinator's announced 3 s,
/// waits 4 s, never calls the quiet coordinator stalled, follows its changes, and still leaves
/// it within that bound once it is SIGSTOPped. (The sse unit test is the control: without the
/// announcement the same bound judges a 3 s-heartbeat stream silent.)
#[test]
fn an_edge_learns_the_coordinators_heartbeat_and_never_calls_a_quiet_one_stalled() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("coordinator.toml");
    std::fs::write(&config, config_toml("[subscribers]\nheartbeat = \"3s\"")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let edge =
        start_edge(dir.path(), "learner", &server.url, "coordinator_timeout = \"1500ms\"", "");
    edge.wait_for_version(1);
    let ready = readyz(&edge);
    assert_eq!(ready["coordinator_heartbeat_seconds"], 3.0, "{ready}");
    assert_eq!(ready["stall_bound_seconds"], 4.0, "{ready}");
    assert_eq!(ready["coordinator_timeout_seconds"], 1.5, "{ready}");
    // Ten seconds of quiet (three heartbeats, no events): connected at every look.
    let started = Instant::now();
    let mut looks = 0;
    while started.elapsed() < Duration::from_secs(10) {
        let ready = readyz(&edge);
        assert_eq!(
            ready["coordinator_state"],
            "connected",
            "after {:?}: {ready}",
            started.elapsed()
        );
        looks += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(looks > 20, "{looks} looks");
    let version = dial(&server.url, 40);
    edge.wait_for_version(version);
    // Hung: left as stalled within the learned bound (4 s) plus the polling.
    let signal = |sig: &str| {
        let pid = server.child.id().to_string();
        assert!(std::process::Command::new("kill").args([sig, &pid]).status().unwrap().success());
    };
    signal("-STOP");
    let stopped = Instant::now();
    assert!(
        wait_until(Duration::from_secs(8), || readyz(&edge)["coordinator_state"] == "stalled"),
        "never judged stalled: {}",
        readyz(&edge)
    );
    let took = stopped.elapsed();
    signal("-CONT");
    println!("learned bound 4 s: stalled {:.2} s after the SIGSTOP", took.as_secs_f64());
    assert!(took >= Duration::from_millis(3900) && took < Duration::from_secs(7), "{took:?}");
}
