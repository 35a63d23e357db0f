//! The rolling upgrade of docs/src/upgrades.md, run as written (issue 26): three replicas of the
//! previous release (a real binary built from this repository's history by
//! `scripts/release-bin.sh`, which reads record formats up to 6) on one Kafka command topic, with
//! writers sending dial and pin changes through all of them the whole time. One replica at a time
//! is stopped (SIGTERM) and this build started in its place, on its port and data directory; the
//! next waits until `GET /v1/cluster` shows every replica live with `behind: 0`.
//!
//! Checked along the way:
//! - the mixed cluster refuses a change of the new format (a plan run that restores unit maps,
//!   format 7) with 409 `format_not_supported` naming the old replicas, while dials and pins (format
//!   1) go on;
//! - the control: an old replica that is paused (SIGSTOP) past three announcement intervals is lost
//!   to the gate, so the format-7 record is written; resumed, the old binary stops at that record
//!   (`/readyz` 503 `store_unavailable`) instead of skipping it, and upgrading it lets it go on;
//! - at the end the history checker proves the whole run: nothing acknowledged lost or applied
//!   twice, every replica the same history, and the same state hash at every version sampled,
//!   old binary or new;
//! - the plan run, once every replica reads format 7, moves the units.
//!
//! `TIDEGATE_RELEASE_BIN` names the older binary (scripts/test.sh sets it from
//! `scripts/release-bin.sh --path` and builds it beside the test run; the test waits for its
//! `.built` marker); without it the test fails and says how to build one.

mod common;
mod ha_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::kafka;
use common::{OPERATOR_TOKEN, get_json, post_json, put_json, wait_until};
use ha_support::{
    Replicas, Sampler, WriterOptions, Writers, agent, check_run, converge, distribution,
    longest_ack_gap, try_get,
};
use serde_json::{Value, json};

fn release_bin() -> PathBuf {
    let bin = std::env::var_os("TIDEGATE_RELEASE_BIN").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "TIDEGATE_RELEASE_BIN is not set: it names the previous release's binary; build it with \
             `TIDEGATE_RELEASE_BIN=$(bash scripts/release-bin.sh) cargo test --test rolling_upgrade` \
             (scripts/test.sh does)"
        )
    });
    // scripts/test.sh builds it beside the test run: wait for it (or for why it failed).
    let built = bin.with_extension("built");
    let failed = bin.with_extension("failed");
    let ready = wait_until(Duration::from_secs(900), || built.is_file() || failed.is_file());
    if let Ok(why) = std::fs::read_to_string(&failed) {
        panic!("the previous release's binary was not built: {why}");
    }
    assert!(
        ready,
        "the previous release's binary was not built within 15 minutes: {}",
        bin.display()
    );
    assert!(bin.is_file(), "TIDEGATE_RELEASE_BIN={} is not a file", bin.display());
    bin
}

/// `GET /v1/cluster` from `url`, if it answers.
fn cluster(url: &str) -> Option<Value> {
    let (status, body) = try_get(&agent(Duration::from_secs(2)), &format!("{url}/v1/cluster"))?;
    (status == 200).then_some(body)
}

