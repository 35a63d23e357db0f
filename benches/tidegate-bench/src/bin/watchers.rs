//! Holds N routing watch streams (SSE) on one thread, then measures dial changes: the Rust
//! successor of `scripts/bench/watchers.py`, with the same arguments and the same output lines.
//!
//! ```sh
//! watchers URL OPERATOR_TOKEN TIDEGATE_PID N [ROUNDS [MODE [STREAM_URL [ACK_URL]]]]
//! ```
//!
//! STREAM_URL (default URL) is where the streams connect (e.g. the fast listener,
//! `[server] fast_port`); ACK_URL (default URL) is where the acknowledgements go; the dial
//! changes always go to URL. Each stream is a subscriber (`subscriber_id=bench-<i>`) that
//! acknowledges every routing version it receives with `POST /v1/subscribers/<id>/ack`, as
//! `tidegate::client::Router` does, over a pool of kept-alive connections shared by all streams
//! (`WATCHERS_ACK_CONNECTIONS`, default 16, as watchers.py), one request at a time on each, or up
//! to `WATCHERS_ACK_PIPELINE` requests written before their answers are read (HTTP/1.1
//! pipelining; default 1).
//! Prints the coordinator's resident memory idle and with the streams open, and for each round
//! the time from the dial request to each stream's receiving the new version ("applied") and to
//! its acknowledgement being answered ("acked"), p50/p99/max across streams.
//!
//! MODE: `subscribers` (the above, default), `anonymous` (streams without a subscriber ID, memory
//! only) or `idle` (kept-alive connections that answered one `GET /healthz`, memory only).
//!
//! The fan-out tree: STREAM_URL may list several URLs, comma-separated (`tidegate edge`s), and
//! stream i watches the (i mod n)-th; ACK_URL `stream` sends each stream's acknowledgements to
//! the URL it watches (a pool of `WATCHERS_ACK_CONNECTIONS` per URL). Each round then also
//! prints when the coordinator (URL) first counted every stream as having applied the version
//! (`GET /v1/routing/convergence`: complete, with at least N live), and the coordinator's CPU
//! time per round; `WATCHERS_EDGE_PIDS` (comma-separated) adds the edges' resident memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Mutex, mpsc};

/// What each stream saw, readable by the measuring loop without locks: the newest version
/// received and acknowledged, each with its time in nanoseconds since `base` (the time is stored
/// before the version, so a reader that sees the version sees its time).
struct Seen {
    received_version: AtomicU64,
    received_ns: AtomicU64,
    acked_version: AtomicU64,
    acked_ns: AtomicU64,
}

struct Shared {
    base: Instant,
    /// Added to the stream index in subscriber IDs (`bench-<offset + i>`), so several load
    /// processes (one process has at most its open-file limit of sockets) use distinct IDs.
    id_offset: usize,
    seen: Vec<Seen>,
    /// Streams that have received (anonymous) or acknowledged (subscribers) a first version.
    ready: AtomicUsize,
    failures: AtomicUsize,
    /// Streams opened again because they failed before their first event.
    reconnects: AtomicUsize,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

fn main() {
    raise_nofile();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!(
            "usage: watchers URL OPERATOR_TOKEN TIDEGATE_PID N [ROUNDS [MODE [STREAM_URL [ACK_URL]]]]"
        );
        std::process::exit(2);
    }
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if let Err(e) = runtime.block_on(run(args)) {
        eprintln!("watchers: {e}");
        std::process::exit(1);
    }
}

/// As many open files as the hard limit allows (10 000 streams need 10 000 sockets).
fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn address(url: &str) -> Result<String, String> {
    let rest = url.split_once("//").map_or(url, |(_, rest)| rest);
    Ok(rest.trim_end_matches('/').to_owned())
}

/// CPU time (user + system) of process `pid` in milliseconds, from `/proc/<pid>/stat`.
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after the last `)`.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 (1-based); here index 11 and 12; 100 ticks/s.
    (ticks(11) + ticks(12)) * 10
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

