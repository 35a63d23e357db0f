//! Three-zone MQ lanes on a real Kafka broker (`scripts/kafka.sh`) with the real coordinator
//! binary (issue 22): a coordinator configured with a third zone (az-c, lane `red`), a 12-partition
//! topic cut in thirds, two `LaneConsumer`s in each of az-a, az-b and az-c, and a `LaneProducer`
//! sending for 2 400 users. Every message lands in the range of its user's zone (the route header
//! `tg` says which zone and version), each zone's consumers read exactly their third, nothing is
//! lost or read twice, and after az-c is evacuated its users' new messages go to the receivers'
//! thirds while az-c's consumers finish its backlog before its third is handed over. A producer on
//! a three-zone table refuses a topic whose partition count is not a multiple of 3, and an odd
//! multiple (9 partitions) works end to end.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use common::kafka::{self, Coordinator, Got, Lane, Stop, TestConsumer, payload};
use common::{OPERATOR_TOKEN, post_json, put_json, wait_until};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::{Value, json};
use tidegate::core::{LaneError, RoutingTable, UnitMode, UnitScheme, ZoneId, Zones};
use tidegate::mq::{Delivered, LaneProducer, MqError, ProducerSettings, route_header};

const PARTITIONS: u32 = 12;
const USERS: usize = 2_400;
/// Messages per user before the evacuation (sequence numbers `0..4`) and after it (`4..6`).
const BEFORE: Range<u64> = 0..4;
const AFTER: Range<u64> = 4..6;

const THIRD_ZONE: &str = r#"
[zones.az-c]
lane = "red"
"#;

const ZONES: [&str; 3] = ["az-b", "az-a", "az-c"];

/// The partitions of each zone on a 12-partition topic cut in thirds, written out rather than
/// computed with `LaneConfig`, so a wrong cut in the code cannot agree with itself. Zone indices:
/// az-b is blue (0), az-a green (1), az-c the third zone (2).
fn third(zone: &str) -> Range<u32> {
    match zone {
        "az-b" => 0..4,
        "az-a" => 4..8,
        "az-c" => 8..12,
        other => panic!("no zone {other}"),
    }
}

/// The zone whose third holds `partition`.
fn third_owner(partition: u32) -> &'static str {
    ZONES.into_iter().find(|z| third(z).contains(&partition)).expect("a partition of the topic")
}

/// The control: the zone a two-zone cut (blue `[0, 6)`, green `[6, 12)`) would give `partition`.
fn half_owner(partition: u32) -> &'static str {
    if partition < PARTITIONS / 2 { "az-b" } else { "az-a" }
}

fn users() -> Vec<String> {
    (0..USERS).map(|i| format!("user-{i:04}")).collect()
}

fn zone_of_user(table: &RoutingTable, user: &str) -> String {
    table.zone_of(table.tag(user).unwrap().color).to_owned()
}

fn producer(topic: &str, table: Arc<ArcSwap<RoutingTable>>) -> Result<LaneProducer, MqError> {
    LaneProducer::new(&ProducerSettings::new(&kafka::bootstrap(), topic), table)
}

fn members_of<'a>(view: &'a Value, zone: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    view["members"].as_array().into_iter().flatten().filter(move |m| m["zone"] == zone)
}

fn numbers(value: &Value) -> BTreeSet<u32> {
    value.as_array().unwrap().iter().map(|p| p.as_u64().unwrap() as u32).collect()
}

/// The partitions `zone`'s members have in `field` (`assignment`, `holding`, `pending`).
fn zone_partitions(view: &Value, zone: &str, field: &str) -> BTreeSet<u32> {
    members_of(view, zone).flat_map(|m| numbers(&m[field])).collect()
}

fn zone_view<'a>(view: &'a Value, zone: &str) -> &'a Value {
    view["zones"].as_array().unwrap().iter().find(|z| z["zone"] == zone).unwrap()
}

