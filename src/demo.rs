//! `tidegate demo`: the coordinator with an in-process mock Kafka, a lane topic, simulated
//! producers, consumers in both zones and simulated outcomes, so a new user can watch the lanes,
//! the lag and the split move when they turn the dial, with nothing installed.
//!
//! The mock cluster is librdkafka's own (`mq::MockKafka`); the producer, consumers and lag reader
//! are the real `mq` code talking the Kafka protocol to it. The simulation runs on its own tokio
//! runtime in a background thread; the HTTP edge runs on the main thread as in `serve`.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::{
    Config, LaneSettings, OperatorSettings, Overrides, Settings, token_sha256_hex,
};
use crate::core::ZoneId;
use crate::http::{self, App, now_ms};
use crate::mq::{
    ConsumerSettings, LaneConsumer, LaneProducer, MockKafka, MqError, ProducerSettings,
};
use crate::service::coordinator::Coordinator;
use crate::service::health::Health;
use crate::service::lane_membership::Lanes;
use crate::service::table_source::TableSource;

pub const TOPIC: &str = "demo-orders";
pub const GROUP: &str = "demo-consumers";
const PARTITIONS: u32 = 8;
const USERS: u64 = 5000;

/// What `tidegate demo` was asked for.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// HTTP port; `None` takes 8080 when free, another free port otherwise.
    pub port: Option<u16>,
    /// Messages produced per second.
    pub rate: u32,
    /// Where the demo's command log goes; a fresh temporary directory by default.
    pub data_dir: Option<PathBuf>,
    /// Seconds between status lines on stdout; 0 for none.
    pub status_every: u64,
}

