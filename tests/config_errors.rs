//! Bad configuration stops start-up, naming the key and the reason.

mod common;

use std::process::Command;
use std::time::Duration;

/// Runs `tidegate serve` on `toml` and returns its stderr; it must fail to start.
fn start_failure(toml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, toml).unwrap();
    common::refused_start(&path, &dir.path().join("data"))
}

/// The control of `start_failure`: a good config starts, and the harness fails the test at
/// its deadline instead of waiting on the server forever.
#[test]
#[should_panic(expected = "started (still running after 3s)")]
fn a_config_that_starts_fails_the_harness_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.toml");
    std::fs::write(&path, common::config_toml("")).unwrap();
    common::refused_start_within(&path, &dir.path().join("data"), Duration::from_secs(3));
}

#[test]
fn each_bad_value_names_its_key() {
    let cases = [
        ("[units]\ncount = 1", "units.count"),
        ("[freeze]\nwindow = \"1h\"", "freeze.window"),
        ("[freeze]\nby_default = \"yes\"", "freeze.by_default"),
        ("[server]\nworkers = 5000", "server.workers"),
        ("[edge]\nworkers = -1", "edge.workers"),
        ("[drain]\ninterval = \"18446744073709551615ms\"", "drain.interval"),
        ("[units]\ncount = 64\nmode = \"digits\"", "units.mode"),
        ("[units]\nmode = \"modulo\"", "units.mode"),
        ("initial_blue_percent = 150", "initial_blue_percent"),
        ("initial_blue_percent = 33.3", "initial_blue_percent"),
        ("fallback = \"guess\"", "fallback"),
        ("[colors]\nblue = \"az-a\"\ngreen = \"az-a\"", "colors.green"),
        ("[colors]\nblue = \"zone b!\"", "colors.blue"),
        ("[server]\naddress = \"localhost:80\"", "server.address"),
        ("[server]\nheader_read_timeout = \"0s\"", "server.header_read_timeout"),
        ("[server]\nidle_timeout = \"soon\"", "server.idle_timeout"),
        ("[server]\nmax_connections = 20000000", "server.max_connections"),
        ("[edge]\nheader_read_timeout = \"ten\"", "edge.header_read_timeout"),
        ("[edge]\nmax_connections = 20000000", "edge.max_connections"),
        ("[server]\nport = 70000", "port"),
        ("[[operators]]\nname = \"a\"\ntoken_sha256 = \"abc\"", "operators[0].token_sha256"),
        (
            "[[operators]]\nname = \"a\"\ntoken_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\nrole = \"admin\"",
            "operators[0].role",
        ),
        ("unts = 5", "unts"),
        ("[limits]\nmax_batch = 0", "limits.max_batch"),
        ("[drain.evacuate]\non_breach = \"flee\"", "drain.evacuate.on_breach"),
        ("[drain.evacuate]\nstep_percent = 0", "drain.evacuate.step_percent"),
        ("[zones.az-c]\ncapacity_rps = 100", "zones.az-c"),
        ("[zones.az-a]\ncapacity_rps = -1", "zones.az-a.capacity_rps"),
        ("[zones.az-a]\ncapacity_query = \"up\"", "zones.az-a.capacity_query"),
        ("[capacity]\nheadroom = 1.0", "capacity.headroom"),
        ("[node]\nid = \"r1\"\nzone = \"az-a\"\nurl = \"ftp://a:1\"", "node.url"),
        ("[node]\nid = \"r1\"\nzone = \"az-a\"\nurl = \"http://\"", "node.url"),
        ("[node]\nid = \"r 1\"\nzone = \"az-a\"", "node.id"),
        // The stall bound is from 1s to 10m (the edge learns each coordinator's heartbeat).
        ("[edge]\ncoordinator_timeout = \"900ms\"", "edge.coordinator_timeout"),
        ("[edge]\ncoordinator_timeout = \"soon\"", "edge.coordinator_timeout"),
        ("[edge]\ncoordinator_timeout = \"11m\"", "edge.coordinator_timeout"),
        ("[edge]\ncoordinators = [\"ftp://a:1\"]", "edge.coordinators[0]"),
        ("[edge]\ncoordinators = [\"https://a:1/path\"]", "edge.coordinators[0]"),
        // The presence topic's signing key: 64 hex digits, not a placeholder of zeros.
        (
            "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"127.0.0.1:1\"\npresence_key = \"abc\"",
            "store.kafka.presence_key",
        ),
        (
            "[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"127.0.0.1:1\"\npresence_key = \"0000000000000000000000000000000000000000000000000000000000000000\"",
            "store.kafka.presence_key",
        ),
    ];
    for (toml, key) in cases {
        let stderr = start_failure(toml);
        assert!(stderr.contains(key), "{toml:?} should name `{key}`, got: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn environment_overrides_the_file_and_flags_override_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, "initial_blue_percent = 20\n[units]\ncount = 1000\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("TIDEGATE_INITIAL_BLUE_PERCENT", "12.5")
        .env("TIDEGATE_UNITS__COUNT", "7")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // 12.5 % is not representable with the 7 units from the environment: the env won over the
    // file's 1000 units (where 12.5 % would be fine).
    assert!(stderr.contains("initial_blue_percent") && stderr.contains("7 units"), "{stderr}");
}

#[test]
fn missing_config_file_is_an_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--config", "/nonexistent/tidegate.toml"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
}

/// `TIDEGATE_*` variables that are not configuration keys: a service's token, the scripts' cache
/// and binary paths, the CLI's own. `serve` and `edge` must start with them set.
const STRAY_ENV: [(&str, &str); 5] = [
    ("TIDEGATE_SERVICE_TOKEN", "tg_0123456789abcdef"),
    ("TIDEGATE_CACHE", "/tmp/tidegate-cache"),
    ("TIDEGATE_BIN", "/usr/local/bin/tidegate"),
    ("TIDEGATE_TOKEN", "tg_fedcba9876543210"),
    ("TIDEGATE_URL", "http://127.0.0.1:1"),
];

/// A child process killed when dropped.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `tidegate <args>` with `env`, waits for the line starting with `announce` on stdout
/// and returns the child with the URL that follows it.
fn spawn_announced(
    args: &[&str],
    env: &[(&str, &str)],
    announce: &'static str,
) -> (Reaped, String) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut command = Command::new(env!("CARGO_BIN_EXE_tidegate"));
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix(announce) {
                let _ = tx.send(url.to_owned());
            }
        }
    });
    match rx.recv_timeout(std::time::Duration::from_secs(20)) {
        Ok(url) => (Reaped(child), url),
        Err(_) => {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("`{args:?}` did not start; stderr:\n{}", String::from_utf8_lossy(&output.stderr))
        }
    }
}

