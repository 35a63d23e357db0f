//! The one place where errors become HTTP statuses and `{"error", "detail"}` bodies.

use std::io::Cursor;

use rocket::http::{ContentType, Status};
use rocket::request::Request;
use rocket::response::{self, Responder, Response};
use rocket::serde::json::serde_json::{self, Map, Value, json};
use rocket::{Catcher, catch, catchers};

use crate::core::{CommandError, TagError, UnitError, Verdict};
use crate::service::coordinator::SubmitError;
use crate::service::lane_membership::LanesError;
use crate::service::plan_start::StartError;
use crate::service::tag_answer::{self, Failure};
use crate::store::StoreError;
use crate::telemetry;

/// An API error: a status, a stable machine-readable code and a sentence for humans.
#[derive(Clone, Debug, PartialEq, Eq)]
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

    /// 409 `insufficient_capacity`: a dial change that would overload (or cannot be judged
    /// against) the receiving zone. The detail gives projected and allowed load.
    pub fn insufficient_capacity(verdict: &Verdict) -> ApiError {
        let error = ApiError::new(
            Status::Conflict,
            "insufficient_capacity",
            format!("{}; send \"force\": true to move anyway (audited)", verdict.explain()),
        );
        match verdict {
            Verdict::Fits(p) | Verdict::Exceeds(p) => error
                .with("zone", json!(p.zone))
                .with("projected_rps", json!(p.projected_rps))
                .with("allowed_rps", json!(p.allowed_rps)),
            Verdict::Unknown { zone, .. } => error
                .with("zone", json!(zone))
                .with("projected_rps", Value::Null)
                .with("allowed_rps", Value::Null),
            Verdict::Unchecked => error,
        }
    }

    /// The same object the fast listener answers with (`service::tag_answer::error_body`).
    pub fn body(&self) -> Value {
        tag_answer::error_body(self.code, &self.detail, &self.extra)
    }
}

/// The tag path's framework-free failures (shared with the fast listener).
impl From<Failure> for ApiError {
    fn from(f: Failure) -> ApiError {
        let status = Status::from_code(f.status).unwrap_or(Status::InternalServerError);
        ApiError { status, code: f.code, detail: f.detail, extra: f.extra }
    }
}

