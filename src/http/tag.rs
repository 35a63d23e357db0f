//! `GET /v1/tag` and `POST /v1/tag`: which colour a user belongs to. The hot path.
//!
//! The answers are built by `service::tag_answer` (no Rocket there), which the fast listener
//! (`http_fast`) calls too: these routes only guard, parse and wrap its `Answer` in Rocket's
//! response types.

use std::borrow::Cow;

use rocket::fairing::AdHoc;
use rocket::http::Header;
use rocket::http::uri::Origin;
use rocket::serde::json::Json;
use rocket::{Responder, State, get, post, routes};
use serde::Serialize;

use super::App;
use super::auth::Caller;
use super::error::{ApiError, json_error};
use crate::core::{Fallback, RoutingTable};
use crate::service::tag_answer::{self, Answer};
use crate::telemetry::TagCounters;

pub(crate) use crate::service::tag_answer::BatchRequest;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("tagging", |rocket| async { rocket.mount("/", routes![tag_one, tag_batch]) })
}

/// A JSON body carrying the routing version it was computed from.
#[derive(Responder)]
#[response(content_type = "json")]
pub(crate) struct Versioned {
    body: String,
    version: Header<'static>,
}

impl Versioned {
    pub(crate) fn new(body: &impl Serialize, version: u64) -> Versioned {
        Versioned {
            body: tag_answer::json(body, 0),
            version: Header::new("x-tidegate-version", version.to_string()),
        }
    }

    /// An answer rendered before (an idempotent retry's first answer).
    pub(crate) fn rendered(body: String, version: u64) -> Versioned {
        Versioned { body, version: Header::new("x-tidegate-version", version.to_string()) }
    }

    pub(crate) fn body(&self) -> &str {
        &self.body
    }
}

impl From<Answer> for Versioned {
    fn from(answer: Answer) -> Versioned {
        Versioned {
            body: answer.body,
            version: Header::new("x-tidegate-version", answer.version.to_string()),
        }
    }
}

#[derive(Responder)]
#[response(content_type = "json")]
pub(crate) struct Tagged {
    body: String,
    color: Header<'static>,
    version: Header<'static>,
}

impl From<Answer> for Tagged {
    fn from(answer: Answer) -> Tagged {
        Tagged {
            body: answer.body,
            color: Header::new("x-tidegate-color", answer.color.unwrap_or_default()),
            version: Header::new("x-tidegate-version", answer.version.to_string()),
        }
    }
}

/// The `user_id` query parameter, decoded strictly (`service::tag_answer::user_id_param`).
pub(crate) fn user_id_param<'q>(origin: &'q Origin<'_>) -> Result<Option<Cow<'q, str>>, ApiError> {
    Ok(tag_answer::user_id_param(origin.query().map(|q| q.as_str()))?)
}

#[get("/v1/tag")]
fn tag_one(app: &State<App>, caller: Caller, origin: &Origin<'_>) -> Result<Tagged, ApiError> {
    caller.require_reader(&app.config)?;
    let user_id = user_id_param(origin)?;
    let query = origin.query().map(|q| q.as_str());
    let domain = tag_answer::domain_param(query)?;
    let service = tag_answer::service_param(query)?;
    tag_one_with(
        &app.coordinator.table(),
        app.config.fallback,
        &app.tag_counters,
        user_id.as_deref(),
        domain.as_deref(),
        service.as_deref(),
    )
}

/// `GET /v1/tag` against `table`: shared by the coordinator and the edge.
pub(crate) fn tag_one_with(
    table: &RoutingTable,
    fallback: Fallback,
    counters: &TagCounters,
    user_id: Option<&str>,
    domain: Option<&str>,
    service: Option<&str>,
) -> Result<Tagged, ApiError> {
    Ok(tag_answer::tag_one(table, fallback, counters, user_id, domain, service)?.into())
}

#[post("/v1/tag", data = "<request>")]
fn tag_batch(
    app: &State<App>,
    caller: Caller,
    request: Result<Json<BatchRequest<'_>>, rocket::serde::json::Error<'_>>,
) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    tag_batch_with(&app.coordinator.table(), app.config.max_batch, &app.tag_counters, &request)
}

/// `POST /v1/tag` against `table`: shared by the coordinator and the edge.
pub(crate) fn tag_batch_with(
    table: &RoutingTable,
    max: usize,
    counters: &TagCounters,
    request: &BatchRequest<'_>,
) -> Result<Versioned, ApiError> {
    Ok(tag_answer::tag_batch(table, max, counters, request)?.into())
}
