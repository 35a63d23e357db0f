//! `tidegate serve`: open the log, rebuild the state, and run the HTTP edge until shutdown.

use std::sync::Arc;

use std::time::Duration;

use crate::config::{Config, StoreConfig};
use crate::http::{self, App, now_ms};
use crate::http_fast;
use crate::mq::{KafkaCommandLog, KafkaLogReader, KafkaPresence, ensure_command_topic};
use crate::service::coordinator::{Boot, Coordinator, StartError};
use crate::service::plan_config;
use crate::store::{FileLog, Snapshots, StoreError};
use crate::telemetry::TagCounters;

/// Opens the configured command log and rebuilds the coordinator from it: as one replica of the
/// shared Kafka topic, or from the embedded file log under `config.data_dir` (from the newest
/// snapshot and the log after it). Warnings (a torn tail, an ignored snapshot) are printed to
/// stderr: they are expected after a crash, and worth seeing.
pub fn open_coordinator(config: &Config) -> Result<Coordinator, StartError> {
    let boot = Boot { genesis: config.genesis, zones: config.zones.clone(), now_ms: now_ms() };
    if let StoreConfig::Kafka {
        bootstrap,
        topic,
        apply_timeout_ms,
        allow_under_replicated,
        skip_offsets,
        ..
    } = &config.store
    {
        let shared = |e: crate::mq::MqError| StoreError::Shared {
            log: format!("kafka topic {topic} at {bootstrap}"),
            reason: e.to_string(),
        };
        let wait = Duration::from_millis(*apply_timeout_ms);
        // Each replica keeps its own snapshot (positions are Kafka offsets) in its data dir.
        std::fs::create_dir_all(&config.data_dir).map_err(|source| StoreError::Io {
            action: "create data directory",
            path: config.data_dir.clone(),
            source,
        })?;
        let options = |offline: Option<String>| crate::service::coordinator::SharedOptions {
            apply_wait: wait,
            skip_offsets: skip_offsets.clone(),
            offline,
        };
        // Brokers that are down at start-up are not a reason to exit (an orchestrator restarting
        // every replica in a loop during a broker outage helps nobody): with a snapshot, the
        // replica serves reads from it at once and takes changes once the brokers answer and the
        // topic passes its checks; without one, it waits for them.
        if let Err(e) = crate::mq::brokers_reachable(bootstrap, Duration::from_secs(2)) {
            let why = format!("the Kafka brokers at {bootstrap} do not answer ({e})");
            if config.data_dir.join(crate::store::SNAPSHOT_FILE).exists() {
                let log = KafkaCommandLog::new(bootstrap, topic).map_err(shared)?;
                let min_insync = log.min_insync_handle();
                let reader = KafkaLogReader::new(bootstrap, topic).map_err(shared)?;
                let snapshots = Snapshots::new(&config.data_dir, config.snapshot_every);
                match Coordinator::start_shared(
                    Box::new(log),
                    Box::new(reader),
                    Some(snapshots),
                    boot.clone(),
                    options(Some(why.clone())),
                ) {
                    Ok(started) => {
                        set_history_reader(&started.coordinator, bootstrap, topic);
                        tracing::warn!(
                            event = "started_offline",
                            "{why}; serving reads from the snapshot, changes wait until they answer"
                        );
                        let online = started.coordinator.offline_handle();
                        let (bootstrap, topic) = (bootstrap.clone(), topic.clone());
                        let allow = *allow_under_replicated;
                        std::thread::Builder::new()
                            .name("tidegate-brokers".into())
                            .spawn(move || {
                                let report = wait_for_topic(&bootstrap, &topic, allow);
                                match report {
                                    Ok(report) => {
                                        min_insync.store(
                                            report.min_insync.unwrap_or(1).max(1),
                                            std::sync::atomic::Ordering::SeqCst,
                                        );
                                        if let Some(flag) = online {
                                            *flag.lock().unwrap_or_else(|p| p.into_inner()) = None;
                                        }
                                        tracing::info!(
                                            event = "online",
                                            "the Kafka brokers at {bootstrap} answer; changes are accepted"
                                        );
                                    }
                                    Err(e) => tracing::error!(
                                        event = "topic_refused",
                                        "the command topic cannot be used ({e}); this replica keeps serving reads only"
                                    ),
                                }
                            })
                            .map_err(|e| shared(crate::mq::MqError::Kafka(e.to_string())))?;
                        return Ok(announce_start(started));
                    }
                    Err(e) => tracing::warn!(
                        "{why}, and the snapshot cannot be served ({e}); waiting for them"
                    ),
                }
            }
        }
        let report = wait_for_topic(bootstrap, topic, *allow_under_replicated).map_err(shared)?;
        if report.created {
            tracing::info!(
                "created command topic `{topic}` (1 partition, replication factor {} of {} brokers)",
                report.replication,
                report.brokers
            );
        }
        let log = KafkaCommandLog::new(bootstrap, topic)
            .map_err(shared)?
            .with_min_insync(report.min_insync.unwrap_or(1));
        let reader = KafkaLogReader::new(bootstrap, topic).map_err(shared)?;
        let snapshots = Snapshots::new(&config.data_dir, config.snapshot_every);
        let started = Coordinator::start_shared(
            Box::new(log),
            Box::new(reader),
            Some(snapshots),
            boot,
            options(None),
        )?;
        set_history_reader(&started.coordinator, bootstrap, topic);
        return Ok(announce_start(started));
    }
    let log = FileLog::open(&config.data_dir)?;
    let snapshots = Snapshots::new(&config.data_dir, config.snapshot_every);
    let started = Coordinator::start(Box::new(log), Some(snapshots), boot)?;
    Ok(announce_start(started))
}

