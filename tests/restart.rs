//! The real binary: acknowledged changes survive `kill -9`; a torn tail is dropped on restart.

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;

use common::*;
use serde_json::json;

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tidegate.toml");
    fs::write(&path, config_toml("")).unwrap();
    path
}

#[test]
fn acknowledged_changes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let data = dir.path().join("data");

    let server = Server::start(&config, &data);
    let mut version = 1;
    for (i, percent) in [40, 35, 20, 70].into_iter().enumerate() {
        let (status, body) = put_json(
            &format!("{}/v1/dial", server.url),
            OPERATOR_TOKEN,
            json!({"blue_percent": percent, "expected_version": version, "reason": format!("step {i}")}),
        );
        assert_eq!(status, 200, "{body}");
        version = body["version"].as_u64().unwrap();
    }
    let (_, pin) = put_json(
        &format!("{}/v1/pins/tester-1", server.url),
        OPERATOR_TOKEN,
        json!({"color": "green", "expected_version": version, "reason": "qa"}),
    );
    let (_, before) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(before["version"], pin["version"]);
    server.kill9();

    let server = Server::start(&config, &data);
    let (_, after) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!(after, before, "the table after kill -9 and restart");
    assert_eq!(after["version"], 6);
    assert_eq!(after["blue_units"], 70);
    let (_, tag) = get_json(&format!("{}/v1/tag?user_id=tester-1", server.url));
    assert_eq!(tag["color"], "green");
    let (_, audit) = get_json(&format!("{}/v1/audit", server.url));
    assert_eq!(audit["entries"].as_array().unwrap().len(), 6);
    assert!(!server.stderr().contains(" WARN "), "{}", server.stderr());
}

#[test]
fn a_torn_tail_is_dropped_with_a_warning_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let data = dir.path().join("data");
    let server = Server::start(&config, &data);
    let (status, _) = put_json(
        &format!("{}/v1/dial", server.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 10, "expected_version": 1, "reason": "before the crash"}),
    );
    assert_eq!(status, 200);
    server.kill9();
    let mut log = OpenOptions::new().append(true).open(data.join("tidegate.log")).unwrap();
    log.write_all(b"7f3a1c22 {\"kind\":\"change\",\"version\":3,\"expec").unwrap();
    drop(log);

    let server = Server::start(&config, &data);
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!((table["version"].as_u64(), table["blue_units"].as_u64()), (Some(2), Some(10)));
    assert!(
        wait_until(std::time::Duration::from_secs(5), || server.stderr().contains("torn")),
        "{}",
        server.stderr()
    );
}

#[test]
fn a_corrupt_log_stops_start_up_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let data = dir.path().join("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("tidegate.log"), "00000000 {}\n00000000 {}\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("corrupt at line 1"), "{stderr}");
}
