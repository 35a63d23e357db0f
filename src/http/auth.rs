//! Who is calling: bearer tokens checked against configured SHA-256 hashes in constant time, or
//! the operator UI's session cookie.
//!
//! A cookie is an ambient credential: the browser attaches it to any request to tidegate. So a
//! change authenticated by the session cookie must also carry the session's CSRF token in the
//! `X-CSRF-Token` header, which a foreign page cannot read. Bearer tokens are never ambient and
//! stay as they were.
//!
//! Three gates, one per kind of request (docs/src/trust-model.md): [`Caller::require_reader`] for
//! reads (open to anonymous callers only while no service tokens are configured),
//! [`Caller::require_writer`] for the signals services send (outcomes, acknowledgements, lane
//! membership: a service token or an operator), and [`Caller::require_operator`] for routing
//! changes. Every gate first refuses a body that is not declared as JSON (415), so a web page
//! cannot post to tidegate with a form or a `text/plain` fetch, which need no CORS preflight.

use rocket::http::{ContentType, Method, Status};
use rocket::request::{FromRequest, Outcome, Request};
use sha2::{Digest, Sha256};

use std::sync::Arc;

use super::App;
use super::error::ApiError;
use super::ui::session::{CSRF_HEADER, Csrf, Session};
use crate::config::{Config, OperatorEntry, Role};
use crate::service::bearer::{self, Bearer, find_operator};

/// The identity behind a request. The guard never fails; handlers ask for what they need, so the
/// error body is always ours and always says what was wrong.
#[derive(Debug, Clone)]
pub enum Caller {
    Anonymous,
    /// An `Authorization` header that is malformed or names no known token.
    Rejected(&'static str),
    /// A request to `/v1/` whose body is not declared as JSON: refused by every gate (415).
    UnsupportedMedia(String),
    /// A service token; `id` names it without revealing it (`service:` and the start of its
    /// configured SHA-256), for ownership and per-caller limits.
    Service {
        id: String,
    },
    Operator {
        name: String,
        role: Role,
    },
    /// An operator signed in to the web UI (no `Authorization` header, a valid session cookie).
    Session {
        name: String,
        role: Role,
        csrf: Csrf,
    },
}

impl Caller {
    /// The caller an `Authorization` header names, checked by `service::bearer` (the fast
    /// listener checks tokens with the same function).
    pub fn identify(config: &Config, authorization: Option<&str>) -> Caller {
        match Bearer::identify(config, authorization) {
            Bearer::Anonymous => Caller::Anonymous,
            Bearer::Rejected(why) => Caller::Rejected(why),
            Bearer::Service { id } => Caller::Service { id },
            Bearer::Operator { name, role } => Caller::Operator { name, role },
        }
    }

    /// The caller behind a UI session cookie. The role comes from the configuration as it is now.
    pub fn from_session(config: &Config, session: &Session, csrf_header: Option<&str>) -> Caller {
        match config.operators.iter().find(|op| op.name == session.name) {
            Some(op) => Caller::Session {
                name: op.name.clone(),
                role: op.role,
                csrf: session.check_csrf(csrf_header),
            },
            // Signed by our key, but the operator is no longer configured.
            None => Caller::Anonymous,
        }
    }

    /// Whether the caller gave no credentials at all (for reads that cost more than a lookup,
    /// such as audit pages read from the log).
    pub fn is_anonymous(&self) -> bool {
        matches!(self, Caller::Anonymous)
    }

    /// For tagging and read endpoints: open unless service tokens are configured.
    pub fn require_reader(&self, config: &Config) -> Result<(), ApiError> {
        match self {
            Caller::UnsupportedMedia(got) => Err(unsupported_media(got)),
            Caller::Service { .. } | Caller::Operator { .. } | Caller::Session { .. } => Ok(()),
            Caller::Rejected(why) => Err(unauthorized(why)),
            Caller::Anonymous => Ok(bearer::anonymous_read(config)?),
        }
    }

