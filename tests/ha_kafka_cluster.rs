//! Three replicas on a three-node KRaft cluster (`scripts/kafka.sh start-cluster`, real
//! binaries): the broker leading the command topic is killed with SIGKILL during concurrent
//! writes. Nothing acknowledged is lost (the history checker), the topic was created with three
//! copies, and writes resume; the time they stopped for is printed. With `HA_CLUSTER_KILLS=N`
//! the kill is repeated N times (one by default), restarting the last victim and waiting for it
//! to rejoin the ISR in between, for a distribution. Then `/readyz` follows whether a change could
//! be accepted: unready on every replica once a second broker is down, ready again after.
//! The cluster is the one every cluster test shares (`ha_support::Cluster`); this test holds it
//! exclusively, since it stops brokers, and has them all running again before it lets go.

mod common;
mod ha_support;

use std::time::{Duration, Instant};

use common::wait_until;
use ha_support::cluster::kafka_sh;
use ha_support::{
    Cluster, Replicas, Sampler, Writers, check_run, converge, distribution, longest_ack_gap,
    resume_times,
};

/// One broker kill: whom, and when (the SIGKILL went out between the two instants).
struct Round {
    leader: String,
    kill_sent: Instant,
    killed_at: Instant,
}

/// `TopicCommand --describe` of `topic`.
fn describe(bootstrap: &str, topic: &str) -> String {
    kafka_sh(&[
        "tool",
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--topic",
        topic,
    ])
}

/// The word after `name` in a describe output (`Leader: `).
fn field(description: &str, name: &str) -> String {
    description
        .split(name)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned()
}

fn isr_size(description: &str) -> usize {
    field(description, "Isr: ").split(',').filter(|b| !b.is_empty()).count()
}

