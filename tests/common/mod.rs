//! Shared test helpers: configurations with known tokens, local Rocket clients, real binaries.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use rocket::local::blocking::Client;
use tidegate::config::{Config, Overrides, Settings, token_sha256_hex};

pub mod audit;
pub mod gateway;
pub mod kafka;
pub mod traffic;

pub const OPERATOR_TOKEN: &str = "tg_test_operator_alice";
pub const VIEWER_TOKEN: &str = "tg_test_viewer_victor";
pub const SERVICE_TOKEN: &str = "tg_test_service";

/// Pins moves to "at once" for the suites built on [`config_toml`] (see there).
pub const AT_ONCE: &str = "[freeze]\nby_default = false\n";

/// A TOML configuration with an operator `alice` and a viewer `victor`, plus `extra` lines.
///
/// Unless `extra` has its own `[freeze]` table, it also says `[freeze] by_default = false`
/// ([`AT_ONCE`]): the suites built on it test other things, count one version per dial or unit
/// move, and hold Routers that do not acknowledge on purpose, while a move frozen by the
/// embedded default is three versions and waits for every live subscriber. The embedded default
/// is tested where `extra` says `[freeze]` (`tests/freeze_e2e.rs`) and by the suites that run
/// the binary with no configuration (`tests/docs_curl.rs`, `tests/demo.rs`).
pub fn config_toml(extra: &str) -> String {
    let at_once = if extra.contains("[freeze]") { "" } else { AT_ONCE };
    format!(
        r#"
{extra}
{at_once}
[[operators]]
name = "alice"
token_sha256 = "{}"
role = "operator"

[[operators]]
name = "victor"
token_sha256 = "{}"
role = "viewer"
"#,
        token_sha256_hex(OPERATOR_TOKEN),
        token_sha256_hex(VIEWER_TOKEN)
    )
}

pub fn config(toml: &str, data_dir: &Path) -> Config {
    let figment =
        Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(toml));
    let overrides = Overrides { data_dir: Some(data_dir.to_path_buf()), ..Overrides::default() };
    Config::from_figment(figment, &overrides).expect("test configuration is valid")
}

/// A local Rocket client over a fresh data directory.
pub fn client_with(toml: &str) -> (Client, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let client = client_in(toml, dir.path());
    (client, dir)
}

pub fn client_in(toml: &str, data_dir: &Path) -> Client {
    let config = config(toml, data_dir);
    let coordinator = tidegate::server::open_coordinator(&config).expect("coordinator starts");
    let app = tidegate::http::App::new(Arc::new(coordinator), Arc::new(config));
    Client::tracked(tidegate::http::build(app)).expect("rocket ignites")
}

pub fn client() -> (Client, tempfile::TempDir) {
    client_with(&config_toml(""))
}

/// A real `tidegate serve` process on a free port.
pub struct Server {
    pub child: Child,
    pub url: String,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Server {
    pub fn start(config_file: &Path, data_dir: &Path) -> Server {
        Server::start_at(config_file, data_dir, 0)
    }

    /// Starts on a given port (0 = any free one), e.g. to restart where clients expect it.
    pub fn start_at(config_file: &Path, data_dir: &Path, port: u16) -> Server {
        Server::start_with_env(config_file, data_dir, port, &[])
    }

    /// Starts with extra environment variables (e.g. a plan's call token, read by name).
    pub fn start_with_env(
        config_file: &Path,
        data_dir: &Path,
        port: u16,
        env: &[(&str, &str)],
    ) -> Server {
        Server::start_bin(
            Path::new(env!("CARGO_BIN_EXE_tidegate")),
            config_file,
            data_dir,
            port,
            env,
        )
    }

    /// Starts `bin`, another release's `tidegate` (a rolling upgrade's older replicas).
    pub fn start_bin(
        bin: &Path,
        config_file: &Path,
        data_dir: &Path,
        port: u16,
        env: &[(&str, &str)],
    ) -> Server {
        let mut child = Command::new(bin)
            .envs(env.iter().copied())
            .args(["serve", "--address", "127.0.0.1", "--port", &port.to_string()])
            .arg("--config")
            .arg(config_file)
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tidegate binary starts");
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("tidegate listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("tidegate did not announce its port; stderr:\n{}", stderr.lock().unwrap())
        });
        Server { child, url, stderr }
    }

