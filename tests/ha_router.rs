//! A `Router` given three replica URLs (real broker, real binaries) keeps getting new tables when
//! the replica whose stream it reads is killed with SIGKILL, round after round; the time from
//! the kill to the next table in the client is printed as a distribution.

mod common;
mod ha_support;

use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, get_json, kafka, put_json};
use ha_support::{Replicas, distribution};
use serde_json::json;
use tidegate::client::{Identity, Router, RouterOptions};

const ROUNDS: usize = 5;

#[test]
fn a_router_follows_new_tables_when_the_replica_it_watches_is_killed() {
    let topic = kafka::unique("ha-router");
    let mut replicas = Replicas::start(&kafka::bootstrap(), &topic, 3, "");
    let options = RouterOptions {
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(200),
        read_timeout: Duration::from_secs(3),
        token: Some(OPERATOR_TOKEN.into()),
        ..RouterOptions::default()
    };
    let identity =
        Identity { subscriber_id: "ha-router".into(), zone: "az-a".into(), kind: "test".into() };
    let router = Router::connect(&replicas.urls.join(","), identity, options).unwrap();
    assert!(router.wait_for_version(1, Duration::from_secs(10)), "{}", router.status());
    let mut delays = Vec::new();
    for round in 0..ROUNDS {
        let watched = router.status().coordinator.expect("the router names its coordinator");
        let victim = replicas
            .urls
            .iter()
            .position(|u| watched.starts_with(u.as_str()) || u.starts_with(watched.as_str()))
            .unwrap_or_else(|| panic!("{watched} is none of {:?}", replicas.urls));
        let writer = (victim + 1) % replicas.len();
        let (_, routing) = get_json(&format!("{}/v1/routing", replicas.urls[writer]));
        let version = routing["version"].as_u64().unwrap();
        replicas.kill9(victim);
        let killed = Instant::now();
        // A change made on a live replica right after the kill must reach the router.
        let (status, body) = put_json(
            &format!("{}/v1/dial", replicas.urls[writer]),
            OPERATOR_TOKEN,
            json!({"blue_units": 10 + round * 10, "expected_version": version, "reason": "ha router"}),
        );
        assert_eq!(status, 200, "{body}");
        let new = body["version"].as_u64().unwrap();
        assert!(
            router.wait_for_version(new, Duration::from_secs(10)),
            "round {round}: the router did not get version {new} after {watched} died: {}",
            router.status()
        );
        delays.push(killed.elapsed());
        let now = router.status().coordinator.unwrap_or_default();
        assert_ne!(now, watched, "round {round}: still reading the dead replica?");
        assert_eq!(router.table().unwrap().blue_units(), 10 + round as u32 * 10);
        replicas.restart(victim);
    }
    println!(
        "ha router: {}",
        distribution(
            "kill of the watched replica to the next table in the router (a change made right after the kill)",
            &delays
        )
    );
}
