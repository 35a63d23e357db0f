//! Three replicas on a three-node KRaft cluster (`scripts/kafka.sh start-cluster`, real
//! binaries): the broker leading the command topic is killed with SIGKILL during concurrent
//! writes. Nothing acknowledged is lost (the history checker), the topic was created with three
//! copies, and writes resume; the time they took is printed.

mod common;
mod ha_support;

use std::process::Command;
use std::time::{Duration, Instant};

use common::wait_until;
use ha_support::history::{self, Decided};
use ha_support::{
    Replicas, Sampler, Writers, converge, decided_history, distribution, kafka_script,
    longest_ack_gap, resume_times,
};

/// Runs `scripts/kafka.sh ARGS` and returns its stdout; panics with its output on failure.
fn kafka_sh(args: &[&str]) -> String {
    let out = Command::new("bash").arg(kafka_script()).args(args).output().expect("bash runs");
    assert!(
        out.status.success(),
        "scripts/kafka.sh {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The three-node cluster, stopped (and wiped) when the test ends, however it ends.
struct Cluster {
    bootstrap: String,
}

impl Cluster {
    fn start() -> Cluster {
        let bootstrap = kafka_sh(&["start-cluster"]).lines().last().unwrap_or_default().to_owned();
        assert_eq!(bootstrap.split(',').count(), 3, "three brokers: {bootstrap:?}");
        Cluster { bootstrap }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(kafka_script()).arg("stop-cluster").output();
    }
}

#[test]
fn killing_the_leading_broker_loses_no_acknowledged_change_and_writes_resume() {
    let started = Instant::now();
    let cluster = Cluster::start();
    let cluster_up = started.elapsed();
    let topic = common::kafka::unique("ha-cluster");
    let mut replicas = Replicas::start(&cluster.bootstrap, &topic, 3, "");
    let sampler = Sampler::start(replicas.urls.clone(), Duration::from_millis(25));
    let writing = Writers::start(3, replicas.urls.clone());
    std::thread::sleep(Duration::from_secs(2));
    // tidegate created the topic: three copies, two in sync before an append is acknowledged.
    let description = kafka_sh(&[
        "tool",
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        &cluster.bootstrap,
        "--describe",
        "--topic",
        &topic,
    ]);
    assert!(description.contains("ReplicationFactor: 3"), "{description}");
    assert!(description.contains("min.insync.replicas=2"), "{description}");
    let leader = description
        .split("Leader: ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    assert!(["1", "2", "3"].contains(&leader.as_str()), "no leader in {description}");
    let before = writing.acked();
    // The kill is sent between these two instants (stop-broker returns once the JVM is gone).
    let kill_sent = Instant::now();
    kafka_sh(&["stop-broker", &leader]);
    let killed_at = Instant::now();
    // Two of three brokers left: min.insync.replicas=2 still holds, so writes must go on once
    // the controller has fenced the dead leader (its session timeout is 3 s) and moved the lead.
    let resumed = wait_until(Duration::from_secs(30), || writing.acked() >= before + 20);
    assert!(
        resumed,
        "writes did not resume after the broker kill ({} acked since)",
        writing.acked() - before
    );
    let log = writing.finish();
    converge(&replicas, Duration::from_secs(30));
    let samples = sampler.finish();
    let histories: Vec<(String, Vec<Decided>)> = replicas
        .urls
        .iter()
        .enumerate()
        .map(|(i, url)| (format!("r{}", i + 1), decided_history(url)))
        .collect();
    let ops: Vec<history::Op> = log.iter().map(|(op, _)| op.clone()).collect();
    let report = history::check(&ops, &histories, &samples).unwrap_or_else(|errors| {
        panic!("the history checker failed ({} problems):\n{}", errors.len(), errors.join("\n"))
    });
    let resumed = resume_times(&[killed_at], &log);
    assert_eq!(resumed.len(), 1, "no change was acknowledged after the broker was killed");
    // After the kill, writes went on: acknowledged changes sent after the broker came back too.
    let after_kill = log.iter().filter(|(_, t)| t.acked && t.started > killed_at).count();
    assert!(after_kill >= 5, "only {after_kill} changes acknowledged after the kill: {report:?}");
    println!(
        "ha kafka cluster: cluster start {:.1}s, killed broker {leader} (the leader), acked={} refused={} unknown={} (applied {}) lost=0, test total {:.1}s",
        cluster_up.as_secs_f64(),
        report.acked,
        report.refused,
        report.unknown,
        report.unknown_applied,
        started.elapsed().as_secs_f64()
    );
    println!(
        "ha kafka cluster: {}",
        distribution("first acknowledgement of a change sent after the broker was gone", &resumed)
    );
    let window = killed_at + Duration::from_secs(5);
    let latencies: Vec<Duration> = log
        .iter()
        .filter(|(_, t)| t.started >= killed_at - Duration::from_millis(500) && t.started < window)
        .map(|(_, t)| t.ended - t.started)
        .collect();
    println!(
        "ha kafka cluster: {}",
        distribution("latency of changes sent from 0.5 s before to 5 s after the kill", &latencies)
    );
    let stalled = longest_ack_gap(kill_sent, None, &log);
    println!(
        "ha kafka cluster: writes stopped for {} ms around the kill (longest time without an acknowledgement); SIGKILL took {} ms to send and reap",
        stalled.as_millis(),
        (killed_at - kill_sent).as_millis()
    );
    replicas.kill9(0);
}
