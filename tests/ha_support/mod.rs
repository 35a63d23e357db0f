//! Shared machinery of the replica fault tests: replicas on fixed ports that can be killed and
//! restarted, writers that record every answer, a sampler of `(version, state hash)` pairs, the
//! decided histories read back from every replica, and distributions of measured times.
#![allow(dead_code)]

pub mod cluster;
pub mod history;

#[allow(unused_imports)]
pub use cluster::Cluster;

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
        Replicas::start_full(None, bootstrap, topic, count, extra, true, "")
    }

    /// [`Replicas::start`] with `store_keys` added to each replica's `[store.kafka]`.
    pub fn start_with_store_keys(
        bootstrap: &str,
        topic: &str,
        count: usize,
        store_keys: &str,
        extra: &str,
    ) -> Replicas {
        Replicas::start_full(None, bootstrap, topic, count, extra, true, store_keys)
    }

    /// [`Replicas::start`] on a replicated cluster (`scripts/kafka.sh start-cluster`): the topic
    /// must keep acknowledged changes through a broker's loss, nothing is allowed.
    pub fn start_on_cluster(bootstrap: &str, topic: &str, count: usize, extra: &str) -> Replicas {
        Replicas::start_full(None, bootstrap, topic, count, extra, false, "")
    }

    /// [`Replicas::start`] running `bin`, another release's `tidegate` (see
    /// [`Replicas::upgrade`]).
    pub fn start_release(
        bin: &Path,
        bootstrap: &str,
        topic: &str,
        count: usize,
        extra: &str,
    ) -> Replicas {
        Replicas::start_full(Some(bin), bootstrap, topic, count, extra, true, "")
    }

    fn start_full(
        bin: Option<&Path>,
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
            let server = match bin {
                Some(bin) => {
                    let old = replicas.release_config(&file);
                    Server::start_bin(bin, &old, &replicas.data_dir(n - 1), 0, &[])
                }
                None => Server::start(&file, &replicas.data_dir(n - 1)),
            };
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

    /// `file` for the previous release, which knows no `[freeze]` table (its moves are always at
    /// once): without the one [`config_toml`] adds.
    fn release_config(&self, file: &Path) -> PathBuf {
        let toml = std::fs::read_to_string(file).unwrap().replace(crate::common::AT_ONCE, "");
        let old = file.with_extension("release.toml");
        std::fs::write(&old, toml).unwrap();
        old
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

    /// One step of a rolling upgrade: stops replica `i` cleanly (SIGTERM, as a service manager
    /// does) and starts `bin` (`None`: this build's binary) in its place, on its port, with its
    /// configuration and data directory.
    pub fn upgrade(&mut self, i: usize, bin: Option<&Path>) {
        if let Some(server) = self.servers[i].take() {
            server.terminate();
        }
        let port: u16 = self.urls[i].rsplit(':').next().unwrap().parse().unwrap();
        let server = match bin {
            Some(bin) => {
                let old = self.release_config(&self.configs[i]);
                Server::start_bin(bin, &old, &self.data_dir(i), port, &[])
            }
            None => Server::start_at(&self.configs[i], &self.data_dir(i), port),
        };
        self.servers[i] = Some(server);
    }

    /// [`Replicas::upgrade`] to this build with `config` instead of the replica's own (e.g. the
    /// previous release's file kept as it is, so this build's embedded defaults apply).
    pub fn upgrade_with(&mut self, i: usize, config: &Path) {
        if let Some(server) = self.servers[i].take() {
            server.terminate();
        }
        let port: u16 = self.urls[i].rsplit(':').next().unwrap().parse().unwrap();
        self.servers[i] = Some(Server::start_at(config, &self.data_dir(i), port));
    }

    /// The configuration file the previous release of replica `i` runs with.
    pub fn release_config_of(&self, i: usize) -> PathBuf {
        self.release_config(&self.configs[i])
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
    /// With [`WriterOptions::reread`]: the answer rebuilt from a `GET /v1/routing` of the same
    /// replica right after the 200 (how answers were built before they carried their own state).
    pub reread: Option<Answer>,
}

/// How [`Writers`] write.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    pub count: usize,
    /// Bounds each request: an answer later than that is unknown, retried with the same key on
    /// another replica.
    pub timeout: Duration,
    /// A random pause between a writer's changes, in milliseconds (`min..max`).
    pub pause_ms: (u64, u64),
    /// Stop once this many changes took effect (acknowledged with `changed`), all writers
    /// together; `None`: until [`Writers::finish`].
    pub changes: Option<usize>,
    /// Keep [`Timing::reread`] (a control: answers rebuilt from the replica's latest table).
    pub reread: bool,
    /// The share of linked two-domain moves (`PUT /v1/units`, default and `search` domains; the
    /// `search` domain must exist) in the mix; the rest is dials (70 %) and pins.
    pub linked: f64,
    /// Take the next change's expected version from the last answer (a 200's `version`, a 409's
    /// `current_version`) instead of reading `GET /v1/routing` first, as a compare-and-set loop
    /// does: the writers race as fast as the log decides. Dials and pins only.
    pub chain: bool,
}

impl WriterOptions {
    /// `count` writers pausing 10-40 ms, until finished, dials and pins only.
    pub fn new(count: usize, timeout: Duration) -> WriterOptions {
        WriterOptions {
            count,
            timeout,
            pause_ms: (10, 40),
            changes: None,
            reread: false,
            linked: 0.0,
            chain: false,
        }
    }
}

/// A writer's record: every change with its final answer, and the timings.
pub type WriterLog = Vec<(Op, Timing)>;

/// Writers that send changes through random replicas until stopped.
pub struct Writers {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    handles: Vec<std::thread::JoinHandle<WriterLog>>,
}

/// Acknowledged answers, and acknowledged changes that took effect, so far.
#[derive(Default)]
struct Counts {
    acked: AtomicUsize,
    changed: AtomicUsize,
}

impl Writers {
    /// `count` writers; `timeout` bounds each request (an answer later than that is unknown,
    /// and the writer retries with the same key on another replica).
    pub fn start(count: usize, urls: Vec<String>, timeout: Duration) -> Writers {
        Writers::start_with(WriterOptions::new(count, timeout), urls)
    }

    pub fn start_with(options: WriterOptions, urls: Vec<String>) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let urls = Arc::new(urls);
        let handles = (0..options.count)
            .map(|w| {
                let (stop, counts, urls, options) =
                    (Arc::clone(&stop), Arc::clone(&counts), Arc::clone(&urls), options.clone());
                std::thread::spawn(move || run_writer(w, &urls, &options, &stop, &counts))
            })
            .collect();
        Writers { stop, counts, handles }
    }

    /// How many changes have been acknowledged so far (no-ops included).
    pub fn acked(&self) -> usize {
        self.counts.acked.load(Ordering::Relaxed)
    }

    /// How many acknowledged changes took effect so far.
    pub fn changed(&self) -> usize {
        self.counts.changed.load(Ordering::Relaxed)
    }

    pub fn finish(self) -> WriterLog {
        self.stop.store(true, Ordering::Relaxed);
        self.handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    }
}

