//! The lane consumer: registers with the coordinator, reads exactly the partitions it is granted
//! (`assign()`, never group subscription), commits to its Kafka group, and hands partitions over
//! without losing or re-reading committed work.
//!
//! The contract is Kafka's usual one: a message returned by [`LaneConsumer::next`] counts as
//! processed when `next` is called again (or on [`LaneConsumer::commit`] / `close`). Processed
//! offsets are committed every `commit_interval`, and always before a partition is released.
//!
//! Handover, step by step. A background task heartbeats every `heartbeat_interval`, reporting
//! the partitions this consumer still holds, and keeps the coordinator's answer. Inside `next`,
//! between two messages, the consumer compares that answer with what it reads:
//! 1. revoked partitions: stop reading them, commit their processed offsets (synchronously), and
//!    only then stop reporting them, which is what lets the coordinator grant them to the next
//!    owner;
//! 2. granted partitions: look up the group's committed offset and start reading there.
//!
//! The coordinator never grants a partition that another live member still reports, so the next
//! owner starts exactly at the last commit. A member that loses contact with the coordinator for
//! a whole session timeout (or is told it is unknown) stops reading everything *without*
//! committing, because its partitions may already have been handed over: its uncommitted
//! messages are read again by the next owner (at-least-once for uncommitted work only).
//!
//! Per-user order across a move (the handover). When the table moves a user to another zone,
//! their next messages go to another partition, read by another consumer, while the old one may
//! still be working through the user's earlier messages. So the first record of a partition at
//! a routing version newer than any before it (the producer's switch marker, or a message whose
//! route header says so) is held back: the consumer notes the high
//! watermark of every other partition of the topic, commits the held partition up to that
//! message with the marker `tgv=<version>` in the commit's metadata ("everything before the
//! committed offset is processed, and the message there is at this version or newer"), and hands
//! the message out only once every other partition has either processed up to its noted
//! watermark or committed a marker at least as new. The lane producer waits for its earlier
//! messages to be acknowledged before it produces the first one at a new version, so every
//! earlier message of the user is below those watermarks or before that marker. Partitions this
//! consumer reads itself are judged from its own offsets; the others from the group's commits
//! (all zones commit to the same Kafka group). A handover waits at most
//! [`ConsumerSettings::handover`] (a zone whose consumers are all gone cannot answer), then goes
//! on and counts `outcome="timed_out"`. See docs/src/mq-lanes.md for what it guarantees.
//!
//! With coordinator replicas (`coordinator` is a comma-separated list), membership calls go to
//! the lane authority and fail over to the next replica (`crate::lanes`). Heartbeats carry
//! the zone, topic and partition count, so a replica that became the authority adopts this
//! member with what it reports, and the consumer keeps reading without registering again. The
//! report is what it holds *and* what its last answer let it read: a new authority must not
//! hand out a partition this consumer may be about to start on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics::Counter;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::task::JoinHandle;

use tidegate_core::{LaneConfig, ZoneId};

use super::{
    MqError, QUERY_TIMEOUT, client_config, handover_counter, lane_consumed_counter, lane_shape,
    partition_count, route_header,
};
use crate::lanes::{Assigned, LaneClient, LaneClientError, Reads};

/// Runs a blocking group-coordinator call, retrying the errors Kafka itself calls retriable.
///
/// Why: right after a broker starts, or while the group coordinator moves, offset fetches and
/// commits answer `NOT_COORDINATOR` or `COORDINATOR_LOAD_IN_PROGRESS` for a moment. Those say
/// "ask again shortly", not "this consumer is broken"; giving up would stop a healthy consumer.
/// Both calls are idempotent (committing the same offsets twice is harmless).
/// What one commit records once the broker took it: partition, offset, marker version.
type Committed = (u32, i64, u64);

/// A commit running as a task of its own, with what it records when done.
type InFlightCommit = (JoinHandle<Result<(), MqError>>, Vec<Committed>);

