//! The lane producer: tags each user with the current routing table and writes the message to a
//! partition inside that colour's half of the topic.
//!
//! Within a half the partition comes from a consistent-hash ring over the half's partitions (the
//! `hashring` crate's hash and placement, looked up through a bucket index), keyed by the user
//! ID. A user therefore always lands on the same partition of a half, which keeps their messages
//! in order for as long as their colour does not change. When the dial moves a user to the other
//! colour, their next messages go to the other half; ordering across that switch is the
//! consumers' business (the route header `tg`, a colour byte and a varint version, tells them
//! which colour and table version a message was routed with).

use std::future::Future;
use std::hash::{BuildHasher, Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use hashring::DefaultHashBuilder;
use metrics::Counter;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;

use tidegate_core::{LaneConfig, TagError, ZoneId, validate_user_id};

use super::{
    MqError, ROUTE_HEADER, SWITCH_HEADER, client_config, lane_produced_counters, partition_count,
    route_header,
};
use crate::TableSource;

/// Virtual nodes on one half's ring, spread over its partitions. With 160 per partition (the
/// old figure) a 4-partition half gave 21.9 % to 27.4 % of users per partition where 25 % is
/// fair; a partition's share deviates by about 1/sqrt(vnodes per partition), so small halves get
/// many more (4 096 each for 4 partitions: within 0.7 points for 100 000 users). The total is
/// bounded so a 10 000-partition lane still builds its rings at once.
const RING_VNODES: u32 = 16_384;
/// The floor per partition, for halves with more than 102 partitions.
const MIN_VNODES: u32 = 160;

/// How to reach Kafka and which topic to write.
#[derive(Clone, Debug)]
pub struct ProducerSettings {
    pub bootstrap: String,
    pub topic: String,
    /// Extra librdkafka properties, e.g. `("linger.ms", "10")`. Idempotence and `acks=all` are
    /// always on: a lane producer must not lose or reorder acknowledged messages.
    pub extra: Vec<(String, String)>,
    /// The service whose calls this topic's messages are (e.g. `orders`), if it may have a
    /// release channel: a channel's users' messages then go to the channel zone's range, as their
    /// calls of that service go to that zone (pin > channel > map, in the default domain).
    /// `None`: the map (and pins) alone.
    pub service: Option<String>,
    /// Where consumers learn each message's colour and routing version (see [`RouteMarks`]).
    pub marks: RouteMarks,
}

/// How a lane producer tells consumers the colour and routing version of its messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RouteMarks {
    /// One switch marker per partition at each routing version change (`tgs`, see
    /// [`route_header`]), and messages without headers: the colour follows from the partition's
    /// range and the version from the partition's last marker. No per-message cost: librdkafka
    /// builds no header list per message. Consumers must skip markers (tidegate's Rust and Java
    /// lane consumers do; a plain Kafka consumer sees them as records with a `tgs` header and
    /// no key or value).
    #[default]
    Switches,
    /// The `tg` route header on every message, as every release before switch markers wrote:
    /// for consumers that are not tidegate's lane consumers and read the header themselves.
    Header,
}

impl ProducerSettings {
    pub fn new(bootstrap: &str, topic: &str) -> ProducerSettings {
        ProducerSettings {
            bootstrap: bootstrap.to_owned(),
            topic: topic.to_owned(),
            extra: Vec::new(),
            service: None,
            marks: RouteMarks::default(),
        }
    }
}

/// Where a user's message goes under the current table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub color: ZoneId,
    pub partition: u32,
    /// The routing table version the user was tagged with (also in the `tg` route header).
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

