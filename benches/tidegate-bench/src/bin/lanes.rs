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
//!   every run (how the benchmarks were measured before).
//!
//! Each round runs three producers on fresh topics (the burst) in rotating order: the plain one,
//! the lane producer in its default mode (switch markers, no per-message header), and the lane
//! producer writing the `tg` header on every message (`RouteMarks::Header`).
//!
//! A third argument `smoke` divides the message counts by 20 (CI: proves it runs, means nothing).
//! `LANES_SHAPES=burst` (or `window`) runs one shape only, e.g. under `perf record`;
//! `LANES_PLAIN=partition,header` gives the plain reference an explicit partition and/or the
//! `tg` header (diagnosis: which of the lane producer's additions the gap comes from).
//!
//! Besides the ratios it prints, per message, what the lane producer adds on the sending thread:
//! the burst's enqueue phase (ns per message, both producers), the Rust heap allocations per
//! enqueued message (a counting global allocator; librdkafka's own `malloc`s are not counted),
//! and the parts measured alone without a broker (tagging, the ring, encoding the route header,
//! building and dropping the librdkafka header list).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, VecDeque};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tidegate::core::{LaneConfig, RoutingTable, UnitMode, UnitScheme, ZoneId, Zones};
use tidegate::mq::{HalfRings, LaneProducer, ProducerSettings, RouteMarks, route_header};

/// Counts Rust heap allocations (all threads), so the enqueue loops can report allocations per
/// message. librdkafka allocates with libc's `malloc` directly and is not counted.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What one timed run measured.
struct Run {
    msgs_per_s: f64,
    /// The loop that enqueues, per message (the burst enqueues everything before awaiting).
    enqueue_ns: f64,
    /// Rust allocations during the enqueue loop, per message.
    allocs: f64,
}

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
    let table =
        RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), Zones::default()).expect("table");
    let payload = vec![b'x'; 100];
    let only = std::env::var("LANES_SHAPES").ok();
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
    parts(&table, &shapes[0].users);
    for shape in &shapes {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|o| o == shape.name)) {
            continue;
        }
        let shared = topic(&rt);
        let (mut plains, mut lanes, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let mut header_ratios = Vec::new();
        let (mut enqueue, mut allocs) = ([vec![], vec![]], [vec![], vec![]]);
        for round in 0..rounds {
            let mut topics =
                [(); 3].map(|_| if shape.fresh_topics { topic(&rt) } else { shared.clone() });
            // Three producers per round (plain, lane with switch markers, lane with the `tg`
            // header on every message); which goes first rotates.
            let mut runs: [Option<Run>; 3] = [None, None, None];
            for k in 0..3 {
                let which = (round + k) % 3;
                let t = std::mem::take(&mut topics[which]);
                runs[which] = Some(match which {
                    0 => plain(&rt, &bootstrap, shape, &t, &payload),
                    1 => lane(&rt, &bootstrap, shape, &t, &payload, &table, RouteMarks::Switches),
                    _ => lane(&rt, &bootstrap, shape, &t, &payload, &table, RouteMarks::Header),
                });
            }
            let [p, l, h] = runs.map(|r| r.expect("ran"));
            eprintln!(
                "lanes {}: round {round}: plain {:.0} msg/s, lane {:.0} msg/s, ratio {:.2} (with the header on every message {:.0} msg/s, {:.2}); enqueue {:.0} / {:.0} ns/msg, {:.2} / {:.2} allocs/msg",
                shape.name,
                p.msgs_per_s,
                l.msgs_per_s,
                l.msgs_per_s / p.msgs_per_s,
                h.msgs_per_s,
                h.msgs_per_s / p.msgs_per_s,
                p.enqueue_ns,
                l.enqueue_ns,
                p.allocs,
                l.allocs
            );
            plains.push(p.msgs_per_s);
            lanes.push(l.msgs_per_s);
            ratios.push(l.msgs_per_s / p.msgs_per_s);
            header_ratios.push(h.msgs_per_s / p.msgs_per_s);
            for (i, run) in [p, l].iter().enumerate() {
                enqueue[i].push(run.enqueue_ns);
                allocs[i].push(run.allocs);
            }
        }
        let name = shape.name;
        let (r, rlo, rhi) = dist(&ratios);
        println!("lanes_{name}_ratio_p50_min_max={r:.2}/{rlo:.2}/{rhi:.2}");
        let (r, rlo, rhi) = dist(&header_ratios);
        println!("lanes_{name}_header_ratio_p50_min_max={r:.2}/{rlo:.2}/{rhi:.2}");
        println!("lanes_{name}_plain_msgs_per_s_p50={:.0}", dist(&plains).0);
        println!("lanes_{name}_lane_msgs_per_s_p50={:.0}", dist(&lanes).0);
        if shape.in_flight.is_none() {
            let (e, a) = (&enqueue, &allocs);
            println!("lanes_{name}_plain_enqueue_ns_per_msg_p50={:.0}", dist(&e[0]).0);
            println!("lanes_{name}_lane_enqueue_ns_per_msg_p50={:.0}", dist(&e[1]).0);
            println!("lanes_{name}_plain_rust_allocs_per_msg_p50={:.2}", dist(&a[0]).0);
            println!("lanes_{name}_lane_rust_allocs_per_msg_p50={:.2}", dist(&a[1]).0);
        }
    }
}

