//! Idle and half-sent sockets cannot exhaust a listener (issue 21).
//!
//! The real binary runs under a 1 024 open-file limit (soft and hard, set by `prlimit`), with
//! the fast port on, next to a real `tidegate edge` under the same limit. 5 000 sockets are
//! opened against each of the main port, the fast port and the edge (a third connect and stay
//! silent, a third send half a request line, a third send headers without the final CRLF) and
//! kept coming, while fresh connections measure tag latency, a watch stream on each port must
//! receive a dial change and a lane member keeps heartbeating. The control runs the same attack
//! against a coordinator configured without a working guard (`max_connections` far above the
//! open-file limit, hour-long timeouts: a legitimate, if unwise, configuration) and must see
//! tags fail, so the test shows the guard is what keeps them working.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, config_toml};

const SOCKETS: usize = 5_000;
const PROBES: usize = 150;
/// A probe that takes longer than this has failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A `tidegate` process under `prlimit --nofile=1024:1024`, with the URLs it announced.
struct Proc {
    child: Child,
    urls: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    fn start(args: &[&str], env: &[(&str, &str)], announces: &[&str]) -> Proc {
        let mut child = Command::new("prlimit")
            .args(["--nofile=1024:1024", "--", env!("CARGO_BIN_EXE_tidegate")])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("prlimit and tidegate start");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let err = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let wanted: Vec<String> = announces.iter().map(|s| (*s).to_owned()).collect();
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                for prefix in &wanted {
                    if let Some(url) = line.strip_prefix(prefix.as_str()) {
                        let _ = tx.send((prefix.clone(), url.to_owned()));
                    }
                }
            }
        });
        let mut urls = Vec::new();
        for prefix in announces.iter().map(|s| (*s).to_owned()) {
            let (_, url) = loop {
                let got = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| {
                    let _ = child.kill();
                    panic!(
                        "{args:?} did not announce `{prefix}`; stderr:\n{}",
                        stderr.lock().unwrap()
                    )
                });
                if got.0 == prefix {
                    break got;
                }
            };
            urls.push(url);
        }
        Proc { child, urls, stderr }
    }

    fn addr(&self, i: usize) -> SocketAddr {
        self.urls[i].trim_start_matches("http://").parse().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a fresh connection (`connection: close`): status, body and time taken.
fn request(
    at: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String, Duration), String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&at, PROBE_TIMEOUT).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: {at}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status =
        text.get(9..12).and_then(|s| s.parse().ok()).ok_or(format!("no answer: {text:?}"))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    if started.elapsed() > PROBE_TIMEOUT {
        return Err("too slow".into());
    }
    Ok((status, body, started.elapsed()))
}

/// Tag latencies of `PROBES` fresh-connection tags on each target, and the failures.
fn measure(targets: &[(&str, SocketAddr)]) -> Vec<(String, Vec<Duration>, usize)> {
    let mut results: Vec<(String, Vec<Duration>, usize)> =
        targets.iter().map(|(name, _)| ((*name).to_owned(), Vec::new(), 0)).collect();
    for i in 0..PROBES {
        for (t, (_, at)) in targets.iter().enumerate() {
            match request(*at, "GET", &format!("/v1/tag?user_id=probe-{i}"), &[], "") {
                Ok((200, _, took)) => results[t].1.push(took),
                _ => results[t].2 += 1,
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
    results
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::MAX;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, results: &mut [(String, Vec<Duration>, usize)]) {
    for (name, latencies, failed) in results.iter_mut() {
        latencies.sort();
        println!(
            "{label:>8} {name:>5}: ok {:>3} failed {:>3} p50 {:>9.3?} p99 {:>9.3?} max {:>9.3?}",
            latencies.len(),
            failed,
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            latencies.last().copied().unwrap_or_default()
        );
    }
}

/// Opens `SOCKETS` idle or half-sent sockets against `at`, then keeps opening new ones (and
/// dropping its oldest) until `stop`. Counts the sockets it opened.
fn attack(
    at: SocketAddr,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicUsize>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut held = std::collections::VecDeque::new();
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            let Ok(mut s) = TcpStream::connect_timeout(&at, Duration::from_millis(500)) else {
                continue;
            };
            let _ = match i % 3 {
                0 => Ok(()),
                1 => s.write_all(b"GET /v1/ta"),
                _ => s.write_all(b"GET /v1/tag?user_id=x HTTP/1.1\r\nhost: a\r\nx-slow: 1\r\n"),
            };
            held.push_back(s);
            opened.fetch_add(1, Ordering::Relaxed);
            if held.len() > SOCKETS {
                held.pop_front();
                // Past the first burst, keep a steady pressure without starving the probes.
                thread::sleep(Duration::from_micros(500));
            }
        }
    })
}

