//! OpenFeature Remote Evaluation Protocol (OFREP): `POST /ofrep/v1/evaluate/flags/{key}` and the
//! bulk `POST /ofrep/v1/evaluate/flags`, so OpenFeature SDKs in any language read the colour.
//!
//! The evaluation itself is `core::evaluate_color_flag` (pure); this module parses the request,
//! renders OFREP's bodies, and does the bulk endpoint's ETag / `If-None-Match` caching. The
//! coordinator mounts [`stage`]; `tidegate edge` mounts its own routes over the same functions.

use std::io::Cursor;

use rocket::fairing::AdHoc;
use rocket::http::{ContentType, Header, Status};
use rocket::request::{FromRequest, Outcome, Request};
use rocket::response::{self, Responder, Response};
use rocket::{State, post, routes};
use serde_json::{Map, Value, json};

use super::App;
use super::auth::Caller;
use super::error::{ApiError, OfrepError};
use crate::core::{
    Fallback, FlagError, FlagEvaluation, FlagReason, RoutingTable, TargetingKey,
    evaluate_color_flag, hash_user_id,
};
use crate::telemetry;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("openfeature", |rocket| async {
        rocket.mount("/", routes![evaluate_flag, evaluate_flags])
    })
}

/// What an OFREP endpoint answers.
pub enum Ofrep {
    /// 200 with a JSON body, and an ETag for cacheable bulk answers.
    Evaluated {
        body: Value,
        etag: Option<String>,
    },
    /// 304: the caller's `If-None-Match` is still current.
    NotModified {
        etag: String,
    },
    Failed(OfrepError),
    /// Authentication failed: an ordinary API error.
    Refused(ApiError),
}

impl<'r> Responder<'r, 'static> for Ofrep {
    fn respond_to(self, request: &'r Request<'_>) -> response::Result<'static> {
        match self {
            Ofrep::Evaluated { body, etag } => {
                let text = serde_json::to_string(&body).unwrap_or_default();
                let mut response = Response::build();
                response.header(ContentType::JSON).sized_body(text.len(), Cursor::new(text));
                if let Some(etag) = etag {
                    response.header(Header::new("ETag", etag));
                }
                response.ok()
            }
            Ofrep::NotModified { etag } => {
                Response::build().status(Status::NotModified).header(Header::new("ETag", etag)).ok()
            }
            Ofrep::Failed(e) => e.respond_to(request),
            Ofrep::Refused(e) => e.respond_to(request),
        }
    }
}

/// The `If-None-Match` header, if any.
pub struct IfNoneMatch(pub Option<String>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for IfNoneMatch {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        Outcome::Success(IfNoneMatch(request.headers().get_one("If-None-Match").map(str::to_owned)))
    }
}

#[post("/ofrep/v1/evaluate/flags/<key>", data = "<body>")]
fn evaluate_flag(app: &State<App>, caller: Caller, key: &str, body: String) -> Ofrep {
    if let Err(e) = caller.require_reader(&app.config) {
        return Ofrep::Refused(e);
    }
    let table = app.coordinator.table();
    one(Some(&table), &app.config.flag_key, app.config.fallback, key, &body)
}

#[post("/ofrep/v1/evaluate/flags", data = "<body>")]
fn evaluate_flags(
    app: &State<App>,
    caller: Caller,
    if_none_match: IfNoneMatch,
    body: String,
) -> Ofrep {
    if let Err(e) = caller.require_reader(&app.config) {
        return Ofrep::Refused(e);
    }
    let table = app.coordinator.table();
    bulk(Some(&table), &app.config.flag_key, app.config.fallback, &body, if_none_match.0.as_deref())
}

/// One flag: `key` evaluated for the context in `body`.
pub fn one(
    table: Option<&RoutingTable>,
    flag_key: &str,
    fallback: Fallback,
    key: &str,
    body: &str,
) -> Ofrep {
    let evaluated = context(Some(key), body).and_then(|context| {
        let table = table.ok_or_else(|| OfrepError::no_table(Some(key)))?;
        evaluate(table, flag_key, key, &context, fallback)
    });
    match evaluated {
        Ok(evaluation) => Ofrep::Evaluated { body: success(key, table, &evaluation), etag: None },
        Err(e) => Ofrep::Failed(e),
    }
}

