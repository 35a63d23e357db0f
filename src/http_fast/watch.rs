//! `GET /v1/routing/watch` on the fast listener: the same server-sent events as the Rocket route
//! (`http::watch`), the same gates and subscriber registry, but each stream is one small task
//! that hands the shared, pre-framed events (`service::routing_frames`) to hyper through a
//! two-slot channel, instead of Rocket's per-stream body pump and buffers.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame as BodyFrame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response};
use tokio::sync::mpsc;

use super::Tagger;
use super::respond::{common, now_ms, reader_of};
use crate::service::routing_frames::{Frame, HEARTBEAT};
use crate::service::subscribers::Subscribers;
use crate::service::tag_answer::{Failure, query_param};

/// A watch stream's body: the frames its task sends, as they come.
pub struct Events(mpsc::Receiver<Frame>);

impl Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<BodyFrame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|frame| frame.map(|f| Ok(BodyFrame::data(Bytes::from_owner(f)))))
    }
}

/// Closes a subscriber's stream in the registry when its task ends.
struct StreamGuard {
    subscribers: Arc<Subscribers>,
    id: Option<String>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.subscribers.disconnect(id, now_ms());
        }
    }
}

pub fn watch(tagger: &Tagger, request: &Request<Incoming>) -> Result<Response<Events>, Failure> {
    let Some(subscribers) = &tagger.subscribers else {
        return Err(Failure::new(404, "not_found", "no watch streams on this listener"));
    };
    let bearer = reader_of(tagger, request.headers())?;
    bearer.require_reader(&tagger.config)?;
    let query = request.uri().query();
    let subscriber_id = query_param(query, "subscriber_id");
    // Registering counts towards convergence, so it needs a writer, who then owns it.
    let owner = match subscriber_id {
        Some(_) => Some(bearer.require_writer(&tagger.config)?),
        None => None,
    };
    let last_event_id: Option<u64> = request
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let mut changes = tagger.coordinator.subscribe();
    let current = changes.borrow_and_update().clone();
    let id = match (subscriber_id, owner) {
        (Some(id), Some(owner)) => {
            let zone = query_param(query, "zone").unwrap_or(Cow::Borrowed("unknown"));
            let kind = query_param(query, "kind").unwrap_or(Cow::Borrowed("unknown"));
            let version = current.version();
            subscribers.connect(&id, &owner, &zone, &kind, last_event_id, version, now_ms())?;
            Some(id.into_owned())
        }
        _ => None,
    };
    let guard = StreamGuard { subscribers: Arc::clone(subscribers), id };
    let heartbeat = Duration::from_millis(tagger.config.watch_heartbeat_ms);
    let mut sent = last_event_id.filter(|v| *v <= current.version()).unwrap_or(0);
    let frames = Arc::clone(&tagger.frames);
    let log_id: Arc<str> = Arc::from(tagger.coordinator.log_id());
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        let guard = guard;
        if current.version() > sent {
            sent = current.version();
            if tx.send(frames.frame(&current, &log_id)).await.is_err() {
                return;
            }
        }
        drop(current);
        let start = tokio::time::Instant::now() + heartbeat;
        let mut ticker = tokio::time::interval_at(start, heartbeat);
        loop {
            let frame = tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() { return; }
                    let state = changes.borrow_and_update().clone();
                    if state.version() <= sent { continue; }
                    sent = state.version();
                    frames.frame(&state, &log_id)
                }
                _ = ticker.tick() => {
                    if let Some(id) = &guard.id {
                        guard.subscribers.touch(id, now_ms());
                    }
                    HEARTBEAT
                }
                _ = tx.closed() => return,
            };
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(Events(rx));
    let headers = response.headers_mut();
    common(headers);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::EXPIRES, HeaderValue::from_static("0"));
    Ok(response)
}
