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
use crate::core::{LaneConfig, LaneError};

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

/// A lane topic's partition count checked where the table's zone count is not known: when the
/// topic is created, and by a consumer before it registers. Only the bounds are checked here; the
/// count is cut for the fewest zones (at least 2) it divides into, which is the halves for every
/// even count, as before. Whether it is a multiple of the table's zones is checked where the
/// table is known: by the producer, and by the coordinator when a consumer registers. (Checking
/// for two zones here refused 9 partitions, which a three-zone table cuts in thirds.)
fn lane_shape(partitions: u32) -> Result<LaneConfig, LaneError> {
    let zones = (2..=partitions.max(2)).find(|z| partitions.is_multiple_of(*z)).unwrap_or(2);
    LaneConfig::for_zones(partitions, zones)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_shape_checks_bounds_and_keeps_the_halves_of_even_counts() {
        for partitions in [2, 8, 12, 400] {
            assert_eq!(lane_shape(partitions), LaneConfig::new(partitions), "{partitions}");
        }
        // Odd multiples of a zone count are lanes of that many zones, not refused as odd.
        assert_eq!(lane_shape(9).map(|l| l.zones()), Ok(3));
        assert_eq!(lane_shape(15).map(|l| l.zones()), Ok(3));
        assert_eq!(lane_shape(7).map(|l| l.zones()), Ok(7));
        assert_eq!(lane_shape(0), Err(LaneError::TooFewPartitions(0)));
        assert_eq!(lane_shape(1), Err(LaneError::TooFewPartitions(1)));
        assert!(matches!(lane_shape(10_007), Err(LaneError::TooManyPartitions(10_007))));
    }
}
