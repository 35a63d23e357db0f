//! Coordinator replicas on one Kafka command topic (real broker, real `tidegate serve` binaries):
//! a change on one replica is seen by the others, racing writers on different replicas get
//! exactly one winner per version, a retried command id applies once, and an unsafe topic is
//! refused at start-up with the setting named.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::kafka::{self, kafka_sh};
use common::{OPERATOR_TOKEN, Server, config_toml, get_json, put_json, wait_until};
use serde_json::json;

/// Writes a replica's configuration for `topic` and returns its path.
fn replica_config(dir: &Path, topic: &str, n: usize) -> std::path::PathBuf {
    replica_config_with(dir, topic, n, "")
}

/// [`replica_config`] with top-level settings (`top`) in front.
fn replica_config_with(dir: &Path, topic: &str, n: usize, top: &str) -> std::path::PathBuf {
    let extra = format!(
        "{top}\n[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"r{n}\"\nzone = \"zone-{n}\"\n",
        kafka::bootstrap()
    );
    let file = dir.join(format!("r{n}.toml"));
    std::fs::write(&file, config_toml(&extra)).unwrap();
    file
}

fn start_replicas(dir: &Path, topic: &str, count: usize) -> Vec<Server> {
    (1..=count)
        .map(|n| {
            let file = replica_config(dir, topic, n);
            Server::start(&file, &dir.join(format!("data-{n}")))
        })
        .collect()
}

/// The row of `/v1/cluster`'s `replicas` for the replica that answered.
fn myself(cluster: &serde_json::Value) -> &serde_json::Value {
    let rows = cluster["replicas"].as_array().unwrap();
    let mine: Vec<_> = rows.iter().filter(|r| r["self"] == true).collect();
    assert_eq!(mine.len(), 1, "{cluster}");
    mine[0]
}

fn cluster(server: &Server) -> serde_json::Value {
    get_json(&format!("{}/v1/cluster", server.url)).1
}

fn routing(server: &Server) -> serde_json::Value {
    get_json(&format!("{}/v1/routing", server.url)).1
}

fn dial(server: &Server, units: u64, expected: u64) -> (u16, serde_json::Value) {
    let body = json!({"blue_units": units, "expected_version": expected, "reason": "ha test"});
    put_json(&format!("{}/v1/dial", server.url), OPERATOR_TOKEN, body)
}

#[test]
fn a_change_on_one_replica_is_seen_on_the_others_with_the_same_log_id() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-visible");
    let replicas = start_replicas(dir.path(), &topic, 3);
    let log_id = routing(&replicas[0])["log_id"].as_str().unwrap().to_owned();
    assert_eq!(log_id.len(), 32, "a random 128-bit log id: {log_id}");
    let (status, body) = dial(&replicas[0], 20, 1);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], 2);
    for replica in &replicas[1..] {
        assert!(
            wait_until(Duration::from_secs(5), || routing(replica)["blue_units"] == 20),
            "replica {} never saw the change: {}",
            replica.url,
            routing(replica)
        );
        let table = routing(replica);
        assert_eq!(table["version"], 2);
        assert_eq!(table["log_id"], log_id.as_str());
    }
    // Every replica reports the same log and, having applied the same records, the same hash.
    let clusters: Vec<_> =
        replicas.iter().map(|r| get_json(&format!("{}/v1/cluster", r.url)).1).collect();
    for (n, cluster) in clusters.iter().enumerate() {
        assert_eq!(cluster["log"]["kind"], "kafka", "{cluster}");
        assert_eq!(cluster["log"]["id"], log_id.as_str());
        assert_eq!(cluster["self"], format!("r{}", n + 1));
        let me = myself(cluster);
        assert_eq!(me["zone"], format!("zone-{}", n + 1));
        assert_eq!(me["applied_version"], 2);
        assert_eq!(cluster["log"]["state_hash"], clusters[0]["log"]["state_hash"]);
    }
    // A fourth replica started later replays the whole log into the same state.
    let late = Server::start(&replica_config(dir.path(), &topic, 4), &dir.path().join("data-4"));
    assert_eq!(routing(&late)["version"], 2);
    assert_eq!(routing(&late)["blue_units"], 20);
}