/// Watches `/v1/routing/watch` on a raw connection; the text seen so far.
fn watch(at: SocketAddr) -> Arc<Mutex<String>> {
    let seen = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&seen);
    let mut stream = TcpStream::connect(at).unwrap();
    write!(stream, "GET /v1/routing/watch HTTP/1.1\r\nhost: {at}\r\n\r\n").unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    seen
}

fn metric(at: SocketAddr, name: &str) -> f64 {
    let (_, body, _) = request(at, "GET", "/metrics", &[], "").unwrap();
    body.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn write_config(dir: &Path, name: &str, extra: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, config_toml(extra)).unwrap();
    path.display().to_string()
}

fn serve(config: &str, data: &Path) -> Proc {
    let data = data.display().to_string();
    Proc::start(
        &[
            "serve",
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--config",
            config,
            "--data-dir",
            &data,
        ],
        &[],
        &["tidegate fast tag listener at ", "tidegate listening on "],
    )
}

#[test]
fn idle_and_half_sent_sockets_do_not_stop_tags_watches_or_heartbeats() {
    // 3 x 5 000 attack sockets plus the probes: this process needs more than 1 024 files.
    let nofile = tidegate_conn_guard::raise_nofile_limit().unwrap_or(0);
    assert!(
        nofile >= 3 * SOCKETS as u64 + 500,
        "the test needs an open-file limit of 15 500, has {nofile}"
    );
    let dir = tempfile::tempdir().unwrap();
    let guarded = write_config(
        dir.path(),
        "guarded.toml",
        "[server]\nfast_port = 0\nheader_read_timeout = \"2s\"\nidle_timeout = \"5s\"\n\
         [edge]\nheader_read_timeout = \"2s\"\nidle_timeout = \"5s\"",
    );
    let coordinator = serve(&guarded, &dir.path().join("data"));
    let (fast, main) = (coordinator.addr(0), coordinator.addr(1));
    let cache = dir.path().join("edge.json").display().to_string();
    let edge = Proc::start(
        &[
            "edge",
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--coordinator",
            &coordinator.urls[1],
            "--config",
            &guarded,
        ],
        &[("TIDEGATE_EDGE__CACHE_PATH", &cache)],
        &["tidegate edge listening on "],
    );
    let edge_at = edge.addr(0);
    assert!(
        common::wait_until(Duration::from_secs(15), || {
            request(edge_at, "GET", "/readyz", &[], "").is_ok_and(|(s, _, _)| s == 200)
        }),
        "the edge never became ready; stderr:\n{}",
        edge.stderr.lock().unwrap()
    );
    let targets = [("main", main), ("fast", fast), ("edge", edge_at)];

    // A lane member that must stay registered: a heartbeat every 300 ms on a fresh connection.
    let auth = format!("Bearer {OPERATOR_TOKEN}");
    let (status, body, _) = request(
        main,
        "POST",
        "/v1/lanes/g/members",
        &[("authorization", &auth)],
        r#"{"zone":"az-b","topic":"t","partitions":8}"#,
    )
    .unwrap();
    assert_eq!(status, 201, "{body}");
    let member: serde_json::Value = serde_json::from_str(&body).unwrap();
    let id = member["member_id"].as_str().unwrap().to_owned();
    let secret = member["member_secret"].as_str().unwrap().to_owned();
    let beats_stop = Arc::new(AtomicBool::new(false));
    // (successes, failures, longest time without a successful heartbeat)
    let beats: Arc<Mutex<(usize, Vec<String>, Duration)>> = Arc::default();
    let beater = {
        let (stop, beats, auth) = (Arc::clone(&beats_stop), Arc::clone(&beats), auth.clone());
        thread::spawn(move || {
            let mut last_ok = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let answer = request(
                    main,
                    "POST",
                    &format!("/v1/lanes/g/members/{id}/heartbeat"),
                    &[("authorization", &auth), ("x-tidegate-member-secret", &secret)],
                    r#"{"holding":[]}"#,
                );
                let mut b = beats.lock().unwrap();
                match answer {
                    Ok((200, _, _)) => {
                        b.0 += 1;
                        b.2 = b.2.max(last_ok.elapsed());
                        last_ok = Instant::now();
                    }
                    other => b.1.push(format!("{other:?}")),
                }
                drop(b);
                thread::sleep(Duration::from_millis(300));
            }
        })
    };

    let mut baseline = measure(&targets);
    report("baseline", &mut baseline);

    // Watch streams opened before the attack (proven connections) must see a change made during it.
    let watch_main = watch(main);
    let watch_fast = watch(fast);

    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    let attackers: Vec<_> = targets
        .iter()
        .zip(&counts)
        .map(|((_, at), n)| attack(*at, Arc::clone(&stop), Arc::clone(n)))
        .collect();
    let started = Instant::now();
    while counts.iter().any(|n| n.load(Ordering::Relaxed) < SOCKETS)
        && started.elapsed() < Duration::from_secs(20)
    {
        thread::sleep(Duration::from_millis(50));
    }
    let opened: Vec<usize> = counts.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    println!("attack sockets opened after {:?}: {opened:?}", started.elapsed());
    assert!(
        opened.iter().all(|n| *n >= SOCKETS),
        "the attack could not open its sockets: {opened:?}"
    );

    let dial = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        let auth = format!("Bearer {OPERATOR_TOKEN}");
        request(
            main,
            "PUT",
            "/v1/dial",
            &[("authorization", &auth)],
            r#"{"blue_percent":40,"expected_version":1,"reason":"socket flood test"}"#,
        )
    });
    let mut attacked = measure(&targets);
    let dialled = dial.join().unwrap();
    report("attack", &mut attacked);
    let watched = common::wait_until(Duration::from_secs(5), || {
        watch_main.lock().unwrap().contains("id:2\n")
            && watch_fast.lock().unwrap().contains("id:2\n")
    });
    let edge_followed = common::wait_until(Duration::from_secs(5), || {
        request(edge_at, "GET", "/readyz", &[], "")
            .is_ok_and(|(_, b, _)| b.contains("\"version\":2"))
    });
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    beats_stop.store(true, Ordering::Relaxed);
    beater.join().unwrap();

    // With the attack over: idle sockets on each listener are closed after header_read_timeout
    // (2 s), and a kept-alive connection after idle_timeout (5 s).
    let idle: Vec<TcpStream> = targets
        .iter()
        .flat_map(|(_, at)| (0..20).map(move |_| TcpStream::connect(at).unwrap()))
        .collect();
    let mut kept = TcpStream::connect(main).unwrap();
    write!(kept, "GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut first = [0u8; 512];
    assert!(kept.read(&mut first).unwrap() > 0, "no answer on the kept-alive connection");
    let kept_since = Instant::now();
    let mut rest = Vec::new();
    let _ = kept.read_to_end(&mut rest);
    let kept_for = kept_since.elapsed();
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = [0u8; 16];
        assert!(matches!(s.read(&mut buf), Ok(0)), "an idle socket was still open after 5 s");
    }
    println!("kept-alive connection closed after {kept_for:?} idle");
    assert!(
        kept_for >= Duration::from_secs(4) && kept_for < Duration::from_secs(7),
        "idle_timeout is 5 s, the kept-alive connection lived {kept_for:?}"
    );
    let evicted = metric(main, "tidegate_connections_evicted_total");
    let timeouts = metric(main, "tidegate_connection_timeouts_total");
    let refused = metric(main, "tidegate_connections_refused_total");
    let edge_evicted = metric(edge_at, "tidegate_connections_evicted_total");
    println!(
        "coordinator: evicted {evicted} header/idle timeouts {timeouts} refused {refused}; edge: evicted {edge_evicted}"
    );
    let (beats_ok, beat_failures, beat_gap) = beats.lock().unwrap().clone();
    println!(
        "lane heartbeats: {beats_ok} ok, longest gap {beat_gap:?}, failures {beat_failures:?}"
    );

    assert!(matches!(dialled, Ok((200, _, _))), "the dial change failed under attack: {dialled:?}");
    assert!(
        watched,
        "a watch stream missed the change: main {:?} fast {:?}",
        watch_main.lock().unwrap().len(),
        watch_fast.lock().unwrap().len()
    );
    assert!(edge_followed, "the edge did not follow the change under attack");
    // The member must never expire (the session timeout is 10 s; a consumer gives up reading
    // after it) and never be forgotten; a heartbeat whose connection could not be made during
    // the attack's first burst (a full accept queue) is retried by the next one, as consumers do.
    assert!(beats_ok >= 10, "lane heartbeats failed: {beat_failures:?}");
    assert!(
        beat_gap < Duration::from_secs(5),
        "a lane member went {beat_gap:?} without a heartbeat"
    );
    assert!(
        beat_failures.iter().all(|f| !f.contains("Ok(")),
        "a heartbeat was answered with an error: {beat_failures:?}"
    );
    assert!(evicted > 0.0 && edge_evicted > 0.0, "the guard never evicted anything");
    assert!(timeouts >= 40.0, "the 40 idle sockets on the coordinator's ports were not timed out");
    for ((name, base, _), (_, hit, failed)) in baseline.iter().zip(&attacked) {
        assert_eq!(*failed, 0, "{name}: tags failed under attack");
        let (p99_base, p99_hit) = (percentile(base, 0.99), percentile(hit, 0.99));
        let bound = (p99_base * 20).max(Duration::from_millis(250));
        assert!(
            p99_hit <= bound,
            "{name}: p99 {p99_hit:?} under attack, over {bound:?} (baseline {p99_base:?})"
        );
    }
    let stderr = coordinator.stderr.lock().unwrap().clone();
    assert!(stderr.contains("server.max_connections (896) reached"), "no warning: {stderr}");
    drop((edge, coordinator));

    // The control: the same attack where the limit is far above the open-file limit and the
    // timeouts an hour long. Fresh connections can no longer be served.
    let unguarded = write_config(
        dir.path(),
        "unguarded.toml",
        "[server]\nfast_port = 0\nmax_connections = 1000000\nheader_read_timeout = \"1h\"\nidle_timeout = \"1h\"",
    );
    let control = serve(&unguarded, &dir.path().join("data-control"));
    let main = control.addr(1);
    let stop = Arc::new(AtomicBool::new(false));
    let n: Arc<AtomicUsize> = Arc::default();
    let attacker = attack(main, Arc::clone(&stop), Arc::clone(&n));
    let started = Instant::now();
    // More sockets than the process has files (1 024), then ten tags at once.
    while n.load(Ordering::Relaxed) < 1_100 && started.elapsed() < Duration::from_secs(8) {
        thread::sleep(Duration::from_millis(50));
    }
    let probes: Vec<_> = (0..10)
        .map(|i| {
            thread::spawn(move || request(main, "GET", &format!("/v1/tag?user_id=c-{i}"), &[], ""))
        })
        .collect();
    let failed_tags = probes
        .into_iter()
        .map(|p| p.join().unwrap())
        .filter(|answer| !matches!(answer, Ok((200, _, _))))
        .count();
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    println!(
        "control (no working guard): {failed_tags} of 10 tags failed, {} attack sockets",
        n.load(Ordering::Relaxed)
    );
    assert!(failed_tags >= 8, "without the guard tags should fail, {failed_tags} of 10 did");
}

