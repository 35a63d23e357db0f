//! MQ lanes on a real Kafka broker (`scripts/kafka.sh`) with a real coordinator binary: the
//! split of 10 000 messages, the dial moving while producing, a drain of az-b with consumers in
//! both zones, and a zone going down. Every test has its own topic and group.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kafka::{self, Got, Lane, Stop, TableFeed, TestConsumer, payload};
use common::wait_until;
use serde_json::{Value, json};
use tidegate::core::{RoutingTable, ZoneId};
use tidegate::mq::{LaneProducer, ProducerSettings, route_header};

fn producer(
    topic: &str,
    table: Arc<dyn tidegate::service::table_source::TableSource>,
) -> LaneProducer {
    LaneProducer::new(&ProducerSettings::new(&kafka::bootstrap(), topic), table).unwrap()
}

fn users(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("user-{i:04}")).collect()
}

fn blue_half(partition: u32, partitions: u32) -> bool {
    partition < partitions / 2
}

#[test]
fn ten_thousand_messages_from_a_thousand_users_follow_the_user_split() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("3s", "150ms", "200ms");
    let (topic, group) = (kafka::unique("split"), kafka::unique("split-g"));
    kafka::create_topic(&rt, &topic, 8);
    let table: RoutingTable = coordinator.table();
    assert_eq!(table.blue_percent(), 50.0);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    let consumers = [("az-b", "b1"), ("az-a", "a1")]
        .map(|(zone, id)| TestConsumer::start(&rt, &lane, zone, id, Duration::ZERO, sink.clone()));
    assert!(
        wait_until(Duration::from_secs(20), || coordinator.settled(&group, 8)),
        "the group did not settle: {}",
        coordinator.group(&group)
    );

    let lanes = producer(&topic, Arc::new(arc_swap::ArcSwap::from_pointee(table.clone())));
    let users = users(1000);
    let started = Instant::now();
    let mut acks = Vec::new();
    rt.block_on(async {
        let mut pending = Vec::new();
        for seq in 0..10u64 {
            for user in &users {
                pending.push((
                    user.clone(),
                    seq,
                    lanes.enqueue(user, &payload(user, seq)).unwrap(),
                ));
            }
        }
        for (user, seq, p) in pending {
            acks.push((user, seq, p.await.unwrap()));
        }
    });
    println!("produced 10000 messages in {:?}", started.elapsed());

    assert!(
        wait_until(Duration::from_secs(60), || sink.lock().unwrap().len() >= 10_000),
        "consumed only {} of 10000",
        sink.lock().unwrap().len()
    );
    // Consumers commit every 100 ms; the coordinator reads lag every 200 ms.
    assert!(
        wait_until(Duration::from_secs(20), || {
            let v = coordinator.group(&group);
            v["lag"]["blue"] == 0 && v["lag"]["green"] == 0
        }),
        "lag did not reach zero: {}",
        coordinator.group(&group)
    );
    for c in consumers {
        c.stop(&rt, Stop::Close);
    }
    let got = sink.lock().unwrap().clone();

    // Every message is in the half of its user's colour, and the header says so.
    let mut blue_users = BTreeSet::new();
    for (user, _, delivered) in &acks {
        let color = table.tag(user).unwrap().color;
        if color == ZoneId::BLUE {
            blue_users.insert(user.clone());
        }
        assert_eq!(delivered.route.color, color);
        assert_eq!(blue_half(delivered.route.partition, 8), color == ZoneId::BLUE, "{user}");
    }
    // Exactly once, each by the consumer of the right zone.
    assert_eq!(got.len(), 10_000, "duplicates were delivered");
    let distinct: BTreeSet<(String, u64)> = got.iter().map(|g| (g.user.clone(), g.seq)).collect();
    assert_eq!(distinct.len(), 10_000);
    for g in &got {
        let color = table.tag(&g.user).unwrap().color;
        assert_eq!(g.color, Some(color));
        assert_eq!(g.version, Some(table.version()));
        assert_eq!(g.zone, table.zone_of(color), "{g:?} read in the wrong zone");
    }
    // Per-user order: one partition per user, sequence numbers in order.
    let mut per_user: HashMap<&str, (u32, u64)> = HashMap::new();
    for g in &got {
        match per_user.get(g.user.as_str()) {
            None => assert_eq!(g.seq, 0, "{g:?} arrived before seq 0"),
            Some((partition, seq)) => {
                assert_eq!(*partition, g.partition, "{} changed partition", g.user);
                assert_eq!(g.seq, seq + 1, "{} out of order", g.user);
            }
        }
        per_user.insert(&g.user, (g.partition, g.seq));
    }
    // The message split is the user split.
    let blue_messages = got.iter().filter(|g| blue_half(g.partition, 8)).count();
    assert_eq!(blue_messages, blue_users.len() * 10);
    println!("blue users {} of 1000, blue messages {blue_messages} of 10000", blue_users.len());
    assert!((450..=550).contains(&blue_users.len()), "{} blue users at 50%", blue_users.len());
    // Both partitions of a half are used (consistent hashing spreads users).
    let used: BTreeSet<u32> = got.iter().map(|g| g.partition).collect();
    assert_eq!(used.len(), 8, "partitions used: {used:?}");
}

