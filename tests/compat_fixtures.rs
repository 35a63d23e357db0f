//! Every log and snapshot an earlier release wrote replays to the same tags (issue 22): the
//! fixtures under `tests/fixtures/compat/<release>/` were written by that release's binary
//! (`scripts/compat_fixture.py`: dial moves, pins and unpins, a completed drain, a plan, the
//! automation switch; SIGKILL, so the snapshot is behind the log's end), with the tags it gave
//! 100 000 users. Today's binary starts from the log alone, and from the log plus the snapshot,
//! and must give every one of them the same tag at the same version.

mod common;

use std::path::{Path, PathBuf};

use common::{OPERATOR_TOKEN, Server, config_toml, get_json, post_json};
use serde_json::{Value, json};

const USERS: usize = 100_000;

fn fixture(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compat").join(release)
}

/// The tags of `user-0` ... `user-99999` as one character each, and the pinned users' colours.
fn tags_of(server: &Server) -> (u64, String, Value) {
    let mut tags = String::with_capacity(USERS);
    let mut version = None;
    for start in (0..USERS).step_by(10_000) {
        let users: Vec<String> = (start..start + 10_000).map(|i| format!("user-{i}")).collect();
        let (status, body) = post_json(
            &format!("{}/v1/tag", server.url),
            OPERATOR_TOKEN,
            json!({"user_ids": users}),
        );
        assert_eq!(status, 200, "{body}");
        version = Some(body["version"].as_u64().unwrap());
        for t in body["tags"].as_array().unwrap() {
            tags.push(if t["color"] == "blue" { 'b' } else { 'g' });
        }
    }
    let pinned: Vec<String> = (0..20).map(|i| format!("pinned-{i}")).collect();
    let (_, body) =
        post_json(&format!("{}/v1/tag", server.url), OPERATOR_TOKEN, json!({"user_ids": pinned}));
    let pins: serde_json::Map<String, Value> = body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["user_id"].as_str().unwrap().to_owned(), t["color"].clone()))
        .collect();
    (version.unwrap(), tags, Value::Object(pins))
}

fn check_release(release: &str) {
    let dir = fixture(release);
    let expected_tags = std::fs::read_to_string(dir.join("tags.txt")).unwrap();
    let expected_tags = expected_tags.trim_end();
    assert_eq!(expected_tags.len(), USERS);
    let expected_pins: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("pins.json")).unwrap()).unwrap();
    let expected_version: u64 =
        std::fs::read_to_string(dir.join("version")).unwrap().trim().parse().unwrap();

    for files in [&["tidegate.log"][..], &["tidegate.log", "tidegate.snapshot"][..]] {
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("data");
        std::fs::create_dir(&data).unwrap();
        for file in files {
            std::fs::copy(dir.join(file), data.join(file)).unwrap();
        }
        let config = work.path().join("tidegate.toml");
        std::fs::write(&config, config_toml("snapshot_every = 8")).unwrap();
        let server = Server::start(&config, &data);
        let (version, tags, pins) = tags_of(&server);
        let stderr = server.stderr();
        assert_eq!(version, expected_version, "{release} from {files:?}: {stderr}");
        let differ = tags.chars().zip(expected_tags.chars()).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "{release} from {files:?}: {differ} of {USERS} users changed colour");
        assert_eq!(pins, expected_pins, "{release} from {files:?}: pins");
        // The snapshot was used, not ignored (a start from it replays only the rest of the log).
        if files.len() == 2 {
            assert!(!stderr.contains("ignored the snapshot"), "{release}: {stderr}");
        }
        // The drain, the plan and the automation switch came back too.
        let (_, drains) = get_json(&format!("{}/v1/drains", server.url));
        assert!(drains.to_string().contains("\"completed\""), "{release}: {drains}");
        let (_, plans) = get_json(&format!("{}/v1/plans", server.url));
        assert!(plans.to_string().contains("evacuate-az-b"), "{release}: {plans}");
        let (_, automation) = get_json(&format!("{}/v1/automation", server.url));
        assert_eq!(automation["stopped"], true, "{release}: {automation}");
    }
}

#[test]
fn the_log_and_snapshot_of_release_0_1_replay_to_the_same_tags_for_100_000_users() {
    check_release("v0.1");
}
