//! `GET /v1/audit?before=` pages through the whole history of a file log (real binary): pages
//! inside the in-memory trail come from memory, older ones from the log's own lines for them
//! (`store::history`); every version appears exactly once, in order, equal to
//! `tidegate log export`. Deep pages
//! are one at a time (503 `audit_busy` with `Retry-After`), need an identified reader, and bad
//! parameters are 400 naming the parameter.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use common::audit::{Row, check_whole, get, page_all, row, write_log};
use common::{OPERATOR_TOKEN, Server, VIEWER_TOKEN, config_toml, put_json};
use serde_json::{Value, json};
use tidegate::store::AUDIT_IN_MEMORY;

/// The export's changes as rows (the action from what the test wrote: pins every 7th).
fn export_rows(data_dir: &Path) -> Vec<(u64, String, String, String, String, u64)> {
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["log", "export", "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["version"].is_u64())
        .map(|e| {
            (
                e["version"].as_u64().unwrap(),
                e["from"].as_str().unwrap().to_owned(),
                e["to"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
                e["by"].as_str().unwrap().to_owned(),
                e["at_ms"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn start(changes: usize) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let toml = config_toml("");
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, &toml).unwrap();
    let data = dir.path().join("data");
    write_log(&toml, &data, changes);
    (Server::start(&file, &data), dir)
}

#[test]
fn paging_reaches_version_1_with_every_version_once_equal_to_the_export() {
    let changes = AUDIT_IN_MEMORY + 2_000;
    let (server, dir) = start(changes);
    // Two more changes through the API, after start-up: the newest are live ones.
    for blue in [60, 61] {
        let newest = 1 + changes as u64 + (blue - 60);
        let (status, body) = put_json(
            &format!("{}/v1/dial", server.url),
            OPERATOR_TOKEN,
            json!({"blue_units": blue, "expected_version": newest, "reason": "live"}),
        );
        assert_eq!(status, 200, "{body}");
    }
    let newest = 1 + changes as u64 + 2;
    let pages = page_all(&server.url, VIEWER_TOKEN, 700);
    check_whole(&pages, newest);
    // The same with a page size that does not divide anything, and the largest one.
    check_whole(&page_all(&server.url, VIEWER_TOKEN, 3_333), newest);
    check_whole(&page_all(&server.url, VIEWER_TOKEN, AUDIT_IN_MEMORY), newest);

    let rows: Vec<Row> = pages.into_iter().flatten().collect();
    // The in-memory window (one limit=10000 page) equals the paged rows it overlaps.
    let (_, _, window) = get(&format!("{}/v1/audit?limit={AUDIT_IN_MEMORY}", server.url), None);
    let window: Vec<Row> = window["entries"].as_array().unwrap().iter().map(row).collect();
    assert_eq!(window.len(), AUDIT_IN_MEMORY);
    assert!(window[..] == rows[..AUDIT_IN_MEMORY], "memory and paging agree");
    // Every change equals the export (the test wrote pins every 7th change, dial moves else).
    let export = export_rows(&dir.path().join("data"));
    assert_eq!(export.len() as u64, newest - 1);
    for (version, from, to, reason, by, at_ms) in export {
        let r = &rows[(newest - version) as usize];
        assert_eq!((r.0, &r.2, &r.3, &r.4, &r.5, r.6), (version, &from, &to, &reason, &by, at_ms));
        let n = version - 2; // the change's index in write_log
        let action = if reason == "live" || n % 7 != 6 { "dial" } else { "pin" };
        assert_eq!(r.1, action, "version {version}");
    }
    assert_eq!(rows.last().unwrap().1, "genesis");
}

#[test]
fn deep_pages_are_one_at_a_time_need_a_token_and_are_timed_on_100_000_entries() {
    let changes = 100_000 - 1;
    let (server, _dir) = start(changes);
    let deep = format!("{}/v1/audit?limit=100&before=50000", server.url);
    // Reads are open to anonymous callers here (no service tokens), memory pages too; deep pages
    // need an identified reader.
    let (status, _, body) = get(&format!("{}/v1/audit?limit=5", server.url), None);
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = get(&deep, None);
    assert_eq!((status, body["error"].as_str()), (401, Some("unauthorized")), "{body}");

    // Four deep pages at once while the log's line index is still cold (the first deep page scans
    // the file once, holding the single flight for hundreds of milliseconds): one is read, the
    // others are told to come back. A fifth caller reads a memory page in the middle of that scan
    // and is never refused. (Once the index is warm a deep page takes a few milliseconds, so a
    // burst then rarely overlaps: that is why the burst is made here.)
    let barrier = Arc::new(Barrier::new(5));
    let deep_callers: Vec<_> = (0..4)
        .map(|_| {
            let (barrier, deep) = (Arc::clone(&barrier), deep.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let started = Instant::now();
                let answer = get(&deep, Some(VIEWER_TOKEN));
                (answer, started.elapsed())
            })
        })
        .collect();
    let memory_caller = {
        let (barrier, url) = (Arc::clone(&barrier), format!("{}/v1/audit?limit=10", server.url));
        std::thread::spawn(move || {
            barrier.wait();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let started = Instant::now();
            let (status, _, _) = get(&url, None);
            (status, started.elapsed())
        })
    };
    let answers: Vec<_> = deep_callers.into_iter().map(|t| t.join().unwrap()).collect();
    let (memory_status, memory_took) = memory_caller.join().unwrap();
    let ok: Vec<_> = answers.iter().filter(|(a, _)| a.0 == 200).collect();
    let busy: Vec<_> = answers.iter().filter(|(a, _)| a.0 == 503).map(|(a, _)| a).collect();
    let statuses: Vec<u16> = answers.iter().map(|(a, _)| a.0).collect();
    assert_eq!(ok.len(), 1, "exactly one deep page is read at a time: {statuses:?}");
    assert_eq!(busy.len(), 3, "the others are refused, not queued: {statuses:?}");
    for (_, retry, body) in &busy {
        assert_eq!(body["error"], "audit_busy", "{body}");
        assert!(body["detail"].is_string());
        assert_eq!(retry.as_deref(), Some("1"), "Retry-After");
    }
    let ((_, _, body), took) = ok[0];
    assert!(
        *took > memory_took.saturating_add(std::time::Duration::from_millis(20)),
        "the memory page ({memory_took:?}) was read while the deep page ({took:?}) was being read"
    );
    assert_eq!(memory_status, 200, "a memory page is never refused while a deep one runs");
    let versions: Vec<u64> = body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, (49_900..50_000).rev().collect::<Vec<u64>>());
    assert_eq!((&body["next_before"], &body["source"]), (&json!(49_900), &json!("log")));
    println!(
        "first deep audit page (100 records below version 50 000, with the one scan of the file that indexes its lines) on a log of 100 000 entries: {} ms; 3 concurrent deep pages refused; a memory page during it: {} ms",
        took.as_millis(),
        memory_took.as_millis()
    );
    let started = Instant::now();
    let (status, _, body) =
        get(&format!("{}/v1/audit?limit=100&before=2", server.url), Some(VIEWER_TOKEN));
    println!(
        "deep audit page (version 1) on a log of 100 000 entries: {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(
        (status, body["entries"].as_array().unwrap().len(), &body["next_before"]),
        (200, 1, &Value::Null)
    );
    // With the index warm, a page is read again (the single flight was released).
    let (status, _, body) = get(&deep, Some(VIEWER_TOKEN));
    assert_eq!((status, body["entries"].as_array().unwrap().len()), (200, 100), "{body}");
}

#[test]
fn bad_parameters_are_400_naming_the_parameter() {
    let (server, _dir) = start(20);
    for (query, code, name) in [
        ("limit=0", "invalid_limit", "limit"),
        ("limit=abc", "invalid_limit", "limit"),
        ("limit=10001", "invalid_limit", "limit"),
        ("before=0", "invalid_before", "before"),
        ("before=-3", "invalid_before", "before"),
        ("before=v12", "invalid_before", "before"),
        ("limit=5&before=1.5", "invalid_before", "before"),
    ] {
        let (status, _, body) = get(&format!("{}/v1/audit?{query}", server.url), None);
        assert_eq!((status, body["error"].as_str()), (400, Some(code)), "{query}: {body}");
        assert!(body["detail"].as_str().unwrap().starts_with(name), "{query}: {body}");
    }
    // At the beginning of history the page is empty and there is no cursor; past the newest
    // version the newest records are given.
    let (status, _, body) = get(&format!("{}/v1/audit?before=1", server.url), None);
    assert_eq!(
        (status, body["entries"].as_array().unwrap().len(), &body["next_before"]),
        (200, 0, &Value::Null)
    );
    let (status, _, body) = get(&format!("{}/v1/audit?limit=3&before=999999", server.url), None);
    assert_eq!(status, 200);
    assert_eq!(body["entries"][0]["version"], 21);
    assert_eq!(body["next_before"], 19);
}
