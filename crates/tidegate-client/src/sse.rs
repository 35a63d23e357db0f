//! A minimal HTTP/1.1 server-sent-events reader over a `TcpStream`, in clear or in TLS (rustls'
//! `StreamOwned` over the same socket).
//!
//! Why not an HTTP client crate: the watch stream needs a *per-read* timeout (to notice a dead
//! coordinator between heartbeats) and an abortable socket (to stop promptly on drop), on a
//! plain thread so that sync and async services alike can embed the client. A `TcpStream` gives
//! both directly; the protocol subset is small (one GET, chunked transfer, `event/id/data` lines).
//! ureq 3 was evaluated for TLS: it has per-call receive timeouts, but its body reader owns the
//! connection and offers no handle another thread can shut down, so dropping a `Router` would
//! wait up to a whole read timeout. Wrapping the socket in rustls keeps both properties: the
//! read timeout is the socket's, and shutting down a clone of the socket wakes the TLS reader.
//!
//! The read timeout is a bound on *silence*, not on one `read`: the response, and then every
//! next item (an event or a heartbeat comment), must arrive within it of the previous one. Each
//! read under TLS and the chunk decoder waits only for what is left of that bound, so a
//! coordinator that trickles bytes without completing an item is judged stalled too. The error
//! is [`io::ErrorKind::TimedOut`] (see [`is_silence`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

/// `http://host:port` or `https://host:port` split into its parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// `https://`: speak TLS and verify the server's certificate.
    pub tls: bool,
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (rest, tls) = if let Some(rest) = url.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(format!("`{url}` must start with http:// or https://"));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        let (host, port) = match authority.rsplit_once(':').filter(|(_, p)| !p.ends_with(']')) {
            Some((host, port)) => {
                (host, port.parse::<u16>().map_err(|_| format!("bad port in `{url}`"))?)
            }
            None => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(format!("no host in `{url}`"));
        }
        Ok(Endpoint { host: host.trim_matches(['[', ']']).to_owned(), port, tls })
    }

    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// One server-sent event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// What the reader produced: an event, or a comment line (heartbeats are comments).
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    Event(SseEvent),
    Comment,
    /// A heartbeat that confirms the table current as of this time on the coordinator's clock
    /// (`:heartbeat c=<ms>`, `tidegate_core::lease`).
    Confirmation(u64),
}

/// When the next item is due, shared by the [`EventReader`] (which moves it on at every item) and
/// the socket under it (whose reads wait only until then). The bound can grow once, when the
/// server announces a heartbeat interval the caller's bound would not cover.
#[derive(Clone, Debug)]
struct Deadline {
    at: Arc<Mutex<(Instant, Duration)>>,
}

impl Deadline {
    fn new(bound: Duration) -> Deadline {
        Deadline { at: Arc::new(Mutex::new((Instant::now() + bound, bound))) }
    }

    fn bound(&self) -> Duration {
        self.at.lock().unwrap_or_else(PoisonError::into_inner).1
    }

    fn set_bound(&self, bound: Duration) {
        self.at.lock().unwrap_or_else(PoisonError::into_inner).1 = bound;
    }

    fn restart(&self) {
        let mut at = self.at.lock().unwrap_or_else(PoisonError::into_inner);
        at.0 = Instant::now() + at.1;
    }

    fn left(&self) -> Duration {
        self.at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .saturating_duration_since(Instant::now())
    }

    fn silence(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no event or heartbeat within {:?}", self.bound()),
        )
    }
}

/// The response header in which a coordinator's watch stream announces its heartbeat interval
/// in milliseconds (`[subscribers] heartbeat`).
pub const HEARTBEAT_HEADER: &str = "x-tidegate-heartbeat-ms";

/// The response header in which a watch stream announces the table lease in milliseconds
/// (`[subscribers] lease`): the stream's heartbeats confirm the table, and a copy not confirmed
/// for that long answers `unconfirmed` to write checks. Absent from older coordinators.
pub const LEASE_HEADER: &str = "x-tidegate-lease-ms";

/// How much longer than the server's heartbeat interval the stall bound must be at least: a
/// bound closer to the interval would leave a healthy coordinator between two heartbeats.
pub const HEARTBEAT_MARGIN: Duration = Duration::from_secs(1);

