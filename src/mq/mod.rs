//! Kafka (rdkafka) on the server's side: the shared command log, presence, topic creation, lag
//! reading and the embedded mock cluster of `tidegate demo`. The lane producer, the lane
//! consumer and the route header are the client crate's (`tidegate_client::kafka`, its `kafka`
//! feature, so a service embeds them without the server); they are re-exported here, so
//! `tidegate::mq::LaneProducer` and the rest keep their paths.
//!
//! Architecture invariant: only this module and `crates/tidegate-client/src/kafka` name rdkafka
//! (enforced by `tests/tidy.rs`). The rest of tidegate sees plain types:
//! [`crate::service::lane_membership::LagSource`] for lag, and the producer and consumer, whose
//! settings are `key = value` pairs of librdkafka properties.

mod admin;
mod command_log;
mod lag;
mod mock;
mod presence;

pub use admin::create_topic;
pub use command_log::{
    DEFAULT_COMMAND_TOPIC, KafkaCommandLog, KafkaLogReader, TopicReport, ensure_command_topic,
};
pub use lag::KafkaLag;
pub use mock::MockKafka;
pub use presence::{KafkaPresence, presence_topic};

pub use crate::client::kafka::{
    COLOR_HEADER, ConsumerSettings, Delivered, HalfRings, Handover, LaneConsumer, LaneMessage,
    LaneProducer, MqError, Pending, ProducerSettings, ROUTE_HEADER, Route, RouteMarks,
    SWITCH_HEADER, TEXT_ROUTE_HEADER, VERSION_HEADER, partition_count, route_header,
};

use std::time::Duration;

use crate::client::kafka::{QUERY_TIMEOUT, client_config, lane_shape};

/// Whether the brokers at `bootstrap` answer a metadata request within `timeout` (start-up waits
/// on it while the brokers are down, instead of exiting).
pub fn brokers_reachable(bootstrap: &str, timeout: Duration) -> Result<usize, MqError> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = client_config(bootstrap, &[]).create()?;
    let metadata = consumer.fetch_metadata(None, timeout)?;
    Ok(metadata.brokers().len())
}