/// Connects to `at` from the loopback address `source` (a client of its own to the guard).
fn connect_from(source: [u8; 4], at: SocketAddr) -> std::io::Result<TcpStream> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    let rt = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    });
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((source, 0)))?;
        tokio::time::timeout(PROBE_TIMEOUT, socket.connect(at))
            .await
            .map_err(|_| std::io::Error::other("connect timed out"))?
    })?;
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    Ok(stream)
}

/// One tag on a fresh connection from `source`: whether it answered 200, and how long it took.
fn tag_from(source: [u8; 4], at: SocketAddr, user: &str) -> Result<Duration, String> {
    let started = Instant::now();
    let mut s = connect_from(source, at).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(PROBE_TIMEOUT)).map_err(|e| e.to_string())?;
    write!(s, "GET /v1/tag?user_id={user} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&answer);
    if !text.starts_with("HTTP/1.1 200") {
        return Err(text.chars().take(200).collect());
    }
    Ok(started.elapsed())
}

/// Issue 49: proven connections are shared fairly per client. One client (127.0.0.3) holds
/// kept-alive connections and watch streams past the connection limit (896 under a 1 024-file
/// limit); another (127.0.0.4) still tags on fresh connections and opens a watch stream that
/// sees a change: the flooder's oldest connections give way. The control is the flooder itself:
/// at the limit its own new connections are refused, so the limit was reached.
#[test]
fn a_client_flooding_proven_connections_never_refuses_another_client() {
    const FLOOD: usize = 1_100;
    const STREAMS: usize = 200;
    let nofile = tidegate_conn_guard::raise_nofile_limit().unwrap_or(0);
    assert!(nofile >= 2 * (FLOOD + STREAMS) as u64, "the test needs more open files, has {nofile}");
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_config(dir.path(), "fair.toml", "[server]\nfast_port = 0\nidle_timeout = \"120s\"");
    let coordinator = serve(&config, &dir.path().join("data"));
    let main = coordinator.addr(1);
    let (flooder, victim) = ([127, 0, 0, 3], [127, 0, 0, 4]);
    let probe = |label: &str| {
        let mut took = Vec::new();
        let mut failed = Vec::new();
        for i in 0..PROBES {
            match tag_from(victim, main, &format!("victim-{i}")) {
                Ok(d) => took.push(d),
                Err(e) => failed.push(e),
            }
        }
        took.sort();
        println!(
            "{label:>8}: ok {} failed {} p50 {:?} p99 {:?} max {:?}",
            took.len(),
            failed.len(),
            percentile(&took, 0.5),
            percentile(&took, 0.99),
            took.last().copied().unwrap_or_default()
        );
        (took, failed)
    };
    let (baseline, failed) = probe("baseline");
    assert!(failed.is_empty(), "{failed:?}");

    // The flood: kept-alive connections that each asked /healthz once, and watch streams.
    let mut held = Vec::new();
    let (mut admitted, mut refused) = (0usize, 0usize);
    for i in 0..FLOOD + STREAMS {
        let Ok(mut s) = connect_from(flooder, main) else { continue };
        s.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
        // Every sixth is a watch stream (200 of them), the rest kept-alive connections.
        let head = if i % 6 == 5 {
            "GET /v1/routing/watch HTTP/1.1\r\nhost: a\r\n\r\n"
        } else {
            "GET /healthz HTTP/1.1\r\nhost: a\r\n\r\n"
        };
        if s.write_all(head.as_bytes()).is_err() {
            continue;
        }
        let mut first = [0u8; 64];
        match s.read(&mut first) {
            Ok(n) if first[..n].starts_with(b"HTTP/1.1 200") => admitted += 1,
            Ok(n) if first[..n].starts_with(b"HTTP/1.1 503") => refused += 1,
            _ => {}
        }
        held.push(s);
    }
    println!("flooder: {admitted} admitted, {refused} refused of {}", FLOOD + STREAMS);
    assert!(
        refused > 0,
        "control: the flooder reached the limit, its own connections were refused"
    );

    let (attacked, failed) = probe("attack");
    assert!(
        failed.is_empty(),
        "{} of the other client's {PROBES} tags failed, the first: {:?}",
        failed.len(),
        failed.first()
    );
    // The victim's watch stream opens and sees a dial change.
    let mut stream = connect_from(victim, main).unwrap();
    write!(stream, "GET /v1/routing/watch HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let sink = Arc::clone(&seen);
        let mut stream = stream.try_clone().unwrap();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    assert!(common::wait_until(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .starts_with("HTTP/1.1 200")));
    let auth = format!("Bearer {OPERATOR_TOKEN}");
    let mut changed = None;
    for _ in 0..20 {
        let mut s = connect_from(victim, main).unwrap();
        let body = r#"{"blue_percent":40,"expected_version":1,"reason":"fairness test"}"#;
        write!(
            s,
            "PUT /v1/dial HTTP/1.1\r\nhost: a\r\nconnection: close\r\nauthorization: {auth}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        if answer.starts_with("HTTP/1.1 200") {
            changed = Some(answer);
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert!(changed.is_some(), "the other client could change the dial");
    assert!(
        common::wait_until(Duration::from_secs(5), || seen.lock().unwrap().contains("id:2\n")),
        "the other client's watch stream saw the change"
    );
    let still_held = held.len();
    println!(
        "victim p99 {:?} under attack vs {:?} baseline; flooder sockets still held: {still_held}",
        percentile(&attacked, 0.99),
        percentile(&baseline, 0.99)
    );
    drop(held);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
}
