//! The lane producer: tags each user with the current routing table and writes the message to a
//! partition inside that colour's half of the topic.
//!
//! Within a half the partition comes from a consistent-hash ring (the `hashring` crate) over the
//! half's partitions, keyed by the user ID. A user therefore always lands on the same partition
//! of a half, which keeps their messages in order for as long as their colour does not change.
//! When the dial moves a user to the other colour, their next messages go to the other half;
//! ordering across that switch is the consumers' business (the version header tells them which
//! table a message was routed with).

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hashring::HashRing;
use metrics::Counter;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;

use super::{COLOR_HEADER, MqError, VERSION_HEADER, client_config, partition_count};
use crate::core::{Color, LaneConfig, validate_user_id};
use crate::service::table_source::TableSource;
use crate::telemetry;

/// Virtual nodes per partition on the ring: enough that a half's partitions get shares within a
/// few percent of each other, few enough that building the ring stays instant.
const VNODES: u32 = 160;

/// How to reach Kafka and which topic to write.
#[derive(Clone, Debug)]
pub struct ProducerSettings {
    pub bootstrap: String,
    pub topic: String,
    /// Extra librdkafka properties, e.g. `("linger.ms", "10")`. Idempotence and `acks=all` are
    /// always on: a lane producer must not lose or reorder acknowledged messages.
    pub extra: Vec<(String, String)>,
}

impl ProducerSettings {
    pub fn new(bootstrap: &str, topic: &str) -> ProducerSettings {
        ProducerSettings {
            bootstrap: bootstrap.to_owned(),
            topic: topic.to_owned(),
            extra: Vec::new(),
        }
    }
}

/// Where a user's message goes under the current table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub color: Color,
    pub partition: u32,
    /// The routing table version the user was tagged with (also in the `tidegate-version` header).
    pub version: u64,
}

/// An acknowledged message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub route: Route,
    pub offset: i64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct VNode {
    partition: u32,
    replica: u32,
}

impl Hash for VNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.partition.hash(state);
        self.replica.hash(state);
    }
}

/// The lane producer. Cheap to share behind an `Arc`; `send` takes `&self`.
pub struct LaneProducer {
    producer: FutureProducer,
    topic: String,
    lane: LaneConfig,
    rings: [HashRing<VNode>; 2],
    table: Arc<dyn TableSource>,
    produced: [Counter; 2],
}

impl LaneProducer {
    /// Connects, reads the topic's partition count (blocking, up to 10 s) and refuses a topic
    /// with an odd count. `table` is where routing tables come from: the coordinator itself
    /// in-process, or a copy a service keeps up to date.
    pub fn new(
        settings: &ProducerSettings,
        table: Arc<dyn TableSource>,
    ) -> Result<LaneProducer, MqError> {
        let partitions = partition_count(&settings.bootstrap, &settings.topic)?;
        let lane = LaneConfig::new(partitions)
            .map_err(|source| MqError::Lane { topic: settings.topic.clone(), source })?;
        let mut config = client_config(&settings.bootstrap, &settings.extra);
        config.set("enable.idempotence", "true").set("acks", "all");
        let producer: FutureProducer = config.create()?;
        let ring = |color: Color| {
            let mut ring = HashRing::new();
            ring.batch_add(
                lane.half(color)
                    .flat_map(|partition| {
                        (0..VNODES).map(move |replica| VNode { partition, replica })
                    })
                    .collect(),
            );
            ring
        };
        Ok(LaneProducer {
            producer,
            topic: settings.topic.clone(),
            lane,
            rings: [ring(Color::Blue), ring(Color::Green)],
            table,
            produced: telemetry::lane_produced_counters(&settings.topic),
        })
    }

    pub fn lane(&self) -> LaneConfig {
        self.lane
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The colour and partition a user's message goes to now. Pure apart from reading the table.
    pub fn route(&self, user_id: &str) -> Result<Route, MqError> {
        validate_user_id(user_id)?;
        let table = self.table.current_table().ok_or(MqError::NoTable)?;
        let color = table.tag(user_id)?.color;
        Ok(Route {
            color,
            partition: self.partition_in_half(color, user_id),
            version: table.version(),
        })
    }

    /// The partition of `user_id` inside `color`'s half (consistent hashing over the half).
    pub fn partition_in_half(&self, color: Color, user_id: &str) -> u32 {
        match self.rings[color as usize].get(&user_id) {
            Some(node) => node.partition,
            // The ring of a half is never empty (a lane has at least one partition per half).
            None => self.lane.half(color).start,
        }
    }

    /// Hands the message to librdkafka and returns at once; the returned future resolves when
    /// Kafka acknowledged it (or gave up). Fails with [`MqError::QueueFull`] when librdkafka's
    /// queue is full: await some earlier deliveries first.
    pub fn enqueue(&self, user_id: &str, payload: &[u8]) -> Result<Pending, MqError> {
        let route = self.route(user_id)?;
        let version = route.version.to_string();
        let headers = OwnedHeaders::new_with_capacity(2)
            .insert(Header { key: COLOR_HEADER, value: Some(route.color.as_str()) })
            .insert(Header { key: VERSION_HEADER, value: Some(version.as_str()) });
        let record = FutureRecord::to(&self.topic)
            .partition(route.partition as i32)
            .key(user_id)
            .payload(payload)
            .headers(headers);
        match self.producer.send_result(record) {
            Ok(delivery) => Ok(Pending {
                delivery,
                route,
                counter: self.produced[route.color as usize].clone(),
            }),
            Err((e, _)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                Err(MqError::QueueFull)
            }
            Err((e, _)) => Err(e.into()),
        }
    }

    /// Sends one message and waits for Kafka's acknowledgement. When librdkafka's queue is full
    /// it waits for room instead of failing.
    pub async fn send(&self, user_id: &str, payload: &[u8]) -> Result<Delivered, MqError> {
        loop {
            match self.enqueue(user_id, payload) {
                Ok(pending) => return pending.await,
                Err(MqError::QueueFull) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until everything enqueued was delivered or failed (blocking, up to `timeout`).
    pub fn flush(&self, timeout: Duration) -> Result<(), MqError> {
        self.producer.flush(timeout).map_err(MqError::from)
    }
}

/// A message on its way to Kafka: resolves to its partition and offset once acknowledged.
pub struct Pending {
    delivery: DeliveryFuture,
    route: Route,
    counter: Counter,
}

impl Pending {
    pub fn route(&self) -> Route {
        self.route
    }
}

impl Future for Pending {
    type Output = Result<Delivered, MqError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let route = self.route;
        match Pin::new(&mut self.delivery).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(_)) => {
                Poll::Ready(Err(MqError::NotDelivered("the producer was dropped".into())))
            }
            Poll::Ready(Ok(Err((e, _)))) => Poll::Ready(Err(MqError::NotDelivered(e.to_string()))),
            Poll::Ready(Ok(Ok(delivery))) => {
                self.counter.increment(1);
                Poll::Ready(Ok(Delivered { route, offset: delivery.offset }))
            }
        }
    }
}
