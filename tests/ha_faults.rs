//! The replica fault loop (real broker, real `tidegate serve` binaries): concurrent writers send
//! changes through random replicas while a random replica is killed with SIGKILL at a random
//! moment and restarted (or, one cycle in four, paused with SIGSTOP past the writers' timeout, so
//! their retries with the same key race the paused replica's own append); the history checker
//! then proves that no acknowledged change was lost or applied twice, that no refused change
//! took effect, and that all replicas had the same state hash at every version.
//! One change in five is a linked two-domain move (`PUT /v1/units` of one unit in the default
//! domain and one in `search`, issue 22): the checker also proves each acknowledged one is a
//! single record at a single version on every replica, with both domains moved (all or none).
//! `HA_FAULT_CYCLES` (default 12) and `HA_FAULT_WRITERS` (default 4) size the run;
//! `scripts/ha-fault-loop.sh` runs it with 100 cycles.

mod common;
mod ha_support;
#[path = "ha_support/history_tests.rs"]
mod history_tests;

use std::time::{Duration, Instant};

use common::kafka;
use ha_support::history::{self, Answer, Change};
use ha_support::{
    Replicas, Sampler, WriterOptions, Writers, converge, decided_history, distribution,
    longest_ack_gap, resume_times, stalled_times,
};
use rand::Rng;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn replicas_killed_at_random_under_concurrent_writers_lose_no_acknowledged_change() {
    let cycles = env_or("HA_FAULT_CYCLES", 12);
    let writers = env_or("HA_FAULT_WRITERS", 4);
    let bootstrap = kafka::bootstrap();
    let topic = kafka::unique("ha-fault-loop");
    let mut replicas = Replicas::start(&bootstrap, &topic, 3, "");
    // The second domain the linked moves change together with the default one (version 2).
    let (status, body) = common::post_json(
        &format!("{}/v1/domains", replicas.urls[0]),
        common::OPERATOR_TOKEN,
        serde_json::json!({"name": history::LINKED_DOMAIN, "expected_version": 1, "reason": "linked moves"}),
    );
    assert_eq!(status, 200, "{body}");
    converge(&replicas, Duration::from_secs(10));
    // Every 5 ms: the check below wants a hash for at least half of the versions, and with
    // idempotent retries answered locally the writers now make versions faster than a 25 ms
    // sampler saw them (682 of 1 403 in one run).
    let sampler = Sampler::start(replicas.urls.clone(), Duration::from_millis(5));
    // A 1 s request timeout: a request to a paused replica becomes an unknown outcome, retried
    // with the same key elsewhere while the paused replica may still append the first attempt.
    let options =
        WriterOptions { linked: 0.2, ..WriterOptions::new(writers, Duration::from_secs(1)) };
    let writing = Writers::start_with(options, replicas.urls.clone());
    let mut rng = rand::rng();
    let mut kills = Vec::new();
    let mut pauses = Vec::new();
    let mut restarts = Vec::new();
    let started = Instant::now();
    for _ in 0..cycles {
        std::thread::sleep(Duration::from_millis(rng.random_range(200..1200)));
        let victim = rng.random_range(0..replicas.len());
        if rng.random_bool(0.25) {
            // One cycle in four pauses the replica (SIGSTOP) past the writers' timeout instead.
            pauses.push(Instant::now());
            replicas.signal(victim, "-STOP");
            std::thread::sleep(Duration::from_millis(rng.random_range(1100..1600)));
            replicas.signal(victim, "-CONT");
            continue;
        }
        kills.push(Instant::now());
        replicas.kill9(victim);
        std::thread::sleep(Duration::from_millis(rng.random_range(50..600)));
        let restart = Instant::now();
        replicas.restart(victim);
        restarts.push(restart.elapsed());
    }
    // Let the writers run on a whole cluster for a moment after the last restart.
    std::thread::sleep(Duration::from_millis(300));
    let log = writing.finish();
    let elapsed = started.elapsed();
    let version = converge(&replicas, Duration::from_secs(20));
    let mut samples = sampler.finish();
    // A replica that never ran during the faults replays the whole topic from the start.
    let late = replicas.start_late(&bootstrap, &topic);
    let late_sample = ha_support::sample(&ha_support::agent(Duration::from_secs(2)), &late.url);
    samples.extend(late_sample);
    let mut histories: Vec<(String, Vec<history::Decided>)> = replicas
        .urls
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("r{}", i + 1), decided_history(url)))
        .collect();
    histories.push(("late".into(), decided_history(&late.url)));
    let ops: Vec<history::Op> = log.iter().map(|(op, _)| op.clone()).collect();
    let report = history::check(&ops, &histories, &samples).unwrap_or_else(|errors| {
        panic!("the history checker failed ({} problems):\n{}", errors.len(), errors.join("\n"))
    });
    // The run must have exercised what it claims to check.
    assert_eq!(report.versions, version, "{report:?}");
    assert!(report.acked >= cycles, "too few acknowledged changes to mean anything: {report:?}");
    assert!(report.refused > 0, "writers never raced: {report:?}");
    assert!(report.hash_versions as u64 * 2 >= version, "too few hash samples: {report:?}");
    let lost = 0; // check() fails on any lost acknowledgement
    println!();
    println!(
        "ha fault loop: cycles={cycles} writers={writers} run={:.1}s versions={} acked={} acked_noop={} refused={} unknown={} (applied {}) lost={lost} hash_versions_compared={} samples={}",
        elapsed.as_secs_f64(),
        report.versions,
        report.acked,
        report.acked_unchanged,
        report.refused,
        report.unknown,
        report.unknown_applied,
        report.hash_versions,
        samples.len()
    );
    println!(
        "ha fault loop: {}",
        distribution(
            "writes resume after a replica kill (first ack of a change sent after the kill)",
            &resume_times(&kills, &log)
        )
    );
    println!(
        "ha fault loop: {}",
        distribution(
            "a change that met a killed or paused replica, until its answer (retried with the same key)",
            &stalled_times(&log)
        )
    );
    println!(
        "ha fault loop: {}",
        distribution("replica restart (spawn to listening, replaying the topic)", &restarts)
    );
    // Per kill: the longest time without an acknowledgement in the 2 s after it.
    let gaps: Vec<Duration> = kills
        .iter()
        .map(|k| longest_ack_gap(*k, Some(*k + Duration::from_secs(2)), &log))
        .collect();
    println!(
        "ha fault loop: {}",
        distribution("longest time without any acknowledged change in the 2 s after a kill", &gaps)
    );
    let paused_gaps: Vec<Duration> = pauses
        .iter()
        .map(|p| longest_ack_gap(*p, Some(*p + Duration::from_secs(2)), &log))
        .collect();
    println!(
        "ha fault loop: {}",
        distribution(
            "longest time without any acknowledged change in the 2 s after a SIGSTOP",
            &paused_gaps
        )
    );
    let retried: Vec<&history::Op> =
        log.iter().filter(|(_, t)| t.hit_failure).map(|(op, _)| op).collect();
    let retried_applied = retried
        .iter()
        .filter(|op| histories[0].1.iter().any(|d| d.id.as_deref() == Some(op.id.as_str())))
        .count();
    println!(
        "ha fault loop: kills={} pauses={} changes retried with the same key={} (took effect once: {retried_applied}, acknowledged: {})",
        kills.len(),
        pauses.len(),
        retried.len(),
        retried.iter().filter(|op| matches!(op.answer, Answer::Acked { .. })).count()
    );
    let unknown = ops.iter().filter(|op| op.answer == Answer::Unknown).count();
    assert_eq!(unknown, report.unknown);
    // Linked moves: each acknowledged one is one record (one version) that moved both domains
    // on every replica (check() above); an unknown one took effect whole or not at all.
    let linked: Vec<&history::Op> =
        ops.iter().filter(|op| matches!(op.change, Change::Linked { .. })).collect();
    let records = |op: &history::Op| -> Vec<&history::Decided> {
        histories[0].1.iter().filter(|d| d.id.as_deref() == Some(op.id.as_str())).collect()
    };
    let linked_acked =
        linked.iter().filter(|op| matches!(op.answer, Answer::Acked { changed: true, .. })).count();
    let linked_unknown: Vec<&&history::Op> =
        linked.iter().filter(|op| op.answer == Answer::Unknown).collect();
    for op in &linked_unknown {
        for d in records(op) {
            assert!(op.change.took_effect_in(&d.to), "{} took effect in part: {d:?}", op.id);
        }
    }
    let unknown_applied = linked_unknown.iter().filter(|op| records(op).len() == 1).count();
    println!(
        "ha fault loop: linked two-domain moves sent={} acked={linked_acked} refused={} unknown={} (took effect whole: {unknown_applied}, not at all: {}), each acknowledged one a single version with both domains moved on all {} replicas",
        linked.len(),
        linked.iter().filter(|op| matches!(op.answer, Answer::Refused { .. })).count(),
        linked_unknown.len(),
        linked_unknown.len() - unknown_applied,
        histories.len()
    );
    assert!(linked_acked > 0, "no linked move was acknowledged: {} sent", linked.len());
}