/// One produced message, with when it was handed to the producer.
struct Sent {
    at: Instant,
    user: String,
    version: u64,
    color: ZoneId,
    partition: u32,
}

#[test]
fn dial_fifty_to_twenty_while_producing_moves_the_split() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("3s", "150ms", "200ms");
    let topic = kafka::unique("dial");
    kafka::create_topic(&rt, &topic, 8);
    let before = coordinator.table();
    // The producer's table comes from GET /v1/routing, polled every 10 ms, as a service
    // without the watch stream would keep it.
    let feed = TableFeed::start(&coordinator, Duration::from_millis(10));
    let lanes = producer(&topic, feed.table.clone());
    let users = users(1000);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent: Arc<Mutex<Vec<Sent>>> = Arc::new(Mutex::new(Vec::new()));
    let producing = {
        let (stop, sent) = (stop.clone(), sent.clone());
        rt.spawn(async move {
            let mut i = 0usize;
            let mut inflight = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let user = &users[i % users.len()];
                let pending = lanes.enqueue(user, &payload(user, i as u64)).unwrap();
                let route = pending.route();
                sent.lock().unwrap().push(Sent {
                    at: Instant::now(),
                    user: user.clone(),
                    version: route.version,
                    color: route.color,
                    partition: route.partition,
                });
                inflight.push_back(pending);
                if inflight.len() > 200 {
                    inflight.pop_front().unwrap().await.unwrap();
                }
                i += 1;
                // About 4 000 messages a second: steady traffic, not a flood.
                if i.is_multiple_of(4) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            for p in inflight {
                p.await.unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let asked = Instant::now();
    let new_version = coordinator.dial(20.0);
    let acknowledged = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    rt.block_on(producing).unwrap();
    let after = coordinator.table();
    assert_eq!(after.version(), new_version);
    assert_eq!(after.blue_percent(), 20.0);

    let sent = sent.lock().unwrap();
    let first_new = sent.iter().position(|s| s.version == new_version).expect("new version used");
    let last_old = sent.iter().rposition(|s| s.version < new_version).unwrap();
    assert_eq!(last_old + 1, first_new, "the producer switched tables exactly once");
    // Every message follows the table it was routed with: colour and half.
    let mut moved_users = BTreeSet::new();
    for s in sent.iter() {
        let table = if s.version == new_version { &after } else { &before };
        let color = table.tag(&s.user).unwrap().color;
        assert_eq!(s.color, color, "{} at version {}", s.user, s.version);
        assert_eq!(blue_half(s.partition, 8), color == ZoneId::BLUE);
        if before.tag(&s.user).unwrap().color != after.tag(&s.user).unwrap().color {
            moved_users.insert(s.user.clone());
        }
    }
    // Exactly the users between unit 20 and 50 moved, from blue to green.
    for user in &moved_users {
        let unit = before.tag(user).unwrap().unit.0;
        assert!((20..50).contains(&unit), "{user} (unit {unit}) moved");
    }
    // After the switch the message split is the new user split: blue messages are exactly the
    // messages of users who are blue at 20 %, and those are about 20 % of the users.
    let new_msgs = &sent[first_new..];
    let blue = new_msgs.iter().filter(|s| blue_half(s.partition, 8)).count();
    let share = blue as f64 / new_msgs.len() as f64;
    println!(
        "dial 50 -> 20: PUT took {:?}; first message on the new table {:?} after the acknowledgement; \
         {} messages after the switch, {:.1}% blue; {} users moved",
        acknowledged - asked,
        sent[first_new].at.saturating_duration_since(acknowledged),
        new_msgs.len(),
        share * 100.0,
        moved_users.len()
    );
    assert!((0.15..=0.25).contains(&share), "blue share after the dial: {share}");
    assert!(!moved_users.is_empty());
    drop(feed);

    // On the wire, as a plain Kafka consumer sees the topic: no message carries a header, and
    // each partition has exactly two switch markers (the producer's first version, then the
    // dial's), each naming its partition's half and in the order of the versions.
    let records = read_raw(&topic, 8);
    let (markers, messages): (Vec<_>, Vec<_>) = records.iter().partition(|r| !r.headers.is_empty());
    assert_eq!(messages.len(), sent.len(), "every message, once");
    assert!(messages.iter().all(|r| r.key.is_some()));
    for partition in 0..8 {
        let found: Vec<(ZoneId, u64)> = markers
            .iter()
            .filter(|r| r.partition == partition)
            .map(|r| {
                assert_eq!(r.headers.len(), 1, "{r:?}");
                assert_eq!(r.headers[0].0, tidegate::mq::SWITCH_HEADER);
                assert!(r.key.is_none() && r.payload.is_none(), "{r:?}");
                route_header::decode(&r.headers[0].1).unwrap()
            })
            .collect();
        let half = if blue_half(partition, 8) { ZoneId::BLUE } else { ZoneId::GREEN };
        assert_eq!(found, [(half, before.version()), (half, new_version)], "partition {partition}");
    }
    println!(
        "on the wire: {} messages without headers, {} switch markers",
        messages.len(),
        markers.len()
    );
}

/// One record as a plain consumer reads it.
#[derive(Debug)]
struct Raw {
    partition: u32,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    headers: Vec<(String, Vec<u8>)>,
}

/// Every record of `topic`, read with a plain rdkafka consumer up to each partition's high
/// watermark.
fn read_raw(topic: &str, partitions: u32) -> Vec<Raw> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    use rdkafka::{Offset, TopicPartitionList};
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", kafka::unique("raw-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut left = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        let (low, high) =
            reader.fetch_watermarks(topic, p as i32, Duration::from_secs(10)).unwrap();
        if high > low {
            left.insert(p, high);
            tpl.add_partition_offset(topic, p as i32, Offset::Beginning).unwrap();
        }
    }
    reader.assign(&tpl).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !left.is_empty() {
        assert!(
            Instant::now() < deadline,
            "reading {topic}: partitions {left:?} not read to the end"
        );
        let Some(m) = reader.poll(Duration::from_millis(200)) else { continue };
        let m = m.unwrap();
        let partition = m.partition() as u32;
        let headers = m.headers().map_or_else(Vec::new, |h| {
            h.iter().map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec())).collect()
        });
        records.push(Raw {
            partition,
            key: m.key().map(<[u8]>::to_vec),
            payload: m.payload().map(<[u8]>::to_vec),
            headers,
        });
        if left.get(&partition).is_some_and(|high| m.offset() + 1 >= *high) {
            left.remove(&partition);
        }
    }
    records
}