/// One half's ring: the virtual nodes' hashes sorted, as `hashring::HashRing` keeps them (the
/// same SipHash through [`DefaultHashBuilder`], the same "first node at or after the key, else
/// the first" rule, so every user keeps the partition older producers gave them), plus an index
/// by the hash's top bits: a lookup reads one bucket of about one node instead of binary
/// searching the whole ring (16 384 nodes, 256 KB, most of a lookup's time in cache misses).
struct Ring {
    /// (hash, partition) of every virtual node, by hash.
    nodes: Vec<(u64, u32)>,
    /// `starts[b]`: the first node whose key's top `bits` bits are `b` or more (one per bucket,
    /// and the node count at the end).
    starts: Vec<u32>,
    bits: u32,
}

impl Ring {
    fn new(nodes: impl Iterator<Item = VNode>) -> Ring {
        let mut hashed: Vec<(u64, u32)> =
            nodes.map(|node| (DefaultHashBuilder.hash_one(node), node.partition)).collect();
        hashed.sort_by_key(|&(key, _)| key);
        // About one node per bucket, within 16 to 2^20 buckets.
        let bits = hashed.len().next_power_of_two().trailing_zeros().clamp(4, 20);
        let mut starts = Vec::with_capacity((1 << bits) + 1);
        let mut next = 0;
        for bucket in 0..=(1u64 << bits) {
            while next < hashed.len() && hashed[next].0 >> (64 - bits) < bucket {
                next += 1;
            }
            starts.push(next as u32);
        }
        Ring { nodes: hashed, starts, bits }
    }

    /// The partition of the first node at or after `key` on the ring (wrapping to the first).
    fn get(&self, key: u64) -> Option<u32> {
        let bucket = (key >> (64 - self.bits)) as usize;
        let (from, to) = (self.starts[bucket] as usize, self.starts[bucket + 1] as usize);
        let n = from + self.nodes[from..to].partition_point(|&(k, _)| k < key);
        let n = if n == self.nodes.len() { 0 } else { n };
        self.nodes.get(n).map(|&(_, partition)| partition)
    }
}

/// The consistent-hash rings of a lane's zone ranges (its halves with two zones): which
/// partition of a range a user's messages go to. Pure; built once per producer.
pub struct HalfRings {
    lane: LaneConfig,
    rings: Vec<Ring>,
}

impl HalfRings {
    pub fn new(lane: LaneConfig) -> HalfRings {
        let ring = |color: ZoneId| {
            let half = lane.half(color);
            let vnodes = (RING_VNODES / half.len().max(1) as u32).max(MIN_VNODES);
            Ring::new(half.flat_map(move |partition| {
                (0..vnodes).map(move |replica| VNode { partition, replica })
            }))
        };
        HalfRings { lane, rings: (0..lane.zones() as u16).map(|z| ring(ZoneId(z))).collect() }
    }

    /// The partition of `user_id` inside `color`'s range. A zone the topic was not cut for has
    /// no range: `None`.
    pub fn partition_checked(&self, color: ZoneId, user_id: &str) -> Option<u32> {
        let ring = self.rings.get(color.index())?;
        // The ring of a range is never empty (a lane has at least one partition per zone).
        Some(ring.get(DefaultHashBuilder.hash_one(user_id)).unwrap_or(self.lane.half(color).start))
    }

    /// The partition of `user_id` inside `color`'s half (the first partition for a zone the
    /// topic was not cut for; [`HalfRings::partition_checked`] tells).
    pub fn partition(&self, color: ZoneId, user_id: &str) -> u32 {
        self.partition_checked(color, user_id).unwrap_or(0)
    }
}

/// The lane producer. Cheap to share behind an `Arc`; `send` takes `&self`.
pub struct LaneProducer {
    producer: FutureProducer,
    topic: String,
    lane: LaneConfig,
    rings: HalfRings,
    table: Arc<dyn TableSource>,
    produced: Vec<Counter>,
    service: Option<String>,
    /// The newest table version a message was handed to librdkafka at. Enqueues hold it for
    /// reading; moving it to a newer version takes it for writing and flushes first, so no
    /// message at an older version is still in flight once one at the newer version is sent.
    produced_at: RwLock<u64>,
    marks: RouteMarks,
    /// Per zone: the newest version whose switch markers this producer wrote into the zone's
    /// range (0: none yet). Markers go into a range just before the first message routed to it
    /// at a newer version, never into a range that receives nothing: a drained zone's half stays
    /// exactly as its consumers left it (no backlog made of markers, no re-grant to read them).
    marked: Vec<AtomicU64>,
    /// Taken to write a range's markers, so two senders do not both write them.
    marking: Mutex<()>,
}

