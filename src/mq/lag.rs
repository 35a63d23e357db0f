//! Reading a consumer group's lag from Kafka: watermarks and the group's committed offsets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::{QUERY_TIMEOUT, client_config};
use crate::service::lane_membership::{LagSource, PartitionOffsets};

/// The coordinator's lag reader. One idle client per group is kept: creating a librdkafka client
/// starts threads and connections, far too much to do every second. The clients never join the
/// group; they only ask the group coordinator for its committed offsets.
pub struct KafkaLag {
    bootstrap: String,
    clients: Mutex<HashMap<String, Arc<BaseConsumer>>>,
}

impl KafkaLag {
    pub fn new(bootstrap: &str) -> KafkaLag {
        KafkaLag { bootstrap: bootstrap.to_owned(), clients: Mutex::new(HashMap::new()) }
    }

    fn client(&self, group: &str) -> Result<Arc<BaseConsumer>, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(group) {
            return Ok(Arc::clone(c));
        }
        let extra = [
            ("group.id".to_owned(), group.to_owned()),
            ("enable.auto.commit".to_owned(), "false".to_owned()),
        ];
        let consumer: BaseConsumer =
            client_config(&self.bootstrap, &extra).create().map_err(|e| e.to_string())?;
        let consumer = Arc::new(consumer);
        clients.insert(group.to_owned(), Arc::clone(&consumer));
        Ok(consumer)
    }
}

impl LagSource for KafkaLag {
    fn read(
        &self,
        group: &str,
        topic: &str,
        partitions: u32,
    ) -> Result<Vec<PartitionOffsets>, String> {
        let consumer = self.client(group)?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p as i32);
        }
        let committed = consumer
            .committed_offsets(tpl, QUERY_TIMEOUT)
            .map_err(|e| format!("committed offsets of group {group}: {e}"))?;
        let mut out = Vec::with_capacity(partitions as usize);
        for p in 0..partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, p as i32, QUERY_TIMEOUT)
                .map_err(|e| format!("watermarks of {topic}/{p}: {e}"))?;
            let committed =
                committed.find_partition(topic, p as i32).and_then(|e| match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                });
            out.push(PartitionOffsets { partition: p, low, high, committed });
        }
        Ok(out)
    }
}
