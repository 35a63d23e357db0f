//! Release channels on the real binary (issue 24): a channel of 10 % of users for `orders` moves
//! only those users' `orders` calls while their other services keep the global zone, at the
//! coordinator, the edge and a Router; capacity refuses a channel the receiving zone cannot take;
//! emptying the channel's zone suspends it and the restore resumes it; expiry removes it; a
//! restart replays it; bad input is refused naming the field.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::gateway::{Edge, free_port};
use common::*;
use serde_json::{Value, json};

const USERS: usize = 10_000;

fn config() -> String {
    config_toml(
        r#"
initial_blue_percent = 50
[health]
window = "2s"
[capacity]
headroom = 0.0
[zones.az-a]
capacity_rps = 4000
[zones.az-b]
capacity_rps = 4000
[channels]
services = ["orders", "billing", "search"]
"#,
    )
}

fn version(url: &str) -> u64 {
    get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap()
}

fn put_channel(url: &str, name: &str, mut body: Value) -> (u16, Value) {
    body["expected_version"] = json!(version(url));
    body["reason"] = json!("release test");
    put_json(&format!("{url}/v1/channels/{name}"), OPERATOR_TOKEN, body)
}

fn dial(url: &str, percent: u32) {
    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": percent, "expected_version": version(url), "reason": "release test", "force": true}),
    );
    assert_eq!(status, 200, "{body}");
}

fn users() -> Vec<String> {
    (0..USERS).map(|i| format!("user-{i}")).collect()
}