    /// `kill -9`: no shutdown hooks, no flushing.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then wait: a clean shutdown.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
        assert!(sent.success(), "kill -TERM {pid} failed");
        self.child.wait().unwrap()
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small blocking HTTP client for tests against real processes.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

pub fn get_json(url: &str) -> (u16, serde_json::Value) {
    let mut response = agent().get(url).call().expect("request sent");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("JSON body"))
}

pub fn put_json(url: &str, token: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let mut response = agent()
        .put(url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("JSON body"))
}

/// Polls `check` until it returns true or `timeout` passes.
/// Runs `tidegate serve` on the config file `path` (state in `data_dir`), which must refuse to
/// start, and returns its stderr. A server that starts anyway is killed after 20 s and fails the
/// test, instead of serving (and hanging the test run) forever.
pub fn refused_start(path: &Path, data_dir: &Path) -> String {
    refused_start_within(path, data_dir, Duration::from_secs(20))
}

/// [`refused_start`] with its deadline.
pub fn refused_start_within(path: &Path, data_dir: &Path, deadline: Duration) -> String {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(path)
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr on a thread: a server that starts keeps the pipe open.
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let limit = deadline;
    let deadline = std::time::Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "started (still running after {limit:?}) with {}:\n{}",
                path.display(),
                std::fs::read_to_string(path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap();
    assert!(!status.success(), "exited 0 with {}", path.display());
    text
}

pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub fn post_json(url: &str, token: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let mut response = agent()
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .expect("request sent");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("JSON body"))
}

/// A real Prometheus (Debian's package) run by `scripts/prometheus.sh`, stopped on drop.
/// Starting fails the test loudly: these suites never skip for a missing component.
pub struct Prometheus {
    run_dir: std::path::PathBuf,
    pub url: String,
}

fn prometheus_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/prometheus.sh")
}

impl Prometheus {
    /// Scrapes `target` (host:port) every second, with `rule_files` loaded, and waits for the
    /// first successful scrape.
    pub fn start(run_dir: &Path, target: &str, rule_files: Option<&Path>) -> Prometheus {
        Prometheus::start_job(run_dir, target, rule_files, "tidegate")
    }

    /// [`Prometheus::start`] with the scrape job named `job` (`tidegate-edge` for an edge).
    pub fn start_job(
        run_dir: &Path,
        target: &str,
        rule_files: Option<&Path>,
        job: &str,
    ) -> Prometheus {
        let mut command = Command::new("bash");
        command
            .arg(prometheus_script())
            .args(["start", target])
            .env("PROM_RUN_DIR", run_dir)
            .env("PROM_JOB", job)
            .env("PROM_SCRAPE_INTERVAL", "1s");
        if let Some(rules) = rule_files {
            command.env("PROM_RULE_FILES", rules);
        }
        let output = command.output().expect("bash runs");
        assert!(
            output.status.success(),
            "scripts/prometheus.sh start failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        let prometheus = Prometheus { run_dir: run_dir.to_path_buf(), url };
        let waited = Command::new("bash")
            .arg(prometheus_script())
            .args(["wait-scrape", "60"])
            .env("PROM_RUN_DIR", run_dir)
            .env("PROM_JOB", job)
            .output()
            .unwrap();
        assert!(waited.status.success(), "no scrape: {}", String::from_utf8_lossy(&waited.stderr));
        prometheus
    }

    /// An instant query through the HTTP API; the raw JSON answer.
    pub fn query(&self, expr: &str) -> serde_json::Value {
        let mut response = agent()
            .get(&format!("{}/api/v1/query", self.url))
            .query("query", expr)
            .call()
            .expect("Prometheus answers");
        response.body_mut().read_json().expect("JSON")
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(prometheus_script())
            .arg("stop")
            .env("PROM_RUN_DIR", &self.run_dir)
            .output();
    }
}

/// The audit entries signed `by`, oldest first, as `(action, reason)`.
pub fn audit_by(url: &str, by: &str) -> Vec<(String, String)> {
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1000"));
    audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|e| e["by"] == by)
        .map(|e| {
            (e["action"].as_str().unwrap().to_owned(), e["reason"].as_str().unwrap().to_owned())
        })
        .collect()
}
