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
        Versioned::with_capacity(body, version, 0)
    }

    /// With the body's buffer sized up front (a batch answer would otherwise grow it by
    /// doubling, copying it about log2(size) times).
    fn with_capacity(body: &impl Serialize, version: u64, capacity: usize) -> Versioned {
        Versioned {
            body: json(body, capacity),
            version: Header::new("x-tidegate-version", version.to_string()),
        }
    }
}

/// `body` as compact JSON, written into a buffer of `capacity` bytes to start with.
fn json(body: &impl Serialize, capacity: usize) -> String {
    let mut out = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut out, body).expect("API bodies always serialise");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Room for a `GET /v1/tag` body with a long user ID and zone names, so it is not regrown.
const TAG_BODY_CAPACITY: usize = 192;
/// Per tag of a batch answer: `{"user_id":"…","color":"green","unit":99,"zone":"…","pinned":false},`
/// is 70 bytes plus the ID and the zone.
const BATCH_TAG_BYTES: usize = 72;

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
        body: json(&body, TAG_BODY_CAPACITY + user_id.map_or(0, str::len)),
        color: Header::new("x-tidegate-color", body.color),
        version: Header::new("x-tidegate-version", table.version().to_string()),
    })
}

/// The IDs borrow from the request body (Rocket keeps it for the request), so a batch of 10 000
/// IDs is not 10 000 allocations; an ID with a JSON escape in it is decoded into its own string.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchRequest<'r> {
    #[serde(borrow)]
    user_ids: Vec<Cow<'r, str>>,
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
    let mut bytes = 32;
    for (i, user_id) in request.user_ids.iter().enumerate() {
        let tag = validate_user_id(user_id).and_then(|()| table.tag(user_id)).map_err(|e| {
            ApiError::bad_request("invalid_user_id", format!("user_ids[{i}]: {e}"))
                .with("index", serde_json::json!(i))
        })?;
        counts[tag.color as usize] += 1;
        let zone = table.zone_of(tag.color);
        bytes += BATCH_TAG_BYTES + user_id.len() + zone.len();
        tags.push(BatchTag {
            user_id,
            color: tag.color.as_str(),
            unit: tag.unit.0,
            zone,
            pinned: tag.pinned,
        });
    }
    for color in Color::ALL {
        counters.count(color, counts[color as usize]);
    }
    let body = BatchBody { version: table.version(), tags };
    Ok(Versioned::with_capacity(&body, table.version(), bytes))
}
