//! Real processes around the edge: `tidegate edge`, two small upstream servers standing for the
//! blue and the green cluster, and Debian's nginx running the shipped `config/nginx/tidegate.conf`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A real `tidegate edge` process on a free port.
pub struct Edge {
    pub child: Child,
    pub url: String,
    pub stderr: Arc<Mutex<String>>,
}

impl Edge {
    /// `tidegate edge --coordinator <coordinators> --port <port>` with `config_file`; the cache
    /// goes to `cache`.
    pub fn start(config_file: &Path, coordinators: &str, cache: &Path, port: u16) -> Edge {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidegate"))
            .args(["edge", "--address", "127.0.0.1", "--port", &port.to_string()])
            .args(["--coordinator", coordinators])
            .arg("--config")
            .arg(config_file)
            .env("TIDEGATE_EDGE__CACHE_PATH", cache)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tidegate binary starts");
        let stderr = Arc::new(Mutex::new(String::new()));
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
                if let Some(url) = line.strip_prefix("tidegate edge listening on ") {
                    let _ = tx.send(url.to_owned());
                }
            }
        });
        let url = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the edge did not announce its port; stderr:\n{}", stderr.lock().unwrap())
        });
        Edge { child, url, stderr }
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Waits until the edge serves `version` (or newer).
    pub fn wait_for_version(&self, version: u64) {
        let ok = super::wait_until(Duration::from_secs(15), || {
            let (status, body) = super::get_json(&format!("{}/readyz", self.url));
            status == 200 && body["version"].as_u64().is_some_and(|v| v >= version)
        });
        assert!(ok, "edge never reached version {version}; stderr:\n{}", self.stderr());
    }

    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tiny HTTP/1.1 keep-alive server standing for one cluster. Every answer is 200 with the
/// cluster's name as the body, and echoes the routing headers it received as `x-seen-*`.
pub struct Upstream {
    pub name: &'static str,
    pub port: u16,
    pub served: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    pub fn start(name: &'static str) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, halt) = (Arc::clone(&served), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let count = Arc::clone(&count);
                std::thread::spawn(move || serve_connection(name, stream, &count));
            }
        });
        Upstream { name, port, served, stop }
    }

    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_connection(name: &str, stream: TcpStream, served: &AtomicU64) {
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut seen = Vec::new();
        let mut content_length = 0usize;
        let mut line = String::new();
        // Request line.
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((key, value)) = trimmed.split_once(':') {
                let key = key.trim().to_ascii_lowercase();
                let value = value.trim().to_owned();
                if key == "content-length" {
                    content_length = value.parse().unwrap_or(0);
                }
                if let Some(rest) = key.strip_prefix("x-tidegate-") {
                    seen.push((format!("x-seen-{rest}"), value));
                } else if key == "authorization" {
                    seen.push(("x-seen-authorization".to_owned(), value));
                }
            }
        }
        if content_length > 0 {
            let mut body = vec![0u8; content_length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
        }
        served.fetch_add(1, Ordering::SeqCst);
        let mut head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n", name.len());
        for (key, value) in seen {
            head.push_str(&format!("{key}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(name);
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
    }
}

/// Debian's nginx, non-daemon, running the shipped `config/nginx/tidegate.conf` with its ports
/// replaced by ours.
pub struct Nginx {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Nginx {
    pub fn start(dir: &Path, edge_port: u16, blue_port: u16, green_port: u16) -> Nginx {
        Nginx::start_edited(dir, edge_port, blue_port, green_port, |conf| conf)
    }

    /// [`Nginx::start`] with the shipped configuration passed through `edit` first (e.g. to
    /// uncomment the gateway token line).
    pub fn start_edited(
        dir: &Path,
        edge_port: u16,
        blue_port: u16,
        green_port: u16,
        edit: impl FnOnce(String) -> String,
    ) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("nginx is installed (scripts/test.sh installs Debian's nginx)");
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nginx/tidegate.conf"),
        )
        .unwrap();
        for fixed in ["127.0.0.1:8000", "127.0.0.1:8081", "127.0.0.1:9001", "127.0.0.1:9002"] {
            assert!(shipped.contains(fixed), "config/nginx/tidegate.conf no longer names {fixed}");
        }
        let port = free_port();
        let conf = shipped
            .replace("127.0.0.1:8000", &format!("127.0.0.1:{port}"))
            .replace("127.0.0.1:8081", &format!("127.0.0.1:{edge_port}"))
            .replace("127.0.0.1:9001", &format!("127.0.0.1:{blue_port}"))
            .replace("127.0.0.1:9002", &format!("127.0.0.1:{green_port}"));
        let conf = edit(conf);
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("tidegate.conf"), conf).unwrap();
        let temp = |name: &str| dir.join(name).display().to_string();
        let main = format!(
            "worker_processes 2;\ndaemon off;\npid {pid};\nerror_log {log} warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {t1};\n  proxy_temp_path {t2};\n\
               fastcgi_temp_path {t3};\n  uwsgi_temp_path {t4};\n  scgi_temp_path {t5};\n\
               include {inc};\n}}\n",
            pid = temp("nginx.pid"),
            log = temp("logs/error.log"),
            t1 = temp("client_body"),
            t2 = temp("proxy"),
            t3 = temp("fastcgi"),
            t4 = temp("uwsgi"),
            t5 = temp("scgi"),
            inc = temp("tidegate.conf"),
        );
        std::fs::write(dir.join("nginx.conf"), main).unwrap();
        let test = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-t")
            .output()
            .unwrap();
        assert!(test.status.success(), "nginx -t: {}", String::from_utf8_lossy(&test.stderr));
        let child = Command::new(nginx)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let up = super::wait_until(Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "nginx did not listen on {port}");
        Nginx { child, port, dir: dir.to_path_buf() }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM via kill(1) lets the master stop its workers; then make sure.
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}