#[test]
fn eight_writers_racing_on_one_version_through_three_replicas_have_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-race");
    let replicas = Arc::new(start_replicas(dir.path(), &topic, 3));
    for round in 0..5u64 {
        let expected = round + 1;
        let barrier = Arc::new(Barrier::new(8));
        let writers: Vec<_> = (0..8u64)
            .map(|w| {
                let (replicas, barrier) = (Arc::clone(&replicas), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    // Distinct values so that the winner is identifiable and no write is a no-op.
                    let units = 1 + round * 10 + w;
                    let (status, body) = dial(&replicas[w as usize % 3], units, expected);
                    (units, status, body)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>();
        let winners: Vec<_> = writers.iter().filter(|(_, status, _)| *status == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}: {writers:?}");
        for (_, status, body) in &writers {
            if *status != 200 {
                assert_eq!(*status, 409, "{body}");
                assert_eq!(body["error"], "version_conflict", "{body}");
            }
        }
        let (units, _, body) = winners[0];
        assert_eq!(body["version"], expected + 1);
        for replica in replicas.iter() {
            assert!(
                wait_until(Duration::from_secs(5), || routing(replica)["version"] == expected + 1),
                "{}",
                routing(replica)
            );
            assert_eq!(routing(replica)["blue_units"], *units, "the winner's value everywhere");
        }
    }
}

#[test]
fn an_unsafe_command_topic_is_refused_naming_the_setting() {
    for (setting, value) in [("cleanup.policy", "compact"), ("retention.ms", "86400000")] {
        let topic = kafka::unique("ha-unsafe");
        kafka_sh(&["topic", "create", &topic, "1", "--config", &format!("{setting}={value}")]);
        let dir = tempfile::tempdir().unwrap();
        let file = replica_config(dir.path(), &topic, 1);
        let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(["serve", "--port", "0", "--config"])
            .arg(&file)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started on an unsafe topic: {stderr}");
        assert!(stderr.contains(&format!("`{setting}`")), "{setting}: {stderr}");
    }
    let topic = kafka::unique("ha-two-partitions");
    kafka_sh(&["topic", "create", &topic, "2"]);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(replica_config(dir.path(), &topic, 1))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("`partitions`"), "{stderr}");
}

fn signal(server: &Server, sig: &str) {
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
}

#[test]
fn a_killed_replica_does_not_stop_writes_and_a_paused_one_cannot_act_on_stale_state() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-faults");
    let mut replicas = start_replicas(dir.path(), &topic, 3);
    assert_eq!(dial(&replicas[0], 10, 1).0, 200);
    // SIGSTOP replica 3 while it holds version 2; the others move on to version 3.
    assert!(wait_until(Duration::from_secs(5), || routing(&replicas[2])["version"] == 2));
    signal(&replicas[2], "-STOP");
    assert_eq!(dial(&replicas[1], 20, 2).0, 200);
    signal(&replicas[2], "-CONT");
    // Woken, it proposes from its stale view (expected version 2): refused when applied.
    let (status, body) = dial(&replicas[2], 30, 2);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["current_version"], 3, "{body}");
    assert_eq!(routing(&replicas[2])["blue_units"], 20);
    // kill -9 replica 1: the other two keep accepting changes and agree.
    replicas.remove(0).kill9();
    assert_eq!(dial(&replicas[0], 40, 3).0, 200);
    assert!(wait_until(Duration::from_secs(5), || routing(&replicas[1])["blue_units"] == 40));
}

