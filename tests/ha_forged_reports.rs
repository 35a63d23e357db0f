//! Gate reports on the presence topic are signed (issue 21): whoever can write to
//! `<topic>.presence` must not steer the replicas' drain gates. Real broker, real binaries.
//!
//! A forger writes gate reports straight to the presence topic with rdkafka, naming the real log
//! and a replica of its own, claiming az-b unhealthy (while every replica is fed healthy
//! outcomes) and then healthy (while they are fed 60 % errors); with
//! `store.kafka.presence_key` set it sends them unsigned and signed with another key.
//! - With the key, no replica's verdict on az-b (`GET /v1/zones`: error rate and state) moves,
//!   both reasons are counted in `tidegate_presence_dropped_total`, the drop is logged once, and
//!   the replicas' own signed reports still count on each other (az-a's outcomes are posted to
//!   replica 1 only, and replica 2 reads them).
//! - The control, the same replicas without the key: the same unsigned reports move every
//!   replica's verdict both ways, and each replica warned at start that nothing is signed.

mod common;
mod ha_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, agent, get_json, kafka, wait_until};
use ha_support::Replicas;
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Value, json};
use tidegate::config::SecretKey;
use tidegate::core::{ZoneId, Zones};
use tidegate::service::gate_view::{FORMAT, GateReport};
use tidegate::service::health::{Health, Source};
use tidegate::service::presence::seal;
use tidegate::service::subscribers::Summary;

const KEY: &str = "9f3c1e7a5b2d8c4f6a0e9d3b7c1f5a2e8d4b0c6f9a3e7d1b5c2f8a4e0d6b9c3f";
const CONFIG: &str = "[health]\nwindow = \"2s\"\n";
const WINDOW_MS: u64 = 2_000;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// az-b's error rate and state on `url` (`None` while unknown).
fn verdict(url: &str) -> (Option<f64>, String) {
    let (_, zones) = get_json(&format!("{url}/v1/zones"));
    let zone = zones["zones"].as_array().and_then(|z| z.iter().find(|z| z["zone"] == "az-b"));
    let zone = zone.cloned().unwrap_or(Value::Null);
    (zone["error_rate"].as_f64(), zone["state"].as_str().unwrap_or("?").to_owned())
}

fn zone_rate(url: &str, zone: &str) -> Option<f64> {
    let (_, zones) = get_json(&format!("{url}/v1/zones"));
    zones["zones"].as_array()?.iter().find(|z| z["zone"] == zone)?["error_rate"].as_f64()
}

