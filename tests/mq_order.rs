//! Per-user order across moves, on a real Kafka broker with a real coordinator (issue 23): for a
//! moved user, no message is processed in the new zone before every earlier message of that
//! user was processed in the old one.
//!
//! A lane producer sends numbered messages for 40 users (`user|seq`, the sequence per user)
//! while the dial moves 100 times. Three lane consumers (az-a: a1, which stalls for 400 ms every
//! 200 messages so the old zone has a backlog at the moves; az-b: b1, b2) "process" a message by
//! appending `user|seq|member` to a single output partition and waiting for its
//! acknowledgement. An independent reader (a plain Kafka consumer, no tidegate code) reads the
//! output topic back and counts, per user, every message processed after a later one of the
//! same user (an inversion), every duplicate and every message never processed.
//!
//! With the consumers' handover: 0 inversions. The control run, the same with the handover off,
//! must show inversions: it proves the check can fail. The two runs are two tests, so they run
//! side by side (about 75 s each: 100 moves 400-600 ms apart, then the backlog).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kafka::{self, TableFeed};
use common::wait_until;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use tidegate::mq::{
    ConsumerSettings, Handover, LaneConsumer, LaneProducer, ProducerSettings, RouteMarks,
};

const USERS: usize = 40;
const MOVES: usize = 100;

/// What one run measured.
struct Outcome {
    produced: usize,
    processed: usize,
    inversions: usize,
    users_with_inversions: usize,
    duplicates: usize,
    missing: usize,
    handovers: Vec<Handover>,
    /// Every `enqueue` call's duration, and those that were a version change's flush.
    enqueue: Vec<Duration>,
    flushes: Vec<Duration>,
}

fn plain_producer() -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .unwrap()
}

/// A lane consumer that processes by appending to `output`; `stall` makes it the slow zone.
#[allow(clippy::too_many_arguments)]
fn start_consumer(
    rt: &tokio::runtime::Runtime,
    coordinator: &str,
    topic: &str,
    group: &str,
    output: &str,
    zone: &str,
    member: &str,
    handover: bool,
    stall: bool,
    stop: Arc<AtomicBool>,
    handovers: Arc<Mutex<Vec<Handover>>>,
) -> tokio::task::JoinHandle<Result<(), String>> {
    let mut settings = ConsumerSettings::new(coordinator, &kafka::bootstrap(), topic, group, zone);
    settings.member_name = Some(member.to_owned());
    settings.token = Some(common::OPERATOR_TOKEN.to_owned());
    settings.commit_interval = Duration::from_millis(100);
    settings.handover = handover.then_some(Duration::from_secs(30));
    let (output, member) = (output.to_owned(), member.to_owned());
    rt.spawn(async move {
        let mut consumer =
            LaneConsumer::start(settings).await.map_err(|e| format!("{member}: start: {e}"))?;
        consumer.observe_handovers(move |h| handovers.lock().unwrap().push(*h));
        let out = plain_producer();
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // A bounded wait, so the loop sees `stop`: `next` is cancelled here often, which a
            // held-back message must survive.
            let Ok(message) =
                tokio::time::timeout(Duration::from_millis(50), consumer.next()).await
            else {
                continue;
            };
            let m = message.map_err(|e| format!("{member}: next: {e}"))?;
            let text = String::from_utf8(m.payload).unwrap();
            let record = format!("{text}|{member}");
            out.send(
                FutureRecord::<(), _>::to(&output).partition(0).payload(&record),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| format!("{member}: output: {e}"))?;
            n += 1;
            if stall && n.is_multiple_of(200) {
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
        }
        consumer.close().await.map_err(|e| format!("{member}: close: {e}"))
    })
}