/// A PUT with an `Idempotency-Key`, answered as (status, body).
fn dial_with_key(url: &str, key: &str, units: u64, expected: u64) -> (u16, serde_json::Value) {
    let mut response = common::agent()
        .put(&format!("{url}/v1/dial"))
        .header("Authorization", &format!("Bearer {}", common::OPERATOR_TOKEN))
        .header("Idempotency-Key", key)
        .send_json(serde_json::json!({
            "blue_units": units, "expected_version": expected, "reason": "idempotency test"
        }))
        .unwrap();
    (response.status().as_u16(), response.body_mut().read_json().unwrap())
}

#[test]
fn a_change_retried_with_its_idempotency_key_on_another_replica_applies_once() {
    let topic = kafka::unique("ha-idempotency");
    let replicas = Replicas::start(&kafka::bootstrap(), &topic, 2, "");
    let (status, first) = dial_with_key(&replicas.urls[0], "retry-me-1", 20, 1);
    assert_eq!((status, first["version"].as_u64()), (200, Some(2)), "{first}");
    // The retry, as after a lost answer, on the other replica: the first outcome, no new version,
    // even though its expected version (1) would now be a conflict if judged afresh.
    let (status, again) = dial_with_key(&replicas.urls[1], "retry-me-1", 20, 1);
    assert_eq!(status, 200, "{again}");
    assert_eq!((again["version"].as_u64(), again["changed"].as_bool()), (Some(2), Some(true)));
    // The key with another request, on the replica that never saw it: the log holds the key's
    // scope with another fingerprint, so it is refused before anything is appended.
    let (status, reused) = dial_with_key(&replicas.urls[1], "retry-me-1", 40, 2);
    assert_eq!(
        (status, reused["error"].as_str()),
        (422, Some("idempotency_key_reused")),
        "{reused}"
    );
    // A refused change retried with its key stays refused; the key with another request (one
    // that would now fit) is a reuse, refused too, and applies nothing.
    let (status, refused) = dial_with_key(&replicas.urls[0], "late-1", 30, 1);
    assert_eq!((status, refused["error"].as_str()), (409, Some("version_conflict")), "{refused}");
    let (status, again) = dial_with_key(&replicas.urls[1], "late-1", 30, 1);
    assert_eq!((status, again["error"].as_str()), (409, Some("version_conflict")), "{again}");
    let (status, again) = dial_with_key(&replicas.urls[1], "late-1", 30, 2);
    assert_eq!((status, again["error"].as_str()), (422, Some("idempotency_key_reused")), "{again}");
    // Another operator's (here: another key's) change still goes through.
    let (status, fresh) = dial_with_key(&replicas.urls[1], "fresh-1", 30, 2);
    assert_eq!((status, fresh["version"].as_u64()), (200, Some(3)), "{fresh}");
    let history = decided_history(&replicas.urls[1]);
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(decided_history(&replicas.urls[0]), history);
}
