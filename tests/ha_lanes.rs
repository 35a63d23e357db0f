//! Lane membership across coordinator replicas on one Kafka command log (real broker, real
//! `tidegate serve` binaries, real `LaneConsumer`s): one replica is the lane authority by the
//! `lanes` lease; consumers in two zones register through the replica list; a checker records
//! who reads each partition and fails on any overlap and on any committed offset going back.
//! Faults are real: `kill -9` of the authority (three rounds, timings printed), and a SIGSTOP of
//! the authority resumed after its lease passed, whose answers must not be an authority's.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kafka::{self, payload};
use common::{OPERATOR_TOKEN, Server, config_toml, get_json, wait_until};
use serde_json::{Value, json};
use tidegate::mq::{ConsumerSettings, LaneConsumer, LaneProducer, ProducerSettings};
use tidegate::service::lane_membership::LagSource;

const PARTITIONS: u32 = 8;
const SESSION: Duration = Duration::from_secs(4);
const LEASE: Duration = Duration::from_millis(1500);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Posts healthy outcomes for both zones to every replica every 100 ms, so the trigger's other
/// inputs (the receiving zone's health) would let it fire: only the lane view can hold it.
fn feed_outcomes(urls: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(500)))
            .build()
            .into();
        let body = json!([
            {"zone": "az-a", "color": "green", "ok": 100, "error": 0},
            {"zone": "az-b", "color": "blue", "ok": 100, "error": 0}
        ]);
        while !stop.load(Ordering::Relaxed) {
            for url in &urls {
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// The automatic runs of the trigger plan a replica knows.
fn trigger_runs(url: &str) -> usize {
    get_json(&format!("{url}/v1/plans/az-b-consumers-gone/runs")).1["runs"]
        .as_array()
        .map_or(0, Vec::len)
}

/// Three replicas of one command topic, on fixed ports (so a lease names a reachable URL and a
/// restarted replica comes back where clients expect it).
struct Cluster {
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    servers: Vec<Option<Server>>,
}

impl Cluster {
    fn start(topic: &str) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let mut cluster = Cluster { dir, ports, servers: Vec::new() };
        for n in 0..3 {
            cluster.write_config(topic, n);
            let server = cluster.launch(n);
            cluster.servers.push(Some(server));
        }
        cluster
    }

    fn config_path(&self, n: usize) -> PathBuf {
        self.dir.path().join(format!("r{n}.toml"))
    }

    fn write_config(&self, topic: &str, n: usize) {
        let extra = format!(
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
kafka_bootstrap = "{bootstrap}"
session_timeout = "{session}ms"
heartbeat_interval = "250ms"
lag_interval = "500ms"
lease = "{lease}ms"
member_key = "{key}"
[health]
window = "2s"
[plans]
triggers = true
[plans.az-b-consumers-gone]
rto = "1m"
cooldown = "1h"
steps = [{{type = "evacuate", zone = "az-b", to_percent = 0}}]
trigger = {{lane_consumers_gone = "az-b", lane_consumers_gone_for = "1s"}}
"#,
            bootstrap = kafka::bootstrap(),
            zone = if n.is_multiple_of(2) { "az-a" } else { "az-b" },
            port = self.ports[n],
            session = SESSION.as_millis(),
            lease = LEASE.as_millis(),
            key = "5a".repeat(32),
        );
        std::fs::write(self.config_path(n), config_toml(&extra)).unwrap();
    }

    fn launch(&self, n: usize) -> Server {
        Server::start_at(
            &self.config_path(n),
            &self.dir.path().join(format!("data-{n}")),
            self.ports[n],
        )
    }

    fn url(&self, n: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[n])
    }

    /// The replica that says it acts as lane authority now, if exactly one does.
    fn authority(&self) -> Option<usize> {
        let acting: Vec<usize> = (0..3)
            .filter(|n| self.servers[*n].is_some())
            .filter(|n| {
                let (status, body) = get_json(&format!("{}/v1/cluster", self.url(*n)));
                status == 200 && body["leases"]["lanes"]["this_replica_acts"] == true
            })
            .collect();
        (acting.len() == 1).then(|| acting[0])
    }

    fn wait_authority(&self, timeout: Duration) -> usize {
        let mut found = None;
        assert!(
            wait_until(timeout, || {
                found = self.authority();
                found.is_some()
            }),
            "no single lane authority among the replicas"
        );
        found.unwrap()
    }

    fn group(&self, n: usize, group: &str) -> Value {
        get_json(&format!("{}/v1/lanes/{group}", self.url(n))).1
    }

    /// Every member on the authority `n` holds what it is assigned, and all partitions are read.
    fn settled(&self, n: usize, group: &str, members: usize) -> bool {
        let v = self.group(n, group);
        let Some(list) = v["members"].as_array() else { return false };
        let mut covered = 0;
        for m in list {
            if m["holding"] != m["assignment"] || !m["pending"].as_array().unwrap().is_empty() {
                return false;
            }
            covered += m["assignment"].as_array().unwrap().len();
        }
        list.len() == members && covered == PARTITIONS as usize
    }

    fn pid(&self, n: usize) -> String {
        self.servers[n].as_ref().unwrap().child.id().to_string()
    }
}

