//! `tidegate demo` end to end (mock Kafka inside the binary): it starts with nothing installed,
//! shows both zones' consumers with lag per half, and the produced split follows the dial.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{get_json, put_json, wait_until};
use serde_json::json;

struct Demo(std::process::Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `produced ... (NN% blue)` figure of a status line.
fn produced_blue_percent(line: &str) -> Option<f64> {
    let end = line.find("% blue), consumed")?;
    let start = line[..end].rfind('(')? + 1;
    line[start..end].parse().ok()
}

#[test]
fn the_demo_shows_lanes_lag_and_the_split_following_the_dial() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["demo", "--port", &port.to_string(), "--rate", "400", "--status-every", "1"])
        .arg("--data-dir")
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let out = child.stdout.take().unwrap();
    let demo = Demo(child);
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let url = format!("http://127.0.0.1:{port}");
    assert!(
        wait_until(Duration::from_secs(30), || {
            lines.lock().unwrap().iter().any(|l| l.starts_with("tidegate listening on"))
        }),
        "the demo did not start: {:?}",
        lines.lock().unwrap()
    );
    let intro = lines.lock().unwrap().join("\n");
    assert!(intro.contains(&format!("curl -s {url}/v1/lanes/demo-consumers")), "{intro}");
    let token = intro
        .split_whitespace()
        .find_map(|w| w.strip_prefix("TIDEGATE_TOKEN="))
        .expect("the demo prints its operator token")
        .to_owned();

    // Four consumers, two per zone, each zone reading its own half, with lag per half.
    assert!(
        wait_until(Duration::from_secs(30), || {
            let (status, v) = get_json(&format!("{url}/v1/lanes/demo-consumers"));
            status == 200
                && v["members"].as_array().is_some_and(|m| m.len() == 4)
                && v["zones"][0]["lag"].is_u64()
                && v["members"].as_array().unwrap().iter().all(|m| {
                    let zone_b = m["zone"] == "az-b";
                    let parts = m["assignment"].as_array().unwrap();
                    parts.len() == 2 && parts.iter().all(|p| (p.as_u64().unwrap() < 4) == zone_b)
                })
        }),
        "lanes never settled: {}",
        get_json(&format!("{url}/v1/lanes/demo-consumers")).1
    );
    let (_, zones) = get_json(&format!("{url}/v1/zones"));
    assert!(zones["zones"][0]["error_rate"].is_f64(), "simulated outcomes: {zones}");

    let (status, body) = put_json(
        &format!("{url}/v1/dial"),
        &token,
        json!({"blue_percent": 20, "expected_version": 1, "reason": "demo test"}),
    );
    assert_eq!(status, 200, "{body}");
    // Loss-less by default: freeze, switch, unfreeze, answered at the end (version 4).
    assert_eq!(body["loss_less"]["unfrozen_version"], body["version"], "{body}");
    let moved = format!("v{} dial 20% blue", body["version"]);
    assert!(
        wait_until(Duration::from_secs(20), || {
            lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.starts_with(&moved))
                .any(|l| produced_blue_percent(l).is_some_and(|p| p <= 30.0))
        }),
        "the produced split did not follow the dial: {:?}",
        lines.lock().unwrap().iter().rev().take(5).collect::<Vec<_>>()
    );
    // The dial line the demo prints works as printed, with VERSION filled in (issue 26: it once
    // lacked the JSON content type and got 415).
    let printed: Vec<String> = intro
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("curl -s -X PUT"))
        .take_while(|l| !l.trim().is_empty() && !l.trim_start().starts_with('('))
        .map(|l| l.trim().to_owned())
        .collect();
    assert!(printed.len() >= 2, "the demo prints a dial curl line: {intro}");
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    let version = routing["version"].as_u64().unwrap().to_string();
    let script = printed.join("\n").replace("VERSION", &version);
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("TIDEGATE_TOKEN", &token)
        .output()
        .expect("bash runs the printed curl line");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(answer["blue_percent"], 50.0, "the printed dial line: {script}\n{answer}");

    let (_, metrics) = {
        let mut r = common::agent().get(&format!("{url}/metrics")).call().unwrap();
        (r.status(), r.body_mut().read_to_string().unwrap())
    };
    assert!(metrics.contains("tidegate_lane_lag_messages{"), "lag metric missing");
    assert!(metrics.contains("tidegate_lane_produced_total{"), "producer metric missing");
    drop(demo);
}
