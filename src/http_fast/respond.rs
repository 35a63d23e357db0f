//! One request of the fast listener to one response: route, gate, parse, and render what
//! `service::tag_answer` built.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::Tagger;
use super::watch::{self, Events};
use crate::config::Config;
use crate::core::RoutingTable;
use crate::service::bearer::{self, Bearer};
use crate::service::subscribers::{AckRequest, Subscribers, ack_body};
use crate::service::tag_answer::{self, Answer, Failure};
use crate::telemetry::{self, TagCounters};

/// The headers every answer carries besides its own: what Rocket's `ident` and Shield fairing add
/// on the main port, so the two listeners answer alike.
pub(super) const COMMON: [(&str, &str); 5] = [
    ("content-type", "application/json"),
    ("server", "tidegate"),
    ("permissions-policy", "interest-cohort=()"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "SAMEORIGIN"),
];

/// [`COMMON`] as typed headers, named and valued at compile time: inserting them parses nothing
/// per answer (a `&str` name is parsed on every insert).
const COMMON_HEADERS: [(HeaderName, HeaderValue); 4] = [
    (HeaderName::from_static("content-type"), HeaderValue::from_static("application/json")),
    (HeaderName::from_static("permissions-policy"), HeaderValue::from_static("interest-cohort=()")),
    (HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff")),
    (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("SAMEORIGIN")),
];
const COLOR: HeaderName = HeaderName::from_static("x-tidegate-color");
const VERSION: HeaderName = HeaderName::from_static("x-tidegate-version");

/// Every answer's body: a whole JSON body, or a watch stream's events.
pub type AnyBody = Either<Full<Bytes>, Events>;

pub async fn answer(tagger: &Tagger, request: Request<Incoming>) -> Response<AnyBody> {
    if request.method() == Method::GET && request.uri().path() == "/v1/routing/watch" {
        return match watch::watch(tagger, &request) {
            Ok(stream) => stream.map(Either::Right),
            Err(failure) => refused(failure).map(Either::Left),
        };
    }
    if request.method() == Method::POST
        && let Some(subscribers) = &tagger.subscribers
        && let Some(id) = ack_path(request.uri().path())
    {
        let id = id.into_owned();
        return match ack(tagger, subscribers, request, &id).await {
            Ok(body) => ok_json(body),
            Err(failure) => refused(failure),
        }
        .map(Either::Left);
    }
    let result = match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/v1/tag") => tag_one(tagger, &request),
        (&Method::POST, "/v1/tag") => tag_batch(tagger, request).await,
        (method, path) => Err(not_found(tagger, method, path)),
    };
    match result {
        Ok(answer) => ok(answer),
        Err(failure) => refused(failure),
    }
    .map(Either::Left)
}

fn tag_one(tagger: &Tagger, request: &Request<Incoming>) -> Result<Answer, Failure> {
    tag_query(&tagger.config, &tagger.counters, request, || Ok(tagger.coordinator.table()))
}

async fn tag_batch(tagger: &Tagger, request: Request<Incoming>) -> Result<Answer, Failure> {
    tag_body(&tagger.config, &tagger.counters, request, || Ok(tagger.coordinator.table())).await
}

/// `GET /v1/tag` on any fast path: the read gate (on the `Authorization` header only: the web
/// UI's session cookie is for the UI, which never calls the tag path), the query's `user_id`, `domain` and `service`,
/// then the tag over the table `table` gives (the coordinator's, or the edge's, which may have none).
pub(super) fn tag_query(
    config: &Config,
    counters: &TagCounters,
    request: &Request<Incoming>,
    table: impl FnOnce() -> Result<Arc<RoutingTable>, Failure>,
) -> Result<Answer, Failure> {
    bearer_of(config, request.headers())?.require_reader(config)?;
    let query = request.uri().query();
    let user_id = tag_answer::user_id_param(query)?;
    let domain = tag_answer::domain_param(query)?;
    let service = tag_answer::service_param(query)?;
    let table = table()?;
    let (user_id, domain, service) = (user_id.as_deref(), domain.as_deref(), service.as_deref());
    tag_answer::tag_one(&table, config.fallback, counters, user_id, domain, service)
}

