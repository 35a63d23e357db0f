//! MQ lane membership over HTTP: register, heartbeat, leave, and the group view with lag.
//!
//! Members learn assignment changes from their heartbeat answer (no long-poll): they must
//! heartbeat anyway, and the answer is small.
//!
//! Membership decides who reads which partitions, so register, heartbeat and leave need a
//! writer (a service token or an operator). Registration answers a fresh, random member ID and
//! its secret (`service::member_key`); heartbeat and leave must present that secret in the
//! `X-Tidegate-Member-Secret` header, so holding a token is not enough to speak for another
//! consumer's member.

use std::collections::BTreeSet;
use std::sync::Arc;

use rocket::fairing::AdHoc;
use rocket::http::Status;
use rocket::request::{FromRequest, Outcome, Request};
use rocket::serde::json::Json;
use rocket::{State, delete, get, post, routes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{ApiError, json_error};
use super::{App, iso8601, now_ms};
use crate::service::lane_authority;
use crate::service::lane_membership::{self, Adoption, GroupView, MemberView, Registration};
use crate::service::member_key::{MAX_NAME, SECRET_HEADER, Verified, new_member_id};

type JsonBody<'r, T> = Result<Json<T>, rocket::serde::json::Error<'r>>;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("lanes", |rocket| async {
        rocket.mount("/", routes![register, heartbeat, leave, get_group, get_groups]).attach(
            AdHoc::on_liftoff("lane runner", |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let shutdown = rocket.shutdown();
                    let presence = Arc::clone(&app.presence);
                    rocket::tokio::spawn(lane_authority::run(
                        Arc::clone(app.lanes.authority()),
                        Arc::clone(&app.coordinator),
                        now_ms,
                        move || presence.id_checked(),
                        rocket.shutdown(),
                    ));
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
                "color": z.lane,
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
            "by_lane": v
                .zones
                .iter()
                .map(|z| (z.lane.clone(), json!(l.halves.get(z.color.index()).copied().unwrap_or(0))))
                .collect::<serde_json::Map<String, Value>>(),
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

/// The `X-Tidegate-Member-Secret` header of a heartbeat or leave.
struct MemberSecret(Option<String>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for MemberSecret {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        Outcome::Success(MemberSecret(request.headers().get_one(SECRET_HEADER).map(str::to_owned)))
    }
}

/// Checks that the caller speaks for `member`: 401 without a secret, 403 with a wrong one.
/// Answers which key made it (during a `lanes.previous_member_key` rotation, maybe the old one).
fn check_secret(
    app: &App,
    group: &str,
    member: &str,
    secret: &MemberSecret,
) -> Result<Verified, ApiError> {
    let Some(presented) = &secret.0 else {
        return Err(ApiError::new(
            Status::Unauthorized,
            "member_secret_required",
            format!(
                "heartbeat and leave must carry the member's secret from its registration in the {SECRET_HEADER} header"
            ),
        ));
    };
    match app.member_key.verify_which(group, member, presented) {
        Verified::No => Err(ApiError::new(
            Status::Forbidden,
            "member_secret_mismatch",
            format!(
                "the {SECRET_HEADER} header is not the secret of member `{member}` in group `{group}`"
            ),
        )),
        verified => Ok(verified),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterRequest {
    /// A readable prefix for the member ID (default: the zone); the coordinator appends 64
    /// random bits, so the ID is new on every registration.
    name: Option<String>,
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
    let owner = caller.require_writer(&app.config)?;
    let r = request.map_err(json_error)?.into_inner();
    let name = r.name.as_deref().unwrap_or(&r.zone);
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(ApiError::bad_request(
            "invalid_name",
            format!("`name` must be 1-{MAX_NAME} characters of a-z, A-Z, 0-9, `-`, `_`, `.`"),
        ));
    }
    let registration = Registration {
        member_id: Some(new_member_id(name)),
        owner,
        zone: r.zone,
        topic: r.topic,
        partitions: r.partitions,
    };
    let view = app.lanes.register(group, registration, now_ms())?;
    let mut body = member_body(&view);
    body["member_secret"] = json!(app.member_key.secret(group, &view.member_id));
    Ok((Status::Created, Json(body)))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct HeartbeatRequest {
    /// Partitions the member still reads (it has not released them yet).
    holding: Vec<u32>,
    /// What the member reads, as in its registration: lets a lane authority that took over
    /// from another replica adopt the member (all three, or none).
    zone: Option<String>,
    topic: Option<String>,
    partitions: Option<u32>,
}

#[post("/v1/lanes/<group>/members/<member>/heartbeat", data = "<request>")]
fn heartbeat(
    app: &State<App>,
    caller: Caller,
    group: &str,
    member: &str,
    secret: MemberSecret,
    request: JsonBody<'_, HeartbeatRequest>,
) -> Result<Json<Value>, ApiError> {
    let owner = caller.require_writer(&app.config)?;
    let verified = check_secret(app, group, member, &secret)?;
    let r = request.map_err(json_error)?.into_inner();
    let holding: BTreeSet<u32> = r.holding.into_iter().collect();
    let adopt = match (r.zone, r.topic, r.partitions) {
        (Some(zone), Some(topic), Some(partitions)) => {
            Some(Adoption { owner, zone, topic, partitions })
        }
        (None, None, None) => None,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_heartbeat",
                "`zone`, `topic` and `partitions` go together: send all three or none",
            ));
        }
    };
    let view = app.lanes.heartbeat(group, member, holding, adopt, now_ms())?;
    let mut body = member_body(&view);
    // A secret made with the key being rotated out: hand the member its secret under the new
    // key, which it presents from its next heartbeat (tidegate_client's LaneConsumer does).
    if verified == Verified::Previous {
        body["member_secret"] = json!(app.member_key.secret(group, member));
    }
    Ok(Json(body))
}

#[delete("/v1/lanes/<group>/members/<member>")]
fn leave(
    app: &State<App>,
    caller: Caller,
    group: &str,
    member: &str,
    secret: MemberSecret,
) -> Result<Json<Value>, ApiError> {
    caller.require_writer(&app.config)?;
    check_secret(app, group, member, &secret)?;
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
    // A follower lists no groups: it says which replica does, so the UI can link it.
    let authority = match app.lanes.authority().current() {
        Ok(_) => Value::Null,
        Err(not) => json!({ "id": not.holder, "url": not.url }),
    };
    Ok(Json(
        json!({ "reads_lag": app.lanes.reads_lag(), "authority": authority, "groups": groups }),
    ))
}