/// The stall bound for a server that announced `heartbeat`: the caller's `bound`, raised to
/// `heartbeat + HEARTBEAT_MARGIN` when it is shorter (a bound tighter than the server's
/// heartbeat would call every quiet coordinator hung).
pub fn stall_bound(bound: Duration, heartbeat: Option<Duration>) -> Duration {
    match heartbeat {
        Some(heartbeat) => bound.max(heartbeat + HEARTBEAT_MARGIN),
        None => bound,
    }
}

/// Whether an error of [`open`] or [`EventReader::next_item`] means the server fell silent for
/// longer than the read timeout (a hung coordinator), rather than closing or refusing.
pub fn is_silence(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

/// The socket under the stream (and under TLS): every read waits at most until the deadline.
struct Timed {
    stream: TcpStream,
    deadline: Deadline,
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.left();
        if left.is_zero() {
            return Err(self.deadline.silence());
        }
        self.stream.set_read_timeout(Some(left))?;
        match self.stream.read(buf) {
            Err(e) if is_silence(&e) => Err(self.deadline.silence()),
            other => other,
        }
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Opens the stream: connects (with TLS when `endpoint.tls`, trusting `tls`), sends the GET and
/// checks for `200`. Returns the socket (a clone, kept by the caller to abort the read from
/// another thread) and the event reader. `read_timeout` bounds the wait for the response, and
/// then for each next item after the previous one (see the module's documentation).
pub fn open(
    endpoint: &Endpoint,
    tls: Option<&Arc<rustls::ClientConfig>>,
    path_and_query: &str,
    headers: &[(&str, String)],
    connect_timeout: Duration,
    read_timeout: Duration,
) -> io::Result<(TcpStream, EventReader)> {
    let address = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address"))?;
    let stream = TcpStream::connect_timeout(&address, connect_timeout)?;
    let read_timeout = read_timeout.max(Duration::from_millis(1));
    stream.set_read_timeout(Some(read_timeout))?;
    stream.set_write_timeout(Some(read_timeout))?;
    stream.set_nodelay(true)?;
    let deadline = Deadline::new(read_timeout);
    let mut request = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {}:{}\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n",
        endpoint.host, endpoint.port
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let abort = stream.try_clone()?;
    let stream = Timed { stream, deadline: deadline.clone() };
    let transport: Box<dyn Read + Send> = if endpoint.tls {
        let config = tls.ok_or_else(|| io::Error::other("https:// needs a TLS configuration"))?;
        let name = ServerName::try_from(endpoint.host.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let connection = rustls::ClientConnection::new(Arc::clone(config), name)
            .map_err(|e| io::Error::other(e.to_string()))?;
        // The handshake (and the certificate check) happens in this first write.
        let mut tls_stream = rustls::StreamOwned::new(connection, stream);
        tls_stream.write_all(request.as_bytes())?;
        tls_stream.flush()?;
        Box::new(tls_stream)
    } else {
        let mut stream = stream;
        stream.write_all(request.as_bytes())?;
        Box::new(stream)
    };
    let mut reader = BufReader::new(transport);
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status = status_line.split_whitespace().nth(1).unwrap_or("");
    let mut chunked = false;
    let mut error_body_len = 0usize;
    let mut heartbeat = None;
    let mut lease = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed in headers",
            ));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
            if name == "content-length" {
                error_body_len = value.parse().unwrap_or(0);
            }
            if name == HEARTBEAT_HEADER {
                heartbeat = value.parse::<u64>().ok().map(Duration::from_millis);
            }
            if name == LEASE_HEADER {
                lease = value.parse::<u64>().ok().map(Duration::from_millis);
            }
        }
    }
    if status != "200" {
        let mut body = vec![0u8; error_body_len.min(4096)];
        let _ = reader.read_exact(&mut body);
        return Err(io::Error::other(format!(
            "watch answered {}: {}",
            status_line.trim(),
            String::from_utf8_lossy(&body)
        )));
    }
    let body: Box<dyn BufRead + Send> = if chunked {
        Box::new(BufReader::new(Chunked { inner: reader, left: 0, done: false }))
    } else {
        Box::new(reader)
    };
    // The first item is due one bound after the answer; the bound is the server's heartbeat plus
    // a margin when the caller's is shorter than that.
    deadline.set_bound(stall_bound(read_timeout, heartbeat));
    deadline.restart();
    Ok((abort, EventReader { body, deadline: Some(deadline), heartbeat, lease }))
}