/// `POST /v1/tag` on any fast path: the JSON media gate, the read gate, the body, then the batch
/// over the table `table` gives.
pub(super) async fn tag_body(
    config: &Config,
    counters: &TagCounters,
    request: Request<Incoming>,
    table: impl FnOnce() -> Result<Arc<RoutingTable>, Failure>,
) -> Result<Answer, Failure> {
    let headers = request.headers();
    json_media(headers)?;
    bearer_of(config, headers)?.require_reader(config)?;
    let body = read_body_under(config, request).await?;
    // Rocket reports the UTF-8 error itself (wrapped in an I/O error that displays the same).
    let text = std::str::from_utf8(&body).map_err(|e| tag_answer::unreadable_body(&e))?;
    let batch = tag_answer::parse_batch(text)?;
    let table = table()?;
    tag_answer::tag_batch(&table, config.max_batch, counters, &batch)
}

/// The subscriber ID of `/v1/subscribers/<id>/ack`, percent-decoded as Rocket decodes a path
/// segment; `None` for any other path (or an ID that is not UTF-8, which Rocket does not route).
pub(super) fn ack_path(path: &str) -> Option<Cow<'_, str>> {
    let id = path.strip_prefix("/v1/subscribers/")?.strip_suffix("/ack")?;
    if id.is_empty() || id.contains('/') {
        return None;
    }
    percent_encoding::percent_decode_str(id).decode_utf8().ok()
}

/// `POST /v1/subscribers/<id>/ack`, as the Rocket route (`http::watch::ack`) answers it: the
/// JSON media gate, the writer gate, the body, then the registry.
async fn ack(
    tagger: &Tagger,
    subscribers: &Subscribers,
    request: Request<Incoming>,
    id: &str,
) -> Result<String, Failure> {
    let headers = request.headers();
    json_media(headers)?;
    let owner = reader_of(tagger, headers)?.require_writer(&tagger.config)?;
    let body = read_body(tagger, request).await?;
    let text = std::str::from_utf8(&body).map_err(|e| tag_answer::unreadable_body(&e))?;
    let r: AckRequest = serde_json::from_str(text).map_err(|e| tag_answer::invalid_json(&e))?;
    let current = tagger.coordinator.state().version();
    let s = subscribers.ack(id, &owner, r.version, r.identity(), current, now_ms())?;
    if r.leaving {
        subscribers.release(id);
    }
    Ok(tag_answer::json(&ack_body(&s.id, s.applied_version, current), 128))
}

/// The whole body, into one buffer sized by its `Content-Length` (so a batch of 10 000 IDs is
/// copied once, not gathered in hyper's chunks and then joined), at most `limit` bytes.
/// The JSON media gate of a `/v1/` body, as Rocket's gates apply it (a request without a body
/// need not declare one).
pub(super) fn json_media(headers: &HeaderMap) -> Result<(), Failure> {
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|n| n.to_str().map_or(true, |n| n.trim() != "0"));
    json_declared(headers.get(header::CONTENT_TYPE), has_body)
}

/// The whole body, under `limits.max_body_bytes`, read into a buffer sized by `Content-Length`.
async fn read_body(tagger: &Tagger, request: Request<Incoming>) -> Result<Vec<u8>, Failure> {
    read_body_under(&tagger.config, request).await
}

/// The whole body, under `limits.max_body_bytes` of `config`.
pub(super) async fn read_body_under(
    config: &Config,
    request: Request<Incoming>,
) -> Result<Vec<u8>, Failure> {
    let limit = usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|n| n.to_str().ok()?.trim().parse::<usize>().ok());
    collect(request.into_body(), limit, declared).await
}

async fn collect(
    mut body: Incoming,
    limit: usize,
    declared: Option<usize>,
) -> Result<Vec<u8>, Failure> {
    if declared.is_some_and(|n| n > limit) {
        return Err(tag_answer::body_too_large());
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| tag_answer::unreadable_body(&e))?;
        if let Some(data) = frame.data_ref() {
            if bytes.len() + data.len() > limit {
                return Err(tag_answer::body_too_large());
            }
            bytes.extend_from_slice(data);
        }
    }
    Ok(bytes)
}

/// Who the `Authorization` header names.
pub(super) fn reader_of(tagger: &Tagger, headers: &HeaderMap) -> Result<Bearer, Failure> {
    bearer_of(&tagger.config, headers)
}

/// Who the `Authorization` header names, under `config`'s tokens.
pub(super) fn bearer_of(config: &Config, headers: &HeaderMap) -> Result<Bearer, Failure> {
    let authorization = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(value) => Some(value.to_str().map_err(|_| {
            bearer::unauthorized("the Authorization header must be `Bearer <token>`")
        })?),
    };
    Ok(Bearer::identify(config, authorization))
}