/// `(lane, reason)` of every user for a call of `service` (`None`: no service) at `url`.
fn tags(url: &str, users: &[String], service: Option<&str>) -> Vec<(String, String)> {
    let mut body = json!({"user_ids": users});
    if let Some(s) = service {
        body["service"] = json!(s);
    }
    let (status, answer) = post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, body);
    assert_eq!(status, 200, "{answer}");
    answer["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (t["color"].as_str().unwrap().to_owned(), t["reason"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

/// Posts outcomes so each zone carries a steady load (requests per second).
fn feed(url: String, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let batches = json!([
                {"zone": "az-b", "color": "blue", "ok": 300},
                {"zone": "az-a", "color": "green", "ok": 300},
            ]);
            let _ = post_json(&format!("{url}/v1/outcomes"), OPERATOR_TOKEN, batches);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}

#[test]
fn a_release_channel_moves_only_its_services_users_and_follows_evacuation_expiry_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config()).unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&file, &data);
    let url = server.url.clone();
    let stop = Arc::new(AtomicBool::new(false));
    feed(url.clone(), Arc::clone(&stop));
    let edge = Edge::start(&file, &url, &dir.path().join("edge-cache.json"), free_port());
    let users = users();
    let before_orders = tags(&url, &users, Some("orders"));
    let before_billing = tags(&url, &users, Some("billing"));
    let global = tags(&url, &users, None);
    assert!(before_orders.iter().zip(&global).all(|(a, b)| a.0 == b.0 && a.1 == "unit"));

    // Capacity is judged once the load is known: about 3 000 rps in each zone (300 per 100 ms).
    // A 10 % channel to az-a adds about 5 of blue's 50 units (about 300 rps): it fits. A 60 %
    // channel adds about 30 (about 1 800 rps) to az-a's 3 000 of 4 000: refused.
    let known = wait_until(Duration::from_secs(30), || {
        let (status, body) = put_channel(
            &url,
            "orders-v2",
            json!({"services": ["orders"], "zone": "az-a", "percent": 10, "dry_run": true}),
        );
        status == 200 && body["projection"][0]["verdict"] == "fits"
    });
    assert!(known, "az-a's load never became known");
    // Known is not settled: the first readings cover part of the window (CI once projected from
    // 2 617 rps). The control below needs the full 3 000, so wait for the reading to get there.
    let settled = wait_until(Duration::from_secs(30), || {
        let (_, zones) = get_json(&format!("{url}/v1/zones"));
        zones["zones"].as_array().unwrap().iter().any(|z| {
            z["zone"] == "az-a"
                && z["capacity"]["load_rps"].as_f64().is_some_and(|rps| rps > 2_850.0)
        })
    });
    assert!(settled, "az-a's load never reached its fed 3 000 rps");
    let (status, body) = put_channel(
        &url,
        "billing-v9",
        json!({"services": ["billing"], "zone": "green", "percent": 60}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("insufficient_capacity")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("az-a"), "{body}");

    let (status, body) = put_channel(
        &url,
        "orders-v2",
        json!({"services": ["orders"], "zone": "az-a", "percent": 10, "users": ["user-1"]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["channel"]["share_percent"], 10.0, "{body}");
    let v = body["version"].as_u64().unwrap();
    edge.wait_for_version(v);

    // Unit moves are judged on the routed map: the channel's blue units already send their load
    // to az-a, so giving them to az-a in the map adds none. Control: as many other blue units add
    // their share of az-b's load.
    let channel_units =
        tidegate::core::UnitSet::parse(body["channel"]["units"].as_str().unwrap(), 100).unwrap();
    let in_channel: Vec<u32> = (0..50).filter(|u| channel_units.contains(*u)).collect();
    let others: Vec<String> = (0..50)
        .filter(|u| !channel_units.contains(*u))
        .take(in_channel.len())
        .map(|u| u.to_string())
        .collect();
    let preview = |units: String| {
        let (status, body) = put_json(
            &format!("{url}/v1/units"),
            OPERATOR_TOKEN,
            json!({"moves": [{"units": units, "zone": "az-a"}], "expected_version": version(&url),
                   "reason": "projection", "dry_run": true}),
        );
        assert_eq!(status, 200, "{body}");
        body["projection"].as_array().unwrap().clone()
    };
    let in_channel: Vec<String> = in_channel.iter().map(u32::to_string).collect();
    assert!(!in_channel.is_empty());
    let kept = preview(in_channel.join(","));
    assert!(kept.is_empty(), "moving channel-kept units moves no load: {kept:?}");
    let control = preview(others.join(","));
    assert_eq!(control.len(), 1, "{control:?}");
    assert_eq!(control[0]["zone"], "az-a", "{control:?}");
    let projected = control[0]["projected_rps"].as_f64().unwrap();
    println!(
        "moving {} channel-kept units: no load; as many others: az-a to {projected} rps",
        in_channel.len()
    );
    assert!(projected > 3_100.0, "{control:?}");

    // Only orders calls of the channel's users move, only to az-a (green), and only users the
    // global map gave to blue change their lane; billing and untagged-service calls keep the map.
    let orders = tags(&url, &users, Some("orders"));
    let billing = tags(&url, &users, Some("billing"));
    assert_eq!(billing, before_billing, "billing calls did not move");
    let mut moved = 0;
    let mut by_channel = 0;
    for (i, ((now, was), g)) in orders.iter().zip(&before_orders).zip(&global).enumerate() {
        if now.1 == "channel:orders-v2" {
            by_channel += 1;
            assert_eq!(now.0, "green", "user-{i}");
        } else {
            assert_eq!(now.0, g.0, "user-{i} outside the channel keeps the map");
        }
        if now.0 != was.0 {
            moved += 1;
            assert_eq!((was.0.as_str(), now.1.as_str()), ("blue", "channel:orders-v2"), "user-{i}");
        }
    }
    let share = by_channel as f64 / USERS as f64;
    assert!((0.08..0.12).contains(&share), "the channel selects {share} of users");
    assert!(moved > 0 && moved < by_channel, "{moved} moved of {by_channel} selected");
    println!("orders-v2: {by_channel} of {USERS} users selected, {moved} changed zone for orders");

    // The edge answers the same, and a Router on the published table too.
    let routing = get_json(&format!("{url}/v1/routing")).1;
    let router = tidegate::client::Router::fixed(tidegate::client::decode_table(&routing).unwrap());
    let at_edge = tags(&edge.url, &users, Some("orders"));
    assert_eq!(at_edge, orders, "the edge agrees with the coordinator");
    for (user, (lane, reason)) in users.iter().zip(&orders) {
        let (tag, rule) = router.tag_for_service(None, "orders", user).unwrap();
        assert_eq!((tag.lane.as_ref(), rule.as_str()), (lane.as_str(), reason.as_str()), "{user}");
    }
    let (status, one) = get_json(&format!("{}/v1/tag?user_id=user-1&service=orders", edge.url));
    assert_eq!((status, one["reason"].as_str()), (200, Some("channel:orders-v2")), "{one}");

    // The write check knows the service: a channel user's `orders` writes are owned by az-a
    // (the channel's zone), their `billing` writes by the map's zone, over HTTP at the edge and
    // in a Router alike.
    let moved_user = users
        .iter()
        .zip(orders.iter().zip(&global))
        .find(|(_, (o, g))| o.1 == "channel:orders-v2" && o.0 != g.0)
        .map(|(u, _)| u.clone())
        .expect("a channel user the map puts in az-b");
    let check = |service: &str, zone: &str| {
        let path = format!(
            "{}/v1/write-check?user_id={moved_user}&zone={zone}&service={service}",
            edge.url
        );
        let (status, body) = get_json(&path);
        (status, body["answer"].as_str().or(body["error"].as_str()).unwrap_or("").to_owned())
    };
    assert_eq!(check("orders", "az-a"), (200, "owned".to_owned()));
    assert_eq!(check("orders", "az-b"), (421, "misrouted".to_owned()));
    assert_eq!(check("billing", "az-b"), (200, "owned".to_owned()));
    assert_eq!(check("billing", "az-a"), (421, "misrouted".to_owned()));
    let (status, _) = get_json(&format!(
        "{}/v1/write-check?user_id={moved_user}&zone=az-a&service=Bad!",
        edge.url
    ));
    assert_eq!(status, 400, "a bad service name is refused");
    let az_a = router.table().unwrap().zones().resolve("az-a").unwrap();
    let answer = router.check_write_for(None, "orders", &moved_user, az_a, None).unwrap();
    assert_eq!(answer.check, tidegate::core::WriteCheck::Owned);
    let answer = router.check_write(&moved_user, az_a, None).unwrap();
    assert!(
        matches!(answer.check, tidegate::core::WriteCheck::Misrouted { .. }),
        "the map's owner is az-b"
    );

    // Emptying az-a (the dial at 100 % blue) suspends the channel in the same version: its
    // users get the global map (fallback `global`); the restore resumes it.
    dial(&url, 100);
    let routing = get_json(&format!("{url}/v1/routing")).1;
    assert_eq!(routing["channels"][0]["suspended"], true, "{routing}");
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1"));
    let to = audit["entries"][0]["to"].as_str().unwrap_or_default().to_owned();
    assert!(to.contains("channel orders-v2 suspended"), "{audit}");
    assert!(
        tags(&url, &users, Some("orders"))
            .iter()
            .all(|t| t.0 == "blue" && t.1 != "channel:orders-v2")
    );
    dial(&url, 50);
    assert_eq!(tags(&url, &users, Some("orders")), orders, "the restore brings the channel back");

    // Bad input names its field.
    for (name, body, status, code, field) in [
        (
            "a",
            json!({"services": ["orders"], "zone": "az-z", "percent": 5}),
            400,
            "unknown_zone",
            "zone",
        ),
        (
            "a",
            json!({"services": ["orders"], "zone": "az-a", "percent": 5, "domain": "nope"}),
            400,
            "unknown_domain",
            "domain",
        ),
        (
            "a",
            json!({"services": ["order"], "zone": "az-a", "percent": 5}),
            400,
            "unknown_service",
            "services",
        ),
        (
            "a",
            json!({"services": ["orders"], "zone": "az-a", "percent": 5}),
            409,
            "channel_overlap",
            "services",
        ),
        (
            "a",
            json!({"services": ["search"], "zone": "az-a", "percent": 5, "expires_at_ms": 1000}),
            400,
            "invalid_channel",
            "expires_at_ms",
        ),
        (
            "a",
            json!({"services": ["search"], "zone": "az-a", "percent": 500}),
            400,
            "invalid_channel",
            "percent",
        ),
        (
            "Bad",
            json!({"services": ["search"], "zone": "az-a", "percent": 5}),
            400,
            "invalid_channel",
            "name",
        ),
    ] {
        let (got, answer) = put_channel(&url, name, body.clone());
        assert_eq!((got, answer["error"].as_str()), (status, Some(code)), "{body}: {answer}");
        assert!(answer["detail"].as_str().unwrap().starts_with(field), "{body}: {answer}");
    }
    // Only operators change channels.
    let body = json!({"services": ["search"], "zone": "az-a", "percent": 5, "expected_version": version(&url), "reason": "x"});
    for token in [VIEWER_TOKEN, SERVICE_TOKEN, ""] {
        let (status, answer) = put_json(&format!("{url}/v1/channels/s"), token, body.clone());
        assert!(status == 401 || status == 403, "{token:?}: {status} {answer}");
    }

    // Expiry: the coordinator removes the channel itself, audited as `channel_expire`.
    let (status, body) = put_channel(
        &url,
        "search-v2",
        json!({"services": ["search"], "zone": "az-a", "units": "0-4", "expires_in": "2s"}),
    );
    assert_eq!(status, 200, "{body}");
    let gone = wait_until(Duration::from_secs(10), || {
        get_json(&format!("{url}/v1/channels/search-v2")).0 == 404
    });
    assert!(gone, "the channel did not expire");
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=5"));
    let expired = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "channel_expire")
        .unwrap_or_else(|| panic!("no channel_expire in {audit}"));
    assert_eq!(expired["by"], "channels", "{expired}");

    // A restart from the log replays the channel.
    stop.store(true, Ordering::SeqCst);
    drop(edge);
    server.kill9();
    let server = Server::start(&file, &data);
    assert_eq!(tags(&server.url, &users, Some("orders")), orders, "the log replays the channel");
    let (status, body) = put_json(
        &format!("{}/v1/channels/orders-v2", server.url),
        OPERATOR_TOKEN,
        json!({"expected_version": version(&server.url), "reason": "release done"}),
    );
    assert_eq!((status, body["error"].as_str()), (400, Some("invalid_json")), "{body}");
    let resp = agent()
        .delete(&format!("{}/v1/channels/orders-v2", server.url))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .force_send_body()
        .send_json(json!({"expected_version": version(&server.url), "reason": "release done"}));
    assert_eq!(resp.map(|r| r.status().as_u16()).unwrap_or(0), 200);
    let after = tags(&server.url, &users, Some("orders"));
    assert!(after.iter().all(|t| t.1 == "unit"), "deleted: no user is routed by the channel");
    let lanes = |t: &[(String, String)]| t.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(lanes(&after), lanes(&global), "deleted: orders follows the map");
}