/// How long the flush at a version change may wait for earlier messages' acknowledgements.
const VERSION_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

impl LaneProducer {
    /// Connects, reads the topic's partition count (blocking, up to 10 s) and refuses a topic
    /// with an odd count. `table` is where routing tables come from: the coordinator itself
    /// in-process, or a copy a service keeps up to date.
    pub fn new(
        settings: &ProducerSettings,
        table: Arc<dyn TableSource>,
    ) -> Result<LaneProducer, MqError> {
        let partitions = partition_count(&settings.bootstrap, &settings.topic)?;
        // The topic is cut for the table's zones (two before a table arrives).
        let lanes: Vec<String> = match table.current_table() {
            Some(t) => t.zones().iter().map(|(_, z)| z.lane.clone()).collect(),
            None => vec!["blue".into(), "green".into()],
        };
        let lane = LaneConfig::for_zones(partitions, lanes.len() as u32)
            .map_err(|source| MqError::Lane { topic: settings.topic.clone(), source })?;
        let mut config = client_config(&settings.bootstrap, &settings.extra);
        config.set("enable.idempotence", "true").set("acks", "all");
        let producer: FutureProducer = config.create()?;
        Ok(LaneProducer {
            producer,
            topic: settings.topic.clone(),
            lane,
            rings: HalfRings::new(lane),
            table,
            produced: lane_produced_counters(&settings.topic, &lanes),
            service: settings.service.clone(),
            produced_at: RwLock::new(0),
            marks: settings.marks,
            marked: (0..lane.zones()).map(|_| AtomicU64::new(0)).collect(),
            marking: Mutex::new(()),
        })
    }

