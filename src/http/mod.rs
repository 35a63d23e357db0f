//! The HTTP edge (Rocket): tagging, routing and operator APIs, health and metrics, and the operator web UI.
//!
//! Architecture invariant: only this module knows Rocket. Each feature module exposes one
//! `stage() -> AdHoc`; [`build`] only attaches them. Handlers parse, call the coordinator or the
//! core, and render; errors become HTTP responses in exactly one place, [`error`].

pub mod auth;
mod channels;
mod cluster;
pub mod dispatch;
mod drains;
pub mod edge;
pub mod error;
mod freeze_wait;
mod health;
mod holds;
pub mod idempotency;
mod lanes;
mod ofrep;
pub mod openapi;
mod plans;
mod routing;
mod tag;
pub mod ui;
mod units;
mod watch;
mod writes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rocket::data::{ByteUnit, Limits};
use rocket::fairing::AdHoc;
use rocket::{Build, Rocket};

use crate::config::{Config, HealthSourceConfig};
use crate::core::{Audit, Command, CommandError, Envelope};
use crate::service::capacity::Capacities;
use crate::service::coordinator::{Coordinator, SubmitError, Submitted};
use crate::service::health::{Health, PrometheusSource, Source};
use crate::service::lane_authority::{Claimant, LaneAuthority};
use crate::service::lane_membership::Lanes;
use crate::service::login_limit::LoginLimiter;
use crate::service::member_key::MemberKey;
use crate::service::preconditions::Preconditions;
use crate::service::presence::Presence;
use crate::service::subscribers::Subscribers;
use crate::service::ui_sessions::Revocations;
use crate::service::zone_history::{self, ZoneHistory};
use crate::telemetry::{self, TagCounters};
use error::ApiError;
use rocket::http::Status;

/// Everything a handler may need, managed by Rocket.
pub struct App {
    pub coordinator: Arc<Coordinator>,
    pub config: Arc<Config>,
    pub health: Arc<Health>,
    pub subscribers: Arc<Subscribers>,
    pub lanes: Arc<Lanes>,
    /// Web UI sessions that were logged out before they expired.
    pub revocations: Arc<Revocations>,
    pub login_limiter: Arc<LoginLimiter>,
    /// The last minutes of each zone's health, for the UI's charts.
    pub zone_history: Arc<ZoneHistory>,
    /// Signs and checks lane member secrets (`service::member_key`).
    pub member_key: MemberKey,
    pub capacities: Arc<Capacities>,
    pub preconditions: Arc<Preconditions>,
    pub tag_counters: TagCounters,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The routing event of the newest version, serialised once for every watch stream.
    pub frames: Arc<watch::RoutingFrames>,
    /// This replica and the others it has heard from (`GET /v1/cluster`).
    pub presence: Arc<Presence>,
    /// The port Rocket bound (known at liftoff; 0 before): the fast listener names it in its 404s.
    pub bound_port: Arc<AtomicU16>,
    /// The `Idempotency-Key`s this replica has seen, per caller, with their request's
    /// fingerprint and answer.
    pub idempotency: Arc<idempotency::Remembered>,
    /// The connection guard of the main port and the fast port (`service::connections`).
    pub connections: Arc<crate::service::connections::Guard>,
    /// The users services reported written by two zones (`POST /v1/writes`).
    pub write_watch: Arc<crate::service::write_watch::WriteWatch>,
}