#[test]
fn unrelated_tidegate_variables_do_not_stop_serve_or_edge() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_serve, url) = spawn_announced(
        &["serve", "--address", "127.0.0.1", "--port", "0", "--data-dir", data.to_str().unwrap()],
        &STRAY_ENV,
        "tidegate listening on ",
    );
    let (status, body) = common::get_json(&format!("{url}/readyz"));
    assert_eq!(status, 200, "{body}");

    let cache = dir.path().join("edge-cache.json");
    let mut env = STRAY_ENV.to_vec();
    env.push(("TIDEGATE_EDGE__CACHE_PATH", cache.to_str().unwrap()));
    let (_edge, edge_url) = spawn_announced(
        &["edge", "--address", "127.0.0.1", "--port", "0", "--coordinator", &url],
        &env,
        "tidegate edge listening on ",
    );
    assert!(
        common::wait_until(std::time::Duration::from_secs(15), || {
            common::get_json(&format!("{edge_url}/readyz")).0 == 200
        }),
        "the edge never became ready"
    );
}

#[test]
fn a_misspelled_key_in_the_environment_is_still_named() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("TIDEGATE_SERVER__PROT", "9090")
        .output()
        .unwrap();
    assert!(!output.status.success(), "started with TIDEGATE_SERVER__PROT");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("prot"), "the unknown key should be named: {stderr}");
}

#[test]
fn a_port_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let serve = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--address", "127.0.0.1", "--port", &port, "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!serve.status.success());
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(
        stderr.contains("server.port") && stderr.contains(&format!("127.0.0.1:{port}")),
        "serve should name the key and the port: {stderr}"
    );
    let edge = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["edge", "--address", "127.0.0.1", "--port", &port])
        .args(["--coordinator", "http://127.0.0.1:1"])
        .env("TIDEGATE_EDGE__CACHE_PATH", dir.path().join("edge.json"))
        .output()
        .unwrap();
    assert!(!edge.status.success());
    let stderr = String::from_utf8_lossy(&edge.stderr);
    assert!(
        stderr.contains("edge.port") && stderr.contains(&format!("127.0.0.1:{port}")),
        "edge should name the key and the port: {stderr}"
    );
}

/// `[server] workers` sizes the runtime the ports are served on (the runtime Rocket's own
/// `execute` builds ignores tidegate's configuration: the control is the default, one per core).
#[test]
fn server_workers_sizes_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    for (toml, workers) in [("", cores), ("[server]\nworkers = 3\n", 3)] {
        let path = dir.path().join(format!("w{workers}.toml"));
        std::fs::write(&path, common::config_toml(toml)).unwrap();
        let server = common::Server::start(&path, &dir.path().join(format!("data-{workers}")));
        let said = format!("runtime worker threads: {workers}");
        let logged =
            common::wait_until(Duration::from_secs(10), || server.stderr().contains(&said));
        assert!(logged, "{said} not in:\n{}", server.stderr());
    }
}
