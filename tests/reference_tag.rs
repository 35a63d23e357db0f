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
    reference_with(routing, users, dir, &[])
}

/// [`reference`] with the script's options (`--service NAME`, `--domain NAME`).
fn reference_with(
    routing: &Value,
    users: &[String],
    dir: &std::path::Path,
    options: &[&str],
) -> Vec<Value> {
    let list = dir.join("users.txt");
    std::fs::write(&list, users.join("\n")).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/reference_tag.py");
    let mut child = Command::new(python())
        .arg(&script)
        .arg(&list)
        .args(options)
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

/// Release channels (issue 24): the reference applies pin > channel > map from the published
/// `channels` alone, for a service with a channel, one without, a channel of a named domain, and
/// a channel suspended by the emptying of its zone, and says which rule decided as the server does.
#[test]
fn the_python_reference_applies_release_channels_per_service_and_domain() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let url = &server.url;
    let version = || get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let ok = |(status, body): (u16, Value)| assert_eq!(status, 200, "{body}");
    ok(post_json(
        &format!("{url}/v1/domains"),
        OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": version(), "reason": "reference"}),
    ));
    ok(put_json(
        &format!("{url}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders"], "zone": "green", "percent": 10, "users": ["user-7"],
               "expected_version": version(), "reason": "reference"}),
    ));
    ok(put_json(
        &format!("{url}/v1/channels/ranker-v3"),
        OPERATOR_TOKEN,
        json!({"services": ["ranker"], "zone": "blue", "units": "60-79", "domain": "search",
               "expected_version": version(), "reason": "reference"}),
    ));
    ok(put_json(
        &format!("{url}/v1/pins/user-3"),
        OPERATOR_TOKEN,
        json!({"color": "blue", "expected_version": version(), "reason": "reference"}),
    ));
    let users: Vec<String> = (0..100_000).map(|i| format!("user-{i}")).collect();
    let mut checked = 0;
    for dial in [None, Some(100)] {
        if let Some(percent) = dial {
            // Green loses its last unit of the default domain: orders-v2 is suspended and its
            // users get the global map (fallback `global`).
            ok(put_json(
                &format!("{url}/v1/dial"),
                OPERATOR_TOKEN,
                json!({"blue_percent": percent, "expected_version": version(), "reason": "reference"}),
            ));
        }
        let routing = get_json(&format!("{url}/v1/routing")).1;
        assert_eq!(routing["precedence"], json!(["pin", "channel", "unit"]));
        let orders =
            routing["channels"].as_array().unwrap().iter().find(|c| c["name"] == "orders-v2");
        assert_eq!(orders.unwrap()["suspended"], json!(dial.is_some()), "{routing}");
        for (service, domain) in [
            ("orders", None),
            ("billing", None),
            ("ranker", Some("search")),
            ("orders", Some("search")),
        ] {
            let mut options = vec!["--service", service];
            let mut request = json!({"service": service});
            if let Some(d) = domain {
                options.extend(["--domain", d]);
                request["domain"] = json!(d);
            }
            let ours = reference_with(&routing, &users, dir.path(), &options);
            let mut theirs = Vec::new();
            for chunk in users.chunks(10_000) {
                let mut body = request.clone();
                body["user_ids"] = json!(chunk);
                let (status, answer) = post_json(&format!("{url}/v1/tag"), OPERATOR_TOKEN, body);
                assert_eq!(status, 200, "{answer}");
                theirs.extend(answer["tags"].as_array().unwrap().iter().cloned());
            }
            assert_eq!(ours.len(), theirs.len());
            let mut by_channel = 0;
            for (a, b) in ours.iter().zip(&theirs) {
                for field in ["user_id", "color", "zone", "pinned", "reason"] {
                    assert_eq!(
                        a[field], b[field],
                        "{service}/{domain:?} {field}: reference {a} vs server {b}"
                    );
                }
                by_channel += usize::from(b["reason"].as_str().unwrap().starts_with("channel:"));
            }
            let expected_channel =
                matches!((service, domain, dial), ("orders", None, None) | ("ranker", Some(_), _));
            assert_eq!(
                by_channel > 0,
                expected_channel,
                "{service}/{domain:?} at {dial:?}: {by_channel} users by channel"
            );
            // A single GET says the same as the batch for the first users.
            for b in theirs.iter().take(20) {
                let mut q = format!(
                    "{url}/v1/tag?user_id={}&service={service}",
                    b["user_id"].as_str().unwrap()
                );
                if let Some(d) = domain {
                    q.push_str(&format!("&domain={d}"));
                }
                let (status, one) = get_json(&q);
                assert_eq!(status, 200, "{one}");
                assert_eq!((&one["color"], &one["reason"]), (&b["color"], &b["reason"]), "{q}");
            }
            checked += ours.len();
        }
    }
    println!(
        "reference and server agree on {checked} service tags (channels, domains, suspension)"
    );
}

/// The golden routing vectors (`tests/fixtures/routing_vectors.json`, checked by the Rust core,
/// the Go client and the Java client) are what the reference says today: regenerated from
/// `tests/fixtures/routing_base.json`, they are the committed file byte for byte.
#[test]
fn the_golden_routing_vectors_are_the_references_answers() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python())
        .arg(root.join("scripts/routing_vectors.py"))
        .arg(root.join("tests/fixtures/routing_base.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let committed = std::fs::read(root.join("tests/fixtures/routing_vectors.json")).unwrap();
    assert!(
        out.stdout == committed,
        "tests/fixtures/routing_vectors.json is not what scripts/routing_vectors.py writes today: regenerate it and review the diff"
    );
}