/// Reads the output topic from the beginning until `expected` records or 20 s of silence.
fn read_output(output: &str, expected: usize) -> Vec<(String, u64, String)> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", kafka::unique("order-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(output, 0, Offset::Beginning).unwrap();
    reader.assign(&tpl).unwrap();
    let mut records = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(20) {
        match reader.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let text = std::str::from_utf8(m.payload().unwrap()).unwrap().to_owned();
                let mut parts = text.split('|');
                let (user, seq, member) = (parts.next(), parts.next(), parts.next());
                records.push((
                    user.unwrap().to_owned(),
                    seq.unwrap().parse().unwrap(),
                    member.unwrap().to_owned(),
                ));
                last = Instant::now();
                // A few more seconds after the last expected one would show duplicates.
                if records.len() >= expected {
                    last = last.min(Instant::now() - Duration::from_secs(17));
                }
            }
            Some(Err(e)) => panic!("reading {output}: {e}"),
            None => {}
        }
    }
    records
}

/// Which lane producers write the topic.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Producers {
    /// One producer in the default mode: switch markers, no per-message header.
    Switches,
    /// A rolling upgrade: half of the users through a producer that still writes the `tg`
    /// header on every message, the other half through one that writes switch markers.
    Mixed,
}

fn run(handover: bool, producers: Producers) -> Outcome {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("3s", "100ms", "200ms");
    let label = match (handover, producers) {
        (true, Producers::Switches) => "order",
        (true, Producers::Mixed) => "order-mixed",
        (false, _) => "order-control",
    };
    let (topic, group, output) =
        (kafka::unique(label), kafka::unique(&format!("{label}-g")), kafka::unique("order-out"));
    kafka::create_topic(&rt, &topic, 8);
    // Two partitions because the helper makes lane topics; everything goes to partition 0.
    kafka::create_topic(&rt, &output, 2);

    let stop = Arc::new(AtomicBool::new(false));
    let handovers = Arc::new(Mutex::new(Vec::new()));
    let consumers: Vec<_> = [("az-a", "a1", true), ("az-b", "b1", false), ("az-b", "b2", false)]
        .into_iter()
        .map(|(zone, member, stall)| {
            start_consumer(
                &rt,
                &coordinator.url,
                &topic,
                &group,
                &output,
                zone,
                member,
                handover,
                stall,
                stop.clone(),
                handovers.clone(),
            )
        })
        .collect();
    assert!(
        wait_until(Duration::from_secs(20), || coordinator.settled(&group, 8)),
        "the group did not settle: {}",
        coordinator.group(&group)
    );

    // The producer's table comes from GET /v1/routing, polled every 10 ms.
    let feed = TableFeed::start(&coordinator, Duration::from_millis(10));
    let settings = ProducerSettings::new(&kafka::bootstrap(), &topic);
    let producer = LaneProducer::new(&settings, feed.table.clone()).unwrap();
    let old_producer = (producers == Producers::Mixed).then(|| {
        let settings = ProducerSettings { marks: RouteMarks::Header, ..settings.clone() };
        LaneProducer::new(&settings, feed.table.clone()).unwrap()
    });
    let producing = Arc::new(AtomicBool::new(true));
    let timings = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let produced = {
        let (producing, timings) = (producing.clone(), timings.clone());
        rt.spawn(async move {
            let users: Vec<String> = (0..USERS).map(|i| format!("user-{i:03}")).collect();
            let mut seq = vec![0u64; USERS];
            let mut inflight = std::collections::VecDeque::new();
            let mut sent = 0usize;
            let mut version = 0;
            while producing.load(Ordering::Relaxed) {
                for (i, user) in users.iter().enumerate() {
                    let started = Instant::now();
                    let through = match &old_producer {
                        Some(old) if i % 2 == 1 => old,
                        _ => &producer,
                    };
                    let pending = through.enqueue(user, format!("{user}|{}", seq[i]).as_bytes());
                    let took = started.elapsed();
                    let pending = pending.unwrap();
                    {
                        let mut t = timings.lock().unwrap();
                        t.0.push(took);
                        if pending.route().version != version && std::ptr::eq(through, &producer) {
                            version = pending.route().version;
                            t.1.push(took);
                        }
                    }
                    seq[i] += 1;
                    sent += 1;
                    inflight.push_back(pending);
                    if inflight.len() > 100 {
                        inflight.pop_front().unwrap().await.unwrap();
                    }
                }
                // About 200 messages a second: 5 a second per user.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            for p in inflight {
                p.await.unwrap();
            }
            sent
        })
    };

    // 100 dial moves, 400-600 ms apart, between 30 and 70 % blue.
    std::thread::sleep(Duration::from_millis(500));
    let mut percent = 50.0;
    for i in 0..MOVES {
        percent =
            if percent >= 50.0 { 30.0 + (i % 4) as f64 * 5.0 } else { 55.0 + (i % 4) as f64 * 5.0 };
        coordinator.dial(percent);
        std::thread::sleep(Duration::from_millis(400 + (i as u64 * 37) % 200));
    }
    producing.store(false, Ordering::Relaxed);
    let produced = rt.block_on(produced).unwrap();
    drop(feed);

    // Let the consumers finish the backlog (the stalling one is the slowest), then stop them.
    let reader_group_lag_zero = || {
        let v = coordinator.group(&group);
        v["lag"]["blue"] == 0 && v["lag"]["green"] == 0
    };
    let caught_up = wait_until(Duration::from_secs(90), || {
        reader_group_lag_zero() || consumers.iter().any(|c| c.is_finished())
    });
    if let Some(c) = consumers.iter().position(|c| c.is_finished()) {
        let consumer = consumers.into_iter().nth(c).unwrap();
        panic!("a consumer stopped early: {:?}", rt.block_on(consumer).unwrap());
    }
    assert!(caught_up, "the consumers did not catch up: {}", coordinator.group(&group));
    stop.store(true, Ordering::Relaxed);
    for c in consumers {
        rt.block_on(c).unwrap().unwrap();
    }

    let records = read_output(&output, produced);
    let mut seen: HashMap<(String, u64), usize> = HashMap::new();
    let mut newest: HashMap<String, u64> = HashMap::new();
    let mut inversions = 0;
    let mut inverted_users = BTreeMap::new();
    for (user, seq, _member) in &records {
        *seen.entry((user.clone(), *seq)).or_default() += 1;
        let top = newest.entry(user.clone()).or_insert(*seq);
        if *seq < *top {
            inversions += 1;
            *inverted_users.entry(user.clone()).or_insert(0) += 1;
        }
        *top = (*top).max(*seq);
    }
    let duplicates = seen.values().filter(|n| **n > 1).map(|n| n - 1).sum();
    let missing = produced - seen.len();
    let (enqueue, flushes) = std::mem::take(&mut *timings.lock().unwrap());
    let handovers = handovers.lock().unwrap().clone();
    Outcome {
        produced,
        processed: records.len(),
        inversions,
        users_with_inversions: inverted_users.len(),
        duplicates,
        missing,
        handovers,
        enqueue,
        flushes,
    }
}

