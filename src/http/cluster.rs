//! `GET /v1/cluster`: which log this coordinator serves from, which replica answers, and every
//! replica it has heard from on the presence topic (`service::presence`), with how far behind
//! each is and which are lost. The file-log single node lists itself only.
//!
//! The body is built from [`Cluster`], one field per section, so that a section (such as
//! `leases`) can be filled in without touching the others.

use rocket::fairing::AdHoc;
use rocket::serde::json::Json;
use rocket::{State, get, routes};
use serde::Serialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::ApiError;
use super::{App, iso8601, now_ms};
use crate::service::presence::ReplicaView;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("cluster", |rocket| async { rocket.mount("/", routes![get_cluster]) })
}

/// The answer of `GET /v1/cluster`.
#[derive(Serialize)]
struct Cluster {
    log: LogSection,
    #[serde(rename = "self")]
    myself: Option<String>,
    replicas: Vec<Replica>,
    leases: Value,
}

#[derive(Serialize)]
struct LogSection {
    kind: &'static str,
    id: String,
    #[serde(rename = "where")]
    location: String,
    next_position: Option<u64>,
    state_hash: Option<String>,
    /// The routing version this replica has applied (the shared log only).
    state_version: Option<u64>,
}

#[derive(Serialize)]
struct Replica {
    #[serde(flatten)]
    view: ReplicaView,
    /// `last_seen_ms` and `started_at_ms` as RFC 3339, for people.
    last_seen: String,
    started_at: Option<String>,
}

#[get("/v1/cluster")]
fn get_cluster(app: &State<App>, caller: Caller) -> Result<Json<Cluster>, ApiError> {
    caller.require_reader(&app.config)?;
    let log = app.coordinator.log_status();
    let replicas = app
        .presence
        .replicas(now_ms())
        .into_iter()
        .map(|view| Replica {
            last_seen: iso8601(view.last_seen_ms),
            started_at: view.started_at_ms.map(iso8601),
            view,
        })
        .collect();
    Ok(Json(Cluster {
        log: LogSection {
            kind: log.kind,
            id: log.id,
            location: log.description,
            next_position: log.next_position,
            state_hash: log.state_hash.map(|h| format!("{h:016x}")),
            state_version: log.state_version,
        },
        myself: app.config.node.as_ref().map(|n| n.id.clone()),
        replicas,
        leases: leases(app),
    }))
}

/// The leases as this replica has applied them: holder, its URL and when the term ends.
fn leases(app: &App) -> Value {
    let mut leases = serde_json::Map::new();
    let name = crate::service::lane_authority::LANES_LEASE;
    if let Some(lease) = app.coordinator.lease(name) {
        leases.insert(
            name.to_owned(),
            json!({
                "holder": lease.holder,
                "url": lease.url,
                "until": iso8601(lease.until_ms),
                "this_replica_acts": app.lanes.authority().current().is_ok(),
            }),
        );
    }
    Value::Object(leases)
}
