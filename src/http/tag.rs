//! `GET /v1/tag` and `POST /v1/tag`: which colour a user belongs to. The hot path.

use std::borrow::Cow;
use std::time::Instant;

use rocket::fairing::AdHoc;
use rocket::http::Header;
use rocket::http::uri::Origin;
use rocket::serde::json::Json;
use rocket::{Responder, State, get, post, routes};
use serde::{Deserialize, Serialize};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, json_error};
use crate::core::{Color, Fallback, RoutingTable, validate_user_id};
use crate::telemetry::TagCounters;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("tagging", |rocket| async { rocket.mount("/", routes![tag_one, tag_batch]) })
}

#[derive(Serialize)]
struct TagBody<'a> {
    #[serde(skip)]
    color_value: Color,
    user_id: Option<&'a str>,
    color: &'static str,
    unit: Option<u32>,
    zone: &'a str,
    version: u64,
    pinned: bool,
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
            body: serde_json::to_string(body).expect("API bodies always serialise"),
            version: Header::new("x-tidegate-version", version.to_string()),
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

/// The `user_id` query parameter, decoded strictly. Rocket's own form decoding would replace
/// bytes that are not UTF-8 with U+FFFD (so all such IDs would collide) and turn a repeated
/// parameter into "none given" (a random colour); both are 400 here.
pub(crate) fn user_id_param<'q>(origin: &'q Origin<'_>) -> Result<Option<Cow<'q, str>>, ApiError> {
    let mut found = None;
    for segment in origin.query().into_iter().flat_map(|q| q.raw_segments()) {
        let (name, value) = segment.split_at_byte(b'=');
        if name.as_str() != "user_id" {
            continue;
        }
        if found.is_some() {
            return Err(ApiError::bad_request(
                "invalid_user_id",
                "user_id is given more than once; give exactly one",
            ));
        }
        let decoded = value.url_decode().map_err(|_| {
            ApiError::bad_request(
                "invalid_user_id",
                "user_id is not valid UTF-8 once percent-decoded",
            )
        })?;
        found = Some(decoded);
    }
    Ok(found)
}

#[get("/v1/tag")]
fn tag_one(app: &State<App>, caller: Caller, origin: &Origin<'_>) -> Result<Tagged, ApiError> {
    caller.require_reader(&app.config)?;
    let user_id = user_id_param(origin)?;
    tag_one_with(
        &app.coordinator.table(),
        app.config.fallback,
        &app.tag_counters,
        user_id.as_deref(),
    )
}

/// `GET /v1/tag` against `table`: shared by the coordinator and the edge.
pub(crate) fn tag_one_with(
    table: &RoutingTable,
    fallback: Fallback,
    counters: &TagCounters,
    user_id: Option<&str>,
) -> Result<Tagged, ApiError> {
    let started = counters.sample_timing().then(Instant::now);
    let body = match user_id {
        Some(user_id) => {
            validate_user_id(user_id)?;
            let tag = table.tag(user_id)?;
            TagBody {
                color_value: tag.color,
                user_id: Some(user_id),
                color: tag.color.as_str(),
                unit: Some(tag.unit.0),
                zone: table.zone_of(tag.color),
                version: table.version(),
                pinned: tag.pinned,
            }
        }
        None => {
            let color = table.untagged(fallback, rand::random::<f64>())?;
            TagBody {
                color_value: color,
                user_id: None,
                color: color.as_str(),
                unit: None,
                zone: table.zone_of(color),
                version: table.version(),
                pinned: false,
            }
        }
    };
    counters.count(body.color_value, 1);
    if let Some(started) = started {
        counters.time(started.elapsed().as_secs_f64());
    }
    Ok(Tagged {
        body: serde_json::to_string(&body).expect("tag bodies always serialise"),
        color: Header::new("x-tidegate-color", body.color),
        version: Header::new("x-tidegate-version", table.version().to_string()),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchRequest {
    user_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchTag<'a> {
    user_id: &'a str,
    color: &'static str,
    unit: u32,
    zone: &'a str,
    pinned: bool,
}

#[derive(Serialize)]
struct BatchBody<'a> {
    version: u64,
    tags: Vec<BatchTag<'a>>,
}

#[post("/v1/tag", data = "<request>")]
fn tag_batch(
    app: &State<App>,
    caller: Caller,
    request: Result<Json<BatchRequest>, rocket::serde::json::Error<'_>>,
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
    request: &BatchRequest,
) -> Result<Versioned, ApiError> {
    if request.user_ids.len() > max {
        return Err(ApiError::bad_request(
            "batch_too_large",
            format!(
                "{} user_ids given; at most {max} are allowed per request",
                request.user_ids.len()
            ),
        ));
    }
    let mut tags = Vec::with_capacity(request.user_ids.len());
    let mut counts = [0u64; 2];
    for (i, user_id) in request.user_ids.iter().enumerate() {
        let tag = validate_user_id(user_id).and_then(|()| table.tag(user_id)).map_err(|e| {
            ApiError::bad_request("invalid_user_id", format!("user_ids[{i}]: {e}"))
                .with("index", serde_json::json!(i))
        })?;
        counts[tag.color as usize] += 1;
        tags.push(BatchTag {
            user_id,
            color: tag.color.as_str(),
            unit: tag.unit.0,
            zone: table.zone_of(tag.color),
            pinned: tag.pinned,
        });
    }
    for color in Color::ALL {
        counters.count(color, counts[color as usize]);
    }
    Ok(Versioned::new(&BatchBody { version: table.version(), tags }, table.version()))
}