#[test]
fn replicas_see_each_other_on_the_presence_topic_and_a_killed_one_turns_lost() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-presence");
    let mut replicas = start_replicas(dir.path(), &topic, 3);
    assert_eq!(dial(&replicas[0], 30, 1).0, 200);
    let row = |c: &serde_json::Value, id: &str| {
        c["replicas"].as_array().unwrap().iter().find(|r| r["id"] == id).cloned()
    };
    // Each replica lists all three, each with the URL it is reached at, live and caught up.
    for (n, replica) in replicas.iter().enumerate() {
        let all_live = || {
            let c = cluster(replica);
            (1..=3).all(|m| {
                row(&c, &format!("r{m}")).is_some_and(|r| {
                    r["status"] == "live" && r["applied_version"] == 2 && r["behind"] == 0
                })
            })
        };
        assert!(
            wait_until(Duration::from_secs(15), all_live),
            "replica r{} does not see the other two: {}",
            n + 1,
            cluster(replica)
        );
        let c = cluster(replica);
        assert_eq!(c["replicas"].as_array().unwrap().len(), 3, "{c}");
        assert_eq!(myself(&c)["id"], format!("r{}", n + 1));
        for (m, other) in replicas.iter().enumerate() {
            let r = row(&c, &format!("r{}", m + 1)).unwrap();
            assert_eq!(r["url"], other.url.as_str(), "{c}");
            assert_eq!(r["zone"], format!("zone-{}", m + 1));
            assert_eq!(r["state_hash"], c["log"]["state_hash"], "{c}");
        }
    }
    // kill -9 r3: within a few intervals r1 and r2 show it lost, still at the version it had.
    replicas.remove(2).kill9();
    for replica in &replicas {
        assert!(
            wait_until(Duration::from_secs(15), || row(&cluster(replica), "r3")
                .is_some_and(|r| r["status"] == "lost")),
            "{}",
            cluster(replica)
        );
        let c = cluster(replica);
        assert_eq!(row(&c, "r1").unwrap()["status"], "live", "{c}");
        assert_eq!(row(&c, "r2").unwrap()["status"], "live", "{c}");
    }
    // A change the dead replica never applied shows it behind.
    assert_eq!(dial(&replicas[0], 40, 2).0, 200);
    assert!(wait_until(Duration::from_secs(10), || row(&cluster(&replicas[1]), "r3")
        .is_some_and(|r| r["behind"] == 1)));
}

/// Appends a proposal straight to the command topic, as a replica would (a chosen command id).
fn propose(topic: &str, id: &str, expected_version: u64, blue_units: u32) {
    use tidegate::core::{Audit, Command as Change, Envelope};
    use tidegate::store::{LogEntry, SharedLog};
    let log = tidegate::mq::KafkaCommandLog::new(&kafka::bootstrap(), topic).unwrap();
    let envelope = Envelope {
        expected_version,
        command: Change::SetBlueUnits { blue_units, domain: None },
        audit: Audit { by: "alice".into(), at_ms: 1_700_000_000_000, reason: "retry".into() },
    };
    log.append(&LogEntry::proposal(id, &envelope, &tidegate::core::Zones::default())).unwrap();
}

#[test]
fn a_replica_restarted_from_its_snapshot_decides_like_one_that_applies_the_whole_log() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-snapshot");
    let config = replica_config_with(dir.path(), &topic, 1, "snapshot_every = 2");
    let r1 = Server::start(&config, &dir.path().join("data-1"));
    assert_eq!(dial(&r1, 10, 1).0, 200);
    // Command `dup` is decided before the snapshot...
    propose(&topic, "dup", 2, 33);
    assert!(wait_until(Duration::from_secs(5), || routing(&r1)["blue_units"] == 33));
    assert_eq!(dial(&r1, 20, 3).0, 200);
    assert_eq!(dial(&r1, 25, 4).0, 200);
    assert_eq!(r1.terminate().code(), Some(0));
    assert!(dir.path().join("data-1/tidegate.snapshot").exists(), "a snapshot at shutdown");
    // ...and retried after it, with an expected version that now matches: it must not apply.
    propose(&topic, "dup", 5, 77);
    propose(&topic, "fresh", 5, 60);
    let r1 = Server::start(&config, &dir.path().join("data-1"));
    assert!(
        wait_until(Duration::from_secs(2), || r1.stderr().contains("started from the snapshot")),
        "r1 started from the first record: {}",
        r1.stderr()
    );
    let r2 = Server::start(&replica_config(dir.path(), &topic, 2), &dir.path().join("data-2"));
    assert!(!r2.stderr().contains("started from the snapshot"), "{}", r2.stderr());
    for replica in [&r1, &r2] {
        assert!(wait_until(Duration::from_secs(5), || routing(replica)["version"] == 6));
        assert_eq!(routing(replica)["blue_units"], 60, "the retried `dup` took no effect");
    }
    assert_eq!(routing(&r1), routing(&r2));
    assert_eq!(cluster(&r1)["log"]["state_hash"], cluster(&r2)["log"]["state_hash"]);
    let audit = |r: &Server| get_json(&format!("{}/v1/audit?limit=50", r.url)).1;
    assert_eq!(audit(&r1), audit(&r2));
    // A snapshot of another log (the topic was replaced) is ignored with a warning.
    drop(r1);
    let other = kafka::unique("ha-snapshot-other");
    let moved = replica_config_with(dir.path(), &other, 1, "snapshot_every = 2");
    let r1 = Server::start(&moved, &dir.path().join("data-1"));
    assert!(
        wait_until(Duration::from_secs(2), || r1.stderr().contains("ignored the snapshot")),
        "{}",
        r1.stderr()
    );
    assert_eq!(routing(&r1)["version"], 1);
}

