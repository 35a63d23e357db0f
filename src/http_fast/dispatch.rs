//! The main port as one dispatcher (`[server] fast_path`, the default): it accepts every
//! connection, reads the first request head from a peek, and serves the tag
//! path (`GET`/`HEAD`/`POST /v1/tag`, `GET /v1/routing/watch`, `POST /v1/subscribers/<id>/ack`,
//! without a cookie) on hyper here, as the fast listener does; every other connection is handed,
//! untouched (nothing was read from it), to Rocket ([`Handed::Socket`]). A later request on a
//! tag-path connection that is not on the tag path goes to Rocket over an in-memory pipe
//! ([`to_rocket`]), so a client may mix both on one kept-alive connection. With TLS
//! (`[server.tls]`, `[edge.tls]`) the dispatcher terminates it first ([`super::tls`]): the head
//! is read from the decrypted stream instead of peeked, and Rocket gets the decrypted
//! connection with those bytes in front ([`Handed::Tls`]).
//!
//! Why one port (issue 27): out of the box, services used the Rocket port, at 0.4-0.7x a bare
//! hyper server, and the fast path needed a second port that every client had to know about.
//!
//! Architecture invariant: like the rest of `http_fast`, this module knows hyper and tokio,
//! never Rocket; `http::dispatch` adapts [`Handed`] to Rocket's listener.

use std::io;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

use super::Fast;
use super::tls::{self, Rewound, TlsConn};
use crate::service::connections::Ticket;
use crate::service::tag_answer::Failure;

/// Where connections for Rocket go.
pub type Handoff = mpsc::UnboundedSender<Handed>;

/// A connection handed to Rocket.
pub enum Handed {
    /// A client's socket, with nothing read from it yet. Its admission ticket lives as long as
    /// the connection (Rocket's own guard times it out when idle; dropping it releases the slot).
    Socket { stream: TcpStream, peer: Option<SocketAddr>, _ticket: Arc<Ticket> },
    /// A TLS connection, decrypted, with the bytes the dispatcher read from it in front.
    Tls { stream: Box<Rewound<TlsConn>>, peer: Option<SocketAddr>, _ticket: Arc<Ticket> },
    /// Rocket's end of a pipe carrying one request that arrived on a tag-path connection.
    Pipe(DuplexStream),
}

impl Handed {
    pub fn peer(&self) -> Option<SocketAddr> {
        match self {
            Handed::Socket { peer, .. } | Handed::Tls { peer, .. } => *peer,
            Handed::Pipe(_) => None,
        }
    }

    pub fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Handed::Socket { stream, .. } => stream.set_nodelay(true),
            Handed::Tls { stream, .. } => stream.get_ref().get_ref().0.set_nodelay(true),
            Handed::Pipe(_) => Ok(()),
        }
    }
}

impl AsyncRead for Handed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Handed::Socket { stream, .. } => Pin::new(stream).poll_read(cx, buf),
            Handed::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Handed::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Handed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Handed::Socket { stream, .. } => Pin::new(stream).poll_write(cx, buf),
            Handed::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Handed::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Handed::Socket { stream, .. } => Pin::new(stream).poll_write_vectored(cx, bufs),
            Handed::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
            Handed::Pipe(pipe) => Pin::new(pipe).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Handed::Socket { stream, .. } => stream.is_write_vectored(),
            Handed::Tls { stream, .. } => stream.is_write_vectored(),
            Handed::Pipe(pipe) => pipe.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Handed::Socket { stream, .. } => Pin::new(stream).poll_flush(cx),
            Handed::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_flush(cx),
            Handed::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Handed::Socket { stream, .. } => Pin::new(stream).poll_shutdown(cx),
            Handed::Tls { stream, .. } => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Handed::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
        }
    }
}

/// The bound public port, not yet serving.
pub struct Dispatcher<A> {
    listener: StdListener,
    app: Arc<A>,
    /// With TLS: terminated here, before the first request is read.
    tls: Option<TlsAcceptor>,
}