fn quantiles(mut xs: Vec<Duration>) -> String {
    if xs.is_empty() {
        return "none".into();
    }
    xs.sort();
    let at = |q: f64| xs[((xs.len() - 1) as f64 * q).round() as usize];
    format!(
        "n={} min {:?} p50 {:?} p99 {:?} max {:?}",
        xs.len(),
        xs[0],
        at(0.5),
        at(0.99),
        xs[xs.len() - 1]
    )
}

fn report(name: &str, o: &Outcome) {
    println!(
        "{name}: produced {} processed {} inversions {} ({} users) duplicates {} missing {}",
        o.produced, o.processed, o.inversions, o.users_with_inversions, o.duplicates, o.missing
    );
    let waits: Vec<Duration> = o.handovers.iter().map(|h| h.waited).collect();
    let timed_out = o.handovers.iter().filter(|h| h.timed_out).count();
    println!("{name}: handover waits {} ({timed_out} timed out)", quantiles(waits));
    println!("{name}: producer enqueue {}", quantiles(o.enqueue.clone()));
    println!("{name}: producer enqueue at a version change {}", quantiles(o.flushes.clone()));
}

/// Nothing lost or processed twice, and the run was long enough to mean something.
fn check_delivery(name: &str, o: &Outcome) {
    assert!(o.produced > 3_000, "{name}: only {} messages produced", o.produced);
    assert_eq!(o.missing, 0, "{name}: messages never processed");
    assert_eq!(o.duplicates, 0, "{name}: messages processed twice");
}