/// Audit pages older than the in-memory trail are read from the topic's first record by a
/// reader of their own (`GET /v1/audit?before=`).
fn set_history_reader(coordinator: &Coordinator, bootstrap: &str, topic: &str) {
    let (history_bootstrap, history_topic) = (bootstrap.to_owned(), topic.to_owned());
    coordinator.set_history_reader(Box::new(move || {
        let reader = KafkaLogReader::new(&history_bootstrap, &history_topic).map_err(|e| {
            StoreError::Shared {
                log: format!("kafka topic {history_topic}"),
                reason: e.to_string(),
            }
        })?;
        Ok(Box::new(reader) as Box<dyn crate::store::LogReader>)
    }));
}

/// Waits until the brokers at `bootstrap` answer (a warning, then a retry every 2 s), then
/// creates or checks the command topic (a refusal is returned, not retried).
fn wait_for_topic(
    bootstrap: &str,
    topic: &str,
    allow_under_replicated: bool,
) -> Result<crate::mq::TopicReport, crate::mq::MqError> {
    let mut waited = false;
    while let Err(e) = crate::mq::brokers_reachable(bootstrap, Duration::from_secs(2)) {
        if !waited {
            tracing::warn!(
                "the Kafka brokers at {bootstrap} do not answer ({e}); retrying every 2 s until they do"
            );
            waited = true;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    if waited {
        tracing::info!("the Kafka brokers at {bootstrap} answer; starting");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| crate::mq::MqError::Kafka(e.to_string()))?;
    runtime.block_on(ensure_command_topic(bootstrap, topic, allow_under_replicated))
}

/// Prints what start-up found worth a warning, and whether it began from a snapshot.
fn announce_start(started: crate::service::coordinator::Started) -> Coordinator {
    for warning in &started.warnings {
        tracing::warn!("{warning}");
    }
    if started.from_snapshot {
        tracing::info!("started from the snapshot, then the log after it");
    }
    started.coordinator
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn serve(config: Config) -> Result<(), String> {
    let config = Arc::new(config);
    let coordinator = open_coordinator(&config).map_err(|e| e.to_string())?;
    let table = coordinator.table();
    // Every live zone's share, from the table (with three zones, green is not `100 - blue`).
    let shares: Vec<String> = table
        .zones()
        .live()
        .map(|z| {
            let percent = f64::from(table.units_of(z)) * 100.0 / f64::from(table.units());
            format!("{percent}% {} in {}", table.lane(z), table.zone_of(z))
        })
        .collect();
    tracing::info!(
        "routing version {} ({}); log: {}",
        table.version(),
        shares.join(", "),
        coordinator.log_description()
    );
    if config.subscriber_stale_after_ms < crate::service::subscribers::RECONNECT_GRACE_MS {
        tracing::warn!(
            stale_after_ms = config.subscriber_stale_after_ms,
            "subscribers.stale_after is below 10s: it caps the grace a loss-less change waits for the subscribers of a replica that went silent, and a Router notices a silent replica only after its stall bound (8s by default), so a switch may come while such a subscriber still holds the table from before the freeze (docs/src/drains.md)"
        );
    }
    if config.operators.is_empty() {
        tracing::info!(
            "no operators configured, so changes are refused; run `tidegate token new --name NAME`"
        );
    }
    let declared = plan_config::parse_declared(
        &config.declared_plans,
        &config.zones,
        coordinator.table().units(),
    )
    .map_err(|e| e.to_string())?;
    let appended = plan_config::apply_declared(&coordinator, &declared, now_ms())
        .map_err(|e| format!("cannot store the plans declared in config: {e}"))?;
    for name in appended {
        tracing::info!("plan {name} appended to the log from [plans.{name}] in config");
    }
    let coordinator = Arc::new(coordinator);
    let app = App::new(Arc::clone(&coordinator), Arc::clone(&config));
    start_confirmations(&coordinator, &config);
    if let StoreConfig::Kafka { bootstrap, topic, presence_key, .. } = &config.store {
        if presence_key.is_none() {
            tracing::warn!(
                "store.kafka.presence_key is not set: this replica's announcements and gate reports on `{}` are not signed, and it takes in any message written there; whoever can write to that topic can steer its drain, plan and trigger gates. Set the same 64-hex-digit key on every replica (docs/src/trust-model.md)",
                crate::mq::presence_topic(topic)
            );
        }
        // Replicas announce themselves on `<topic>.presence`; without it, /v1/cluster lists only
        // this replica and the gates count only its own inputs, so a failure here is a warning,
        // retried in the background (a replica started while its brokers are down joins once
        // they answer), not a reason to stop serving.
        app.presence.expect_bus();
        let presence = Arc::clone(&app.presence);
        let (bootstrap, topic) = (bootstrap.clone(), topic.clone());
        let _ = std::thread::Builder::new().name("tidegate-presence-start".into()).spawn(
            move || {
                let mut warned = false;
                loop {
                    let started = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())
                        .and_then(|rt| {
                            rt.block_on(KafkaPresence::new(&bootstrap, &topic))
                                .map_err(|e| e.to_string())
                        })
                        .and_then(|bus| {
                            presence.run(Box::new(bus), now_ms).map_err(|e| e.to_string())
                        });
                    match started {
                        Ok(()) => {
                            if warned {
                                tracing::info!("announcing this replica on the presence topic now");
                            }
                            return;
                        }
                        Err(e) if !warned => {
                            tracing::warn!(
                                "cannot use the presence topic `{}`: {e}; GET /v1/cluster lists only this replica until it can (retrying every 5 s)",
                                crate::mq::presence_topic(&topic)
                            );
                            warned = true;
                        }
                        Err(_) => {}
                    }
                    std::thread::sleep(Duration::from_secs(5));
                }
            },
        );
    }
    let tagger = |handoff| http_fast::Tagger {
        coordinator: Arc::clone(&coordinator),
        config: Arc::clone(&config),
        // After `App::new`, which installs the metrics recorder: the same counters.
        counters: TagCounters::new(&coordinator.table()),
        main_port: Arc::clone(&app.bound_port),
        subscribers: Some(Arc::clone(&app.subscribers)),
        frames: Arc::clone(&app.frames),
        connections: Arc::clone(&app.connections),
        handoff,
    };
    let mut alongside: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> =
        Vec::new();
    // The main port as a dispatcher (the default, with or without TLS): bound first, so that a
    // port in use fails here naming `server.port`.
    let main = if config.fast_path {
        let (handoff, unbound) = http::dispatch::handoff();
        let at = std::net::SocketAddr::new(config.address, config.port);
        let tls = match &config.tls {
            Some(tls) => Some(http_fast::tls::acceptor(&tls.certs, &tls.key, "server.tls")?),
            None => None,
        };
        let dispatcher =
            http_fast::dispatch::Dispatcher::bind(tagger(Some(handoff)), at, "server.port", tls)?;
        let local = dispatcher.local_addr().map_err(|e| format!("server.port: {e}"))?;
        alongside.push(Box::pin(dispatcher.serve()));
        Some(unbound.at(local))
    } else {
        None
    };
    if let Some(port) = config.fast_port {
        let fast = http_fast::FastListener::bind(tagger(None), port)?;
        if let Some(at) = fast.local_addr() {
            // Tests and scripts read this line for the fast port (before Rocket's own line).
            println!("tidegate fast tag listener at http://{at}");
        }
        alongside.push(Box::pin(fast.serve()));
    }
    let served = match main {
        Some(listener) => http::dispatch::launch(http::build(app), listener, alongside, "server"),
        None => http::run_alongside(app, async move {
            for task in alongside {
                tokio::spawn(task);
            }
        }),
    };
    // Clean shutdown: the next start reads this snapshot and no log entry at all.
    if let Err(e) = coordinator.snapshot_now() {
        tracing::warn!("could not write a snapshot at shutdown: {e}");
    }
    served
}

/// Keeps this replica's table confirmed (`Coordinator::confirm`, every third of the lease) and
/// the confirmation's age published (every 500 ms), each on a thread of its own: a confirmation
/// blocks while the log does not answer, which is exactly when its age must keep growing.
fn start_confirmations(
    coordinator: &Arc<crate::service::coordinator::Coordinator>,
    config: &Config,
) {
    let lease = config.lease;
    let every = Duration::from_millis((lease.lease_ms / 3).max(100));
    if coordinator.is_shared() {
        let (coordinator, holder) = (
            Arc::clone(coordinator),
            config.node.as_ref().map_or_else(|| "replica".to_owned(), |n| n.id.clone()),
        );
        let _ = std::thread::Builder::new().name("tidegate-confirm".into()).spawn(move || {
            let mut failing = false;
            loop {
                let started = std::time::Instant::now();
                match coordinator.confirm(&holder, now_ms(), lease.lease_ms) {
                    Ok(()) if failing => {
                        tracing::info!(event = "table_confirmed", "this replica confirms its table through the log again");
                        failing = false;
                    }
                    Ok(()) => {}
                    Err(e) if !failing => {
                        tracing::warn!(event = "table_unconfirmed", error = %e, "cannot confirm this replica's table through the log ({e}); its subscribers' write checks answer unconfirmed once their lease runs out");
                        failing = true;
                    }
                    Err(_) => {}
                }
                std::thread::sleep(every.saturating_sub(started.elapsed()));
            }
        });
    }
    let coordinator = Arc::clone(coordinator);
    let _ = std::thread::Builder::new().name("tidegate-confirm-age".into()).spawn(move || {
        loop {
            let now = now_ms();
            let age =
                coordinator.confirmed_at_ms(now).map(|at| now.saturating_sub(at) as f64 / 1000.0);
            crate::telemetry::publish_lease(age, lease.lease_ms as f64 / 1000.0);
            std::thread::sleep(Duration::from_millis(500));
        }
    });
}