fn run_writer(
    writer: usize,
    urls: &[String],
    options: &WriterOptions,
    stop: &AtomicBool,
    counts: &Counts,
) -> WriterLog {
    let agent = agent(options.timeout);
    let mut rng = rand::rng();
    let mut log = Vec::new();
    let mut seq = 0;
    let mut known = None;
    let done = || {
        stop.load(Ordering::Relaxed)
            || options.changes.is_some_and(|n| counts.changed.load(Ordering::Relaxed) >= n)
    };
    while !done() {
        if let Some(entry) = write_once(&agent, urls, &mut rng, writer, seq, options, &mut known) {
            if entry.1.acked {
                counts.acked.fetch_add(1, Ordering::Relaxed);
                if matches!(entry.0.answer, Answer::Acked { changed: true, .. }) {
                    counts.changed.fetch_add(1, Ordering::Relaxed);
                }
            }
            log.push(entry);
            seq += 1;
        }
        let (min, max) = options.pause_ms;
        if max > min {
            std::thread::sleep(Duration::from_millis(rng.random_range(min..max)));
        }
    }
    log
}

/// Reads the version from a random replica (or, with [`WriterOptions::chain`], takes it from
/// `known`, the last answer's version and the table's unit count), then sends one change with a
/// fresh command id to a random replica, retrying an unknown outcome with the same id on other
/// replicas. `None` when no replica answered the read (nothing was sent).
fn write_once(
    agent: &ureq::Agent,
    urls: &[String],
    rng: &mut impl Rng,
    writer: usize,
    seq: u64,
    options: &WriterOptions,
    known: &mut Option<(u64, u64)>,
) -> Option<(Op, Timing)> {
    let mut replica = rng.random_range(0..urls.len());
    let (expected_version, units, routing) = match known.take() {
        Some((version, units)) if options.chain && options.linked == 0.0 => {
            (version, units, Value::Null)
        }
        _ => {
            let routing = match try_get(agent, &format!("{}/v1/routing", urls[replica])) {
                Some((200, routing)) => routing,
                _ => return None,
            };
            (routing["version"].as_u64()?, routing["units"].as_u64()?, routing)
        }
    };
    let change = if options.linked > 0.0 && rng.random_bool(options.linked) {
        linked_change(&routing, rng)?
    } else if rng.random_bool(0.7) {
        Change::Dial { blue_units: rng.random_range(0..=units) }
    } else {
        let color = if rng.random_bool(0.5) { "blue" } else { "green" };
        Change::Pin { user: format!("u{}", rng.random_range(0..8)), color: color.into() }
    };
    let id = format!("w{writer}-{seq}-{:08x}", rng.random::<u32>());
    let started = Instant::now();
    let mut hit_failure = false;
    let mut answer = Answer::Unknown;
    // `PUT /v1/units` takes no Idempotency-Key: a linked move whose outcome is unknown is never
    // sent again (a resend could apply it twice), so it stays unknown.
    let attempts = if matches!(change, Change::Linked { .. }) { 1 } else { 8 };
    for attempt in 0..attempts {
        if attempt > 0 {
            hit_failure = true;
            replica = (replica + 1 + rng.random_range(0..urls.len() - 1)) % urls.len();
            std::thread::sleep(Duration::from_millis(50));
        }
        match send(agent, &urls[replica], &id, expected_version, &change, &routing) {
            Sent::Decided(a, version) => {
                answer = a;
                *known = version.map(|v| (v, units));
                break;
            }
            Sent::Unknown => hit_failure = true,
        }
    }
    let ended = Instant::now();
    let acked = matches!(answer, Answer::Acked { .. });
    let reread = match (acked && options.reread, &answer) {
        (true, Answer::Acked { changed, .. }) => {
            try_get(agent, &format!("{}/v1/routing", urls[replica])).and_then(|(status, body)| {
                (status == 200).then(|| Answer::Acked {
                    version: body["version"].as_u64().unwrap_or(0),
                    changed: *changed,
                    value: change.value_in(&body),
                })
            })
        }
        _ => None,
    };
    let op = Op { writer, seq, id, expected_version, change, answer };
    Some((op, Timing { started, ended, hit_failure, acked, reread }))
}

