//! The real binary with snapshots: kill -9 while snapshots are being written, and a clean
//! shutdown that leaves a snapshot the next start reads instead of the log.

mod common;

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use serde_json::json;

fn write_config(dir: &std::path::Path, every: u64) -> std::path::PathBuf {
    let path = dir.join("tidegate.toml");
    fs::write(&path, config_toml(&format!("snapshot_every = {every}"))).unwrap();
    path
}

/// Moves the dial back and forth until `stop`; records the newest acknowledged version.
fn dialer(
    url: String,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent = agent();
        let mut version = acked.load(Ordering::SeqCst);
        let mut i = 0u64;
        while !stop.load(Ordering::SeqCst) {
            i += 1;
            let body = json!({
                "blue_percent": 10 + i % 80,
                "expected_version": version,
                "reason": format!("churn {i}"),
            });
            let response = agent
                .put(&format!("{url}/v1/dial"))
                .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                .send_json(&body);
            // The server was killed: the request may or may not have been acknowledged.
            let Ok(mut response) = response else { return };
            let Ok(body) = response.body_mut().read_json::<serde_json::Value>() else { return };
            match body["version"].as_u64() {
                Some(v) if response.status() == 200 => {
                    version = v;
                    acked.fetch_max(v, Ordering::SeqCst);
                }
                _ => {
                    let Ok(mut routing) = agent.get(&format!("{url}/v1/routing")).call() else {
                        return;
                    };
                    let Ok(table) = routing.body_mut().read_json::<serde_json::Value>() else {
                        return;
                    };
                    version = table["version"].as_u64().unwrap_or(version);
                }
            }
        }
    })
}

#[test]
fn kill_9_while_snapshots_are_written_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A snapshot after every change, so the kills land in the middle of snapshot writes too.
    let config = write_config(dir.path(), 1);
    let data = dir.path().join("data");
    let acked = Arc::new(AtomicU64::new(1));
    for round in 0..6u64 {
        let server = Server::start(&config, &data);
        let (_, table) = get_json(&format!("{}/v1/routing", server.url));
        let version = table["version"].as_u64().unwrap();
        assert!(
            version >= acked.load(Ordering::SeqCst),
            "round {round}: lost an acknowledged change"
        );
        assert!(!server.stderr().contains("ignored the snapshot"), "{}", server.stderr());
        let stop = Arc::new(AtomicBool::new(false));
        let worker = dialer(server.url.clone(), Arc::clone(&stop), Arc::clone(&acked));
        std::thread::sleep(Duration::from_millis(150 + round * 70));
        server.kill9();
        stop.store(true, Ordering::SeqCst);
        worker.join().unwrap();
    }
    // The state read from the last snapshot equals a full replay of the log.
    let server = Server::start(&config, &data);
    let (_, from_snapshot) = get_json(&format!("{}/v1/routing", server.url));
    let (_, audit_snapshot) = get_json(&format!("{}/v1/audit?limit=50", server.url));
    server.kill9();
    assert!(from_snapshot["version"].as_u64().unwrap() > 10, "{from_snapshot}");
    fs::rename(data.join("tidegate.snapshot"), dir.path().join("aside")).unwrap();
    let server = Server::start(&config, &data);
    let (_, full) = get_json(&format!("{}/v1/routing", server.url));
    let (_, audit_full) = get_json(&format!("{}/v1/audit?limit=50", server.url));
    assert_eq!(from_snapshot, full);
    assert_eq!(audit_snapshot, audit_full);
}

#[test]
fn a_clean_shutdown_leaves_a_snapshot_that_covers_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), 0);
    let data = dir.path().join("data");
    let server = Server::start(&config, &data);
    let (status, body) = put_json(
        &format!("{}/v1/dial", server.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 30, "expected_version": 1, "reason": "before shutdown"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(!data.join("tidegate.snapshot").exists(), "snapshot_every = 0: none while running");
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(data.join("tidegate.snapshot").exists(), "written at shutdown");
    // It covers the whole log: its position is the log's length (a start from it replays
    // nothing; damage under it would still be found, see tests/store_snapshot.rs).
    let log_len = fs::metadata(data.join("tidegate.log")).unwrap().len();
    let snapshot = fs::read_to_string(data.join("tidegate.snapshot")).unwrap();
    let body: serde_json::Value = serde_json::from_str(&snapshot[9..]).unwrap();
    assert_eq!(body["position"].as_u64(), Some(log_len), "the snapshot covers the whole log");
    let server = Server::start(&config, &data);
    let from_snapshot = common::wait_until(std::time::Duration::from_secs(5), || {
        server.stderr().contains("started from the snapshot")
    });
    assert!(from_snapshot, "{}", server.stderr());
    let (_, table) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!((table["version"].as_u64(), table["blue_units"].as_u64()), (Some(2), Some(30)));
    assert!(!server.stderr().contains(" WARN "), "{}", server.stderr());
}
