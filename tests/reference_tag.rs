//! The published rule is the whole rule (issue 22): `scripts/reference_tag.py`, which knows
//! nothing of tidegate's code, tags 100 000 users from `GET /v1/routing` alone, and every tag
//! equals the server's, across dial moves and pins. Python's `xxhash` comes from the venv that
//! `scripts/openfeature-sdks.sh` prepares (`OPENFEATURE_SDK_DIR`), as in CI.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{OPERATOR_TOKEN, Server, config_toml, get_json, post_json, put_json};
use serde_json::{Value, json};

fn python() -> PathBuf {
    let dir = std::env::var("OPENFEATURE_SDK_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/tidegate-openfeature")
    });
    let python = dir.join("venv/bin/python");
    assert!(python.exists(), "{} missing: run scripts/openfeature-sdks.sh", python.display());
    python
}

/// The reference's tags for `users` from the routing JSON `routing`.
fn reference(routing: &Value, users: &[String], dir: &std::path::Path) -> Vec<Value> {
    let list = dir.join("users.txt");
    std::fs::write(&list, users.join("\n")).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/reference_tag.py");
    let mut child = Command::new(python())
        .arg(&script)
        .arg(&list)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(routing.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn server_tags(url: &str, users: &[String]) -> Vec<Value> {
    let mut tags = Vec::new();
    for chunk in users.chunks(10_000) {
        let (status, body) =
            post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, json!({"user_ids": chunk}));
        assert_eq!(status, 200, "{body}");
        tags.extend(body["tags"].as_array().unwrap().iter().cloned());
    }
    tags
}

#[test]
fn the_python_reference_tags_100_000_users_from_the_published_table_alone_as_the_server_does() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let mut users: Vec<String> = (0..100_000).map(|i| format!("user-{i}")).collect();
    users.extend(["ユーザー", "müller", "a/b?c=d", "😀"].map(str::to_owned));
    let mut checked = 0;
    for (step, percent) in [50, 37, 0, 100, 63].into_iter().enumerate() {
        let v = get_json(&format!("{}/v1/routing", server.url)).1["version"].as_u64().unwrap();
        let (status, _) = put_json(
            &format!("{}/v1/dial", server.url),
            OPERATOR_TOKEN,
            json!({"blue_percent": percent, "expected_version": v, "reason": "reference"}),
        );
        assert_eq!(status, 200);
        let v = get_json(&format!("{}/v1/routing", server.url)).1["version"].as_u64().unwrap();
        let (status, _) = put_json(
            &format!("{}/v1/pins/user-{step}", server.url),
            OPERATOR_TOKEN,
            json!({"color": if step % 2 == 0 { "green" } else { "blue" }, "expected_version": v, "reason": "reference"}),
        );
        assert_eq!(status, 200);
        let routing = get_json(&format!("{}/v1/routing", server.url)).1;
        let ours = reference(&routing, &users, dir.path());
        let theirs = server_tags(&server.url, &users);
        assert_eq!(ours.len(), theirs.len());
        for (a, b) in ours.iter().zip(&theirs) {
            for field in ["user_id", "color", "zone", "pinned"] {
                assert_eq!(
                    a[field], b[field],
                    "at {percent}% blue, {field}: reference {a} vs server {b}"
                );
            }
        }
        // The map is the dial: its first run ends where blue ends.
        let blue_units = routing["blue_units"].as_u64().unwrap();
        if blue_units > 0 {
            assert_eq!(
                routing["unit_map"][0]["units"],
                format!("0-{}", blue_units - 1),
                "{routing}"
            );
        }
        checked += ours.len();
    }
    println!("reference and server agree on {checked} tags over 5 tables");
}

/// The same on three zones: unit sets moved to a third lane and a pin to it, and the reference
/// still reproduces every tag from the published map alone.
#[test]
fn the_python_reference_follows_a_three_zone_map_and_a_third_lane_pin() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("[zones.az-c]\nlane = \"red\"\nclass = \"gzone\"\n"))
        .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let users: Vec<String> = (0..100_000).map(|i| format!("u{i}")).collect();
    let mut checked = 0;
    for (moves, pin) in [
        (json!([{"units": "10-29,60", "zone": "az-c"}]), "u1"),
        (json!([{"units": "0-4", "zone": "red"}, {"units": "95-99", "zone": "blue"}]), "u2"),
        (json!([{"units": "10-29", "zone": "green"}]), "u3"),
    ] {
        let v = get_json(&format!("{}/v1/routing", server.url)).1["version"].as_u64().unwrap();
        let (status, body) = put_json(
            &format!("{}/v1/units", server.url),
            OPERATOR_TOKEN,
            json!({"moves": moves, "expected_version": v, "reason": "reference"}),
        );
        assert_eq!(status, 200, "{body}");
        let (status, body) = put_json(
            &format!("{}/v1/pins/{pin}", server.url),
            OPERATOR_TOKEN,
            json!({"color": "red", "expected_version": v + 1, "reason": "reference"}),
        );
        assert_eq!(status, 200, "{body}");
        let routing = get_json(&format!("{}/v1/routing", server.url)).1;
        assert_eq!(routing["zones"][2]["class"], "gzone");
        let ours = reference(&routing, &users, dir.path());
        let theirs = server_tags(&server.url, &users);
        let lanes: std::collections::BTreeSet<&str> =
            theirs.iter().map(|t| t["color"].as_str().unwrap()).collect();
        assert_eq!(lanes.len(), 3, "all three lanes are in use: {lanes:?}");
        for (a, b) in ours.iter().zip(&theirs) {
            for field in ["user_id", "color", "zone", "pinned"] {
                assert_eq!(a[field], b[field], "{field}: reference {a} vs server {b}");
            }
        }
        checked += ours.len();
    }
    println!("reference and server agree on {checked} tags over 3 three-zone tables");
}
