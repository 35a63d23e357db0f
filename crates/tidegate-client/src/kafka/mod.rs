//! The Kafka lanes for a service (the `kafka` feature): the lane producer, the lane consumer,
//! the route header, and what they share (the error type, librdkafka settings, a topic's
//! partition count).
//!
//! A Rust service that produces to or consumes from a lane topic depends on `tidegate-client`
//! with `features = ["kafka"]`; without the feature the crate has no rdkafka and no async
//! runtime (`tests/tidy.rs` checks both trees). The server re-exports everything here from
//! `tidegate::mq`, next to what needs the server (the command log, presence, topic creation,
//! lag reading, the mock cluster).
//!
//! Architecture invariant: rdkafka is named only here and in the server's `src/mq` (enforced by
//! `tests/tidy.rs`). The producer and consumer take plain settings whose extras are `key = value`
//! pairs of librdkafka properties, and the producer reads routing tables from any
//! [`TableSource`](crate::TableSource) (a [`Router`](crate::Router), or the coordinator itself).
//!
//! ```no_run
//! use std::sync::Arc;
//! use tidegate_client::kafka::{LaneProducer, ProducerSettings};
//! use tidegate_client::{Identity, Router, RouterOptions, TableSource};
//! # async fn produce() -> Result<(), Box<dyn std::error::Error>> {
//! let router = Router::connect(
//!     "http://127.0.0.1:8080",
//!     Identity { subscriber_id: "orders-7".into(), zone: "az-a".into(), kind: "service".into() },
//!     RouterOptions::default(),
//! )?;
//! let table: Arc<dyn TableSource> = Arc::new(router);
//! let producer = LaneProducer::new(&ProducerSettings::new("127.0.0.1:9092", "orders"), table)?;
//! let delivered = producer.send("user-42", b"order placed").await?;
//! println!("partition {} offset {}", delivered.route.partition, delivered.offset);
//! # Ok(())
//! # }
//! ```

mod consumer;
mod producer;
pub mod route_header;

pub use consumer::{ConsumerSettings, Handover, LaneConsumer, LaneMessage};
pub use producer::{
    Delivered, HalfRings, LaneProducer, Pending, ProducerSettings, Route, RouteMarks,
};

use std::time::Duration;

use metrics::Counter;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tidegate_core::{LaneConfig, LaneError};

use crate::lanes::LaneClientError;
use crate::metrics::{LANE_CONSUMED, LANE_HANDOVERS, LANE_PRODUCED};

/// The header the lane producer writes: the colour a message was produced for and the routing
/// table version the producer tagged the user with, as a colour byte and a varint (see
/// [`route_header`]).
pub const ROUTE_HEADER: &str = "tg";
/// The header of a switch marker: a record without key or value that a lane producer writes to
/// every partition when it moves to a new routing version, before its first message at that
/// version. Its value is a `tg` value: the colour of the partition's range and the version. The
/// producer's messages that follow it in the partition carry no header (see
/// [`RouteMarks`](producer::RouteMarks)).
pub const SWITCH_HEADER: &str = "tgs";
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
    InvalidUserId(#[from] tidegate_core::UnitError),
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
    #[error(
        "release channel `{0}` is suspended (its zone was evacuated) and its fallback is `reject`: its users' messages are refused like their calls"
    )]
    ChannelUnavailable(String),
    #[error(
        "unit {unit} is frozen by a move in progress: its users' messages wait until the move switches or aborts; retry shortly"
    )]
    Frozen { unit: u32 },
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
pub fn lane_shape(partitions: u32) -> Result<LaneConfig, LaneError> {
    let zones = (2..=partitions.max(2)).find(|z| partitions.is_multiple_of(*z)).unwrap_or(2);
    LaneConfig::for_zones(partitions, zones)
}

/// Network timeouts every tidegate Kafka client starts from (the caller's extras win).
///
/// Why: librdkafka's defaults wait 60 s for a request and 30 s for a connection, and back off
/// reconnects up to 10 s. A broker cut off by a partition then holds a request for a minute,
/// and after the heal a connection stuck in TCP retransmission backoff kept a replica stale for
/// 24-26 s (issue 45). A request that times out closes its connection, and the next one starts
/// afresh; keepalive notices a dead peer on an idle connection; metadata is refreshed every 10 s
/// so a new partition leader is found without waiting for an error.
pub const NETWORK_DEFAULTS: [(&str, &str); 5] = [
    ("socket.timeout.ms", "10000"),
    ("socket.connection.setup.timeout.ms", "5000"),
    ("socket.keepalive.enable", "true"),
    ("reconnect.backoff.max.ms", "1000"),
    ("topic.metadata.refresh.interval.ms", "10000"),
];

/// A client configuration for `bootstrap`, [`NETWORK_DEFAULTS`] and the caller's extra librdkafka
/// properties on top.
pub fn client_config(bootstrap: &str, extra: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in NETWORK_DEFAULTS {
        config.set(key, value);
    }
    for (key, value) in extra {
        config.set(key, value);
    }
    config
}

/// How long metadata and offset queries may take before they count as failed.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The partition count of `topic`, from the cluster's metadata. Blocking.
pub fn partition_count(bootstrap: &str, topic: &str) -> Result<u32, MqError> {
    let consumer: BaseConsumer = client_config(bootstrap, &[]).create()?;
    let metadata = consumer.fetch_metadata(Some(topic), QUERY_TIMEOUT)?;
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or_else(|| MqError::NoSuchTopic(topic.to_owned()))?;
    if t.error().is_some() || t.partitions().is_empty() {
        return Err(MqError::NoSuchTopic(topic.to_owned()));
    }
    Ok(t.partitions().len() as u32)
}

/// Pre-registered handles for a lane producer's hot path, one per lane (by zone index).
fn lane_produced_counters(topic: &str, lanes: &[String]) -> Vec<Counter> {
    lanes
        .iter()
        .map(|lane| metrics::counter!(LANE_PRODUCED, "topic" => topic.to_owned(), "color" => lane.clone()))
        .collect()
}

/// The handle a lane consumer counts its delivered messages with.
fn lane_consumed_counter(group: &str, topic: &str, zone: &str) -> Counter {
    metrics::counter!(
        LANE_CONSUMED,
        "group" => group.to_owned(),
        "topic" => topic.to_owned(),
        "zone" => zone.to_owned()
    )
}

/// A lane consumer's count of handovers with `outcome` (`released` or `timed_out`).
fn handover_counter(
    (group, topic, zone): &(String, String, String),
    outcome: &'static str,
) -> Counter {
    metrics::counter!(
        LANE_HANDOVERS,
        "group" => group.clone(),
        "topic" => topic.clone(),
        "zone" => zone.clone(),
        "outcome" => outcome
    )
}

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