impl<A: Fast> Dispatcher<A> {
    /// Binds `at` now (a port in use fails start-up naming `key`, the port's setting).
    /// `app.handoff()` must be set: it is where Rocket's connections go. With `tls` the port
    /// speaks HTTPS only.
    pub fn bind(
        app: A,
        at: SocketAddr,
        key: &str,
        tls: Option<TlsAcceptor>,
    ) -> Result<Dispatcher<A>, String> {
        assert!(app.handoff().is_some(), "a dispatcher needs somewhere to hand connections");
        let listener = StdListener::bind(at)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("{key}: cannot listen on {at}: {e}"))?;
        Ok(Dispatcher { listener, app: Arc::new(app), tls })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until the runtime stops: each is admitted by the connection guard,
    /// then served here or handed to Rocket by its first request.
    pub async fn serve(self) {
        match self.tls {
            None => super::accept_admitted(self.listener, self.app, "the main port", route).await,
            Some(tls) => {
                let route = move |app, stream, peer, ticket| {
                    route_tls(app, stream, peer, ticket, tls.clone())
                };
                super::accept_admitted(self.listener, self.app, "the main port", route).await;
            }
        }
    }
}

/// Where a connection's first request goes.
#[derive(Debug, PartialEq, Eq)]
enum First {
    TagPath,
    Rocket,
}

async fn route<A: Fast>(app: Arc<A>, stream: TcpStream, peer: SocketAddr, ticket: Arc<Ticket>) {
    match first_request(&*app, &stream).await {
        None => {}
        Some(First::TagPath) => {
            let _ = stream.set_nodelay(true);
            super::serve_connection(app, stream, ticket).await;
        }
        Some(First::Rocket) => {
            // Rocket's guard takes over the timeouts; this ticket only holds the slot.
            ticket.prove();
            let handed = Handed::Socket { stream, peer: Some(peer), _ticket: ticket };
            if let Some(handoff) = app.handoff() {
                // Rocket has stopped when this fails: dropping the connection closes it.
                let _ = handoff.send(handed);
            }
        }
    }
}

/// A TLS connection: the handshake, then the first request head read (not peeked) from the
/// decrypted stream, then served here or handed to Rocket with what was read in front. A client
/// that chose HTTP/2 by ALPN is Rocket's at once.
async fn route_tls<A: Fast>(
    app: Arc<A>,
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Arc<Ticket>,
    acceptor: TlsAcceptor,
) {
    let _ = stream.set_nodelay(true);
    // A failed handshake (a plain-HTTP client, an untrusted certificate) is the client's to
    // report: rustls already sent the alert.
    let Ok(mut conn) = acceptor.accept(stream).await else { return };
    let mut head = Vec::new();
    let first = if tls::negotiated_h2(&conn) {
        First::Rocket
    } else {
        let judged = tls::read_head(&mut conn, &mut head, PEEK, |seen| match judge(&*app, seen) {
            Judged::Partial => None,
            Judged::Goes(first) => Some(first),
        })
        .await;
        match judged {
            Ok(Some(first)) => first,
            // Too long a head: Rocket answers it as it always did.
            Ok(None) if head.len() >= PEEK => First::Rocket,
            Ok(None) | Err(_) => return,
        }
    };
    let stream = Rewound::new(head, conn);
    match first {
        First::TagPath => Box::pin(super::serve_http(app, stream, ticket)).await,
        First::Rocket => {
            ticket.prove();
            let handed =
                Handed::Tls { stream: Box::new(stream), peer: Some(peer), _ticket: ticket };
            if let Some(handoff) = app.handoff() {
                let _ = handoff.send(handed);
            }
        }
    }
}

/// Room for the first request's head; a longer head goes to Rocket.
const PEEK: usize = 8192;

/// What the bytes seen so far say about the first request.
enum Judged {
    /// Not a whole head yet.
    Partial,
    Goes(First),
}

/// Judges the first bytes of a connection: a whole HTTP/1 head goes where [`classify`] says,
/// anything that is not HTTP/1 goes to Rocket.
fn judge(app: &impl Fast, seen: &[u8]) -> Judged {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(seen) {
        Ok(httparse::Status::Complete(_)) => Judged::Goes(classify(app, &request)),
        Ok(httparse::Status::Partial) => Judged::Partial,
        // Not HTTP/1 (or too many headers): Rocket answers it as it always did.
        Err(_) => Judged::Goes(First::Rocket),
    }
}