/// Every zone's two members hold and are assigned exactly two partitions of its own third, with
/// nothing pending: the group settled on thirds.
fn settled_in_thirds(view: &Value) -> bool {
    ZONES.iter().all(|zone| {
        let expected: BTreeSet<u32> = third(zone).collect();
        let members: Vec<&Value> = members_of(view, zone).collect();
        members.len() == 2
            && members.iter().all(|m| {
                numbers(&m["assignment"]).len() == 2
                    && m["assignment"] == m["holding"]
                    && m["pending"].as_array().unwrap().is_empty()
            })
            && zone_partitions(view, zone, "assignment") == expected
    })
}

fn put_units(coordinator: &Coordinator, moves: Value, version: u64) -> Value {
    let (status, body) = put_json(
        &format!("{}/v1/units", coordinator.url),
        OPERATOR_TOKEN,
        json!({"moves": moves, "expected_version": version, "reason": "three-zone lanes test"}),
    );
    assert_eq!(status, 200, "{body}");
    body
}

/// Enqueues every user's messages `seqs` (user-major within a sequence number) and waits for all
/// acknowledgements.
fn produce(
    rt: &tokio::runtime::Runtime,
    lanes: &LaneProducer,
    users: &[String],
    seqs: Range<u64>,
) -> Vec<(String, u64, Delivered)> {
    rt.block_on(async {
        let mut pending = Vec::new();
        for seq in seqs {
            for user in users {
                pending.push((
                    user.clone(),
                    seq,
                    lanes.enqueue(user, &payload(user, seq)).unwrap(),
                ));
            }
        }
        let mut acks = Vec::with_capacity(pending.len());
        for (user, seq, p) in pending {
            acks.push((user, seq, p.await.unwrap()));
        }
        acks
    })
}

/// One record as it is in the log, read back with a plain rdkafka consumer.
struct Logged {
    partition: u32,
    key: String,
    payload: String,
    tg: Vec<u8>,
}

/// Every message of `topic` with the route it was produced at, read from the beginning of each
/// partition up to its high watermark.
fn read_log(topic: &str) -> Vec<Logged> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", kafka::unique("thirds-verify"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut total = 0;
    for p in 0..PARTITIONS as i32 {
        tpl.add_partition_offset(topic, p, Offset::Beginning).unwrap();
        let (low, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).unwrap();
        total += high - low;
    }
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    // The lane producer writes switch markers (no key, no value, a `tgs` header) and messages
    // without headers: a message's route is its partition's last marker.
    let mut switched: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while read < total && Instant::now() < deadline {
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) else { continue };
        read += 1;
        let partition = m.partition() as u32;
        let header = |name: &str| {
            m.headers()
                .and_then(|h| h.iter().find(|h| h.key == name))
                .map(|h| h.value.unwrap_or_default().to_vec())
        };
        if let Some(marker) = header(tidegate::mq::SWITCH_HEADER) {
            assert!(m.key().is_none() && m.payload().is_none(), "a marker with a key or value");
            switched.insert(partition, marker);
            continue;
        }
        let tg = header(tidegate::mq::ROUTE_HEADER)
            .or_else(|| switched.get(&partition).cloned())
            .unwrap_or_default();
        out.push(Logged {
            partition,
            key: String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
            payload: String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
            tg,
        });
    }
    assert_eq!(read, total, "read {read} of {total} records back");
    out
}

