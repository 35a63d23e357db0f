//! The shared command log on a Kafka topic: one partition, the total order of every change.
//!
//! Why these settings: an acknowledged change must survive the loss of any one broker, so the
//! producer is idempotent with `acks=all` (no duplicates or reordering from its own retries), the
//! topic keeps two in-sync copies before it acknowledges (`min.insync.replicas=2` at replication
//! factor 3), never elects an out-of-sync leader, and never deletes or compacts records (a
//! replica joining later replays the whole history). A topic that breaks any of that is refused
//! at start-up, naming the setting, rather than used.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{MqError, QUERY_TIMEOUT, client_config};
use crate::store::{LogEntry, LogReader, ReadRecord, SharedLog, StoreError};

/// The default topic of the shared command log.
pub const DEFAULT_COMMAND_TOPIC: &str = "tidegate.commands";

/// How long an append may wait for the brokers before its outcome counts as unknown.
const APPEND_TIMEOUT_MS: u64 = 10_000;

/// The shared log's topic, as found (or created) at start-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicReport {
    pub created: bool,
    pub replication: usize,
    pub brokers: usize,
    /// The topic's `min.insync.replicas`, when it could be read.
    pub min_insync: Option<usize>,
}

/// How long `/readyz`'s writability probe waits for the brokers.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Creates the command topic if it is missing, with safe settings, and refuses an existing topic
/// that could lose or reorder acknowledged changes.
pub async fn ensure_command_topic(
    bootstrap: &str,
    topic: &str,
    allow_under_replicated: bool,
) -> Result<TopicReport, MqError> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[]).create()?;
    let metadata = admin.inner().fetch_metadata(None, QUERY_TIMEOUT)?;
    let brokers = metadata.brokers().len();
    let existing = metadata.topics().iter().find(|t| t.name() == topic && t.error().is_none());
    let options = AdminOptions::new().operation_timeout(Some(QUERY_TIMEOUT));
    let mut created = false;
    let replication = match existing {
        Some(t) => {
            if t.partitions().len() != 1 {
                return Err(refuse(
                    topic,
                    "partitions",
                    format!(
                        "{} partitions; a command log needs exactly 1 (one total order)",
                        t.partitions().len()
                    ),
                ));
            }
            t.partitions()[0].replicas().len()
        }
        None => {
            let replication = brokers.clamp(1, 3);
            // Two copies of every acknowledged change whenever there are two brokers (with two,
            // losing one stops writes rather than risking them).
            let min_insync = if replication >= 2 { "2" } else { "1" };
            let new = NewTopic::new(topic, 1, TopicReplication::Fixed(replication as i32))
                .set("min.insync.replicas", min_insync)
                .set("unclean.leader.election.enable", "false")
                .set("cleanup.policy", "delete")
                .set("retention.ms", "-1")
                .set("retention.bytes", "-1");
            for result in admin.create_topics([&new], &options).await? {
                match result {
                    Ok(_) => created = true,
                    // Another replica created it a moment ago: check it like any existing one.
                    Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((name, code)) => {
                        return Err(MqError::Kafka(format!("creating topic `{name}`: {code}")));
                    }
                }
            }
            replication
        }
    };
    // A topic another replica created a moment ago can be described before its settings are
    // (empty values): ask again for a few seconds before judging what is there.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut min_insync = None;
    loop {
        let described =
            admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options).await?;
        let mut settled = true;
        let mut verdict = Ok(());
        for resource in described {
            let resource = resource
                .map_err(|code| MqError::Kafka(format!("describing topic `{topic}`: {code}")))?;
            let entries = resource.entry_map();
            let value =
                |key: &str| entries.get(key).and_then(|e| e.value.clone()).unwrap_or_default();
            min_insync = value("min.insync.replicas").trim().parse::<usize>().ok();
            settled &= !value("retention.ms").is_empty()
                && !value("cleanup.policy").is_empty()
                && !value("min.insync.replicas").is_empty();
            verdict = verdict.and(check_topic_configs(topic, &value)).and(check_durability(
                topic,
                replication,
                &value("min.insync.replicas"),
                allow_under_replicated,
            ));
        }
        if settled || tokio::time::Instant::now() >= deadline {
            verdict?;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    if replication < 3 && brokers >= 3 {
        tracing::warn!(
            "command topic `{topic}` has replication factor {replication} on a cluster of {brokers} brokers; the loss of one broker can stop or lose changes"
        );
    }
    Ok(TopicReport { created, replication, brokers, min_insync })
}

