//! Issue 45's partition suite, Jepsen-style, on real components.
//!
//! Three zones (`az-a`, `az-b`, `az-c`) are Linux network namespaces joined through a bridge in
//! a `core` namespace (`tests/partition_support`). Each zone runs a Kafka KRaft node (three
//! voters, replication 3, `min.insync.replicas=2`), a `tidegate serve` replica on the Kafka
//! command log, a `tidegate edge` and a zone writer (`examples/zone_writer.rs`: its own leased
//! Router, `check_write` inside a `write_scope`, commits to PostgreSQL). PostgreSQL runs in
//! `core`, reachable from every zone: a zone cut from the others still reaches the database,
//! the realistic worst case. The test itself runs from `core` too.
//!
//! A scenario: ~200 users per zone writer under load; one zone is cut off from the other two
//! with nftables (not from `core`), an operator evacuates it through a majority replica with a
//! loss-less (`freeze`) evacuation, the cut holds ~25 s, then heals. A checker judges every
//! committed row against the routing history read back from the command log (`tidegate log
//! export`): the owner of the user's unit at the version in force when the row committed.
//!
//! Controls that show the checker can fail, run in the cut zone during the same scenario: a
//! writer that skips the write check (it writes the users its zone owned before the cut) into
//! an unfenced table must commit rows by a non-owner; the same writer into a table guarded by
//! the database fence (`tidegate fence`) must commit none.
//!
//! Needs root (namespaces, veth, nftables): CI runs as root; otherwise it fails loudly. The
//! Kafka jars come from `scripts/kafka.sh jars`, PostgreSQL from `scripts/postgres.sh`, the
//! writer from `cargo build --example zone_writer`.

mod common;
mod partition_support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, SERVICE_TOKEN, config_toml};
use partition_support::{CORE_HOST, Net, Proc, enter_namespace, run};
use serde_json::{Value, json};
use tidegate::core::{RoutingTable, Zones};

const ZONES: [&str; 3] = ["az-a", "az-b", "az-c"];
/// Users each zone writer is sent writes for.
const USERS_PER_ZONE: usize = 200;
const DRIVER_THREADS_PER_ZONE: usize = 2;
/// Load before the cut, so every zone writes as an owner first.
const WARM_UP: Duration = Duration::from_secs(6);
/// How long the cut holds.
const CUT: Duration = Duration::from_secs(25);
/// Load after the heal, so the healed zone writes again.
const AFTER_HEAL: Duration = Duration::from_secs(6);
/// The replicas' table lease (`subscribers.lease`, the default) and clock-drift margin.
const LEASE: Duration = Duration::from_secs(6);
/// Slack on top of the lease for a readiness sample to flip (a sampling period, a heartbeat).
const READY_SLACK: Duration = Duration::from_secs(3);
const TOPIC: &str = "tgp-commands";
const KAFKA_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
const REPLICA_PORT: u16 = 8080;
const EDGE_PORT: u16 = 8081;
const WRITER_PORT: u16 = 8090;
const PG_PORT: u16 = 5432;
/// A fixed KRaft cluster id: every run's cluster is private to its own namespaces.
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qk";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A short-timeout HTTP client: a request into a cut zone must not stall the test.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// `GET url` with the operator token: status and JSON body, `None` on a transport failure.
fn get(agent: &ureq::Agent, url: &str) -> Option<(u16, Value)> {
    let mut response =
        agent.get(url).header("Authorization", &format!("Bearer {OPERATOR_TOKEN}")).call().ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_json().unwrap_or(Value::Null)))
}

/// A change request with an idempotency key: status and body, `None` on a transport failure.
fn send(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    key: &str,
    body: &Value,
) -> Option<(u16, Value)> {
    let request = match method {
        "PUT" => agent.put(url),
        _ => agent.post(url),
    };
    let mut response = request
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .header("Idempotency-Key", key)
        .send_json(body)
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_json().unwrap_or(Value::Null)))
}

fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

// --- the components ---------------------------------------------------------------------------

/// One zone's Kafka node: controller and broker in one JVM, as `scripts/kafka.sh start-cluster`
/// runs them, on the zone's bridge address.
fn kafka_node(net: &Net, dir: &Path, i: usize, libs: &str) -> Proc {
    let node = dir.join(format!("kafka-{}", i + 1));
    std::fs::create_dir_all(node.join("logs")).unwrap();
    let voters: Vec<String> =
        (0..ZONES.len()).map(|n| format!("{}@{}:{CONTROLLER_PORT}", n + 1, net.addr(n))).collect();
    let addr = net.addr(i);
    let props = node.join("server.properties");
    // The durability and failure-detection settings of scripts/kafka.sh's cluster.
    std::fs::write(
        &props,
        format!(
            "process.roles=broker,controller
node.id={}
listeners=PLAINTEXT://{addr}:{KAFKA_PORT},CONTROLLER://{addr}:{CONTROLLER_PORT}
advertised.listeners=PLAINTEXT://{addr}:{KAFKA_PORT}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.voters={}
log.dirs={}
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
num.partitions=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
replica.lag.time.max.ms=5000
num.network.threads=2
num.io.threads=2
background.threads=2
num.replica.fetchers=1
",
            i + 1,
            voters.join(","),
            node.join("data").display()
        ),
    )
    .unwrap();
    let props = props.to_str().unwrap().to_owned();
    run(
        "bash",
        &[
            repo().join("scripts/kafka.sh").to_str().unwrap(),
            "tool",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            CLUSTER_ID,
            "-c",
            &props,
        ],
    );
    let log4j = repo().join("scripts/kafka/broker-log4j2.properties");
    let (proc, _) = Proc::start(
        &format!("kafka {}", ZONES[i]),
        &net.ns(ZONES[i]),
        &[
            "java",
            "-Xms96m",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            &format!("-Dkafka.logs.dir={}", node.join("logs").display()),
            &format!("-Dlog4j2.configurationFile={}", log4j.display()),
            "-cp",
            &format!("{libs}/*"),
            "kafka.Kafka",
            &props,
        ],
        &[],
        None,
    );
    proc
}

