//! Helpers for the real-broker tests: the broker from `scripts/kafka.sh`, unique topics, a real
//! coordinator with lanes configured, and a routing table kept fresh from `GET /v1/routing`.
//!
//! Kafka missing is a failure, never a skip: `bootstrap()` starts the broker through the script
//! (a no-op when `scripts/test.sh` already did) and panics with the script's output if it can't.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::json;
use tidegate::core::RoutingTable;

use super::{OPERATOR_TOKEN, Server, agent, config_toml, get_json};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh")
}

/// Runs `scripts/kafka.sh ARGS` and returns its stdout; panics with everything on failure.
pub fn kafka_sh(args: &[&str]) -> String {
    let out = Command::new("bash").arg(script()).args(args).output().expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success(),
        "scripts/kafka.sh {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The broker's bootstrap address. Starts it when it is not running (the script serialises
/// concurrent starts), so a bare `cargo test` works too; `scripts/test.sh` starts it up front.
pub fn bootstrap() -> String {
    static BOOTSTRAP: OnceLock<String> = OnceLock::new();
    BOOTSTRAP
        .get_or_init(|| {
            let out = kafka_sh(&["start"]);
            let address = out.lines().last().unwrap_or_default().to_owned();
            assert!(address.starts_with("127.0.0.1:"), "unexpected bootstrap {address:?}");
            address
        })
        .clone()
}

/// A topic (or group) name no other test or earlier run uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{prefix}-{}-{nanos}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// A runtime for the async mq API in a plain `#[test]`.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap()
}

/// Creates a topic on the real broker with `partitions` partitions.
pub fn create_topic(rt: &tokio::runtime::Runtime, name: &str, partitions: u32) {
    rt.block_on(tidegate::mq::create_topic(&bootstrap(), name, partitions, 1))
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

/// A real `tidegate serve` with lanes reading lag from the broker, and short timings.
pub struct Coordinator {
    pub server: Server,
    pub url: String,
    _dir: tempfile::TempDir,
}

pub fn coordinator(session_timeout: &str, heartbeat: &str, lag_interval: &str) -> Coordinator {
    coordinator_with(session_timeout, heartbeat, lag_interval, "")
}

/// [`coordinator`] with `more` TOML after the lane settings (e.g. a `[zones.az-c]` table).
pub fn coordinator_with(
    session_timeout: &str,
    heartbeat: &str,
    lag_interval: &str,
    more: &str,
) -> Coordinator {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    let extra = format!(
        r#"
[lanes]
kafka_bootstrap = "{}"
session_timeout = "{session_timeout}"
heartbeat_interval = "{heartbeat}"
lag_interval = "{lag_interval}"

[drain]
tick = "20ms"
{more}
"#,
        bootstrap()
    );
    std::fs::write(&file, config_toml(&extra)).unwrap();
    let server = Server::start(&file, &dir.path().join("data"));
    let url = server.url.clone();
    Coordinator { server, url, _dir: dir }
}

impl Coordinator {
    /// Moves the dial to `percent` blue; returns the new routing version.
    pub fn dial(&self, percent: f64) -> u64 {
        let (_, routing) = get_json(&format!("{}/v1/routing", self.url));
        let version = routing["version"].as_u64().unwrap();
        let (status, body) = super::put_json(
            &format!("{}/v1/dial", self.url),
            OPERATOR_TOKEN,
            json!({"blue_percent": percent, "expected_version": version, "reason": "mq test"}),
        );
        assert_eq!(status, 200, "{body}");
        body["version"].as_u64().unwrap()
    }

    pub fn table(&self) -> RoutingTable {
        let (status, body) = get_json(&format!("{}/v1/routing", self.url));
        assert_eq!(status, 200, "{body}");
        tidegate::client::decode_table(&body).unwrap()
    }

    pub fn group(&self, group: &str) -> serde_json::Value {
        get_json(&format!("{}/v1/lanes/{group}", self.url)).1
    }

    /// Whether every member's holding equals its assignment and together they cover all
    /// `partitions`: the group has settled.
    pub fn settled(&self, group: &str, partitions: u64) -> bool {
        let v = self.group(group);
        let Some(members) = v["members"].as_array() else { return false };
        let mut covered = 0;
        for m in members {
            if m["holding"] != m["assignment"] || !m["pending"].as_array().unwrap().is_empty() {
                return false;
            }
            covered += m["assignment"].as_array().unwrap().len() as u64;
        }
        covered == partitions
    }

    pub fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let mut response = agent()
            .post(&format!("{}{path}", self.url))
            .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
            .send_json(body)
            .expect("request sent");
        let status = response.status().as_u16();
        (status, response.body_mut().read_json().expect("JSON body"))
    }
}