#[test]
fn a_file_log_exported_and_imported_gives_a_replica_the_same_routing_audit_and_hash() {
    let dir = tempfile::tempdir().unwrap();
    let file_config = dir.path().join("single.toml");
    std::fs::write(&file_config, config_toml("")).unwrap();
    let data = dir.path().join("single-data");
    let single = Server::start(&file_config, &data);
    let url = |path: &str| format!("{}{path}", single.url);
    let version = || routing(&single)["version"].as_u64().unwrap();
    // A history with dial moves, a pin, a drain (started, then paused) and a plan.
    assert_eq!(dial(&single, 40, 1).0, 200);
    let pin = json!({"color": "blue", "expected_version": 2, "reason": "tester"});
    assert_eq!(put_json(&url("/v1/pins/alice"), OPERATOR_TOKEN, pin).0, 200);
    assert_eq!(dial(&single, 35, 3).0, 200);
    let drain = json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "1h",
                       "reason": "maintenance"});
    let (status, body) = common::post_json(&url("/v1/drains"), OPERATOR_TOKEN, drain);
    assert_eq!(status, 201, "{body}");
    let pause = json!({"reason": "hold"});
    let (status, body) = common::post_json(&url("/v1/drains/1/pause"), OPERATOR_TOKEN, pause);
    assert_eq!(status, 200, "{body}");
    let plan = json!({
        "expected_version": version(), "reason": "reviewed", "rto": "1m",
        "steps": [{"type": "evacuate", "zone": "az-b", "to_percent": 0}]
    });
    let (status, body) = put_json(&url("/v1/plans/az-b-failing"), OPERATOR_TOKEN, plan);
    assert!(status == 200 || status == 201, "{body}");
    let before_routing = routing(&single);
    let before_audit = get_json(&url("/v1/audit?limit=100")).1;
    let before_hash = cluster(&single)["log"]["state_hash"].clone();
    assert!(before_hash.is_string(), "the file node reports its state hash");
    assert_eq!(single.terminate().code(), Some(0));

    let export = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["log", "export", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let lines = String::from_utf8(export.stdout).unwrap();
    assert_eq!(lines.lines().count() as u64, before_routing["version"].as_u64().unwrap());
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &lines).unwrap();

    let topic = kafka::unique("ha-import");
    let config = replica_config(dir.path(), &topic, 1);
    let import = || {
        Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(["log", "import", "--config"])
            .arg(&config)
            .arg("--file")
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = import();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A second import into the now non-empty topic is refused, naming it.
    let again = import();
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(!again.status.success() && stderr.contains(&topic), "{stderr}");

    let replica = Server::start(&config, &dir.path().join("data-1"));
    assert_eq!(routing(&replica), before_routing);
    assert_eq!(get_json(&format!("{}/v1/audit?limit=100", replica.url)).1, before_audit);
    assert_eq!(cluster(&replica)["log"]["state_hash"], before_hash);
    assert_eq!(cluster(&replica)["log"]["kind"], "kafka");
}