#[test]
fn killing_the_leading_broker_loses_no_acknowledged_change_and_writes_resume() {
    let started = Instant::now();
    // Alone on the shared cluster: it stops brokers (and restarts them before it lets go).
    let cluster = Cluster::exclusive();
    let cluster_up = started.elapsed();
    let topic = common::kafka::unique("ha-cluster");
    let mut replicas = Replicas::start_on_cluster(&cluster.bootstrap, &topic, 3, "");
    let sampler = Sampler::start(replicas.urls.clone(), Duration::from_millis(25));
    let writing = Writers::start(3, replicas.urls.clone(), Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(2));
    let kills: usize =
        std::env::var("HA_CLUSTER_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let mut rounds = Vec::new();
    for round in 0..kills {
        if round > 0 {
            // The last victim rejoins and catches up before the next leader is killed, so each
            // round loses one broker of three, never two.
            cluster.start_broker(&rounds.last().map(|r: &Round| r.leader.clone()).unwrap());
            let caught_up = wait_until(Duration::from_secs(60), || {
                isr_size(&describe(&cluster.bootstrap, &topic)) == 3
            });
            assert!(caught_up, "the restarted broker never rejoined the ISR");
        }
        // tidegate created the topic: three copies, two in sync before an append is acknowledged.
        let description = describe(&cluster.bootstrap, &topic);
        assert!(description.contains("ReplicationFactor: 3"), "{description}");
        assert!(description.contains("min.insync.replicas=2"), "{description}");
        let leader = field(&description, "Leader: ");
        assert!(["1", "2", "3"].contains(&leader.as_str()), "no leader in {description}");
        let before = writing.acked();
        // The kill is sent between these two instants (stop-broker returns once the JVM is gone).
        let kill_sent = Instant::now();
        cluster.stop_broker(&leader);
        let killed_at = Instant::now();
        // Two of three brokers left: min.insync.replicas=2 still holds, so writes must go on
        // once the controller has fenced the dead leader (session timeout 3 s) and moved the lead.
        let resumed = wait_until(Duration::from_secs(30), || writing.acked() >= before + 20);
        assert!(
            resumed,
            "round {round}: writes did not resume after the broker kill ({} acked since)",
            writing.acked() - before
        );
        rounds.push(Round { leader, kill_sent, killed_at });
    }
    let log = writing.finish();
    converge(&replicas, Duration::from_secs(30));
    let samples = sampler.finish();
    let (_, report) = check_run(&replicas.urls, &log, &samples);
    let killed: Vec<Instant> = rounds.iter().map(|r| r.killed_at).collect();
    let resumed = resume_times(&killed, &log);
    assert_eq!(resumed.len(), rounds.len(), "a kill after which nothing was acknowledged");
    let stalls: Vec<Duration> = rounds
        .iter()
        .map(|r| longest_ack_gap(r.kill_sent, Some(r.killed_at + Duration::from_secs(20)), &log))
        .collect();
    let leaders: Vec<&str> = rounds.iter().map(|r| r.leader.as_str()).collect();
    println!();
    println!(
        "ha kafka cluster: cluster held (started or reused) after {:.1}s, killed leader brokers {leaders:?}, acked={} refused={} unknown={} (applied {}) lost=0, test total {:.1}s",
        cluster_up.as_secs_f64(),
        report.acked,
        report.refused,
        report.unknown,
        report.unknown_applied,
        started.elapsed().as_secs_f64()
    );
    println!(
        "ha kafka cluster: {}",
        distribution(
            "writes stopped around a leader broker's kill (longest time without an acknowledgement)",
            &stalls
        )
    );
    println!(
        "ha kafka cluster: {}",
        distribution("first acknowledgement of a change sent after the broker was gone", &resumed)
    );
    let reaps: Vec<Duration> = rounds.iter().map(|r| r.killed_at - r.kill_sent).collect();
    println!(
        "ha kafka cluster: {}",
        distribution("stop-broker (SIGKILL sent and the JVM reaped)", &reaps)
    );

    // Readiness says whether a change could be accepted. With the last victim still down, two
    // of three brokers keep min.insync.replicas=2: ready. Stop a second one and no append can be
    // acknowledged: every replica must say unready within seconds, while tags and reads go on
    // (/healthz is the liveness of those). Bring both back and readiness returns.
    let down = rounds.last().unwrap().leader.clone();
    let ready = |url: &str| common::get_json(&format!("{url}/readyz")).0 == 200;
    for url in &replicas.urls {
        assert!(
            wait_until(Duration::from_secs(30), || ready(url)),
            "{url} not ready with 2 of 3 brokers"
        );
    }
    let second = ["1", "2", "3"].into_iter().find(|b| *b != down).unwrap().to_owned();
    cluster.stop_broker(&second);
    let outage = Instant::now();
    let mut unready_after = Vec::new();
    for url in &replicas.urls {
        assert!(
            wait_until(Duration::from_secs(20), || !ready(url)),
            "{url} still says ready with 1 of 3 brokers: {}",
            common::get_json(&format!("{url}/readyz")).1
        );
        unready_after.push(outage.elapsed());
        let (status, body) = common::get_json(&format!("{url}/readyz"));
        assert_eq!((status, body["error"].as_str()), (503, Some("store_unavailable")), "{body}");
        assert_eq!(common::get_json(&format!("{url}/healthz")).0, 200);
        assert_eq!(common::get_json(&format!("{url}/v1/tag?user_id=u-1")).0, 200);
    }
    cluster.start_broker(&second);
    cluster.start_broker(&down);
    let back = Instant::now();
    let mut ready_after = Vec::new();
    for url in &replicas.urls {
        assert!(wait_until(Duration::from_secs(90), || ready(url)), "{url} never ready again");
        ready_after.push(back.elapsed());
    }
    println!(
        "ha kafka cluster: {}",
        distribution(
            "readyz unready after the second broker stopped (per replica)",
            &unready_after
        )
    );
    println!(
        "ha kafka cluster: {}",
        distribution("readyz ready again after both brokers started (per replica)", &ready_after)
    );
    replicas.kill9(0);
}
