//! Throughput of the lane producer next to a plain rdkafka `FutureProducer`, on the real broker,
//! same topic, same settings (idempotent, `acks=all`), same messages. Prints both numbers; the
//! assertions are about correctness only (every message acknowledged, lanes in their halves).
//!
//! Run it alone for the numbers: `cargo test --release --test mq_bench -- --nocapture`.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use common::kafka;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tidegate::core::{RoutingTable, UnitMode, UnitScheme, ZoneId, Zones};
use tidegate::mq::{LaneProducer, ProducerSettings};

const MESSAGES: usize = 100_000;
const IN_FLIGHT: usize = 10_000;

fn users() -> Vec<String> {
    (0..1000).map(|i| format!("user-{i:04}")).collect()
}

fn plain(rt: &tokio::runtime::Runtime, topic: &str, payload: &[u8]) -> f64 {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .unwrap();
    let users = users();
    rt.block_on(async {
        let started = Instant::now();
        let mut inflight = VecDeque::new();
        for i in 0..MESSAGES {
            let user = &users[i % users.len()];
            let record = FutureRecord::to(topic).key(user.as_str()).payload(payload);
            inflight.push_back(producer.send_result(record).map_err(|(e, _)| e).unwrap());
            if inflight.len() >= IN_FLIGHT {
                inflight.pop_front().unwrap().await.unwrap().unwrap();
            }
        }
        for d in inflight {
            d.await.unwrap().unwrap();
        }
        MESSAGES as f64 / started.elapsed().as_secs_f64()
    })
}

fn lane(rt: &tokio::runtime::Runtime, topic: &str, payload: &[u8], table: &RoutingTable) -> f64 {
    let settings = ProducerSettings::new(&kafka::bootstrap(), topic);
    let lanes =
        LaneProducer::new(&settings, Arc::new(arc_swap::ArcSwap::from_pointee(table.clone())))
            .unwrap();
    let users = users();
    rt.block_on(async {
        let started = Instant::now();
        let mut inflight = VecDeque::new();
        for i in 0..MESSAGES {
            let user = &users[i % users.len()];
            inflight.push_back(lanes.enqueue(user, payload).unwrap());
            if inflight.len() >= IN_FLIGHT {
                let d = inflight.pop_front().unwrap().await.unwrap();
                assert_eq!(d.route.partition < 4, d.route.color == ZoneId::BLUE);
            }
        }
        for d in inflight {
            d.await.unwrap();
        }
        MESSAGES as f64 / started.elapsed().as_secs_f64()
    })
}

#[test]
fn lane_producer_throughput_next_to_a_plain_future_producer() {
    let rt = kafka::runtime();
    let topic = kafka::unique("bench");
    kafka::create_topic(&rt, &topic, 8);
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let table = RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), Zones::default()).unwrap();
    let payload = vec![b'x'; 100];
    // Alternate, three runs each, so neither side gets a warmer broker or page cache; the
    // median is reported because single runs on a shared 2-core machine are noisy.
    let mut rates = (Vec::new(), Vec::new());
    for _ in 0..3 {
        rates.0.push(plain(&rt, &topic, &payload));
        rates.1.push(lane(&rt, &topic, &payload, &table));
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, l) = (median(&rates.0), median(&rates.1));
    println!(
        "{MESSAGES} messages of 100 bytes, {IN_FLIGHT} in flight, 8 partitions, idempotent, acks=all \
         ({} build): median plain FutureProducer {p:.0} msg/s, LaneProducer {l:.0} msg/s ({:.0}% of plain); \
         runs: plain {:?}, lane {:?}",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        l / p * 100.0,
        rates.0.iter().map(|r| r.round()).collect::<Vec<_>>(),
        rates.1.iter().map(|r| r.round()).collect::<Vec<_>>(),
    );
    assert!(p > 0.0 && l > 0.0);
}