#[test]
fn the_handover_keeps_each_users_order_across_a_hundred_moves() {
    let with = run(true, Producers::Switches);
    report("handover", &with);
    check_delivery("handover", &with);
    // The proof: no user's message processed after a later one of theirs, while handing over
    // at every one of the 100 versions, none by the timeout.
    assert_eq!(with.inversions, 0, "per-user order broken across moves");
    assert!(with.handovers.len() >= MOVES, "only {} handovers", with.handovers.len());
    assert!(with.handovers.iter().all(|h| !h.timed_out), "a handover timed out");
}

#[test]
fn without_the_handover_the_same_run_reorders_moved_users() {
    let control = run(false, Producers::Switches);
    report("control (no handover)", &control);
    check_delivery("control", &control);
    // The control: the same run without the handover processes moved users' new messages
    // before their old ones, so the check above can fail.
    assert!(control.inversions > 0, "the control run showed no inversion: the test cannot fail");
    assert!(control.handovers.is_empty());
}

/// A rolling upgrade from header-carrying producers: both kinds write the topic at once, and the
/// consumers keep every user's order across the same hundred moves (the control above, with
/// markers, shows that the check can fail).
#[test]
fn a_rolling_upgrade_keeps_order_with_header_and_switch_marker_producers_side_by_side() {
    let mixed = run(true, Producers::Mixed);
    report("mixed producers", &mixed);
    check_delivery("mixed producers", &mixed);
    assert_eq!(mixed.inversions, 0, "per-user order broken across moves");
    assert!(mixed.handovers.len() >= MOVES, "only {} handovers", mixed.handovers.len());
    assert!(mixed.handovers.iter().all(|h| !h.timed_out), "a handover timed out");
}

/// A user whose unit is frozen by a move is a write like any other: `enqueue` refuses their
/// messages, `send` waits for the thaw, and other users' messages go on.
#[test]
fn a_frozen_users_messages_wait_for_the_thaw() {
    use tidegate::core::{RoutingTable, UnitSet};
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("3s", "100ms", "200ms");
    let topic = kafka::unique("frozen");
    kafka::create_topic(&rt, &topic, 8);
    let table = coordinator.table();
    let users: Vec<String> = (0..200).map(|i| format!("user-{i:03}")).collect();
    let unit = |user: &str| table.tag(user).unwrap().unit.0;
    let frozen_user = users[0].clone();
    let frozen_unit = unit(&frozen_user);
    let thawed = users.iter().find(|u| unit(u) != frozen_unit).unwrap().clone();
    let set = UnitSet::parse(&frozen_unit.to_string(), table.units()).unwrap();
    let frozen: RoutingTable =
        table.clone().with_frozen([("default".to_owned(), set)].into()).unwrap();
    let source = Arc::new(arc_swap::ArcSwap::from_pointee(frozen));
    let producer = Arc::new(
        LaneProducer::new(&ProducerSettings::new(&kafka::bootstrap(), &topic), source.clone())
            .unwrap(),
    );

    match producer.enqueue(&frozen_user, b"while frozen") {
        Err(tidegate::mq::MqError::Frozen { unit }) => assert_eq!(unit, frozen_unit),
        Err(e) => panic!("expected frozen, got {e}"),
        Ok(_) => panic!("a frozen user's message was accepted"),
    }
    rt.block_on(producer.send(&thawed, b"another unit")).expect("other units go on");
    let waiting = {
        let (producer, user) = (producer.clone(), frozen_user.clone());
        rt.spawn(async move { producer.send(&user, b"after the thaw").await })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiting.is_finished(), "send went through while the unit was frozen");
    source.store(Arc::new(table.clone()));
    let delivered = rt.block_on(waiting).unwrap().expect("sent after the thaw");
    assert_eq!(delivered.route.color, table.tag(&frozen_user).unwrap().color);
}
