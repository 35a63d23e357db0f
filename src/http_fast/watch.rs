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
use super::respond::{self, common_as, now_ms};
use crate::service::bearer::{self, Bearer};
use crate::service::routing_frames::Frame;
use crate::service::subscribers::{Subscribers, resumed_version};
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
pub(super) struct StreamGuard {
    pub(super) subscribers: Arc<Subscribers>,
    pub(super) id: Option<String>,
}

impl StreamGuard {
    /// A heartbeat went out: the subscriber is still there.
    pub(super) fn touch(&self) {
        if let Some(id) = &self.id {
            self.subscribers.touch(id, now_ms());
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.subscribers.disconnect(id, now_ms());
        }
    }
}

/// What a watch stream re-serves: the values its receiver sees (the coordinator's state, or an
/// edge's relayed frame), each with the version it carries and the frame that sends it.
pub(super) trait Source: Send + 'static {
    type Item: Clone + Send + Sync + 'static;
    /// The version `item` carries; `None` when there is nothing to send yet (an edge with no
    /// table).
    fn version(item: &Self::Item) -> Option<u64>;
    fn frame(&self, item: &Self::Item) -> Frame;
    /// The table lease announced in the stream's head (`x-tidegate-lease-ms`); `None`: the
    /// heartbeats confirm nothing and the watcher's write checks are not leased.
    fn lease_ms(&self) -> Option<u64>;
    /// A heartbeat, carrying the newest confirmation that every table published so far is
    /// current (`crate::core::lease`), when there is one.
    fn heartbeat(&self) -> Frame;
}

/// The coordinator's tables, framed once for every stream (`service::routing_frames`).
pub(super) struct Tables {
    frames: Arc<crate::service::routing_frames::RoutingFrames>,
    log_id: Arc<str>,
    coordinator: Arc<crate::service::coordinator::Coordinator>,
    lease_ms: u64,
}

impl Source for Tables {
    type Item = Arc<crate::core::State>;

    fn version(state: &Self::Item) -> Option<u64> {
        Some(state.version())
    }

    fn frame(&self, state: &Self::Item) -> Frame {
        self.frames.frame(state, &self.log_id)
    }

    fn lease_ms(&self) -> Option<u64> {
        Some(self.lease_ms)
    }

    fn heartbeat(&self) -> Frame {
        crate::service::routing_frames::heartbeat(self.coordinator.confirmed_at_ms(now_ms()))
    }
}

/// A watch stream whose gates passed, whatever it re-serves: what the loop that writes it
/// needs, on hyper or on the raw path.
pub(super) struct Opened<S: Source> {
    pub(super) guard: StreamGuard,
    pub(super) source: S,
    pub(super) changes: tokio::sync::watch::Receiver<S::Item>,
    pub(super) current: Option<S::Item>,
    pub(super) sent: u64,
    pub(super) heartbeat: Duration,
    /// A heartbeat to send right after the table that went ahead of it (see [`Opened::confirm`]).
    pub(super) pending: Option<Frame>,
    /// A confirmation is due before waiting: a stream starts with one, so a new watcher's write
    /// checks need not wait a whole heartbeat interval for their lease.
    pub(super) confirm_due: bool,
}

impl<S: Source> Opened<S> {
    /// The next frame to send: the current table first (unless the client has it), then each
    /// newer version and the heartbeats. `None` when the source is gone. Cancel-safe.
    pub(super) async fn next(&mut self, ticker: &mut tokio::time::Interval) -> Option<Frame> {
        loop {
            if let Some(item) = self.current.take()
                && let Some(version) = S::version(&item)
                && version > self.sent
            {
                self.sent = version;
                return Some(self.source.frame(&item));
            }
            if let Some(heartbeat) = self.pending.take() {
                return Some(heartbeat);
            }
            if self.confirm_due {
                self.confirm_due = false;
                if let Some(heartbeat) = self.confirm() {
                    return Some(heartbeat);
                }
                continue;
            }
            tokio::select! {
                changed = self.changes.changed() => {
                    changed.ok()?;
                    self.current = Some(self.changes.borrow_and_update().clone());
                }
                _ = ticker.tick() => {
                    self.guard.touch();
                    if let Some(heartbeat) = self.confirm() {
                        return Some(heartbeat);
                    }
                }
            }
        }
    }

    /// The heartbeat to send now, or `None` when a newer table must go first (it is then
    /// `current`, and the heartbeat `pending` behind it). The confirmation is read *before*
    /// looking for a newer table: whatever it confirms was published before it, so a table it
    /// covers is either sent already or found here, and a watcher never holds a confirmation for
    /// a table it has not received (its lease would then cover a table that missed a freeze).
    fn confirm(&mut self) -> Option<Frame> {
        let heartbeat = self.source.heartbeat();
        if self.changes.has_changed().unwrap_or(false) {
            self.current = Some(self.changes.borrow_and_update().clone());
            self.pending = Some(heartbeat);
            return None;
        }
        Some(heartbeat)
    }

    pub(super) fn ticker(&self) -> tokio::time::Interval {
        let start = tokio::time::Instant::now() + self.heartbeat;
        tokio::time::interval_at(start, self.heartbeat)
    }

