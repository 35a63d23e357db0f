//! `GET /v1/cluster`: which log this coordinator serves from, and which replica answers.
//!
//! Replicas do not announce themselves to each other yet (see ARCHITECTURE.md, "Replicas"), so
//! `replicas` lists this replica only; every replica of one log reports the same `log.id`, and
//! `log.state_hash` is equal on replicas that applied the same records.

use rocket::fairing::AdHoc;
use rocket::serde::json::Json;
use rocket::{State, get, routes};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::ApiError;
use super::{App, iso8601, now_ms};

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("cluster", |rocket| async { rocket.mount("/", routes![get_cluster]) })
}

#[get("/v1/cluster")]
fn get_cluster(app: &State<App>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let log = app.coordinator.log_status();
    let node = app.config.node.as_ref();
    let myself = json!({
        "id": node.map(|n| n.id.as_str()),
        "zone": node.map(|n| n.zone.as_str()),
        "url": node.map(|n| n.url.as_str()),
        "applied_version": app.coordinator.state().version(),
        "applied_position": log.next_position,
        "last_seen": iso8601(now_ms()),
    });
    Ok(Json(json!({
        "log": {
            "kind": log.kind,
            "id": log.id,
            "where": log.description,
            "next_position": log.next_position,
            "state_hash": log.state_hash.map(|h| format!("{h:016x}")),
        },
        "self": node.map(|n| n.id.as_str()),
        "replicas": [myself],
        // The drain runner needs no lease (compare-and-set in the log); lane membership does
        // (ARCHITECTURE.md, "Architecture invariant (replicas)").
        "leases": leases(app),
    })))
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