/// Reads the first request head from peeks (nothing is consumed) and says where it goes;
/// `None` when the connection ends before a head.
async fn first_request(app: &impl Fast, stream: &TcpStream) -> Option<First> {
    let mut buf = vec![0u8; PEEK];
    let mut pause = Duration::from_millis(1);
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        match judge(app, &buf[..n]) {
            Judged::Goes(first) => return Some(first),
            // The head came in pieces: peek again once more has arrived. (A peek returns at once
            // while unread bytes wait, so pause, a little longer each time; the guard closes a
            // connection whose head never completes.)
            Judged::Partial if n < PEEK => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            // Too long: Rocket answers it as it always did.
            Judged::Partial => return Some(First::Rocket),
        }
    }
}

/// What the app serves ([`Fast::serves`]), over HTTP/1.1; the rest goes to Rocket.
fn classify(app: &impl Fast, request: &httparse::Request<'_, '_>) -> First {
    if request.version != Some(1) {
        return First::Rocket;
    }
    let cookie = request.headers.iter().any(|h| h.name.eq_ignore_ascii_case("cookie"));
    let path = request.path.unwrap_or("");
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    if app.serves(request.method.unwrap_or(""), path, cookie) {
        First::TagPath
    } else {
        First::Rocket
    }
}

/// The requests the coordinator's fast path answers.
pub fn is_tag_path(method: &str, path: &str) -> bool {
    match method {
        "GET" | "HEAD" => path == "/v1/tag" || (method == "GET" && path == "/v1/routing/watch"),
        "POST" => {
            path == "/v1/tag"
                || path
                    .strip_prefix("/v1/subscribers/")
                    .and_then(|rest| rest.strip_suffix("/ack"))
                    .is_some_and(|id| !id.is_empty() && !id.contains('/'))
        }
        _ => false,
    }
}

/// One request that arrived on a tag-path connection but is not on the tag path: sent to
/// Rocket over an in-memory pipe, its answer read whole (no Rocket route streams but the watch,
/// which is on the tag path).
pub async fn to_rocket(
    handoff: &Handoff,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Failure> {
    // Rocket runs in this process: it fails to answer only while it stops, or on a fault.
    let unavailable = |why: String| {
        Failure::new(500, "internal", format!("the API behind this port did not answer: {why}"))
    };
    let (ours, rockets) = tokio::io::duplex(64 * 1024);
    handoff.send(Handed::Pipe(rockets)).map_err(|_| unavailable("it has stopped".into()))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(ours))
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    tokio::spawn(connection);
    let response = sender.send_request(request).await.map_err(|e| unavailable(e.to_string()))?;
    let (mut parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| unavailable(e.to_string()))?.to_bytes();
    // The body is whole now: its length replaces any transfer coding of the pipe's answer.
    parts.headers.remove(hyper::header::TRANSFER_ENCODING);
    parts.headers.remove(hyper::header::CONNECTION);
    Ok(Response::from_parts(parts, Full::new(body)))
}

#[cfg(test)]
mod tests {
    use super::is_tag_path;

    #[test]
    fn the_tag_path_is_tags_watch_streams_and_acks() {
        for (method, path, fast) in [
            ("GET", "/v1/tag", true),
            ("HEAD", "/v1/tag", true),
            ("POST", "/v1/tag", true),
            ("GET", "/v1/routing/watch", true),
            ("HEAD", "/v1/routing/watch", false),
            ("POST", "/v1/subscribers/gw-1/ack", true),
            ("POST", "/v1/subscribers//ack", false),
            ("POST", "/v1/subscribers/a/b/ack", false),
            ("GET", "/v1/subscribers/gw-1/ack", false),
            ("PUT", "/v1/tag", false),
            ("GET", "/v1/routing", false),
            ("GET", "/v1/tags", false),
            ("GET", "/", false),
        ] {
            assert_eq!(is_tag_path(method, path), fast, "{method} {path}");
        }
    }
}
