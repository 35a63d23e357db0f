//! The edge's part of the fan-out tree on its fast path: `GET /v1/routing/watch` re-serves the
//! routing events the edge takes from its coordinator (the same frames, `service::edge::Relay`),
//! and `POST /v1/subscribers/<id>/ack` takes its leaves' acknowledgements into the edge's own
//! registry, which `service::edge::report_leaves` reports upward. The gates are the
//! coordinator's: reading needs a reader, registering (a subscriber ID) a writer, who owns it.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};

use super::respond::{self, bearer_of, json_media, now_ms, read_body_under};
use super::watch::{
    Events, Opened, Source, StreamGuard, authorization, last_event_id, serve_on_hyper,
};
use crate::service::bearer::Bearer;
use crate::service::edge::{EdgeApp, RelayFrame};
use crate::service::routing_frames::{self, Frame, HEARTBEAT};
use crate::service::subscribers::{AckRequest, ack_body, resumed_version};
use crate::service::tag_answer::{self, Failure, query_param};

fn no_stream() -> Failure {
    Failure::new(
        404,
        "not_found",
        "this edge serves no watch stream (`[edge] max_leaves` is 0): watch a coordinator",
    )
}

/// `GET /v1/routing/watch` on the edge, through hyper (a watch request that was not the
/// connection's first; the first is served on the raw path, `raw_watch`).
pub fn watch(app: &EdgeApp, request: &Request<Incoming>) -> Result<Response<Events>, Failure> {
    let opened = open(app, request.uri().query(), authorization(request)?, last_event_id(request))?;
    Ok(serve_on_hyper(opened, respond::EDGE_SERVER))
}

/// What a leaf's stream on the edge re-serves: the frames the edge relays, as they came, and
/// the confirmations of its coordinator, forwarded unchanged (an edge confirms nothing itself:
/// its leaves' leases end with the edge's own).
pub(super) struct Relayed {
    router: std::sync::Arc<crate::client::Router>,
    lease_ms: Option<u64>,
}

impl Source for Relayed {
    type Item = Option<RelayFrame>;

    fn version(item: &Self::Item) -> Option<u64> {
        item.as_ref().map(|f| f.version)
    }

    /// Only asked for an item with a version (`Some`); `None` would be a heartbeat.
    fn frame(&self, item: &Self::Item) -> Frame {
        item.as_ref().map_or(HEARTBEAT, |f| Frame::Shared(std::sync::Arc::clone(&f.bytes)))
    }

    fn lease_ms(&self) -> Option<u64> {
        self.lease_ms
    }

    fn heartbeat(&self) -> Frame {
        let confirmed = self.router.confirmed_at_ms();
        routing_frames::heartbeat((self.lease_ms.is_some() && confirmed > 0).then_some(confirmed))
    }
}

/// The gates and the registration of the edge's `GET /v1/routing/watch`: reading needs a
/// reader, registering a writer (who owns the leaf), and an edge that can report its leaves.
pub(super) fn open(
    app: &EdgeApp,
    query: Option<&str>,
    authorization: Option<&str>,
    last_event_id: Option<u64>,
) -> Result<Opened<Relayed>, Failure> {
    let relay = &app.relay;
    if !relay.serves {
        return Err(no_stream());
    }
    let config = &app.config;
    let bearer = Bearer::identify(config, authorization);
    bearer.require_reader(config)?;
    let subscriber_id = query_param(query, "subscriber_id");
    let owner = match subscriber_id {
        Some(_) if !relay.registers => {
            return Err(Failure::new(
                409,
                "not_reporting",
                "this edge has no token (`[edge] token`), so it cannot report its subscribers to a coordinator: register with a coordinator, or give the edge a service token",
            ));
        }
        Some(_) => Some(bearer.require_writer(config)?),
        None => None,
    };
    let mut changes = relay.frames.subscribe();
    let held = relay.version();
    let our_log = app.router.log_id().unwrap_or_default();
    let their_log = query_param(query, "log_id");
    let resumed = resumed_version(last_event_id, their_log.as_deref(), &our_log);
    // Registered before the frame to send is read: a leaves report made before this registration
    // read the re-served version first, so the frame this stream starts with is at least that.
    let id = match (subscriber_id, owner) {
        (Some(id), Some(owner)) => {
            let zone = query_param(query, "zone").unwrap_or(Cow::Borrowed("unknown"));
            let kind = query_param(query, "kind").unwrap_or(Cow::Borrowed("unknown"));
            let leased = query_param(query, "lease").as_deref() == Some("1");
            relay.leaves.admit_lease(leased)?;
            relay.leaves.connect(&id, &owner, &zone, &kind, resumed, held, now_ms())?;
            relay.leaves.set_leased(&id, leased);
            relay.mark();
            Some(id.into_owned())
        }
        _ => None,
    };
    let current = changes.borrow_and_update().clone();
    Ok(Opened {
        guard: StreamGuard { subscribers: std::sync::Arc::clone(&relay.leaves), id },
        source: Relayed {
            router: std::sync::Arc::clone(&app.router),
            lease_ms: app.router.lease().map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX)),
        },
        changes,
        current: Some(current),
        sent: resumed.filter(|v| *v <= held).unwrap_or(0),
        heartbeat: Duration::from_millis(config.watch_heartbeat_ms),
        pending: None,
        confirm_due: true,
    })
}

/// `POST /v1/subscribers/<id>/ack` on the edge: a leaf applied `version` of the re-served table.
pub async fn ack(
    app: &EdgeApp,
    request: Request<Incoming>,
    id: &str,
) -> Result<Response<Full<Bytes>>, Failure> {
    let relay = &app.relay;
    if !relay.serves {
        return Err(no_stream());
    }
    if !relay.registers {
        return Err(Failure::new(
            409,
            "not_reporting",
            "this edge has no token (`[edge] token`), so it cannot report its subscribers: acknowledge to a coordinator",
        ));
    }
    let config = &app.config;
    let headers = request.headers();
    json_media(headers)?;
    let owner = bearer_of(config, headers)?.require_writer(config)?;
    let body = read_body_under(config, request).await?;
    let text = std::str::from_utf8(&body).map_err(|e| tag_answer::unreadable_body(&e))?;
    let r: AckRequest = serde_json::from_str(text).map_err(|e| tag_answer::invalid_json(&e))?;
    let current = relay.version();
    let s = relay.leaves.ack(id, &owner, r.version, r.identity(), current, now_ms())?;
    if r.leaving {
        relay.leaves.release(id);
    }
    relay.mark();
    Ok(respond::ok_json_as(
        tag_answer::json(&ack_body(&s.id, s.applied_version, current), 128),
        respond::EDGE_SERVER,
    ))
}