/// Posts az-b's outcomes (`az_b`, to every replica) and az-a's (to replica 1 only) every 50 ms.
fn feed(
    urls: Vec<String>,
    az_b: Arc<Mutex<Value>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent = ha_support::agent(Duration::from_millis(300));
        while !stop.load(Ordering::Relaxed) {
            let b = az_b.lock().unwrap().clone();
            for (i, url) in urls.iter().enumerate() {
                let mut batch = vec![b.clone()];
                if i == 0 {
                    batch.push(json!({"zone": "az-a", "color": "green", "ok": 50, "error": 50}));
                }
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(json!(batch));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// A gate report from "forger" claiming az-b had `ok` and `error` outcomes just now.
fn forged(log_id: &str, ok: u64, error: u64) -> Vec<u8> {
    let now = now_ms();
    let health = Health::new(Zones::default(), WINDOW_MS, Source::Outcomes);
    health.record("az-b", ZoneId::BLUE, ok, error, now).unwrap();
    let report = GateReport {
        gates: FORMAT,
        log_id: log_id.to_owned(),
        replica: "forger".into(),
        at_ms: now,
        outcomes: health.local_windows(now),
        subscribers: Summary::default(),
        lanes: None,
    };
    serde_json::to_vec(&report).unwrap()
}

/// Writes forged reports (unsigned, and when `wrong_key` also signed with another key) to the
/// presence topic every 100 ms for `how_long`, sampling every replica's verdict meanwhile.
fn forge_and_sample(
    producer: &BaseProducer,
    presence_topic: &str,
    log_id: &str,
    (ok, error): (u64, u64),
    wrong_key: bool,
    urls: &[String],
    how_long: Duration,
) -> Samples {
    let other = SecretKey([0x5a; 32]);
    let started = Instant::now();
    let mut samples = vec![Vec::new(); urls.len()];
    while started.elapsed() < how_long {
        let body = forged(log_id, ok, error);
        let mut payloads = vec![body.clone()];
        if wrong_key {
            payloads.push(seal(Some(&other), &body));
        }
        for payload in payloads {
            producer
                .send(BaseRecord::to(presence_topic).key("forger.gates").payload(&payload))
                .map_err(|(e, _)| e)
                .unwrap();
        }
        producer.flush(Duration::from_secs(5)).unwrap();
        for (i, url) in urls.iter().enumerate() {
            samples[i].push(verdict(url));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    samples
}

fn metric(url: &str, series: &str) -> f64 {
    let mut response = agent().get(&format!("{url}/metrics")).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} is not exported"))
}

/// Per replica, the verdicts sampled while a forgery was sent.
type Samples = Vec<Vec<(Option<f64>, String)>>;

/// Runs both forgeries against two replicas (with `key` or without) and returns the verdicts
/// sampled while each was sent: (claiming unhealthy, claiming healthy).
fn run(key: Option<&str>) -> (Replicas, Samples, Samples) {
    let bootstrap = kafka::bootstrap();
    let topic = kafka::unique("ha-forged-reports");
    let store = key.map(|k| format!("presence_key = \"{k}\"")).unwrap_or_default();
    let replicas = Replicas::start_with_store_keys(&bootstrap, &topic, 2, &store, CONFIG);
    let (_, cluster) = get_json(&format!("{}/v1/cluster", replicas.urls[0]));
    let log_id = cluster["log"]["id"].as_str().unwrap().to_owned();
    let producer: BaseProducer =
        ClientConfig::new().set("bootstrap.servers", &bootstrap).create().unwrap();
    let presence_topic = tidegate::mq::presence_topic(&topic);

    let az_b =
        Arc::new(Mutex::new(json!({"zone": "az-b", "color": "blue", "ok": 100, "error": 0})));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(replicas.urls.clone(), Arc::clone(&az_b), Arc::clone(&stop));
    // The replicas' own (signed, when keyed) reports count on each other: az-a's outcomes go to
    // replica 1 only, and replica 2 reads them; and each lists the other as live.
    let r2 = replicas.urls[1].clone();
    assert!(
        wait_until(Duration::from_secs(20), || zone_rate(&r2, "az-a")
            .is_some_and(|r| (0.4..0.6).contains(&r))),
        "replica 2 never read replica 1's az-a outcomes: {:?}",
        zone_rate(&r2, "az-a")
    );
    for url in &replicas.urls {
        let live = wait_until(Duration::from_secs(10), || {
            let (_, c) = get_json(&format!("{url}/v1/cluster"));
            c["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().filter(|r| r["status"] == "live").count() == 2)
        });
        assert!(live, "{url} does not list both replicas");
    }

    // Healthy az-b, and reports claiming it fails.
    for url in &replicas.urls {
        assert!(
            wait_until(Duration::from_secs(10), || verdict(url) == (Some(0.0), "active".into())),
            "{url}: az-b never read healthy: {:?}",
            verdict(url)
        );
    }
    let unhealthy = forge_and_sample(
        &producer,
        &presence_topic,
        &log_id,
        (0, 100_000),
        key.is_some(),
        &replicas.urls,
        Duration::from_secs(3),
    );
    // Failing az-b (60 % errors), and reports claiming it is healthy.
    *az_b.lock().unwrap() = json!({"zone": "az-b", "color": "blue", "ok": 40, "error": 60});
    for url in &replicas.urls {
        assert!(
            wait_until(Duration::from_secs(10), || {
                let (rate, state) = verdict(url);
                rate.is_some_and(|r| (0.55..0.65).contains(&r)) && state == "down"
            }),
            "{url}: az-b never read failing: {:?}",
            verdict(url)
        );
    }
    let healthy = forge_and_sample(
        &producer,
        &presence_topic,
        &log_id,
        (1_000_000, 0),
        key.is_some(),
        &replicas.urls,
        Duration::from_secs(3),
    );
    stop.store(true, Ordering::Relaxed);
    feeder.join().unwrap();
    (replicas, unhealthy, healthy)
}

#[test]
fn forged_gate_reports_move_no_verdict_with_a_key_and_every_verdict_without() {
    let started = Instant::now();
    let (replicas, unhealthy, healthy) = run(Some(KEY));
    for (i, url) in replicas.urls.iter().enumerate() {
        for sample in &unhealthy[i] {
            assert_eq!(
                sample,
                &(Some(0.0), "active".to_owned()),
                "{url}: a forged report moved az-b"
            );
        }
        for sample in &healthy[i] {
            assert!(
                sample.0.is_some_and(|r| (0.55..0.65).contains(&r)) && sample.1 == "down",
                "{url}: a forged report moved az-b: {sample:?}"
            );
        }
        for reason in ["unsigned", "bad_signature"] {
            let series = format!("tidegate_presence_dropped_total{{reason=\"{reason}\"}}");
            let dropped = metric(url, &series);
            assert!(dropped >= 10.0, "{url}: {series} is {dropped}");
        }
        let stderr = replicas.stderr(i);
        let warned = stderr.matches("dropped a message on the presence topic").count();
        assert_eq!(warned, 1, "{url}: the drop is logged once:\n{stderr}");
        assert!(!stderr.contains("presence_key is not set"), "{stderr}");
    }
    println!(
        "with the key: {} + {} samples per replica, no verdict moved ({} ms)",
        unhealthy[0].len(),
        healthy[0].len(),
        started.elapsed().as_millis()
    );
    drop(replicas);

    // The control: no key, the same forged reports (unsigned) move every replica both ways.
    let started = Instant::now();
    let (replicas, unhealthy, healthy) = run(None);
    for (i, url) in replicas.urls.iter().enumerate() {
        assert!(
            unhealthy[i].iter().any(|(r, s)| r.is_some_and(|r| r > 0.9) && s == "down"),
            "{url}: without the key the forged failure should count: {:?}",
            unhealthy[i]
        );
        assert!(
            healthy[i].iter().any(|(r, s)| r.is_some_and(|r| r < 0.05) && s == "active"),
            "{url}: without the key the forged health should count: {:?}",
            healthy[i]
        );
        let stderr = replicas.stderr(i);
        assert!(stderr.contains("store.kafka.presence_key is not set"), "{url}: {stderr}");
        let dropped = metric(url, "tidegate_presence_dropped_total{reason=\"unsigned\"}");
        assert_eq!(dropped, 0.0, "{url}: nothing is dropped without a key");
    }
    println!(
        "without the key: the forged reports moved every replica ({} ms)",
        started.elapsed().as_millis()
    );
}
