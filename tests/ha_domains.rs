//! A linked two-domain change on three replicas over real Kafka (issue 22): writers on different
//! replicas race linked moves of the `default` and `search` domains with the same expected
//! version while one replica at a time is `kill -9`ed and restarted. Every acknowledged change
//! is one version on every replica with both domains moved (all or none), the replicas end with
//! identical tables, and each change is one audit record.

mod common;
mod ha_support;

use std::time::{Duration, Instant};

use common::kafka;
use common::{OPERATOR_TOKEN, get_json};
use ha_support::{Replicas, agent, converge};
use serde_json::{Value, json};

const EXTRA: &str = "[zones.az-c]\nlane = \"red\"\n";

fn put(agent: &ureq::Agent, url: &str, path: &str, body: Value) -> Option<(u16, Value)> {
    let mut response = agent
        .put(&format!("{url}{path}"))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(body)
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_json().ok()?))
}

/// The linked change number `n`: unit `n % 100` moves to a zone chosen by `n` in the default
/// domain and unit `(n + 50) % 100` to another in `search`, so every change moves both.
fn linked(n: u64, expected: u64) -> Value {
    let zones = ["az-a", "az-b", "az-c"];
    json!({
        "moves": [
            {"units": format!("{}", n % 100), "zone": zones[(n % 3) as usize]},
            {"units": format!("{}", (n + 50) % 100), "zone": zones[((n + 1) % 3) as usize], "domain": "search"},
        ],
        "expected_version": expected,
        "reason": format!("linked change {n}"),
    })
}

#[test]
fn linked_changes_on_three_replicas_are_one_version_everywhere_through_kill_9() {
    let bootstrap = kafka::bootstrap();
    let topic = kafka::unique("ha-domains");
    let mut replicas = Replicas::start(&bootstrap, &topic, 3, EXTRA);
    let http = agent(Duration::from_secs(5));
    let url0 = replicas.urls[0].clone();
    let v = get_json(&format!("{url0}/v1/routing")).1["version"].as_u64().unwrap();
    let mut post = http
        .post(&format!("{url0}/v1/domains"))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(json!({"name": "search", "expected_version": v, "reason": "search"}))
        .unwrap();
    assert_eq!(post.status(), 200, "{}", post.body_mut().read_to_string().unwrap());

    let started = Instant::now();
    let (mut acked, mut conflicts, mut unknown, mut kills) = (Vec::new(), 0, 0, 0);
    for n in 0..60u64 {
        if n % 15 == 7 {
            let victim = ((n / 15) % 3) as usize;
            replicas.kill9(victim);
            kills += 1;
        }
        if n % 15 == 12 {
            for i in 0..replicas.len() {
                if !replicas.is_up(i) {
                    replicas.restart(i);
                }
            }
        }
        // Two writers on two live replicas race the same expected version.
        let live: Vec<String> = (0..replicas.len())
            .filter(|&i| replicas.is_up(i))
            .map(|i| replicas.urls[i].clone())
            .collect();
        let Some((_, routing)) = ha_support::try_get(&http, &format!("{}/v1/routing", live[0]))
        else {
            continue;
        };
        let expected = routing["version"].as_u64().unwrap();
        let answers: Vec<Option<(u16, Value)>> = std::thread::scope(|s| {
            let handles: Vec<_> = live
                .iter()
                .take(2)
                .enumerate()
                .map(|(k, url)| {
                    let http = &http;
                    let body = linked(n * 2 + k as u64, expected);
                    s.spawn(move || put(http, url, "/v1/units", body))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut winners = 0;
        for (k, answer) in answers.into_iter().enumerate() {
            match answer {
                Some((200, body)) if body["changed"] == true => {
                    winners += 1;
                    acked.push((body["version"].as_u64().unwrap(), n * 2 + k as u64));
                }
                Some((409, body)) if body["error"] == "version_conflict" => conflicts += 1,
                _ => unknown += 1,
            }
        }
        assert!(winners <= 1, "two writers won version {}", expected + 1);
    }
    for i in 0..replicas.len() {
        if !replicas.is_up(i) {
            replicas.restart(i);
        }
    }
    let version = converge(&replicas, Duration::from_secs(30));
    let tables: Vec<Value> =
        replicas.urls.iter().map(|u| get_json(&format!("{u}/v1/routing")).1).collect();
    for t in &tables[1..] {
        for key in ["version", "unit_map", "domains", "zones"] {
            assert_eq!(t[key], tables[0][key], "{key} differs between replicas");
        }
    }
    // Every acknowledged change is one audit record at its version that moved both domains.
    let (_, audit) = get_json(&format!("{}/v1/audit?limit=1000", replicas.urls[0]));
    let entries = audit["entries"].as_array().unwrap();
    for (v, n) in &acked {
        let record = entries.iter().find(|e| e["version"].as_u64() == Some(*v)).unwrap();
        assert_eq!(record["action"], "units_move", "{record}");
        assert_eq!(record["reason"], format!("linked change {n}"), "{record}");
        let to = record["to"].as_str().unwrap();
        assert!(to.contains("domain search"), "both domains in one record: {to}");
    }
    let moves = entries.iter().filter(|e| e["action"] == "units_move").count();
    assert!(moves >= acked.len(), "{moves} move records for {} acknowledged", acked.len());
    assert!(acked.len() >= 30, "only {} of 60 rounds acknowledged", acked.len());
    println!(
        "{} linked changes acknowledged, {conflicts} lost races (409), {unknown} unknown outcomes, {kills} kill -9, final version {version}, {:.1} s",
        acked.len(),
        started.elapsed().as_secs_f64()
    );
}
