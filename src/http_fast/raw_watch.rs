//! A connection whose first request is `GET /v1/routing/watch` is served without hyper: the
//! request head is parsed (httparse, the parser hyper uses) from a peek, the answer head written
//! by hand, and the shared frames written to the socket as chunks from the stream's own task.
//! hyper keeps two 8 KB buffers per connection for as long as it lives; a watch stream lives for
//! hours and needs neither, so this is what takes a stream from ~16 KB to a few.
//!
//! Anything else (another first request, a head that does not fit the peek, a parse error) is
//! handed back untouched, and hyper serves it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::respond::COMMON;
use super::watch::{Opened, Source};
use crate::service::connections::Ticket;
use crate::service::tag_answer::Failure;
use crate::telemetry;

const PREFIX: &[u8] = b"GET /v1/routing/watch";
/// Room for a watch request's head (a token, a subscriber ID, a few headers).
const PEEK: usize = 2048;

/// Serves the connection if its first request is a watch request; otherwise gives it back.
/// `ticket` is proven once a complete watch head is parsed; the peeks themselves have no deadline
/// of their own, the caller's guard closes a connection whose head never completes. `open` runs
/// the gates with the query, the `Authorization` header and `Last-Event-ID` (the coordinator's
/// `watch::open`, the edge's `edge_watch::open`); `server` names the process in the answer.
pub async fn take<S: Source>(
    mut stream: TcpStream,
    ticket: &Ticket,
    server: &'static str,
    open: impl FnOnce(Option<&str>, Option<&str>, Option<u64>) -> Result<Opened<S>, Failure>,
) -> Option<TcpStream> {
    // On the heap, and dropped before the stream's loop: the task of a stream lives as long as
    // the stream, and is as large as every local it keeps across an await.
    let mut buf = vec![0u8; PEEK];
    let mut waited = 0;
    let head_len = loop {
        let n = stream.peek(&mut buf).await.ok()?;
        let seen = &buf[..n];
        let len = seen.len().min(PREFIX.len());
        if n == 0 || seen[..len] != PREFIX[..len] {
            return Some(stream);
        }
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        // The head came in pieces: wait for the rest, a little, then leave it to hyper.
        if n == PEEK || waited >= 200 {
            return Some(stream);
        }
        waited += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let mut headers = vec![httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(&buf[..head_len]) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Some(stream),
    }
    let path = request.path.unwrap_or("");
    let (path, query) = path.split_once('?').map_or((path, None), |(p, q)| (p, Some(q)));
    if path != "/v1/routing/watch" || request.version != Some(1) {
        return Some(stream);
    }
    ticket.prove();
    let header = |name: &str| {
        request.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    };
    let authorization = match header("authorization").map(std::str::from_utf8) {
        None => None,
        Some(Ok(value)) => Some(value),
        // Not UTF-8: hyper's path answers it (401) like any other refusal.
        Some(Err(_)) => return Some(stream),
    };
    let last_event_id = header("last-event-id")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.trim().parse().ok());
    let opened = open(query, authorization, last_event_id);
    drop(headers);
    drop(buf);
    // The head is ours now: consume it.
    let mut consumed = vec![0u8; head_len];
    stream.read_exact(&mut consumed).await.ok()?;
    drop(consumed);
    let mut opened = match opened {
        Ok(opened) => opened,
        Err(failure) => {
            let _ = refuse(&mut stream, failure, server).await;
            return None;
        }
    };
    let mut head = String::from("HTTP/1.1 200 OK\r\n");
    push_common(&mut head, server, false);
    head.push_str("content-type: text/event-stream\r\ncache-control: no-cache\r\nexpires: 0\r\n");
    head.push_str(&format!(
        "{}: {}\r\n",
        crate::client::sse::HEARTBEAT_HEADER,
        opened.heartbeat_ms()
    ));
    if let Some(lease_ms) = opened.source.lease_ms() {
        head.push_str(&format!("{}: {lease_ms}\r\n", crate::client::sse::LEASE_HEADER));
    }
    head.push_str(&format!("date: {}\r\n", httpdate::fmt_http_date(std::time::SystemTime::now())));
    head.push_str("transfer-encoding: chunked\r\n\r\n");
    stream.write_all(head.as_bytes()).await.ok()?;
    let mut ticker = opened.ticker();
    let mut one = [0u8; 1];
    loop {
        let frame = tokio::select! {
            frame = opened.next(&mut ticker) => frame?,
            // The client closed (or sent something: a watch connection carries nothing more).
            _ = stream.read(&mut one) => return None,
        };
        let bytes = frame.as_ref();
        let mut chunk = Vec::with_capacity(bytes.len() + 12);
        chunk.extend_from_slice(format!("{:x}\r\n", bytes.len()).as_bytes());
        chunk.extend_from_slice(bytes);
        chunk.extend_from_slice(b"\r\n");
        stream.write_all(&chunk).await.ok()?;
    }
}

/// The refusal, as the hyper path renders it, then the connection closes.
async fn refuse(
    stream: &mut TcpStream,
    failure: Failure,
    server: &'static str,
) -> std::io::Result<()> {
    telemetry::count_api_error(failure.code);
    let body = serde_json::to_string(&failure.body()).unwrap_or_default();
    let reason = hyper::StatusCode::from_u16(failure.status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    let mut head = format!("HTTP/1.1 {} {reason}\r\n", failure.status);
    push_common(&mut head, server, true);
    head.push_str(&format!("date: {}\r\n", httpdate::fmt_http_date(std::time::SystemTime::now())));
    head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The headers every answer carries ([`COMMON`]), with `server` naming the process; the JSON
/// content type only when `json` (a stream says its own).
fn push_common(head: &mut String, server: &str, json: bool) {
    for (name, value) in COMMON {
        let value = match name {
            "content-type" if !json => continue,
            "server" => server,
            _ => value,
        };
        head.push_str(&format!("{name}: {value}\r\n"));
    }
}