fn free_port(preferred: u16) -> Result<u16, String> {
    if TcpListener::bind(("127.0.0.1", preferred)).is_ok() {
        return Ok(preferred);
    }
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("no free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Runs the demo until Ctrl-C.
pub fn run(options: DemoOptions) -> Result<(), String> {
    crate::logging::init(&crate::config::LogConfig { json: false, filter: "info".into() });
    let kafka = MockKafka::start(1).map_err(|e| format!("mock Kafka: {e}"))?;
    kafka.create_topic(TOPIC, PARTITIONS).map_err(|e| format!("mock Kafka: {e}"))?;
    let bootstrap = kafka.bootstrap();
    let port = match options.port {
        Some(p) => p,
        None => free_port(8080)?,
    };
    let data_dir = match &options.data_dir {
        Some(dir) => dir.clone(),
        None => {
            let dir = std::env::temp_dir().join(format!("tidegate-demo-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            dir
        }
    };
    let token = format!("tg_demo_{}", hex::encode(rand::random::<[u8; 12]>()));
    let settings = Settings {
        data_dir: data_dir.clone(),
        operators: vec![OperatorSettings {
            name: "demo".into(),
            token_sha256: token_sha256_hex(&token),
            role: "operator".into(),
        }],
        lanes: LaneSettings {
            kafka_bootstrap: bootstrap.clone(),
            session_timeout: "5s".into(),
            heartbeat_interval: "500ms".into(),
            lag_interval: "1s".into(),
            ..LaneSettings::default()
        },
        ..Settings::default()
    };
    let overrides = Overrides { port: Some(port), ..Overrides::default() };
    let config = Config::validate(settings, &overrides).map_err(|e| e.to_string())?;
    let coordinator =
        Arc::new(crate::server::open_coordinator(&config).map_err(|e| e.to_string())?);
    let url = format!("http://127.0.0.1:{port}");
    let app = App::new(Arc::clone(&coordinator), Arc::new(config));
    let (health, lanes) = (Arc::clone(&app.health), Arc::clone(&app.lanes));

    print_intro(&url, &bootstrap, &token, options.rate, &data_dir);
    // The simulated consumers hold lane membership, a write: they use the demo's operator token
    // (a real deployment gives them a service token).
    let sim = Simulation {
        url: url.clone(),
        token: token.clone(),
        bootstrap,
        coordinator,
        health,
        lanes,
        options,
    };
    std::thread::Builder::new()
        .name("demo-simulation".into())
        .spawn(move || sim.run())
        .map_err(|e| e.to_string())?;
    let result = http::run(app);
    drop(kafka);
    result
}

fn print_intro(url: &str, bootstrap: &str, token: &str, rate: u32, data_dir: &std::path::Path) {
    println!(
        "tidegate demo: the coordinator with an in-process mock Kafka cluster at {bootstrap}

  topic {TOPIC}: {PARTITIONS} partitions; blue = 0-3, read by consumers in az-b; green = 4-7, read in az-a
  producers: {rate} messages/s from {USERS} simulated users, each sent to their colour's half
  consumers: 2 in az-b and 2 in az-a (group {GROUP}); outcomes reported for both zones every second
  command log: {}

Look:
  curl -s {url}/v1/lanes/{GROUP}          # members, assignment, generation, lag per half
  curl -s {url}/v1/zones                  # share and health per zone
  curl -s {url}/metrics | grep tidegate_lane

Turn the dial (this demo's operator token is below; it is valid for this run only):
  export TIDEGATE_TOKEN={token}
  export TIDEGATE_URL={url}
  cargo run -- dial set 20 --reason \"demo: move 30% of users to green\"
  cargo run -- drain start --zone az-b --to 0 --step 25 --every 5s --reason \"demo: drain az-b\"
  curl -s -X PUT {url}/v1/dial -H \"Authorization: Bearer $TIDEGATE_TOKEN\" \\
    -H 'Content-Type: application/json' \\
    -d '{{\"blue_percent\": 50, \"expected_version\": VERSION, \"reason\": \"demo: back to 50/50\"}}'
  (VERSION: the current routing version, from `curl -s {url}/v1/routing`)

Ctrl-C stops the demo.
",
        data_dir.display()
    );
}

struct Simulation {
    url: String,
    token: String,
    bootstrap: String,
    coordinator: Arc<Coordinator>,
    health: Arc<Health>,
    lanes: Arc<Lanes>,
    options: DemoOptions,
}

/// Counters the status line reads.
#[derive(Default)]
struct Counts {
    produced: [AtomicU64; 2],
    consumed: [AtomicU64; 2],
}

impl Simulation {
    fn run(self) {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("demo-sim")
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("tidegate demo: cannot start the simulation: {e}");
                return;
            }
        };
        rt.block_on(self.simulate());
    }

    async fn simulate(self) {
        let counts = Arc::new(Counts::default());
        // Consumers register over HTTP, so wait for the server.
        let health_url = format!("{}/healthz", self.url);
        for _ in 0..200 {
            let url = health_url.clone();
            let up = tokio::task::spawn_blocking(move || ureq::get(&url).call().is_ok())
                .await
                .unwrap_or(false);
            if up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for (zone, id) in [("az-b", "b1"), ("az-b", "b2"), ("az-a", "a1"), ("az-a", "a2")] {
            let mut settings =
                ConsumerSettings::new(&self.url, &self.bootstrap, TOPIC, GROUP, zone);
            settings.member_name = Some(format!("{zone}-{id}"));
            settings.token = Some(self.token.clone());
            tokio::spawn(consume(settings, Arc::clone(&counts)));
        }
        let table: Arc<dyn TableSource> = self.coordinator.clone();
        let producer =
            match LaneProducer::new(&ProducerSettings::new(&self.bootstrap, TOPIC), table) {
                Ok(p) => Arc::new(p),
                Err(e) => {
                    eprintln!("tidegate demo: producer: {e}");
                    return;
                }
            };
        tokio::spawn(produce(producer, self.options.rate.max(1), Arc::clone(&counts)));
        tokio::spawn(report_outcomes(Arc::clone(&self.health), self.coordinator.clone()));
        if self.options.status_every > 0 {
            status_lines(self.lanes, self.coordinator, counts, self.options.status_every).await;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

async fn produce(producer: Arc<LaneProducer>, rate: u32, counts: Arc<Counts>) {
    let tick = Duration::from_millis(50);
    let per_tick = (u64::from(rate) * 50 / 1000).max(1);
    let mut ticker = tokio::time::interval(tick);
    let mut inflight = VecDeque::new();
    let mut n = 0u64;
    loop {
        ticker.tick().await;
        for _ in 0..per_tick {
            // A fixed population, visited in a scrambled order, like real traffic.
            let user = format!("user-{}", (n.wrapping_mul(2_654_435_761)) % USERS);
            n += 1;
            match producer.enqueue(&user, format!("order {n} for {user}").as_bytes()) {
                Ok(p) => {
                    counts.produced[p.route().color.index().min(1)].fetch_add(1, Ordering::Relaxed);
                    inflight.push_back(p);
                }
                // A unit frozen by a loss-less move: this simulated user writes again later.
                Err(MqError::Frozen { .. }) => {}
                Err(e) => eprintln!("tidegate demo: produce: {e}"),
            }
        }
        while inflight.len() > 1000 {
            if let Some(p) = inflight.pop_front() {
                let _ = p.await;
            }
        }
    }
}

async fn consume(settings: ConsumerSettings, counts: Arc<Counts>) {
    let zone = settings.zone.clone();
    let color = if zone == "az-b" { ZoneId::BLUE } else { ZoneId::GREEN };
    let mut consumer = match LaneConsumer::start(settings).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tidegate demo: consumer in {zone}: {e}");
            return;
        }
    };
    loop {
        match consumer.next().await {
            Ok(_) => {
                counts.consumed[color.index()].fetch_add(1, Ordering::Relaxed);
                // Each message takes a little work, so a burst shows up as lag for a moment.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Err(e) => {
                eprintln!("tidegate demo: consumer in {zone}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Simulated service outcomes: traffic per zone follows the current share, with a small error
/// rate, so `GET /v1/zones` has health and a drain's guard has readings.
async fn report_outcomes(health: Arc<Health>, coordinator: Arc<Coordinator>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    loop {
        ticker.tick().await;
        let table = coordinator.table();
        let blue = u64::from(table.share().blue_units) * 1000 / u64::from(table.units());
        for (color, requests) in [(ZoneId::BLUE, blue), (ZoneId::GREEN, 1000 - blue)] {
            let errors = requests / 200 + u64::from(rand::random::<u8>() % 3);
            let errors = errors.min(requests);
            let zone = table.zone_of(color).to_owned();
            let _ = health.record(&zone, color, requests - errors, errors, now_ms());
        }
    }
}

async fn status_lines(
    lanes: Arc<Lanes>,
    coordinator: Arc<Coordinator>,
    counts: Arc<Counts>,
    every: u64,
) {
    let mut ticker = tokio::time::interval(Duration::from_secs(every));
    ticker.tick().await;
    let mut last = [0u64; 4];
    loop {
        ticker.tick().await;
        let table = coordinator.table();
        let now = [
            counts.produced[0].load(Ordering::Relaxed),
            counts.produced[1].load(Ordering::Relaxed),
            counts.consumed[0].load(Ordering::Relaxed),
            counts.consumed[1].load(Ordering::Relaxed),
        ];
        let d: Vec<u64> = now.iter().zip(last).map(|(n, l)| n - l).collect();
        last = now;
        let (lag, owners) = match lanes.view(GROUP, now_ms()) {
            Ok(v) => {
                let lag = v.lag.map_or("lag unknown".to_owned(), |l| {
                    format!("lag blue {} green {}", l.halves[0], l.halves[1])
                });
                let owners: Vec<String> = v
                    .members
                    .iter()
                    .map(|m| format!("{}:{:?}", m.member_id, m.assignment))
                    .collect();
                (lag, owners.join(" "))
            }
            Err(_) => ("no consumers yet".to_owned(), String::new()),
        };
        let share =
            |a: u64, b: u64| if a + b == 0 { 0.0 } else { a as f64 * 100.0 / (a + b) as f64 };
        println!(
            "v{} dial {:.0}% blue | last {every}s: produced blue {} green {} ({:.0}% blue), consumed az-b {} az-a {} | {lag} | {owners}",
            table.version(),
            table.blue_percent(),
            d[0],
            d[1],
            share(d[0], d[1]),
            d[2],
            d[3],
        );
    }
}