impl<'r> Responder<'r, 'static> for ApiError {
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'static> {
        telemetry::count_api_error(self.code);
        let body = serde_json::to_string(&self.body()).unwrap_or_default();
        let mut response = Response::build();
        response.status(self.status).header(ContentType::JSON);
        // An error that says when to come back says it in the header too.
        if let Some(seconds) = self.extra.get("retry_after_seconds").and_then(Value::as_u64) {
            response.raw_header("Retry-After", seconds.to_string());
        }
        // A write refused as busy says why in a header too, so a gateway that cannot read the
        // body (nginx `auth_request`) can tell it from an edge that failed.
        if self.code == "frozen" {
            response.raw_header("x-tidegate-refusal", self.code);
        }
        response.sized_body(body.len(), Cursor::new(body)).ok()
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
            TagError::ChannelUnavailable(_) => {
                ApiError::new(Status::ServiceUnavailable, "channel_unavailable", e.to_string())
            }
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
            CommandError::NeedsTwoZones(_) => {
                ApiError::new(Status::Conflict, "needs_two_zones", detail)
            }
            CommandError::Zone(z) => match z {
                crate::core::ZoneError::Unknown(_) => ApiError::bad_request("unknown_zone", detail),
                crate::core::ZoneError::Retired(_) => {
                    ApiError::new(Status::Conflict, "zone_retired", detail)
                }
                crate::core::ZoneError::Duplicate(_) => {
                    ApiError::new(Status::Conflict, "zone_exists", detail)
                }
                _ => ApiError::bad_request("invalid_zone", detail),
            },
            CommandError::UnitSet(_) | CommandError::InvalidMove(_) => {
                ApiError::bad_request("invalid_units", detail)
            }
            CommandError::ZoneBusy { .. } => ApiError::new(Status::Conflict, "zone_busy", detail),
            CommandError::UnknownDomain(_) => ApiError::bad_request("unknown_domain", detail),
            CommandError::DomainExists(_) => {
                ApiError::new(Status::Conflict, "domain_exists", detail)
            }
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
            CommandError::InvalidPlan(_) => ApiError::bad_request("invalid_plan", detail),
            CommandError::RunActive(id) => {
                ApiError::new(Status::Conflict, "plan_run_active", detail).with("run_id", json!(id))
            }
            CommandError::PlanNotFound(_) => {
                ApiError::new(Status::NotFound, "plan_not_found", detail)
            }
            CommandError::PlanRevisionChanged { current, .. } => {
                ApiError::new(Status::Conflict, "plan_revision_changed", detail)
                    .with("current_revision", json!(current))
            }
            CommandError::RunNotFound(_) => {
                ApiError::new(Status::NotFound, "plan_run_not_found", detail)
            }
            CommandError::RunState { .. }
            | CommandError::RunStepMismatch { .. }
            | CommandError::CallAttemptMismatch { .. } => {
                ApiError::new(Status::Conflict, "plan_run_state", detail)
            }
            CommandError::MissingActor => {
                ApiError::new(Status::InternalServerError, "internal", detail)
            }
            CommandError::UnitsChanging | CommandError::UnitsPhase(_) => {
                ApiError::new(Status::Conflict, "units_changing", detail)
            }
            CommandError::FreezeWindow(_) => ApiError::bad_request("invalid_units", detail),
            CommandError::InvalidHold(_) => ApiError::bad_request("invalid_hold", detail),
            CommandError::Channel(c) => match c {
                crate::core::ChannelError::Overlap { .. } => {
                    ApiError::new(Status::Conflict, "channel_overlap", detail)
                }
                crate::core::ChannelError::Changing(_)
                | crate::core::ChannelError::ChangePhase(..) => {
                    ApiError::new(Status::Conflict, "channel_changing", detail)
                }
                crate::core::ChannelError::TooMany => {
                    ApiError::new(Status::Conflict, "too_many_channels", detail)
                }
                crate::core::ChannelError::NotFound(_) => {
                    ApiError::new(Status::NotFound, "channel_not_found", detail)
                }
                crate::core::ChannelError::UnknownDomain(_) => {
                    ApiError::bad_request("unknown_domain", detail)
                }
                crate::core::ChannelError::UnknownZone(_) => {
                    ApiError::bad_request("unknown_zone", detail)
                }
                _ => ApiError::bad_request("invalid_channel", detail),
            },
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            // A shared log's append whose outcome is unknown: a retry with the same command id
            // never applies twice.
            StoreError::OutcomeUnknown { ref command_id, .. } => {
                let command_id = command_id.clone();
                ApiError::new(Status::ServiceUnavailable, "outcome_unknown", e.to_string())
                    .with("command_id", json!(command_id))
            }
            // The write or the fsync failed after it started: the record may be on disk and
            // apply after a restart, so "not saved" would be a lie.
            StoreError::Io { .. } => ApiError::new(
                Status::ServiceUnavailable,
                "outcome_unknown",
                format!(
                    "the outcome of the change is unknown: the log write failed after it began, so the change may still be on disk and take effect after a restart; read the current version before retrying ({e})"
                ),
            ),
            e => ApiError::new(
                Status::ServiceUnavailable,
                "store_unavailable",
                format!("the change was not saved: {e}"),
            ),
        }
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        match e {
            SubmitError::Command(e) => e.into(),
            SubmitError::Store(e) => e.into(),
            SubmitError::FormatNotSupported(why) => {
                ApiError::new(Status::Conflict, "format_not_supported", why)
            }
            SubmitError::KeyReused { .. } => {
                ApiError::new(Status::UnprocessableEntity, "idempotency_key_reused", e.to_string())
            }
            SubmitError::NotApplied { ref command_id, .. } => {
                let command_id = command_id.clone();
                ApiError::new(Status::GatewayTimeout, "not_yet_applied", e.to_string())
                    .with("command_id", json!(command_id))
            }
        }
    }
}

impl From<StartError> for ApiError {
    fn from(e: StartError) -> ApiError {
        let detail = e.to_string();
        match e {
            StartError::PlanNotFound(_) => {
                ApiError::new(Status::NotFound, "plan_not_found", detail)
            }
            StartError::RevisionChanged { current, .. } => {
                ApiError::new(Status::Conflict, "plan_revision_changed", detail)
                    .with("current_revision", json!(current))
            }
            StartError::RunActive { .. } => {
                ApiError::new(Status::Conflict, "plan_run_active", detail)
            }
            StartError::DrainActive { .. } => {
                ApiError::new(Status::Conflict, "drain_active", detail)
            }
            StartError::PreconditionFailed { name, value, .. } => {
                ApiError::new(Status::Conflict, "precondition_failed", detail)
                    .with("precondition", json!(name))
                    .with("value", json!(value))
            }
            StartError::Submit(e) => e.into(),
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
            LanesError::CallerGroupsFull { .. } | LanesError::CallerMembersFull { .. } => {
                ApiError::new(Status::TooManyRequests, "caller_limit", detail)
            }
            LanesError::NotAuthority(n) => {
                ApiError::new(Status::ServiceUnavailable, "not_lane_authority", detail)
                    .with("authority", json!({ "id": n.holder, "url": n.url }))
            }
        }
    }
}