#[test]
fn a_command_topic_with_one_copy_of_each_change_is_refused_unless_explicitly_allowed() {
    // The test broker is a single node: a topic there holds one copy of every change, and the
    // loss of that broker loses acknowledged changes. Without the flag a replica refuses it,
    // naming the setting and the flag.
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-under-replicated");
    let toml = format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{}\"\ntopic = \"{topic}\"\n[node]\nid = \"r1\"\nzone = \"zone-1\"\n",
        kafka::bootstrap()
    );
    let file = dir.path().join("r1.toml");
    std::fs::write(&file, config_toml(&toml)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--address", "127.0.0.1", "--port", "0", "--config"])
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started on a one-copy topic: {stderr}");
    assert!(
        stderr.contains("`replication.factor`") && stderr.contains("allow_under_replicated"),
        "{stderr}"
    );
    // With the flag (the other tests here) it starts, with a warning that says what it risks.
    let allowed = Server::start(&replica_config(dir.path(), &topic, 2), &dir.path().join("data-2"));
    let warned = wait_until(Duration::from_secs(5), || {
        allowed.stderr().contains("allowed by store.kafka.allow_under_replicated")
    });
    assert!(warned, "{}", allowed.stderr());
}

#[test]
fn a_second_process_with_a_live_replicas_node_id_stops_and_a_restart_after_kill_9_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-duplicate-id");
    let file = replica_config(dir.path(), &topic, 1);
    let first = Server::start(&file, &dir.path().join("data-1"));
    // Let the first replica announce itself and take the lane lease.
    assert!(wait_until(Duration::from_secs(10), || {
        get_json(&format!("{}/v1/cluster", first.url)).1["leases"]["lanes"]["holder"] == "r1"
            || first.stderr().contains("is the lane authority now")
    }));
    // The same configuration again, on another data directory: a second "r1".
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--address", "127.0.0.1", "--port", "0", "--config"])
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("data-dup"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("the duplicate stopped after {:?}", started.elapsed());
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("node id `r1` is already used by a live replica"), "{stderr}");
    assert!(
        !stderr.contains("is the lane authority now"),
        "the duplicate took the lease: {stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // The first one kept going, still the lane authority (the duplicate stopped before it
    // announced itself; had it announced first, the first replica would have logged it).
    let (status, cluster) = get_json(&format!("{}/v1/cluster", first.url));
    assert_eq!(status, 200);
    assert_eq!(cluster["leases"]["lanes"]["this_replica_acts"], true, "{cluster}");
    // A restart after kill -9 is not a duplicate: its predecessor's last announcements were
    // sent before it started.
    let port = first.port();
    first.kill9();
    let restarted = Server::start_at(&file, &dir.path().join("data-1"), port);
    std::thread::sleep(Duration::from_secs(5));
    let (status, _) = get_json(&format!("{}/v1/cluster", restarted.url));
    assert_eq!(status, 200, "{}", restarted.stderr());
    assert!(!restarted.stderr().contains("already used"), "{}", restarted.stderr());
}

/// Appends raw bytes to the command topic, as a newer release (or anything else) might; returns
/// the record's offset.
fn append_raw(topic: &str, payload: &[u8]) -> u64 {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let rt = kafka::runtime();
    rt.block_on(async {
        let producer: FutureProducer =
            ClientConfig::new().set("bootstrap.servers", kafka::bootstrap()).create().unwrap();
        let record = FutureRecord::<(), [u8]>::to(topic).payload(payload);
        let delivered = producer.send(record, Duration::from_secs(10)).await.unwrap();
        delivered.offset as u64
    })
}