/// A linked move of one unit in the default domain and one in `search`, each to the lane it is
/// not in now, so the change moves both domains.
fn linked_change(routing: &Value, rng: &mut impl Rng) -> Option<Change> {
    let units = routing["units"].as_u64()? as u32;
    let other = |lane: String| if lane == "blue" { "green" } else { "blue" }.to_owned();
    let unit = rng.random_range(0..units);
    let search_unit = rng.random_range(0..units);
    let search_map = &routing["domains"][history::LINKED_DOMAIN]["unit_map"];
    Some(Change::Linked {
        unit,
        lane: other(history::lane_in_map(&routing["unit_map"], unit)?),
        search_unit,
        search_lane: other(history::lane_in_map(search_map, search_unit)?),
    })
}

enum Sent {
    /// The answer, and the table version it names (a 200's, a 409's `current_version`).
    Decided(Answer, Option<u64>),
    Unknown,
}

fn send(
    agent: &ureq::Agent,
    url: &str,
    id: &str,
    expected: u64,
    change: &Change,
    routing: &Value,
) -> Sent {
    let reason = reason_for(id);
    let (request, body) = match change {
        Change::Linked { unit, lane, search_unit, search_lane } => (
            agent.put(&format!("{url}/v1/units")),
            json!({
                "moves": [
                    {"units": unit.to_string(), "zone": routing["colors"][lane]},
                    {"units": search_unit.to_string(), "zone": routing["colors"][search_lane],
                     "domain": history::LINKED_DOMAIN},
                ],
                "expected_version": expected,
                "reason": reason,
            }),
        ),
        Change::Dial { blue_units } => (
            agent.put(&format!("{url}/v1/dial")),
            json!({"blue_units": blue_units, "expected_version": expected, "reason": reason}),
        ),
        Change::Pin { user, color } => (
            agent.put(&format!("{url}/v1/pins/{user}")),
            json!({"color": color, "expected_version": expected, "reason": reason}),
        ),
    };
    let request = request.header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"));
    let request = match change {
        Change::Linked { .. } => request,
        _ => request.header("Idempotency-Key", id),
    };
    let response = request.send_json(body);
    let Ok(mut response) = response else { return Sent::Unknown };
    let status = response.status().as_u16();
    let Ok(body) = response.body_mut().read_json::<Value>() else { return Sent::Unknown };
    match status {
        200 => Sent::Decided(
            Answer::Acked {
                version: body["version"].as_u64().unwrap_or(0),
                changed: body["changed"] == true,
                value: change.value_in(&body),
            },
            body["version"].as_u64(),
        ),
        // outcome_unknown, not_yet_applied, store_unavailable: not decided, retry with the id.
        503 | 504 => Sent::Unknown,
        _ => Sent::Decided(
            Answer::Refused { code: body["error"].as_str().unwrap_or("?").to_owned() },
            body["current_version"].as_u64(),
        ),
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

/// The whole run checked: each replica's decided history (named `r1`, `r2`, ... in the order of
/// `urls`, every one caught up) and the history checker's report on them, the writers' `log`
/// and the `samples`. Panics with the checker's problems.
pub fn check_run(
    urls: &[String],
    log: &WriterLog,
    samples: &[Sample],
) -> (Vec<(String, Vec<Decided>)>, history::Report) {
    let histories: Vec<(String, Vec<Decided>)> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("r{}", i + 1), decided_history(url)))
        .collect();
    let ops: Vec<Op> = log.iter().map(|(op, _)| op.clone()).collect();
    let report = history::check(&ops, &histories, samples).unwrap_or_else(|errors| {
        panic!("the history checker failed ({} problems):\n{}", errors.len(), errors.join("\n"))
    });
    (histories, report)
}