/// A routing table kept fresh by polling `GET /v1/routing`, as a service without the watch
/// stream would. The producer reads it through `TableSource`.
pub struct TableFeed {
    pub table: Arc<ArcSwap<RoutingTable>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TableFeed {
    pub fn start(coordinator: &Coordinator, every: Duration) -> TableFeed {
        let table = Arc::new(ArcSwap::from_pointee(coordinator.table()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s, url) = (Arc::clone(&table), Arc::clone(&stop), coordinator.url.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let (status, body) = get_json(&format!("{url}/v1/routing"));
                if status == 200
                    && let Ok(fresh) = tidegate::client::decode_table(&body)
                    && fresh.version() != t.load().version()
                {
                    t.store(Arc::new(fresh));
                }
                std::thread::sleep(every);
            }
        });
        TableFeed { table, stop, thread: Some(thread) }
    }
}

impl Drop for TableFeed {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One message as a test consumer processed it. Payloads are `user|seq`.
#[derive(Clone, Debug)]
pub struct Got {
    pub member: String,
    pub zone: String,
    pub partition: u32,
    pub offset: i64,
    /// The record's key (the user ID for a `LaneProducer`'s messages).
    pub key: Option<String>,
    pub user: String,
    pub seq: u64,
    pub color: Option<tidegate::core::ZoneId>,
    pub version: Option<u64>,
}

pub fn payload(user: &str, seq: u64) -> Vec<u8> {
    format!("{user}|{seq}").into_bytes()
}

/// How a test consumer stops: `close()` (commit, release, leave) or a crash (drop, no commit).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Close = 1,
    Crash = 2,
}

/// Where test consumers register and what they read.
pub struct Lane<'a> {
    pub coordinator: &'a str,
    pub topic: &'a str,
    pub group: &'a str,
}

/// A `LaneConsumer` running on a runtime, recording what it processes into a shared sink.
pub struct TestConsumer {
    pub zone: String,
    pub member: String,
    stop: Arc<std::sync::atomic::AtomicU8>,
    pub partitions: Arc<std::sync::Mutex<Vec<u32>>>,
    handle: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl TestConsumer {
    /// Starts a consumer in `zone` that spends `delay` on each message.
    pub fn start(
        rt: &tokio::runtime::Runtime,
        lane: &Lane<'_>,
        zone: &str,
        member: &str,
        delay: Duration,
        sink: Arc<std::sync::Mutex<Vec<Got>>>,
    ) -> TestConsumer {
        let mut settings = tidegate::mq::ConsumerSettings::new(
            lane.coordinator,
            &bootstrap(),
            lane.topic,
            lane.group,
            zone,
        );
        // Lane membership is a write: the test configurations' operator token (see `config_toml`).
        settings.member_name = Some(member.to_owned());
        settings.token = Some(super::OPERATOR_TOKEN.to_owned());
        settings.commit_interval = Duration::from_millis(100);
        let stop = Arc::new(std::sync::atomic::AtomicU8::new(0));
        let partitions = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, parts, name, zone_name) =
            (Arc::clone(&stop), Arc::clone(&partitions), member.to_owned(), zone.to_owned());
        let handle = rt.spawn(async move {
            let mut c = tidegate::mq::LaneConsumer::start(settings)
                .await
                .map_err(|e| format!("{name}: start: {e}"))?;
            loop {
                let how = s.load(Ordering::Relaxed);
                if how == Stop::Crash as u8 {
                    drop(c);
                    return Ok(());
                }
                if how == Stop::Close as u8 {
                    return c.close().await.map_err(|e| format!("{name}: close: {e}"));
                }
                let next = tokio::time::timeout(Duration::from_millis(50), c.next()).await;
                *parts.lock().unwrap() = c.partitions();
                let Ok(message) = next else { continue };
                let m = message.map_err(|e| format!("{name}: next: {e}"))?;
                let text = String::from_utf8(m.payload.clone()).unwrap();
                let (user, seq) = text.split_once('|').unwrap();
                sink.lock().unwrap().push(Got {
                    member: name.clone(),
                    zone: zone_name.clone(),
                    partition: m.partition,
                    offset: m.offset,
                    key: m.key.as_deref().map(|k| String::from_utf8_lossy(k).into_owned()),
                    user: user.to_owned(),
                    seq: seq.parse().unwrap(),
                    color: m.color,
                    version: m.routing_version,
                });
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
            }
        });
        TestConsumer {
            zone: zone.to_owned(),
            member: member.to_owned(),
            stop,
            partitions,
            handle: Some(handle),
        }
    }

    pub fn partitions(&self) -> Vec<u32> {
        self.partitions.lock().unwrap().clone()
    }

    /// Stops the consumer and waits for it; panics with its error if it failed.
    pub fn stop(mut self, rt: &tokio::runtime::Runtime, how: Stop) {
        self.stop.store(how as u8, Ordering::Relaxed);
        let handle = self.handle.take().unwrap();
        rt.block_on(handle).unwrap().unwrap();
    }

    /// Fails the test if the consumer's task already ended with an error.
    pub fn check(&self) {
        if let Some(h) = &self.handle {
            assert!(!h.is_finished(), "consumer {} stopped early", self.member);
        }
    }
}
