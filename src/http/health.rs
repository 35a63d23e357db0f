//! Liveness, readiness and the Prometheus scrape endpoint.

use rocket::fairing::AdHoc;
use rocket::http::{ContentType, Status};
use rocket::serde::json::Json;
use rocket::{State, get, routes};
use serde_json::{Value, json};

use super::App;
use super::error::ApiError;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("health", |rocket| async {
        rocket.mount("/", routes![healthz, readyz, metrics])
    })
}

/// The process is up and answering.
#[get("/healthz")]
fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The process can accept changes: its log is writable. Tagging keeps working when it is not.
#[get("/readyz")]
fn readyz(app: &State<App>) -> Result<Json<Value>, ApiError> {
    let table = app.coordinator.table();
    if app.coordinator.is_healthy() {
        Ok(Json(json!({
            "status": "ready",
            "version": table.version(),
            "log": app.coordinator.log_description(),
        })))
    } else {
        Err(ApiError::new(
            Status::ServiceUnavailable,
            "store_unavailable",
            format!(
                "a write to the command log ({}) failed; tagging continues at version {}, changes are refused until restart",
                app.coordinator.log_description(),
                table.version()
            ),
        ))
    }
}

#[get("/metrics")]
fn metrics(app: &State<App>) -> (ContentType, String) {
    let text = ContentType::new("text", "plain").with_params([("version", "0.0.4")]);
    (text, app.metrics.render())
}