#[test]
fn three_zone_lanes_deliver_each_zones_range_to_its_consumers() {
    let started = Instant::now();
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator_with("3s", "150ms", "200ms", THIRD_ZONE);
    let (topic, group) = (kafka::unique("thirds"), kafka::unique("thirds-g"));
    kafka::create_topic(&rt, &topic, PARTITIONS);

    // The genesis lists az-b (blue), az-a (green), then the configured az-c (red), which owns
    // nothing yet. Give it 40 of the 100 units in one version.
    let genesis = coordinator.table();
    let listed: Vec<(&str, &str)> =
        genesis.zones().iter().map(|(_, z)| (z.name.as_str(), z.lane.as_str())).collect();
    assert_eq!(listed, [("az-b", "blue"), ("az-a", "green"), ("az-c", "red")]);
    let body = put_units(
        &coordinator,
        json!([{"units": "30-49", "zone": "az-c"}, {"units": "80-99", "zone": "red"}]),
        genesis.version(),
    );
    assert_eq!(body["moved_units"], 40, "{body}");
    let before = coordinator.table();
    assert_eq!(before.version(), genesis.version() + 1);
    let units: Vec<u32> = (0..3).map(|z| before.units_of(ZoneId(z))).collect();
    assert_eq!(units, [30, 30, 40], "units of az-b, az-a, az-c");

    // Two consumers in each zone. az-c's are slow (3 ms a message), so its third still has a
    // backlog when it is evacuated.
    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    let consumers: Vec<TestConsumer> = [
        ("az-b", "b1", 0u64),
        ("az-b", "b2", 0),
        ("az-a", "a1", 0),
        ("az-a", "a2", 0),
        ("az-c", "c1", 3),
        ("az-c", "c2", 3),
    ]
    .iter()
    .map(|(zone, id, ms)| {
        TestConsumer::start(&rt, &lane, zone, id, Duration::from_millis(*ms), sink.clone())
    })
    .collect();
    let settling = Instant::now();
    assert!(
        wait_until(Duration::from_secs(30), || settled_in_thirds(&coordinator.group(&group))),
        "the group did not settle on thirds: {}",
        coordinator.group(&group)
    );
    let settled_after = settling.elapsed();
    let view = coordinator.group(&group);
    assert_eq!(view["partitions"], PARTITIONS);
    for zone in ZONES {
        let expected: Vec<u32> = third(zone).collect();
        assert_eq!(numbers(&zone_view(&view, zone)["half"]), expected.iter().copied().collect());
        // What the consumers themselves read, not only what the coordinator says.
        let reading = || -> BTreeSet<u32> {
            consumers.iter().filter(|c| c.zone == zone).flat_map(|c| c.partitions()).collect()
        };
        assert!(
            wait_until(Duration::from_secs(10), || reading() == expected.iter().copied().collect()),
            "{zone}'s consumers read {:?}, not {expected:?}",
            reading()
        );
    }

    // Phase 1: 4 messages for each of 2 400 users on the three-zone table.
    let source = Arc::new(ArcSwap::from_pointee(before.clone()));
    let lanes = producer(&topic, source.clone()).unwrap();
    assert_eq!((lanes.lane().partitions(), lanes.lane().zones()), (PARTITIONS, 3));
    let users = users();
    let producing = Instant::now();
    let mut acks = produce(&rt, &lanes, &users, BEFORE);
    let phase1_took = producing.elapsed();
    let mut users_in: BTreeMap<String, usize> = BTreeMap::new();
    for user in &users {
        *users_in.entry(zone_of_user(&before, user)).or_default() += 1;
    }
    for (user, _, d) in &acks {
        let zone = zone_of_user(&before, user);
        assert_eq!(d.route.color, before.tag(user).unwrap().color, "{user}");
        assert_eq!(d.route.version, before.version(), "{user}");
        assert!(
            third(&zone).contains(&d.route.partition),
            "{user} of {zone} on {}",
            d.route.partition
        );
    }

    // Evacuate az-c (no capacity is configured: az-b and az-a take half each). The producer
    // switches to the new table at once; az-c's consumers still have a backlog.
    let (status, evacuated) = post_json(
        &format!("{}/v1/units/evacuate", coordinator.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-c", "expected_version": before.version(), "reason": "three-zone lanes test"}),
    );
    assert_eq!(status, 200, "{evacuated}");
    assert_eq!(evacuated["moved_units"], 40, "{evacuated}");
    let evacuated_at = Instant::now();
    let after = coordinator.table();
    assert_eq!(after.version(), before.version() + 1);
    assert_eq!(after.units_of(ZoneId(2)), 0);
    let gained: Vec<u32> =
        (0..2).map(|z| after.units_of(ZoneId(z)) - before.units_of(ZoneId(z))).collect();
    assert!(gained.iter().all(|g| *g > 0), "both receivers get units: {gained:?}");
    source.store(Arc::new(after.clone()));

    // Phase 2: 2 more messages for every user on the table without az-c.
    let producing = Instant::now();
    let phase2 = produce(&rt, &lanes, &users, AFTER);
    let phase2_took = producing.elapsed();
    let moved: BTreeSet<&str> =
        users.iter().filter(|u| zone_of_user(&before, u) == "az-c").map(String::as_str).collect();
    let mut first_partition: HashMap<&str, u32> = HashMap::new();
    for (user, _, d) in &acks {
        first_partition.insert(user, d.route.partition);
    }
    let mut moved_to: BTreeMap<String, usize> = BTreeMap::new();
    for (user, _, d) in &phase2 {
        let zone = zone_of_user(&after, user);
        assert_ne!(zone, "az-c");
        assert_eq!(d.route.version, after.version(), "{user}");
        assert!(
            third(&zone).contains(&d.route.partition),
            "{user} of {zone} on {}",
            d.route.partition
        );
        if moved.contains(user.as_str()) {
            *moved_to.entry(zone).or_default() += 1;
        } else {
            // A user whose zone did not change keeps its partition.
            assert_eq!(zone, zone_of_user(&before, user), "{user} moved without being az-c's");
            assert_eq!(
                d.route.partition,
                first_partition[user.as_str()],
                "{user} changed partition"
            );
        }
    }
    // The moved users' messages went to both receivers' thirds.
    assert_eq!(moved_to.len(), 2, "moved users' messages went to {moved_to:?}");
    assert_eq!(moved_to.values().sum::<usize>(), moved.len() * 2);
    acks.extend(phase2);
    let total = acks.len();
    assert_eq!(total, USERS * (BEFORE.end - BEFORE.start + AFTER.end - AFTER.start) as usize);

    // Watch az-c drain: while its third still has lag, only its own consumers may hold it; once
    // the lag is zero it is `drained_empty` and az-b and az-a take its third over.
    let c_third: BTreeSet<u32> = third("az-c").collect();
    let (mut kept_with_backlog, mut max_backlog, mut drained_seen) = (0, 0, false);
    let deadline = Instant::now() + Duration::from_secs(120);
    let handed_over_after = loop {
        assert!(
            Instant::now() < deadline,
            "az-c never handed over: consumed {} of {total}: {}",
            sink.lock().unwrap().len(),
            coordinator.group(&group)
        );
        let view = coordinator.group(&group);
        let c = zone_view(&view, "az-c");
        let others: BTreeSet<u32> = ["az-b", "az-a"]
            .iter()
            .flat_map(|z| {
                let mut p = zone_partitions(&view, z, "assignment");
                p.extend(zone_partitions(&view, z, "holding"));
                p
            })
            .collect();
        if c["lag"].as_u64().is_none_or(|lag| lag > 0) {
            assert!(others.is_disjoint(&c_third), "az-c's third left it with a backlog: {view}");
            assert_eq!(zone_partitions(&view, "az-c", "assignment"), c_third, "{view}");
            kept_with_backlog += 1;
            max_backlog = max_backlog.max(c["lag"].as_u64().unwrap_or(0));
            // No units and a backlog: `drained`, still reading its own third.
            drained_seen |= c["state"] == "drained";
        }
        let held_by_others = zone_partitions(&view, "az-b", "holding")
            .union(&zone_partitions(&view, "az-a", "holding"))
            .copied()
            .collect::<BTreeSet<u32>>();
        if c["state"] == "drained_empty"
            && c_third.is_subset(&held_by_others)
            && zone_partitions(&view, "az-c", "holding").is_empty()
        {
            break evacuated_at.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        wait_until(Duration::from_secs(60), || sink.lock().unwrap().len() >= total),
        "consumed only {} of {total}",
        sink.lock().unwrap().len()
    );
    assert!(
        wait_until(Duration::from_secs(20), || {
            let v = coordinator.group(&group);
            ZONES.iter().all(|z| zone_view(&v, z)["lag"] == 0)
        }),
        "lag did not reach zero: {}",
        coordinator.group(&group)
    );
    let consumed_after = evacuated_at.elapsed();
    assert!(max_backlog > 0 && drained_seen, "az-c had no backlog to finish after the evacuation");
    // The third of az-c is read by az-b's and az-a's consumers now.
    let view = coordinator.group(&group);
    let c_split: BTreeSet<u32> = ["az-b", "az-a"]
        .iter()
        .flat_map(|z| zone_partitions(&view, z, "assignment"))
        .filter(|p| c_third.contains(p))
        .collect();
    assert_eq!(c_split, c_third, "{view}");
    for c in consumers {
        c.check();
        c.stop(&rt, Stop::Close);
    }

    // Nothing lost, nothing read twice: by (user, seq) from the payload, by key, by offset.
    let got: Vec<Got> = sink.lock().unwrap().clone();
    assert_eq!(got.len(), total, "duplicates were delivered");
    let distinct: BTreeSet<(&str, u64)> = got.iter().map(|g| (g.user.as_str(), g.seq)).collect();
    let produced: BTreeSet<(&str, u64)> = acks.iter().map(|(u, s, _)| (u.as_str(), *s)).collect();
    assert_eq!(distinct, produced, "lost or unknown messages");
    let offsets: BTreeSet<(u32, i64)> = got.iter().map(|g| (g.partition, g.offset)).collect();
    let acked: BTreeSet<(u32, i64)> =
        acks.iter().map(|(_, _, d)| (d.route.partition, d.offset)).collect();
    assert_eq!(offsets, acked);
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for g in &got {
        assert_eq!(g.key.as_deref(), Some(g.user.as_str()), "{g:?}");
        *per_key.entry(&g.user).or_default() += 1;
    }
    let per_user = (BEFORE.end - BEFORE.start + AFTER.end - AFTER.start) as usize;
    assert_eq!(per_key.len(), USERS);
    assert!(per_key.values().all(|n| *n == per_user), "a user got other than {per_user}");

    // Each message was read in its user's zone at its version, from that zone's third, with the
    // zone and version in its route header.
    let table_at = |version: Option<u64>| match version {
        Some(v) if v == before.version() => &before,
        Some(v) if v == after.version() => &after,
        other => panic!("routing version {other:?}"),
    };
    let mut read_in: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for g in &got {
        let table = table_at(g.version);
        let color = table.tag(&g.user).unwrap().color;
        assert_eq!(g.color, Some(color), "{g:?}");
        assert_eq!(g.zone, table.zone_of(color), "{g:?} read in the wrong zone");
        assert!(third(&g.zone).contains(&g.partition), "{g:?} outside {}'s third", g.zone);
        *read_in.entry((g.version.unwrap(), g.zone.clone())).or_default() += 1;
    }
    // Messages per zone are its users' messages, at each version.
    let mut expected_in: BTreeMap<(u64, String), usize> = BTreeMap::new();
    for (user, _, d) in &acks {
        let zone = zone_of_user(table_at(Some(d.route.version)), user);
        *expected_in.entry((d.route.version, zone)).or_default() += 1;
    }
    assert_eq!(read_in, expected_in);
    assert!(!read_in.contains_key(&(after.version(), "az-c".to_owned())), "az-c read new messages");
    // Per user and partition, in order.
    let mut last: HashMap<(&str, u32), u64> = HashMap::new();
    for g in &got {
        if let Some(prev) = last.insert((&g.user, g.partition), g.seq) {
            assert!(
                g.seq > prev,
                "{} out of order on {}: {prev} then {}",
                g.user,
                g.partition,
                g.seq
            );
        }
    }
    // Every partition of every third carried messages (the ring spreads a zone's users).
    let used: BTreeSet<u32> = got.iter().map(|g| g.partition).collect();
    assert_eq!(used, (0..PARTITIONS).collect(), "partitions used");

    // The control: cut in halves, the same messages would be in the wrong zone. az-a's users
    // sit on 4 and 5 (blue under halves) and az-c's on 8-11 (green under halves).
    let halves_wrong = got.iter().filter(|g| half_owner(g.partition) != g.zone).count();
    assert!(got.iter().any(|g| g.zone == "az-a" && (4..6).contains(&g.partition)));
    assert!(got.iter().any(|g| g.zone == "az-c"));
    assert!(
        halves_wrong * 3 > total,
        "only {halves_wrong} of {total} messages would be misplaced by a two-zone cut"
    );
    assert!(got.iter().all(|g| third_owner(g.partition) == g.zone));

    // The log itself: every record once, its `tg` header a zone byte (`b`, `g`, or the index 2
    // for az-c) and the version, its partition in that zone's third.
    let log = read_log(&topic);
    assert_eq!(log.len(), total);
    let mut seen = BTreeSet::new();
    let mut tg_bytes: BTreeMap<u8, usize> = BTreeMap::new();
    for r in &log {
        assert!(seen.insert(r.payload.clone()), "{} twice in the log", r.payload);
        let (zone_id, version) = route_header::decode(&r.tg).unwrap();
        let table = table_at(Some(version));
        assert_eq!(table.tag(&r.key).unwrap().color, zone_id, "{}", r.payload);
        assert!(third(table.zone_of(zone_id)).contains(&r.partition), "{}", r.payload);
        let expected_byte = match zone_id.0 {
            0 => b'b',
            1 => b'g',
            n => n as u8,
        };
        assert_eq!(r.tg[0], expected_byte);
        *tg_bytes.entry(r.tg[0]).or_default() += 1;
    }
    assert_eq!(
        tg_bytes.get(&2).copied(),
        expected_in.get(&(before.version(), "az-c".to_owned())).copied()
    );

    println!(
        "three zones, {PARTITIONS} partitions: users per zone at v{} {users_in:?}; group settled on thirds in {settled_after:?}; \
         phase 1 {} messages produced in {phase1_took:?}; az-c evacuated (units gained by az-b, az-a: {gained:?}); \
         phase 2 {} messages in {phase2_took:?}, those of az-c's {} users went to {moved_to:?}; az-c's third kept (state drained) \
         for {kept_with_backlog} polls with a backlog of up to {max_backlog} and handed over {:?} after the evacuation; \
         all {total} consumed once {consumed_after:?} after it; messages read per (version, zone) {read_in:?}; \
         {halves_wrong} would be misplaced by halves; tg zone bytes {tg_bytes:?}; test took {:?}",
        before.version(),
        USERS * 4,
        USERS * 2,
        moved.len(),
        handed_over_after,
        started.elapsed()
    );
}

#[test]
fn a_producer_on_a_three_zone_table_refuses_a_topic_not_cut_in_thirds() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator_with("3s", "150ms", "200ms", THIRD_ZONE);
    let table = coordinator.table();
    assert_eq!(table.zones().len(), 3);
    let (eight, twelve) = (kafka::unique("thirds-8"), kafka::unique("thirds-12"));
    kafka::create_topic(&rt, &eight, 8);
    kafka::create_topic(&rt, &twelve, 12);
    let three = Arc::new(ArcSwap::from_pointee(table));

    let err = match producer(&eight, three.clone()) {
        Ok(_) => panic!("a producer on a three-zone table took an 8-partition topic"),
        Err(e) => e,
    };
    assert!(
        matches!(
            &err,
            MqError::Lane { topic, source: LaneError::NotMultiple { partitions: 8, zones: 3 } }
                if *topic == eight
        ),
        "{err:?}"
    );
    let text = err.to_string();
    for part in [eight.as_str(), "3 zones", "multiple of 3 partitions", "got 8"] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
    println!("refused: {text}");

    // The same table takes 12 partitions, cut in thirds.
    let lanes = producer(&twelve, three).unwrap();
    assert_eq!(lanes.lane().zones(), 3);
    let cuts: Vec<Range<u32>> = (0..3).map(|z| lanes.lane().half(ZoneId(z))).collect();
    assert_eq!(cuts, [0..4, 4..8, 8..12]);
    // The third zone is what refuses 8: on a two-zone table it is two halves of 4.
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let two = RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), Zones::default()).unwrap();
    let lanes = producer(&eight, Arc::new(ArcSwap::from_pointee(two))).unwrap();
    assert_eq!((lanes.lane().zones(), lanes.lane().half(ZoneId::GREEN)), (2, 4..8));

    // A consumer of the 8-partition topic is refused by the coordinator with the same reason.
    let mut settings = tidegate::mq::ConsumerSettings::new(
        &coordinator.url,
        &kafka::bootstrap(),
        &eight,
        &kafka::unique("thirds-8-g"),
        "az-c",
    );
    settings.token = Some(OPERATOR_TOKEN.to_owned());
    let refused = rt.block_on(tidegate::mq::LaneConsumer::start(settings));
    let text = match refused {
        Ok(_) => panic!("a consumer registered an 8-partition topic with three zones"),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("multiple of 3 partitions"), "{text}");
}

