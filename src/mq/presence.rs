//! The presence topic next to the command topic: replicas announce themselves on it, and read
//! each other's recent announcements.
//!
//! Why a topic of its own: presence is not state. It must never enter the command log (which keeps
//! every record forever and is replayed by every replica), so it goes to `<topic>.presence`, one
//! partition, `cleanup.policy=delete` and one hour of retention. A reader starts a minute back
//! (by timestamp), which is more than the three announcement intervals after which a replica
//! counts as lost, and reads on from there.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use super::{MqError, QUERY_TIMEOUT, client_config};
use crate::service::presence::PresenceBus;

/// How long announcements are kept on the presence topic.
const RETENTION_MS: &str = "3600000";
/// How far back a new reader starts.
const LOOK_BACK_MS: i64 = 60_000;

/// The presence topic of a command topic.
pub fn presence_topic(command_topic: &str) -> String {
    format!("{command_topic}.presence")
}

/// Announces to, and reads from, the presence topic of one command log.
pub struct KafkaPresence {
    producer: ThreadedProducer<DefaultProducerContext>,
    consumer: BaseConsumer,
    topic: String,
    assigned: bool,
}

impl KafkaPresence {
    /// Creates the presence topic if it is missing (another replica may race: fine) and connects.
    pub async fn new(bootstrap: &str, command_topic: &str) -> Result<KafkaPresence, MqError> {
        let topic = presence_topic(command_topic);
        let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[]).create()?;
        let metadata = admin.inner().fetch_metadata(Some(&topic), QUERY_TIMEOUT)?;
        let exists =
            metadata.topics().iter().any(|t| t.error().is_none() && !t.partitions().is_empty());
        if !exists {
            let brokers = admin.inner().fetch_metadata(None, QUERY_TIMEOUT)?.brokers().len();
            let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(brokers.clamp(1, 3) as i32))
                .set("cleanup.policy", "delete")
                .set("retention.ms", RETENTION_MS);
            let options = AdminOptions::new().operation_timeout(Some(QUERY_TIMEOUT));
            for result in admin.create_topics([&new], &options).await? {
                match result {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((name, code)) => {
                        return Err(MqError::Kafka(format!("creating topic `{name}`: {code}")));
                    }
                }
            }
        }
        let own = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        // Announcements are small and replaceable: a lost one is covered by the next.
        let producer =
            client_config(bootstrap, &own(&[("acks", "1"), ("linger.ms", "0")])).create()?;
        let consumer = client_config(
            bootstrap,
            &own(&[
                ("group.id", "tidegate-presence"),
                ("enable.auto.commit", "false"),
                ("enable.auto.offset.store", "false"),
                ("fetch.wait.max.ms", "100"),
            ]),
        )
        .create()?;
        Ok(KafkaPresence { producer, consumer, topic, assigned: false })
    }

    /// Assigns partition 0 from a minute back (or its end when nothing is that recent).
    fn assign(&mut self) -> Result<(), String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let since = now - LOOK_BACK_MS;
        let mut query = TopicPartitionList::new();
        query
            .add_partition_offset(&self.topic, 0, Offset::Offset(since))
            .map_err(|e| e.to_string())?;
        let found =
            self.consumer.offsets_for_times(query, QUERY_TIMEOUT).map_err(|e| e.to_string())?;
        let offset = found
            .find_partition(&self.topic, 0)
            .map(|p| p.offset())
            .filter(|o| matches!(o, Offset::Offset(_)))
            .unwrap_or(Offset::End);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, offset).map_err(|e| e.to_string())?;
        self.consumer.assign(&tpl).map_err(|e| e.to_string())?;
        self.assigned = true;
        Ok(())
    }
}

impl PresenceBus for KafkaPresence {
    fn announce(&mut self, key: &str, payload: &[u8]) -> Result<(), String> {
        let record =
            BaseRecord::<str, [u8]>::to(&self.topic).partition(0).key(key).payload(payload);
        self.producer.send(record).map_err(|(e, _)| e.to_string())
    }

    fn receive(&mut self, wait: Duration) -> Result<Vec<Vec<u8>>, String> {
        if !self.assigned {
            self.assign()?;
        }
        let mut out = Vec::new();
        let mut timeout = wait;
        while out.len() < 1000 {
            let Some(message) = self.consumer.poll(timeout) else { break };
            timeout = Duration::ZERO;
            match message {
                Ok(message) => out.extend(message.payload().map(<[u8]>::to_vec)),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(out)
    }
}

impl Drop for KafkaPresence {
    fn drop(&mut self) {
        let _ = self.producer.flush(Duration::from_millis(500));
    }
}
