//! MQ lane membership over HTTP: register, heartbeat, leave, and the group view with lag.
//!
//! Members learn assignment changes from their heartbeat answer (no long-poll): they must
//! heartbeat anyway, and the answer is small. Members are services, so every call here needs
//! only the reader role, like tagging.

use std::collections::BTreeSet;
use std::sync::Arc;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::serde::json::Json;
use rocket::{State, delete, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::{App, iso8601, now_ms};
use crate::service::lane_membership::{self, GroupView, MemberView, Registration};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("lanes", |rocket| async {
        rocket.mount("/", routes![register, heartbeat, leave, get_group, get_groups]).attach(
            AdHoc::on_liftoff("lane runner", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let shutdown = rocket.shutdown();
                    rocket::tokio::spawn(lane_membership::run(
                        Arc::clone(&app.lanes),
                        now_ms,
                        shutdown,
                    ));
                })
            }),
        )
    })
}

fn member_body(v: &MemberView) -> Value {
    json!({
        "group": v.group,
        "member_id": v.member_id,
        "zone": v.zone,
        "topic": v.topic,
        "partitions": v.partitions,
        "generation": v.generation,
        "assignment": v.assignment,
        "pending": v.pending,
        "heartbeat_interval_ms": v.heartbeat_interval_ms,
        "session_timeout_ms": v.session_timeout_ms,
    })
}

fn group_body(v: &GroupView) -> Value {
    let members: Vec<Value> = v
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id,
                "zone": m.zone,
                "assignment": m.assignment,
                "pending": m.pending,
                "holding": m.holding,
                "registered_at": iso8601(m.registered_ms),
                "last_seen_at": iso8601(m.last_seen_ms),
            })
        })
        .collect();
    let zones: Vec<Value> = v
        .zones
        .iter()
        .map(|z| {
            json!({
                "zone": z.zone,
                "color": z.color.as_str(),
                "state": z.state,
                "members": z.members,
                "half": z.half,
                "lag": z.lag,
            })
        })
        .collect();
    let lag = v.lag.as_ref().map(|l| {
        let partitions: Vec<Value> = l
            .partitions
            .iter()
            .map(|p| {
                json!({
                    "partition": p.partition,
                    "low": p.low,
                    "high": p.high,
                    "committed": p.committed,
                    "lag": crate::core::partition_lag(p.low, p.high, p.committed),
                })
            })
            .collect();
        json!({
            "at": iso8601(l.at_ms),
            "blue": l.halves[0],
            "green": l.halves[1],
            "partitions": partitions,
        })
    });
    json!({
        "group": v.group,
        "topic": v.topic,
        "partitions": v.partitions,
        "generation": v.generation,
        "routing_version": v.routing_version,
        "zones": zones,
        "members": members,
        "lag": lag,
        "lag_error": v.lag_error,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterRequest {
    member_id: Option<String>,
    zone: String,
    topic: String,
    partitions: u32,
}

#[post("/v1/lanes/<group>/members", data = "<request>")]
fn register(
    app: &State<App>,
    caller: Caller,
    group: &str,
    request: JsonBody<'_, RegisterRequest>,
) -> Result<(Status, Json<Value>), ApiError> {
    caller.require_reader(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let registration = Registration {
        member_id: r.member_id,
        zone: r.zone,
        topic: r.topic,
        partitions: r.partitions,
    };
    let view = app.lanes.register(group, registration, now_ms())?;
    Ok((Status::Created, Json(member_body(&view))))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct HeartbeatRequest {
    /// Partitions the member still reads (it has not released them yet).
    holding: Vec<u32>,
}

#[post("/v1/lanes/<group>/members/<member>/heartbeat", data = "<request>")]
fn heartbeat(
    app: &State<App>,
    caller: Caller,
    group: &str,
    member: &str,
    request: JsonBody<'_, HeartbeatRequest>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let holding: BTreeSet<u32> =
        request.map_err(json_error)?.into_inner().holding.into_iter().collect();
    let view = app.lanes.heartbeat(group, member, holding, now_ms())?;
    Ok(Json(member_body(&view)))
}

#[delete("/v1/lanes/<group>/members/<member>")]
fn leave(
    app: &State<App>,
    caller: Caller,
    group: &str,
    member: &str,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    app.lanes.leave(group, member, now_ms())?;
    Ok(Json(json!({ "left": member, "group": group })))
}

#[get("/v1/lanes/<group>")]
fn get_group(app: &State<App>, caller: Caller, group: &str) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    Ok(Json(group_body(&app.lanes.view(group, now_ms())?)))
}

#[get("/v1/lanes")]
fn get_groups(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let groups: Vec<Value> = app.lanes.views(now_ms()).iter().map(group_body).collect();
    Ok(Json(json!({ "reads_lag": app.lanes.reads_lag(), "groups": groups })))
}