impl App {
    pub fn new(coordinator: Arc<Coordinator>, config: Arc<Config>) -> App {
        let metrics = telemetry::install();
        let table = coordinator.table();
        telemetry::prime_zones(&config.zones);
        telemetry::publish_state(&coordinator.state());
        let tag_counters = TagCounters::new(&table);
        let source = match &config.health.source {
            HealthSourceConfig::Outcomes => Source::Outcomes,
            HealthSourceConfig::Prometheus {
                url,
                error_rate_query,
                requests_query,
                load_query,
                timeout_ms,
            } => Source::Prometheus(
                PrometheusSource::new(
                    url,
                    error_rate_query,
                    requests_query.as_deref(),
                    *timeout_ms,
                )
                .with_load_query(load_query),
            ),
        };
        let health = Arc::new(
            Health::new(config.zones.clone(), config.health.window_ms, source)
                .with_detection(config.health.detect_window_ms, config.health.silent_after_ms),
        );
        let subscribers = Arc::new(
            Subscribers::new(config.subscriber_stale_after_ms, config.subscriber_max_per_caller)
                .with_lease_hold(config.lease.bound_ms())
                .requiring_lease(config.lease.required),
        );
        // A freeze replayed from the log waits for the previous process's subscribers to come
        // back before its barrier can pass (`Subscribers::reconnect_grace_left`).
        subscribers.note_start(coordinator.state().version(), now_ms(), coordinator.is_shared());
        let lag_source = config.lanes.kafka_bootstrap.as_ref().map(|bootstrap| {
            Arc::new(crate::mq::KafkaLag::new(bootstrap))
                as Arc<dyn crate::service::lane_membership::LagSource>
        });
        let table: Arc<dyn crate::service::table_source::TableSource> = coordinator.clone();
        // On a shared log one replica at a time answers lane membership (the lane lease).
        let authority = match (&config.node, coordinator.is_shared()) {
            (Some(node), true) => LaneAuthority::leased(Claimant {
                node_id: node.id.clone(),
                url: node.url.clone(),
                term_ms: config.lanes.lease_ms,
            }),
            _ => LaneAuthority::always(),
        };
        let lanes = Arc::new(
            Lanes::new(config.zones.clone(), config.lanes.clone(), table, lag_source)
                .with_authority(Arc::new(authority)),
        );
        let revocations = match Revocations::open(&config.data_dir, now_ms()) {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(
                    "cannot use {}: {e}; logged-out UI sessions are remembered only until restart",
                    config.data_dir.join(crate::service::ui_sessions::FILE_NAME).display()
                );
                Revocations::in_memory()
            }
        };
        // Every live zone of the table has a history from the start; the sampler follows zones
        // added or retired later.
        let zone_history =
            Arc::new(ZoneHistory::new(zone_history::KEEP_MS, zone_history::SAMPLE_EVERY_MS));
        zone_history.track(&zone_history::live_zones(&coordinator.table()));
        let member_key = member_key(&config);
        let capacities = Arc::new(Capacities::new(Arc::clone(&health), config.capacity.clone()));
        let preconditions = Arc::new(Preconditions::new(Arc::clone(&health), 2_000));
        let presence = Arc::new(
            Presence::new(config.node.clone(), Arc::clone(&coordinator), now_ms())
                .with_gates(crate::service::gate_view::GateInputs {
                    health: Arc::clone(&health),
                    subscribers: Arc::clone(&subscribers),
                    lanes: Arc::clone(&lanes),
                })
                .with_key(match &config.store {
                    crate::config::StoreConfig::Kafka { presence_key, .. } => *presence_key,
                    crate::config::StoreConfig::File => None,
                }),
        );
        // A record kind some live replica cannot read is not written (rolling upgrades).
        let weak = Arc::downgrade(&presence);
        coordinator.set_format_gate(Box::new(move |level| match weak.upgrade() {
            Some(presence) => presence.check_format(level, now_ms()),
            None => Ok(()),
        }));
        let connections = crate::service::connections::guard(&config.connections, "server");
        App {
            coordinator,
            config,
            health,
            subscribers,
            lanes,
            revocations: Arc::new(revocations),
            login_limiter: Arc::new(LoginLimiter::new()),
            zone_history,
            member_key,
            capacities,
            preconditions,
            tag_counters,
            metrics,
            frames: Arc::default(),
            presence,
            bound_port: Arc::default(),
            idempotency: Arc::default(),
            connections,
            write_watch: Arc::default(),
        }
    }
}

/// The configured member-secret key, else the one kept in the data directory. If that cannot be
/// read or written, a key for this run only: membership is in memory anyway, so members
/// re-register after a restart and get secrets under the new key.
fn member_key(config: &Config) -> MemberKey {
    if let Some(key) = &config.lanes.member_key {
        let key = MemberKey::new(key.0);
        return match &config.lanes.previous_member_key {
            Some(previous) => key.rotating_from(previous.0),
            None => key,
        };
    }
    MemberKey::load_or_create(&config.data_dir).unwrap_or_else(|e| {
        tracing::warn!(
            "cannot keep the lane member key in {}: {e}; using one for this run only",
            config.data_dir.display()
        );
        MemberKey::new(rand::random())
    })
}