/// Posts healthy outcomes for both zones until stopped, so the drain guard has readings.
fn report_outcomes(
    url: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = common::agent()
                .post(&format!("{url}/v1/outcomes"))
                .header("Authorization", &format!("Bearer {}", common::OPERATOR_TOKEN))
                .send_json(json!([
                    {"zone": "az-b", "color": "blue", "ok": 500, "error": 0},
                    {"zone": "az-a", "color": "green", "ok": 500, "error": 0}
                ]));
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

fn zone<'a>(view: &'a Value, name: &str) -> &'a Value {
    view["zones"].as_array().unwrap().iter().find(|z| z["zone"] == name).unwrap()
}

fn zone_assigned(view: &Value, zone: &str) -> usize {
    view["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["zone"] == zone)
        .map(|m| m["assignment"].as_array().unwrap().len() + m["holding"].as_array().unwrap().len())
        .sum()
}

#[test]
fn draining_az_b_lets_its_consumers_finish_the_backlog_then_hands_over() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("2s", "150ms", "150ms");
    let (topic, group) = (kafka::unique("drain"), kafka::unique("drain-g"));
    kafka::create_topic(&rt, &topic, 8);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    // az-b's consumers are slow, so the blue half has a backlog when the drain starts.
    let consumers: Vec<TestConsumer> =
        [("az-b", "b1", 4u64), ("az-b", "b2", 4), ("az-a", "a1", 0), ("az-a", "a2", 0)]
            .iter()
            .map(|(zone, id, ms)| {
                TestConsumer::start(&rt, &lane, zone, id, Duration::from_millis(*ms), sink.clone())
            })
            .collect();
    assert!(
        wait_until(Duration::from_secs(20), || coordinator.settled(&group, 8)),
        "the group did not settle: {}",
        coordinator.group(&group)
    );
    let outcomes_stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outcomes = report_outcomes(coordinator.url.clone(), outcomes_stop.clone());
    let feed = TableFeed::start(&coordinator, Duration::from_millis(10));
    let lanes = producer(&topic, feed.table.clone());
    let users = users(500);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acks: Arc<Mutex<Vec<(u32, i64)>>> = Arc::new(Mutex::new(Vec::new()));
    let producing = {
        let (stop, acks) = (stop.clone(), acks.clone());
        rt.spawn(async move {
            let mut i = 0u64;
            let mut inflight = std::collections::VecDeque::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let user = &users[i as usize % users.len()];
                inflight.push_back(lanes.enqueue(user, &payload(user, i)).unwrap());
                if inflight.len() > 100 {
                    let d = inflight.pop_front().unwrap().await.unwrap();
                    acks.lock().unwrap().push((d.route.partition, d.offset));
                }
                i += 1;
                if i.is_multiple_of(2) {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            for p in inflight {
                let d = p.await.unwrap();
                acks.lock().unwrap().push((d.route.partition, d.offset));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let backlog = coordinator.group(&group)["lag"]["blue"].as_u64().unwrap_or(0);
    let (status, drain) = coordinator.post(
        "/v1/drains",
        json!({
            "zone": "az-b", "target_percent": 0, "step_percent": 25, "interval": "250ms",
            "guard": {"max_error_rate": 0.5, "min_requests": 1, "breaches": 3},
            "reason": "mq lanes drain test"
        }),
    );
    assert_eq!(status, 201, "{drain}");
    // Watch the group: the first moment az-b owns nothing must come after its lag hit zero.
    let mut watched = Vec::new();
    let mut drain_done_at = None;
    let mut settling_seen_with_backlog = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "az-b never released: {}", coordinator.group(&group));
        let view = coordinator.group(&group);
        let (_, current) =
            common::get_json(&format!("{}/v1/drains/{}", coordinator.url, drain["id"]));
        if current["state"] == "settling" {
            settling_seen_with_backlog |=
                current["backlog_messages"].as_u64().is_none_or(|b| b > 0);
        }
        if drain_done_at.is_none() && current["state"] == "completed" {
            // Reported completed only once az-b's half is consumed.
            let blue_lag = coordinator.group(&group)["lag"]["blue"].as_u64();
            assert_eq!(blue_lag, Some(0), "drain completed with az-b's half not consumed: {view}");
            drain_done_at = Some(Instant::now());
            // Keep producing a little on the new table (all green), then stop.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let released = drain_done_at.is_some() && zone_assigned(&view, "az-b") == 0;
        watched.push((Instant::now(), view));
        if released {
            break;
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    rt.block_on(producing).unwrap();
    let released_at = watched.last().unwrap().0;
    let last = &watched.last().unwrap().1;
    assert_eq!(zone(last, "az-b")["state"], "drained_empty", "{last}");
    assert_eq!(zone(last, "az-b")["lag"], 0, "az-b released before its backlog was done: {last}");
    // While az-b still had a backlog after the drain, it kept its half.
    let mut saw_backlog_kept = false;
    for (_, view) in &watched {
        let lag = zone(view, "az-b")["lag"].as_u64().unwrap_or(0);
        if lag > 0 {
            assert!(zone_assigned(view, "az-b") > 0, "az-b lost its half with lag {lag}: {view}");
            if zone(view, "az-b")["state"] == "drained" {
                saw_backlog_kept = true;
            }
        }
    }

    // Everything produced is consumed exactly once, and committed.
    let produced = acks.lock().unwrap().clone();
    assert!(
        wait_until(Duration::from_secs(60), || sink.lock().unwrap().len() >= produced.len()),
        "consumed {} of {}",
        sink.lock().unwrap().len(),
        produced.len()
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let v = coordinator.group(&group);
            v["lag"]["blue"] == 0 && v["lag"]["green"] == 0
        }),
        "lag did not reach zero: {}",
        coordinator.group(&group)
    );
    // az-a picks the blue half up on its next heartbeat after az-b released it.
    let a_holds_all = || {
        let held: BTreeSet<u32> =
            consumers.iter().filter(|c| c.zone == "az-a").flat_map(|c| c.partitions()).collect();
        held == (0..8).collect()
    };
    assert!(wait_until(Duration::from_secs(10), a_holds_all), "az-a never took the blue half");
    let partitions: Vec<(String, Vec<u32>)> =
        consumers.iter().map(|c| (c.member.clone(), c.partitions())).collect();
    for c in consumers {
        c.stop(&rt, Stop::Close);
    }
    outcomes_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    outcomes.join().unwrap();
    let got: Vec<Got> = sink.lock().unwrap().clone();
    let mut counts: BTreeMap<(u32, i64), usize> = BTreeMap::new();
    for g in &got {
        *counts.entry((g.partition, g.offset)).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "processed more than once: {twice:?}");
    let produced_set: BTreeSet<(u32, i64)> = produced.iter().copied().collect();
    let consumed_set: BTreeSet<(u32, i64)> = counts.keys().copied().collect();
    assert_eq!(produced_set, consumed_set, "lost or unknown messages");
    // The blue half's backlog was finished by az-b itself.
    let blue_by_a = got.iter().filter(|g| blue_half(g.partition, 8) && g.zone == "az-a").count();
    assert_eq!(blue_by_a, 0, "az-a read blue messages: az-b did not finish its own backlog");
    for (member, held) in &partitions {
        if member.starts_with('b') {
            assert!(held.is_empty(), "{member} still reads {held:?}");
        }
    }
    let a_held: BTreeSet<u32> = partitions
        .iter()
        .filter(|(m, _)| m.starts_with('a'))
        .flat_map(|(_, p)| p.iter().copied())
        .collect();
    assert_eq!(a_held, (0..8).collect(), "az-a owns every partition after the drain");
    println!(
        "drain: blue backlog {backlog} when it started; az-b released its half {:?} after the drain completed; \
         {} messages, each consumed once; backlog kept while draining: {saw_backlog_kept}; \
         settled with a backlog before completing: {settling_seen_with_backlog}",
        released_at - drain_done_at.unwrap(),
        produced.len()
    );
    drop(feed);
}

/// Whether az-b's range (partitions 0-3 of 8) reads lag 0 everywhere the coordinator publishes
/// it: the group view's range total, each of its partitions, and the lag gauge on `/metrics`.
/// Returns what it saw when it does not.
fn blue_range_empty(
    coordinator: &kafka::Coordinator,
    group: &str,
    view: &Value,
) -> Result<(), String> {
    let lag = &view["lag"];
    if lag["blue"] != 0 {
        return Err(format!("range lag {}", lag["blue"]));
    }
    let partitions = lag["partitions"].as_array().ok_or("no partition lags")?;
    for p in partitions.iter().filter(|p| p["partition"].as_u64().is_some_and(|n| n < 4)) {
        if p["lag"] != 0 {
            return Err(format!("partition lag {p}"));
        }
    }
    let metrics = common::agent()
        .get(&format!("{}/metrics", coordinator.url))
        .call()
        .map_err(|e| e.to_string())?
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    let gauge = metrics
        .lines()
        .find(|l| {
            l.starts_with("tidegate_lane_lag_messages{")
                && l.contains(&format!("group=\"{group}\""))
                && l.contains("half=\"blue\"")
        })
        .ok_or("no lag gauge for the blue half")?;
    if !gauge.ends_with(" 0") {
        return Err(format!("gauge {gauge}"));
    }
    Ok(())
}

/// Issue 51: a version change writes switch markers only into the ranges it sends messages to.
/// Once az-b is drained and its half consumed, pins and dial moves of another domain (each a new
/// routing version, with the producer writing throughout) leave az-b's half exactly as its
/// consumers left it: `drained_empty`, lag 0 on every partition and on the gauge, and not granted
/// to az-b again. Then the same with az-b's consumers stopped (the half is `down`, read by az-a).
/// The control writes one marker into each partition of the drained half by hand, as producers
/// did before: the half shows a backlog and goes back to az-b, so the check can fail.
#[test]
fn version_changes_after_a_drain_leave_the_drained_half_empty_and_ungranted() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("2s", "150ms", "150ms");
    let (topic, group) = (kafka::unique("drained"), kafka::unique("drained-g"));
    kafka::create_topic(&rt, &topic, 8);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    let mut consumers: Vec<TestConsumer> =
        [("az-b", "b1"), ("az-b", "b2"), ("az-a", "a1"), ("az-a", "a2")]
            .iter()
            .map(|(zone, id)| {
                TestConsumer::start(&rt, &lane, zone, id, Duration::ZERO, sink.clone())
            })
            .collect();
    assert!(
        wait_until(Duration::from_secs(20), || coordinator.settled(&group, 8)),
        "the group did not settle: {}",
        coordinator.group(&group)
    );
    let feed = TableFeed::start(&coordinator, Duration::from_millis(10));
    let lanes = Arc::new(producer(&topic, feed.table.clone()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producing = {
        let (stop, lanes, users) = (stop.clone(), lanes.clone(), users(300));
        rt.spawn(async move {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let user = &users[i as usize % users.len()];
                lanes.send(user, &payload(user, i)).await.unwrap();
                i += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            i
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let version =
        |url: &str| common::get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let (status, body) = common::put_json(
        &format!("{}/v1/dial", coordinator.url),
        common::OPERATOR_TOKEN,
        json!({"blue_percent": 0, "expected_version": version(&coordinator.url), "force": true,
               "reason": "drain az-b for maintenance"}),
    );
    assert_eq!(status, 200, "{body}");
    let drained_at = body["version"].as_u64().unwrap();
    let drained = |view: &Value| {
        zone(view, "az-b")["state"] == "drained_empty" && zone_assigned(view, "az-b") == 0
    };
    assert!(
        wait_until(Duration::from_secs(30), || {
            let view = coordinator.group(&group);
            drained(&view) && blue_range_empty(&coordinator, &group, &view).is_ok()
        }),
        "az-b's half never became drained_empty and went to az-a: {}",
        coordinator.group(&group)
    );
    let (status, body) = common::post_json(
        &format!("{}/v1/domains", coordinator.url),
        common::OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": version(&coordinator.url), "reason": "another domain"}),
    );
    assert_eq!(status, 200, "{body}");

    // Version changes with the producer writing throughout; the view is read every 50 ms, and
    // each change is watched for 1.5 s (ten lag readings at 150 ms).
    let changes = std::cell::Cell::new(0);
    let change = |i: usize| {
        let url = &coordinator.url;
        let (status, body) = if i.is_multiple_of(2) {
            common::put_json(
                &format!("{url}/v1/pins/pinned-{i}"),
                common::OPERATOR_TOKEN,
                json!({"color": "green", "expected_version": version(url), "reason": "a tester"}),
            )
        } else {
            common::put_json(
                &format!("{url}/v1/dial"),
                common::OPERATOR_TOKEN,
                json!({"domain": "search", "blue_percent": 10 * i, "expected_version": version(url),
                       "force": true, "reason": "another domain's dial"}),
            )
        };
        assert_eq!(status, 200, "change {i}: {body}");
        changes.set(changes.get() + 1);
    };
    let watch = |phase: &str, ok: &dyn Fn(&Value) -> bool| {
        let until = Instant::now() + Duration::from_millis(1500);
        let mut samples = 0;
        while Instant::now() < until {
            let view = coordinator.group(&group);
            assert!(ok(&view), "{phase}: az-b's half changed: {view}");
            if let Err(e) = blue_range_empty(&coordinator, &group, &view) {
                panic!("{phase}: az-b's half is not empty ({e}): {view}");
            }
            samples += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        samples
    };
    let mut samples = 0;
    for i in 0..6 {
        change(i);
        samples += watch("consumers running", &drained);
    }

    // The control: one marker per partition of the drained half, written by hand at a newer
    // version, is a backlog, and the half goes back to az-b's consumers to read it.
    rt.block_on(async {
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let raw: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", kafka::bootstrap())
            .create()
            .unwrap();
        let mut buf = [0; route_header::MAX_LEN];
        let value =
            route_header::encode(ZoneId::BLUE, version(&coordinator.url), &mut buf).to_vec();
        for partition in 0..4 {
            let headers = OwnedHeaders::new()
                .insert(Header { key: tidegate::mq::SWITCH_HEADER, value: Some(&value) });
            let record = FutureRecord::<(), ()>::to(&topic).partition(partition).headers(headers);
            raw.send(record, Duration::from_secs(10)).await.unwrap();
        }
    });
    let mut control = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            let view = coordinator.group(&group);
            let flipped = !drained(&view) || blue_range_empty(&coordinator, &group, &view).is_err();
            if flipped {
                control = Some(format!(
                    "state {}, lag {}, az-b granted {}",
                    zone(&view, "az-b")["state"],
                    zone(&view, "az-b")["lag"],
                    zone_assigned(&view, "az-b")
                ));
            }
            flipped
        }),
        "control: markers in the drained half went unnoticed: {}",
        coordinator.group(&group)
    );
    // az-b's consumers read the markers, and the half is drained_empty and az-a's again.
    assert!(
        wait_until(Duration::from_secs(30), || {
            let view = coordinator.group(&group);
            drained(&view) && blue_range_empty(&coordinator, &group, &view).is_ok()
        }),
        "az-b's half did not settle again after the control: {}",
        coordinator.group(&group)
    );

    // az-b's consumers stop (the maintenance the drain was for): the half is `down`, read by
    // az-a, and later versions still put nothing in it.
    for c in consumers.drain(..2) {
        c.stop(&rt, Stop::Close);
    }
    assert!(
        wait_until(Duration::from_secs(20), || zone(&coordinator.group(&group), "az-b")["state"]
            == "down"),
        "az-b did not show down: {}",
        coordinator.group(&group)
    );
    let stopped =
        |view: &Value| zone(view, "az-b")["state"] == "down" && zone(view, "az-b")["members"] == 0;
    for i in 6..10 {
        change(i);
        samples += watch("consumers stopped", &stopped);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let produced = rt.block_on(producing).unwrap();

    // On the wire: the drained half holds no marker newer than the drain's version but the
    // control's four.
    let late: Vec<(u32, u64)> = read_raw(&topic, 8)
        .iter()
        .filter(|r| r.partition < 4 && !r.headers.is_empty())
        .map(|r| (r.partition, route_header::decode(&r.headers[0].1).unwrap().1))
        .filter(|&(_, v)| v > drained_at)
        .collect();
    assert_eq!(late.len(), 4, "markers after the drain in az-b's half: {late:?}");
    let a_holds_all = || {
        let held: BTreeSet<u32> = consumers.iter().flat_map(|c| c.partitions()).collect();
        held == (0..8).collect()
    };
    assert!(wait_until(Duration::from_secs(10), a_holds_all), "az-a does not read every partition");
    for c in consumers {
        c.stop(&rt, Stop::Close);
    }
    println!(
        "drained half: {} version changes after the drain, {samples} samples with lag 0 on every \
         partition and the gauge, never granted to az-b; {produced} messages; control: {}",
        changes.get(),
        control.unwrap()
    );
    drop(feed);
}

#[test]
fn when_az_b_goes_down_az_a_takes_the_blue_half_and_nothing_is_lost() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("1500ms", "150ms", "200ms");
    let (topic, group) = (kafka::unique("down"), kafka::unique("down-g"));
    kafka::create_topic(&rt, &topic, 8);
    let table = coordinator.table();
    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    let mut consumers: Vec<TestConsumer> =
        [("az-b", "b1"), ("az-b", "b2"), ("az-a", "a1"), ("az-a", "a2")]
            .iter()
            .map(|(zone, id)| {
                TestConsumer::start(&rt, &lane, zone, id, Duration::ZERO, sink.clone())
            })
            .collect();
    assert!(
        wait_until(Duration::from_secs(20), || coordinator.settled(&group, 8)),
        "the group did not settle: {}",
        coordinator.group(&group)
    );
    let lanes = producer(&topic, Arc::new(arc_swap::ArcSwap::from_pointee(table.clone())));
    let users = users(400);
    let produce = |from: u64, n: u64| -> Vec<(u32, i64)> {
        rt.block_on(async {
            let mut pending = Vec::new();
            for i in from..from + n {
                let user = &users[i as usize % users.len()];
                pending.push(lanes.enqueue(user, &payload(user, i)).unwrap());
            }
            let mut out = Vec::new();
            for p in pending {
                let d = p.await.unwrap();
                out.push((d.route.partition, d.offset));
            }
            out
        })
    };
    let mut produced = produce(0, 2000);
    assert!(wait_until(Duration::from_secs(30), || sink.lock().unwrap().len() >= 2000));
    // az-b dies: both of its consumers stop without committing or leaving.
    let crashed_at = Instant::now();
    let a_consumers = consumers.split_off(2);
    for c in consumers {
        c.stop(&rt, Stop::Crash);
    }
    produced.extend(produce(2000, 2000));
    let blue_backlog: BTreeSet<(u32, i64)> =
        produced[2000..].iter().copied().filter(|(p, _)| blue_half(*p, 8)).collect();
    assert!(!blue_backlog.is_empty());
    assert!(
        wait_until(Duration::from_secs(30), || {
            let v = coordinator.group(&group);
            zone(&v, "az-b")["state"] == "down" && zone_assigned(&v, "az-a") == 16
        }),
        "az-a did not take over: {}",
        coordinator.group(&group)
    );
    let took_over = crashed_at.elapsed();
    let consumed = |sink: &Mutex<Vec<Got>>| -> BTreeSet<(u32, i64)> {
        sink.lock().unwrap().iter().map(|g| (g.partition, g.offset)).collect()
    };
    let all: BTreeSet<(u32, i64)> = produced.iter().copied().collect();
    assert!(
        wait_until(Duration::from_secs(30), || consumed(&sink).is_superset(&all)),
        "lost: {} messages",
        all.difference(&consumed(&sink)).count()
    );
    let got = sink.lock().unwrap().clone();
    // The blue backlog produced after the crash was read by az-a.
    for g in got.iter().filter(|g| blue_backlog.contains(&(g.partition, g.offset))) {
        assert_eq!(g.zone, "az-a", "{g:?}");
    }
    // Anything read twice was read first by a crashed az-b consumer that never committed it.
    let mut by_offset: BTreeMap<(u32, i64), Vec<&Got>> = BTreeMap::new();
    for g in &got {
        by_offset.entry((g.partition, g.offset)).or_default().push(g);
    }
    let mut redelivered = 0;
    for reads in by_offset.values().filter(|r| r.len() > 1) {
        assert_eq!(reads.len(), 2, "{reads:?}");
        assert_eq!(reads[0].zone, "az-b", "{reads:?}");
        assert_eq!(reads[1].zone, "az-a", "{reads:?}");
        redelivered += 1;
    }
    println!(
        "zone down: az-a owned the blue half {took_over:?} after az-b's consumers died \
         (session timeout 1.5 s); {} messages, none lost; {redelivered} read again (uncommitted by the dead consumers)",
        all.len()
    );
    for c in a_consumers {
        c.check();
        c.stop(&rt, Stop::Close);
    }
}

#[test]
fn a_consumer_does_not_commit_once_its_session_may_have_expired() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("1s", "100ms", "200ms");
    let (topic, group) = (kafka::unique("fence"), kafka::unique("fence-g"));
    kafka::create_topic(&rt, &topic, 2);
    let lanes = producer(&topic, Arc::new(arc_swap::ArcSwap::from_pointee(coordinator.table())));
    let mut settings = tidegate::mq::ConsumerSettings::new(
        &coordinator.url,
        &kafka::bootstrap(),
        &topic,
        &group,
        "az-a",
    );
    settings.commit_interval = Duration::from_secs(3600); // commits only when asked
    settings.token = Some(common::OPERATOR_TOKEN.to_owned()); // membership is a write
    let pid = coordinator.server.child.id().to_string();
    let signal = |sig: &str| {
        assert!(std::process::Command::new("kill").args([sig, &pid]).status().unwrap().success());
    };
    let outcome = rt.block_on(async {
        let mut consumer = tidegate::mq::LaneConsumer::start(settings).await.unwrap();
        let users = users(20);
        for (i, user) in users.iter().enumerate() {
            lanes.enqueue(user, &payload(user, i as u64)).unwrap().await.unwrap();
        }
        // The only member (az-b has none) reads both halves: take one message.
        tokio::time::timeout(Duration::from_secs(30), consumer.next()).await.unwrap().unwrap();
        // The coordinator freezes: no heartbeat is answered for longer than the session, so
        // the partitions may already be another member's. The commit must be refused.
        signal("-STOP");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let outcome = consumer.commit().await;
        signal("-CONT");
        outcome
    });
    assert!(
        matches!(outcome, Err(tidegate::mq::MqError::SessionLost)),
        "committed with the session unknown: {outcome:?}"
    );
}

/// A rolling upgrade has producers of every route format writing one topic at once: the
/// consumer learns colour and version from each (`tg`, the text `tidegate-route` before it, the
/// two headers before that, and a switch marker followed by messages without headers), never
/// hands a marker out, and a `tg` value it cannot decode leaves the version unknown instead of
/// failing the consumer.
#[test]
fn a_consumer_reads_every_route_header_format_of_a_rolling_upgrade() {
    use rdkafka::ClientConfig;
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};

    let rt = kafka::runtime();
    let coordinator = kafka::coordinator("3s", "150ms", "200ms");
    let (topic, group) = (kafka::unique("formats"), kafka::unique("formats-g"));
    kafka::create_topic(&rt, &topic, 8);
    let mut settings = tidegate::mq::ConsumerSettings::new(
        &coordinator.url,
        &kafka::bootstrap(),
        &topic,
        &group,
        "az-a",
    );
    settings.token = Some(common::OPERATOR_TOKEN.to_owned()); // membership is a write
    let mut tg = [0; route_header::MAX_LEN];
    let tg = route_header::encode(ZoneId::GREEN, 300, &mut tg).to_vec();
    let mut tgs = [0; route_header::MAX_LEN];
    let tgs = route_header::encode(ZoneId::GREEN, 7, &mut tgs).to_vec();
    type Case<'a> = (&'a str, i32, Vec<(&'a str, &'a [u8])>, Option<ZoneId>, Option<u64>);
    let cases: [Case<'_>; 6] = [
        ("tg", 5, vec![("tg", &tg[..])], Some(ZoneId::GREEN), Some(300)),
        ("text", 1, vec![("tidegate-route", b"blue;v=12")], Some(ZoneId::BLUE), Some(12)),
        (
            "two",
            2,
            vec![("tidegate-color", b"blue"), ("tidegate-version", b"11")],
            Some(ZoneId::BLUE),
            Some(11),
        ),
        // A value that does not decode is ignored: the message is one without a route header,
        // in the green half, and no marker was read in partition 6.
        ("bad", 6, vec![("tg", b"x\x01")], Some(ZoneId::GREEN), None),
        // No header at all, no marker before it: the colour of the partition's half.
        ("plain", 0, vec![], Some(ZoneId::BLUE), None),
        // No header, after the switch marker written to partition 4 first: the marker's colour
        // and version (the marker itself is never handed out: it has no key).
        ("after-switch", 4, vec![], Some(ZoneId::GREEN), Some(7)),
    ];
    let got = rt.block_on(async {
        // The only member (az-b has none) reads both halves.
        let mut consumer = tidegate::mq::LaneConsumer::start(settings).await.unwrap();
        let producer: FutureProducer =
            ClientConfig::new().set("bootstrap.servers", kafka::bootstrap()).create().unwrap();
        let switch = OwnedHeaders::new().insert(Header { key: "tgs", value: Some(&tgs[..]) });
        let marker = FutureRecord::<(), ()>::to(&topic).partition(4).headers(switch);
        producer.send(marker, Duration::from_secs(10)).await.unwrap();
        for (user, partition, headers, _, _) in &cases {
            let headers = headers.iter().fold(OwnedHeaders::new(), |h, &(key, value)| {
                h.insert(Header { key, value: Some(value) })
            });
            let payload = payload(user, 0);
            let record = FutureRecord::to(&topic)
                .partition(*partition)
                .key(*user)
                .payload(&payload)
                .headers(headers);
            producer.send(record, Duration::from_secs(10)).await.unwrap();
        }
        let mut got = BTreeMap::new();
        while got.len() < cases.len() {
            let m = tokio::time::timeout(Duration::from_secs(30), consumer.next())
                .await
                .expect("a message within 30 s")
                .unwrap();
            let user = String::from_utf8(m.key.clone().unwrap()).unwrap();
            got.insert(user, (m.color, m.routing_version));
        }
        consumer.close().await.unwrap();
        got
    });
    for (user, _, _, color, version) in &cases {
        assert_eq!(got[*user], (*color, *version), "{user}");
    }
}