async fn retrying<T: Send + 'static>(
    what: &'static str,
    call: impl Fn() -> rdkafka::error::KafkaResult<T> + Send + Sync + 'static,
) -> Result<T, MqError> {
    use rdkafka::types::RDKafkaErrorCode as Code;
    let call = Arc::new(call);
    let mut delay = Duration::from_millis(50);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let attempt = Arc::clone(&call);
        let result = tokio::task::spawn_blocking(move || attempt())
            .await
            .map_err(|e| MqError::Kafka(e.to_string()))?;
        let error = match result {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let retriable = matches!(
            error.rdkafka_error_code(),
            Some(
                Code::NotCoordinator
                    | Code::CoordinatorLoadInProgress
                    | Code::CoordinatorNotAvailable
                    | Code::RequestTimedOut
                    | Code::OperationTimedOut
                    | Code::BrokerTransportFailure
                    | Code::AllBrokersDown
            )
        );
        if !retriable || Instant::now() + delay > deadline {
            return Err(MqError::Kafka(format!("{what}: {error}")));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

/// Where the consumer runs and whom it talks to.
#[derive(Clone, Debug)]
pub struct ConsumerSettings {
    /// Coordinator base URL, e.g. `http://127.0.0.1:8080`, or several replicas' URLs separated
    /// by commas (membership calls fail over between them).
    pub coordinator: String,
    /// Service (or operator) token: lane membership is a write, so the coordinator requires one.
    pub token: Option<String>,
    /// For an `https://` coordinator: trust only this CA (PEM) instead of the system's roots.
    /// Defaults to `TIDEGATE_CA_FILE` when that is set.
    pub ca_file: Option<std::path::PathBuf>,
    pub bootstrap: String,
    pub topic: String,
    /// The lane group: the coordinator's membership group *and* the Kafka group offsets are
    /// committed to.
    pub group: String,
    /// The zone this consumer runs in (one of the coordinator's colour zones).
    pub zone: String,
    /// A readable prefix for the member ID (default: the zone). The coordinator appends 64
    /// random bits, so every registration, also after a restart, gets a new ID.
    pub member_name: Option<String>,
    pub commit_interval: Duration,
    /// Per-user order across moves (the module documentation): the longest a partition's first
    /// message at a new routing version waits for the other partitions to pass that version.
    /// `None` turns the handover off: messages are handed out as they arrive, and a moved
    /// user's new messages may be processed before their old ones. Default 30 s.
    pub handover: Option<Duration>,
    /// Extra librdkafka properties for the Kafka consumer.
    pub extra: Vec<(String, String)>,
}

impl ConsumerSettings {
    pub fn new(coordinator: &str, bootstrap: &str, topic: &str, group: &str, zone: &str) -> Self {
        ConsumerSettings {
            coordinator: coordinator.to_owned(),
            token: None,
            ca_file: crate::tls::ca_file_from_env(),
            bootstrap: bootstrap.to_owned(),
            topic: topic.to_owned(),
            group: group.to_owned(),
            zone: zone.to_owned(),
            member_name: None,
            commit_interval: Duration::from_secs(1),
            handover: Some(Duration::from_secs(30)),
            extra: Vec::new(),
        }
    }
}

/// A message handed to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneMessage {
    pub partition: u32,
    pub offset: i64,
    /// The producer's key: the user ID for messages from a `LaneProducer`.
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    /// The colour from the message's route header (`tg`, or an older producer's
    /// `tidegate-route` or `tidegate-color`); without one, from the last switch marker read in
    /// the partition; before any, the half the partition is in.
    pub color: Option<ZoneId>,
    /// The routing version from the message's route header (`tg`, `tidegate-route` or
    /// `tidegate-version`); without one, from the partition's last switch marker, or the `tgv=`
    /// commit marker the partition was granted with; `None` when there is neither.
    pub routing_version: Option<u64>,
}

/// State shared with the heartbeat task.
struct Shared {
    member_id: String,
    /// Presented with every heartbeat and the leave: proves we are the member we claim.
    member_secret: String,
    /// What this consumer reports as still held.
    holding: Vec<u32>,
    /// The coordinator's latest answer.
    latest: Option<Assigned>,
    last_ok: Instant,
    /// The coordinator said it does not know this member: re-register.
    gone: bool,
    last_error: Option<String>,
}

struct Held {
    /// Next offset to hand out; earlier offsets are duplicates and are skipped.
    next: i64,
    /// Offset to commit: one past the last processed message.
    processed: Option<i64>,
    committed: Option<i64>,
    /// The newest routing version this partition's reading has reached (the handover marker
    /// committed with its offsets); 0 before any.
    passed: u64,
    committed_passed: u64,
    /// Granted with a previous owner's marker: the message at this (committed) offset may be
    /// the one it was holding back, so it is held again whatever its version.
    recheck: Option<i64>,
    /// The colour of the last switch marker read here: the colour of the messages after it
    /// that carry no route header.
    zone: Option<ZoneId>,
}

/// A partition held back at its first message of a new routing version.
struct Pause {
    message: LaneMessage,
    /// The held record is a switch marker: released, it counts as processed and is not handed
    /// out.
    switch: bool,
    version: u64,
    since: Instant,
    /// Every other partition's (low, high) watermarks after the message was read: the user's
    /// earlier messages are all below them. Taken by a probe (`LaneConsumer::spawn_probe`).
    snapshot: Option<BTreeMap<u32, (i64, i64)>>,
    /// The handover is decided (and counted); the message goes out once the partition is
    /// fetching again.
    released: bool,
}

/// One finished handover, as [`LaneConsumer::observe_handovers`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handover {
    pub partition: u32,
    /// The routing version the partition moved to.
    pub version: u64,
    /// How long its first message at that version was held.
    pub waited: Duration,
    /// The wait reached [`ConsumerSettings::handover`] before every other partition had passed.
    pub timed_out: bool,
}

/// What a handover probe found (see `LaneConsumer::spawn_probe`).
struct Probe {
    /// The pauses (partition, version) the watermarks were taken for.
    for_pauses: Vec<(u32, u64)>,
    /// Every partition's (low, high) watermarks, when asked for.
    marks: Option<BTreeMap<u32, (i64, i64)>>,
    /// The group's committed offset and marker of each partition other members read.
    commits: BTreeMap<u32, (Option<i64>, u64)>,
}

/// How often a held partition asks the group's committed offsets whether it may go on.
const HANDOVER_POLL: Duration = Duration::from_millis(20);

/// The commit metadata of a partition whose reading has reached `version`.
fn marker(version: u64) -> String {
    format!("tgv={version}")
}

/// The version in a commit's metadata (0 when it carries none: a consumer before handovers).
fn parse_marker(metadata: &str) -> u64 {
    metadata.strip_prefix("tgv=").and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// A partition's committed offset (`None` where the group never committed) and handover marker
/// in an answer to `committed_offsets`.
fn committed_at(committed: &TopicPartitionList, topic: &str, partition: u32) -> (Option<i64>, u64) {
    let found = committed.find_partition(topic, partition as i32);
    let offset = found.as_ref().and_then(|e| match e.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    });
    (offset, found.as_ref().map_or(0, |e| parse_marker(e.metadata())))
}

pub struct LaneConsumer {
    settings: ConsumerSettings,
    consumer: Arc<StreamConsumer>,
    client: LaneClient,
    shared: Arc<Mutex<Shared>>,
    heartbeats: JoinHandle<()>,
    held: BTreeMap<u32, Held>,
    delivered: Option<(u32, i64)>,
    last_commit: Instant,
    session_timeout: Duration,
    poll_slice: Duration,
    consumed: Counter,
    lane: LaneConfig,
    /// Told every change of the partitions this consumer reads (tests check handovers with it).
    observer: Option<PartitionObserver>,
    paused: BTreeMap<u32, Pause>,
    next_peer_check: Instant,
    probe: Option<JoinHandle<Result<Probe, rdkafka::error::KafkaError>>>,
    /// A commit in flight and what it commits (partition, offset, marker version): it runs as
    /// a task of its own, so a `next` cancelled while it waits for the broker loses neither the
    /// commit nor its bookkeeping, and the next call waits for the same commit. (Awaited in
    /// place, a commit slower than the caller's timeout was started again on every call and
    /// never recorded: under load the handovers it gates never released.)
    committing: Option<InFlightCommit>,
    peer_commits: Option<BTreeMap<u32, (Option<i64>, u64)>>,
    handovers: [Counter; 2],
    handover_observer: Option<HandoverObserver>,
}

type HandoverObserver = Box<dyn Fn(&Handover) + Send + Sync>;

/// See [`LaneConsumer::observe_partitions`].
type PartitionObserver = Box<dyn Fn(&BTreeSet<u32>) + Send + Sync>;

/// How long one membership call may take before the next replica is tried: well under a
/// session, so a paused replica cannot eat a consumer's session on its own.
const MEMBERSHIP_TIMEOUT: Duration = Duration::from_secs(2);

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

impl LaneConsumer {
    /// Registers with the coordinator and starts heartbeating. Reads nothing until the first
    /// call to [`next`](Self::next).
    pub async fn start(settings: ConsumerSettings) -> Result<LaneConsumer, MqError> {
        let (bootstrap, topic) = (settings.bootstrap.clone(), settings.topic.clone());
        let partitions = tokio::task::spawn_blocking(move || partition_count(&bootstrap, &topic))
            .await
            .map_err(|e| MqError::Kafka(e.to_string()))??;
        // Only the bounds: the coordinator checks the count against its zones on registration
        // (two zones need an even count, three a multiple of 3, so 9 is fine there).
        let lane = lane_shape(partitions)
            .map_err(|source| MqError::Lane { topic: settings.topic.clone(), source })?;
        let mut config = client_config(&settings.bootstrap, &settings.extra);
        config
            .set("group.id", &settings.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        let consumer: StreamConsumer = config.create()?;
        let client = LaneClient::with_ca_file(
            &settings.coordinator,
            settings.token.clone(),
            MEMBERSHIP_TIMEOUT,
            settings.ca_file.as_deref(),
        );
        // The coordinator starts the session when the request reaches it, so this side counts
        // from the moment the request left, never from the (later) answer.
        let requested = Instant::now();
        let assigned = register(&client, &settings, lane.partitions()).await?;
        let session_timeout = Duration::from_millis(assigned.session_timeout_ms);
        let heartbeat = Duration::from_millis(assigned.heartbeat_interval_ms.max(10));
        let shared = Arc::new(Mutex::new(Shared {
            member_id: assigned.member_id.clone(),
            member_secret: assigned.member_secret.clone().unwrap_or_default(),
            holding: Vec::new(),
            latest: Some(assigned),
            last_ok: requested,
            gone: false,
            last_error: None,
        }));
        let reads = Reads {
            zone: settings.zone.clone(),
            topic: settings.topic.clone(),
            partitions: lane.partitions(),
        };
        let heartbeats = tokio::spawn(heartbeat_loop(
            client.clone(),
            settings.group.clone(),
            reads,
            Arc::clone(&shared),
            heartbeat,
        ));
        let settings_labels =
            (settings.group.clone(), settings.topic.clone(), settings.zone.clone());
        Ok(LaneConsumer {
            consumed: lane_consumed_counter(&settings.group, &settings.topic, &settings.zone),
            settings,
            consumer: Arc::new(consumer),
            client,
            shared,
            heartbeats,
            held: BTreeMap::new(),
            delivered: None,
            last_commit: Instant::now(),
            session_timeout,
            poll_slice: heartbeat.min(Duration::from_millis(100)),
            lane,
            observer: None,
            paused: BTreeMap::new(),
            next_peer_check: Instant::now(),
            probe: None,
            committing: None,
            peer_commits: None,
            handovers: ["released", "timed_out"]
                .map(|outcome| handover_counter(&settings_labels, outcome)),
            handover_observer: None,
        })
    }

    /// Calls `observer` after every handover (see the module documentation).
    pub fn observe_handovers(&mut self, observer: impl Fn(&Handover) + Send + Sync + 'static) {
        self.handover_observer = Some(Box::new(observer));
    }

    /// Calls `observer` with the partitions this consumer reads whenever they change: after a
    /// released partition is committed and dropped, and before a granted one is read.
    pub fn observe_partitions(
        &mut self,
        observer: impl Fn(&BTreeSet<u32>) + Send + Sync + 'static,
    ) {
        self.observer = Some(Box::new(observer));
    }

    fn tell_observer(&self) {
        if let Some(observer) = &self.observer {
            observer(&self.held.keys().copied().collect());
        }
    }

    /// This consumer's member ID in the coordinator's group.
    pub fn member_id(&self) -> String {
        lock(&self.shared).member_id.clone()
    }

    /// The topic's partition count, cut for the fewest zones it divides into (the halves for an
    /// even count): the consumer does not know the table's zones, the coordinator does.
    pub fn lane(&self) -> LaneConfig {
        self.lane
    }

    /// The partitions this consumer reads now.
    pub fn partitions(&self) -> Vec<u32> {
        self.held.keys().copied().collect()
    }

    /// The coordinator's assignment generation as last seen.
    pub fn generation(&self) -> Option<u64> {
        lock(&self.shared).latest.as_ref().map(|a| a.generation)
    }

    /// The last error talking to the coordinator, if the last heartbeat failed.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.shared).last_error.clone()
    }

    /// The next message. Calling it again marks the previous one processed. Waits as long as
    /// it takes; wrap it in `tokio::time::timeout` to bound the wait.
    pub async fn next(&mut self) -> Result<LaneMessage, MqError> {
        self.mark_processed();
        loop {
            self.sync_assignment().await?;
            if self.last_commit.elapsed() >= self.settings.commit_interval {
                self.commit().await?;
            }
            if let Some(out) = self.release_handovers().await? {
                self.delivered = Some((out.partition, out.offset));
                self.consumed.increment(1);
                return Ok(out);
            }
            let slice = if self.paused.is_empty() { self.poll_slice } else { HANDOVER_POLL };
            let consumer = Arc::clone(&self.consumer);
            let received = tokio::time::timeout(slice, consumer.recv()).await;
            let message = match received {
                // Nothing arrived for a poll slice: caught up. Commit what is processed now
                // rather than at the next interval, so the other zones' handovers (which wait
                // for this partition's commits) and the lag readings see it at once.
                Err(_) => {
                    if self.held.values().any(|h| h.processed != h.committed) {
                        self.commit().await?;
                    }
                    continue;
                }
                // Transport errors (a broker restarting, a leader moving) are reported here
                // while librdkafka retries by itself; the assignment stays as it is.
                Ok(Err(_)) => continue,
                Ok(Ok(message)) => message,
            };
            if let Some(out) = self.accept(&message) {
                self.delivered = Some((out.partition, out.offset));
                self.consumed.increment(1);
                return Ok(out);
            }
        }
    }

    /// Filters what librdkafka hands over: partitions no longer held and offsets already handed
    /// out (after a re-assignment librdkafka may fetch a few again) are dropped.
    ///
    /// The first message of a partition at a routing version newer than any it reached is held
    /// back (the handover): the partition pauses and the message waits in `paused`.
    fn accept(&mut self, m: &BorrowedMessage<'_>) -> Option<LaneMessage> {
        let partition = u32::try_from(m.partition()).ok()?;
        if self.paused.contains_key(&partition) {
            // Fetched before the pause took effect: read again once it is released.
            return None;
        }
        let lane = self.lane;
        let held = self.held.get_mut(&partition)?;
        if m.topic() != self.settings.topic || m.offset() < held.next {
            return None;
        }
        held.next = m.offset() + 1;
        // A message at the offset a previous owner committed with its marker may be the one it
        // held back and never released: judge it again.
        let recheck = held.recheck == Some(m.offset());
        if held.recheck.is_some_and(|at| m.offset() >= at) {
            held.recheck = None;
        }
        let headers = || m.headers().into_iter().flat_map(|h| h.iter().map(|h| (h.key, h.value)));
        // The version a record states itself (a switch marker, or a route header): only those
        // can start a handover. A message without a route header is at its partition's version.
        let (color, stated, switch) = match route_header::switch(headers()) {
            Some(Ok((zone, version))) => {
                held.zone = Some(zone);
                (Some(zone), Some(version), true)
            }
            // A marker whose value does not decode moves nothing; it is skipped like any marker.
            Some(Err(_)) => (None, None, true),
            None => {
                let (color, version) = route_header::read(headers());
                (color, version, false)
            }
        };
        let message = LaneMessage {
            partition,
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            // Without a route header or a marker read yet: the zone of the partition's range as
            // this consumer cuts the topic (the fewest zones its partition count divides into).
            color: color.or(held.zone).or_else(|| lane.color_of(partition).ok()),
            routing_version: stated.or((held.passed > 0).then_some(held.passed)),
        };
        if let (Some(_), Some(version)) = (self.settings.handover, stated)
            && (version > held.passed || (recheck && version >= held.passed))
        {
            // Everything before this record is processed (the previous one was marked when
            // `next` was called again), and the reading has reached `version` here.
            held.processed = Some(held.processed.map_or(m.offset(), |p| p.max(m.offset())));
            held.passed = version;
            self.paused.insert(
                partition,
                Pause {
                    message,
                    switch,
                    version,
                    since: Instant::now(),
                    snapshot: None,
                    released: false,
                },
            );
            self.pause_fetching();
            return None;
        }
        if switch {
            // Not held (no handover, or a version the reading already reached): processed, as
            // everything before it is.
            held.processed = Some(held.processed.map_or(m.offset() + 1, |p| p.max(m.offset() + 1)));
            held.passed = held.passed.max(stated.unwrap_or(0));
            return None;
        }
        Some(message)
    }

    /// Stops librdkafka fetching the held-back partitions (a re-assignment resumes them).
    fn pause_fetching(&self) {
        if self.paused.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for p in self.paused.keys() {
            tpl.add_partition(&self.settings.topic, *p as i32);
        }
        // A failed pause only costs fetching: `accept` drops what arrives for them.
        let _ = self.consumer.pause(&tpl);
    }

    /// Hands out a held-back message once every other partition has passed its version (or the
    /// handover bound is reached). Publishes the held partitions' markers, and asks Kafka for
    /// watermarks and the group's commits in a background probe whose answer waits in `self`:
    /// `next` may be cancelled at any await (callers bound it with a timeout), and neither a
    /// held message nor a probe's progress may depend on one call surviving.
    async fn release_handovers(&mut self) -> Result<Option<LaneMessage>, MqError> {
        if self.paused.is_empty() {
            return Ok(None);
        }
        let held_back: Vec<u32> = self.paused.keys().copied().collect();
        self.commit_partitions(&held_back).await?;
        self.take_probe().await;
        let unsnapped = self.paused.values().any(|pause| pause.snapshot.is_none());
        if self.probe.is_none() && (unsnapped || Instant::now() >= self.next_peer_check) {
            self.next_peer_check = Instant::now() + HANDOVER_POLL;
            self.spawn_probe();
        }
        let limit = self.settings.handover.unwrap_or(Duration::ZERO);
        let ready = self.paused.iter().find_map(|(p, pause)| {
            if pause.released {
                return None;
            }
            let timed_out = pause.since.elapsed() >= limit;
            let passed = match (&pause.snapshot, &self.peer_commits) {
                (Some(snapshot), Some(commits)) => snapshot.iter().all(|(q, (low, high))| {
                    let (offset, passed) = match self.held.get(q) {
                        Some(h) => (h.processed, h.passed),
                        None => commits.get(q).copied().unwrap_or((None, 0)),
                    };
                    offset.unwrap_or(*low) >= *high || passed >= pause.version
                }),
                _ => false,
            };
            (passed || timed_out).then_some((*p, passed))
        });
        if let Some((p, passed)) = ready
            && let Some(pause) = self.paused.get_mut(&p)
        {
            pause.released = true;
            let waited = pause.since.elapsed();
            self.handovers[usize::from(!passed)].increment(1);
            if let Some(observer) = &self.handover_observer {
                observer(&Handover {
                    partition: p,
                    version: pause.version,
                    waited,
                    timed_out: !passed,
                });
            }
        }
        let Some(p) = self.paused.iter().find(|(_, pause)| pause.released).map(|(p, _)| *p) else {
            return Ok(None);
        };
        // Fetch the partition again right after the held message, and only it: re-assigning
        // everything would drop every partition's prefetched messages at each handover. The
        // message stays held until the seek is done (a cancelled `next` repeats it; both
        // calls are idempotent), so no await comes between taking it and handing it out.
        let next = self.held.get(&p).map_or(0, |h| h.next);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.settings.topic, p as i32);
        self.consumer.resume(&tpl)?;
        let consumer = Arc::clone(&self.consumer);
        let topic = self.settings.topic.clone();
        retrying("seek", move || {
            consumer.seek(&topic, p as i32, Offset::Offset(next), Duration::from_secs(5))
        })
        .await?;
        let pause = self.paused.remove(&p).expect("found above");
        if pause.switch {
            // A switch marker is never handed out: released, it is processed.
            if let Some(held) = self.held.get_mut(&p) {
                let after = pause.message.offset + 1;
                held.processed = Some(held.processed.map_or(after, |o| o.max(after)));
            }
            return Ok(None);
        }
        Ok(Some(pause.message))
    }

    /// Starts a probe: every partition's watermarks when a pause still needs its snapshot (they
    /// are taken after its message was read, which is what makes them a bound), and the group's
    /// commits of the partitions other members read.
    fn spawn_probe(&mut self) {
        let partitions = self.lane.partitions();
        let for_pauses: Vec<(u32, u64)> = self
            .paused
            .iter()
            .filter(|(_, pause)| pause.snapshot.is_none())
            .map(|(p, pause)| (*p, pause.version))
            .collect();
        let watermarks = !for_pauses.is_empty();
        let foreign: Vec<u32> = (0..partitions).filter(|q| !self.held.contains_key(q)).collect();
        let consumer = Arc::clone(&self.consumer);
        let topic = self.settings.topic.clone();
        self.probe = Some(tokio::task::spawn_blocking(move || {
            let mut marks = BTreeMap::new();
            if watermarks {
                for q in 0..partitions {
                    marks.insert(q, consumer.fetch_watermarks(&topic, q as i32, QUERY_TIMEOUT)?);
                }
            }
            let mut commits = BTreeMap::new();
            if !foreign.is_empty() {
                let mut tpl = TopicPartitionList::new();
                for q in &foreign {
                    tpl.add_partition(&topic, *q as i32);
                }
                let committed = consumer.committed_offsets(tpl, QUERY_TIMEOUT)?;
                for q in foreign {
                    commits.insert(q, committed_at(&committed, &topic, q));
                }
            }
            Ok(Probe { for_pauses, marks: watermarks.then_some(marks), commits })
        }));
    }

    /// Applies a finished probe's answer (a failed one is simply asked again).
    async fn take_probe(&mut self) {
        if !self.probe.as_ref().is_some_and(|probe| probe.is_finished()) {
            return;
        }
        let Some(handle) = self.probe.take() else { return };
        let Ok(Ok(probe)) = handle.await else { return };
        if let Some(marks) = &probe.marks {
            for (p, version) in &probe.for_pauses {
                if let Some(pause) = self.paused.get_mut(p)
                    && pause.version == *version
                    && pause.snapshot.is_none()
                {
                    let others = marks.iter().filter(|(q, _)| *q != p);
                    pause.snapshot = Some(others.map(|(q, m)| (*q, *m)).collect());
                }
            }
        }
        self.peer_commits = Some(probe.commits);
    }

    fn mark_processed(&mut self) {
        if let Some((partition, offset)) = self.delivered.take()
            && let Some(held) = self.held.get_mut(&partition)
        {
            held.processed = Some(offset + 1);
        }
    }

    /// Commits the processed offsets of every held partition (synchronously). The message last
    /// returned by `next` counts as processed.
    pub async fn commit(&mut self) -> Result<(), MqError> {
        self.mark_processed();
        let partitions: Vec<u32> = self.held.keys().copied().collect();
        self.commit_partitions(&partitions).await?;
        self.last_commit = Instant::now();
        Ok(())
    }

    async fn commit_partitions(&mut self, partitions: &[u32]) -> Result<(), MqError> {
        self.finish_commit().await?;
        let mut tpl = TopicPartitionList::new();
        let mut to_commit = Vec::new();
        for p in partitions {
            let Some(held) = self.held.get(p) else { continue };
            if let Some(offset) = held.processed
                && (held.committed != Some(offset) || held.committed_passed != held.passed)
            {
                tpl.add_partition_offset(&self.settings.topic, *p as i32, Offset::Offset(offset))?;
                if held.passed > 0
                    && let Some(mut element) = tpl.find_partition(&self.settings.topic, *p as i32)
                {
                    element.set_metadata(marker(held.passed));
                }
                to_commit.push((*p, offset, held.passed));
            }
        }
        if to_commit.is_empty() {
            return Ok(());
        }
        // Commit only while the session is known alive: once it may have expired, the
        // partitions may belong to another member, and our commit could move its offsets back.
        let alive = {
            let shared = lock(&self.shared);
            !shared.gone && shared.last_ok.elapsed() < self.session_timeout
        };
        if !alive {
            return Err(MqError::SessionLost);
        }
        let consumer = Arc::clone(&self.consumer);
        let task =
            tokio::spawn(retrying("commit", move || consumer.commit(&tpl, CommitMode::Sync)));
        self.committing = Some((task, to_commit));
        self.finish_commit().await
    }

    /// Waits for the commit in flight, if any, and records what it committed. Cancel-safe: a
    /// cancelled wait leaves the commit in `self.committing` for the next call.
    async fn finish_commit(&mut self) -> Result<(), MqError> {
        let Some((task, _)) = self.committing.as_mut() else { return Ok(()) };
        let result = task.await;
        let (_, committed) = self.committing.take().expect("checked above");
        result.map_err(|e| MqError::Kafka(e.to_string()))??;
        for (p, offset, passed) in committed {
            if let Some(held) = self.held.get_mut(&p) {
                held.committed = Some(offset);
                held.committed_passed = passed;
            }
        }
        Ok(())
    }

    /// Applies the coordinator's latest answer: release revoked partitions (after committing
    /// them), start reading granted ones at the group's committed offset.
    async fn sync_assignment(&mut self) -> Result<(), MqError> {
        let (gone, stale, wanted) = {
            let shared = lock(&self.shared);
            let stale = shared.last_ok.elapsed() > self.session_timeout;
            let wanted: BTreeSet<u32> = shared
                .latest
                .as_ref()
                .map(|a| a.assignment.iter().copied().collect())
                .unwrap_or_default();
            (shared.gone, stale, wanted)
        };
        if gone || stale {
            // Fenced: the partitions may already belong to someone else, so committing now
            // could move their offsets backwards. Drop everything uncommitted.
            if !self.held.is_empty() {
                self.held.clear();
                self.paused.clear();
                self.delivered = None;
                self.consumer.unassign()?;
                self.tell_observer();
                lock(&self.shared).holding.clear();
            }
            // Nor may an old answer be acted on (or claimed) once the session may be over.
            lock(&self.shared).latest = None;
            if gone {
                let requested = Instant::now();
                let assigned =
                    register(&self.client, &self.settings, self.lane.partitions()).await?;
                let mut shared = lock(&self.shared);
                shared.member_id = assigned.member_id.clone();
                shared.member_secret = assigned.member_secret.clone().unwrap_or_default();
                shared.latest = Some(assigned);
                shared.last_ok = requested;
                shared.gone = false;
            }
            return Ok(());
        }
        let held: BTreeSet<u32> = self.held.keys().copied().collect();
        if held == wanted {
            return Ok(());
        }
        let revoked: Vec<u32> = held.difference(&wanted).copied().collect();
        let added: Vec<u32> = wanted.difference(&held).copied().collect();
        if !revoked.is_empty() {
            // Commit first: if it fails, keep the partitions and report them as held, so the
            // next owner does not start before our last processed offset is in Kafka.
            self.commit_partitions(&revoked).await?;
            for p in &revoked {
                self.held.remove(p);
                // Its held-back message is not processed: the next owner reads it again.
                self.paused.remove(p);
            }
            self.tell_observer();
        }
        if !added.is_empty() {
            let mut tpl = TopicPartitionList::new();
            for p in &added {
                tpl.add_partition(&self.settings.topic, *p as i32);
            }
            let consumer = Arc::clone(&self.consumer);
            let committed = retrying("committed offsets", move || {
                consumer.committed_offsets(tpl.clone(), QUERY_TIMEOUT)
            })
            .await?;
            for p in &added {
                // With the previous owner's marker: the version its reading had reached.
                let (offset, passed) = committed_at(&committed, &self.settings.topic, *p);
                self.held.insert(
                    *p,
                    Held {
                        next: offset.unwrap_or(0),
                        processed: offset,
                        committed: offset,
                        passed,
                        committed_passed: passed,
                        recheck: offset.filter(|_| passed > 0),
                        zone: None,
                    },
                );
            }
            self.tell_observer();
        }
        self.reassign()?;
        lock(&self.shared).holding = self.held.keys().copied().collect();
        Ok(())
    }

    /// Points librdkafka at exactly the held partitions, each at its next offset (the committed
    /// offset for new ones; the beginning when the group never committed there).
    fn reassign(&mut self) -> Result<(), MqError> {
        let mut tpl = TopicPartitionList::new();
        for (p, held) in &self.held {
            let offset = if held.next > 0 { Offset::Offset(held.next) } else { Offset::Beginning };
            tpl.add_partition_offset(&self.settings.topic, *p as i32, offset)?;
        }
        self.consumer.assign(&tpl)?;
        // librdkafka keeps an application's pause across `assign` (also of a partition that
        // was revoked and granted again): resume every partition by name, then pause the
        // held-back ones.
        let mut running = TopicPartitionList::new();
        for p in self.held.keys().filter(|p| !self.paused.contains_key(p)) {
            running.add_partition(&self.settings.topic, *p as i32);
        }
        if running.count() > 0 {
            self.consumer.resume(&running)?;
        }
        self.pause_fetching();
        Ok(())
    }

    /// Commits, releases everything and leaves the group, so the partitions move on at once.
    pub async fn close(mut self) -> Result<(), MqError> {
        self.commit().await?;
        self.held.clear();
        self.paused.clear();
        self.tell_observer();
        self.consumer.unassign()?;
        self.heartbeats.abort();
        let client = self.client.clone();
        let group = self.settings.group.clone();
        let (member, secret) = {
            let s = lock(&self.shared);
            (s.member_id.clone(), s.member_secret.clone())
        };
        tokio::task::spawn_blocking(move || client.leave(&group, &member, &secret))
            .await
            .map_err(|e| MqError::Kafka(e.to_string()))??;
        Ok(())
    }
}

