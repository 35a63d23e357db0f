//! A loss-less unit move across three replicas on one Kafka topic (real broker, real binaries)
//! survives `kill -9` of the replica that took it and holds the stuck subscriber it served
//! (issue 23): the subscriber fails over to another replica and, still never applying the
//! freeze, keeps the move in `freezing` on every surviving replica past the reconnect grace; once
//! it is gone the survivors switch and unfreeze once each, and the killed replica replays the
//! same table when it comes back.

mod common;
mod ha_support;

use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, get_json, kafka, put_json, wait_until};
use ha_support::Replicas;
use serde_json::json;
use tidegate::client::{Identity, Router, RouterOptions};

const CONFIG: &str = "[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n";

fn routing(url: &str) -> serde_json::Value {
    get_json(&format!("{url}/v1/routing")).1
}

#[test]
fn a_unit_move_in_freezing_survives_kill_9_of_its_replica_and_its_stuck_subscriber_holds_it() {
    let topic = kafka::unique("ha-freeze");
    let mut replicas = Replicas::start(&kafka::bootstrap(), &topic, 3, CONFIG);
    let urls = replicas.urls.clone();
    // A subscriber that never applies anything, on replica 1 first (the first URL of its list).
    let identity =
        Identity { subscriber_id: "stuck-1".into(), zone: "az-b".into(), kind: "service".into() };
    let options = RouterOptions {
        token: Some(OPERATOR_TOKEN.into()),
        acknowledge: false,
        ..Default::default()
    };
    let stuck = Router::connect(&urls.join(","), identity, options).unwrap();
    assert!(stuck.wait_for_version(1, Duration::from_secs(10)), "stuck-1 got no table");
    let version = routing(&urls[0])["version"].clone();
    let (status, body) = put_json(
        &format!("{}/v1/units", urls[0]),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-9", "zone": "green"}], "freeze": true, "freeze_window": "60s",
               "expected_version": version, "reason": "move 0-9 loss-lessly on three replicas"}),
    );
    assert_eq!(status, 202, "{body}");
    let frozen = json!({"default": "0-9"});
    for url in &urls {
        assert!(
            wait_until(Duration::from_secs(10), || routing(url)["frozen"] == frozen),
            "{url} never saw the freeze"
        );
    }

    // Kill the replica that took the move and served the stuck subscriber.
    replicas.kill9(0);
    let killed = Instant::now();
    let survivors = &urls[1..];
    // Past the 10 s reconnect grace, the stuck subscriber (now on another replica) holds it.
    while killed.elapsed() < Duration::from_secs(13) {
        for url in survivors {
            let table = routing(url);
            assert_eq!(
                (table["blue_units"].as_u64(), &table["frozen"]),
                (Some(50), &frozen),
                "{url} switched without the stuck subscriber, {} ms after the kill: {}",
                killed.elapsed().as_millis(),
                get_json(&format!("{url}/v1/audit?limit=5")).1
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed = survivors
        .iter()
        .any(|url| get_json(&format!("{url}/v1/subscribers")).1.to_string().contains("stuck-1"));
    assert!(listed, "stuck-1 did not fail over to a surviving replica");

    // Without it, the survivors switch and unfreeze, once each.
    drop(stuck);
    for url in survivors {
        assert!(
            wait_until(Duration::from_secs(30), || {
                let table = routing(url);
                table["blue_units"] == 40 && table["frozen"] == json!({})
            }),
            "{url} did not finish the move: {}",
            routing(url)
        );
    }
    let actions: Vec<String> =
        common::audit_by(&urls[1], "units").into_iter().map(|(a, _)| a).collect();
    assert_eq!(actions, ["units_switch", "units_unfreeze"]);
    // The killed replica replays the same table.
    replicas.restart(0);
    let expected = routing(&urls[1])["version"].clone();
    assert!(
        wait_until(Duration::from_secs(20), || routing(&urls[0])["version"] == expected),
        "the restarted replica did not catch up"
    );
    let table = routing(&urls[0]);
    assert_eq!((table["blue_units"].as_u64(), &table["frozen"]), (Some(40), &json!({})));
}