/// Reads `text/event-stream` items.
pub struct EventReader {
    body: Box<dyn BufRead + Send>,
    /// Over a socket: when the next item is due (moved on at every item).
    deadline: Option<Deadline>,
    /// The heartbeat interval the server announced in [`HEARTBEAT_HEADER`], if it did.
    heartbeat: Option<Duration>,
    /// The table lease the server announced in [`LEASE_HEADER`], if it did.
    lease: Option<Duration>,
}

impl EventReader {
    /// A reader over bytes already received (`chunked`: the body is `Transfer-Encoding:
    /// chunked`): the parser without a socket, the SSE fuzz target's entry point.
    pub fn from_bytes(bytes: Vec<u8>, chunked: bool) -> EventReader {
        let inner = BufReader::new(io::Cursor::new(bytes));
        let body: Box<dyn BufRead + Send> = if chunked {
            Box::new(BufReader::new(Chunked { inner, left: 0, done: false }))
        } else {
            Box::new(inner)
        };
        EventReader { body, deadline: None, heartbeat: None, lease: None }
    }

    /// The table lease the server announced (`x-tidegate-lease-ms`), if it did.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// The heartbeat interval the server announced (`x-tidegate-heartbeat-ms`), if it did.
    pub fn heartbeat(&self) -> Option<Duration> {
        self.heartbeat
    }

    /// The stall bound in force: the caller's, or the server's heartbeat plus a margin when
    /// that is longer (see [`stall_bound`]). `None` for a reader without a socket.
    pub fn bound(&self) -> Option<Duration> {
        self.deadline.as_ref().map(Deadline::bound)
    }

    /// The next event or comment; `Ok(None)` when the server closed the stream. Over a socket,
    /// an error of kind `TimedOut` when it did not arrive within the read timeout of the
    /// previous one (or of the answer).
    pub fn next_item(&mut self) -> io::Result<Option<Item>> {
        let item = self.read_item()?;
        if let Some(deadline) = &self.deadline
            && item.is_some()
        {
            deadline.restart();
        }
        Ok(item)
    }

