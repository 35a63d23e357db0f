//! Shared machinery of the replica fault tests: replicas on fixed ports that can be killed and
//! restarted, writers that record every answer, a sampler of `(version, state hash)` pairs, the
//! decided histories read back from every replica, and distributions of measured times.
#![allow(dead_code)]

pub mod history;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use crate::common::{OPERATOR_TOKEN, Server, config_toml, wait_until};
use history::{Answer, Change, Decided, Op, Sample, id_in_reason, reason_for};

/// An HTTP client with a short timeout: a replica killed mid-request must not stall a writer.
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// `GET url` as JSON, or `None` on any transport or decoding failure.
pub fn try_get(agent: &ureq::Agent, url: &str) -> Option<(u16, Value)> {
    let mut response = agent.get(url).call().ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_json().ok()?))
}

/// Replicas of one command log, each on a port of its own that survives a restart.
pub struct Replicas {
    pub dir: tempfile::TempDir,
    pub urls: Vec<String>,
    configs: Vec<PathBuf>,
    servers: Vec<Option<Server>>,
    allow_under_replicated: bool,
    /// More keys of each replica's `[store.kafka]` (e.g. `presence_key = "..."`).
    store_keys: String,
}

impl Replicas {
    /// Starts `count` replicas on `topic` at `bootstrap`, with `extra` TOML appended to each
    /// configuration (e.g. `[drain]` timings).
    pub fn start(bootstrap: &str, topic: &str, count: usize, extra: &str) -> Replicas {
        // The single test broker holds one copy of each change: allowed for tests only.
        Replicas::start_with(bootstrap, topic, count, extra, true, "")
    }

    /// [`Replicas::start`] with `store_keys` added to each replica's `[store.kafka]`.
    pub fn start_with_store_keys(
        bootstrap: &str,
        topic: &str,
        count: usize,
        store_keys: &str,
        extra: &str,
    ) -> Replicas {
        Replicas::start_with(bootstrap, topic, count, extra, true, store_keys)
    }

    /// [`Replicas::start`] on a replicated cluster (`scripts/kafka.sh start-cluster`): the topic
    /// must keep acknowledged changes through a broker's loss, nothing is allowed.
    pub fn start_on_cluster(bootstrap: &str, topic: &str, count: usize, extra: &str) -> Replicas {
        Replicas::start_with(bootstrap, topic, count, extra, false, "")
    }

    fn start_with(
        bootstrap: &str,
        topic: &str,
        count: usize,
        extra: &str,
        allow_under_replicated: bool,
        store_keys: &str,
    ) -> Replicas {
        let dir = tempfile::tempdir().unwrap();
        let mut replicas = Replicas {
            dir,
            urls: Vec::new(),
            configs: Vec::new(),
            servers: Vec::new(),
            allow_under_replicated,
            store_keys: store_keys.to_owned(),
        };
        for n in 1..=count {
            let file = replicas.write_config(bootstrap, topic, n, extra);
            let server = Server::start(&file, &replicas.data_dir(n - 1));
            replicas.urls.push(server.url.clone());
            replicas.configs.push(file);
            replicas.servers.push(Some(server));
        }
        replicas
    }

