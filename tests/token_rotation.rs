//! Token and key rotation, as docs/src/token-rotation.md tells an operator to do it (issue 26):
//! each procedure is played on the real binary, restart by restart, and every phase checks that
//! the old and the new credential are both accepted during the switch and that the old one is
//! refused once it is removed.
//!
//! - service tokens: `service_tokens_sha256 = [old]` → `[old, new]` → `[new]`;
//! - operator tokens: operator `alice` → `alice` and `alice-2027` → `alice-2027`, the audit
//!   naming which token made each change;
//! - the lane member key, on two replicas of a real Kafka command log (the lane lease moves
//!   between them as they restart): `member_key = K1` → `member_key = K2, previous_member_key =
//!   K1` → `member_key = K2`, one replica at a time. A member registered under K1 keeps
//!   heartbeating through both rolling restarts under the same member ID: the replica that
//!   adopts it verifies its K1 secret and answers its secret under K2, which it presents from
//!   then on. The control shows what the previous key prevents: the same roll without it refuses
//!   the member's secret (403 `member_secret_mismatch`), so every consumer registers again and
//!   its partitions move. (A single node forgets its members when it restarts, so there the
//!   members register again whatever the key.)

mod common;

use std::path::Path;

use common::Server;
use common::audit::agent;
use serde_json::{Value, json};
use tidegate::config::token_sha256_hex;

const OLD_SERVICE: &str = "tg_rotation_service_old";
const NEW_SERVICE: &str = "tg_rotation_service_new";
const OLD_OPERATOR: &str = "tg_rotation_operator_alice_2026";
const NEW_OPERATOR: &str = "tg_rotation_operator_alice_2027";
const K1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const K2: &str = "2222222222222222222222222222222222222222222222222222222222222222";
const SECRET_HEADER: &str = "X-Tidegate-Member-Secret";

fn call(
    method: &str,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let agent = agent();
    let mut response = match body {
        Some(body) => {
            let mut req = match method {
                "PUT" => agent.put(url),
                _ => agent.post(url),
            };
            if let Some(token) = token {
                req = req.header("Authorization", &format!("Bearer {token}"));
            }
            for (name, value) in headers {
                req = req.header(*name, *value);
            }
            req.send_json(body).expect("request sent")
        }
        None => {
            let mut req = agent.get(url);
            if let Some(token) = token {
                req = req.header("Authorization", &format!("Bearer {token}"));
            }
            req.call().expect("request sent")
        }
    };
    let status = response.status().as_u16();
    let body = response.body_mut().read_json().unwrap_or(Value::Null);
    (status, body)
}

/// Writes `toml` as the node's config and starts it on `data_dir` (the same log every phase).
fn start(dir: &Path, phase: &str, toml: &str) -> Server {
    let file = dir.join(format!("{phase}.toml"));
    std::fs::write(&file, toml).unwrap();
    Server::start(&file, &dir.join("data"))
}

fn operator(name: &str, token: &str) -> String {
    format!(
        "[[operators]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nrole = \"operator\"\n",
        token_sha256_hex(token)
    )
}

fn hashes(tokens: &[&str]) -> String {
    let list: Vec<String> = tokens.iter().map(|t| format!("\"{}\"", token_sha256_hex(t))).collect();
    format!("service_tokens_sha256 = [{}]\n", list.join(", "))
}

fn tag_status(url: &str, token: &str) -> u16 {
    call("GET", &format!("{url}/v1/tag?user_id=user-42"), Some(token), &[], None).0
}

