//! A writer service of one zone that implements the write contract on a real database: it
//! checks every write with its own watched `Router` (`check_write` inside a `write_scope`),
//! commits only `owned` writes to one shared PostgreSQL table, forwards a misrouted write once to
//! the owner zone's writer, refuses the rest (421 naming the owner, 503 + `Retry-After` for
//! `behind`, `frozen` and `unconfirmed`), and reports what it committed to the coordinator's dual-owner watch.
//! `tests/pg_zero_loss.rs` runs two of them (az-a and az-b) through 100 moves.
//!
//! ```sh
//! bash scripts/postgres.sh start                         # prints DATABASE_URL
//! ZONE=az-a LISTEN=127.0.0.1:8091 PEERS=az-b=http://127.0.0.1:8092 \
//!   DATABASE_URL=postgresql://postgres@127.0.0.1:PORT/postgres \
//!   TIDEGATE_URL=http://127.0.0.1:8080 TIDEGATE_SERVICE_TOKEN=... cargo run --example zone_writer
//! curl -i -X POST http://127.0.0.1:8091/write -H 'Content-Type: application/json' \
//!   -H 'x-tidegate-version: 12' -d '{"user_id": "alice", "write_id": 1}'
//! ```
//!
//! The HTTP side of the contract (what a caller sees):
//!
//! | answer | status | body |
//! |---|---|---|
//! | owned | 200 | `{"committed": true, "zone", "version", "write_id"}` |
//! | misrouted | the owner's answer (forwarded once with `x-tidegate-hop: 1`), or 421 | `{"error": "misrouted", "detail", "owner_zone", "version"}` |
//! | behind, frozen, unconfirmed | 503 + `Retry-After: 1` | `{"error": "behind" \| "frozen" \| "unconfirmed", "detail", "retry_after_ms": 250}` |
//!
//! Every row records the zone that committed it and the routing version its check judged with,
//! so a reader can check each commit against the table of that version.
//!
//! With `CHECK_VIA=<edge URL>` it checks each write over HTTP on its zone's edge (`GET
//! /v1/write-check`) instead, as a service in any language would, and commits within the
//! answer's `commit_within_ms`; `SLOW_COMMITS=<percent>` makes that share of commits 200-800 ms
//! slower. `tests/pg_zero_loss.rs` runs the HTTP path with slow commits too.
//!
//! It uses a bare `std::net` HTTP/1.1 loop (keep-alive, one thread per connection, one database
//! connection per thread) so the example shows only the contract.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tidegate_client::{
    HOP_HEADER, Identity, Router, RouterOptions, VERSION_HEADER, WriteRoute, forward_once,
};
use tidegate_core::ZoneId;

/// The one table both zones write to. No unique key on `write_id`: a duplicate must be
/// countable afterwards, not silently refused.
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS writes (
    write_id     BIGINT      NOT NULL,
    user_id      TEXT        NOT NULL,
    zone         TEXT        NOT NULL,
    version      BIGINT      NOT NULL,
    committed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())";

const INSERT: &str = "INSERT INTO writes (write_id, user_id, zone, version) VALUES ($1, $2, $3, $4)
    RETURNING (extract(epoch FROM committed_at) * 1000)::bigint";

struct Writer {
    router: Router,
    zone: String,
    local: ZoneId,
    database_url: String,
    /// The writers of the other zones, by zone name, for forwarding.
    peers: HashMap<String, String>,
    forwarder: ureq::Agent,
    /// Committed writes for the dual-owner watch: (user, version, committed at ms).
    reports: Sender<(String, u64, u64)>,
    committed: AtomicU64,
    forwarded: AtomicU64,
    reported: Arc<AtomicU64>,
    /// `CHECK_VIA`: check writes over HTTP on this edge (`GET /v1/write-check`) instead of with
    /// the writer's own Router, as a service in another language would.
    check_via: Option<String>,
    token: String,
    /// `SLOW_COMMITS`: the percentage of commits that take 200-800 ms longer (a slow database),
    /// chosen by `write_id`.
    slow_percent: u64,
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} must be set"))
}