/// The lane producer's own per-message parts, each timed alone over the burst's users (no
/// broker): ns per message, p50 of 5 passes.
fn parts(table: &RoutingTable, users: &[String]) {
    let rings = HalfRings::new(LaneConfig::new(8).expect("lane"));
    let colors: Vec<ZoneId> = users.iter().map(|u| table.tag(u).expect("tag").color).collect();
    let time = |f: &dyn Fn(usize)| {
        let mut passes: Vec<f64> = (0..5)
            .map(|_| {
                let started = Instant::now();
                for i in 0..users.len() {
                    f(i);
                }
                started.elapsed().as_nanos() as f64 / users.len() as f64
            })
            .collect();
        passes.sort_by(f64::total_cmp);
        passes[2]
    };
    let headers = |key: &str, value: &[u8]| {
        black_box(OwnedHeaders::new_with_capacity(1).insert(Header { key, value: Some(value) }));
    };
    let measured = [
        (
            "tag",
            time(&|i| {
                black_box(table.tag(&users[i]).ok());
            }),
        ),
        (
            "ring",
            time(&|i| {
                black_box(rings.partition(colors[i], &users[i]));
            }),
        ),
        (
            "encode",
            time(&|i| {
                let mut buf = [0; route_header::MAX_LEN];
                black_box(route_header::encode(colors[i], black_box(12), &mut buf));
            }),
        ),
        ("headers_text", time(&|_| headers("tidegate-route", b"blue;v=12"))),
        ("headers_tg", time(&|_| headers("tg", b"b\x0c"))),
    ];
    for (name, ns) in measured {
        println!("lanes_part_{name}_ns_per_msg={ns:.0}");
    }
}

fn plain(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    shape: &Shape,
    topic: &str,
    payload: &[u8],
) -> Run {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("queue.buffering.max.messages", QUEUE)
        .create()
        .expect("producer");
    // Diagnosis: `LANES_PLAIN=partition,header` gives the reference what the lane producer adds
    // (an explicit partition, the `tg` header), so the ratio shows what the rest costs.
    let extra = std::env::var("LANES_PLAIN").unwrap_or_default();
    let (with_partition, with_header) = (extra.contains("partition"), extra.contains("header"));
    rt.block_on(async {
        if warm() {
            for p in 0..8 {
                let record = FutureRecord::<(), ()>::to(topic).partition(p);
                producer.send(record, std::time::Duration::from_secs(10)).await.expect("warm");
            }
        }
        let started = Instant::now();
        let allocs = ALLOCATIONS.load(Ordering::Relaxed);
        let mut inflight = VecDeque::with_capacity(shape.messages);
        for i in 0..shape.messages {
            let user = &shape.users[i % shape.users.len()];
            let mut record = FutureRecord::to(topic).key(user.as_str()).payload(payload);
            if with_partition {
                record = record.partition((i % 8) as i32);
            }
            if with_header {
                let mut value = [0; route_header::MAX_LEN];
                let value = route_header::encode(ZoneId::BLUE, 12, &mut value);
                record = record.headers(
                    OwnedHeaders::new_with_capacity(1)
                        .insert(Header { key: "tg", value: Some(value) }),
                );
            }
            inflight.push_back(producer.send_result(record).map_err(|(e, _)| e).expect("queued"));
            if shape.in_flight.is_some_and(|n| inflight.len() >= n) {
                inflight.pop_front().expect("one").await.expect("alive").expect("delivered");
            }
        }
        let (enqueued, allocs) = (started.elapsed(), ALLOCATIONS.load(Ordering::Relaxed) - allocs);
        for d in inflight {
            d.await.expect("alive").expect("delivered");
        }
        run(shape.messages, started, enqueued, allocs)
    })
}

fn lane(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    shape: &Shape,
    topic: &str,
    payload: &[u8],
    table: &RoutingTable,
    marks: RouteMarks,
) -> Run {
    let mut settings = ProducerSettings::new(bootstrap, topic);
    settings.marks = marks;
    settings.extra.push(("queue.buffering.max.messages".into(), QUEUE.into()));
    let lanes =
        LaneProducer::new(&settings, Arc::new(arc_swap::ArcSwap::from_pointee(table.clone())))
            .expect("lane producer");
    let in_half = |d: tidegate::mq::Delivered| {
        assert_eq!(d.route.partition < 4, d.route.color == ZoneId::BLUE, "a lane in its half");
    };
    rt.block_on(async {
        if warm() {
            // Connected, the producer ID and the first version's markers acknowledged.
            lanes.send("warm-up", payload).await.expect("warm");
        }
        let started = Instant::now();
        let allocs = ALLOCATIONS.load(Ordering::Relaxed);
        let mut inflight = VecDeque::with_capacity(shape.messages);
        for i in 0..shape.messages {
            let user = &shape.users[i % shape.users.len()];
            inflight.push_back(lanes.enqueue(user, payload).expect("queued"));
            if shape.in_flight.is_some_and(|n| inflight.len() >= n) {
                in_half(inflight.pop_front().expect("one").await.expect("delivered"));
            }
        }
        let (enqueued, allocs) = (started.elapsed(), ALLOCATIONS.load(Ordering::Relaxed) - allocs);
        for d in inflight {
            in_half(d.await.expect("delivered"));
        }
        run(shape.messages, started, enqueued, allocs)
    })
}

/// `LANES_WARM=0` times each producer from its creation; by default one acknowledged record per
/// partition (the lane producer: one message, after its markers) comes before the timer.
fn warm() -> bool {
    std::env::var("LANES_WARM").map_or(true, |v| v != "0")
}

fn run(messages: usize, started: Instant, enqueued: std::time::Duration, allocs: u64) -> Run {
    let n = messages as f64;
    Run {
        msgs_per_s: n / started.elapsed().as_secs_f64(),
        enqueue_ns: enqueued.as_nanos() as f64 / n,
        allocs: allocs as f64 / n,
    }
}

/// p50, min, max.
fn dist(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let p50 = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (p50, v[0], v[n - 1])
}