impl Drop for LaneConsumer {
    /// Dropping without `close` is a crash as far as the group is concerned: nothing is
    /// committed, and the partitions move on after the session timeout.
    fn drop(&mut self) {
        self.heartbeats.abort();
    }
}

async fn register(
    client: &LaneClient,
    settings: &ConsumerSettings,
    partitions: u32,
) -> Result<Assigned, MqError> {
    let client = client.clone();
    let s = settings.clone();
    let assigned = tokio::task::spawn_blocking(move || {
        client.register(&s.group, s.member_name.as_deref(), &s.zone, &s.topic, partitions)
    })
    .await
    .map_err(|e| MqError::Kafka(e.to_string()))??;
    Ok(assigned)
}

/// Heartbeats until aborted. Reports `holding` and stores the answer for `sync_assignment`.
async fn heartbeat_loop(
    client: LaneClient,
    group: String,
    reads: Reads,
    shared: Arc<Mutex<Shared>>,
    every: Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (member, secret, holding, gone) = {
            let s = lock(&shared);
            // Claimed: what it reads, and what the last answer allowed it to start reading.
            let mut claims: BTreeSet<u32> = s.holding.iter().copied().collect();
            if let Some(latest) = &s.latest {
                claims.extend(latest.assignment.iter().copied());
            }
            let claims: Vec<u32> = claims.into_iter().collect();
            (s.member_id.clone(), s.member_secret.clone(), claims, s.gone)
        };
        if gone {
            // The consumer re-registers from `next`; heartbeating an unknown member is useless.
            continue;
        }
        let c = client.clone();
        let g = group.clone();
        // The session is extended from when the heartbeat left: the coordinator extends it from
        // when the request arrived, which is later, so this side never believes in a longer
        // session than the coordinator (a slow answer cannot make two readers).
        let sent = Instant::now();
        let r = reads.clone();
        let result = tokio::task::spawn_blocking(move || {
            c.heartbeat_with(&g, &member, &secret, &holding, Some(&r))
        })
        .await;
        let mut s = lock(&shared);
        match result {
            Ok(Ok(assigned)) if assigned.member_id == s.member_id => {
                // The coordinators' member key is being rotated: the answer carries this
                // member's secret under the new key, presented from the next heartbeat on.
                if let Some(secret) = &assigned.member_secret {
                    s.member_secret = secret.clone();
                }
                s.latest = Some(assigned);
                s.last_ok = s.last_ok.max(sent);
                s.last_error = None;
            }
            // A stale answer for a member ID replaced by a re-registration meanwhile.
            Ok(Ok(_)) => {}
            Ok(Err(LaneClientError::MemberGone(why))) => {
                s.gone = true;
                s.latest = None;
                s.last_error = Some(why);
            }
            Ok(Err(e)) => s.last_error = Some(e.to_string()),
            Err(e) => s.last_error = Some(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_and_old_metadata_reads_as_none() {
        for version in [1, 12, 300, u64::MAX] {
            assert_eq!(parse_marker(&marker(version)), version);
        }
        for old in ["", "something else", "tgv=", "tgv=x", "tgv=-1"] {
            assert_eq!(parse_marker(old), 0, "{old:?}");
        }
    }
}