fn main() {
    let zone = env("ZONE");
    let coordinator = env("TIDEGATE_URL");
    let token = env("TIDEGATE_SERVICE_TOKEN");
    let database_url = env("DATABASE_URL");
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:0".into());
    let check_via = std::env::var("CHECK_VIA").ok().map(|u| u.trim_end_matches('/').to_owned());
    let slow_percent: u64 = std::env::var("SLOW_COMMITS")
        .map(|p| p.parse().expect("SLOW_COMMITS is a percentage"))
        .unwrap_or(0);
    let peers: HashMap<String, String> = std::env::var("PEERS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(z, url)| (z.trim().to_owned(), url.trim().trim_end_matches('/').to_owned()))
        .collect();

    let mut db = postgres::Client::connect(&database_url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to {database_url}: {e}"));
    db.batch_execute(SCHEMA).expect("the writes table");
    drop(db);

    let router = Router::connect(
        &coordinator,
        Identity {
            subscriber_id: format!("zone-writer-{zone}-{}", std::process::id()),
            zone: zone.clone(),
            kind: "service".into(),
        },
        // The token registers the writer as a subscriber: the coordinator's freeze barrier
        // waits for it to acknowledge each table before a move goes on.
        RouterOptions { token: Some(token.clone()), ..Default::default() },
    )
    .expect("a valid coordinator URL");
    assert!(router.wait_for_version(1, Duration::from_secs(20)), "no table: {}", router.status());
    let local = router.table().unwrap().zones().resolve(&zone).expect("ZONE names a zone");

    let (sender, receiver) = std::sync::mpsc::channel();
    let reported = Arc::new(AtomicU64::new(0));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    {
        let (agent, url, zone, reported, token) = (
            agent.clone(),
            coordinator.clone(),
            zone.clone(),
            Arc::clone(&reported),
            token.clone(),
        );
        std::thread::spawn(move || report_loop(&receiver, &agent, &url, &token, &zone, &reported));
    }
    let writer = Arc::new(Writer {
        router,
        zone,
        local,
        database_url,
        peers,
        forwarder: agent,
        reports: sender,
        committed: AtomicU64::new(0),
        forwarded: AtomicU64::new(0),
        reported,
        check_via,
        token,
        slow_percent,
    });
    let listener = TcpListener::bind(&listen).expect("bind LISTEN");
    println!("zone_writer listening on http://{}", listener.local_addr().unwrap());
    for stream in listener.incoming().flatten() {
        let writer = Arc::clone(&writer);
        std::thread::spawn(move || serve(stream, &writer));
    }
}

/// One connection: requests in turn (keep-alive), with one database connection of its own.
fn serve(stream: TcpStream, writer: &Writer) {
    let _ = stream.set_nodelay(true);
    let mut out = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut db = None;
    while let Some(request) = read_request(&mut reader) {
        let reply = match (request.method.as_str(), request.path.as_str()) {
            ("POST", "/write") => write(writer, &request, &mut db),
            ("GET", "/stats") => Reply::json(
                200,
                json!({
                    "zone": writer.zone,
                    "committed": writer.committed.load(Ordering::SeqCst),
                    "forwarded": writer.forwarded.load(Ordering::SeqCst),
                    "reported": writer.reported.load(Ordering::SeqCst),
                }),
            ),
            _ => Reply::error(404, "not_found", "POST /write or GET /stats"),
        };
        if out.write_all(&reply.bytes()).is_err() {
            return;
        }
    }
}

/// The write contract: scope, check, then write, forward once, or refuse.
fn write(writer: &Writer, request: &Request, db: &mut Option<postgres::Client>) -> Reply {
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return Reply::error(400, "invalid_write", &format!("body: {e}")),
    };
    let (Some(user_id), Some(write_id)) = (body["user_id"].as_str(), body["write_id"].as_i64())
    else {
        return Reply::error(400, "invalid_write", "needs user_id (string) and write_id (integer)");
    };
    let incoming = request.header(VERSION_HEADER).and_then(|v| v.parse::<u64>().ok());
    if let Some(edge) = &writer.check_via {
        return write_checked_by_edge(writer, edge, request, db, (user_id, write_id, incoming));
    }
    // The scope spans the check and the commit: the Router acknowledges no newer table (so no
    // freeze barrier passes) while a write judged with an older one is still being committed.
    let scope = writer.router.write_scope();
    let answer = match writer.router.check_write(user_id, writer.local, incoming) {
        Ok(answer) => answer,
        Err(e @ tidegate_client::ClientError::InvalidUserId(_)) => {
            return Reply::error(400, "invalid_user_id", &e.to_string());
        }
        // No table (yet): this writer cannot judge, so it does not write.
        Err(e) => return Reply::error(503, "no_table", &e.to_string()),
    };
    match forward_once(&answer, request.header(HOP_HEADER)) {
        WriteRoute::Write => {
            let committed = commit(writer, db, write_id, user_id, answer.version);
            drop(scope);
            match committed {
                Ok(at_ms) => {
                    writer.committed.fetch_add(1, Ordering::SeqCst);
                    let report = (user_id.to_owned(), answer.version, at_ms);
                    let _ = writer.reports.send(report);
                    Reply::json(
                        200,
                        json!({"committed": true, "zone": writer.zone, "version": answer.version, "write_id": write_id}),
                    )
                }
                Err(e) => {
                    *db = None;
                    Reply::error(500, "database", &e.to_string())
                }
            }
        }
        WriteRoute::Forward { zone, headers, .. } => {
            drop(scope);
            match writer.peers.get(&zone) {
                Some(peer) => {
                    writer.forwarded.fetch_add(1, Ordering::SeqCst);
                    forward(writer, peer, &headers, &request.body)
                }
                None => misrouted(&answer.owner_zone, answer.version, "no writer known there"),
            }
        }
        WriteRoute::Refuse { status: 421, detail, .. } => {
            misrouted(&answer.owner_zone, answer.version, &detail)
        }
        WriteRoute::Refuse { status, retry_after, detail } => {
            let retry_ms = retry_after.unwrap_or_default().as_millis() as u64;
            let mut reply = Reply::json(
                status,
                json!({"error": answer.check.as_str(), "detail": detail, "retry_after_ms": retry_ms}),
            );
            // Retry-After is in whole seconds; the body has the milliseconds.
            reply.headers.push(("Retry-After", retry_ms.div_ceil(1000).max(1).to_string()));
            reply
        }
    }
}

/// The write contract over HTTP, with no scope of its own: `GET /v1/write-check` on the zone's
/// edge, then commit within the `commit_within_ms` an `owned` answer names (the edge holds its
/// acknowledgement of the next freeze that long), forward a misroute once, refuse the rest.
fn write_checked_by_edge(
    writer: &Writer,
    edge: &str,
    request: &Request,
    db: &mut Option<postgres::Client>,
    (user_id, write_id, incoming): (&str, i64, Option<u64>),
) -> Reply {
    let mut url =
        format!("{edge}/v1/write-check?user_id={}&zone={}", encode(user_id), encode(&writer.zone));
    if let Some(version) = incoming {
        url.push_str(&format!("&version={version}"));
    }
    let call =
        writer.forwarder.get(&url).header("Authorization", &format!("Bearer {}", writer.token));
    let (status, answer) = match call.call() {
        Ok(mut response) => (
            response.status().as_u16(),
            response.body_mut().read_json::<Value>().unwrap_or(Value::Null),
        ),
        Err(e) => return Reply::error(502, "edge_unreachable", &format!("{edge}: {e}")),
    };
    let version = answer["version"].as_u64().unwrap_or(0);
    match status {
        200 if answer["answer"] == "owned" => {
            match commit(writer, db, write_id, user_id, version) {
                Ok(at_ms) => {
                    writer.committed.fetch_add(1, Ordering::SeqCst);
                    let _ = writer.reports.send((user_id.to_owned(), version, at_ms));
                    Reply::json(
                        200,
                        json!({"committed": true, "zone": writer.zone, "version": version, "write_id": write_id}),
                    )
                }
                Err(e) => {
                    *db = None;
                    Reply::error(500, "database", &e.to_string())
                }
            }
        }
        421 => {
            let owner = answer["owner_zone"].as_str().unwrap_or_default().to_owned();
            let detail = answer["detail"].as_str().unwrap_or("misrouted").to_owned();
            match writer.peers.get(&owner) {
                Some(peer) if request.header(HOP_HEADER).is_none() => {
                    writer.forwarded.fetch_add(1, Ordering::SeqCst);
                    let headers =
                        [(HOP_HEADER, "1".to_owned()), (VERSION_HEADER, version.to_string())];
                    forward(writer, peer, &headers, &request.body)
                }
                _ => misrouted(&owner, version, &detail),
            }
        }
        _ => {
            let retry_ms = answer["retry_after_ms"].as_u64().unwrap_or(250);
            let error = answer["error"].as_str().unwrap_or("edge_refused");
            let detail = answer["detail"].as_str().unwrap_or("the edge refused the write check");
            let mut reply = Reply::error(status.max(400), error, detail);
            if let Some(retry) = answer["retry_after_ms"].as_u64() {
                reply.body = json!({"error": error, "detail": detail, "retry_after_ms": retry})
                    .to_string()
                    .into_bytes();
            }
            reply.headers.push(("Retry-After", retry_ms.div_ceil(1000).max(1).to_string()));
            reply
        }
    }
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn commit(
    writer: &Writer,
    db: &mut Option<postgres::Client>,
    write_id: i64,
    user_id: &str,
    version: u64,
) -> Result<u64, postgres::Error> {
    if db.is_none() {
        *db = Some(postgres::Client::connect(&writer.database_url, postgres::NoTls)?);
    }
    // A slow commit (`SLOW_COMMITS`): the time between the check and the row is what a
    // write scope must cover.
    let mix = (write_id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
    if mix % 100 < writer.slow_percent {
        std::thread::sleep(Duration::from_millis(200 + (mix >> 8) % 601));
    }
    let client = db.as_mut().unwrap();
    let row = client.query_one(INSERT, &[&write_id, &user_id, &writer.zone, &(version as i64)])?;
    Ok(row.get::<_, i64>(0) as u64)
}

fn misrouted(owner_zone: &str, version: u64, detail: &str) -> Reply {
    Reply::json(
        421,
        json!({"error": "misrouted", "detail": detail, "owner_zone": owner_zone, "version": version}),
    )
}

/// Sends the write once to the owner zone's writer with the hop header, and relays its answer.
fn forward(writer: &Writer, peer: &str, headers: &[(&str, String)], body: &[u8]) -> Reply {
    let mut call = writer.forwarder.post(&format!("{peer}/write"));
    for (name, value) in headers {
        call = call.header(*name, value);
    }
    match call.header("Content-Type", "application/json").send(body) {
        Ok(mut response) => {
            let status = response.status().as_u16();
            let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok());
            let retry = retry.map(str::to_owned);
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let mut reply = Reply { status, headers: Vec::new(), body: text.into_bytes() };
            if let Some(retry) = retry {
                reply.headers.push(("Retry-After", retry));
            }
            reply
        }
        Err(e) => Reply::error(502, "forward_failed", &format!("forwarding to {peer}: {e}")),
    }
}

/// Sends the committed writes to `POST /v1/writes` every 20 ms, at most 1000 per report.
fn report_loop(
    receiver: &Receiver<(String, u64, u64)>,
    agent: &ureq::Agent,
    coordinator: &str,
    token: &str,
    zone: &str,
    reported: &AtomicU64,
) {
    let url = format!("{}/v1/writes", coordinator.split(',').next().unwrap_or(coordinator));
    let mut pending: Vec<(String, u64, u64)> = Vec::new();
    loop {
        let deadline = Instant::now() + Duration::from_millis(20);
        while pending.len() < 1000 {
            match receiver.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(write) => pending.push(write),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        if pending.is_empty() {
            continue;
        }
        let writes: Vec<Value> = pending
            .iter()
            .map(|(user, version, at_ms)| {
                json!({"user_id": user, "zone": zone, "version": version, "at_ms": at_ms})
            })
            .collect();
        let sent = agent
            .post(&url)
            .header("Authorization", &format!("Bearer {token}"))
            // No `service`: a service token reports under its own identity.
            .send_json(json!({"writes": writes}));
        match sent {
            Ok(response) if response.status().is_success() => {
                reported.fetch_add(pending.len() as u64, Ordering::SeqCst);
                pending.clear();
            }
            // Kept and sent again with the next report.
            Ok(response) => eprintln!("zone_writer: POST /v1/writes got {}", response.status()),
            Err(e) => eprintln!("zone_writer: POST /v1/writes failed: {e}"),
        }
    }
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    let path = target.split('?').next().unwrap_or("").to_owned();
    Some(Request { method, path, headers, body })
}

struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply { status, headers: Vec::new(), body: body.to_string().into_bytes() }
    }

    /// Every refusal is `{"error", "detail"}` with a 4xx or 5xx status.
    fn error(status: u16, error: &str, detail: &str) -> Reply {
        Reply::json(status, json!({"error": error, "detail": detail}))
    }

    fn bytes(&self) -> Vec<u8> {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            421 => "Misdirected Request",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        };
        let mut head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            self.status,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}