/// The Rocket instance for `app`, listening where the configuration says.
pub fn build(app: App) -> Rocket<Build> {
    let config = &app.config;
    let body_limit = ByteUnit::from(config.max_body_bytes);
    let mut figment = rocket::Config::figment()
        .merge(("address", config.address))
        .merge(("port", config.port))
        .merge(("limits", Limits::default().limit("json", body_limit).limit("string", body_limit)))
        .merge(("log_level", rocket::config::LogLevel::Critical))
        .merge(("cli_colors", false))
        .merge(("ident", "tidegate"))
        .merge(("secret_key", ui::secret_key(&config.ui).to_vec()));
    // `[server] workers`: the runtime Rocket builds (and the dispatcher runs on).
    if let Some(workers) = config.workers {
        figment = figment.merge(("workers", workers));
    }
    // HTTPS with rustls when `[server.tls]` names the files. Rocket then also marks every cookie
    // it sets (the UI session, the login form token) `Secure`.
    if let Some(tls) = &config.tls {
        figment =
            figment.merge(("tls", rocket::config::TlsConfig::from_paths(&tls.certs, &tls.key)));
    }
    // The patched Rocket's serve() admits every connection through this guard (the fast port
    // shares it): vendor/rocket/TIDEGATE-PATCH.md. Behind the dispatcher, whose guard admitted
    // the connection already, Rocket has a guard of its own with the same limits: it times out
    // the connections it serves when they idle, and counts them once.
    let guard: Arc<rocket::conn_guard::Guard> = if config.fast_path {
        crate::service::connections::guard(&config.connections, "server")
    } else {
        Arc::clone(&app.connections)
    };
    rocket::custom(figment)
        .manage(guard)
        .manage(Arc::clone(&app.config))
        .manage(app)
        .register("/", error::catchers())
        .attach(tag::stage())
        .attach(routing::stage())
        .attach(units::stage())
        .attach(channels::stage())
        .attach(health::stage())
        .attach(cluster::stage())
        .attach(drains::stage())
        .attach(watch::stage())
        .attach(ui::stage())
        .attach(lanes::stage())
        .attach(openapi::stage())
        .attach(ofrep::stage())
        .attach(plans::stage())
        .attach(writes::stage())
        .attach(AdHoc::on_liftoff("announce", |rocket| {
            Box::pin(async move {
                let config = rocket.config();
                if let Some(app) = rocket.state::<App>() {
                    app.bound_port.store(config.port, Ordering::Relaxed);
                }
                // Tests and scripts start tidegate on port 0 and read this line for the real port.
                let scheme = if config.tls_enabled() { "https" } else { "http" };
                let url = format!("{scheme}://{}", SocketAddr::new(config.address, config.port));
                if let Some(app) = rocket.state::<App>() {
                    app.presence.bound(&url);
                }
                println!("tidegate listening on {url}");
                let workers = rocket::tokio::runtime::Handle::current().metrics().num_workers();
                tracing::info!(workers, "serving on {url}; runtime worker threads: {workers}");
            })
        }))
}

/// Submits a command on a blocking thread (the log fsyncs). Without an `expected_version` the
/// current version is used: drain controls name their target by drain ID, and the core's state
/// checks (running, paused, finished) make them safe to retry. So if the drain runner logs a step
/// or a hold between reading the version and applying, the caller did not lose a race they
/// cared about, and the command is tried again against the newer version (a few times at most).
pub async fn submit(
    app: &App,
    command: Command,
    expected_version: Option<u64>,
    by: String,
    reason: String,
) -> Result<Submitted, ApiError> {
    submit_with_id(app, command, expected_version, by, reason, None).await
}