    /// For state changes: an operator token with the `operator` role. Returns the name for the
    /// audit record.
    pub fn require_operator(&self, config: &Config) -> Result<String, ApiError> {
        match self {
            Caller::UnsupportedMedia(got) => Err(unsupported_media(got)),
            Caller::Operator { name, role: Role::Operator } => Ok(name.clone()),
            Caller::Session { csrf: Csrf::Missing, .. } => Err(csrf_failed(
                "a change from a signed-in browser must carry the session's X-CSRF-Token header; reload the page and try again",
            )),
            Caller::Session { csrf: Csrf::Wrong, .. } => Err(csrf_failed(
                "the X-CSRF-Token header does not match this session (signed in again elsewhere?); reload the page and try again",
            )),
            Caller::Session { name, role: Role::Operator, csrf: Csrf::Valid } => Ok(name.clone()),
            Caller::Operator { name, role: Role::Viewer }
            | Caller::Session { name, role: Role::Viewer, .. } => Err(ApiError::new(
                Status::Forbidden,
                "forbidden",
                format!("operator `{name}` has the viewer role and may not change state"),
            )),
            Caller::Service { .. } => Err(ApiError::new(
                Status::Forbidden,
                "forbidden",
                "service tokens may tag, read, report outcomes, acknowledge versions and hold lane membership, but not change routing",
            )),
            Caller::Rejected(why) => Err(unauthorized(why)),
            Caller::Anonymous if config.operators.is_empty() => Err(unauthorized(
                "no operators are configured; create one with `tidegate token new --name NAME` and add it to the config",
            )),
            Caller::Anonymous => {
                Err(unauthorized("an operator token is required: `Authorization: Bearer <token>`"))
            }
        }
    }
}

impl Caller {
    /// For the signals services send (outcomes, acknowledgements, watch registration, lane
    /// membership): a service token, or an operator with the `operator` role. Never anonymous,
    /// never a viewer. Returns the caller's identity (`service:…` or `operator:NAME`), which owns
    /// what it registers and is what per-caller limits count.
    pub fn require_writer(&self, config: &Config) -> Result<String, ApiError> {
        // Bearer callers through the gate the fast listener uses too.
        let bearer = match self {
            Caller::Service { id } => Bearer::Service { id: id.clone() },
            Caller::Anonymous => Bearer::Anonymous,
            Caller::Rejected(why) => Bearer::Rejected(why),
            Caller::Operator { name, role } => Bearer::Operator { name: name.clone(), role: *role },
            _ => return self.require_operator(config).map(|name| format!("operator:{name}")),
        };
        Ok(bearer.require_writer(config)?)
    }
}

/// Whether a request's body is declared as JSON. Requests without a body pass; a body without a
/// `Content-Type` does not (a browser sends a `Blob` body that way without a preflight).
pub fn body_is_json(content_type: Option<&ContentType>, has_body: bool) -> Result<(), String> {
    match content_type {
        Some(ct) if bearer::is_json_media(ct.top().as_str(), ct.sub().as_str()) => Ok(()),
        Some(ct) => Err(ct.to_string()),
        None if has_body => Err("no Content-Type".to_owned()),
        None => Ok(()),
    }
}

fn unsupported_media(got: &str) -> ApiError {
    bearer::unsupported_media(got).into()
}

fn unauthorized(detail: &str) -> ApiError {
    bearer::unauthorized(detail).into()
}

fn csrf_failed(detail: &str) -> ApiError {
    ApiError::new(Status::Forbidden, "csrf_failed", detail)
}

/// The web UI's login check: the named operator's token, with the same constant-time
/// comparison as bearer tokens.
pub fn check_login<'c>(config: &'c Config, name: &str, token: &str) -> Option<&'c OperatorEntry> {
    if token.is_empty() {
        return None;
    }
    let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
    find_operator(config, &digest, |op| op.name == name.trim())
}

#[rocket::async_trait]
impl<'r> FromRequest<'r> for Caller {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        // Both the coordinator and the edge manage their `Arc<Config>`.
        let config = request
            .rocket()
            .state::<Arc<Config>>()
            .expect("the configuration is managed by http::build and http::edge::build");
        let headers = request.headers();
        if writes_body(request) {
            let has_body = headers.get_one("Transfer-Encoding").is_some()
                || headers.get_one("Content-Length").is_some_and(|n| n.trim() != "0");
            if let Err(got) = body_is_json(request.content_type(), has_body) {
                return Outcome::Success(Caller::UnsupportedMedia(got));
            }
        }
        if let Some(authorization) = headers.get_one("Authorization") {
            return Outcome::Success(Caller::identify(config, Some(authorization)));
        }
        // The edge has no UI and so no sessions: only the coordinator's `App` keeps revocations.
        let session = request
            .rocket()
            .state::<App>()
            .and_then(|app| Session::read(request.cookies(), &app.revocations, super::now_ms()));
        let caller = match session {
            Some(session) => Caller::from_session(config, &session, headers.get_one(CSRF_HEADER)),
            None => Caller::Anonymous,
        };
        Outcome::Success(caller)
    }
}

/// API requests that may carry a body (the UI's own forms under `/ui/` are not API requests).
fn writes_body(request: &Request<'_>) -> bool {
    let path = request.uri().path();
    matches!(request.method(), Method::Post | Method::Put | Method::Patch | Method::Delete)
        && path.as_str().starts_with("/v1/")
        // The edge's gateway check answers any method with any body: it reads only headers,
        // cookies and the query (Envoy's ext_authz forwards the original request's method).
        && !path.as_str().starts_with("/v1/gate")
}