    fn write_config(&self, bootstrap: &str, topic: &str, n: usize, extra: &str) -> PathBuf {
        let toml = format!(
            "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{bootstrap}\"\ntopic = \"{topic}\"\nallow_under_replicated = {}\n{}\n[node]\nid = \"r{n}\"\nzone = \"zone-{n}\"\n{extra}\n",
            self.allow_under_replicated, self.store_keys
        );
        let file = self.dir.path().join(format!("r{n}.toml"));
        std::fs::write(&file, config_toml(&toml)).unwrap();
        file
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("data-{}", i + 1))
    }

    pub fn len(&self) -> usize {
        self.urls.len()
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.servers[i].is_some()
    }

    pub fn pid(&self, i: usize) -> u32 {
        self.servers[i].as_ref().expect("replica is up").child.id()
    }

    /// `kill -9` replica `i`.
    pub fn kill9(&mut self, i: usize) {
        if let Some(server) = self.servers[i].take() {
            server.kill9();
        }
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to replica `i`.
    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.pid(i).to_string();
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    /// Starts replica `i` again on its old port (it replays the log from the start).
    pub fn restart(&mut self, i: usize) {
        assert!(self.servers[i].is_none(), "replica {i} is still running");
        let port: u16 = self.urls[i].rsplit(':').next().unwrap().parse().unwrap();
        let server = Server::start_at(&self.configs[i], &self.data_dir(i), port);
        self.servers[i] = Some(server);
    }

    /// A fresh replica with an empty data directory that replays the whole topic.
    pub fn start_late(&self, bootstrap: &str, topic: &str) -> Server {
        let n = self.len() + 1;
        let file = self.write_config(bootstrap, topic, n, "");
        Server::start(&file, &self.data_dir(n - 1))
    }

    pub fn stderr(&self, i: usize) -> String {
        self.servers[i].as_ref().map(Server::stderr).unwrap_or_default()
    }
}

/// One replica's `(state_version, state_hash)` from `GET /v1/cluster`.
pub fn sample(agent: &ureq::Agent, url: &str) -> Option<Sample> {
    let (status, body) = try_get(agent, &format!("{url}/v1/cluster"))?;
    if status != 200 {
        return None;
    }
    Some(Sample {
        replica: body["self"].as_str()?.to_owned(),
        version: body["log"]["state_version"].as_u64()?,
        hash: body["log"]["state_hash"].as_str()?.to_owned(),
    })
}

/// Samples every replica's state hash every `every` until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    pub fn start(urls: Vec<String>, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let agent = agent(Duration::from_millis(500));
            let mut samples = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                samples.extend(urls.iter().filter_map(|url| sample(&agent, url)));
                std::thread::sleep(every);
            }
            samples
        });
        Sampler { stop, handle }
    }

    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// When a writer's change was sent and answered, and whether it met a dead replica on the way.
#[derive(Clone, Debug)]
pub struct Timing {
    pub started: Instant,
    pub ended: Instant,
    pub hit_failure: bool,
    pub acked: bool,
}

/// A writer's record: every change with its final answer, and the timings.
pub type WriterLog = Vec<(Op, Timing)>;

/// Writers that send changes through random replicas until stopped.
pub struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    handles: Vec<std::thread::JoinHandle<WriterLog>>,
}

impl Writers {
    /// `count` writers; `timeout` bounds each request (an answer later than that is unknown,
    /// and the writer retries with the same key on another replica).
    pub fn start(count: usize, urls: Vec<String>, timeout: Duration) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let urls = Arc::new(urls);
        let handles = (0..count)
            .map(|w| {
                let (stop, acked, urls) =
                    (Arc::clone(&stop), Arc::clone(&acked), Arc::clone(&urls));
                std::thread::spawn(move || run_writer(w, &urls, timeout, &stop, &acked))
            })
            .collect();
        Writers { stop, acked, handles }
    }

    /// How many changes have been acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(Ordering::Relaxed)
    }

    pub fn finish(self) -> WriterLog {
        self.stop.store(true, Ordering::Relaxed);
        self.handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    }
}

fn run_writer(
    writer: usize,
    urls: &[String],
    timeout: Duration,
    stop: &AtomicBool,
    acked: &AtomicUsize,
) -> WriterLog {
    let agent = agent(timeout);
    let mut rng = rand::rng();
    let mut log = Vec::new();
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        if let Some(entry) = write_once(&agent, urls, &mut rng, writer, seq) {
            if entry.1.acked {
                acked.fetch_add(1, Ordering::Relaxed);
            }
            log.push(entry);
            seq += 1;
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(10..40)));
    }
    log
}

