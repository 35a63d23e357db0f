//! Kafka (rdkafka): the lane producer, the lane consumer, lag reading, topic admin and the
//! embedded mock cluster of `tidegate demo`.
//!
//! Architecture invariant: only this module names rdkafka (enforced by `tests/tidy.rs`). The
//! rest of tidegate sees plain types: [`crate::service::lane_membership::LagSource`] for lag, and the producer and
//! consumer below, whose settings are `key = value` pairs of librdkafka properties.

mod admin;
mod command_log;
mod consumer;
mod lag;
mod mock;
mod presence;
mod producer;
pub mod route_header;

pub use admin::{create_topic, partition_count};
pub use command_log::{
    DEFAULT_COMMAND_TOPIC, KafkaCommandLog, KafkaLogReader, TopicReport, ensure_command_topic,
};
pub use consumer::{ConsumerSettings, LaneConsumer, LaneMessage};
pub use lag::KafkaLag;
pub use mock::MockKafka;
pub use presence::{KafkaPresence, presence_topic};
pub use producer::{Delivered, HalfRings, LaneProducer, Pending, ProducerSettings, Route};

use std::time::Duration;

use rdkafka::ClientConfig;

use crate::client::lanes::LaneClientError;
use crate::core::LaneError;

/// The header the lane producer writes: the colour a message was produced for and the routing
/// table version the producer tagged the user with, as a colour byte and a varint (see
/// [`route_header`]).
pub const ROUTE_HEADER: &str = "tg";
/// The text route header producers before `tg` wrote (`blue;v=12`); consumers still read it.
pub const TEXT_ROUTE_HEADER: &str = "tidegate-route";
/// Header older producers wrote with the colour (`blue` or `green`); consumers still read it.
pub const COLOR_HEADER: &str = "tidegate-color";
/// Header older producers wrote with the routing version; consumers still read it.
pub const VERSION_HEADER: &str = "tidegate-version";

#[derive(Debug, thiserror::Error)]
pub enum MqError {
    #[error("Kafka: {0}")]
    Kafka(String),
    #[error("Kafka's send queue is full; wait for deliveries before sending more")]
    QueueFull,
    #[error("topic `{topic}`: {source}")]
    Lane {
        topic: String,
        #[source]
        source: LaneError,
    },
    #[error("topic `{0}` does not exist (tidegate does not create topics implicitly)")]
    NoSuchTopic(String),
    #[error("user_id is invalid: {0}")]
    InvalidUserId(#[from] crate::core::UnitError),
    #[error("lane membership: {0}")]
    Membership(#[from] LaneClientError),
    #[error("the message was not delivered: {0}")]
    NotDelivered(String),
    #[error(
        "no routing table yet: the coordinator has not been reached and there is no disk cache"
    )]
    NoTable,
    #[error(
        "the lane session is not known to be alive (no heartbeat answer within the session timeout); offsets were not committed, and the partitions are being released"
    )]
    SessionLost,
    #[error(
        "topic `{topic}` was cut for {cut} zones when this producer started, and the table now routes to zone {zone}; restart the producer (and give the topic a multiple of the zone count in partitions)"
    )]
    ZonesChanged { topic: String, cut: u32, zone: u16 },
}

impl From<rdkafka::error::KafkaError> for MqError {
    fn from(e: rdkafka::error::KafkaError) -> MqError {
        MqError::Kafka(e.to_string())
    }
}

/// A client configuration for `bootstrap` with the caller's extra librdkafka properties on top.
fn client_config(bootstrap: &str, extra: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in extra {
        config.set(key, value);
    }
    config
}

/// Whether the brokers at `bootstrap` answer a metadata request within `timeout` (start-up waits
/// on it while the brokers are down, instead of exiting).
pub fn brokers_reachable(bootstrap: &str, timeout: Duration) -> Result<usize, MqError> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = client_config(bootstrap, &[]).create()?;
    let metadata = consumer.fetch_metadata(None, timeout)?;
    Ok(metadata.brokers().len())
}

/// How long metadata and offset queries may take before they count as failed.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