    pub fn lane(&self) -> LaneConfig {
        self.lane
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The colour and partition a user's message goes to now. Pure apart from reading the table.
    /// A user whose unit is frozen by a move in progress is [`MqError::Frozen`].
    pub fn route(&self, user_id: &str) -> Result<Route, MqError> {
        validate_user_id(user_id)?;
        let table = self.table.current_table().ok_or(MqError::NoTable)?;
        let service = self.service.as_deref();
        let tag = match service {
            None => table.tag(user_id)?,
            Some(service) => match table.tag_service(None, user_id, Some(service)) {
                Ok(Some((tag, _))) => tag,
                Ok(None) => table.tag(user_id)?,
                Err(TagError::InvalidUserId(e)) => return Err(e.into()),
                Err(TagError::ChannelUnavailable(channel)) => {
                    return Err(MqError::ChannelUnavailable(channel));
                }
                Err(TagError::Untagged) => return Err(MqError::NoTable),
            },
        };
        // Between moves nothing is frozen, and this is two emptiness checks.
        if (!table.frozen().is_empty() || table.channel_freeze().is_some())
            && table.write_frozen(None, service, user_id, &tag)
        {
            return Err(MqError::Frozen { unit: tag.unit.0 });
        }
        let color = tag.color;
        let partition =
            self.rings.partition_checked(color, user_id).ok_or_else(|| MqError::ZonesChanged {
                topic: self.topic.clone(),
                cut: self.lane.zones(),
                zone: color.0,
            })?;
        Ok(Route { color, partition, version: table.version() })
    }

    /// The partition of `user_id` inside `color`'s half (consistent hashing over the half).
    pub fn partition_in_half(&self, color: ZoneId, user_id: &str) -> u32 {
        self.rings.partition(color, user_id)
    }

    /// Hands the message to librdkafka and returns at once; the returned future resolves when
    /// Kafka acknowledged it (or gave up). Fails with [`MqError::QueueFull`] when librdkafka's
    /// queue is full: await some earlier deliveries first.
    ///
    /// The first message at a newer table version first waits (blocking, up to 10 s) until
    /// every earlier message is acknowledged, which is what lets consumers keep each user's
    /// order across a move; a failed wait is [`MqError::Kafka`] and the next call tries again.
    pub fn enqueue(&self, user_id: &str, payload: &[u8]) -> Result<Pending, MqError> {
        loop {
            let produced_at = self.produced_at.read().unwrap_or_else(|p| p.into_inner());
            let route = self.route(user_id)?;
            if route.version <= *produced_at {
                if self.marks == RouteMarks::Switches {
                    self.mark_range(route.color, route.version)?;
                }
                return self.send_routed(user_id, payload, route);
            }
            drop(produced_at);
            let mut produced_at = self.produced_at.write().unwrap_or_else(|p| p.into_inner());
            if route.version > *produced_at {
                self.producer.flush(VERSION_FLUSH_TIMEOUT).map_err(|e| {
                    MqError::Kafka(format!(
                        "waiting for earlier messages before the first at version {}: {e}",
                        route.version
                    ))
                })?;
                *produced_at = route.version;
            }
            drop(produced_at);
        }
    }

    /// Makes sure `zone`'s range carries switch markers for `version` before a message at that
    /// version goes into it (the caller holds `produced_at` for reading, at `version` or newer:
    /// every message at an older version is acknowledged, so each marker comes after them in its
    /// partition). One atomic load when the range is already marked, which is every message but
    /// the first of each zone after a version change.
    ///
    /// Why per range, at its first message, and not every partition at every version change:
    /// a range that receives nothing at a version needs no marker for it (a message is at the
    /// version of the last marker before it *in its partition*), and a marker written into a
    /// drained zone's range is a record its consumers must read: the half showed a backlog of one
    /// record per partition after every version change and was handed back to the drained zone's
    /// consumers to read it (issue 51).
    fn mark_range(&self, zone: ZoneId, version: u64) -> Result<(), MqError> {
        let Some(marked) = self.marked.get(zone.index()) else {
            return Ok(()); // a zone the topic was not cut for: route() refused it already
        };
        if marked.load(Ordering::Acquire) >= version {
            return Ok(());
        }
        let _marking = self.marking.lock().unwrap_or_else(|p| p.into_inner());
        if marked.load(Ordering::Acquire) >= version {
            return Ok(());
        }
        self.send_switch_markers(zone, version)?;
        marked.store(version, Ordering::Release);
        Ok(())
    }

    /// Writes a switch marker for `version` to every partition of `zone`'s range. Not awaited:
    /// the messages behind a marker wait for it in librdkafka's queue as they would for any
    /// message, and the idempotent producer keeps a partition's order.
    fn send_switch_markers(&self, zone: ZoneId, version: u64) -> Result<(), MqError> {
        let mut buf = [0; route_header::MAX_LEN];
        let value = route_header::encode(zone, version, &mut buf);
        for partition in self.lane.half(zone) {
            let headers = OwnedHeaders::new_with_capacity(1)
                .insert(Header { key: SWITCH_HEADER, value: Some(value) });
            let record = FutureRecord::<(), ()>::to(&self.topic)
                .partition(partition as i32)
                .headers(headers);
            if let Err((e, _)) = self.producer.send_result(record) {
                return Err(MqError::Kafka(format!(
                    "writing the switch marker of version {version} to partition {partition}: {e}"
                )));
            }
        }
        Ok(())
    }

    /// Hands a routed message to librdkafka (the caller holds `produced_at` for reading).
    fn send_routed(&self, user_id: &str, payload: &[u8], route: Route) -> Result<Pending, MqError> {
        let record = FutureRecord::to(&self.topic)
            .partition(route.partition as i32)
            .key(user_id)
            .payload(payload);
        let sent = match self.marks {
            RouteMarks::Switches => self.producer.send_result(record),
            RouteMarks::Header => {
                // One header, `tg`: a colour byte and a varint, written on the stack.
                // librdkafka copies it into a header list of its own (three small mallocs: the
                // list, its slot array, the header; freed on its thread once the message is
                // delivered): the per-message cost the switch markers avoid.
                let mut value = [0; route_header::MAX_LEN];
                let value = route_header::encode(route.color, route.version, &mut value);
                let headers = OwnedHeaders::new_with_capacity(1)
                    .insert(Header { key: ROUTE_HEADER, value: Some(value) });
                self.producer.send_result(record.headers(headers))
            }
        };
        match sent {
            Ok(delivery) => {
                Ok(Pending { delivery, route, counter: self.produced[route.color.index()].clone() })
            }
            Err((e, _)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                Err(MqError::QueueFull)
            }
            Err((e, _)) => Err(e.into()),
        }
    }

    /// Sends one message and waits for Kafka's acknowledgement. When librdkafka's queue is full
    /// it waits for room instead of failing, and while the user's unit is frozen by a move it
    /// waits for the thaw (a freeze is bounded by its window: it ends switched or aborted).
    pub async fn send(&self, user_id: &str, payload: &[u8]) -> Result<Delivered, MqError> {
        loop {
            match self.enqueue(user_id, payload) {
                Ok(pending) => return pending.await,
                Err(MqError::QueueFull) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(MqError::Frozen { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each partition's share of `users` synthetic user IDs within the blue half, in percent.
    fn shares(rings: &HalfRings, lane: LaneConfig, users: u32) -> Vec<f64> {
        let half = lane.half(ZoneId::BLUE);
        let mut counts = vec![0u32; half.len()];
        for i in 0..users {
            let p = rings.partition(ZoneId::BLUE, &format!("user-{i}"));
            counts[(p - half.start) as usize] += 1;
        }
        counts.iter().map(|c| 100.0 * f64::from(*c) / f64::from(users)).collect()
    }

    #[test]
    fn users_keep_the_partition_hashring_gave_them() {
        // The producers before the indexed ring looked users up in `hashring::HashRing`; a user
        // must land on the same partition with either, or a rolling upgrade reorders them.
        for partitions in [2, 8, 14, 400] {
            let lane = LaneConfig::new(partitions).unwrap();
            let rings = HalfRings::new(lane);
            for color in [ZoneId::BLUE, ZoneId::GREEN] {
                let half = lane.half(color);
                let vnodes = (RING_VNODES / half.len() as u32).max(MIN_VNODES);
                let mut reference = hashring::HashRing::new();
                reference.batch_add(
                    half.flat_map(|partition| {
                        (0..vnodes).map(move |replica| VNode { partition, replica })
                    })
                    .collect(),
                );
                for i in 0..20_000 {
                    let user = format!("user-{}", i * 7919);
                    let expected = reference.get(&user.as_str()).unwrap().partition;
                    assert_eq!(rings.partition(color, &user), expected, "{partitions} {user}");
                }
            }
        }
    }

    #[test]
    fn partitions_within_a_half_get_even_shares() {
        let lane = LaneConfig::new(8).unwrap();
        let rings = HalfRings::new(lane);
        // Fair is 25 % per partition. 2 400 users carry sampling noise of about 0.9 points (one
        // standard deviation); 100 000 users about 0.14, so the bound there is the ring's own.
        for (users, bound) in [(2_400, 3.0), (100_000, 1.0)] {
            let s = shares(&rings, lane, users);
            println!("{users} users: per-partition shares {s:.2?} %");
            for share in s {
                assert!(
                    (share - 25.0).abs() <= bound,
                    "{users} users: {share:.2} % on a partition"
                );
            }
        }
    }
}
