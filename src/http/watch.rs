//! Routing push and convergence: the watch stream (SSE), acknowledgements, subscriber views.

use std::sync::Arc;
use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::futures::stream::{Stream, StreamExt};
use rocket::http::ContentType;
use rocket::request::{FromRequest, Outcome, Request};
use rocket::response::stream::{ByteStream, ReaderStream};
use rocket::response::{self, Responder, Response};
use rocket::serde::json::Json;
use rocket::{Shutdown, State, get, post, routes};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::{App, iso8601, now_ms};
use crate::client::sse::{HEARTBEAT_HEADER, LEASE_HEADER};
pub use crate::service::routing_frames::RoutingFrames;
use crate::service::routing_frames::{self, Frame};
use crate::service::subscribers::{
    AckRequest, SubscriberError, Subscribers, ack_body, resumed_version,
};
use crate::service::tag_answer::Failure;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("routing watch", |rocket| async {
        rocket.mount("/", routes![watch, ack, leaves, list_subscribers, convergence]).attach(
            AdHoc::on_liftoff("commit times", |rocket| {
                Box::pin(async move {
                    // Records when each version was published, so convergence can say how
                    // long a subscriber has been behind.
                    let app = rocket.state::<App>().expect("App state is managed");
                    let mut changes = app.coordinator.subscribe();
                    let subscribers = Arc::clone(&app.subscribers);
                    let mut shutdown = rocket.shutdown();
                    subscribers.committed(changes.borrow().version(), now_ms());
                    rocket::tokio::spawn(async move {
                        loop {
                            rocket::tokio::select! {
                                changed = changes.changed() => {
                                    if changed.is_err() { return; }
                                    let version = changes.borrow_and_update().version();
                                    let now = now_ms();
                                    subscribers.committed(version, now);
                                    subscribers.publish(now, version);
                                }
                                _ = &mut shutdown => return,
                            }
                        }
                    });
                })
            }),
        )
    })
}

impl From<SubscriberError> for ApiError {
    fn from(e: SubscriberError) -> ApiError {
        Failure::from(e).into()
    }
}

/// The `Last-Event-ID` header of a reconnecting SSE client: the version it already holds.
pub struct LastEventId(Option<u64>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for LastEventId {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let id = request.headers().get_one("Last-Event-ID").and_then(|v| v.trim().parse().ok());
        Outcome::Success(LastEventId(id))
    }
}

/// Closes a subscriber's stream in the registry when the response stream is dropped.
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

/// An SSE response over pre-framed events (Rocket's `EventStream` frames, and so copies, every
/// event per stream).
/// The second field is the heartbeat interval, announced in `x-tidegate-heartbeat-ms` so that
/// watchers size their stall bound by the server they watch rather than by their own config.
pub(crate) struct EventFrames<S>(ByteStream<S>, Duration, u64);

impl<'r, S> Responder<'r, 'r> for EventFrames<S>
where
    S: Stream<Item = Frame> + Send + 'r,
{
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'r> {
        Response::build()
            .header(ContentType::EventStream)
            .raw_header("Cache-Control", "no-cache")
            .raw_header("Expires", "0")
            .raw_header(HEARTBEAT_HEADER, self.1.as_millis().to_string())
            .raw_header(LEASE_HEADER, self.2.to_string())
            .streamed_body(ReaderStream::from(self.0.0.map(std::io::Cursor::new)))
            .ok()
    }
}

/// `GET /v1/routing/watch`: the full table on connect (unless `Last-Event-ID` already names
/// the current version), then every new version, plus heartbeat comments.
#[allow(clippy::too_many_arguments)]
#[get("/v1/routing/watch?<subscriber_id>&<zone>&<kind>&<log_id>&<lease>")]
fn watch(
    app: &State<App>,
    caller: Caller,
    subscriber_id: Option<&str>,
    zone: Option<&str>,
    kind: Option<&str>,
    log_id: Option<&str>,
    lease: Option<&str>,
    last_event_id: LastEventId,
    mut shutdown: Shutdown,
) -> Result<EventFrames<impl Stream<Item = Frame> + Send + 'static>, ApiError> {
    caller.require_reader(&app.config)?;
    // Watching is a read; registering as a subscriber counts towards convergence, which holds
    // or releases drain steps, so it needs a writer, who then owns the subscriber.
    let owner = match subscriber_id {
        Some(_) => Some(caller.require_writer(&app.config)?),
        None => None,
    };
    let resumed = resumed_version(last_event_id.0, log_id, app.coordinator.log_id());
    let mut changes = app.coordinator.subscribe();
    let current = changes.borrow_and_update().clone();
    let subscribers = Arc::clone(&app.subscribers);
    let id = match (subscriber_id, owner) {
        (Some(id), Some(owner)) => {
            let zone = zone.unwrap_or("unknown");
            let kind = kind.unwrap_or("unknown");
            let version = current.version();
            subscribers.admit_lease(lease == Some("1"))?;
            subscribers.connect(id, &owner, zone, kind, resumed, version, now_ms())?;
            subscribers.set_leased(id, lease == Some("1"));
            Some(id.to_owned())
        }
        _ => None,
    };
    let guard = StreamGuard { subscribers, id };
    let heartbeat = Duration::from_millis(app.config.watch_heartbeat_ms);
    // A `Last-Event-ID` ahead of this server (a log restored from a backup, a new data
    // directory) names a table this server never had: send the current one.
    let mut sent = resumed.filter(|v| *v <= current.version()).unwrap_or(0);
    let frames = Arc::clone(&app.frames);
    let log_id = app.coordinator.log_id().to_owned();
    let coordinator = Arc::clone(&app.coordinator);
    Ok(EventFrames(
        ByteStream! {
            let guard = guard;
            if current.version() > sent {
                sent = current.version();
                yield frames.frame(&current, &log_id);
            }
            drop(current);
            // A confirmation right away, then one per heartbeat. Each is read before looking
            // for a newer table, and such a table goes out first (as `http_fast::watch` does):
            // a watcher never holds a confirmation for a table it has not received.
            let mut ticker = rocket::tokio::time::interval(heartbeat);
            loop {
                rocket::tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() { break; }
                        let state = changes.borrow_and_update().clone();
                        if state.version() > sent {
                            sent = state.version();
                            yield frames.frame(&state, &log_id);
                        }
                    }
                    _ = ticker.tick() => {
                        if let Some(id) = &guard.id {
                            guard.subscribers.touch(id, now_ms());
                        }
                        let beat = routing_frames::heartbeat(coordinator.confirmed_at_ms(now_ms()));
                        if changes.has_changed().unwrap_or(false) {
                            let state = changes.borrow_and_update().clone();
                            if state.version() > sent {
                                sent = state.version();
                                yield frames.frame(&state, &log_id);
                            }
                        }
                        yield beat;
                    }
                    _ = &mut shutdown => break,
                }
            }
        },
        heartbeat,
        app.config.lease.lease_ms,
    ))
}