/// Who reads what, over time, as the consumers themselves report it (`observe_partitions` is
/// called after a released partition is committed and dropped, and before a granted one is
/// read), and the group's committed offsets as Kafka reports them.
#[derive(Default)]
struct Checker {
    owners: BTreeMap<u32, String>,
    held: BTreeMap<String, BTreeSet<u32>>,
    committed: BTreeMap<u32, i64>,
    violations: Vec<String>,
    /// (when, consumer, partition, acquired?)
    moves: Vec<(Instant, String, u32, bool)>,
}

impl Checker {
    fn observe(&mut self, consumer: &str, now: &BTreeSet<u32>) {
        let before = self.held.get(consumer).cloned().unwrap_or_default();
        for &p in before.difference(now) {
            if self.owners.get(&p).map(String::as_str) == Some(consumer) {
                self.owners.remove(&p);
            }
            self.moves.push((Instant::now(), consumer.to_owned(), p, false));
        }
        for &p in now.difference(&before) {
            if let Some(other) = self.owners.get(&p)
                && other != consumer
            {
                self.violations.push(format!(
                    "partition {p}: {consumer} started reading while {other} still reads it"
                ));
            }
            self.owners.insert(p, consumer.to_owned());
            self.moves.push((Instant::now(), consumer.to_owned(), p, true));
        }
        self.held.insert(consumer.to_owned(), now.clone());
    }

    fn commits(&mut self, offsets: &[tidegate::core::PartitionOffsets]) {
        for o in offsets {
            let Some(c) = o.committed else { continue };
            let before = self.committed.insert(o.partition, c);
            if let Some(before) = before
                && c < before
            {
                self.violations.push(format!(
                    "partition {}: committed offset went back {before} -> {c}",
                    o.partition
                ));
            }
        }
    }
}

/// One consumed message: where, and when.
#[derive(Clone, Debug)]
struct Read {
    partition: u32,
    offset: i64,
    at: Instant,
}

struct Consumers {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<(String, Vec<String>)>>,
    reads: Arc<Mutex<Vec<Read>>>,
    member_ids: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
}

