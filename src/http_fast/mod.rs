//! The fast tag listener: `[server] fast_port` served by hyper directly, without Rocket.
//!
//! It answers `GET /v1/tag` and `POST /v1/tag`, with the bodies, headers and errors of the
//! Rocket routes (both build them with `service::tag_answer`, and check bearer tokens with
//! `service::bearer`), and `GET /v1/routing/watch` (the same events and subscriber registry as
//! the main port's stream, at a fraction of its memory per stream) with its acknowledgements
//! (`POST /v1/subscribers/<id>/ack`, the same writer gate, registry call and answers; bearer
//! tokens only, no UI session cookies); everything else is a 404
//! naming the main port. It exists because Rocket's
//! own per-request cost (a spawned task per request, two header-map conversions, its response
//! building) is most of the tag path's CPU (docs/src/perf-tag-profile.md). Plain HTTP only: the
//! configuration refuses `fast_port` together with `[server.tls]`.
//!
//! Architecture invariant: this module knows hyper, never Rocket; it builds no answer itself.

pub mod dispatch;
pub mod edge;
mod edge_watch;
mod raw_watch;
mod respond;
pub mod tls;
mod watch;

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::sync::atomic::AtomicU16;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::config::Config;
use crate::service::connections::{Admission, Guard, Ticket, refuse};
use crate::service::coordinator::Coordinator;
use crate::service::routing_frames::RoutingFrames;
use crate::service::subscribers::Subscribers;
use crate::telemetry::TagCounters;
use std::future::Future;

/// A port served by hyper: the coordinator's tag path ([`Tagger`]) or the edge's
/// ([`edge::EdgeFast`]). The accept loop, the connection and the dispatcher are generic over it.
pub trait Fast: Send + Sync + Sized + 'static {
    /// The port's connection guard.
    fn connections(&self) -> &Arc<Guard>;
    /// Where the requests this path does not serve go (the dispatcher's Rocket); `None` on a
    /// listener of its own, which answers them itself.
    fn handoff(&self) -> Option<&dispatch::Handoff>;
    /// Whether a request with this method and path (and a `Cookie` header, or not) is served here.
    fn serves(&self, method: &str, path: &str, cookie: bool) -> bool;
    /// The answer to one request this path serves.
    fn answer(
        app: Arc<Self>,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<respond::AnyBody>> + Send;
    /// A connection before hyper sees it: given back, or served here (`None`).
    fn take(
        app: &Arc<Self>,
        stream: tokio::net::TcpStream,
        ticket: &Ticket,
    ) -> impl Future<Output = Option<tokio::net::TcpStream>> + Send {
        let _ = (app, ticket);
        std::future::ready(Some(stream))
    }
}

/// What the handlers need: the table, the settings and the tag counters.
pub struct Tagger {
    pub coordinator: Arc<Coordinator>,
    pub config: Arc<Config>,
    pub counters: TagCounters,
    /// The main (Rocket) port, for the 404 detail; filled in when Rocket has bound it.
    pub main_port: Arc<AtomicU16>,
    /// The subscriber registry watch streams register in (the main port's own); `None`
    /// serves no watch streams.
    pub subscribers: Option<Arc<Subscribers>>,
    /// The newest routing event, shared with the main port's streams.
    pub frames: Arc<RoutingFrames>,
    /// The connection guard shared with the main port.
    pub connections: Arc<Guard>,
    /// On the main port (`dispatch`): where the requests that are not on the tag path go.
    /// `None` on the separate fast port, which answers them 404.
    pub handoff: Option<dispatch::Handoff>,
}

impl Fast for Tagger {
    fn connections(&self) -> &Arc<Guard> {
        &self.connections
    }

    fn handoff(&self) -> Option<&dispatch::Handoff> {
        self.handoff.as_ref()
    }

    /// The tag path; a request with a cookie (the UI's session, which only Rocket knows) is
    /// Rocket's.
    fn serves(&self, method: &str, path: &str, cookie: bool) -> bool {
        !cookie && dispatch::is_tag_path(method, path)
    }

    async fn answer(app: Arc<Self>, request: Request<Incoming>) -> Response<respond::AnyBody> {
        respond::answer(&app, request).await
    }

    async fn take(
        app: &Arc<Self>,
        stream: tokio::net::TcpStream,
        ticket: &Ticket,
    ) -> Option<tokio::net::TcpStream> {
        let open = |query: Option<&str>, authorization: Option<&str>, last| {
            watch::open(app, query, authorization, last)
        };
        raw_watch::take(stream, ticket, respond::SERVER, open).await
    }
}