/// [`submit`] under a client-chosen command id (the `Idempotency-Key` header): on a shared log a
/// retry with the same id is answered with the first attempt's outcome and never applies twice.
pub async fn submit_with_id(
    app: &App,
    command: Command,
    expected_version: Option<u64>,
    by: String,
    reason: String,
    command_id: Option<String>,
) -> Result<Submitted, ApiError> {
    const RETRIES: u32 = 3;
    let mut attempt = 0;
    loop {
        let expected = expected_version.unwrap_or_else(|| app.coordinator.state().version());
        let audit = Audit { by: by.clone(), at_ms: now_ms(), reason: reason.clone() };
        let envelope = Envelope { expected_version: expected, command: command.clone(), audit };
        let coordinator = Arc::clone(&app.coordinator);
        let id = command_id.clone();
        let result = rocket::tokio::task::spawn_blocking(move || {
            coordinator.submit_with_id(&envelope, id.as_deref())
        })
        .await
        .map_err(|e| ApiError::new(Status::InternalServerError, "internal", e.to_string()))?;
        match result {
            Err(SubmitError::Command(CommandError::VersionConflict { .. }))
                if expected_version.is_none() && attempt < RETRIES =>
            {
                attempt += 1;
            }
            other => return Ok(other?),
        }
    }
}

/// Serves `app` on Rocket's own runtime until Ctrl-C or SIGTERM.
pub fn run(app: App) -> Result<(), String> {
    let rocket = build(app);
    let at = listen_address(&rocket);
    let runtime = Runtime::of(&rocket);
    runtime.run(rocket.launch()).map(|_| ()).map_err(|e| launch_error(e, "server", &at))
}

/// The async runtime a Rocket instance runs on, sized by that instance's configuration: the
/// figment `build` made, with `[server] workers` (or `[edge] workers`) merged in. (`rocket::execute`
/// sizes its runtime from Rocket's default figment, which never sees ours, so it would ignore
/// the setting.)
pub(crate) struct Runtime {
    workers: usize,
    max_blocking: usize,
    force_end: bool,
}

impl Runtime {
    pub(crate) fn of(rocket: &Rocket<Build>) -> Runtime {
        let figment = rocket.figment();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Runtime {
            workers: figment.extract_inner(rocket::Config::WORKERS).unwrap_or(cores),
            max_blocking: figment.extract_inner(rocket::Config::MAX_BLOCKING).unwrap_or(512),
            force_end: figment.extract_inner("shutdown.force").unwrap_or(true),
        }
    }

    /// Runs `future` to its end on a new runtime (Rocket's own `async_run`).
    pub(crate) fn run<R>(self, future: impl std::future::Future<Output = R> + Send) -> R {
        rocket::async_run(
            future,
            self.workers,
            self.max_blocking,
            self.force_end,
            "rocket-worker-thread",
        )
    }
}

/// `address:port` that `rocket` will listen on, for error messages.
pub(crate) fn listen_address(rocket: &Rocket<Build>) -> String {
    match rocket.figment().extract::<rocket::Config>() {
        Ok(c) => SocketAddr::new(c.address, c.port).to_string(),
        Err(_) => "the configured address".to_owned(),
    }
}

/// A launch failure as an operator reads it: a port that cannot be bound names the key
/// (`server.port`, `edge.port`) and the address, like `server.fast_port` does.
pub(crate) fn launch_error(e: rocket::Error, section: &str, at: &str) -> String {
    match e.kind() {
        rocket::error::ErrorKind::Bind(io) => {
            format!("{section}.port: cannot listen on {at}: {io}")
        }
        _ => format!("{section} failed: {e}"),
    }
}

/// Like [`run`], with `alongside` (the fast tag listener) spawned on the same runtime first.
pub fn run_alongside(
    app: App,
    alongside: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let rocket = build(app);
    let at = listen_address(&rocket);
    Runtime::of(&rocket)
        .run(async move {
            rocket::tokio::spawn(alongside);
            rocket.launch().await
        })
        .map(|_| ())
        .map_err(|e| launch_error(e, "server", &at))
}

/// Milliseconds since the Unix epoch: the only clock reading behind audit records.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// `ms` since the epoch as an RFC 3339 UTC timestamp, e.g. `2026-11-30T01:18:06.123Z`.
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}