#[post("/v1/subscribers/<id>/ack", data = "<request>")]
fn ack(
    app: &State<App>,
    caller: Caller,
    id: &str,
    request: Result<Json<AckRequest>, rocket::serde::json::Error<'_>>,
) -> Result<Json<Value>, ApiError> {
    let owner = caller.require_writer(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let current = app.coordinator.state().version();
    let s = app.subscribers.ack(id, &owner, r.version, r.identity(), current, now_ms())?;
    if r.leaving {
        app.subscribers.release(id);
    }
    Ok(Json(ack_body(&s.id, s.applied_version, current)))
}

/// `POST /v1/subscribers/<id>/leaves`: an edge (subscriber `id`) reports the subscribers that
/// watch through it (the fan-out tree), as counts by zone and applied version and the furthest
/// behind by name. The convergence gates count them as the edge's own subscribers until the
/// report is older than `LEAVES_FRESH_MS`. Only the caller that registered the edge may report.
#[post("/v1/subscribers/<id>/leaves", data = "<request>")]
fn leaves(
    app: &State<App>,
    caller: Caller,
    id: &str,
    request: Result<Json<LeavesRequest>, rocket::serde::json::Error<'_>>,
) -> Result<Json<Value>, ApiError> {
    let owner = caller.require_writer(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let current = app.coordinator.state().version();
    let counted = app.subscribers.receive_leaves(id, &owner, r.summary, current, now_ms())?;
    Ok(Json(json!({ "subscriber_id": id, "leaves": counted, "current_version": current })))
}

/// The body of `POST /v1/subscribers/<id>/leaves`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LeavesRequest {
    summary: crate::service::subscribers::Summary,
}

#[get("/v1/subscribers")]
fn list_subscribers(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let now = now_ms();
    let current = app.coordinator.state().version();
    let leaves = app.subscribers.leaves_by_edge(now);
    let list: Vec<Value> = app
        .subscribers
        .list(now)
        .into_iter()
        .map(|(s, live)| {
            let state = if !live {
                "stale"
            } else if s.applied_version >= current {
                "current"
            } else {
                "behind"
            };
            json!({
                "subscriber_id": s.id,
                "zone": s.zone,
                "kind": s.kind,
                "owner": s.owner,
                "state": state,
                "applied_version": s.applied_version,
                "lag": current.saturating_sub(s.applied_version),
                "streams": s.streams,
                // An edge's leaves (the subscribers that watch through it), as last reported.
                "leaves": leaves.get(&s.id).copied().unwrap_or(0),
                "applied_at": s.applied_at_ms.map(iso8601),
                "last_seen": iso8601(s.last_seen_ms),
            })
        })
        .collect();
    Ok(Json(json!({ "version": current, "subscribers": list })))
}

#[get("/v1/routing/convergence?<version>")]
fn convergence(
    app: &State<App>,
    caller: Caller,
    version: Option<&str>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let current = app.coordinator.state().version();
    let version = match version {
        None => current,
        Some(text) => {
            text.parse::<u64>().ok().filter(|v| (1..=current).contains(v)).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_version",
                    format!("version must be a whole number from 1 to {current}"),
                )
            })?
        }
    };
    let c = app.subscribers.convergence(version, now_ms());
    let behind: Vec<Value> = c
        .behind
        .iter()
        .map(|b| {
            let mut row = json!({
                "subscriber_id": b.id,
                "zone": b.zone,
                "kind": b.kind,
                "applied_version": b.applied_version,
                "behind_for_ms": b.behind_for_ms,
            });
            // A leaf of the fan-out tree names the edge it watches through.
            if let Some(edge) = &b.via {
                row["via"] = json!(edge);
            }
            row
        })
        .collect();
    Ok(Json(json!({
        "version": version,
        "current_version": current,
        "live": c.live,
        "converged": c.converged,
        "fraction": c.fraction(),
        "complete": c.converged == c.live,
        "behind": behind,
    })))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_ack_answer_cannot_wrap_when_a_newer_ack_raced_ahead() {
        let body = super::ack_body("gw-1", 8, 7);
        assert_eq!((body["lag"].as_u64(), body["current_version"].as_u64()), (Some(0), Some(8)));
        assert_eq!(super::ack_body("gw-1", 5, 7)["lag"].as_u64(), Some(2));
    }
}