#[test]
fn a_service_token_rotates_with_old_and_new_accepted_during_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let admin = operator("alice", OLD_OPERATOR);

    let before = start(dir.path(), "before", &format!("{}\n{admin}", hashes(&[OLD_SERVICE])));
    assert_eq!(tag_status(&before.url, OLD_SERVICE), 200);
    assert_eq!(tag_status(&before.url, NEW_SERVICE), 401, "the new token before it is configured");
    assert_eq!(
        call("GET", &format!("{}/v1/tag?user_id=user-42", before.url), None, &[], None).0,
        401,
        "anonymous reads are refused once service tokens are configured"
    );
    before.terminate();

    let during =
        start(dir.path(), "during", &format!("{}\n{admin}", hashes(&[OLD_SERVICE, NEW_SERVICE])));
    for round in 0..50 {
        assert_eq!(tag_status(&during.url, OLD_SERVICE), 200, "old token, round {round}");
        assert_eq!(tag_status(&during.url, NEW_SERVICE), 200, "new token, round {round}");
    }
    during.terminate();

    let after = start(dir.path(), "after", &format!("{}\n{admin}", hashes(&[NEW_SERVICE])));
    assert_eq!(tag_status(&after.url, NEW_SERVICE), 200);
    let (status, body) =
        call("GET", &format!("{}/v1/tag?user_id=user-42", after.url), Some(OLD_SERVICE), &[], None);
    assert_eq!(status, 401, "the removed token is refused: {body}");
    assert!(body["error"].is_string() && body["detail"].is_string(), "{body}");
    after.terminate();
}

fn dial(url: &str, token: &str, percent: u32, reason: &str) -> (u16, Value) {
    let version =
        call("GET", &format!("{url}/v1/routing"), None, &[], None).1["version"].as_u64().unwrap();
    call(
        "PUT",
        &format!("{url}/v1/dial"),
        Some(token),
        &[],
        Some(
            json!({"blue_percent": percent, "expected_version": version, "reason": reason, "force": true}),
        ),
    )
}

#[test]
fn an_operator_token_rotates_under_a_new_name_and_the_audit_says_which_one_acted() {
    let dir = tempfile::tempdir().unwrap();
    let old = operator("alice", OLD_OPERATOR);
    let new = operator("alice-2027", NEW_OPERATOR);

    let before = start(dir.path(), "before", &old);
    assert_eq!(dial(&before.url, OLD_OPERATOR, 40, "before the rotation").0, 200);
    assert_eq!(dial(&before.url, NEW_OPERATOR, 45, "not yet configured").0, 401);
    before.terminate();

    let during = start(dir.path(), "during", &format!("{old}\n{new}"));
    assert_eq!(dial(&during.url, OLD_OPERATOR, 41, "old token during the switch").0, 200);
    assert_eq!(dial(&during.url, NEW_OPERATOR, 42, "new token during the switch").0, 200);
    during.terminate();

    let after = start(dir.path(), "after", &new);
    let (status, body) = dial(&after.url, OLD_OPERATOR, 43, "removed token");
    assert_eq!(status, 401, "{body}");
    assert_eq!(dial(&after.url, NEW_OPERATOR, 44, "after the rotation").0, 200);

    // The audit (readable by the operator) names the token's operator for every change.
    let (status, audit) =
        call("GET", &format!("{}/v1/audit?limit=10", after.url), Some(NEW_OPERATOR), &[], None);
    assert_eq!(status, 200, "{audit}");
    let text = audit.to_string();
    let actor_of = |reason: &str| -> String {
        let entries = audit["entries"].as_array().or_else(|| audit.as_array()).expect("entries");
        let entry = entries
            .iter()
            .find(|e| e.to_string().contains(reason))
            .unwrap_or_else(|| panic!("no audit entry for `{reason}` in {text}"));
        entry["by"].as_str().unwrap_or_else(|| panic!("no `by` in {entry}")).to_owned()
    };
    assert_eq!(actor_of("old token during the switch"), "alice", "{text}");
    assert_eq!(actor_of("new token during the switch"), "alice-2027", "{text}");
    assert_eq!(actor_of("after the rotation"), "alice-2027", "{text}");
    assert!(!text.contains("removed token"), "the refused change left no record: {text}");
    after.terminate();
}

/// Two replicas of one Kafka command log with the lane lease, on fixed ports, rolled from one
/// member-key phase to the next one replica at a time, as the manual says.
struct Replicas {
    dir: tempfile::TempDir,
    topic: String,
    ports: [u16; 2],
    servers: [Option<Server>; 2],
}