/// A replica's decided history from `GET /v1/audit` (genesis left out), paged back to the
/// first version (pages older than the in-memory trail are read from the log, one at a time).
pub fn decided_history(url: &str) -> Vec<Decided> {
    let max = tidegate::service::coordinator::AUDIT_IN_MEMORY;
    let agent = agent(Duration::from_secs(60));
    let mut history: Vec<Decided> = Vec::new();
    let mut before: Option<u64> = None;
    loop {
        let page = match before {
            None => format!("{url}/v1/audit?limit={max}"),
            Some(v) => format!("{url}/v1/audit?limit={max}&before={v}"),
        };
        let mut tries = 0;
        let body = loop {
            let answer = agent
                .get(&page)
                .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                .call()
                .ok()
                .and_then(|mut r| {
                    Some((r.status().as_u16(), r.body_mut().read_json::<Value>().ok()?))
                });
            match answer {
                Some((200, body)) => break body,
                // Another deep page is being read from the log: one at a time.
                Some((503, body)) if body["error"] == "audit_busy" && tries < 60 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
                other => panic!("{page} answered {other:?}"),
            }
        };
        history.extend(
            body["entries"].as_array().unwrap().iter().filter(|e| e["action"] != "genesis").map(
                |e| Decided {
                    version: e["version"].as_u64().unwrap(),
                    id: id_in_reason(e["reason"].as_str().unwrap_or_default()),
                    to: e["to"].as_str().unwrap_or_default().to_owned(),
                },
            ),
        );
        match body["next_before"].as_u64() {
            Some(next) if next > 1 && Some(next) != before => before = Some(next),
            _ => break,
        }
    }
    history.sort_by_key(|d| d.version);
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