#[test]
fn a_record_a_replica_cannot_read_stops_it_there_instead_of_splitting_the_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-unreadable");
    let replicas = start_replicas(dir.path(), &topic, 2);
    let url = &replicas[0].url;
    let v = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    // A record of a kind this release does not know (a newer release's command).
    let offset = append_raw(&topic, br#"{"kind":"from_the_future","format":9}"#);
    for r in &replicas {
        let stopped = wait_until(Duration::from_secs(10), || {
            let (status, body) = get_json(&format!("{}/readyz", r.url));
            status == 503
                && body["detail"].as_str().unwrap_or("").contains(&format!("record {offset}"))
        });
        assert!(stopped, "{}: {}", r.url, get_json(&format!("{}/readyz", r.url)).1);
        // Writes are refused before anything is appended; tags go on at the last version.
        let (status, body) = put_json(
            &format!("{}/v1/dial", r.url),
            OPERATOR_TOKEN,
            json!({"blue_percent": 10, "expected_version": v, "reason": "after the unreadable record"}),
        );
        assert_eq!((status, body["error"].as_str()), (503, Some("store_unavailable")), "{body}");
        let (status, tag) = get_json(&format!("{}/v1/tag?user_id=u-1", r.url));
        assert_eq!((status, tag["version"].as_u64()), (200, Some(v)), "{tag}");
    }
    // Nothing after it applies on any replica: nobody skips it.
    let (_, routing) = get_json(&format!("{url}/v1/routing"));
    assert_eq!(routing["version"].as_u64(), Some(v));
    // An operator who confirmed it is garbage lists it on the replica: it goes on from there.
    let file = replica_config_with(dir.path(), &topic, 3, "");
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "allow_under_replicated = true\n",
        &format!("allow_under_replicated = true\nskip_offsets = [{offset}]\n"),
    );
    std::fs::write(&file, text).unwrap();
    let third = Server::start(&file, &dir.path().join("data-3"));
    assert!(
        wait_until(Duration::from_secs(10), || get_json(&format!("{}/readyz", third.url)).0 == 200)
    );
    let (status, body) = put_json(
        &format!("{}/v1/dial", third.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 10, "expected_version": v, "reason": "the garbage is skipped"}),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_record_kind_an_older_live_replica_cannot_read_is_not_written_until_it_is_gone() {
    use rdkafka::ClientConfig;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-format");
    let replicas = start_replicas(dir.path(), &topic, 1);
    let url = &replicas[0].url;
    let log_id = get_json(&format!("{url}/v1/routing")).1["log_id"].as_str().unwrap().to_owned();
    // An older release's replica announcing itself: no `supports` field (it reads format 1).
    let rt = kafka::runtime();
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", kafka::bootstrap()).create().unwrap();
    let announce = |at_ms: u64| {
        let body = json!({"log_id": log_id, "id": "r-old", "zone": "zone-9", "url": "http://old",
            "applied_version": 1, "started_at_ms": 1, "at_ms": at_ms});
        let payload = body.to_string();
        let presence_topic = format!("{topic}.presence");
        let record = FutureRecord::<str, str>::to(&presence_topic).key("r-old").payload(&payload);
        rt.block_on(producer.send(record, Duration::from_secs(5))).unwrap();
    };
    let now = || {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64
    };
    let stop_automation = || {
        let v = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
        put_json(
            &format!("{url}/v1/automation"),
            OPERATOR_TOKEN,
            json!({"stopped": true, "expected_version": v, "reason": "format gate test"}),
        )
    };
    announce(now());
    let refused = wait_until(Duration::from_secs(10), || {
        announce(now());
        stop_automation().0 == 409
    });
    let (status, body) = stop_automation();
    assert!(refused, "{status} {body}");
    assert_eq!(body["error"], "format_not_supported", "{body}");
    assert!(body["detail"].as_str().unwrap().contains("r-old (reads format 1)"), "{body}");
    // A dial change is of the first format: the old replica reads it, so it is written.
    let v = get_json(&format!("{url}/v1/routing")).1["version"].as_u64().unwrap();
    let (status, _) = put_json(
        &format!("{url}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 40, "expected_version": v, "reason": "format 1"}),
    );
    assert_eq!(status, 200);
    // Once the old replica is gone (lost after three silent intervals), the change is written.
    let written = wait_until(Duration::from_secs(15), || stop_automation().0 == 200);
    assert!(written, "{:?}", stop_automation());
}

/// Forwards every connection to `127.0.0.1:<port>` to `target`, from `delay` on (until then
/// nothing listens on the port: the brokers are "down").
fn forward_later(port: u16, target: String, delay: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = std::net::TcpStream::connect(&target) else { continue };
            for (mut from, mut to) in
                [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
            {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
}

#[test]
fn a_replica_started_while_the_brokers_are_down_waits_for_them_instead_of_exiting() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-late-brokers");
    // The bootstrap address answers only after 8 s (the brokers it names are the real ones):
    // longer than the first 2 s probe can last however slowly the process starts, so the probe
    // surely fails once and says so. (With 4 s, a start slowed by a busy machine could begin
    // probing late enough to succeed at once: the clients now reconnect every second at most.)
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    forward_later(port, kafka::bootstrap(), Duration::from_secs(8));
    let toml = format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"127.0.0.1:{port}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"r1\"\nzone = \"zone-1\"\n"
    );
    let file = dir.path().join("r1.toml");
    std::fs::write(&file, config_toml(&toml)).unwrap();
    let started = std::time::Instant::now();
    let server = Server::start(&file, &dir.path().join("data"));
    let waited = started.elapsed();
    println!("the replica started {waited:?} after launch, the brokers answered after 8 s");
    assert!(waited >= Duration::from_secs(7), "it did not wait for the brokers: {waited:?}");
    let stderr = server.stderr();
    assert!(stderr.contains("do not answer") && stderr.contains("retrying"), "{stderr}");
    let (status, _) = put_json(
        &format!("{}/v1/dial", server.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 20, "expected_version": 1, "reason": "after the outage"}),
    );
    assert_eq!(status, 200);
}

