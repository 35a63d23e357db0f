//! Structured logs (issue 26): `[log] format = "json"` writes one JSON object per line with the
//! level, the message and the event's fields; `[log] level` filters; a bad value names its key.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Server, config_toml, wait_until};
use serde_json::Value;

#[test]
fn json_logs_are_one_object_per_line_with_level_message_and_fields() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml("[log]\nformat = \"json\"\n")).unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    assert!(wait_until(Duration::from_secs(5), || server.stderr().contains("routing version")));
    let stderr = server.stderr();
    let events: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let start = events
        .iter()
        .find(|e| e["message"].as_str().is_some_and(|m| m.starts_with("routing version")))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(start["level"], "INFO", "{start}");
    assert!(start["timestamp"].is_string(), "{start}");
    drop(server);

    // A filter of `warn` leaves the info lines out.
    std::fs::write(&config, config_toml("[log]\nformat = \"json\"\nlevel = \"warn\"\n")).unwrap();
    let quiet = Server::start(&config, &dir.path().join("data-2"));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!quiet.stderr().contains("routing version"), "{}", quiet.stderr());
}

#[test]
fn a_bad_log_setting_names_its_key() {
    let dir = tempfile::tempdir().unwrap();
    for (toml, key) in
        [("[log]\nformat = \"xml\"\n", "log.format"), ("[log]\nlevel = \"=!\"\n", "log.level")]
    {
        let config = dir.path().join("bad.toml");
        std::fs::write(&config, config_toml(toml)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(["serve", "--port", "0", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(&format!("`{key}`")), "{stderr}");
    }
}
