//! `GET /v1/audit?before=` on a Kafka command log: two replicas page the same history back to
//! version 1 (older pages read from the topic from the nearest state the replica kept below the
//! page, `store::history`), identical page by page, every version once, equal to the file log the
//! topic was imported from; and so does a replica restarted from its snapshot, which indexes the
//! topic up to the snapshot at its first deep page.

mod common;
mod ha_support;

use std::process::Command;
use std::time::{Duration, Instant};

use common::audit::{Row, check_whole, get, page_all, write_log};
use common::kafka::{self, unique};
use common::{OPERATOR_TOKEN, VIEWER_TOKEN, config_toml, put_json, wait_until};
use ha_support::Replicas;
use serde_json::json;
use tidegate::store::AUDIT_IN_MEMORY;

#[test]
fn two_replicas_page_the_same_whole_history_from_the_topic() {
    let bootstrap = kafka::bootstrap();
    let topic = unique("audit-paging");
    let dir = tempfile::tempdir().unwrap();
    // A file log longer than the in-memory trail, imported onto a fresh topic.
    // `AUDIT_PAGING_CHANGES` makes it longer for a manual measurement (e.g. 99999).
    let changes = std::env::var("AUDIT_PAGING_CHANGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(AUDIT_IN_MEMORY + 600)
        .max(AUDIT_IN_MEMORY + 600);
    let file_toml = config_toml("");
    let data = dir.path().join("file-node");
    write_log(&file_toml, &data, changes);
    let export = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["log", "export", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let export_file = dir.path().join("export.jsonl");
    std::fs::write(&export_file, &export.stdout).unwrap();
    let import_config = dir.path().join("import.toml");
    std::fs::write(
        &import_config,
        config_toml(&format!(
            "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{bootstrap}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"importer\"\nzone = \"zone-0\"\n"
        )),
    )
    .unwrap();
    let started = Instant::now();
    let import = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["log", "import", "--config"])
        .arg(&import_config)
        .arg("--file")
        .arg(&export_file)
        .output()
        .unwrap();
    assert!(import.status.success(), "{}", String::from_utf8_lossy(&import.stderr));
    println!("imported {} changes in {} ms", changes, started.elapsed().as_millis());

    let mut replicas = Replicas::start(&bootstrap, &topic, 2, "");
    // A few live changes on either replica after start-up.
    let mut newest = 1 + changes as u64;
    for (i, blue) in [70, 71, 72].into_iter().enumerate() {
        let (status, body) = put_json(
            &format!("{}/v1/dial", replicas.urls[i % 2]),
            OPERATOR_TOKEN,
            json!({"blue_units": blue, "expected_version": newest, "reason": "live"}),
        );
        assert_eq!(status, 200, "{body}");
        newest += 1;
    }
    let applied = |url: &str| {
        let (_, _, body) = get(&format!("{url}/v1/audit?limit=1"), None);
        body["entries"][0]["version"].as_u64() == Some(newest)
    };
    assert!(wait_until(Duration::from_secs(20), || replicas.urls.iter().all(|u| applied(u))));

    let started = Instant::now();
    let deep =
        get(&format!("{}/v1/audit?limit=100&before=500", replicas.urls[0]), Some(VIEWER_TOKEN));
    println!(
        "deep audit page on Kafka (100 records below version 500 of {newest}): {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(deep.0, 200, "{}", deep.2);
    assert_eq!((&deep.2["next_before"], &deep.2["source"]), (&json!(400), &json!("log")));
    let versions: Vec<u64> = deep.2["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, (400..500).rev().collect::<Vec<u64>>());

    // The deepest replay a deep page needs: just below the in-memory trail.
    let below = newest + 1 - AUDIT_IN_MEMORY as u64;
    let started = Instant::now();
    let deep =
        get(&format!("{}/v1/audit?limit=100&before={below}", replicas.urls[1]), Some(VIEWER_TOKEN));
    println!(
        "deep audit page on Kafka (100 records below version {below} of {newest}): {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!((deep.0, &deep.2["source"]), (200, &json!("log")), "{}", deep.2);
    assert_eq!(deep.2["entries"][0]["version"], below - 1);

    let started = Instant::now();
    let pages: Vec<Vec<Vec<Row>>> =
        replicas.urls.iter().map(|url| page_all(url, VIEWER_TOKEN, 1_500)).collect();
    println!(
        "paged {newest} records to version 1 on both replicas (1 500 a page) in {} ms",
        started.elapsed().as_millis()
    );
    check_whole(&pages[0], newest);
    assert!(pages[0] == pages[1], "both replicas give identical pages");
    // The pages equal what the file node's own audit gave for the imported part.
    let rows: Vec<&Row> = pages[0].iter().flatten().collect();
    assert_eq!(rows.last().unwrap().1, "genesis");
    for r in &rows[3..rows.len() - 1] {
        let n = r.0 - 2;
        assert_eq!((r.4.clone(), r.6), (format!("change {n}"), 2_000 + n), "version {}", r.0);
    }
    // A replica restarted from its snapshot (written every 1 000 records) knows the versions
    // before it only once its first deep page has read the topic up to it.
    replicas.kill9(1);
    replicas.restart(1);
    let started = Instant::now();
    let again = page_all(&replicas.urls[1], VIEWER_TOKEN, 1_500);
    println!(
        "paged {newest} records on a replica restarted from its snapshot in {} ms",
        started.elapsed().as_millis()
    );
    assert!(again == pages[0], "the restarted replica gives the same pages");
    let stderr = replicas.stderr(1);
    assert!(stderr.contains("started from the snapshot, then the log after it"), "{stderr}");
    // The CLI pages the whole history too.
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args([
            "audit",
            "--all",
            "--limit",
            "4000",
            "--server",
            &replicas.urls[1],
            "--token",
            VIEWER_TOKEN,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> =
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(lines.len() as u64, newest);
    assert!(lines[0].starts_with(&format!("v{newest} ")), "{}", lines[0]);
    assert!(lines.last().unwrap().starts_with("v1 "), "{}", lines.last().unwrap());
}
