//! The one place where errors become HTTP statuses and `{"error", "detail"}` bodies.

use std::io::Cursor;

use rocket::http::{ContentType, Status};
use rocket::request::Request;
use rocket::response::{self, Responder, Response};
use rocket::serde::json::serde_json::{self, Map, Value, json};
use rocket::{Catcher, catch, catchers};

use crate::core::{CommandError, TagError, UnitError};
use crate::service::coordinator::SubmitError;
use crate::service::lane_membership::LanesError;
use crate::store::StoreError;
use crate::telemetry;

/// An API error: a status, a stable machine-readable code and a sentence for humans.
#[derive(Debug)]
pub struct ApiError {
    pub status: Status,
    pub code: &'static str,
    pub detail: String,
    /// Extra fields merged into the body (e.g. `current_version` on a conflict).
    pub extra: Map<String, Value>,
}

impl ApiError {
    pub fn new(status: Status, code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError { status, code, detail: detail.into(), extra: Map::new() }
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError::new(Status::BadRequest, code, detail)
    }

    pub fn with(mut self, key: &str, value: Value) -> ApiError {
        self.extra.insert(key.to_owned(), value);
        self
    }

    pub fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.code));
        body.insert("detail".into(), json!(self.detail));
        body.extend(self.extra.clone());
        Value::Object(body)
    }
}

impl<'r> Responder<'r, 'static> for ApiError {
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'static> {
        telemetry::count_api_error(self.code);
        let body = serde_json::to_string(&self.body()).unwrap_or_default();
        Response::build()
            .status(self.status)
            .header(ContentType::JSON)
            .sized_body(body.len(), Cursor::new(body))
            .ok()
    }
}

impl From<UnitError> for ApiError {
    fn from(e: UnitError) -> ApiError {
        ApiError::bad_request("invalid_user_id", e.to_string())
    }
}

impl From<TagError> for ApiError {
    fn from(e: TagError) -> ApiError {
        match e {
            TagError::InvalidUserId(e) => e.into(),
            TagError::Untagged => ApiError::bad_request("missing_user_id", e.to_string()),
        }
    }
}

impl From<CommandError> for ApiError {
    fn from(e: CommandError) -> ApiError {
        let detail = e.to_string();
        match e {
            CommandError::VersionConflict { current, expected } => {
                ApiError::new(Status::Conflict, "version_conflict", detail)
                    .with("current_version", json!(current))
                    .with("expected_version", json!(expected))
            }
            CommandError::Dial(_) => ApiError::bad_request("invalid_dial", detail),
            CommandError::InvalidUserId(_) => ApiError::bad_request("invalid_user_id", detail),
            CommandError::PinNotFound(_) => {
                ApiError::new(Status::NotFound, "pin_not_found", detail)
            }
            CommandError::TooManyPins => ApiError::new(Status::Conflict, "too_many_pins", detail),
            CommandError::MissingReason | CommandError::ReasonTooLong(_) => {
                ApiError::bad_request("invalid_reason", detail)
            }
            CommandError::DrainRunning(id) | CommandError::DrainActive(id) => {
                ApiError::new(Status::Conflict, "drain_active", detail).with("drain_id", json!(id))
            }
            CommandError::DrainNotFound(_) => {
                ApiError::new(Status::NotFound, "drain_not_found", detail)
            }
            CommandError::DrainFinished { .. } | CommandError::DrainNotRunning { .. } => {
                ApiError::new(Status::Conflict, "drain_state", detail)
            }
            CommandError::DrainStepMismatch { .. } => {
                ApiError::new(Status::Conflict, "drain_state", detail)
            }
            CommandError::InvalidDrain(_) => ApiError::bad_request("invalid_drain", detail),
            CommandError::MissingActor => {
                ApiError::new(Status::InternalServerError, "internal", detail)
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        if let StoreError::OutcomeUnknown { command_id, .. } = &e {
            let command_id = command_id.clone();
            return ApiError::new(Status::ServiceUnavailable, "outcome_unknown", e.to_string())
                .with("command_id", json!(command_id));
        }
        ApiError::new(
            Status::ServiceUnavailable,
            "store_unavailable",
            format!("the change was not saved: {e}"),
        )
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        match e {
            SubmitError::Command(e) => e.into(),
            SubmitError::Store(e) => e.into(),
            SubmitError::NotApplied { ref command_id, .. } => {
                let command_id = command_id.clone();
                ApiError::new(Status::GatewayTimeout, "not_yet_applied", e.to_string())
                    .with("command_id", json!(command_id))
            }
        }
    }
}

impl From<LanesError> for ApiError {
    fn from(e: LanesError) -> ApiError {
        let detail = e.to_string();
        match e {
            LanesError::InvalidName { .. } => ApiError::bad_request("invalid_name", detail),
            LanesError::UnknownZone { .. } => ApiError::bad_request("unknown_zone", detail),
            LanesError::Lane(_) => ApiError::bad_request("invalid_lane", detail),
            LanesError::BadHolding { .. } => ApiError::bad_request("invalid_holding", detail),
            LanesError::GroupMismatch { .. } => {
                ApiError::new(Status::Conflict, "lane_mismatch", detail)
            }
            LanesError::GroupNotFound(_) => {
                ApiError::new(Status::NotFound, "group_not_found", detail)
            }
            LanesError::MemberNotFound { .. } => {
                ApiError::new(Status::NotFound, "member_not_found", detail)
            }
            LanesError::TooManyGroups(_) | LanesError::TooManyMembers { .. } => {
                ApiError::new(Status::Conflict, "too_many_members", detail)
            }
        }
    }
}

/// Maps a JSON body that failed to parse or was too large.
pub fn json_error(e: rocket::serde::json::Error<'_>) -> ApiError {
    match e {
        rocket::serde::json::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            ApiError::new(
                Status::PayloadTooLarge,
                "body_too_large",
                "the request body is larger than the configured limit (limits.max_body_bytes)",
            )
        }
        rocket::serde::json::Error::Io(io) => {
            ApiError::bad_request("invalid_body", format!("could not read the body: {io}"))
        }
        rocket::serde::json::Error::Parse(_, e) => {
            ApiError::bad_request("invalid_json", format!("the body is not the expected JSON: {e}"))
        }
    }
}

#[catch(default)]
fn default_catcher(status: Status, request: &Request<'_>) -> ApiError {
    let (code, detail) = match status.code {
        404 => ("not_found", format!("no route for {} {}", request.method(), request.uri().path())),
        405 => ("method_not_allowed", format!("{} is not allowed here", request.method())),
        413 => ("body_too_large", "the request body is larger than the configured limit".into()),
        400 | 422 => ("bad_request", "the request could not be understood".into()),
        401 => ("unauthorized", "a valid bearer token is required".into()),
        403 => ("forbidden", "the token's role does not allow this".into()),
        s if s >= 500 => ("internal", "tidegate failed to handle the request; see its log".into()),
        _ => ("error", status.reason_lossy().to_owned()),
    };
    ApiError::new(status, code, detail)
}

pub fn catchers() -> Vec<Catcher> {
    catchers![default_catcher]
}