/// `(id, status, behind, format)` of each row of `GET /v1/cluster` from `url`.
fn rows(url: &str) -> Vec<(String, String, u64, u64)> {
    cluster(url)
        .and_then(|c| c["replicas"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or("?").to_owned(),
                r["status"].as_str().unwrap_or("?").to_owned(),
                r["behind"].as_u64().unwrap_or(u64::MAX),
                // The previous release does not show `format`: 0 here.
                r["format"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// The upgrade's wait: `url` lists three live replicas, and has itself applied at least
/// `version` (what the others had applied when it was stopped: it caught up with the log). Not
/// `behind: 0` for every row: under steady writes the others' rows, from announcements every 2 s,
/// trail by the changes made since their last one.
fn settled(url: &str, version: u64) -> bool {
    let rows = rows(url);
    let own = cluster(url).and_then(|c| c["log"]["state_version"].as_u64()).unwrap_or(0);
    rows.len() == 3 && rows.iter().all(|(_, status, ..)| status == "live") && own >= version
}

/// Three replicas of the previous release (`old`) on a fresh topic named after `name`, once
/// they see each other.
fn old_cluster(old: &Path, name: &str) -> Replicas {
    let topic = kafka::unique(name);
    let replicas = Replicas::start_release(old, &kafka::bootstrap(), &topic, 3, "");
    let url = &replicas.urls[0];
    assert!(
        wait_until(Duration::from_secs(30), || settled(url, 1)),
        "the previous release's replicas never saw each other: {:?}",
        rows(url)
    );
    replicas
}

fn version(url: &str) -> u64 {
    get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap()
}

#[test]
fn a_rolling_upgrade_from_the_previous_release_loses_no_acknowledged_change() {
    let started = Instant::now();
    let old = release_bin();
    let mut replicas = old_cluster(&old, "rolling-upgrade");
    let urls = replicas.urls.clone();
    let green = get_json(&format!("{}/v1/routing", urls[0])).1["colors"]["green"]
        .as_str()
        .unwrap()
        .to_owned();
    // The plan is stored at format 3, which every release reads; running it needs format 7 (a
    // run of a plan with unit moves keeps the maps it started from, to restore them).
    let (status, body) = put_json(
        &format!("{}/v1/plans/give-green", urls[0]),
        OPERATOR_TOKEN,
        json!({"steps": [{"type": "move_units", "moves": [{"units": "0-9", "zone": green}]}],
               "rto": "5m", "expected_version": version(&urls[0]), "reason": "rolling upgrade"}),
    );
    assert_eq!(status, 200, "{body}");

    let sampler = Sampler::start(urls.clone(), Duration::from_millis(100));
    let options =
        WriterOptions { pause_ms: (20, 60), ..WriterOptions::new(3, Duration::from_secs(10)) };
    let writing = Writers::start_with(options, urls.clone());
    assert!(wait_until(Duration::from_secs(20), || writing.changed() >= 30), "no writes");

    let mut upgrade_took = Vec::new();
    let upgrades_began = Instant::now();
    let mut run_id = None;
    for i in 0..3 {
        let t = Instant::now();
        let others = (0..3).filter(|j| *j != i).map(|j| version(&urls[j])).max().unwrap();
        replicas.upgrade(i, None);
        assert!(
            wait_until(Duration::from_secs(60), || settled(&urls[i], others)),
            "r{} was not live with every replica caught up within 60 s: {:?}\n{}",
            i + 1,
            rows(&urls[i]),
            (0..3)
                .map(|j| format!(
                    "r{}: /readyz {:?}\n{}",
                    j + 1,
                    get_json(&format!("{}/readyz", urls[j])),
                    replicas.stderr(j).lines().rev().take(8).collect::<Vec<_>>().join("\n")
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        upgrade_took.push(t.elapsed());
        let formats: Vec<u64> = rows(&urls[i]).iter().map(|r| r.3).collect();
        let want: Vec<u64> = (0..3)
            .map(|j| if j <= i { u64::from(tidegate::core::FORMAT_LEVEL) } else { 6 })
            .collect();
        assert_eq!(formats, want, "the cluster view names who is left to upgrade");
        if i == 0 {
            // Two old replicas live: the format-7 change is refused, naming them, and nothing
            // is written; the writers' dials and pins go on meanwhile.
            let before = writing.changed();
            let (status, body) = post_json(
                &format!("{}/v1/plans/give-green/run", urls[0]),
                OPERATOR_TOKEN,
                json!({"reason": "too early"}),
            );
            assert_eq!((status, body["error"].as_str()), (409, Some("format_not_supported")));
            let detail = body["detail"].as_str().unwrap();
            assert!(
                detail.contains("r2 (reads format 6)") && detail.contains("r3 (reads format 6)"),
                "{detail}"
            );
            assert!(
                wait_until(Duration::from_secs(10), || writing.changed() >= before + 10),
                "the writers stalled on the mixed cluster"
            );
        }
        if i == 1 {
            // The control: r3 (old) paused past three announcement intervals is lost to the
            // gate, so the format-7 record is written.
            replicas.signal(2, "-STOP");
            assert!(
                wait_until(Duration::from_secs(15), || rows(&urls[0])
                    .iter()
                    .any(|(id, status, ..)| id == "r3" && status == "lost")),
                "r3 never counted as lost: {:?}",
                rows(&urls[0])
            );
            let (status, body) = post_json(
                &format!("{}/v1/plans/give-green/run", urls[0]),
                OPERATOR_TOKEN,
                json!({"reason": "r3 looks gone"}),
            );
            assert_eq!(status, 201, "{body}");
            run_id = body["id"].as_u64().or(body["run"]["id"].as_u64());
            // Resumed, the old binary stops at the record it cannot read, never skips it.
            replicas.signal(2, "-CONT");
            let mut ready = (0, Value::Null);
            let stopped = wait_until(Duration::from_secs(20), || {
                ready = get_json(&format!("{}/readyz", urls[2]));
                ready.0 == 503 && ready.1["error"] == "store_unavailable"
            });
            assert!(stopped, "the old replica did not stop at the format-7 record: {ready:?}");
            eprintln!(
                "[figures] the old r3 at the format-7 record: /readyz {} {}",
                ready.0, ready.1
            );
        }
    }
    assert!(run_id.is_some(), "the control's run started");
    // Upgraded, r3 goes on from the record it stopped at: every replica agrees.
    let log = writing.finish();
    converge(&replicas, Duration::from_secs(30));
    let samples = sampler.finish();
    let (_, report) = check_run(&urls, &log, &samples);
    assert!(report.acked >= 30, "{report:?}");
    assert!(
        report.hash_versions > 0,
        "the replicas' state hashes were compared at some versions: {report:?}"
    );
    // The run, once written, completed, as r3 (the replica that had stopped at it) tells.
    let run = run_id.unwrap();
    let mut report_body = Value::Null;
    assert!(
        wait_until(Duration::from_secs(30), || {
            report_body = get_json(&format!("{}/v1/plans/give-green/runs/{run}", urls[2])).1;
            report_body["state"] == "completed"
        }),
        "the plan run did not complete: {report_body}"
    );

    // The longest time no write was acknowledged, from the first upgrade on.
    let gap = longest_ack_gap(upgrades_began, None, &log);
    let unknown = log.iter().filter(|(_, t)| t.hit_failure).count();
    eprintln!(
        "[figures] rolling upgrade of 3 replicas from {} to this build: {} ({report:?}); {} changes \
         met a stopped replica and were retried; longest time without an acknowledged write {:.2} s; \
         {:.1} s in all",
        old.display(),
        distribution("stop to live and caught up", &upgrade_took),
        unknown,
        gap.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Operators upgrade a replica and keep its configuration file, so this build's embedded
/// `[freeze] by_default` (on) meets replicas of the previous release, which cannot read a freeze.
/// Then a dial that says nothing about freezing moves at once, as that release would, with the
/// audit saying why; a dial that asks for `"freeze": true` is refused, naming the old replicas;
/// once every replica is upgraded, the same kind of dial is loss-less by default.
#[test]
fn mid_upgrade_a_move_frozen_by_default_moves_at_once_and_an_asked_freeze_is_refused() {
    let started = Instant::now();
    let mut replicas = old_cluster(&release_bin(), "upgrade-freeze");
    let urls = replicas.urls.clone();
    let kept = replicas.release_config_of(0);
    assert!(!std::fs::read_to_string(&kept).unwrap().contains("[freeze]"));
    replicas.upgrade_with(0, &kept);
    assert!(wait_until(Duration::from_secs(60), || settled(&urls[0], 1)), "{:?}", rows(&urls[0]));
    let dial = |url: &str, body: Value| put_json(&format!("{url}/v1/dial"), OPERATOR_TOKEN, body);

    // Mixed: r1 is this build (freezing by default), r2 and r3 the previous release.
    let v = version(&urls[0]);
    let (status, body) = dial(
        &urls[0],
        json!({"blue_percent": 40, "freeze": true, "expected_version": v, "reason": "asked"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("format_not_supported")), "{body}");
    assert!(body["detail"].as_str().unwrap().contains("r2 (reads format 6)"), "{body}");
    let (status, body) =
        dial(&urls[0], json!({"blue_percent": 40, "expected_version": v, "reason": "mid upgrade"}));
    assert_eq!((status, &body["version"], &body["blue_units"]), (200, &json!(v + 1), &json!(40)));
    assert!(body["loss_less"].is_null(), "moved at once: {body}");
    let audit = get_json(&format!("{}/v1/audit?limit=1", urls[0])).1;
    let reason = audit["entries"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("mid upgrade") && reason.contains("not frozen by default"),
        "{audit}"
    );
    // The old replicas applied it like any dial of theirs.
    assert!(wait_until(Duration::from_secs(10), || version(&urls[2]) == v + 1));

    // Every replica upgraded, each keeping its file: the same dial is loss-less by default.
    for (i, url) in urls.iter().enumerate().skip(1) {
        let kept = replicas.release_config_of(i);
        replicas.upgrade_with(i, &kept);
        assert!(wait_until(Duration::from_secs(60), || settled(url, v + 1)), "{:?}", rows(url));
    }
    assert!(wait_until(Duration::from_secs(30), || rows(&urls[0])
        .iter()
        .all(|r| r.3 == u64::from(tidegate::core::FORMAT_LEVEL))));
    let asked = Instant::now();
    let (status, body) = dial(
        &urls[0],
        json!({"blue_percent": 30, "expected_version": v + 1, "reason": "after the upgrade"}),
    );
    assert_eq!((status, &body["blue_units"]), (200, &json!(30)), "{body}");
    assert_eq!(body["loss_less"]["frozen_version"], v + 2, "{body}");
    assert_eq!(body["version"], v + 4, "freeze, switch, unfreeze: {body}");
    println!(
        "mixed: at once with the reason noted; upgraded: loss-less by default, answered in {} ms; test {:.1} s",
        asked.elapsed().as_millis(),
        started.elapsed().as_secs_f64()
    );
}