/// A bootstrap address that forwards to the real broker while `up`, and drops every new
/// connection while not (the brokers are "down" for a client that has not met them yet).
struct Forwarder {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Forwarder {
    fn start(target: String) -> Forwarder {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let flag = std::sync::Arc::clone(&up);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if !flag.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else { continue };
                for (mut from, mut to) in
                    [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Forwarder { port, up }
    }

    fn set_up(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_replica_restarted_while_its_brokers_are_down_serves_its_snapshot_and_takes_changes_once_they_answer()
 {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ha-offline");
    let forwarder = Forwarder::start(kafka::bootstrap());
    let toml = format!(
        "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"127.0.0.1:{}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"r1\"\nzone = \"zone-1\"\n",
        forwarder.port
    );
    let file = dir.path().join("r1.toml");
    std::fs::write(&file, config_toml(&toml)).unwrap();
    let data = dir.path().join("data");
    let first = Server::start(&file, &data);
    let (status, _) = put_json(
        &format!("{}/v1/dial", first.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 20, "expected_version": 1, "reason": "before the outage"}),
    );
    assert_eq!(status, 200);
    assert!(first.terminate().success());
    assert!(data.join("tidegate.snapshot").exists(), "a clean shutdown leaves a snapshot");

    forwarder.set_up(false);
    let started = std::time::Instant::now();
    let server = Server::start(&file, &data);
    let listening_after = started.elapsed();
    // Reads from the snapshot at once; changes refused (nothing could be appended), unready.
    let (_, routing) = get_json(&format!("{}/v1/routing", server.url));
    assert_eq!((routing["version"].as_u64(), routing["blue_units"].as_u64()), (Some(2), Some(20)));
    let (status, ready) = get_json(&format!("{}/readyz", server.url));
    assert_eq!(status, 503, "{ready}");
    assert!(ready["detail"].as_str().unwrap().contains("do not answer"), "{ready}");
    let (status, body) = put_json(
        &format!("{}/v1/dial", server.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 30, "expected_version": 2, "reason": "during the outage"}),
    );
    assert_eq!((status, body["error"].as_str()), (503, Some("store_unavailable")), "{body}");

    forwarder.set_up(true);
    let back = std::time::Instant::now();
    let ready = wait_until(Duration::from_secs(30), || {
        get_json(&format!("{}/readyz", server.url)).0 == 200
    });
    assert!(ready, "{}", server.stderr());
    println!(
        "listening {listening_after:?} after launch with the brokers down; ready {:?} after they answered",
        back.elapsed()
    );
    let (status, body) = put_json(
        &format!("{}/v1/dial", server.url),
        OPERATOR_TOKEN,
        json!({"blue_percent": 30, "expected_version": 2, "reason": "after the outage"}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(listening_after < Duration::from_secs(10), "{listening_after:?}");
}