/// Reads the version from a random replica, then sends one change with a fresh command id,
/// retrying an unknown outcome with the same id on other replicas. `None` when no replica
/// answered the read (nothing was sent).
fn write_once(
    agent: &ureq::Agent,
    urls: &[String],
    rng: &mut impl Rng,
    writer: usize,
    seq: u64,
) -> Option<(Op, Timing)> {
    let mut replica = rng.random_range(0..urls.len());
    let routing = match try_get(agent, &format!("{}/v1/routing", urls[replica])) {
        Some((200, routing)) => routing,
        _ => return None,
    };
    let expected_version = routing["version"].as_u64()?;
    let units = routing["units"].as_u64()?;
    let change = if rng.random_bool(0.7) {
        Change::Dial { blue_units: rng.random_range(0..=units) }
    } else {
        let color = if rng.random_bool(0.5) { "blue" } else { "green" };
        Change::Pin { user: format!("u{}", rng.random_range(0..8)), color: color.into() }
    };
    let id = format!("w{writer}-{seq}-{:08x}", rng.random::<u32>());
    let started = Instant::now();
    let mut hit_failure = false;
    let mut answer = Answer::Unknown;
    for attempt in 0..8 {
        if attempt > 0 {
            hit_failure = true;
            replica = (replica + 1 + rng.random_range(0..urls.len() - 1)) % urls.len();
            std::thread::sleep(Duration::from_millis(50));
        }
        match send(agent, &urls[replica], &id, expected_version, &change) {
            Sent::Decided(a) => {
                answer = a;
                break;
            }
            Sent::Unknown => continue,
        }
    }
    let acked = matches!(answer, Answer::Acked { .. });
    let op = Op { writer, seq, id, expected_version, change, answer };
    Some((op, Timing { started, ended: Instant::now(), hit_failure, acked }))
}

enum Sent {
    Decided(Answer),
    Unknown,
}

fn send(agent: &ureq::Agent, url: &str, id: &str, expected: u64, change: &Change) -> Sent {
    let reason = reason_for(id);
    let (request, body) = match change {
        Change::Dial { blue_units } => (
            agent.put(&format!("{url}/v1/dial")),
            json!({"blue_units": blue_units, "expected_version": expected, "reason": reason}),
        ),
        Change::Pin { user, color } => (
            agent.put(&format!("{url}/v1/pins/{user}")),
            json!({"color": color, "expected_version": expected, "reason": reason}),
        ),
    };
    let response = request
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .header("Idempotency-Key", id)
        .send_json(body);
    let Ok(mut response) = response else { return Sent::Unknown };
    let status = response.status().as_u16();
    let Ok(body) = response.body_mut().read_json::<Value>() else { return Sent::Unknown };
    match status {
        200 => Sent::Decided(Answer::Acked {
            version: body["version"].as_u64().unwrap_or(0),
            changed: body["changed"] == true,
            value: change.value_in(&body),
        }),
        // outcome_unknown, not_yet_applied, store_unavailable: not decided, retry with the id.
        503 | 504 => Sent::Unknown,
        _ => Sent::Decided(Answer::Refused {
            code: body["error"].as_str().unwrap_or("?").to_owned(),
        }),
    }
}

/// Waits until every running replica has applied the same version, and returns it.
pub fn converge(replicas: &Replicas, timeout: Duration) -> u64 {
    let agent = agent(Duration::from_secs(2));
    let mut last = Vec::new();
    let ok = wait_until(timeout, || {
        last = (0..replicas.len())
            .filter(|&i| replicas.is_up(i))
            .map(|i| sample(&agent, &replicas.urls[i]).map(|s| s.version))
            .collect();
        last.iter().all(|v| v.is_some() && *v == last[0])
    });
    assert!(ok, "replicas did not converge within {timeout:?}: {last:?}");
    last[0].unwrap()
}

