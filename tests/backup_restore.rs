//! Backup and restore of a Kafka command topic, as docs/src/backup-restore.md tells an operator
//! (issue 26), with a year of history on a real broker:
//!
//! 1. a file node's history (`BACKUP_CHANGES` changes, default 30 000, a few months at ~270 a day;
//!    `BACKUP_CHANGES=100000` for a year, as measured in docs/src/backup-restore.md) is
//!    moved onto topic A with `log export` / `log import` (the import appends with a window in
//!    flight; it used to wait for each record's acknowledgement);
//! 2. two replicas run on A and take live changes, some of them compare-and-set losers (refused
//!    proposals, which are in the topic but are not history), while they hold the lane lease;
//! 3. `log export --config` of a replica's configuration backs A up while the replicas run;
//! 4. `log import` restores the backup into a fresh topic B, and a replica started on B reaches
//!    A's version and state hash, and pages the same whole audit, record for record.
//!
//! The control: importing the backup into a topic that already holds records is refused, and a
//! backup with one line damaged is refused naming the line, so a restore never merges or skips.

mod common;
mod ha_support;

use std::process::Command;
use std::time::Instant;

use common::audit::{Row, check_whole, page_all, write_log};
use common::kafka::{self, unique};
use common::{OPERATOR_TOKEN, VIEWER_TOKEN, config_toml, get_json, put_json};
use ha_support::Replicas;
use serde_json::{Value, json};

fn kafka_toml(bootstrap: &str, topic: &str) -> String {
    config_toml(&format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{bootstrap}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"backup\"\nzone = \"zone-0\"\n"
    ))
}

/// Runs `tidegate log ARGS`; answers stdout, stderr and whether it succeeded.
fn log_cmd(args: &[&str], config: Option<&std::path::Path>) -> (Vec<u8>, String, bool) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tidegate"));
    cmd.arg("log").args(args);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let out = cmd.output().unwrap();
    (out.stdout, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.success())
}

fn import(
    dir: &std::path::Path,
    bootstrap: &str,
    topic: &str,
    file: &std::path::Path,
) -> (String, bool) {
    let config = dir.join(format!("{topic}.toml"));
    std::fs::write(&config, kafka_toml(bootstrap, topic)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["log", "import", "--config"])
        .arg(&config)
        .arg("--file")
        .arg(file)
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (text, out.status.success())
}

