//! Liveness, readiness and the Prometheus scrape endpoint.

use std::time::Duration;

use rocket::fairing::AdHoc;
use rocket::http::{ContentType, Status};
use rocket::serde::json::Json;
use rocket::{State, get, routes};
use serde_json::{Value, json};

use super::App;
use super::error::ApiError;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("health", |rocket| async {
        rocket.mount("/", routes![healthz, readyz, metrics]).attach(AdHoc::on_liftoff(
            "zone health gauges",
            |rocket| {
                Box::pin(async move {
                    let app = rocket.state::<App>().expect("App state is managed");
                    let health = std::sync::Arc::clone(&app.health);
                    let capacities = std::sync::Arc::clone(&app.capacities);
                    let coordinator = std::sync::Arc::clone(&app.coordinator);
                    let every = Duration::from_millis(app.config.health.publish_interval_ms);
                    let mut shutdown = rocket.shutdown();
                    rocket::tokio::spawn(async move {
                        let mut ticker = rocket::tokio::time::interval(every);
                        loop {
                            rocket::tokio::select! {
                                _ = ticker.tick() => {}
                                _ = &mut shutdown => return,
                            }
                            // Reading a zone publishes its gauges; the Prometheus source does
                            // HTTP, hence the blocking thread.
                            let health = std::sync::Arc::clone(&health);
                            let capacities = std::sync::Arc::clone(&capacities);
                            let table = coordinator.table();
                            let _ = rocket::tokio::task::spawn_blocking(move || {
                                let now = super::now_ms();
                                // Every live zone of the table (not only the first two).
                                for zone in table.zones().live() {
                                    health.zone(table.zone_of(zone), now);
                                }
                                // The standing capacity question: could the other zones take
                                // each zone's users now? (A zone without a capacity is not asked.)
                                for (to, from, can) in capacities.can_absorb(&table, now) {
                                    crate::telemetry::publish_can_absorb(
                                        table.zone_of(to),
                                        table.zone_of(from),
                                        can,
                                    );
                                }
                            })
                            .await;
                        }
                    });
                })
            },
        ))
    })
}

/// The process is up and answering.
#[get("/healthz")]
fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The process can accept changes: its log is writable (a file log that has not failed a write;
/// on a shared log, a replica that reads the log, has not stopped at an unreadable record, has
/// confirmed its table through the log within the lease, and whose brokers could acknowledge an
/// append). Tagging and reads keep working when it is not;
/// `/healthz` is the liveness of those.
#[get("/readyz")]
async fn readyz(app: &State<App>) -> Result<Json<Value>, ApiError> {
    let table = app.coordinator.table();
    let coordinator = std::sync::Arc::clone(&app.coordinator);
    let lease_ms = app.config.lease.lease_ms;
    let readiness = rocket::tokio::task::spawn_blocking(move || {
        coordinator.write_readiness(lease_ms, super::now_ms())
    })
    .await
    .unwrap_or_else(|e| Err(format!("the readiness check failed: {e}")));
    match readiness {
        Ok(()) => Ok(Json(json!({
            "status": "ready",
            "version": table.version(),
            "log": app.coordinator.log_description(),
        }))),
        Err(why) => Err(ApiError::new(
            Status::ServiceUnavailable,
            "store_unavailable",
            format!(
                "changes cannot be accepted now ({}: {why}); tagging and reads continue at version {}",
                app.coordinator.log_description(),
                table.version()
            ),
        )),
    }
}

#[get("/metrics")]
fn metrics(app: &State<App>) -> (ContentType, String) {
    let text = ContentType::new("text", "plain").with_params([("version", "0.0.4")]);
    app.subscribers.publish(super::now_ms(), app.coordinator.state().version());
    (text, app.metrics.render())
}