    /// The heartbeat interval, announced to the watcher in `x-tidegate-heartbeat-ms`.
    pub(super) fn heartbeat_ms(&self) -> u64 {
        u64::try_from(self.heartbeat.as_millis()).unwrap_or(u64::MAX)
    }
}

/// The gates and the registration of `GET /v1/routing/watch`, as the Rocket route does them.
pub(super) fn open(
    tagger: &Tagger,
    query: Option<&str>,
    authorization: Option<&str>,
    last_event_id: Option<u64>,
) -> Result<Opened<Tables>, Failure> {
    let Some(subscribers) = &tagger.subscribers else {
        return Err(Failure::new(404, "not_found", "no watch streams on this listener"));
    };
    let bearer = Bearer::identify(&tagger.config, authorization);
    bearer.require_reader(&tagger.config)?;
    let subscriber_id = query_param(query, "subscriber_id");
    // Registering counts towards convergence, so it needs a writer, who then owns it.
    let owner = match subscriber_id {
        Some(_) => Some(bearer.require_writer(&tagger.config)?),
        None => None,
    };
    let their_log = query_param(query, "log_id");
    let resumed = resumed_version(last_event_id, their_log.as_deref(), tagger.coordinator.log_id());
    let mut changes = tagger.coordinator.subscribe();
    let current = changes.borrow_and_update().clone();
    let id = match (subscriber_id, owner) {
        (Some(id), Some(owner)) => {
            let zone = query_param(query, "zone").unwrap_or(Cow::Borrowed("unknown"));
            let kind = query_param(query, "kind").unwrap_or(Cow::Borrowed("unknown"));
            let version = current.version();
            let leased = query_param(query, "lease").as_deref() == Some("1");
            subscribers.admit_lease(leased)?;
            subscribers.connect(&id, &owner, &zone, &kind, resumed, version, now_ms())?;
            subscribers.set_leased(&id, leased);
            Some(id.into_owned())
        }
        _ => None,
    };
    // A `Last-Event-ID` ahead of this server names a table it never had: send the current one.
    let sent = resumed.filter(|v| *v <= current.version()).unwrap_or(0);
    Ok(Opened {
        guard: StreamGuard { subscribers: Arc::clone(subscribers), id },
        source: Tables {
            frames: Arc::clone(&tagger.frames),
            log_id: Arc::from(tagger.coordinator.log_id()),
            coordinator: Arc::clone(&tagger.coordinator),
            lease_ms: tagger.config.lease.lease_ms,
        },
        changes,
        current: Some(current),
        sent,
        heartbeat: Duration::from_millis(tagger.config.watch_heartbeat_ms),
        pending: None,
        confirm_due: true,
    })
}

/// Through hyper (a watch request that was not the connection's first): a task feeds the body.
pub fn watch(tagger: &Tagger, request: &Request<Incoming>) -> Result<Response<Events>, Failure> {
    let authorization = authorization(request)?;
    let last_event_id = last_event_id(request);
    let opened = open(tagger, request.uri().query(), authorization, last_event_id)?;
    Ok(serve_on_hyper(opened, respond::SERVER))
}

/// A task writes `opened`'s frames into a two-slot channel that the answer's body reads;
/// `server` names the process in the answer.
pub(super) fn serve_on_hyper(
    mut opened: Opened<impl Source>,
    server: &'static str,
) -> Response<Events> {
    let heartbeat_ms = opened.heartbeat_ms();
    let lease_ms = opened.source.lease_ms();
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(async move {
        let mut ticker = opened.ticker();
        loop {
            let frame = tokio::select! {
                frame = opened.next(&mut ticker) => frame,
                _ = tx.closed() => None,
            };
            let Some(frame) = frame else { return };
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    stream_response(rx, heartbeat_ms, lease_ms, server)
}

/// A watch stream's answer: 200, the event-stream headers, the frames `rx` receives.
fn stream_response(
    rx: mpsc::Receiver<Frame>,
    heartbeat_ms: u64,
    lease_ms: Option<u64>,
    server: &'static str,
) -> Response<Events> {
    let mut response = Response::new(Events(rx));
    let headers = response.headers_mut();
    common_as(headers, server);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::EXPIRES, HeaderValue::from_static("0"));
    headers.insert(
        header::HeaderName::from_static(crate::client::sse::HEARTBEAT_HEADER),
        HeaderValue::from(heartbeat_ms),
    );
    if let Some(lease_ms) = lease_ms {
        headers.insert(
            header::HeaderName::from_static(crate::client::sse::LEASE_HEADER),
            HeaderValue::from(lease_ms),
        );
    }
    response
}

/// The `Authorization` header as text, refused when it is not (as the Rocket guard does).
pub(super) fn authorization(request: &Request<Incoming>) -> Result<Option<&str>, Failure> {
    match request.headers().get(header::AUTHORIZATION) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(Some)
            .map_err(|_| bearer::unauthorized("the Authorization header must be `Bearer <token>`")),
    }
}

/// `Last-Event-ID`, when it is a version.
pub(super) fn last_event_id(request: &Request<Incoming>) -> Option<u64> {
    request
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}