/// An odd multiple of three: nine partitions are three thirds of three. Creating the topic, the
/// producer, the coordinator and the consumers all take it (a two-zone table would not), and each
/// zone's consumer reads its own three partitions.
#[test]
fn nine_partitions_are_three_thirds_of_three() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator_with("3s", "150ms", "200ms", THIRD_ZONE);
    let genesis = coordinator.table();
    put_units(&coordinator, json!([{"units": "0-32", "zone": "az-c"}]), genesis.version());
    let table = coordinator.table();
    let (topic, group) = (kafka::unique("nine"), kafka::unique("nine-g"));
    kafka::create_topic(&rt, &topic, 9);
    let lanes = producer(&topic, Arc::new(ArcSwap::from_pointee(table.clone()))).unwrap();
    let cuts: Vec<Range<u32>> = (0..3).map(|z| lanes.lane().half(ZoneId(z))).collect();
    assert_eq!(cuts, [0..3, 3..6, 6..9]);
    let cut: HashMap<&str, Range<u32>> = ZONES.into_iter().zip(cuts).collect();

    let sink = Arc::new(Mutex::new(Vec::new()));
    let lane = Lane { coordinator: &coordinator.url, topic: &topic, group: &group };
    let consumers: Vec<TestConsumer> = [("az-b", "b1"), ("az-a", "a1"), ("az-c", "c1")]
        .iter()
        .map(|(zone, id)| TestConsumer::start(&rt, &lane, zone, id, Duration::ZERO, sink.clone()))
        .collect();
    let reads_its_third = || {
        consumers.iter().all(|c| c.partitions() == cut[c.zone.as_str()].clone().collect::<Vec<_>>())
    };
    assert!(
        wait_until(Duration::from_secs(30), reads_its_third),
        "consumers read {:?}: {}",
        consumers.iter().map(|c| (c.zone.clone(), c.partitions())).collect::<Vec<_>>(),
        coordinator.group(&group)
    );
    let users: Vec<String> = (0..300).map(|i| format!("nine-{i}")).collect();
    let acks = produce(&rt, &lanes, &users, 0..2);
    assert!(
        wait_until(Duration::from_secs(30), || sink.lock().unwrap().len() >= acks.len()),
        "consumed {} of {}",
        sink.lock().unwrap().len(),
        acks.len()
    );
    for c in consumers {
        c.stop(&rt, Stop::Close);
    }
    let got = sink.lock().unwrap().clone();
    assert_eq!(got.len(), acks.len());
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for g in &got {
        assert_eq!(g.zone, zone_of_user(&table, &g.user), "{g:?}");
        assert!(cut[g.zone.as_str()].contains(&g.partition), "{g:?}");
        *per_zone.entry(g.zone.clone()).or_default() += 1;
    }
    assert_eq!(per_zone.len(), 3, "{per_zone:?}");
    println!("nine partitions: {} messages read in their zones: {per_zone:?}", got.len());
}

