//! A real Kafka broker restarted in the middle of producing (`scripts/kafka.sh restart`): every
//! message the lane producer had acknowledged is in the log afterwards, at its offset.
//!
//! Alone in its own test binary: cargo runs test binaries one after another, so no other test
//! shares the broker while it restarts.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::kafka::{self, payload};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use tidegate::core::{RoutingTable, UnitMode, UnitScheme, Zones};
use tidegate::mq::{LaneProducer, ProducerSettings};

/// Every message of `topic`, by (partition, offset), read with a plain rdkafka consumer, and
/// how many switch markers were among the records.
fn read_all(topic: &str, partitions: u32) -> (BTreeMap<(u32, i64), String>, usize) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", kafka::unique("verify"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut highs = HashMap::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p as i32, Offset::Beginning).unwrap();
        let (_, high) =
            consumer.fetch_watermarks(topic, p as i32, Duration::from_secs(10)).unwrap();
        highs.insert(p, high);
    }
    consumer.assign(&tpl).unwrap();
    let total: i64 = highs.values().sum();
    let (mut out, mut markers) = (BTreeMap::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while ((out.len() + markers) as i64) < total && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let switch =
                m.headers().is_some_and(|h| h.iter().any(|h| h.key == tidegate::mq::SWITCH_HEADER));
            if switch {
                assert!(m.payload().is_none(), "a switch marker with a value");
                markers += 1;
                continue;
            }
            let text = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            out.insert((m.partition() as u32, m.offset()), text);
        }
    }
    (out, markers)
}

#[test]
fn no_acknowledged_message_is_lost_when_the_broker_restarts_mid_produce() {
    let rt = kafka::runtime();
    let topic = kafka::unique("restart");
    kafka::create_topic(&rt, &topic, 4);
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let table = RoutingTable::from_parts(1, scheme, 50, BTreeMap::new(), Zones::default()).unwrap();
    let mut settings = ProducerSettings::new(&kafka::bootstrap(), &topic);
    // librdkafka keeps retrying through the outage; give it longer than a restart takes.
    settings.extra.push(("message.timeout.ms".into(), "120000".into()));
    let lanes = Arc::new(
        LaneProducer::new(&settings, Arc::new(arc_swap::ArcSwap::from_pointee(table))).unwrap(),
    );

    const TOTAL: u64 = 12_000;
    let producing = {
        let lanes = Arc::clone(&lanes);
        rt.spawn(async move {
            let mut acked = Vec::new();
            let mut failed = Vec::new();
            let mut inflight = std::collections::VecDeque::new();
            for i in 0..TOTAL {
                let user = format!("user-{}", i % 700);
                let text = format!("{user}|{i}");
                inflight.push_back((text, lanes.enqueue(&user, &payload(&user, i)).unwrap()));
                if inflight.len() >= 200 {
                    let (text, p) = inflight.pop_front().unwrap();
                    match p.await {
                        Ok(d) => acked.push((d.route.partition, d.offset, text)),
                        Err(e) => failed.push((text, e.to_string())),
                    }
                }
                // About 1 500 messages a second, so the restart lands in the middle.
                if i % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            for (text, p) in inflight {
                match p.await {
                    Ok(d) => acked.push((d.route.partition, d.offset, text)),
                    Err(e) => failed.push((text, e.to_string())),
                }
            }
            (acked, failed)
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let restart_started = Instant::now();
    let address = kafka::kafka_sh(&["restart"]);
    let restart_took = restart_started.elapsed();
    assert_eq!(
        address.lines().last().unwrap(),
        kafka::bootstrap(),
        "the broker came back elsewhere"
    );
    let produce_started = Instant::now();
    let (acked, failed) = rt.block_on(producing).unwrap();
    println!(
        "broker restart took {restart_took:?}; producing finished {:?} after it; {} acknowledged, {} failed",
        produce_started.elapsed(),
        acked.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "sends failed: {:?}", &failed[..failed.len().min(5)]);
    assert_eq!(acked.len() as u64, TOTAL);

    let (log, markers) = read_all(&topic, 4);
    // One switch marker per partition, for the table's one version (a retried marker would be
    // a second one: idempotence covers markers too).
    assert_eq!(markers, 4, "switch markers in the log");
    for (partition, offset, text) in &acked {
        assert_eq!(
            log.get(&(*partition, *offset)),
            Some(text),
            "acknowledged message {text} missing at {partition}/{offset}"
        );
    }
    // Idempotence: no message was written twice by the producer's retries.
    let mut seen = HashMap::new();
    for (at, text) in &log {
        if let Some(before) = seen.insert(text.clone(), *at) {
            panic!("{text} is in the log twice, at {before:?} and {at:?}");
        }
    }
    assert_eq!(log.len() as u64, TOTAL);
}
