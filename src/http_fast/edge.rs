//! `tidegate edge` on the fast path (`[edge] fast_path`, the default): its port is a dispatcher
//! that serves `GET`/`HEAD`/`POST /v1/tag` and the gateway check (`/v1/gate`, any of the methods
//! the Rocket routes take) on hyper, and hands everything else to the edge's Rocket. The answers
//! are built by the same functions as the Rocket routes' (`service::tag_answer`,
//! `service::edge::gate`), and `tests/edge_fast.rs` compares them byte for byte.
//!
//! Why: the edge is what gateways (nginx `auth_request`, one subrequest per user request) and
//! services in other languages call, and Rocket's per-request cost was most of its CPU
//! (issue 27: the edge at ~0.6x the coordinator's fast port).

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::Fast;
use super::dispatch::Handoff;
use super::respond::{self, AnyBody};
use crate::service::connections::{Guard, Ticket};
use crate::service::edge::{EdgeApp, GATE_TOKEN_HEADER, GateAnswer, GateRequest};
use crate::service::tag_answer::Answer;

// The edge's `server` header (Rocket's `ident` on the edge).
use super::respond::EDGE_SERVER as SERVER;

/// The edge's state and where the rest of its API goes.
pub struct EdgeFast {
    app: Arc<EdgeApp>,
    handoff: Option<Handoff>,
    /// `[edge] user_header`, parsed once.
    user_header: HeaderName,
}

impl EdgeFast {
    pub fn new(app: Arc<EdgeApp>, handoff: Option<Handoff>) -> EdgeFast {
        // The configuration admits only lowercase letters, digits, `-` and `_`: a valid name.
        let user_header = HeaderName::from_bytes(app.config.edge.user_header.as_bytes())
            .unwrap_or(HeaderName::from_static("x-user-id"));
        EdgeFast { app, handoff, user_header }
    }
}

// The request headers the gate reads, and the answer's, named once (no parse per request).
const GATE_TOKEN: HeaderName = HeaderName::from_static(GATE_TOKEN_HEADER);
const ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
const ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
const DOMAIN: HeaderName = HeaderName::from_static("x-tidegate-domain");
const SERVICE: HeaderName = HeaderName::from_static("x-tidegate-service");
const COLOR: HeaderName = HeaderName::from_static("x-tidegate-color");
const ZONE: HeaderName = HeaderName::from_static("x-tidegate-zone");
const VERSION: HeaderName = HeaderName::from_static("x-tidegate-version");
const SOURCE: HeaderName = HeaderName::from_static("x-tidegate-source");
const CHANNEL: HeaderName = HeaderName::from_static("x-tidegate-channel");
const SIGNATURE: HeaderName = HeaderName::from_static(crate::client::SIGNATURE_HEADER);
const GLOBAL_WRITER: HeaderName = HeaderName::from_static("x-tidegate-global-writer");
const GLOBAL_READ_ONLY: HeaderName = HeaderName::from_static("x-tidegate-global-read-only");

impl Fast for EdgeFast {
    fn connections(&self) -> &Arc<Guard> {
        &self.app.connections
    }

    fn handoff(&self) -> Option<&Handoff> {
        self.handoff.as_ref()
    }

    /// The edge has no sessions: a cookie is the user's (the gate may read the user from it).
    fn serves(&self, method: &str, path: &str, _cookie: bool) -> bool {
        is_edge_path(method, path)
    }

    async fn answer(app: Arc<Self>, request: Request<Incoming>) -> Response<AnyBody> {
        // The fan-out tree: the re-served watch stream and the leaves' acknowledgements.
        if request.method() == Method::GET && request.uri().path() == "/v1/routing/watch" {
            return match super::edge_watch::watch(&app.app, &request) {
                Ok(stream) => stream.map(Either::Right),
                Err(failure) => respond::refused_as(failure, SERVER).map(Either::Left),
            };
        }
        if request.method() == Method::POST
            && let Some(id) = respond::ack_path(request.uri().path())
        {
            let id = id.into_owned();
            let answer = super::edge_watch::ack(&app.app, request, &id).await;
            return answer.unwrap_or_else(|f| respond::refused_as(f, SERVER)).map(Either::Left);
        }
        answer(&app, request).await.map(Either::Left)
    }

    /// A leaf's watch stream, when it is the connection's first request, is served without
    /// hyper (`raw_watch`): a stream lives for hours and needs none of hyper's buffers.
    async fn take(
        app: &Arc<Self>,
        stream: tokio::net::TcpStream,
        ticket: &Ticket,
    ) -> Option<tokio::net::TcpStream> {
        if !app.app.relay.serves {
            return Some(stream);
        }
        let open = |query: Option<&str>, authorization: Option<&str>, last| {
            super::edge_watch::open(&app.app, query, authorization, last)
        };
        super::raw_watch::take(stream, ticket, SERVER, open).await
    }
}