/// Milliseconds since the Unix epoch (subscriber liveness).
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A body must be declared as JSON (as every gate of the main port requires).
fn json_declared(content_type: Option<&HeaderValue>, has_body: bool) -> Result<(), Failure> {
    let declared = content_type.and_then(|v| v.to_str().ok()).map(str::trim);
    match declared {
        Some(ct) => {
            let media = ct.split(';').next().unwrap_or("").trim();
            match media.split_once('/') {
                Some((top, sub)) if bearer::is_json_media(top.trim(), sub.trim()) => Ok(()),
                _ => Err(bearer::unsupported_media(ct)),
            }
        }
        None if has_body => Err(bearer::unsupported_media("no Content-Type")),
        None => Ok(()),
    }
}

fn not_found(tagger: &Tagger, method: &Method, path: &str) -> Failure {
    let port = tagger.main_port.load(Ordering::Relaxed);
    let main = if port == 0 { tagger.config.port } else { port };
    Failure::new(
        404,
        "not_found",
        format!(
            "no route for {method} {path}: this fast listener serves only GET and POST /v1/tag, GET /v1/routing/watch and POST /v1/subscribers/<id>/ack; the rest of the API is on port {main}"
        ),
    )
}

fn ok(answer: Answer) -> Response<Full<Bytes>> {
    ok_as(answer, SERVER)
}

/// The `server` header of the coordinator's answers (Rocket's `ident`).
pub(super) const SERVER: &str = "tidegate";

/// The `server` header of an edge's answers.
pub(super) const EDGE_SERVER: &str = "tidegate-edge";

/// A tag answer: the body, `x-tidegate-color` (single tags) and `x-tidegate-version`.
pub(super) fn ok_as(answer: Answer, server: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(answer.body)));
    let headers = response.headers_mut();
    common_as(headers, server);
    match answer.color {
        Some(std::borrow::Cow::Borrowed(color)) => {
            headers.insert(COLOR, HeaderValue::from_static(color));
        }
        Some(std::borrow::Cow::Owned(lane)) => {
            if let Ok(value) = HeaderValue::from_str(&lane) {
                headers.insert(COLOR, value);
            }
        }
        None => {}
    }
    headers.insert(VERSION, HeaderValue::from(answer.version));
    response
}

/// A 200 with a JSON body and only the common headers (the ack answer).
fn ok_json(body: String) -> Response<Full<Bytes>> {
    ok_json_as(body, SERVER)
}

/// [`ok_json`] with `server` naming the process.
pub(super) fn ok_json_as(body: String, server: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    common_as(response.headers_mut(), server);
    response
}

pub(super) fn refused(failure: Failure) -> Response<Full<Bytes>> {
    refused_as(failure, SERVER)
}

/// An error answer, as `http::error::ApiError` renders it: the JSON body, `Retry-After` when the
/// error says when to come back, and `x-tidegate-refusal: frozen` for a frozen write.
pub(super) fn refused_as(failure: Failure, server: &'static str) -> Response<Full<Bytes>> {
    telemetry::count_api_error(failure.code);
    let body = serde_json::to_string(&failure.body()).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    common_as(headers, server);
    if let Some(seconds) = failure.extra.get("retry_after_seconds").and_then(|s| s.as_u64()) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if failure.code == "frozen" {
        headers.insert("x-tidegate-refusal", HeaderValue::from_static("frozen"));
    }
    response
}

/// The headers every answer carries, with `server` naming the process.
pub(super) fn common_as(headers: &mut HeaderMap, server: &'static str) {
    for (name, value) in COMMON_HEADERS {
        headers.insert(name, value);
    }
    headers.insert(header::SERVER, HeaderValue::from_static(server));
}

/// [`common_as`] without `content-type` (an answer with no body: the gate's).
pub(super) fn common_without_body(headers: &mut HeaderMap, server: &'static str) {
    for (name, value) in COMMON_HEADERS.into_iter().skip(1) {
        headers.insert(name, value);
    }
    headers.insert(header::SERVER, HeaderValue::from_static(server));
}

#[cfg(test)]
mod tests {
    /// The typed common headers are [`super::COMMON`], which the raw watch writes by hand.
    #[test]
    fn the_typed_common_headers_are_the_common_list() {
        let mut typed = hyper::header::HeaderMap::new();
        super::common_as(&mut typed, "tidegate");
        assert_eq!(typed.len(), super::COMMON.len());
        for (name, value) in super::COMMON {
            assert_eq!(typed.get(name).unwrap(), value, "{name}");
        }
    }
}