/// Maps a JSON body that failed to parse or was too large (the fast listener maps its own body
/// errors to the same `service::tag_answer` failures).
pub fn json_error(e: rocket::serde::json::Error<'_>) -> ApiError {
    match e {
        rocket::serde::json::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            tag_answer::body_too_large().into()
        }
        rocket::serde::json::Error::Io(io) => tag_answer::unreadable_body(&io).into(),
        rocket::serde::json::Error::Parse(_, e) => tag_answer::invalid_json(&e).into(),
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

/// An OpenFeature Remote Evaluation Protocol failure. OFREP clients parse their own error shape,
/// `{"key", "errorCode", "errorDetails"}`, so the OFREP endpoints answer with it instead of
/// `{"error", "detail"}`; authentication failures stay ordinary [`ApiError`]s (401/403).
#[derive(Debug)]
pub struct OfrepError {
    pub status: Status,
    /// The flag key, for single-flag evaluations.
    pub key: Option<String>,
    pub code: &'static str,
    pub detail: String,
}

impl OfrepError {
    /// The body is not the JSON OFREP expects (`PARSE_ERROR`, 400).
    pub fn parse(key: Option<&str>, detail: impl Into<String>) -> OfrepError {
        OfrepError {
            status: Status::BadRequest,
            key: key.map(str::to_owned),
            code: "PARSE_ERROR",
            detail: detail.into(),
        }
    }

    /// The context is not an object (`INVALID_CONTEXT`, 400).
    pub fn invalid_context(key: Option<&str>, detail: impl Into<String>) -> OfrepError {
        OfrepError {
            status: Status::BadRequest,
            key: key.map(str::to_owned),
            code: "INVALID_CONTEXT",
            detail: detail.into(),
        }
    }

    /// No routing table to evaluate against (`GENERAL`, 500): an edge that has not reached a
    /// coordinator yet and has no cache.
    pub fn no_table(key: Option<&str>) -> OfrepError {
        OfrepError {
            status: Status::InternalServerError,
            key: key.map(str::to_owned),
            code: "GENERAL",
            detail:
                "no routing table yet: the coordinator has not been reached and there is no cache"
                    .into(),
        }
    }

    pub fn from_flag(key: Option<&str>, e: &crate::core::FlagError) -> OfrepError {
        let status = match e {
            crate::core::FlagError::FlagNotFound(..) => Status::NotFound,
            // Temporary, as `GET /v1/tag`'s 503 `channel_unavailable`.
            crate::core::FlagError::ChannelUnavailable(_) => Status::ServiceUnavailable,
            _ => Status::BadRequest,
        };
        OfrepError { status, key: key.map(str::to_owned), code: e.code(), detail: e.to_string() }
    }

    pub fn body(&self) -> Value {
        let mut body = Map::new();
        if let Some(key) = &self.key {
            body.insert("key".into(), json!(key));
        }
        body.insert("errorCode".into(), json!(self.code));
        body.insert("errorDetails".into(), json!(self.detail));
        Value::Object(body)
    }
}

impl<'r> Responder<'r, 'static> for OfrepError {
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'static> {
        telemetry::count_ofrep(self.code);
        let body = serde_json::to_string(&self.body()).unwrap_or_default();
        Response::build()
            .status(self.status)
            .header(ContentType::JSON)
            .sized_body(body.len(), Cursor::new(body))
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_fsync_says_the_outcome_is_unknown() {
        let e = StoreError::Io {
            action: "append to",
            path: "data/tidegate.log".into(),
            source: std::io::Error::other("fsync: EIO"),
        };
        let api = ApiError::from(e);
        assert_eq!(api.status, Status::ServiceUnavailable);
        assert_eq!(api.code, "outcome_unknown");
        assert!(
            api.detail.contains("unknown") && !api.detail.contains("not saved"),
            "{}",
            api.detail
        );
        let refused = ApiError::from(StoreError::Poisoned);
        assert_eq!(refused.code, "store_unavailable");
        assert!(refused.detail.contains("not saved"), "{}", refused.detail);
    }
}