    fn read_item(&mut self) -> io::Result<Option<Item>> {
        let mut event = SseEvent::default();
        let mut has_field = false;
        loop {
            let mut line = String::new();
            if self.body.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if has_field {
                    return Ok(Some(Item::Event(event)));
                }
                continue;
            }
            if line.starts_with(':') {
                if !has_field {
                    return Ok(Some(match tidegate_core::lease::parse_confirmation(line) {
                        Some(confirmed_at_ms) => Item::Confirmation(confirmed_at_ms),
                        None => Item::Comment,
                    }));
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            has_field = true;
            match field {
                "event" => event.event = value.to_owned(),
                "id" => event.id = Some(value.to_owned()),
                "data" => {
                    if !event.data.is_empty() {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                }
                _ => {}
            }
        }
    }
}

/// `Transfer-Encoding: chunked` decoding.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut size_line = String::new();
            // Skip the CRLF that ends the previous chunk, if any.
            while size_line.trim().is_empty() {
                size_line.clear();
                if self.inner.read_line(&mut size_line)? == 0 {
                    return Ok(0);
                }
            }
            let size = size_line.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let n = {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                return Ok(0);
            }
            let n = available.len().min(buf.len()).min(self.left);
            buf[..n].copy_from_slice(&available[..n]);
            n
        };
        self.inner.consume(n);
        self.left -= n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_comments_and_chunks() {
        let payload = ": hello\n\nid: 7\nevent: routing\ndata: {\"a\":\ndata: 1}\n\n";
        let chunked = format!(
            "5\r\n{}\r\n{:x}\r\n{}\r\n0\r\n\r\n",
            &payload[..5],
            payload.len() - 5,
            &payload[5..]
        );
        let inner = BufReader::new(io::Cursor::new(chunked.into_bytes()));
        let mut reader = EventReader {
            body: Box::new(BufReader::new(Chunked { inner, left: 0, done: false })),
            deadline: None,
            heartbeat: None,
            lease: None,
        };
        assert_eq!(reader.next_item().unwrap(), Some(Item::Comment));
        let Some(Item::Event(e)) = reader.next_item().unwrap() else { panic!("an event") };
        assert_eq!(
            (e.event.as_str(), e.id.as_deref(), e.data.as_str()),
            ("routing", Some("7"), "{\"a\":\n1}")
        );
        assert_eq!(reader.next_item().unwrap(), None);
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:8080/").unwrap(),
            Endpoint { host: "127.0.0.1".into(), port: 8080, tls: false }
        );
        assert_eq!(Endpoint::parse("http://coordinator").unwrap().port, 80);
        let secure = Endpoint::parse("https://coordinator").unwrap();
        assert_eq!((secure.port, secure.tls), (443, true));
        assert_eq!(secure.base_url(), "https://coordinator:443");
        assert_eq!(Endpoint::parse("https://[::1]:8443").unwrap().host, "::1");
        assert_eq!(Endpoint::parse("https://[::1]").unwrap().port, 443);
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://:80").is_err());
    }

    #[test]
    fn a_server_that_trickles_bytes_without_an_item_is_judged_silent_within_the_bound() {
        use std::time::Instant;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n:hb\n\n";
            stream.write_all(head.as_bytes()).unwrap();
            // A byte every 50 ms, never a complete item: each read succeeds, the item never comes.
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(50));
                if stream.write_all(b"x").is_err() {
                    return;
                }
            }
        });
        let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let bound = Duration::from_millis(300);
        let (_socket, mut reader) =
            open(&endpoint, None, "/", &[], Duration::from_secs(1), bound).unwrap();
        assert_eq!(reader.next_item().unwrap(), Some(Item::Comment));
        let started = Instant::now();
        let err = reader.next_item().unwrap_err();
        let waited = started.elapsed();
        assert!(is_silence(&err), "{err}");
        assert!(err.to_string().contains("no event or heartbeat within"), "{err}");
        assert!(waited >= bound - Duration::from_millis(20) && waited < bound * 2, "{waited:?}");
    }

    /// A server that sends a heartbeat comment every `every`, announcing `announced` (ms) in
    /// `x-tidegate-heartbeat-ms` when given. Returns its port.
    fn heartbeating_server(every: Duration, announced: Option<u64>) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let mut head = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n");
            if let Some(ms) = announced {
                head.push_str(&format!("{HEARTBEAT_HEADER}: {ms}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).unwrap();
            for _ in 0..4 {
                std::thread::sleep(every);
                if stream.write_all(b":heartbeat\n\n").is_err() {
                    return;
                }
            }
        });
        port
    }

    #[test]
    fn the_bound_grows_to_the_heartbeat_the_server_announces_and_only_then() {
        let endpoint = |port| Endpoint::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let bound = Duration::from_millis(200);
        let every = Duration::from_millis(400);
        // Announced: the bound becomes 400 ms + 1 s, and heartbeats 400 ms apart all arrive.
        let port = heartbeating_server(every, Some(400));
        let (_socket, mut reader) =
            open(&endpoint(port), None, "/", &[], Duration::from_secs(1), bound).unwrap();
        assert_eq!(reader.heartbeat(), Some(every));
        assert_eq!(reader.bound(), Some(every + HEARTBEAT_MARGIN));
        for _ in 0..3 {
            assert_eq!(reader.next_item().unwrap(), Some(Item::Comment));
        }
        // Control: the same server without the header is judged silent at the caller's bound.
        let port = heartbeating_server(every, None);
        let (_socket, mut reader) =
            open(&endpoint(port), None, "/", &[], Duration::from_secs(1), bound).unwrap();
        assert_eq!((reader.heartbeat(), reader.bound()), (None, Some(bound)));
        assert!(is_silence(&reader.next_item().unwrap_err()));
        // A bound already longer than the heartbeat is kept.
        assert_eq!(
            stall_bound(Duration::from_secs(8), Some(Duration::from_secs(5))),
            Duration::from_secs(8)
        );
        assert_eq!(
            stall_bound(Duration::from_secs(3), Some(Duration::from_secs(5))),
            Duration::from_secs(6)
        );
    }
}
