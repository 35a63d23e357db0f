//! The three-broker KRaft cluster of `scripts/kafka.sh start-cluster`, shared by every test
//! binary that needs replication.
//!
//! One cluster serves them all: starting one costs 7-68 s on the CI machine, so a test never
//! stops it (`scripts/test.sh` starts it in the background before `cargo test` and stops it when
//! it exits; by hand, `scripts/kafka.sh stop-cluster`). Sharing is safe because:
//! - every test works on topics of its own (`common::kafka::unique`);
//! - a test holds the cluster for as long as it uses it: [`Cluster::shared`] alongside other
//!   shared users, [`Cluster::exclusive`] alone (a test that stops brokers, or one whose timing
//!   must not compete with other tests for the two cores). The hold is a read/write lock inside
//!   the test binary and a `flock` on `$KAFKA_RUN_DIR/cluster/tests.lock` between processes (two
//!   test binaries run by hand at once);
//! - a broker stopped through [`Cluster::stop_broker`] is started again before the hold is
//!   released, even when the test panics; and every hold begins with `start-cluster`, which
//!   reuses a running cluster and starts any node a crashed process left down.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::kafka_script;

/// The holds of this test binary: shared users read, exclusive users write.
static HOLDS: RwLock<()> = RwLock::new(());

enum Hold {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

/// A hold on the running three-broker cluster.
pub struct Cluster {
    pub bootstrap: String,
    /// Brokers this test stopped and has not started again.
    stopped: Mutex<BTreeSet<u8>>,
    // Released after `drop` has restarted the stopped brokers: the file lock first (its
    // descriptor closes), then this binary's hold.
    _file: File,
    hold: Hold,
}

/// Runs `scripts/kafka.sh ARGS` and returns its stdout; panics with its output on failure.
pub fn kafka_sh(args: &[&str]) -> String {
    let out = Command::new("bash").arg(kafka_script()).args(args).output().expect("bash runs");
    assert!(
        out.status.success(),
        "scripts/kafka.sh {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `$KAFKA_RUN_DIR/cluster`, as `scripts/kafka.sh` names it.
fn cluster_dir() -> PathBuf {
    let run_dir = std::env::var_os("KAFKA_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/tidegate-kafka"));
    run_dir.join("cluster")
}

impl Cluster {
    /// Holds the cluster alongside other shared users (on topics of its own, no broker stopped).
    pub fn shared() -> Cluster {
        let hold = Hold::Shared(HOLDS.read().unwrap_or_else(|p| p.into_inner()));
        Cluster::hold(hold, false)
    }

    /// Holds the cluster alone: no other test of any binary uses it meanwhile. Required to stop
    /// brokers ([`Cluster::stop_broker`]).
    pub fn exclusive() -> Cluster {
        let hold = Hold::Exclusive(HOLDS.write().unwrap_or_else(|p| p.into_inner()));
        Cluster::hold(hold, true)
    }

    fn hold(hold: Hold, exclusive: bool) -> Cluster {
        let dir = cluster_dir();
        std::fs::create_dir_all(&dir).expect("the cluster's run dir can be made");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("tests.lock"))
            .expect("the cluster's test lock opens");
        if exclusive { file.lock() } else { file.lock_shared() }.expect("the cluster test lock");
        // Start or reuse (waits for a start under way in the background, e.g. scripts/test.sh's).
        let bootstrap = kafka_sh(&["start-cluster"]).lines().last().unwrap_or_default().to_owned();
        assert_eq!(bootstrap.split(',').count(), 3, "three brokers: {bootstrap:?}");
        Cluster { bootstrap, stopped: Mutex::new(BTreeSet::new()), _file: file, hold }
    }

    /// SIGKILLs broker `n` (1-3); it is started again by [`Cluster::start_broker`] or, at the
    /// latest, when this hold ends.
    pub fn stop_broker(&self, n: &str) {
        assert!(
            matches!(self.hold, Hold::Exclusive(_)),
            "stopping a broker needs an exclusive hold"
        );
        let id: u8 = n.parse().expect("a broker number");
        self.stopped.lock().unwrap().insert(id);
        kafka_sh(&["stop-broker", n]);
    }

    /// Starts broker `n` again and waits until it is registered and unfenced.
    pub fn start_broker(&self, n: &str) {
        kafka_sh(&["start-broker", n]);
        self.stopped.lock().unwrap().remove(&n.parse::<u8>().expect("a broker number"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let stopped: Vec<u8> =
            std::mem::take(&mut *self.stopped.lock().unwrap_or_else(|p| p.into_inner()))
                .into_iter()
                .collect();
        for n in stopped {
            let out = Command::new("bash")
                .arg(kafka_script())
                .args(["start-broker", &n.to_string()])
                .output();
            if !out.as_ref().is_ok_and(|o| o.status.success()) {
                // The next hold's start-cluster starts it; say so rather than panic in a drop.
                eprintln!("could not restart broker {n} at the end of the test: {out:?}");
            }
        }
    }
}
