//! Who is calling: bearer tokens checked against configured SHA-256 hashes in constant time.

use rocket::http::Status;
use rocket::request::{FromRequest, Outcome, Request};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::App;
use super::error::ApiError;
use crate::config::{Config, Role};

/// The identity behind a request. The guard never fails; handlers ask for what they need, so the
/// error body is always ours and always says what was wrong.
#[derive(Debug, Clone)]
pub enum Caller {
    Anonymous,
    /// An `Authorization` header that is malformed or names no known token.
    Rejected(&'static str),
    Service,
    Operator {
        name: String,
        role: Role,
    },
}

impl Caller {
    pub fn identify(config: &Config, authorization: Option<&str>) -> Caller {
        let Some(header) = authorization else {
            return Caller::Anonymous;
        };
        let Some(token) = header.strip_prefix("Bearer ").map(str::trim) else {
            return Caller::Rejected("the Authorization header must be `Bearer <token>`");
        };
        if token.is_empty() {
            return Caller::Rejected("the bearer token is empty");
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Compare against every configured hash without stopping early, so the time taken does
        // not reveal which (or whether any) entry matched.
        let mut found: Option<&crate::config::OperatorEntry> = None;
        for op in &config.operators {
            if bool::from(op.token_sha256.ct_eq(&digest)) {
                found = Some(op);
            }
        }
        let mut service = false;
        for hash in &config.service_tokens {
            service |= bool::from(hash.ct_eq(&digest));
        }
        match (found, service) {
            (Some(op), _) => Caller::Operator { name: op.name.clone(), role: op.role },
            (None, true) => Caller::Service,
            (None, false) => Caller::Rejected("the bearer token is not known"),
        }
    }

    /// For tagging and read endpoints: open unless service tokens are configured.
    pub fn require_reader(&self, config: &Config) -> Result<(), ApiError> {
        match self {
            Caller::Service | Caller::Operator { .. } => Ok(()),
            Caller::Rejected(why) => Err(unauthorized(why)),
            Caller::Anonymous if config.service_tokens.is_empty() => Ok(()),
            Caller::Anonymous => Err(unauthorized(
                "this tidegate requires a service or operator token for reads (service_tokens_sha256 is set)",
            )),
        }
    }

    /// For state changes: an operator token with the `operator` role. Returns the name for the
    /// audit record.
    pub fn require_operator(&self, config: &Config) -> Result<String, ApiError> {
        match self {
            Caller::Operator { name, role: Role::Operator } => Ok(name.clone()),
            Caller::Operator { name, role: Role::Viewer } => Err(ApiError::new(
                Status::Forbidden,
                "forbidden",
                format!("operator `{name}` has the viewer role and may not change state"),
            )),
            Caller::Service => Err(ApiError::new(
                Status::Forbidden,
                "forbidden",
                "service tokens may tag and read but not change state",
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

fn unauthorized(detail: &str) -> ApiError {
    ApiError::new(Status::Unauthorized, "unauthorized", detail)
}

#[rocket::async_trait]
impl<'r> FromRequest<'r> for Caller {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let app = request.rocket().state::<App>().expect("App state is managed by http::build");
        Outcome::Success(Caller::identify(&app.config, request.headers().get_one("Authorization")))
    }
}
