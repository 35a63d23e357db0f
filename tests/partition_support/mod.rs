//! The machinery of `tests/partition.rs`: zones as Linux network namespaces joined through a
//! bridge, cuts made with nftables, and processes started inside a namespace.
//!
//! Everything lives in namespaces named `tgp-<pid>-<name>`: the test's own pid keeps parallel
//! runs apart, and lets a later run delete what a crashed one left (its pid is gone). No address
//! is added outside them, and no route leaves them.

use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bridge network: zone `i` (0-based) is `.{i + 1}`, the core namespace [`CORE_HOST`].
pub const SUBNET: &str = "10.45.0";
pub const CORE_HOST: &str = "10.45.0.254";
const PREFIX: &str = "tgp-";
const NFT_TABLE: &str = "tgp_cut";

/// Runs `program args` and panics with its output unless it succeeds.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {program}: {e}");
    });
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The zones' namespaces and the `core` one between them; all of it goes on drop.
pub struct Net {
    prefix: String,
    pub zones: Vec<&'static str>,
}

impl Net {
    /// Creates `core` with a bridge, and one namespace per zone joined to it by a veth pair.
    /// Needs root (CI runs as root); says so loudly otherwise.
    pub fn create(zones: &[&'static str]) -> Net {
        assert!(
            rustix::process::geteuid().is_root(),
            "tests/partition.rs makes network namespaces, veth pairs and nftables rules: it must \
             run as root (CI does). It never skips."
        );
        remove_leftovers();
        let net = Net { prefix: format!("{PREFIX}{}-", std::process::id()), zones: zones.to_vec() };
        let core = net.ns("core");
        run("ip", &["netns", "add", &core]);
        run("ip", &["-n", &core, "link", "set", "lo", "up"]);
        run("ip", &["-n", &core, "link", "add", "br0", "type", "bridge"]);
        run("ip", &["-n", &core, "addr", "add", &format!("{CORE_HOST}/24"), "dev", "br0"]);
        run("ip", &["-n", &core, "link", "set", "br0", "up"]);
        for (i, zone) in zones.iter().enumerate() {
            let ns = net.ns(zone);
            let port = format!("v{i}");
            run("ip", &["netns", "add", &ns]);
            run("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            // Made inside core with its peer straight in the zone: nothing touches the host's
            // own namespace, so parallel runs cannot collide on interface names.
            run("ip", &["-n", &core, "link", "add", &port, "type", "veth", "peer", "name", "eth0"]);
            run("ip", &["-n", &core, "link", "set", "eth0", "netns", &ns]);
            run("ip", &["-n", &core, "link", "set", &port, "master", "br0", "up"]);
            run("ip", &["-n", &ns, "addr", "add", &format!("{}/24", net.addr(i)), "dev", "eth0"]);
            run("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
        }
        net
    }

    /// The namespace's full name.
    pub fn ns(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Zone `i`'s address on the bridge.
    pub fn addr(&self, i: usize) -> String {
        format!("{SUBNET}.{}", i + 1)
    }

    fn index(&self, zone: &str) -> usize {
        self.zones.iter().position(|z| *z == zone).unwrap_or_else(|| panic!("no zone {zone}"))
    }

    /// Moves the calling thread into namespace `name` (network only: threads and processes it
    /// starts afterwards are there too). The test itself runs from `core`, which reaches every
    /// zone whatever is cut.
    pub fn enter(&self, name: &str) {
        enter_namespace(&self.handle(name));
    }

    /// An open handle on namespace `name`, for [`enter_namespace`] on another thread.
    pub fn handle(&self, name: &str) -> std::fs::File {
        std::fs::File::open(format!("/run/netns/{}", self.ns(name))).unwrap()
    }

    /// Cuts `zone` off from the other zones, both ways, at its own interface. The database in
    /// `core` stays reachable: the realistic worst case.
    pub fn cut(&self, zone: &str) {
        let others: Vec<String> = (0..self.zones.len())
            .filter(|i| *i != self.index(zone))
            .map(|i| self.addr(i))
            .collect();
        let set = others.join(", ");
        let rules = format!(
            "table inet {NFT_TABLE} {{
               chain input {{ type filter hook input priority 0; ip saddr {{ {set} }} drop; }}
               chain output {{ type filter hook output priority 0; ip daddr {{ {set} }} drop; }}
             }}"
        );
        run("ip", &["netns", "exec", &self.ns(zone), "nft", &rules]);
    }

    /// Lifts the cut of `zone`.
    pub fn heal(&self, zone: &str) {
        run("ip", &["netns", "exec", &self.ns(zone), "nft", "delete", "table", "inet", NFT_TABLE]);
    }

    fn names(&self) -> Vec<String> {
        self.zones.iter().map(|z| self.ns(z)).chain([self.ns("core")]).collect()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.names() {
            delete_namespace(&ns);
        }
    }
}

/// Kills whatever still runs in `ns` (a namespace lives as long as a process in it) and
/// deletes it. Quiet: it also runs while a test panics.
fn delete_namespace(ns: &str) {
    let pids = Command::new("ip").args(["netns", "pids", ns]).output();
    for pid in pids
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .split_whitespace()
    {
        let _ = Command::new("kill").args(["-KILL", pid]).stderr(Stdio::null()).status();
    }
    let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
}

/// Moves the calling thread into the network namespace `handle` refers to.
pub fn enter_namespace(handle: &std::fs::File) {
    use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
    move_into_link_name_space(handle.as_fd(), Some(LinkNameSpaceType::Network))
        .unwrap_or_else(|e| panic!("setns: {e}"));
}

/// Deletes the namespaces of earlier runs whose process is gone.
fn remove_leftovers() {
    let list = run("ip", &["netns", "list"]);
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|rest| rest.split('-').next()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            delete_namespace(name);
        }
    }
}

/// A process started inside a namespace (`ip netns exec NS ...`), killed on drop; its stderr
/// is kept for the failure message.
pub struct Proc {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts `command` in `ns` and, with `announce`, waits (20 s at most) for the stdout line
    /// starting with it; returns the process and the rest of that line (e.g. its URL).
    pub fn start(
        name: &str,
        ns: &str,
        command: &[&str],
        envs: &[(&str, &str)],
        announce: Option<&str>,
    ) -> (Proc, String) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(command)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: cannot start {command:?}: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut kept = sink.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
                // The newest 64 KiB is enough to see why something failed.
                if kept.len() > 128 * 1024 {
                    let cut = kept.len() - 64 * 1024;
                    let cut = (cut..kept.len()).find(|i| kept.is_char_boundary(*i)).unwrap();
                    kept.drain(..cut);
                }
            }
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let marker = announce.map(str::to_owned);
        std::thread::spawn(move || {
            // Read to the end either way, so the process never blocks on a full pipe.
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(rest) = marker.as_deref().and_then(|m| line.strip_prefix(m)) {
                    let _ = tx.send(rest.trim().to_owned());
                }
            }
        });
        let mut proc = Proc { child, stderr };
        let said = match announce {
            None => String::new(),
            Some(_) => rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
                let _ = proc.child.kill();
                panic!("{name} did not start; stderr:\n{}", proc.stderr())
            }),
        };
        (proc, said)
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