/// The topic-level settings that could lose acknowledged changes, checked by name.
fn check_topic_configs(topic: &str, value: &dyn Fn(&str) -> String) -> Result<(), MqError> {
    let policy = value("cleanup.policy");
    if policy.contains("compact") {
        return Err(refuse(
            topic,
            "cleanup.policy",
            format!("`{policy}` would compact away changes; use `delete` with infinite retention"),
        ));
    }
    for key in ["retention.ms", "retention.bytes"] {
        let v = value(key);
        if v != "-1" {
            return Err(refuse(
                topic,
                key,
                format!("`{v}` would delete old changes; set it to -1"),
            ));
        }
    }
    if value("unclean.leader.election.enable") == "true" {
        return Err(refuse(
            topic,
            "unclean.leader.election.enable",
            "`true` lets an out-of-sync replica lead and drop acknowledged changes; set it to false".into(),
        ));
    }
    Ok(())
}

/// Whether the topic keeps an acknowledged change when one broker is lost: `acks=all` waits for
/// the in-sync replicas, so that needs at least two copies (`replication.factor` >= 2) and at
/// least two in-sync copies per write (`min.insync.replicas` >= 2, and no more than there are
/// replicas, or no write can succeed). Below that only with `store.kafka.allow_under_replicated`.
fn check_durability(
    topic: &str,
    replication: usize,
    min_insync: &str,
    allow_under_replicated: bool,
) -> Result<(), MqError> {
    let Ok(min_insync) = min_insync.trim().parse::<usize>() else {
        let why = format!("`{min_insync}` cannot be read, so the topic's durability is unknown");
        return if allow_under_replicated {
            Ok(())
        } else {
            Err(refuse(topic, "min.insync.replicas", why))
        };
    };
    if min_insync > replication {
        return Err(refuse(
            topic,
            "min.insync.replicas",
            format!(
                "{min_insync} with replication factor {replication}: no write can be acknowledged"
            ),
        ));
    }
    let weak = if replication < 2 {
        Some(("replication.factor", format!("{replication}: one copy of each change")))
    } else if min_insync < 2 {
        Some((
            "min.insync.replicas",
            format!(
                "{min_insync}: a change is acknowledged with one copy, and losing its broker loses it"
            ),
        ))
    } else {
        None
    };
    match weak {
        None => Ok(()),
        Some((setting, why)) if allow_under_replicated => {
            tracing::warn!(
                "command topic `{topic}` setting `{setting}` is {why} (allowed by store.kafka.allow_under_replicated)"
            );
            Ok(())
        }
        Some((setting, why)) => Err(refuse(
            topic,
            setting,
            format!(
                "{why}; use at least 2 (3 brokers, replication factor 3, min.insync.replicas 2), or set store.kafka.allow_under_replicated = true for a one-broker development setup"
            ),
        )),
    }
}

fn refuse(topic: &str, setting: &str, why: String) -> MqError {
    MqError::Kafka(format!("command topic `{topic}` is unsafe, setting `{setting}`: {why}"))
}

/// The writing half of the Kafka command log.
pub struct KafkaCommandLog {
    producer: FutureProducer,
    topic: String,
    bootstrap: String,
    /// The topic's `min.insync.replicas` (an append needs that many in-sync replicas); shared,
    /// so a replica started while the brokers were down learns it once they answer.
    min_insync: Arc<std::sync::atomic::AtomicUsize>,
}