/// The requests the edge's fast path answers: tags, the gateway check under `/v1/gate` with
/// the methods its Rocket routes take (`HEAD` and `OPTIONS` stay Rocket's), and the fan-out
/// tree's watch stream and acknowledgements (which only the fast path serves).
pub fn is_edge_path(method: &str, path: &str) -> bool {
    match method {
        "GET" | "HEAD" | "POST" if path == "/v1/tag" => true,
        "GET" if path == "/v1/routing/watch" => true,
        "POST" if respond::ack_path(path).is_some() => true,
        "GET" | "POST" | "PUT" | "DELETE" | "PATCH" => {
            path == "/v1/gate" || path.starts_with("/v1/gate/")
        }
        _ => false,
    }
}

async fn answer(fast: &EdgeFast, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let app = &fast.app;
    let result = match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/v1/tag") => {
            respond::tag_query(&app.config, &app.tag_counters, &request, || app.table()).map(tagged)
        }
        (&Method::POST, "/v1/tag") => {
            let table = || app.table();
            respond::tag_body(&app.config, &app.tag_counters, request, table).await.map(tagged)
        }
        _ => crate::service::edge::gate(app, &gate_request(fast, &request)).map(gated),
    };
    result.unwrap_or_else(|failure| respond::refused_as(failure, SERVER))
}

fn tagged(answer: Answer) -> Response<Full<Bytes>> {
    respond::ok_as(answer, SERVER)
}

/// What the gateway check reads, from hyper's request as the Rocket guard reads it from
/// Rocket's: the first value of each header that is UTF-8 (Rocket drops the others).
fn gate_request<'r>(fast: &EdgeFast, request: &'r Request<Incoming>) -> GateRequest<'r> {
    let headers = request.headers();
    GateRequest {
        gate_token: first(headers, &GATE_TOKEN),
        authorization: first(headers, &hyper::header::AUTHORIZATION),
        user_header: first(headers, &fast.user_header),
        cookies: headers
            .get_all(hyper::header::COOKIE)
            .iter()
            .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
            .collect(),
        query: request.uri().query(),
        original_uri: first(headers, &ORIGINAL_URI),
        domain: first(headers, &DOMAIN),
        service: first(headers, &SERVICE),
        method: request.method().as_str(),
        original_method: first(headers, &ORIGINAL_METHOD),
    }
}

fn first<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get_all(name).iter().find_map(|v| std::str::from_utf8(v.as_bytes()).ok())
}

/// 200, no body, no content type, the routing headers: those of `GateAnswer::headers`, which
/// the Rocket route sends (`tests/edge_fast.rs` compares them), built without a string per header.
fn gated(answer: GateAnswer) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    respond::common_without_body(headers, SERVER);
    let text = |value: &str| HeaderValue::from_str(value).ok();
    let color = match answer.color {
        Cow::Borrowed(lane) => Some(HeaderValue::from_static(lane)),
        Cow::Owned(lane) => text(&lane),
    };
    let flag = if answer.global_read_only { "true" } else { "false" };
    for (name, value) in [
        (COLOR, color),
        (ZONE, text(&answer.zone)),
        (VERSION, Some(HeaderValue::from(answer.version))),
        (SOURCE, Some(HeaderValue::from_static(answer.source))),
        (CHANNEL, answer.channel.as_deref().and_then(text)),
        (SIGNATURE, answer.signature.as_deref().and_then(text)),
        (GLOBAL_WRITER, answer.global_writer.as_deref().and_then(text)),
        (GLOBAL_READ_ONLY, Some(HeaderValue::from_static(flag))),
    ] {
        if let Some(value) = value {
            headers.insert(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::is_edge_path;

    #[test]
    fn the_edge_path_is_tags_and_the_gate() {
        for (method, path, fast) in [
            ("GET", "/v1/tag", true),
            ("HEAD", "/v1/tag", true),
            ("POST", "/v1/tag", true),
            ("PUT", "/v1/tag", false),
            ("GET", "/v1/gate", true),
            ("GET", "/v1/gate/orders/1", true),
            ("POST", "/v1/gate/x", true),
            ("PUT", "/v1/gate/x", true),
            ("DELETE", "/v1/gate/x", true),
            ("PATCH", "/v1/gate/x", true),
            ("HEAD", "/v1/gate/x", false),
            ("OPTIONS", "/v1/gate/x", false),
            ("GET", "/v1/gateway", false),
            ("GET", "/v1/routing", false),
            ("GET", "/v1/routing/watch", true),
            ("HEAD", "/v1/routing/watch", false),
            ("POST", "/v1/subscribers/gw-1/ack", true),
            ("POST", "/v1/subscribers/a/b/ack", false),
            ("GET", "/v1/subscribers/gw-1/ack", false),
            ("POST", "/ofrep/v1/evaluate/flags", false),
            ("GET", "/readyz", false),
        ] {
            assert_eq!(is_edge_path(method, path), fast, "{method} {path}");
        }
    }
}
