//! Routing push and convergence: the watch stream (SSE), acknowledgements, subscriber views.

use std::sync::Arc;
use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::request::{FromRequest, Outcome, Request};
use rocket::response::stream::{Event, EventStream};
use rocket::serde::json::Json;
use rocket::{Shutdown, State, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::routing::routing_body;
use super::{App, iso8601, now_ms};
use crate::core::State as CoreState;
use crate::service::subscribers::{SubscriberError, Subscribers};

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("routing watch", |rocket| async {
        rocket.mount("/", routes![watch, ack, list_subscribers, convergence]).attach(
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
        let detail = e.to_string();
        match e {
            SubscriberError::InvalidId(_) | SubscriberError::InvalidLabel { .. } => {
                ApiError::bad_request("invalid_subscriber", detail)
            }
            SubscriberError::Unknown(_) => {
                ApiError::new(Status::NotFound, "unknown_subscriber", detail)
            }
            SubscriberError::Full => {
                ApiError::new(Status::ServiceUnavailable, "too_many_subscribers", detail)
            }
            SubscriberError::FutureVersion { .. } => {
                ApiError::bad_request("invalid_version", detail)
            }
        }
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

fn routing_event(state: &CoreState, log_id: &str) -> Event {
    Event::json(&routing_body(state.table(), log_id))
        .id(state.version().to_string())
        .event("routing")
}

/// `GET /v1/routing/watch`: the full table on connect (unless `Last-Event-ID` already names
/// the current version), then every new version, plus heartbeat comments.
#[allow(clippy::too_many_arguments)]
#[get("/v1/routing/watch?<subscriber_id>&<zone>&<kind>")]
fn watch(
    app: &State<App>,
    caller: Caller,
    subscriber_id: Option<&str>,
    zone: Option<&str>,
    kind: Option<&str>,
    last_event_id: LastEventId,
    mut shutdown: Shutdown,
) -> Result<EventStream![Event + 'static], ApiError> {
    caller.require_reader(&app.config)?;
    let mut changes = app.coordinator.subscribe();
    let current = changes.borrow_and_update().clone();
    let subscribers = Arc::clone(&app.subscribers);
    let id = match subscriber_id {
        Some(id) => {
            let zone = zone.unwrap_or("unknown");
            let kind = kind.unwrap_or("unknown");
            subscribers.connect(id, zone, kind, last_event_id.0, current.version(), now_ms())?;
            Some(id.to_owned())
        }
        None => None,
    };
    let guard = StreamGuard { subscribers, id };
    let heartbeat = Duration::from_millis(app.config.watch_heartbeat_ms);
    let mut sent = last_event_id.0.unwrap_or(0);
    let log_id = app.coordinator.log_id().to_owned();
    Ok(EventStream! {
        let guard = guard;
        if current.version() > sent {
            sent = current.version();
            yield routing_event(&current, &log_id);
        }
        let mut ticker = rocket::tokio::time::interval_at(rocket::tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            rocket::tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() { break; }
                    let state = changes.borrow_and_update().clone();
                    if state.version() > sent {
                        sent = state.version();
                        yield routing_event(&state, &log_id);
                    }
                }
                _ = ticker.tick() => {
                    if let Some(id) = &guard.id {
                        guard.subscribers.touch(id, now_ms());
                    }
                    yield Event::comment("heartbeat");
                }
                _ = &mut shutdown => break,
            }
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AckRequest {
    version: u64,
    zone: Option<String>,
    kind: Option<String>,
}

#[post("/v1/subscribers/<id>/ack", data = "<request>")]
fn ack(
    app: &State<App>,
    caller: Caller,
    id: &str,
    request: Result<Json<AckRequest>, rocket::serde::json::Error<'_>>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let identity = match (&r.zone, &r.kind) {
        (Some(zone), Some(kind)) => Some((zone.as_str(), kind.as_str())),
        (Some(zone), None) => Some((zone.as_str(), "unknown")),
        _ => None,
    };
    let current = app.coordinator.state().version();
    let s = app.subscribers.ack(id, r.version, identity, current, now_ms())?;
    Ok(Json(json!({
        "subscriber_id": s.id,
        "applied_version": s.applied_version,
        "current_version": current,
        "lag": current - s.applied_version,
    })))
}

#[get("/v1/subscribers")]
fn list_subscribers(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let now = now_ms();
    let current = app.coordinator.state().version();
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
                "state": state,
                "applied_version": s.applied_version,
                "lag": current.saturating_sub(s.applied_version),
                "streams": s.streams,
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
            json!({
                "subscriber_id": b.id,
                "zone": b.zone,
                "kind": b.kind,
                "applied_version": b.applied_version,
                "behind_for_ms": b.behind_for_ms,
            })
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