/// Every flag (there is one, the colour) for the context in `body`, with an ETag naming the
/// routing version and the targeting key; a matching `If-None-Match` gets 304.
pub fn bulk(
    table: Option<&RoutingTable>,
    flag_key: &str,
    fallback: Fallback,
    body: &str,
    if_none_match: Option<&str>,
) -> Ofrep {
    let evaluated = context(None, body).and_then(|context| {
        let table = table.ok_or_else(|| OfrepError::no_table(None))?;
        let evaluation = evaluate(table, flag_key, flag_key, &context, fallback)
            .map_err(|e| OfrepError { key: None, ..e })?;
        Ok((context, evaluation))
    });
    let (context, evaluation) = match evaluated {
        Ok(found) => found,
        Err(e) => return Ofrep::Failed(e),
    };
    // A fallback answer is drawn at random: never cacheable. The ETag names the service too:
    // a channel makes the answer depend on it.
    let service = service_of(&context).ok().flatten().unwrap_or("");
    let etag = match (targeting_key(&context), evaluation.reason) {
        (_, FlagReason::Default) => None,
        (TargetingKey::Given(user_id), _) if service.is_empty() => {
            Some(format!("\"v{}-{:016x}\"", evaluation.version, hash_user_id(user_id)))
        }
        (TargetingKey::Given(user_id), _) => Some(format!(
            "\"v{}-{:016x}-{:016x}\"",
            evaluation.version,
            hash_user_id(user_id),
            hash_user_id(service)
        )),
        _ => None,
    };
    if let (Some(etag), Some(header)) = (&etag, if_none_match)
        && header.split(',').any(|tag| tag.trim().trim_start_matches("W/") == etag)
    {
        return Ofrep::NotModified { etag: etag.clone() };
    }
    let mut flags = vec![success(flag_key, table, &evaluation)];
    // One flag per named routing domain, for the same context.
    for domain in table.map(|t| t.domains().keys().cloned().collect::<Vec<_>>()).unwrap_or_default()
    {
        let key = format!("{flag_key}.{domain}");
        if let Some(t) = table
            && let Ok(e) = evaluate(t, flag_key, &key, &context, fallback)
        {
            flags.push(success(&key, table, &e));
        }
    }
    // The ETag names the version and user only: every domain's flag changes with the version.
    Ofrep::Evaluated { body: json!({ "flags": flags }), etag }
}

/// The evaluation context of an OFREP request body `{"context": {...}}`.
fn context(key: Option<&str>, body: &str) -> Result<Map<String, Value>, OfrepError> {
    let value: Value = serde_json::from_str(body).map_err(|e| {
        OfrepError::parse(key, format!("the body is not JSON ({e}); expected {{\"context\": {{\"targetingKey\": \"<user ID>\"}}}}"))
    })?;
    let Value::Object(mut object) = value else {
        return Err(OfrepError::parse(key, "the body must be a JSON object {\"context\": {...}}"));
    };
    match object.remove("context") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(context)) => Ok(context),
        Some(_) => Err(OfrepError::invalid_context(key, "`context` must be a JSON object")),
    }
}

fn targeting_key(context: &Map<String, Value>) -> TargetingKey<'_> {
    match context.get("targetingKey") {
        None | Some(Value::Null) => TargetingKey::Missing,
        // SDKs send an empty key when the application set none.
        Some(Value::String(key)) if key.is_empty() => TargetingKey::Missing,
        Some(Value::String(key)) => TargetingKey::Given(key),
        Some(_) => TargetingKey::NotAString,
    }
}

fn evaluate(
    table: &RoutingTable,
    flag_key: &str,
    requested: &str,
    context: &Map<String, Value>,
    fallback: Fallback,
) -> Result<FlagEvaluation, OfrepError> {
    let key = targeting_key(context);
    let service = service_of(context).map_err(|e| OfrepError::from_flag(Some(requested), &e))?;
    evaluate_color_flag(table, flag_key, requested, key, service, fallback, rand::random::<f64>())
        .map_err(|e| OfrepError::from_flag(Some(requested), &e))
}

/// The service a context names (`"service": "orders"`), whose release channel may decide.
fn service_of(context: &Map<String, Value>) -> Result<Option<&str>, FlagError> {
    match context.get("service") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if crate::core::valid_name(s) => Ok(Some(s)),
        Some(Value::String(s)) => Err(FlagError::InvalidContext(format!(
            "service: `{s}` is not a service name: 1-64 bytes of [a-z0-9_.-]"
        ))),
        Some(_) => Err(FlagError::InvalidContext("service must be a string".into())),
    }
}

fn success(key: &str, table: Option<&RoutingTable>, evaluation: &FlagEvaluation) -> Value {
    telemetry::count_ofrep(evaluation.reason.as_str());
    let color = table.map_or_else(
        || evaluation.color.default_lane().into_owned(),
        |t| t.lane(evaluation.color).to_owned(),
    );
    let mut metadata = Map::new();
    metadata.insert("version".into(), json!(evaluation.version));
    if let Some(table) = table {
        metadata.insert("zone".into(), json!(table.zone_of(evaluation.color)));
        let global = table.global();
        if let Some(zone) = global.zone {
            metadata.insert("globalWriter".into(), json!(table.zone_of(zone)));
        }
        metadata.insert("globalReadOnly".into(), json!(global.read_only));
    }
    if let Some(unit) = evaluation.unit {
        metadata.insert("unit".into(), json!(unit.0));
    }
    let pinned = evaluation.reason == FlagReason::TargetingMatch && evaluation.channel.is_none();
    metadata.insert("pinned".into(), json!(pinned));
    // Which rule decided, as the tag API's `reason` and the gate's `x-tidegate-source` say.
    let source = match (&evaluation.channel, evaluation.reason) {
        (Some(_), _) => "channel",
        (None, FlagReason::TargetingMatch) => "pin",
        (None, FlagReason::Split) => "unit",
        (None, FlagReason::Default) => "fallback",
    };
    metadata.insert("source".into(), json!(source));
    if let Some(channel) = &evaluation.channel {
        metadata.insert("channel".into(), json!(channel));
    }
    // A move in progress froze the user's unit: writes wait and retry, reads go on.
    if evaluation.write_frozen {
        metadata.insert("writeFrozen".into(), json!(true));
        metadata.insert("retryAfterMs".into(), json!(crate::core::WRITE_RETRY_AFTER_MS));
    }
    json!({
        "key": key,
        "value": color,
        "variant": color,
        "reason": evaluation.reason.as_str(),
        "metadata": metadata,
    })
}