fn cluster_log(url: &str) -> (u64, String) {
    let (status, body) = get_json(&format!("{url}/v1/cluster"));
    assert_eq!(status, 200, "{body}");
    (
        body["log"]["state_version"].as_u64().unwrap(),
        body["log"]["state_hash"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn a_kafka_topic_is_backed_up_while_replicas_run_and_restored_into_a_fresh_topic() {
    let bootstrap = kafka::bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let changes: usize =
        std::env::var("BACKUP_CHANGES").ok().and_then(|v| v.parse().ok()).unwrap_or(30_000);

    // 1. A year of history on a file node, moved onto topic A.
    let data = dir.path().join("file-node");
    write_log(&config_toml(""), &data, changes);
    let data_arg = data.to_str().unwrap();
    let started = Instant::now();
    let (export, stderr, ok) = log_cmd(&["export", "--data-dir", data_arg], None);
    assert!(ok, "{stderr}");
    let file_export_ms = started.elapsed().as_millis();
    let moved = dir.path().join("moved.jsonl");
    std::fs::write(&moved, &export).unwrap();
    let topic_a = unique("backup-a");
    let started = Instant::now();
    let (text, ok) = import(dir.path(), &bootstrap, &topic_a, &moved);
    assert!(ok, "{text}");
    let import_a_ms = started.elapsed().as_millis();

    // 2. Replicas on A, with live changes: winners and compare-and-set losers.
    let replicas = Replicas::start(&bootstrap, &topic_a, 2, "");
    let mut version = 1 + changes as u64;
    let (mut won, mut lost) = (0, 0);
    for (i, blue) in [61, 62, 63, 64, 65, 66].into_iter().enumerate() {
        // Both replicas propose against the same version: one wins, the other is refused.
        let body = |b: u32| json!({"blue_units": b, "expected_version": version, "reason": "live"});
        let first =
            put_json(&format!("{}/v1/dial", replicas.urls[i % 2]), OPERATOR_TOKEN, body(blue));
        let second = put_json(
            &format!("{}/v1/dial", replicas.urls[(i + 1) % 2]),
            OPERATOR_TOKEN,
            body(blue + 10),
        );
        for (status, body) in [&first, &second] {
            match status {
                200 => won += 1,
                409 => lost += 1,
                other => panic!("unexpected {other}: {body}"),
            }
        }
        assert_eq!(first.0, 200, "{}", first.1);
        version += 1;
    }
    assert_eq!((won, lost), (6, 6), "each round: one winner, one refused loser");
    let newest = version;
    let converged = |url: &str| cluster_log(url).0 == newest;
    assert!(common::wait_until(std::time::Duration::from_secs(60), || replicas
        .urls
        .iter()
        .all(|u| converged(u))));
    let (a_version, a_hash) = cluster_log(&replicas.urls[0]);
    assert_eq!(cluster_log(&replicas.urls[1]), (a_version, a_hash.clone()));

    // 3. The backup, while the replicas run (they renew leases and announce themselves).
    let a_config = dir.path().join(format!("{topic_a}.toml"));
    let started = Instant::now();
    let (backup, stderr, ok) = log_cmd(&["export"], Some(&a_config));
    assert!(ok, "{stderr}");
    let backup_ms = started.elapsed().as_millis();
    let backup_file = dir.path().join("backup.jsonl");
    std::fs::write(&backup_file, &backup).unwrap();
    let lines: Vec<Value> = String::from_utf8(backup.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as u64, newest, "genesis + one line per version, losers left out");
    for (n, line) in lines.iter().enumerate().skip(1) {
        assert_eq!(line["version"], json!(n as u64 + 1), "line {n}: {line}");
    }
    // The --data-dir of a file log makes no sense for a Kafka store: refused, naming the flag.
    let (_, stderr, ok) = log_cmd(&["export", "--data-dir", data_arg], Some(&a_config));
    assert!(!ok && stderr.contains("--data-dir"), "{stderr}");

    // 4. The restore into a fresh topic B, and a replica on it.
    let topic_b = unique("backup-b");
    let started = Instant::now();
    let (text, ok) = import(dir.path(), &bootstrap, &topic_b, &backup_file);
    assert!(ok, "{text}");
    let restore_ms = started.elapsed().as_millis();
    let restored = Replicas::start(&bootstrap, &topic_b, 1, "");
    assert!(common::wait_until(std::time::Duration::from_secs(60), || converged(
        &restored.urls[0]
    )));
    assert_eq!(
        cluster_log(&restored.urls[0]),
        (a_version, a_hash.clone()),
        "same version and state hash"
    );
    let started = Instant::now();
    let original: Vec<Vec<Row>> = page_all(&replicas.urls[0], VIEWER_TOKEN, 5_000);
    let copy: Vec<Vec<Row>> = page_all(&restored.urls[0], VIEWER_TOKEN, 5_000);
    let paging_ms = started.elapsed().as_millis();
    check_whole(&copy, newest);
    let flat = |pages: &[Vec<Row>]| pages.iter().flatten().cloned().collect::<Vec<Row>>();
    assert!(
        flat(&original) == flat(&copy),
        "the restored audit equals the original, record for record"
    );

    // The control: a restore never merges into a topic with records, nor skips a damaged line.
    let (text, ok) = import(dir.path(), &bootstrap, &topic_a, &backup_file);
    assert!(!ok && text.contains("already holds"), "{text}");
    let damaged = dir.path().join("damaged.jsonl");
    let mut text_lines: Vec<String> =
        String::from_utf8(backup).unwrap().lines().map(str::to_owned).collect();
    let middle = text_lines.len() / 2;
    let half = text_lines[middle].len() / 2;
    text_lines[middle].truncate(half);
    std::fs::write(&damaged, text_lines.join("\n")).unwrap();
    let (text, ok) = import(dir.path(), &bootstrap, &unique("backup-c"), &damaged);
    assert!(!ok && text.contains(&format!("line {}", middle + 1)), "{text}");

    println!(
        "backup/restore of {newest} versions on one broker: file export {file_export_ms} ms, \
         import to topic A {import_a_ms} ms, Kafka backup (replicas running) {backup_ms} ms \
         ({} bytes), restore into topic B {restore_ms} ms, both audits paged in {paging_ms} ms",
        backup_file.metadata().unwrap().len()
    );
    drop(restored);
    drop(replicas);
}