/// A release channel on the lanes (issue 24): a producer of `orders` messages puts the users of
/// `orders`'s channel in the channel zone's third, exactly where `POST /v1/tag` with
/// `service: orders` sends their calls, while a producer without a service (or of another
/// service) keeps every user in their map zone's third. A channel that is suspended with
/// `reject` refuses its users' messages as it refuses their calls.
#[test]
fn a_release_channels_users_messages_go_to_the_channel_zones_third() {
    let rt = kafka::runtime();
    let coordinator = kafka::coordinator_with("3s", "150ms", "200ms", THIRD_ZONE);
    let genesis = coordinator.table();
    put_units(&coordinator, json!([{"units": "0-32", "zone": "az-c"}]), genesis.version());
    let version = coordinator.table().version();
    let (status, body) = put_json(
        &format!("{}/v1/channels/orders-v2", coordinator.url),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "az-a", "percent": 20, "fallback": "reject",
               "expected_version": version, "reason": "orders v2 in az-a", "force": true}),
    );
    assert_eq!(status, 200, "{body}");
    let table = Arc::new(ArcSwap::from_pointee(coordinator.table()));
    let topic = kafka::unique("channel-lanes");
    kafka::create_topic(&rt, &topic, PARTITIONS);
    let with_service = |service: Option<&str>| {
        let mut settings = ProducerSettings::new(&kafka::bootstrap(), &topic);
        settings.service = service.map(str::to_owned);
        LaneProducer::new(&settings, table.clone()).unwrap()
    };
    let (orders, plain, billing) =
        (with_service(Some("orders")), with_service(None), with_service(Some("billing")));
    let users: Vec<String> = users().into_iter().take(600).collect();
    let tags = |service: Option<&str>| -> Vec<String> {
        let mut body = json!({"user_ids": users});
        if let Some(s) = service {
            body["service"] = json!(s);
        }
        let (status, answer) =
            post_json(&format!("{}/v1/tag", coordinator.url), OPERATOR_TOKEN, body);
        assert_eq!(status, 200, "{answer}");
        answer["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["zone"].as_str().unwrap().to_owned())
            .collect()
    };
    let (for_orders, global) = (tags(Some("orders")), tags(None));
    let moved = for_orders.iter().zip(&global).filter(|(a, b)| a != b).count();
    println!("{moved} of {} users are on orders-v2 in another zone than the map's", users.len());
    assert!(moved > 30, "the channel moves some users: {moved}");
    for (lanes, expected, name) in [
        (&orders, &for_orders, "orders"),
        (&plain, &global, "no service"),
        (&billing, &global, "billing"),
    ] {
        for (user, zone) in users.iter().zip(expected) {
            let route = lanes.route(user).unwrap();
            assert!(
                third(zone).contains(&route.partition),
                "{name}: {user} goes to partition {}, not {zone}'s third",
                route.partition
            );
        }
    }
    // Produced and read back from the broker: the same partitions.
    let acks = produce(&rt, &orders, &users, 0..1);
    for ((user, _, delivered), zone) in acks.iter().zip(&for_orders) {
        assert!(
            third(zone).contains(&delivered.route.partition),
            "{user}: {:?} not in {zone}",
            delivered.route
        );
    }
    let logged = read_log(&topic);
    assert_eq!(logged.len(), users.len());
    for record in &logged {
        let i = users.iter().position(|u| *u == record.key).unwrap();
        assert!(third(&for_orders[i]).contains(&record.partition), "{}", record.key);
    }
    // Evacuating az-a suspends the channel; with `reject`, its users' orders messages are refused.
    let (status, body) = post_json(
        &format!("{}/v1/units/evacuate", coordinator.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-a", "expected_version": coordinator.table().version(), "reason": "az-a down", "force": true}),
    );
    assert_eq!(status, 200, "{body}");
    table.store(Arc::new(coordinator.table()));
    let channel_user =
        users.iter().zip(for_orders.iter().zip(&global)).find(|(_, (a, b))| a != b).unwrap().0;
    match orders.route(channel_user) {
        Err(MqError::ChannelUnavailable(name)) => assert_eq!(name, "orders-v2"),
        other => panic!("{channel_user}: {other:?}"),
    }
    assert!(plain.route(channel_user).is_ok(), "other topics keep routing the user");
}