/// A replica's decided history from `GET /v1/audit` (genesis left out).
pub fn decided_history(url: &str) -> Vec<Decided> {
    let max = tidegate::service::coordinator::AUDIT_IN_MEMORY;
    let (status, body) =
        try_get(&agent(Duration::from_secs(10)), &format!("{url}/v1/audit?limit={max}"))
            .unwrap_or_else(|| panic!("{url} did not answer /v1/audit"));
    assert_eq!(status, 200, "{body}");
    let mut history: Vec<Decided> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] != "genesis")
        .map(|e| Decided {
            version: e["version"].as_u64().unwrap(),
            id: id_in_reason(e["reason"].as_str().unwrap_or_default()),
            to: e["to"].as_str().unwrap_or_default().to_owned(),
        })
        .collect();
    history.sort_by_key(|d| d.version);
    assert!(
        history.len() + 1 < max,
        "the run made {} versions: more than the audit keeps in memory ({max}); shorten it",
        history.len()
    );
    history
}

/// `p50 / p99 / min-max` of durations, in milliseconds.
pub fn distribution(name: &str, values: &[Duration]) -> String {
    if values.is_empty() {
        return format!("{name}: no samples");
    }
    let mut ms: Vec<f64> = values.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "{name}: n={} p50={:.0} ms p99={:.0} ms min={:.0} ms max={:.0} ms",
        ms.len(),
        at(0.5),
        at(0.99),
        ms[0],
        ms[ms.len() - 1]
    )
}

/// For each kill instant, the time until the first acknowledgement of a change sent after it.
pub fn resume_times(kills: &[Instant], log: &WriterLog) -> Vec<Duration> {
    kills
        .iter()
        .filter_map(|k| {
            log.iter().filter(|(_, t)| t.acked && t.started >= *k).map(|(_, t)| t.ended - *k).min()
        })
        .collect()
}

/// The longest time without any acknowledgement between `from` and `until` (counting from the
/// last acknowledgement before `from`): how long writes stopped around a fault begun at `from`.
pub fn longest_ack_gap(from: Instant, until: Option<Instant>, log: &WriterLog) -> Duration {
    let mut acks: Vec<Instant> =
        log.iter().filter(|(_, t)| t.acked).map(|(_, t)| t.ended).collect();
    acks.sort();
    let first = acks.iter().rposition(|at| *at < from).unwrap_or(0);
    let last =
        until.map_or(acks.len(), |u| acks.partition_point(|at| *at <= u) + 1).min(acks.len());
    acks[first..last.max(first)].windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
}

/// How long changes that met a dead replica took until their (acknowledged) answer.
pub fn stalled_times(log: &WriterLog) -> Vec<Duration> {
    log.iter().filter(|(_, t)| t.hit_failure && t.acked).map(|(_, t)| t.ended - t.started).collect()
}

/// `scripts/kafka.sh`.
pub fn kafka_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh")
}

/// Posts healthy outcomes for both zones to every replica every 50 ms until `stop` (each replica
/// judges health from what it was told; a dead replica's posts just fail).
pub fn feed_outcomes(urls: Vec<String>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent = agent(Duration::from_millis(300));
        let body = json!([
            {"zone": "az-b", "color": "blue", "ok": 100, "error": 0},
            {"zone": "az-a", "color": "green", "ok": 100, "error": 0}
        ]);
        while !stop.load(Ordering::Relaxed) {
            for url in &urls {
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(&body);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// A replica's audit trail, oldest first.
pub fn audit_entries(url: &str) -> Vec<Value> {
    let (_, audit) = crate::common::get_json(&format!("{url}/v1/audit?limit=1000"));
    let mut entries = audit["entries"].as_array().unwrap().clone();
    entries.sort_by_key(|e| e["version"].as_u64());
    entries
}

/// The drain steps a replica applied, oldest first: (blue units moved to, at_ms).
pub fn drain_steps(url: &str) -> Vec<(u64, u64)> {
    audit_entries(url)
        .iter()
        .filter(|e| e["action"] == "drain_step")
        .map(|e| {
            let to = e["to"].as_str().unwrap();
            let at = to.find("% (").unwrap() + 3;
            (to[at..].split('/').next().unwrap().parse().unwrap(), e["at_ms"].as_u64().unwrap())
        })
        .collect()
}

/// Wall-clock milliseconds, as the audit's `at_ms`.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}
