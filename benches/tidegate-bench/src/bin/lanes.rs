//! Throughput of tidegate's `LaneProducer` next to a plain rdkafka `FutureProducer` on the real
//! broker: same settings (idempotent, `acks=all`), same messages, runs alternating in one
//! process. Prints the ratio lane / plain of each alternation as p50 (min-max).
//!
//! ```sh
//! bash scripts/kafka.sh start     # prints the bootstrap address
//! cargo run --release --manifest-path benches/tidegate-bench/Cargo.toml --bin lanes -- 127.0.0.1:PORT 5
//! ```
//!
//! Two shapes, both from issue 14:
//! - `burst`: 200 000 messages of 100 bytes for random users, all enqueued before any is
//!   awaited, each run on a fresh 8-partition topic;
//! - `window`: 100 000 messages of 100 bytes over 1 000 users, 10 000 in flight, one topic for
//!   every run (how the README measured it before).
//!
//! A third argument `smoke` divides the message counts by 20 (CI: proves it runs, means nothing).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tidegate::core::{Color, ColorZones, RoutingTable, UnitMode, UnitScheme};
use tidegate::mq::{LaneProducer, ProducerSettings};

/// librdkafka's queue must hold a whole burst (its default is 100 000 messages).
const QUEUE: &str = "1000000";

struct Shape {
    name: &'static str,
    messages: usize,
    /// `None`: everything enqueued before the first await.
    in_flight: Option<usize>,
    fresh_topics: bool,
    users: Vec<String>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().expect("usage: lanes BOOTSTRAP [ROUNDS [smoke]]");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(5);
    let scale = if args.next().as_deref() == Some("smoke") { 20 } else { 1 };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let scheme = UnitScheme::new(100, UnitMode::Hash).expect("scheme");
    let table = RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), ColorZones::default())
        .expect("table");
    let payload = vec![b'x'; 100];
    let shapes = [
        Shape {
            name: "burst",
            messages: 200_000 / scale,
            in_flight: None,
            fresh_topics: true,
            users: (0..200_000 / scale)
                .map(|_| format!("user-{}", rand::random::<u64>()))
                .collect(),
        },
        Shape {
            name: "window",
            messages: 100_000 / scale,
            in_flight: Some(10_000 / scale),
            fresh_topics: false,
            users: (0..1000).map(|i| format!("user-{i:04}")).collect(),
        },
    ];
    let run = format!("{}-{}", std::process::id(), rand::random::<u32>());
    let mut n = 0;
    let mut topic = |rt: &tokio::runtime::Runtime| {
        n += 1;
        let name = format!("bench-lanes-{run}-{n}");
        rt.block_on(tidegate::mq::create_topic(&bootstrap, &name, 8, 1))
            .unwrap_or_else(|e| panic!("creating {name}: {e}"));
        name
    };
    for shape in &shapes {
        let shared = topic(&rt);
        let (mut plains, mut lanes, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (plain_topic, lane_topic) = if shape.fresh_topics {
                (topic(&rt), topic(&rt))
            } else {
                (shared.clone(), shared.clone())
            };
            // Which side goes first alternates too.
            let (p, l) = if round % 2 == 0 {
                let p = plain(&rt, &bootstrap, shape, &plain_topic, &payload);
                (p, lane(&rt, &bootstrap, shape, &lane_topic, &payload, &table))
            } else {
                let l = lane(&rt, &bootstrap, shape, &lane_topic, &payload, &table);
                (plain(&rt, &bootstrap, shape, &plain_topic, &payload), l)
            };
            eprintln!("lanes {}: round {round}: plain {p:.0} msg/s, lane {l:.0} msg/s", shape.name);
            plains.push(p);
            lanes.push(l);
            ratios.push(l / p);
        }
        let (r, rlo, rhi) = dist(&ratios);
        println!("lanes_{}_ratio_p50_min_max={r:.2}/{rlo:.2}/{rhi:.2}", shape.name);
        println!("lanes_{}_plain_msgs_per_s_p50={:.0}", shape.name, dist(&plains).0);
        println!("lanes_{}_lane_msgs_per_s_p50={:.0}", shape.name, dist(&lanes).0);
    }
}

fn plain(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    shape: &Shape,
    topic: &str,
    payload: &[u8],
) -> f64 {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("queue.buffering.max.messages", QUEUE)
        .create()
        .expect("producer");
    rt.block_on(async {
        let started = Instant::now();
        let mut inflight = VecDeque::with_capacity(shape.messages);
        for i in 0..shape.messages {
            let user = &shape.users[i % shape.users.len()];
            let record = FutureRecord::to(topic).key(user.as_str()).payload(payload);
            inflight.push_back(producer.send_result(record).map_err(|(e, _)| e).expect("queued"));
            if shape.in_flight.is_some_and(|n| inflight.len() >= n) {
                inflight.pop_front().expect("one").await.expect("alive").expect("delivered");
            }
        }
        for d in inflight {
            d.await.expect("alive").expect("delivered");
        }
        shape.messages as f64 / started.elapsed().as_secs_f64()
    })
}

fn lane(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    shape: &Shape,
    topic: &str,
    payload: &[u8],
    table: &RoutingTable,
) -> f64 {
    let mut settings = ProducerSettings::new(bootstrap, topic);
    settings.extra.push(("queue.buffering.max.messages".into(), QUEUE.into()));
    let lanes =
        LaneProducer::new(&settings, Arc::new(arc_swap::ArcSwap::from_pointee(table.clone())))
            .expect("lane producer");
    let in_half = |d: tidegate::mq::Delivered| {
        assert_eq!(d.route.partition < 4, d.route.color == Color::Blue, "a lane in its half");
    };
    rt.block_on(async {
        let started = Instant::now();
        let mut inflight = VecDeque::with_capacity(shape.messages);
        for i in 0..shape.messages {
            let user = &shape.users[i % shape.users.len()];
            inflight.push_back(lanes.enqueue(user, payload).expect("queued"));
            if shape.in_flight.is_some_and(|n| inflight.len() >= n) {
                in_half(inflight.pop_front().expect("one").await.expect("delivered"));
            }
        }
        for d in inflight {
            in_half(d.await.expect("delivered"));
        }
        shape.messages as f64 / started.elapsed().as_secs_f64()
    })
}

/// p50, min, max.
fn dist(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let p50 = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (p50, v[0], v[n - 1])
}