impl Replicas {
    fn start(key: &str, previous: Option<&str>) -> Replicas {
        let ports = [common::gateway::free_port(), common::gateway::free_port()];
        let mut replicas = Replicas {
            dir: tempfile::tempdir().unwrap(),
            topic: common::kafka::unique("rotation"),
            ports,
            servers: [None, None],
        };
        for n in 0..2 {
            replicas.launch(n, key, previous);
        }
        replicas
    }

    fn url(&self, n: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[n])
    }

    fn launch(&mut self, n: usize, key: &str, previous: Option<&str>) {
        let previous =
            previous.map(|p| format!("previous_member_key = \"{p}\"\n")).unwrap_or_default();
        let toml = format!(
            r#"
[store]
kind = "kafka"
[store.kafka]
bootstrap = "{bootstrap}"
topic = "{topic}"
allow_under_replicated = true
[node]
id = "r{n}"
zone = "{zone}"
url = "http://127.0.0.1:{port}"
[lanes]
session_timeout = "4s"
heartbeat_interval = "250ms"
lease = "1500ms"
member_key = "{key}"
{previous}
{operator}
"#,
            bootstrap = common::kafka::bootstrap(),
            topic = self.topic,
            zone = if n == 0 { "az-a" } else { "az-b" },
            port = self.ports[n],
            operator = operator("alice", OLD_OPERATOR),
        );
        let file = self.dir.path().join(format!("r{n}.toml"));
        std::fs::write(&file, toml).unwrap();
        let server =
            Server::start_at(&file, &self.dir.path().join(format!("data-{n}")), self.ports[n]);
        assert!(
            common::wait_until(std::time::Duration::from_secs(30), || {
                common::get_json(&format!("{}/readyz", server.url)).0 == 200
            }),
            "replica r{n} did not become ready"
        );
        self.servers[n] = Some(server);
    }

    /// One rolling restart into the phase `(key, previous)`: each replica in turn stops cleanly
    /// and starts with the new configuration, and the next waits until it is ready.
    fn roll(&mut self, key: &str, previous: Option<&str>) {
        for n in 0..2 {
            self.servers[n].take().unwrap().terminate();
            self.launch(n, key, previous);
            // Give the lane lease time to settle on a replica before the next one goes.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    }
}

/// A lane member as `LaneConsumer` behaves towards the coordinators: heartbeats every 250 ms to
/// whichever replica acts as lane authority (following a 503's `authority.url`, trying the other
/// replica when one is down), presents its secret, takes a new one from an answer that carries
/// it, and registers again only when its secret or membership is refused.
struct Member {
    id: String,
    secret: String,
    /// Answers that refused the member (403 `member_secret_mismatch`, 404 `member_not_found`):
    /// each would make a real consumer register again and its partitions move.
    refused: Vec<String>,
    secrets_taken: usize,
    heartbeats_ok: usize,
}

fn register(urls: &[String]) -> (String, String) {
    for _ in 0..100 {
        for url in urls {
            // A replica that is restarting refuses the connection: try the other one.
            let Ok(mut response) = agent()
                .post(&format!("{url}/v1/lanes/orders/members"))
                .header("Authorization", &format!("Bearer {OLD_OPERATOR}"))
                .send_json(json!({"zone": "az-a", "topic": "orders", "partitions": 8}))
            else {
                continue;
            };
            let status = response.status().as_u16();
            let body: Value = response.body_mut().read_json().unwrap_or(Value::Null);
            if status == 201 {
                return (
                    body["member_id"].as_str().unwrap().to_owned(),
                    body["member_secret"].as_str().unwrap().to_owned(),
                );
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no replica registered the member");
}

fn heartbeat_once(urls: &[String], member: &mut Member) {
    for url in urls {
        let Ok(mut response) = agent()
            .post(&format!("{url}/v1/lanes/orders/members/{}/heartbeat", member.id))
            .header("Authorization", &format!("Bearer {OLD_OPERATOR}"))
            .header(SECRET_HEADER, &member.secret)
            .send_json(json!({"holding": [], "zone": "az-a", "topic": "orders", "partitions": 8}))
        else {
            continue; // this replica is restarting
        };
        let status = response.status().as_u16();
        let body: Value = response.body_mut().read_json().unwrap_or(Value::Null);
        match status {
            200 => {
                if let Some(secret) = body["member_secret"].as_str() {
                    member.secret = secret.to_owned();
                    member.secrets_taken += 1;
                }
                member.heartbeats_ok += 1;
                return;
            }
            403 | 404 => {
                member.refused.push(format!("{status} {}", body["error"]));
                // What LaneConsumer does: register again, under a new member ID.
                let (id, secret) = register(urls);
                member.id = id;
                member.secret = secret;
                return;
            }
            _ => continue, // 503: not the authority (or no authority yet); try the other one
        }
    }
}

/// Registers a member under K1, then rolls the replicas through `phases` while the member
/// heartbeats; answers the member as it ended.
fn rotate(phases: &[(&str, Option<&str>)]) -> Member {
    let mut replicas = Replicas::start(K1, None);
    let urls: Vec<String> = (0..2).map(|n| replicas.url(n)).collect();
    let (id, secret) = register(&urls);
    let member = std::sync::Arc::new(std::sync::Mutex::new(Member {
        id,
        secret,
        refused: Vec::new(),
        secrets_taken: 0,
        heartbeats_ok: 0,
    }));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beating = {
        let (member, stop, urls) = (member.clone(), stop.clone(), urls.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                heartbeat_once(&urls, &mut member.lock().unwrap());
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_secs(2));
    for (key, previous) in phases {
        replicas.roll(key, *previous);
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    beating.join().unwrap();
    for server in replicas.servers.iter_mut() {
        server.take().unwrap().terminate();
    }
    std::sync::Arc::try_unwrap(member).ok().unwrap().into_inner().unwrap()
}

#[test]
fn the_member_key_rotates_across_replicas_without_a_consumer_registering_again() {
    let started = std::time::Instant::now();
    let first_id;
    let member = {
        // The manual's two rolling restarts: K2 signing with K1 still accepted, then K2 alone.
        let m = rotate(&[(K2, Some(K1)), (K2, None)]);
        first_id = m.id.clone();
        m
    };
    println!(
        "member key rotation over 2 replicas, 4 restarts: {} heartbeats answered, {} refused, \
         new secret taken {} time(s), {:.1} s",
        member.heartbeats_ok,
        member.refused.len(),
        member.secrets_taken,
        started.elapsed().as_secs_f64()
    );
    assert!(member.refused.is_empty(), "the member was refused: {:?}", member.refused);
    assert_eq!(member.id, first_id);
    assert!(member.secrets_taken >= 1, "the member never took its K2 secret");
    assert!(member.heartbeats_ok >= 20, "only {} heartbeats answered", member.heartbeats_ok);
}

#[test]
fn control_rolling_to_a_new_member_key_without_the_previous_one_refuses_the_member() {
    let member = rotate(&[(K2, None)]);
    println!(
        "control (no previous_member_key): refused {:?}, new secret taken {} time(s)",
        member.refused, member.secrets_taken
    );
    assert!(
        member.refused.iter().any(|r| r.contains("member_secret_mismatch")),
        "the K1 secret should be refused once a replica runs K2 alone: {:?}",
        member.refused
    );
}

#[test]
fn a_previous_member_key_without_a_new_one_or_equal_to_it_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (name, toml) in [
        ("alone", format!("[lanes]\nprevious_member_key = \"{K1}\"\n")),
        ("equal", format!("[lanes]\nmember_key = \"{K1}\"\nprevious_member_key = \"{K1}\"\n")),
    ] {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(&file, toml).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(["serve", "--port", "0", "--config"])
            .arg(&file)
            .arg("--data-dir")
            .arg(dir.path().join(name))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}: started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("lanes.previous_member_key"), "{name}: {stderr}");
    }
}