/// Runs a Kafka tool class from `core` (the test's namespace).
fn kafka_tool(args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg("30")
        .arg("bash")
        .arg(repo().join("scripts/kafka.sh"))
        .arg("tool")
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Creates the command topic with its preferred leader in `az-b` (node 2), so that cutting
/// `az-a` cuts a follower; retried until the three brokers have registered.
fn create_topic(bootstrap: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let created = kafka_tool(&[
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            TOPIC,
            "--replica-assignment",
            "2:3:1",
            "--config",
            "min.insync.replicas=2",
            "--config",
            "unclean.leader.election.enable=false",
            "--config",
            "retention.ms=-1",
        ]);
        match created {
            Ok(_) => return,
            Err(e) if Instant::now() > deadline => panic!("the command topic: {e}"),
            Err(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

/// The Kafka node (1-3) leading the command topic's partition.
fn topic_leader(bootstrap: &str) -> Option<usize> {
    let out = kafka_tool(&[
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--topic",
        TOPIC,
    ])
    .ok()?;
    let at = out.find("Leader: ")? + "Leader: ".len();
    out[at..].split_whitespace().next()?.parse().ok()
}

/// The configuration every replica shares, with its own `[node]`.
fn replica_config(dir: &Path, zone: &str, bootstrap: &str) -> PathBuf {
    let toml = format!(
        "service_tokens_sha256 = [\"{}\"]
[store]
kind = \"kafka\"
[store.kafka]
bootstrap = \"{bootstrap}\"
topic = \"{TOPIC}\"
presence_key = \"{}\"
[node]
id = \"r-{zone}\"
zone = \"{zone}\"
[health]
window = \"1s\"
[drain]
tick = \"20ms\"
[zones.az-a]
capacity_rps = 4000
[zones.az-b]
capacity_rps = 4000
[zones.az-c]
lane = \"red\"
capacity_rps = 4000
",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN),
        "7".repeat(64)
    );
    let file = dir.join(format!("replica-{zone}.toml"));
    std::fs::write(&file, config_toml(&toml)).unwrap();
    file
}

/// The components of one zone, each inside the zone's namespace.
struct Zone {
    replica: String,
    edge: String,
    writer: String,
    _procs: Vec<Proc>,
}

fn writer_binary() -> PathBuf {
    // target/<profile>/deps/partition-HASH -> target/<profile>/examples/zone_writer
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().unwrap().parent().unwrap().join("examples/zone_writer");
    assert!(
        path.exists(),
        "{} is missing: `cargo build --examples` puts it there (scripts/test.sh does)",
        path.display()
    );
    path
}

fn start_replica(net: &Net, dir: &Path, i: usize, bootstrap: &str) -> (Proc, String) {
    let zone = ZONES[i];
    let config = replica_config(dir, zone, bootstrap);
    let data = dir.join(format!("data-{zone}"));
    Proc::start(
        &format!("replica {zone}"),
        &net.ns(zone),
        &[
            env!("CARGO_BIN_EXE_tidegate"),
            "serve",
            "--address",
            &net.addr(i),
            "--port",
            &REPLICA_PORT.to_string(),
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[],
        Some("tidegate listening on "),
    )
}

/// The zone's edge and writer, next to its running `replica`.
fn start_zone(
    net: &Net,
    dir: &Path,
    i: usize,
    replica: (Proc, String),
    coordinators: &str,
    database: &str,
) -> Zone {
    let zone = ZONES[i];
    let (replica, replica_url) = replica;
    let edge_config = dir.join(format!("edge-{zone}.toml"));
    let edge_toml = format!(
        "[edge]\nsubscriber_id = \"edge-{zone}\"\nzone = \"{zone}\"\ntoken = \"{SERVICE_TOKEN}\"\n"
    );
    std::fs::write(&edge_config, config_toml(&edge_toml)).unwrap();
    let cache = dir.join(format!("edge-{zone}.json"));
    let (edge, edge_url) = Proc::start(
        &format!("edge {zone}"),
        &net.ns(zone),
        &[
            env!("CARGO_BIN_EXE_tidegate"),
            "edge",
            "--address",
            &net.addr(i),
            "--port",
            &EDGE_PORT.to_string(),
            "--coordinator",
            coordinators,
            "--config",
            edge_config.to_str().unwrap(),
        ],
        &[("TIDEGATE_EDGE__CACHE_PATH", cache.to_str().unwrap())],
        Some("tidegate edge listening on "),
    );
    let peers: Vec<String> = (0..ZONES.len())
        .filter(|n| *n != i)
        .map(|n| format!("{}=http://{}:{WRITER_PORT}", ZONES[n], net.addr(n)))
        .collect();
    // The writer reports its commits to its own zone's replica first (`TIDEGATE_URL`'s head).
    let local_first: Vec<&str> = std::iter::once(replica_url.as_str())
        .chain(coordinators.split(',').filter(|c| *c != replica_url))
        .collect();
    let (writer, writer_url) = Proc::start(
        &format!("writer {zone}"),
        &net.ns(zone),
        &[writer_binary().to_str().unwrap()],
        &[
            ("ZONE", zone),
            ("LISTEN", &format!("{}:{WRITER_PORT}", net.addr(i))),
            ("PEERS", &peers.join(",")),
            ("TIDEGATE_URL", &local_first.join(",")),
            ("TIDEGATE_SERVICE_TOKEN", SERVICE_TOKEN),
            ("DATABASE_URL", database),
        ],
        Some("zone_writer listening on "),
    );
    Zone {
        replica: replica_url,
        edge: edge_url,
        writer: writer_url,
        _procs: vec![replica, edge, writer],
    }
}

// --- the database ---------------------------------------------------------------------------

/// PostgreSQL from `scripts/postgres.sh`, run inside `core` (the caller's namespace) and
/// listening on the bridge too; stopped and wiped on drop.
struct Postgres {
    run_dir: PathBuf,
    url: String,
}

impl Postgres {
    fn start() -> Postgres {
        // Not under a root-only temp dir: the script runs the server as `postgres`.
        let run_dir = PathBuf::from(format!("/tmp/tgp-{}-postgres", std::process::id()));
        let out = Command::new("bash")
            .arg(repo().join("scripts/postgres.sh"))
            .arg("start")
            .env("POSTGRES_RUN_DIR", &run_dir)
            .env("POSTGRES_LISTEN", CORE_HOST)
            .env("POSTGRES_PORT", PG_PORT.to_string())
            .output()
            .unwrap();
        let postgres = Postgres {
            url: format!("postgresql://postgres@{CORE_HOST}:{PG_PORT}/postgres"),
            run_dir,
        };
        assert!(
            out.status.success(),
            "scripts/postgres.sh start failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        postgres
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/postgres.sh"))
            .arg("stop")
            .env("POSTGRES_RUN_DIR", &self.run_dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// The controls' tables: `unfenced` takes any write, `fenced` has the fence's trigger.
fn create_control_tables(database: &str) {
    let mut db = postgres::Client::connect(database, postgres::NoTls).unwrap();
    for table in ["fenced", "unfenced"] {
        db.batch_execute(&format!(
            "CREATE TABLE {table} (user_id text NOT NULL, zone text NOT NULL,
                                  at timestamptz NOT NULL DEFAULT clock_timestamp())"
        ))
        .unwrap();
    }
    let sql = run(
        env!("CARGO_BIN_EXE_tidegate"),
        &["fence", "sql", "--table", "fenced", "--user-column", "user_id"],
    );
    db.batch_execute(&sql).unwrap();
}

/// `tidegate fence postgres`, in `core`: a subscriber the barrier counts, keeping the fence's
/// ownership table current.
fn start_fence(net: &Net, database: &str, coordinators: &str) -> Proc {
    let (fence, _) = Proc::start(
        "fence",
        &net.ns("core"),
        &[
            env!("CARGO_BIN_EXE_tidegate"),
            "fence",
            "postgres",
            "--database",
            database,
            "--coordinator",
            coordinators,
            "--token",
            OPERATOR_TOKEN,
            "--id",
            "fence-fenced",
            "--zone",
            "az-b",
        ],
        &[("TIDEGATE_URL", "")],
        None,
    );
    fence
}

// --- the load -------------------------------------------------------------------------------

#[derive(Default)]
struct DriverCounts {
    acked: AtomicU64,
    refused: Mutex<BTreeMap<String, u64>>,
    unknown: AtomicU64,
}

/// Writes for `USERS_PER_ZONE` users per zone, each sent to its zone's writer (which forwards a
/// misrouted write once to the owner's writer), one attempt per write ID.
struct Driver {
    writers: Vec<String>,
    acked: Mutex<Vec<i64>>,
    counts: DriverCounts,
    stop: AtomicBool,
}

impl Driver {
    fn start(writers: Vec<String>) -> (Arc<Driver>, Vec<std::thread::JoinHandle<()>>) {
        let driver = Arc::new(Driver {
            writers,
            acked: Mutex::new(Vec::new()),
            counts: DriverCounts::default(),
            stop: AtomicBool::new(false),
        });
        let mut threads = Vec::new();
        for zone in 0..ZONES.len() {
            for thread in 0..DRIVER_THREADS_PER_ZONE {
                let driver = Arc::clone(&driver);
                threads.push(std::thread::spawn(move || driver.drive(zone, thread)));
            }
        }
        (driver, threads)
    }

    fn drive(&self, zone: usize, thread: usize) {
        let agent = agent(Duration::from_secs(5));
        let url = format!("{}/write", self.writers[zone]);
        let mut seq = 0i64;
        while !self.stop.load(Ordering::Relaxed) {
            seq += 1;
            let write_id = ((zone as i64) << 40) | ((thread as i64) << 32) | seq;
            let user = user_name(zone, (seq as usize * 7 + thread * 101) % USERS_PER_ZONE);
            let sent = agent.post(&url).send_json(json!({"user_id": user, "write_id": write_id}));
            match sent {
                Ok(response) if response.status().as_u16() == 200 => {
                    self.counts.acked.fetch_add(1, Ordering::Relaxed);
                    self.acked.lock().unwrap().push(write_id);
                }
                Ok(mut response) => {
                    let status = response.status().as_u16();
                    let body: Value = response.body_mut().read_json().unwrap_or(Value::Null);
                    let why = format!("{status} {}", body["error"].as_str().unwrap_or("?"));
                    *self.counts.refused.lock().unwrap().entry(why).or_default() += 1;
                }
                Err(_) => {
                    self.counts.unknown.fetch_add(1, Ordering::Relaxed);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn user_name(zone: usize, i: usize) -> String {
    format!("u-{}-{i}", &ZONES[zone][3..])
}

fn all_users() -> Vec<String> {
    (0..ZONES.len()).flat_map(|z| (0..USERS_PER_ZONE).map(move |i| user_name(z, i))).collect()
}

/// The controls: writers in the cut zone's namespace that skip the write check and insert, for
/// the users that zone owned before the cut, into `table` until `stop`. Returns how many
/// inserts committed and the refusals by SQLSTATE.
fn contract_ignoring_writer(
    net: &Net,
    zone: &'static str,
    table: &'static str,
    database: String,
    users: Vec<String>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, BTreeMap<String, u64>)> {
    let ns = net.handle(zone);
    std::thread::spawn(move || {
        enter_namespace(&ns);
        let mut db = postgres::Client::connect(&database, postgres::NoTls).unwrap();
        db.batch_execute(&format!("SET tidegate.zone = '{zone}'")).unwrap();
        let insert = format!("INSERT INTO {table} (user_id, zone) VALUES ($1, $2)");
        let (mut committed, mut refused) = (0, BTreeMap::new());
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let user = &users[(i * 7919) % users.len()];
            i += 1;
            match db.execute(&insert, &[user, &zone]) {
                Ok(_) => committed += 1,
                Err(e) => {
                    let code = e.code().map_or("none".to_owned(), |c| c.code().to_owned());
                    *refused.entry(code).or_insert(0) += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (committed, refused)
    })
}

// --- the control plane ----------------------------------------------------------------------

/// A control-plane change sent during a scenario: a pin of a user no writer writes.
#[derive(Clone, Debug)]
struct Probe {
    reason: String,
    sent: Instant,
    /// When it was acknowledged, and at which version.
    acked: Option<(Instant, u64)>,
    /// The answer, for the report (`200`, or the refusal's status and error).
    answer: String,
}

/// Pins `probe-N` every 500 ms through the majority's replicas (the first that answers), each
/// with its own idempotency key: a change whose answer was lost is sent again with the same
/// key until it gets one.
struct Prober {
    probes: Arc<Mutex<Vec<Probe>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Prober {
    fn start(replicas: Vec<String>, label: &str) -> Prober {
        let (probes, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (out, halt, label) = (Arc::clone(&probes), Arc::clone(&stop), label.to_owned());
        let thread = std::thread::spawn(move || {
            let agent = agent(Duration::from_secs(3));
            let mut n = 0;
            while !halt.load(Ordering::Relaxed) {
                n += 1;
                let reason = format!("probe {label}-{n}");
                let sent = Instant::now();
                let (acked, answer) = probe_once(&agent, &replicas, &reason, &halt);
                out.lock().unwrap().push(Probe { reason, sent, acked, answer });
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Prober { probes, stop, thread }
    }

    fn finish(self) -> Vec<Probe> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.probes.lock().unwrap().clone()
    }
}

/// One pin until it is answered (or the prober stops): acknowledged at a version, or refused;
/// and the answer.
fn probe_once(
    agent: &ureq::Agent,
    replicas: &[String],
    reason: &str,
    halt: &AtomicBool,
) -> (Option<(Instant, u64)>, String) {
    let user = reason.replace(' ', "-");
    let mut expected = None;
    let mut attempt = 0;
    while !halt.load(Ordering::Relaxed) {
        let url = &replicas[attempt % replicas.len()];
        attempt += 1;
        let version = match expected {
            Some(v) => v,
            None => match get(agent, &format!("{url}/v1/routing")) {
                Some((200, body)) => *expected.insert(body["version"].as_u64().unwrap()),
                _ => continue,
            },
        };
        let body = json!({"color": "blue", "expected_version": version, "reason": reason});
        let key = reason.replace(' ', "-");
        match send(agent, "PUT", &format!("{url}/v1/pins/{user}"), &key, &body) {
            Some((200, body)) => {
                let version = body["version"].as_u64().unwrap();
                return (Some((Instant::now(), version)), "200".into());
            }
            // Refused (e.g. a version conflict with the evacuation): a definite answer.
            Some((status, body)) if status < 500 => {
                // The detail says which version it met (a conflict) or why it was refused.
                let error = body["error"].as_str().unwrap_or("?");
                let detail = body["detail"].as_str().unwrap_or_default();
                println!(
                    "partition: probe `{reason}` at v{version} refused: {status} {error}: {detail}"
                );
                return (None, format!("{status} {error}"));
            }
            // Unknown or unavailable: the same change again, under the same key.
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    (None, "unanswered".into())
}

/// `(state_version, state_hash)` of a replica, from `GET /v1/cluster`.
fn state(agent: &ureq::Agent, replica: &str) -> Option<(u64, String)> {
    let (status, body) = get(agent, &format!("{replica}/v1/cluster"))?;
    if status != 200 {
        return None;
    }
    let log = &body["log"];
    Some((log["state_version"].as_u64()?, log["state_hash"].as_str()?.to_owned()))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

fn routing(replica: &str) -> Value {
    let (status, body) = get(&agent(Duration::from_secs(5)), &format!("{replica}/v1/routing"))
        .unwrap_or_else(|| panic!("{replica} does not answer"));
    assert_eq!(status, 200, "{body}");
    body
}

/// Gives each zone a third of the units through `replica`, loss-less (`freeze`, so writes
/// under way during the move are judged like any others), and waits for the move to end.
fn balance(replica: &str, label: &str) {
    let table = routing(replica);
    let units = table["units"].as_u64().unwrap();
    let third = units / 3;
    let moves: Vec<Value> = ZONES
        .iter()
        .enumerate()
        .map(|(i, zone)| {
            let first = i as u64 * third;
            let last = if i == ZONES.len() - 1 { units - 1 } else { first + third - 1 };
            json!({"units": format!("{first}-{last}"), "zone": zone})
        })
        .collect();
    let body = json!({"moves": moves, "expected_version": table["version"], "force": true,
                      "freeze": true, "freeze_window": "20s",
                      "reason": format!("partition suite: balance ({label})")});
    let answer = send(
        &agent(Duration::from_secs(10)),
        "PUT",
        &format!("{replica}/v1/units"),
        &format!("balance-{label}"),
        &body,
    );
    assert!(matches!(answer, Some((200 | 202, _))), "balancing the units: {answer:?}");
    assert!(wait_until(Duration::from_secs(30), || move_done(replica)), "the balance never ended");
}

/// Evacuates `zone` through the majority's replicas, loss-less (`freeze`), retrying a lost
/// answer under the same key; returns when and what was acknowledged.
fn evacuate(replicas: &[String], zone: &str, label: &str) -> (Instant, Value) {
    let agent = agent(Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(60);
    for attempt in 0.. {
        assert!(Instant::now() < deadline, "the evacuation of {zone} was never answered");
        let url = &replicas[attempt % replicas.len()];
        let Some((200, table)) = get(&agent, &format!("{url}/v1/routing")) else { continue };
        let body = json!({"zone": zone, "expected_version": table["version"], "force": true,
                          "freeze": true, "freeze_window": "40s",
                          "reason": format!("partition suite: evacuate ({label})")});
        let key = format!("evacuate-{label}-{}", table["version"]);
        loop {
            match send(&agent, "POST", &format!("{url}/v1/units/evacuate"), &key, &body) {
                Some((200 | 202, answer)) => return (Instant::now(), answer),
                // Another change came first (a probe): ask again at the new version.
                Some((409, _)) => break,
                Some((status, answer)) if status < 500 => {
                    panic!("evacuating {zone}: {status} {answer}")
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
    unreachable!()
}

/// Whether the majority's replicas have no loss-less move under way any more.
fn move_done(replica: &str) -> bool {
    get(&agent(Duration::from_secs(2)), &format!("{replica}/v1/changes"))
        .is_some_and(|(status, body)| status == 200 && body["units"].is_null())
}

// --- readiness ------------------------------------------------------------------------------

/// One readiness sample: a replica's `/readyz`, or an edge's `writes_confirmed` (an edge stays
/// ready for reads and tags by design; its write checks are what the lease fences).
#[derive(Clone, Debug)]
struct Sample {
    at: Instant,
    zone: usize,
    kind: &'static str,
    /// `None`: no answer.
    ready: Option<bool>,
}

struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    /// Samples every replica and edge every 250 ms.
    fn start(zones: &[Zone]) -> Sampler {
        let targets: Vec<(usize, String, String)> =
            zones.iter().enumerate().map(|(i, z)| (i, z.replica.clone(), z.edge.clone())).collect();
        let (samples, stop) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicBool::new(false)));
        let (out, halt) = (Arc::clone(&samples), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let agent = agent(Duration::from_millis(200));
            while !halt.load(Ordering::Relaxed) {
                let started = Instant::now();
                for (zone, replica, edge) in &targets {
                    let ready = get(&agent, &format!("{replica}/readyz")).map(|(s, _)| s == 200);
                    let at = Instant::now();
                    out.lock().unwrap().push(Sample { at, zone: *zone, kind: "replica", ready });
                    let confirmed = get(&agent, &format!("{edge}/readyz"))
                        .map(|(_, body)| body["writes_confirmed"] == true);
                    let at = Instant::now();
                    out.lock().unwrap().push(Sample {
                        at,
                        zone: *zone,
                        kind: "edge",
                        ready: confirmed,
                    });
                }
                std::thread::sleep(Duration::from_millis(250).saturating_sub(started.elapsed()));
            }
        });
        Sampler { samples, stop, thread }
    }

    fn between(&self, from: Instant, to: Instant) -> Vec<Sample> {
        self.samples.lock().unwrap().iter().filter(|s| s.at >= from && s.at < to).cloned().collect()
    }

    fn finish(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

// --- a scenario -----------------------------------------------------------------------------

/// Readiness samples during a cut: "side kind" -> (ready, not ready, no answer).
type Tally = BTreeMap<String, (u32, u32, u32)>;

/// What one cut showed.
struct Cut {
    zone: usize,
    /// Wall-clock times of the cut and the heal, in ms since the epoch (as the log stamps).
    cut_ms: u64,
    healed_ms: u64,
    /// From the cut to the first control-plane change the majority acknowledged.
    first_change: Option<Duration>,
    /// From the cut to the evacuation's acknowledgement.
    evacuation_acked: Duration,
    evacuation: Value,
    /// From the heal until the cut replica is at the majority's state and ready again.
    healed_current: Option<Duration>,
    /// From the heal until the cut zone's edge has its write lease again.
    healed_edge: Option<Duration>,
    /// Readiness samples during the cut that were wrong, described.
    wrong: Vec<String>,
    tally: Tally,
    probes: Vec<Probe>,
    controls: Vec<(&'static str, u64, BTreeMap<String, u64>)>,
}

/// Cuts zone `cut` off, evacuates it through the majority, holds the cut for [`CUT`], heals.
fn scenario(
    net: &Net,
    zones: &[Zone],
    cut: usize,
    label: &str,
    database: &str,
    sampler: &Sampler,
) -> Cut {
    let majority: Vec<String> =
        (0..zones.len()).filter(|i| *i != cut).map(|i| zones[i].replica.clone()).collect();
    balance(&majority[0], label);
    let quick = agent(Duration::from_secs(2));
    // The controls write the users the cut zone owns now.
    let table = tidegate::client::decode_table(&routing(&majority[0])).unwrap();
    let owned: Vec<String> = all_users()
        .into_iter()
        .filter(|u| table.zone_of(table.tag(u).unwrap().color) == ZONES[cut])
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let controls: Vec<_> = ["fenced", "unfenced"]
        .into_iter()
        .map(|t| {
            let w = contract_ignoring_writer(
                net,
                ZONES[cut],
                t,
                database.to_owned(),
                owned.clone(),
                Arc::clone(&stop),
            );
            (t, w)
        })
        .collect();
    std::thread::sleep(WARM_UP);

    let prober = Prober::start(majority.clone(), label);
    std::thread::sleep(Duration::from_secs(1));
    let (cut_at, cut_ms) = (Instant::now(), now_ms());
    net.cut(ZONES[cut]);
    let (evacuated_at, evacuation) = evacuate(&majority, ZONES[cut], label);
    eprintln!(
        "partition: [{label}] evacuation of {} answered after {} ms: version {}, {}",
        ZONES[cut],
        (evacuated_at - cut_at).as_millis(),
        evacuation["version"],
        evacuation["change"]["phase"]
    );
    let done = wait_until(CUT.saturating_sub(cut_at.elapsed()), || move_done(&majority[0]));
    eprintln!(
        "partition: [{label}] the evacuation's move {} {} ms after the cut",
        if done { "ended" } else { "had not ended" },
        cut_at.elapsed().as_millis()
    );
    std::thread::sleep(CUT.saturating_sub(cut_at.elapsed()));
    let (healed_at, healed_ms) = (Instant::now(), now_ms());
    net.heal(ZONES[cut]);

    // The healed side: its replica at the majority's state and ready, its edge confirmed.
    let cut_replica = &zones[cut].replica;
    let (mut healed_current, mut healed_edge) = (None, None);
    wait_until(Duration::from_secs(30), || {
        if healed_current.is_none() {
            let majority_state = state(&quick, &majority[0]).map(|s| s.0);
            let own = state(&quick, cut_replica).map(|s| s.0);
            let ready =
                get(&quick, &format!("{cut_replica}/readyz")).is_some_and(|(s, _)| s == 200);
            if ready && own.is_some() && own >= majority_state {
                healed_current = Some(healed_at.elapsed());
            }
        }
        if healed_edge.is_none()
            && get(&quick, &format!("{}/readyz", zones[cut].edge))
                .is_some_and(|(_, b)| b["writes_confirmed"] == true)
        {
            healed_edge = Some(healed_at.elapsed());
        }
        healed_current.is_some() && healed_edge.is_some()
    });
    std::thread::sleep(AFTER_HEAL);
    stop.store(true, Ordering::Relaxed);
    let controls = controls
        .into_iter()
        .map(|(t, w)| {
            let (committed, refused) = w.join().unwrap();
            (t, committed, refused)
        })
        .collect();
    let probes = prober.finish();
    // The evacuation is a change too: its first step, applied on the majority.
    let first_change = probes
        .iter()
        .filter(|p| p.sent >= cut_at)
        .filter_map(|p| p.acked.map(|(at, _)| at - cut_at))
        .chain([evacuated_at - cut_at])
        .min();
    let (wrong, tally) =
        judge_readiness(&sampler.between(cut_at, healed_at), cut, cut_at, first_change);
    Cut {
        zone: cut,
        cut_ms,
        healed_ms,
        first_change,
        evacuation_acked: evacuated_at - cut_at,
        evacuation,
        healed_current,
        healed_edge,
        wrong,
        tally,
        probes,
        controls,
    }
}

/// Judges the samples taken during a cut of zone `cut`: the cut side must not say ready (nor its
/// edge confirmed) once its lease ran out; the majority must say ready once it applies changes
/// again (a lease after its first one).
fn judge_readiness(
    samples: &[Sample],
    cut: usize,
    cut_at: Instant,
    first_change: Option<Duration>,
) -> (Vec<String>, Tally) {
    let (mut wrong, mut tally) = (Vec::new(), BTreeMap::new());
    for s in samples {
        let since = s.at - cut_at;
        let side = if s.zone == cut { "cut" } else { "majority" };
        let count: &mut (u32, u32, u32) = tally.entry(format!("{side} {}s", s.kind)).or_default();
        match s.ready {
            Some(true) => count.0 += 1,
            Some(false) => count.1 += 1,
            None => count.2 += 1,
        }
        let bad = if s.zone == cut {
            s.ready == Some(true) && since > LEASE + READY_SLACK
        } else {
            s.ready != Some(true) && first_change.is_some_and(|f| since > f + LEASE + READY_SLACK)
        };
        if bad {
            wrong.push(format!(
                "{} {} of {} said {:?} {} ms into the cut",
                side,
                s.kind,
                ZONES[s.zone],
                s.ready,
                since.as_millis()
            ));
        }
    }
    (wrong, tally)
}

// --- the checker ----------------------------------------------------------------------------

/// The routing history read back from the command log (`tidegate log export`): every version
/// with the time it was stamped and its table, and every change's reason by version.
struct History {
    tables: Vec<(u64, u64, RoutingTable)>,
    reasons: HashMap<u64, String>,
}

impl History {
    fn export(config: &Path) -> History {
        use tidegate::store::{LogEntry, replay, replay_after};
        let out = run(
            env!("CARGO_BIN_EXE_tidegate"),
            &["log", "export", "--config", config.to_str().unwrap()],
        );
        let entries: Vec<LogEntry> =
            out.lines().map(|l| serde_json::from_str(l).expect("an exported entry")).collect();
        let mut replayed = replay(&entries[..1], &Zones::default()).expect("the genesis replays");
        let LogEntry::Genesis { at_ms, .. } = &entries[0] else { panic!("no genesis") };
        let mut tables = vec![(1, *at_ms, replayed.state.table().clone())];
        let mut reasons = HashMap::new();
        for (i, entry) in entries.iter().enumerate().skip(1) {
            replay_after(&mut replayed, std::slice::from_ref(entry), i as u64).expect("replays");
            let LogEntry::Change { version, at_ms, reason, .. } = entry else {
                panic!("an export holds changes after its genesis: {entry:?}")
            };
            assert_eq!(*version, replayed.state.table().version(), "versions in order");
            tables.push((*version, *at_ms, replayed.state.table().clone()));
            reasons.insert(*version, reason.clone());
        }
        History { tables, reasons }
    }

    /// The changes stamped between `from_ms` and `to_ms` other than the probes' pins, as
    /// `v<version> +<ms after from_ms> <reason>`: what became of a cut's evacuation.
    fn changes_between(&self, from_ms: u64, to_ms: u64) -> Vec<String> {
        let mut out = Vec::new();
        for (version, at_ms, _) in &self.tables {
            let reason = self.reasons.get(version).map_or("", String::as_str);
            if (from_ms..to_ms).contains(at_ms) && !reason.starts_with("probe ") {
                out.push(format!("v{version} +{} ms {reason}", at_ms - from_ms));
            }
        }
        out
    }

    /// When zone `zone` first owned no unit after version `after`: the evacuation's switch.
    fn emptied(&self, zone: &str, after: u64) -> Option<u64> {
        self.tables.iter().filter(|(v, _, _)| *v > after).find_map(|(_, at_ms, table)| {
            let id = table.zones().resolve(zone).unwrap();
            (table.units_of(id) == 0).then_some(*at_ms)
        })
    }

    /// The zone owning `user` at `at_us` (µs since the epoch): by the newest version stamped
    /// at or before it.
    fn owner_at(&self, user: &str, at_us: i64) -> String {
        let i = self.tables.partition_point(|(_, at_ms, _)| (*at_ms as i64) * 1000 <= at_us);
        let table = &self.tables[i.max(1) - 1].2;
        table.zone_of(table.tag(user).unwrap().color).to_owned()
    }
}

/// What the checker found in one table of the database.
#[derive(Debug, Default)]
struct Verdict {
    rows: usize,
    non_owner: usize,
    /// Users written by a second zone while another zone already wrote them at a newer version.
    dual_users: usize,
    examples: Vec<String>,
}

/// The commit time of each row, in µs since the epoch.
const COMMIT_US: &str = "(extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint";

/// Judges every row of `table` against `history`.
fn judge(db: &mut postgres::Client, table: &str, history: &History) -> Verdict {
    let version = if table == "writes" { "version" } else { "0::bigint" };
    let rows = db
        .query(&format!("SELECT user_id, zone, {version}, {COMMIT_US} FROM {table}"), &[])
        .unwrap();
    let mut verdict = Verdict { rows: rows.len(), ..Verdict::default() };
    let mut by_user: HashMap<String, Vec<(i64, i64, String)>> = HashMap::new();
    for row in &rows {
        let (user, zone, version, at): (String, String, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let owner = history.owner_at(&user, at);
        if owner != zone {
            verdict.non_owner += 1;
            if verdict.examples.len() < 5 {
                verdict.examples.push(format!("{user} by {zone} (v{version}) owned by {owner}"));
            }
        }
        by_user.entry(user).or_default().push((at, version, zone));
    }
    // pg_zero_loss's dual-owner rule over the rows: a row by another zone at an older version,
    // committed at or after the user's newest-version row so far.
    for writes in by_user.values_mut().filter(|_| table == "writes") {
        writes.sort();
        let mut newest: Option<&(i64, i64, String)> = None;
        let mut dual = false;
        for write in writes.iter() {
            if let Some((_, version, zone)) = newest {
                dual |= write.2 != *zone && write.1 < *version;
                if write.1 <= *version {
                    continue;
                }
            }
            newest = Some(write);
        }
        verdict.dual_users += usize::from(dual);
    }
    verdict
}

/// How many probes got each answer.
fn answers(probes: &[Probe]) -> BTreeMap<&str, usize> {
    let mut out = BTreeMap::new();
    for probe in probes {
        *out.entry(probe.answer.as_str()).or_default() += 1;
    }
    out
}

fn percentiles(name: &str, values: &[Option<Duration>]) -> String {
    let mut ms: Vec<u128> = values.iter().flatten().map(Duration::as_millis).collect();
    ms.sort_unstable();
    let missing = values.len() - ms.len();
    if ms.is_empty() {
        return format!("{name}: never ({missing} of {} runs)", values.len());
    }
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "{name}: runs={} p50={} ms p99={} ms min={} ms max={} ms (never in {missing})",
        ms.len(),
        at(0.5),
        at(0.99),
        ms[0],
        ms[ms.len() - 1]
    )
}

// --- the suite ------------------------------------------------------------------------------

/// Starts the three Kafka nodes (formatted in parallel) and creates the command topic;
/// returns the nodes and the bootstrap list.
fn start_kafka(net: &Net, dir: &Path) -> (Vec<Proc>, String) {
    let libs = run("bash", &[repo().join("scripts/kafka.sh").to_str().unwrap(), "jars"]);
    let libs = libs.trim();
    let nodes = std::thread::scope(|s| {
        let started: Vec<_> =
            (0..ZONES.len()).map(|i| s.spawn(move || kafka_node(net, dir, i, libs))).collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let bootstrap: Vec<String> =
        (0..ZONES.len()).map(|i| format!("{}:{KAFKA_PORT}", net.addr(i))).collect();
    let bootstrap = bootstrap.join(",");
    create_topic(&bootstrap);
    (nodes, bootstrap)
}

#[test]
fn a_cut_off_zone_never_writes_a_user_the_majority_took_over() {
    let started = Instant::now();
    let net = Net::create(&ZONES);
    net.enter("core");
    let dir = tempfile::tempdir().unwrap();
    let postgres = Postgres::start();
    create_control_tables(&postgres.url);
    let (_kafka, bootstrap) = start_kafka(&net, dir.path());
    let replicas: Vec<(Proc, String)> = std::thread::scope(|s| {
        let started: Vec<_> = (0..ZONES.len())
            .map(|i| {
                let (net, dir, bootstrap) = (&net, dir.path(), &bootstrap);
                s.spawn(move || start_replica(net, dir, i, bootstrap))
            })
            .collect();
        started.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let coordinators: Vec<String> = replicas.iter().map(|(_, url)| url.clone()).collect();
    let coordinators = coordinators.join(",");
    let zones: Vec<Zone> = replicas
        .into_iter()
        .enumerate()
        .map(|(i, replica)| start_zone(&net, dir.path(), i, replica, &coordinators, &postgres.url))
        .collect();
    let _fence = start_fence(&net, &postgres.url, &coordinators);
    eprintln!("partition: three zones up after {} ms", started.elapsed().as_millis());

    let (driver, threads) = Driver::start(zones.iter().map(|z| z.writer.clone()).collect());
    let sampler = Sampler::start(&zones);
    let mut cuts = vec![scenario(&net, &zones, 0, "follower", &postgres.url, &sampler)];
    // The second scenario: cut the zone whose broker leads the command partition.
    let leader = topic_leader(&bootstrap).expect("the command partition has a leader");
    cuts.push(scenario(&net, &zones, leader - 1, "leader", &postgres.url, &sampler));
    driver.stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    sampler.finish();

    // Every replica reaches the same state after the heals.
    let quick = agent(Duration::from_secs(2));
    let same = wait_until(Duration::from_secs(20), || {
        let states: HashSet<_> = zones.iter().map(|z| state(&quick, &z.replica)).collect();
        states.len() == 1 && !states.contains(&None)
    });
    let states: Vec<_> = zones.iter().map(|z| state(&quick, &z.replica)).collect();

    // The checker.
    let history = History::export(&dir.path().join("replica-az-b.toml"));
    let mut db = postgres::Client::connect(&postgres.url, postgres::NoTls).unwrap();
    let writes = judge(&mut db, "writes", &history);
    let fenced = judge(&mut db, "fenced", &history);
    let unfenced = judge(&mut db, "unfenced", &history);
    let acked = driver.acked.lock().unwrap().clone();
    let ids: Vec<i64> =
        db.query("SELECT write_id FROM writes", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let stored: HashSet<i64> = ids.iter().copied().collect();
    let lost_writes = acked.iter().filter(|id| !stored.contains(id)).count();
    let duplicates = ids.len() - stored.len();
    let mut lost_changes = Vec::new();
    for cut in &cuts {
        for probe in cut.probes.iter().filter(|p| p.acked.is_some()) {
            let (_, version) = probe.acked.unwrap();
            if history.reasons.get(&version) != Some(&probe.reason) {
                lost_changes.push(format!("{} acknowledged at v{version}", probe.reason));
            }
        }
        let evacuation = cut.evacuation["version"].as_u64();
        if let Some(v) = evacuation.filter(|v| !history.reasons[v].contains("evacuate")) {
            lost_changes.push(format!("the evacuation acknowledged at v{v}"));
        }
    }
    let dual_watch: Vec<Option<u64>> = zones
        .iter()
        .map(|z| {
            get(&quick, &format!("{}/v1/writes/dual-owners", z.replica))
                .and_then(|(_, body)| body["total"].as_u64())
        })
        .collect();

    // The figures.
    for cut in &cuts {
        let zone = ZONES[cut.zone];
        let acked = cut.probes.iter().filter(|p| p.acked.is_some()).count();
        eprintln!(
            "partition: cut {zone}: majority's first applied change {:?} ms after the cut; \
             evacuation acknowledged after {} ms (v{}); healed replica current {:?} ms after the \
             heal, its edge confirmed after {:?} ms; {acked} of {} probes acknowledged, answers {:?}",
            cut.first_change.map(|d| d.as_millis()),
            cut.evacuation_acked.as_millis(),
            cut.evacuation["version"],
            cut.healed_current.map(|d| d.as_millis()),
            cut.healed_edge.map(|d| d.as_millis()),
            cut.probes.len(),
            answers(&cut.probes)
        );
        let switched = cut.evacuation["version"].as_u64().and_then(|v| history.emptied(zone, v));
        eprintln!(
            "partition: cut {zone}: the evacuation switched {:?} ms after the cut, the heal {} ms \
             after it",
            switched.map(|at| at as i64 - cut.cut_ms as i64),
            cut.healed_ms - cut.cut_ms
        );
        let until = cut.healed_ms + 30_000;
        eprintln!(
            "partition: cut {zone}: changes from the cut on {:?}",
            history.changes_between(cut.cut_ms, until)
        );
        eprintln!(
            "partition: cut {zone}: readiness samples (ready, not ready, no answer): {:?}",
            cut.tally
        );
        eprintln!(
            "partition: cut {zone}: {} wrong readiness samples {:?}",
            cut.wrong.len(),
            cut.wrong.iter().take(8).collect::<Vec<_>>()
        );
        eprintln!(
            "partition: cut {zone}: controls (table, committed, refused by SQLSTATE) {:?}",
            cut.controls
        );
    }
    eprintln!(
        "partition: {}",
        percentiles(
            "majority's first applied change after a cut",
            &cuts.iter().map(|c| c.first_change).collect::<Vec<_>>()
        )
    );
    eprintln!(
        "partition: {}",
        percentiles(
            "healed replica current after a heal",
            &cuts.iter().map(|c| c.healed_current).collect::<Vec<_>>()
        )
    );
    eprintln!(
        "partition: writes: {} acknowledged, refused {:?}, {} unknown; {} rows, {} lost, {} \
         duplicated; {} by a non-owner {:?}; {} users written by two zones",
        acked.len(),
        driver.counts.refused.lock().unwrap(),
        driver.counts.unknown.load(Ordering::Relaxed),
        writes.rows,
        lost_writes,
        duplicates,
        writes.non_owner,
        writes.examples,
        writes.dual_users
    );
    eprintln!(
        "partition: controls: unfenced {} rows, {} by a non-owner {:?}; fenced {} rows, {} by a non-owner {:?}",
        unfenced.rows,
        unfenced.non_owner,
        unfenced.examples,
        fenced.rows,
        fenced.non_owner,
        fenced.examples
    );
    eprintln!(
        "partition: dual-owner watch after the heals {dual_watch:?} (per replica) vs {} users in the database",
        writes.dual_users
    );
    eprintln!(
        "partition: {} acknowledged control-plane changes lost {lost_changes:?}; replicas' states {states:?}",
        lost_changes.len()
    );
    eprintln!("partition: the suite took {} ms", started.elapsed().as_millis());

    assert!(same, "the replicas differ after the heals: {states:?}");
    assert!(lost_changes.is_empty(), "acknowledged changes lost: {lost_changes:?}");
    assert!(acked.len() > 1000, "a real workload: {} acknowledged writes", acked.len());
    assert_eq!((lost_writes, duplicates), (0, 0), "acknowledged writes lost, rows duplicated");
    assert_eq!(writes.non_owner, 0, "rows committed by a non-owner: {:?}", writes.examples);
    assert_eq!(writes.dual_users, 0, "users written by two zones");
    assert!(
        unfenced.non_owner > 0,
        "control: the check-skipping writer committed no row by a non-owner"
    );
    assert_eq!(fenced.non_owner, 0, "the fence let a non-owner commit: {:?}", fenced.examples);
    let wrong: Vec<&String> = cuts.iter().flat_map(|c| &c.wrong).collect();
    assert!(wrong.is_empty(), "readiness was wrong: {wrong:?}");
    for cut in &cuts {
        let zone = ZONES[cut.zone];
        assert!(
            cut.first_change.is_some_and(|d| d < Duration::from_secs(15)),
            "cut {zone}: the majority applied no change within 15 s"
        );
        // A liveness bound, not the proof: a healed replica reconnects to the brokers after
        // librdkafka's reconnect backoff (up to 10 s by default). 5 s was too tight under a full
        // CI run's load (7.4 s once, 0.8 s in the same run's other cut); the distribution is
        // printed above.
        assert!(
            cut.healed_current.is_some_and(|d| d < Duration::from_secs(15)),
            "cut {zone}: the healed replica was not current within 15 s"
        );
    }
    drop(zones);
    drop(postgres);
}
