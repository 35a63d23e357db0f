//! librdkafka's in-process mock cluster, for `tidegate demo` and fast unit tests only.
//!
//! It speaks the Kafka protocol on a loopback port, so the lane producer, consumer and lag
//! reader run against it unchanged. It is not a proof of anything a real broker does: the
//! tests that matter run against Apache Kafka (`scripts/kafka.sh`).

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use super::MqError;
use crate::core::LaneConfig;

/// A running mock cluster; it stops when dropped. Not `Send`: keep it on the thread that made it.
pub struct MockKafka {
    cluster: MockCluster<'static, DefaultProducerContext>,
}

impl MockKafka {
    pub fn start(brokers: i32) -> Result<MockKafka, MqError> {
        Ok(MockKafka { cluster: MockCluster::new(brokers)? })
    }

    /// `bootstrap.servers` of the mock brokers.
    pub fn bootstrap(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    /// Creates a lane topic (an even partition count, refused otherwise).
    pub fn create_topic(&self, topic: &str, partitions: u32) -> Result<(), MqError> {
        LaneConfig::new(partitions)
            .map_err(|source| MqError::Lane { topic: topic.to_owned(), source })?;
        self.cluster.create_topic(topic, partitions as i32, 1)?;
        Ok(())
    }
}