/// The bound fast listener, not yet serving.
pub struct FastListener {
    listener: StdListener,
    tagger: Arc<Tagger>,
}

impl FastListener {
    /// Binds `config.address:port` now, so a port in use fails start-up with the key's name.
    pub fn bind(tagger: Tagger, port: u16) -> Result<FastListener, String> {
        let at = SocketAddr::new(tagger.config.address, port);
        let listener = StdListener::bind(at)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| format!("server.fast_port: cannot listen on {at}: {e}"))?;
        Ok(FastListener { listener, tagger: Arc::new(tagger) })
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Accepts connections until the runtime stops. A connection that opens with a watch
    /// request is served by [`raw_watch`]; the others by hyper's HTTP/1.1 connection state
    /// machine, calling [`respond::answer`] for each request without spawning a task per request.
    pub async fn serve(self) {
        let what = "the fast tag listener";
        accept_admitted(
            self.listener,
            self.tagger,
            what,
            |tagger, stream, _peer, ticket| async move {
                let _ = stream.set_nodelay(true);
                serve_connection(tagger, stream, ticket).await;
            },
        )
        .await;
    }
}

/// Accepts connections on `listener` until the runtime stops. Each is admitted by the guard
/// the listeners share (at the limit the oldest unproven connection is evicted; refused with
/// 503 when every connection is proven), then `serve`d on a task of its own, which is dropped
/// (closing the connection) when the guard evicts it or its head does not complete within the
/// header read timeout. The loop of the fast listener and of the main port's dispatcher.
pub(crate) async fn accept_admitted<A, F, Fut>(
    listener: StdListener,
    app: Arc<A>,
    what: &str,
    serve: F,
) where
    A: Fast,
    F: Fn(Arc<A>, tokio::net::TcpStream, SocketAddr, Arc<Ticket>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!("{what} cannot start: {e}");
            return;
        }
    };
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: wait a little instead of spinning.
            Err(_) => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let ticket = match app.connections().admit_from(Some(peer.ip())) {
            Admission::Admitted(ticket) => Arc::new(ticket),
            Admission::Refused => {
                tokio::spawn(refuse(stream));
                continue;
            }
        };
        let served = serve(Arc::clone(&app), stream, peer, Arc::clone(&ticket));
        tokio::spawn(async move {
            tokio::select! {
                () = served => {}
                _ = ticket.closing() => {}
            }
        });
    }
}

/// One connection: taken by the app (a raw watch stream), or hyper's HTTP/1.1 state machine.
/// A parsed request head proves `ticket`; hyper's header read timer, which starts whenever the
/// connection is idle, is the idle timeout of a kept-alive connection. On a dispatcher, a
/// request the app does not serve goes to Rocket ([`dispatch::to_rocket`]).
async fn serve_connection<A: Fast>(
    app: Arc<A>,
    stream: tokio::net::TcpStream,
    ticket: Arc<Ticket>,
) {
    let Some(stream) = A::take(&app, stream, &ticket).await else { return };
    // Boxed: hyper's connection state is kilobytes, and every connection task is as large as
    // its largest state; a raw watch stream (most of a coordinator's or an edge's connections)
    // never reaches this one.
    Box::pin(serve_http(app, stream, ticket)).await;
}

/// hyper's HTTP/1.1 state machine over `io` (a socket, or a TLS connection), as
/// [`serve_connection`] describes.
async fn serve_http<A: Fast, S>(app: Arc<A>, io: S, ticket: Arc<Ticket>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let idle_timeout = app.connections().limits().idle_timeout;
    let proof = Arc::clone(&ticket);
    let service = service_fn(move |request: Request<Incoming>| {
        proof.prove();
        let app = Arc::clone(&app);
        async move {
            if let Some(handoff) = app.handoff() {
                let cookie = request.headers().contains_key(hyper::header::COOKIE);
                if !app.serves(request.method().as_str(), request.uri().path(), cookie) {
                    let answer = match dispatch::to_rocket(handoff, request).await {
                        Ok(response) => response,
                        Err(failure) => respond::refused(failure),
                    };
                    return Ok::<_, Infallible>(answer.map(http_body_util::Either::Left));
                }
            }
            Ok::<_, Infallible>(A::answer(app, request).await)
        }
    });
    // `pipeline_flush`: answers to pipelined requests (a gateway acknowledging for
    // many subscribers) leave in one write instead of one each.
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(idle_timeout)
        .pipeline_flush(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
    if served.is_err_and(|e| e.is_timeout()) {
        ticket.timed_out();
    }
}