/// Starts consumers `a1`, `a2` (az-a) and `b1`, `b2` (az-b). Each is given the replica list
/// rotated differently, so some begin at a replica that is not the authority.
fn start_consumers(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    topic: &str,
    group: &str,
    checker: &Arc<Mutex<Checker>>,
) -> Consumers {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(Mutex::new(Vec::new()));
    let member_ids: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> = Arc::default();
    let urls: Vec<String> = (0..3).map(|n| cluster.url(n)).collect();
    let mut handles = Vec::new();
    for (i, (zone, name)) in
        [("az-a", "a1"), ("az-a", "a2"), ("az-b", "b1"), ("az-b", "b2")].into_iter().enumerate()
    {
        let mut list = urls.clone();
        list.rotate_left(i % 3);
        let mut settings =
            ConsumerSettings::new(&list.join(","), &kafka::bootstrap(), topic, group, zone);
        settings.member_name = Some(name.to_owned());
        settings.token = Some(OPERATOR_TOKEN.to_owned());
        settings.commit_interval = Duration::from_millis(100);
        let (stop, reads, ids, checker) =
            (Arc::clone(&stop), Arc::clone(&reads), Arc::clone(&member_ids), Arc::clone(checker));
        let name = name.to_owned();
        handles.push(rt.spawn(async move {
            let mut errors = Vec::new();
            let mut consumer = loop {
                match LaneConsumer::start(settings.clone()).await {
                    Ok(c) => break c,
                    Err(e) => {
                        errors.push(format!("start: {e}"));
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            };
            let observed = (name.clone(), Arc::clone(&checker));
            consumer.observe_partitions(move |now| {
                observed.1.lock().unwrap().observe(&observed.0, now)
            });
            loop {
                ids.lock().unwrap().entry(name.clone()).or_default().insert(consumer.member_id());
                if stop.load(Ordering::Relaxed) {
                    if let Err(e) = consumer.close().await {
                        errors.push(format!("close: {e}"));
                    }
                    return (name, errors);
                }
                match tokio::time::timeout(Duration::from_millis(50), consumer.next()).await {
                    Err(_) => {}
                    Ok(Ok(m)) => reads.lock().unwrap().push(Read {
                        partition: m.partition,
                        offset: m.offset,
                        at: Instant::now(),
                    }),
                    Ok(Err(e)) => {
                        errors.push(format!("next: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }));
    }
    Consumers { stop, handles, reads, member_ids }
}

/// Reads the group's committed offsets from Kafka every 100 ms into the checker.
fn watch_commits(
    topic: &str,
    group: &str,
    checker: &Arc<Mutex<Checker>>,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (topic, group, checker, stop) =
        (topic.to_owned(), group.to_owned(), Arc::clone(checker), Arc::clone(stop));
    std::thread::spawn(move || {
        let lag = tidegate::mq::KafkaLag::new(&kafka::bootstrap());
        while !stop.load(Ordering::Relaxed) {
            if let Ok(offsets) = lag.read(&group, &topic, PARTITIONS) {
                checker.lock().unwrap().commits(&offsets);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// Produces a message every 10 ms to users spread over both halves, recording each one's
/// partition, offset and when it was acknowledged.
fn start_producing(
    rt: &tokio::runtime::Runtime,
    cluster: &Cluster,
    topic: &str,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(u32, i64, Instant)>> {
    let (_, body) = get_json(&format!("{}/v1/routing", cluster.url(0)));
    let table = tidegate::client::decode_table(&body).unwrap();
    let producer = LaneProducer::new(
        &ProducerSettings::new(&kafka::bootstrap(), topic),
        Arc::new(arc_swap::ArcSwap::from_pointee(table)),
    )
    .unwrap();
    let stop = Arc::clone(stop);
    rt.spawn(async move {
        let mut produced = Vec::new();
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let user = format!("user-{:03}", seq % 200);
            let d = producer.send(&user, &payload(&user, seq)).await.unwrap();
            produced.push((d.route.partition, d.offset, Instant::now()));
            seq += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        produced
    })
}

fn kill_signal(signal: &str, pid: &str) {
    let status = std::process::Command::new("kill").args([signal, pid]).status().unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The longest pause between two consecutive messages the group read within `[from, to]`.
fn longest_gap(reads: &[Read], from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> =
        reads.iter().map(|r| r.at).filter(|t| *t >= from && *t <= to).collect();
    times.sort();
    times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
}

struct Finished {
    reads: Vec<Read>,
    produced: Vec<(u32, i64, Instant)>,
    member_ids: BTreeMap<String, BTreeSet<String>>,
}

/// Stops producing, waits until everything produced was read, stops the consumers and the
/// commit watcher, and fails on any error a consumer reported that is not a failover.
fn finish(
    rt: &tokio::runtime::Runtime,
    consumers: Consumers,
    producing: tokio::task::JoinHandle<Vec<(u32, i64, Instant)>>,
    produce_stop: &Arc<AtomicBool>,
    watcher: std::thread::JoinHandle<()>,
    watch_stop: &Arc<AtomicBool>,
) -> Finished {
    produce_stop.store(true, Ordering::Relaxed);
    let produced = rt.block_on(producing).unwrap();
    let all: BTreeSet<(u32, i64)> = produced.iter().map(|(p, o, _)| (*p, *o)).collect();
    let consumed = || -> BTreeSet<(u32, i64)> {
        consumers.reads.lock().unwrap().iter().map(|r| (r.partition, r.offset)).collect()
    };
    assert!(
        wait_until(Duration::from_secs(30), || consumed().is_superset(&all)),
        "{} of {} produced messages were never read",
        all.difference(&consumed()).count(),
        all.len()
    );
    consumers.stop.store(true, Ordering::Relaxed);
    for handle in consumers.handles {
        let (name, errors) = rt.block_on(handle).unwrap();
        // Failing over shows up as a failed membership call at most; nothing else may fail.
        for e in &errors {
            assert!(e.contains("not_lane_authority") || e.contains("cannot reach"), "{name}: {e}");
        }
    }
    watch_stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let reads = consumers.reads.lock().unwrap().clone();
    let member_ids = consumers.member_ids.lock().unwrap().clone();
    Finished { reads, produced, member_ids }
}

#[test]
fn consumers_keep_reading_when_the_lane_authority_is_killed_and_never_share_a_partition() {
    let rt = kafka::runtime();
    let (command_topic, topic, group) =
        (kafka::unique("ha-lanes-log"), kafka::unique("ha-lanes"), kafka::unique("ha-lanes-g"));
    kafka::create_topic(&rt, &topic, PARTITIONS);
    let mut cluster = Cluster::start(&command_topic);
    cluster.wait_authority(Duration::from_secs(20));
    let checker = Arc::new(Mutex::new(Checker::default()));
    let consumers = start_consumers(&rt, &cluster, &topic, &group, &checker);
    let (produce_stop, watch_stop) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let watcher = watch_commits(&topic, &group, &checker, &watch_stop);
    let first = cluster.wait_authority(Duration::from_secs(10));
    assert!(
        wait_until(Duration::from_secs(30), || cluster.settled(first, &group, 4)),
        "the group did not settle on the authority r{first}: {}",
        cluster.group(first, &group)
    );
    // Only the authority knows the group; the others name it.
    for n in (0..3).filter(|n| *n != first) {
        let (status, body) = get_json(&format!("{}/v1/lanes/{group}", cluster.url(n)));
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"], "not_lane_authority", "{body}");
        assert_eq!(body["authority"]["url"], cluster.url(first), "{body}");
        // The list (the UI's lanes page) is empty there and names the authority to link.
        let (status, list) = get_json(&format!("{}/v1/lanes", cluster.url(n)));
        assert_eq!(status, 200, "{list}");
        assert_eq!(list["groups"], json!([]), "{list}");
        assert_eq!(list["authority"]["url"], cluster.url(first), "{list}");
    }
    let (_, list) = get_json(&format!("{}/v1/lanes", cluster.url(first)));
    assert_eq!(list["authority"], Value::Null, "the authority lists: {list}");
    assert_eq!(list["groups"].as_array().map(Vec::len), Some(1), "{list}");
    let producing = start_producing(&rt, &cluster, &topic, &produce_stop);
    std::thread::sleep(Duration::from_secs(2));
    let mut rounds = Vec::new();
    for round in 0..3 {
        let authority = cluster.wait_authority(Duration::from_secs(10));
        assert!(cluster.settled(authority, &group, 4), "{}", cluster.group(authority, &group));
        let killed_at = Instant::now();
        cluster.servers[authority].take().unwrap().kill9();
        let successor = cluster.wait_authority(Duration::from_secs(15));
        let took_over = killed_at.elapsed();
        assert_ne!(successor, authority);
        // Every consumer is adopted by the successor, with what it reads: no re-registration.
        assert!(
            wait_until(SESSION * 3, || cluster.settled(successor, &group, 4)),
            "round {round}: the consumers did not move to r{successor}: {}",
            cluster.group(successor, &group)
        );
        let moved = killed_at.elapsed();
        std::thread::sleep(Duration::from_secs(1));
        let reads = consumers.reads.lock().unwrap().clone();
        let gap = longest_gap(&reads, killed_at, Instant::now());
        rounds.push((took_over, moved, gap));
        // The killed replica comes back (as a follower) for the next round.
        cluster.servers[authority] = Some(cluster.launch(authority));
        std::thread::sleep(Duration::from_secs(1));
    }
    let Finished { reads, produced, member_ids } =
        finish(&rt, consumers, producing, &produce_stop, watcher, &watch_stop);
    let checker = checker.lock().unwrap();
    assert!(checker.violations.is_empty(), "{:#?}", checker.violations);
    assert_eq!(checker.committed.len(), PARTITIONS as usize, "every partition was committed");
    for (name, ids) in &member_ids {
        assert_eq!(ids.len(), 1, "{name} had to register again: {ids:?}");
    }
    // Messages produced after a kill were read within a session of being acknowledged.
    let read_at: BTreeMap<(u32, i64), Instant> =
        reads.iter().map(|r| ((r.partition, r.offset), r.at)).collect();
    let mut latencies: Vec<f64> = produced
        .iter()
        .filter_map(|(p, o, at)| {
            read_at.get(&(*p, *o)).map(|r| r.saturating_duration_since(*at).as_secs_f64())
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let worst = *latencies.last().unwrap();
    assert!(worst < (SESSION + LEASE).as_secs_f64(), "a message waited {worst:.3} s");
    let secs = |f: fn(&(Duration, Duration, Duration)) -> Duration| -> Vec<f64> {
        let mut v: Vec<f64> = rounds.iter().map(|r| f(r).as_secs_f64()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (took, moved, gaps) = (secs(|r| r.0), secs(|r| r.1), secs(|r| r.2));
    println!(
        "lane authority kill -9, {} rounds (lease {:?}, session {:?}): successor acting after {:.2}-{:.2} s (median {:.2}); \
         all 4 consumers adopted after {:.2}-{:.2} s (median {:.2}); longest pause in the group's reading {:.3}-{:.3} s (median {:.3}); \
         {} messages, produce-to-read p50 {:.3} s, p99 {:.3} s, max {:.3} s; no partition shared, no commit went back, no re-registration",
        rounds.len(),
        LEASE,
        SESSION,
        took[0],
        took[took.len() - 1],
        percentile(&took, 0.5),
        moved[0],
        moved[moved.len() - 1],
        percentile(&moved, 0.5),
        gaps[0],
        gaps[gaps.len() - 1],
        percentile(&gaps, 0.5),
        produced.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        worst,
    );
}

#[test]
fn a_paused_authority_that_wakes_after_its_lease_answers_as_a_follower() {
    let rt = kafka::runtime();
    let (command_topic, topic, group) =
        (kafka::unique("ha-pause-log"), kafka::unique("ha-pause"), kafka::unique("ha-pause-g"));
    kafka::create_topic(&rt, &topic, PARTITIONS);
    let cluster = Cluster::start(&command_topic);
    let feeding = Arc::new(AtomicBool::new(false));
    let feeder = feed_outcomes((0..3).map(|n| cluster.url(n)).collect(), Arc::clone(&feeding));
    let checker = Arc::new(Mutex::new(Checker::default()));
    let consumers = start_consumers(&rt, &cluster, &topic, &group, &checker);
    let (produce_stop, watch_stop) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let watcher = watch_commits(&topic, &group, &checker, &watch_stop);
    let paused = cluster.wait_authority(Duration::from_secs(20));
    assert!(
        wait_until(Duration::from_secs(30), || cluster.settled(paused, &group, 4)),
        "{}",
        cluster.group(paused, &group)
    );
    let producing = start_producing(&rt, &cluster, &topic, &produce_stop);
    std::thread::sleep(Duration::from_secs(1));
    kill_signal("-STOP", &cluster.pid(paused));
    let stopped_at = Instant::now();
    // While it is stopped, a registration and a lane read reach it and wait in its socket.
    let asked = |path: String, body: Option<Value>| {
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(30)))
                .build()
                .into();
            let mut response = match body {
                Some(body) => agent
                    .post(&path)
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(body)
                    .unwrap(),
                None => agent.get(&path).call().unwrap(),
            };
            let status = response.status().as_u16();
            (status, response.body_mut().read_json::<Value>().unwrap())
        })
    };
    let base = cluster.url(paused);
    let register = asked(
        format!("{base}/v1/lanes/{group}/members"),
        Some(json!({"zone": "az-a", "topic": topic, "partitions": PARTITIONS})),
    );
    let view = asked(format!("{base}/v1/lanes/{group}"), None);
    // Another replica takes over once the lease has passed, and the consumers move to it.
    let mut successor = None;
    assert!(
        wait_until(Duration::from_secs(15), || {
            successor = (0..3).filter(|n| *n != paused).find(|n| {
                get_json(&format!("{}/v1/cluster", cluster.url(*n))).1["leases"]["lanes"]
                    ["this_replica_acts"]
                    == true
            });
            successor.is_some()
        }),
        "no replica took over from the paused one"
    );
    let successor = successor.unwrap();
    let took_over = stopped_at.elapsed();
    assert!(
        wait_until(SESSION * 3, || cluster.settled(successor, &group, 4)),
        "{}",
        cluster.group(successor, &group)
    );
    std::thread::sleep(LEASE);
    kill_signal("-CONT", &cluster.pid(paused));
    // The requests it held through the pause are answered as a follower's, naming the successor.
    for (what, answer) in [("register", register), ("view", view)] {
        let (status, body) = answer.join().unwrap();
        assert_eq!(status, 503, "{what} on the woken replica: {body}");
        assert_eq!(body["error"], "not_lane_authority", "{body}");
    }
    let (status, body) = get_json(&format!("{}/v1/cluster", cluster.url(paused)));
    assert_eq!(status, 200);
    assert_eq!(body["leases"]["lanes"]["this_replica_acts"], false, "{body}");
    assert!(wait_until(Duration::from_secs(5), || {
        get_json(&format!("{}/v1/lanes/{group}", cluster.url(paused))).1["authority"]["url"]
            == cluster.url(successor)
    }));
    // It stays a follower, and the group stays settled on the successor.
    std::thread::sleep(LEASE * 2);
    assert_eq!(cluster.authority(), Some(successor));
    assert!(cluster.settled(successor, &group, 4), "{}", cluster.group(successor, &group));
    // The lease changed hands twice while every consumer was alive: no replica may have read
    // "every az-b consumer gone" from a registry it no longer (or not yet) answers for. The
    // woken replica saw the consumers as authority, then lost the lease; it used to see them all
    // gone and start an evacuation signed `auto` after lane_consumers_gone_for.
    std::thread::sleep(Duration::from_secs(2));
    for n in 0..3 {
        assert_eq!(
            trigger_runs(&cluster.url(n)),
            0,
            "r{n} started an automatic run with the consumers alive"
        );
    }
    let Finished { member_ids, .. } =
        finish(&rt, consumers, producing, &produce_stop, watcher, &watch_stop);
    {
        let checker = checker.lock().unwrap();
        assert!(checker.violations.is_empty(), "{:#?}", checker.violations);
    }
    for (name, ids) in &member_ids {
        assert_eq!(ids.len(), 1, "{name} had to register again: {ids:?}");
    }
    // The control: once the consumers really leave, the same trigger fires (it was armed, and
    // only the lane view held it).
    let fired = wait_until(Duration::from_secs(20), || trigger_runs(&cluster.url(successor)) == 1);
    assert!(fired, "the trigger never fired after the consumers left");
    feeding.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    println!("paused authority: r{successor} acting {took_over:?} after SIGSTOP (lease {LEASE:?})");
}

#[test]
fn the_checker_catches_two_readers_and_a_commit_going_back() {
    let mut c = Checker::default();
    c.observe("a1", &BTreeSet::from([0, 1]));
    c.observe("b1", &BTreeSet::from([2]));
    assert!(c.violations.is_empty());
    // A clean handover: a1 releases 1, then b1 takes it.
    c.observe("a1", &BTreeSet::from([0]));
    c.observe("b1", &BTreeSet::from([1, 2]));
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // b1 starts on 0 while a1 still reads it.
    c.observe("b1", &BTreeSet::from([0, 1, 2]));
    assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
    let at = |partition, committed| tidegate::core::PartitionOffsets {
        partition,
        low: 0,
        high: 100,
        committed: Some(committed),
    };
    c.commits(&[at(0, 10), at(1, 5)]);
    c.commits(&[at(0, 12), at(1, 5)]);
    assert_eq!(c.violations.len(), 1);
    c.commits(&[at(0, 11)]);
    assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
}