impl KafkaCommandLog {
    /// Judges writability against the topic's `min.insync.replicas` (from `ensure_command_topic`).
    pub fn with_min_insync(self, min_insync: usize) -> KafkaCommandLog {
        self.min_insync.store(min_insync.max(1), std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// The handle through which `min.insync.replicas` is set later.
    pub fn min_insync_handle(&self) -> Arc<std::sync::atomic::AtomicUsize> {
        Arc::clone(&self.min_insync)
    }

    pub fn new(bootstrap: &str, topic: &str) -> Result<KafkaCommandLog, MqError> {
        let extra = [
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("message.timeout.ms", &APPEND_TIMEOUT_MS.to_string()),
            ("linger.ms", "0"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let producer: FutureProducer = client_config(bootstrap, &extra).create()?;
        Ok(KafkaCommandLog {
            producer,
            topic: topic.to_owned(),
            bootstrap: bootstrap.to_owned(),
            min_insync: Arc::new(std::sync::atomic::AtomicUsize::new(1)),
        })
    }
}

impl KafkaCommandLog {
    /// Appends `entries` in order, keeping up to `window` of them in flight (the idempotent
    /// producer keeps their order), and answers the offset of the first. For `log import` of a
    /// whole history into an empty topic: one acknowledgement wait per record made a year of
    /// history take minutes. Fails if the offsets are not consecutive (another writer).
    pub fn append_all(&self, entries: &[LogEntry], window: usize) -> Result<u64, StoreError> {
        let mut in_flight = std::collections::VecDeque::new();
        let mut first: Option<u64> = None;
        let mut done = 0usize;
        let mut settle = |delivery: rdkafka::producer::DeliveryFuture,
                          done: &mut usize|
         -> Result<(), StoreError> {
            let offset = match block_on(delivery) {
                Ok(Ok(delivery)) => delivery.offset as u64,
                Ok(Err((e, _))) => {
                    return Err(StoreError::Shared {
                        log: self.describe(),
                        reason: format!("record {} of {}: {e}", *done + 1, entries.len()),
                    });
                }
                Err(_) => {
                    return Err(StoreError::Shared {
                        log: self.describe(),
                        reason: "the producer went away".into(),
                    });
                }
            };
            let expected = first.map_or(offset, |f| f + *done as u64);
            if offset != expected {
                return Err(StoreError::Shared {
                    log: self.describe(),
                    reason: format!(
                        "record {} landed at offset {offset}, not {expected}: another writer is appending to the topic",
                        *done + 1
                    ),
                });
            }
            first.get_or_insert(offset);
            *done += 1;
            Ok(())
        };
        for entry in entries {
            let payload = serde_json::to_vec(entry)?;
            let key = match entry {
                LogEntry::Proposal { id, .. } | LogEntry::Lease { id, .. } => id.as_str(),
                _ => "genesis",
            };
            let record =
                FutureRecord::<str, [u8]>::to(&self.topic).partition(0).key(key).payload(&payload);
            let delivery =
                self.producer.send_result(record).map_err(|(e, _)| StoreError::Shared {
                    log: self.describe(),
                    reason: format!("the record was not queued: {e}"),
                })?;
            in_flight.push_back(delivery);
            if in_flight.len() >= window.max(1) {
                settle(in_flight.pop_front().unwrap(), &mut done)?;
            }
        }
        while let Some(delivery) = in_flight.pop_front() {
            settle(delivery, &mut done)?;
        }
        Ok(first.unwrap_or(0))
    }
}

impl SharedLog for KafkaCommandLog {
    fn append(&self, entry: &LogEntry) -> Result<u64, StoreError> {
        let payload = serde_json::to_vec(entry)?;
        let command_id = match entry {
            LogEntry::Proposal { id, .. } | LogEntry::Lease { id, .. } => id.clone(),
            _ => "genesis".to_owned(),
        };
        let record = FutureRecord::<str, [u8]>::to(&self.topic)
            .partition(0)
            .key(&command_id)
            .payload(&payload);
        let delivery = self.producer.send_result(record).map_err(|(e, _)| StoreError::Shared {
            log: self.describe(),
            reason: format!("the record was not queued: {e}"),
        })?;
        match block_on(delivery) {
            Ok(Ok(delivery)) => Ok(delivery.offset as u64),
            Ok(Err((e, _))) => {
                Err(StoreError::OutcomeUnknown { command_id, reason: e.to_string() })
            }
            Err(_) => Err(StoreError::OutcomeUnknown {
                command_id,
                reason: "the producer went away".into(),
            }),
        }
    }

    fn writable(&self) -> Result<(), String> {
        let metadata = self
            .producer
            .client()
            .fetch_metadata(Some(&self.topic), PROBE_TIMEOUT)
            .map_err(|e| format!("the brokers did not answer within 1 s ({e})"))?;
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == self.topic)
            .ok_or_else(|| format!("the brokers do not know topic `{}`", self.topic))?;
        let partition = topic
            .partitions()
            .first()
            .ok_or_else(|| format!("topic `{}` has no partition", self.topic))?;
        if let Some(e) = partition.error() {
            return Err(format!("partition 0 of `{}`: {:?}", self.topic, e));
        }
        if partition.leader() < 0 {
            return Err(format!("partition 0 of `{}` has no leader", self.topic));
        }
        let min_insync = self.min_insync.load(std::sync::atomic::Ordering::SeqCst);
        if partition.isr().len() < min_insync {
            return Err(format!(
                "partition 0 of `{}` has {} in-sync replica(s), fewer than min.insync.replicas {min_insync}",
                self.topic,
                partition.isr().len(),
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("kafka topic {} at {}", self.topic, self.bootstrap)
    }
}

/// The reading half: a consumer assigned to partition 0, outside any consumer group.
pub struct KafkaLogReader {
    consumer: BaseConsumer,
    topic: String,
    /// The offset the consumer will deliver next, when assigned.
    next: Option<u64>,
}

impl KafkaLogReader {
    pub fn new(bootstrap: &str, topic: &str) -> Result<KafkaLogReader, MqError> {
        let extra = [
            ("group.id", "tidegate-replica"),
            ("enable.auto.commit", "false"),
            ("enable.auto.offset.store", "false"),
            ("fetch.wait.max.ms", "50"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let consumer: BaseConsumer = client_config(bootstrap, &extra).create()?;
        Ok(KafkaLogReader { consumer, topic: topic.to_owned(), next: None })
    }

    fn error(&self, reason: impl std::fmt::Display) -> StoreError {
        StoreError::Shared {
            log: format!("kafka topic {}", self.topic),
            reason: reason.to_string(),
        }
    }
}

impl LogReader for KafkaLogReader {
    fn read_after(&mut self, from: u64, wait: Duration) -> Result<Vec<ReadRecord>, StoreError> {
        if self.next != Some(from) {
            // A position the topic no longer holds (records deleted below it) or never held (a
            // topic recreated under the same name) cannot continue a snapshot.
            let (low, high) = self
                .consumer
                .fetch_watermarks(&self.topic, 0, QUERY_TIMEOUT)
                .map_err(|e| self.error(e))?;
            let (low, high) = (low.max(0) as u64, high.max(0) as u64);
            if from < low || from > high {
                return Err(StoreError::Position {
                    log: format!("kafka topic {}", self.topic),
                    position: from,
                    reason: if from < low {
                        format!("the log now starts at offset {low}")
                    } else {
                        format!("the log ends at offset {high}")
                    },
                });
            }
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&self.topic, 0, Offset::Offset(from as i64))
                .map_err(|e| self.error(e))?;
            self.consumer.assign(&tpl).map_err(|e| self.error(e))?;
            self.next = Some(from);
        }
        let mut out = Vec::new();
        let mut timeout = wait;
        while out.len() < 1000 {
            let Some(message) = self.consumer.poll(timeout) else { break };
            timeout = Duration::ZERO;
            let message = match message {
                Ok(message) => message,
                Err(e) => {
                    let err = StoreError::Shared {
                        log: format!("kafka topic {}", self.topic),
                        reason: e.to_string(),
                    };
                    self.next = None;
                    return Err(err);
                }
            };
            let offset = message.offset() as u64;
            if offset < from {
                continue;
            }
            let entry = match message.payload() {
                Some(bytes) => serde_json::from_slice::<LogEntry>(bytes).map_err(|e| e.to_string()),
                None => Err("an empty record".to_owned()),
            };
            out.push((offset, entry));
            self.next = Some(offset + 1);
        }
        Ok(out)
    }

    fn end(&mut self) -> Result<u64, StoreError> {
        let (_, high) = self
            .consumer
            .fetch_watermarks(&self.topic, 0, QUERY_TIMEOUT)
            .map_err(|e| self.error(e))?;
        Ok(high.max(0) as u64)
    }
}

/// Runs `future` to completion on this thread (the producer's delivery report arrives from
/// librdkafka's own thread, so nothing here needs an async runtime).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), MqError> {
        let value = |key: &str| {
            pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned()).unwrap_or_default()
        };
        check_topic_configs("t", &value)
    }

    const SAFE: [(&str, &str); 4] = [
        ("cleanup.policy", "delete"),
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
        ("unclean.leader.election.enable", "false"),
    ];

    #[test]
    fn safe_settings_pass_and_each_unsafe_one_is_named() {
        check(&SAFE).unwrap();
        for (key, bad) in [
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "604800000"),
            ("retention.bytes", "1073741824"),
            ("unclean.leader.election.enable", "true"),
        ] {
            let mut pairs = SAFE.to_vec();
            pairs.retain(|(k, _)| *k != key);
            pairs.push((key, bad));
            let err = check(&pairs).unwrap_err().to_string();
            assert!(err.contains(&format!("`{key}`")), "{key}: {err}");
        }
    }

    #[test]
    fn a_topic_that_can_lose_an_acknowledged_change_is_refused_unless_allowed() {
        check_durability("t", 3, "2", false).unwrap();
        check_durability("t", 2, "2", false).unwrap();
        for (replication, min_insync, named) in
            [(3, "1", "min.insync.replicas"), (1, "1", "replication.factor")]
        {
            let err =
                check_durability("t", replication, min_insync, false).unwrap_err().to_string();
            assert!(err.contains(&format!("`{named}`")), "{err}");
            assert!(err.contains("allow_under_replicated"), "the way out is named: {err}");
            check_durability("t", replication, min_insync, true).unwrap();
        }
        // More in-sync copies than replicas: no write could ever succeed, allowed or not.
        assert!(check_durability("t", 1, "2", true).is_err());
        assert!(check_durability("t", 3, "", false).is_err(), "unknown is not durable");
    }
}