async fn run(args: Vec<String>) -> Result<(), String> {
    let main = address(&args[0])?;
    let token: Arc<str> = args[1].as_str().into();
    let pid: u32 = args[2].parse().map_err(|_| "TIDEGATE_PID must be a number")?;
    let count: usize = args[3].parse().map_err(|_| "N must be a number")?;
    let rounds: usize = args.get(4).map_or(Ok(3), |r| r.parse()).map_err(|_| "bad ROUNDS")?;
    let mode = args.get(5).map_or("subscribers", String::as_str).to_owned();
    let stream_ats: Vec<String> = match args.get(6) {
        Some(list) => {
            list.split(',').filter(|u| !u.is_empty()).map(address).collect::<Result<_, _>>()?
        }
        None => vec![main.clone()],
    };
    if stream_ats.is_empty() {
        return Err("STREAM_URL lists no URL".into());
    }
    let stream_at = stream_ats[0].clone();
    // Where each stream's acknowledgements go: one ack target (index into `ack_ats`) per stream.
    let ack_ats: Vec<String> = match args.get(7).map(String::as_str) {
        Some("stream") => stream_ats.clone(),
        Some(url) => vec![address(url)?],
        None => vec![main.clone()],
    };
    let edge_pids: Vec<u32> = std::env::var("WATCHERS_EDGE_PIDS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let pool: usize =
        std::env::var("WATCHERS_ACK_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(16);
    let depth: usize = std::env::var("WATCHERS_ACK_PIPELINE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let idle = rss_kb(pid);

    if mode == "idle" {
        let mut held = Vec::with_capacity(count);
        for _ in 0..count {
            let mut stream = TcpStream::connect(&stream_at).await.map_err(|e| e.to_string())?;
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            read_response(&mut stream, &mut Vec::new()).await?;
            held.push(stream);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let with = rss_kb(pid);
        println!(
            "idle_connections={count} rss_idle_kb={idle} rss_held_kb={with} per_connection_kb={:.1}",
            (with as f64 - idle as f64) / count as f64
        );
        return Ok(());
    }
    if mode != "subscribers" && mode != "anonymous" {
        return Err(format!("unknown MODE {mode} (subscribers, anonymous or idle)"));
    }

    let env_number = |name: &str| -> usize {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let shared = Arc::new(Shared {
        base: Instant::now(),
        id_offset: env_number("WATCHERS_ID_OFFSET"),
        seen: (0..count)
            .map(|_| Seen {
                received_version: AtomicU64::new(0),
                received_ns: AtomicU64::new(0),
                acked_version: AtomicU64::new(0),
                acked_ns: AtomicU64::new(0),
            })
            .collect(),
        ready: AtomicUsize::new(0),
        failures: AtomicUsize::new(0),
        reconnects: AtomicUsize::new(0),
    });
    // One queue (and pool of ack connections) per ack target.
    let acks: Vec<mpsc::UnboundedSender<(usize, u64)>> = if mode == "subscribers" {
        ack_ats
            .iter()
            .map(|ack_at| {
                let (send, receive) = mpsc::unbounded_channel::<(usize, u64)>();
                let receive = Arc::new(Mutex::new(receive));
                for _ in 0..pool {
                    tokio::spawn(ack_loop(
                        ack_at.clone(),
                        Arc::clone(&token),
                        Arc::clone(&receive),
                        Arc::clone(&shared),
                        depth,
                    ));
                }
                send
            })
            .collect()
    } else {
        Vec::new()
    };

    // Connect in steps of 200, as watchers.py does, so the listen backlog never overflows.
    let mut tasks = Vec::with_capacity(count);
    for i in 0..count {
        let at = stream_ats[i % stream_ats.len()].clone();
        let acks = (!acks.is_empty()).then(|| acks[i % acks.len()].clone());
        let (token, shared) = (Arc::clone(&token), Arc::clone(&shared));
        tasks.push(tokio::spawn(async move {
            // A stream that fails before its first event is opened again (a Router reconnects
            // with a back-off): a burst of connects may be reset by a busy server. Counted.
            let mut attempts = 0;
            loop {
                let result = watch(&at, i, &token, &shared, acks.clone()).await;
                let fresh = shared.seen[i].received_version.load(Ordering::Acquire) == 0;
                match result {
                    Err(_) if fresh && attempts < 10 => {
                        attempts += 1;
                        shared.reconnects.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100 * attempts)).await;
                    }
                    Err(e) => {
                        if shared.failures.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("watchers: stream {i}: {e}");
                        }
                        break;
                    }
                    Ok(()) => break,
                }
            }
        }));
        if i % 200 == 199 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while shared.ready.load(Ordering::Acquire) < count {
        if shared.failures.load(Ordering::Relaxed) > 0 {
            return Err("a stream failed before it was ready".into());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {count} streams ready within 300 s",
                shared.ready.load(Ordering::Relaxed)
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = rss_kb(pid);
    let per_stream = (held as f64 - idle as f64) / count as f64;
    if mode == "anonymous" {
        println!(
            "anonymous_streams={count} rss_idle_kb={idle} rss_held_kb={held} per_stream_kb={per_stream:.1}"
        );
        return Ok(());
    }
    println!("watch_streams={count}");
    println!("watch_rss_idle_kb={idle}");
    println!("watch_rss_streams_kb={held}");
    println!("watch_rss_per_stream_kb={per_stream:.1}");
    println!("watch_reconnects_before_ready={}", shared.reconnects.load(Ordering::Relaxed));
    if !edge_pids.is_empty() {
        let edges: u64 = edge_pids.iter().map(|pid| rss_kb(*pid)).sum();
        println!("watch_edges={}", edge_pids.len());
        println!("watch_edges_rss_kb={edges}");
    }
    // The streams the coordinator must count (all the load processes' streams, in a tree).
    let expect_live = match env_number("WATCHERS_EXPECT_LIVE") {
        0 => count,
        n => n,
    };
    if rounds > 0 && expect_live > count {
        // Other load processes hold the rest: wait until the coordinator counts them all.
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let (_, body) =
                request(&main, "GET", "/v1/routing/convergence", None, Some(&token)).await?;
            let c: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            if c["complete"] == true && c["live"].as_u64().unwrap_or(0) as usize >= expect_live {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the coordinator never counted {expect_live} streams: {c}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Read again: the other processes' streams were opening while this one measured.
        println!("watch_rss_all_streams_kb={}", rss_kb(pid));
    }
    let cpu_before = cpu_ms(pid);
    let mut coordinator_p = Vec::new();

    let (mut applied_p99s, mut acked_p99s) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (_, body) = request(&main, "GET", "/v1/routing", None, None).await?;
        let table: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("GET /v1/routing: {e}"))?;
        let target = if table["blue_units"] != 40 { 40 } else { 60 };
        let dial = serde_json::json!({
            "blue_units": target,
            "expected_version": table["version"],
            "reason": format!("watch bench round {round}"),
        });
        let began = shared.now_ns();
        let (status, body) =
            request(&main, "PUT", "/v1/dial", Some(dial.to_string()), Some(&token)).await?;
        if status != 200 {
            return Err(format!("dial answered {status}: {}", String::from_utf8_lossy(&body)));
        }
        let answer: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("dial answer: {e}"))?;
        let version = answer["version"].as_u64().ok_or("the dial answer has no version")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let done = shared
                .seen
                .iter()
                .filter(|s| s.acked_version.load(Ordering::Acquire) >= version)
                .count();
            if done == count {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{done} of {count} streams acknowledged version {version} within 60 s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let since = |ns: u64| ns.saturating_sub(began) as f64 / 1e6;
        let mut applied: Vec<f64> =
            shared.seen.iter().map(|s| since(s.received_ns.load(Ordering::Acquire))).collect();
        let mut acked: Vec<f64> =
            shared.seen.iter().map(|s| since(s.acked_ns.load(Ordering::Acquire))).collect();
        applied.sort_by(f64::total_cmp);
        acked.sort_by(f64::total_cmp);
        let p99_at = (count * 99 / 100).saturating_sub(1);
        println!(
            "watch_round_{round}_applied_ms_p50_p99_max={:.0}/{:.0}/{:.0}",
            median(&applied),
            applied[p99_at],
            applied[count - 1]
        );
        println!(
            "watch_round_{round}_ms_p50_p99_max={:.0}/{:.0}/{:.0}",
            median(&acked),
            acked[p99_at],
            acked[count - 1]
        );
        applied_p99s.push(applied[p99_at]);
        acked_p99s.push(acked[p99_at]);
        // When the coordinator counted every stream (through the edges' reports, in a tree).
        let path = format!("/v1/routing/convergence?version={version}");
        let seen_all = loop {
            let (status, body) = request(&main, "GET", &path, None, Some(&token)).await?;
            let c: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let live = c["live"].as_u64().unwrap_or(0) as usize;
            if status == 200 && c["complete"] == true && live >= expect_live {
                break since(shared.now_ns());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the coordinator never counted {expect_live} streams on v{version}: {c}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        println!("watch_round_{round}_coordinator_all_applied_ms={seen_all:.0}");
        coordinator_p.push(seen_all);
    }
    let cpu = cpu_ms(pid).saturating_sub(cpu_before);
    println!("watch_coordinator_cpu_ms_per_round={:.0}", cpu as f64 / rounds.max(1) as f64);
    println!("watch_coordinator_rss_after_kb={}", rss_kb(pid));
    if !coordinator_p.is_empty() {
        let (p, lo, hi) = dist(&coordinator_p);
        println!("watch_coordinator_all_applied_ms_p50_min_max={p:.0}/{lo:.0}/{hi:.0}");
    }
    // A process that only holds streams for another one's rounds keeps them open this long.
    let hold = env_number("WATCHERS_HOLD_SECONDS");
    if hold > 0 {
        tokio::time::sleep(Duration::from_secs(hold as u64)).await;
    }
    let (p, lo, hi) = dist(&applied_p99s);
    println!("watch_applied_p99_ms_p50_min_max={p:.0}/{lo:.0}/{hi:.0}");
    let (p, lo, hi) = dist(&acked_p99s);
    println!("watch_ack_p99_ms_p50_min_max={p:.0}/{lo:.0}/{hi:.0}");
    for task in tasks {
        task.abort();
    }
    Ok(())
}

/// One watch stream: register, then read events; each event's version is recorded and (for a
/// subscriber) queued for acknowledgement.
async fn watch(
    at: &str,
    index: usize,
    token: &str,
    shared: &Shared,
    acks: Option<mpsc::UnboundedSender<(usize, u64)>>,
) -> Result<(), String> {
    let mut stream = TcpStream::connect(at).await.map_err(|e| e.to_string())?;
    let head = match acks {
        Some(_) => format!(
            "GET /v1/routing/watch?subscriber_id=bench-{}&zone=az-a&kind=bench HTTP/1.1\r\n\
             Host: {at}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n",
            shared.id_offset + index
        ),
        None => format!(
            "GET /v1/routing/watch HTTP/1.1\r\nHost: {at}\r\nAccept: text/event-stream\r\n\r\n"
        ),
    };
    stream.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut buffer = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            break end + 4;
        }
        read_more(&mut stream, &mut buffer).await?;
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("the watch answered {}", head.lines().next().unwrap_or("")));
    }
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    buffer.drain(..head_end);
    let mut events = Events::default();
    let mut first = true;
    loop {
        // Feed whole chunks (or, without chunking, everything) to the event parser.
        let versions = if chunked {
            let mut versions = Vec::new();
            while let Some((start, end, next)) = chunk(&buffer)? {
                if start == end {
                    return Ok(()); // the last chunk: the stream ended
                }
                versions.extend(events.feed(&buffer[start..end]));
                buffer.drain(..next);
            }
            versions
        } else {
            let versions = events.feed(&buffer);
            buffer.clear();
            versions
        };
        for version in versions {
            let seen = &shared.seen[index];
            seen.received_ns.store(shared.now_ns(), Ordering::Release);
            seen.received_version.store(version, Ordering::Release);
            match &acks {
                Some(acks) => acks.send((index, version)).map_err(|_| "the ack pool is gone")?,
                None => {
                    seen.acked_ns.store(shared.now_ns(), Ordering::Release);
                    seen.acked_version.store(version, Ordering::Release);
                    if first {
                        shared.ready.fetch_add(1, Ordering::AcqRel);
                    }
                }
            }
            first = false;
        }
        if buffer.capacity() > 4096 && buffer.is_empty() {
            buffer.shrink_to(1024);
        }
        if read_more(&mut stream, &mut buffer).await? == 0 {
            return Ok(());
        }
    }
}

/// The server-sent events parser: complete lines only; an event's `id:` is its version, and the
/// blank line ends it.
#[derive(Default)]
struct Events {
    line: Vec<u8>,
    id: Option<u64>,
}

impl Events {
    fn feed(&mut self, bytes: &[u8]) -> Vec<u64> {
        let mut versions = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                // Only the start of a line matters (`id:` or empty); data lines are skipped.
                if self.line.len() < 32 {
                    self.line.push(b);
                }
                continue;
            }
            let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            if let Some(id) = line.strip_prefix(b"id:") {
                self.id = std::str::from_utf8(id).ok().and_then(|s| s.trim().parse().ok());
            } else if line.is_empty()
                && let Some(id) = self.id.take()
            {
                versions.push(id);
            }
            self.line.clear();
        }
        versions
    }
}

/// The first complete chunk of `buffer`: (data start, data end, next chunk's start), or `None`
/// when more bytes are needed.
fn chunk(buffer: &[u8]) -> Result<Option<(usize, usize, usize)>, String> {
    let Some(line_end) = find(buffer, b"\r\n") else { return Ok(None) };
    let size_text = std::str::from_utf8(&buffer[..line_end]).map_err(|_| "bad chunk size")?;
    let size_text = size_text.split(';').next().unwrap_or("").trim();
    let size = usize::from_str_radix(size_text, 16)
        .map_err(|_| format!("bad chunk size {size_text:?}"))?;
    let start = line_end + 2;
    if buffer.len() < start + size + 2 {
        return Ok(None);
    }
    Ok(Some((start, start + size, start + size + 2)))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads what is there into `buffer`'s spare room (growing it by 1 KB when full).
async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<usize, String> {
    if buffer.capacity() - buffer.len() < 512 {
        buffer.reserve(1024);
    }
    stream.read_buf(buffer).await.map_err(|e| e.to_string())
}

/// One acknowledging connection: takes (stream, version) from the shared queue, posts the ack,
/// reads the whole answer, records the time; reconnects after a failure. With `depth` > 1 it
/// takes up to `depth` queued acks at once, writes them in one go and then reads their answers
/// in order (HTTP/1.1 pipelining: what 10 000 separate clients' concurrent acks look like to the
/// server better than one round trip after another on a few shared connections).
async fn ack_loop(
    at: String,
    token: Arc<str>,
    queue: Arc<Mutex<mpsc::UnboundedReceiver<(usize, u64)>>>,
    shared: Arc<Shared>,
    depth: usize,
) {
    let mut connection: Option<TcpStream> = None;
    let mut buffer = Vec::with_capacity(1024);
    let mut batch: Vec<(usize, u64)> = Vec::with_capacity(depth);
    let mut heads = String::new();
    loop {
        batch.clear();
        {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else { return };
            batch.push(first);
            while batch.len() < depth {
                match queue.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
        }
        // A kept-alive connection the server closed (its idle timeout) fails the first write or
        // read: the acks not answered yet go again once on a new connection, as an HTTP client
        // retries an idempotent request.
        let mut pending: Vec<(usize, u64)> = batch.clone();
        for attempt in 0..2 {
            heads.clear();
            for (index, version) in &pending {
                let body = format!("{{\"version\":{version}}}");
                heads.push_str(&format!(
                    "POST /v1/subscribers/bench-{}/ack HTTP/1.1\r\nHost: {at}\r\n\
                     Content-Type: application/json\r\nContent-Length: {}\r\n\
                     Authorization: Bearer {token}\r\n\r\n{body}",
                    shared.id_offset + index,
                    body.len()
                ));
            }
            let written = async {
                if connection.is_none() {
                    let stream = TcpStream::connect(&at).await.map_err(|e| e.to_string())?;
                    let _ = stream.set_nodelay(true);
                    connection = Some(stream);
                }
                let stream = connection.as_mut().expect("connected above");
                buffer.clear();
                stream.write_all(heads.as_bytes()).await.map_err(|e| e.to_string())
            }
            .await;
            let mut failed_at = None;
            for (n, &(index, version)) in pending.iter().enumerate() {
                let answered = match (&written, connection.as_mut()) {
                    (Ok(()), Some(stream)) => read_response(stream, &mut buffer).await,
                    (Err(e), _) => Err(e.clone()),
                    (Ok(()), None) => Err("the connection failed on an earlier answer".to_owned()),
                };
                match answered {
                    Ok((200, _)) => {
                        let seen = &shared.seen[index];
                        seen.acked_ns.store(shared.now_ns(), Ordering::Release);
                        let before = seen.acked_version.swap(version, Ordering::AcqRel);
                        if before == 0 {
                            shared.ready.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                    Ok((status, body)) => {
                        if shared.failures.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!(
                                "watchers: ack of bench-{} answered {status}: {body}",
                                shared.id_offset + index
                            );
                        }
                    }
                    Err(e) => {
                        connection = None;
                        if attempt == 1 {
                            let lost = pending.len() - n;
                            if shared.failures.fetch_add(lost, Ordering::Relaxed) == 0 {
                                eprintln!(
                                    "watchers: ack of bench-{}: {e}",
                                    shared.id_offset + index
                                );
                            }
                        }
                        failed_at = Some(n);
                        break;
                    }
                }
            }
            match failed_at {
                Some(n) => pending.drain(..n).for_each(drop),
                None => break,
            }
        }
    }
}

/// Reads one response with a `Content-Length` body (or none) from `buffer` and the stream, and
/// consumes it; its status, and its body when the status is not 200.
async fn read_response(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> Result<(u16, String), String> {
    let head_end = loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            break end + 4;
        }
        if read_more(stream, buffer).await? == 0 {
            return Err("the connection closed mid-answer".into());
        }
    };
    let head = std::str::from_utf8(&buffer[..head_end]).map_err(|_| "a head that is not UTF-8")?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("no status")?;
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        if read_more(stream, buffer).await? == 0 {
            return Err("the connection closed mid-body".into());
        }
    }
    let body = if status == 200 {
        String::new()
    } else {
        String::from_utf8_lossy(&buffer[head_end..head_end + length]).into_owned()
    };
    // Consume this answer whole: with pipelining the next one follows in the same buffer.
    buffer.drain(..head_end + length);
    Ok((status, body))
}

/// One request on its own connection (`Connection: close`): status and body.
async fn request(
    at: &str,
    method: &str,
    path: &str,
    body: Option<String>,
    token: Option<&str>,
) -> Result<(u16, Vec<u8>), String> {
    let mut stream = TcpStream::connect(at).await.map_err(|e| e.to_string())?;
    let body = body.unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    head.push_str(&body);
    stream.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.map_err(|e| e.to_string())?;
    let head_end = find(&answer, b"\r\n\r\n").ok_or("an answer without a head")? + 4;
    let status = std::str::from_utf8(&answer[..head_end])
        .ok()
        .and_then(|h| h.split(' ').nth(1)?.parse().ok())
        .ok_or("no status")?;
    Ok((status, answer.split_off(head_end)))
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// p50, min, max.
fn dist(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (median(&v), v[0], v[v.len() - 1])
}
