//! Bearer tokens: who an `Authorization` header names, checked against the configured SHA-256
//! hashes in constant time, and whether that caller may read. Framework-free, so the Rocket guard
//! (`http::auth::Caller`) and the fast listener (`http_fast`) check tokens with the same code.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::tag_answer::Failure;
use crate::config::{Config, OperatorEntry, Role};

/// The identity an `Authorization` header (or its absence) gives.
#[derive(Debug, Clone)]
pub enum Bearer {
    Anonymous,
    /// A header that is malformed or names no known token.
    Rejected(&'static str),
    /// A service token, named without revealing it (`service:` and the start of its hash).
    Service {
        id: String,
    },
    Operator {
        name: String,
        role: Role,
    },
}

impl Bearer {
    pub fn identify(config: &Config, authorization: Option<&str>) -> Bearer {
        let Some(header) = authorization else {
            return Bearer::Anonymous;
        };
        // RFC 7235: the scheme is case-insensitive (`bearer`, `BEARER` are the same).
        let header = header.trim_start();
        let (scheme, token) = header.split_once([' ', '\t']).unwrap_or((header, ""));
        if !scheme.eq_ignore_ascii_case("Bearer") {
            return Bearer::Rejected("the Authorization header must be `Bearer <token>`");
        }
        let token = token.trim();
        if token.is_empty() {
            return Bearer::Rejected("the bearer token is empty");
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let found = find_operator(config, &digest, |_| true);
        let mut service = None;
        for hash in &config.service_tokens {
            if bool::from(hash.ct_eq(&digest)) {
                service = Some(hash);
            }
        }
        match (found, service) {
            (Some(op), _) => Bearer::Operator { name: op.name.clone(), role: op.role },
            (None, Some(hash)) => Bearer::Service { id: service_id(hash) },
            (None, None) => Bearer::Rejected("the bearer token is not known"),
        }
    }

    /// The writer gate (acknowledgements, subscriber registration): a service token or an
    /// operator with the `operator` role. Returns the identity that owns what it registers.
    pub fn require_writer(&self, config: &Config) -> Result<String, Failure> {
        match self {
            Bearer::Service { id } => Ok(id.clone()),
            Bearer::Operator { name, role: Role::Operator } => Ok(format!("operator:{name}")),
            Bearer::Operator { name, role: Role::Viewer } => Err(Failure::new(
                403,
                "forbidden",
                format!("operator `{name}` has the viewer role and may not change state"),
            )),
            Bearer::Rejected(why) => Err(unauthorized(why)),
            Bearer::Anonymous => Err(unauthorized(if config.service_tokens.is_empty() {
                "this signal moves traffic, so it needs a service or operator token (`Authorization: Bearer <token>`); add one to service_tokens_sha256"
            } else {
                "a service or operator token is required: `Authorization: Bearer <token>`"
            })),
        }
    }

    /// The read gate (tagging and read endpoints): open to anonymous callers unless service
    /// tokens are configured; a rejected header is always refused.
    pub fn require_reader(&self, config: &Config) -> Result<(), Failure> {
        match self {
            Bearer::Service { .. } | Bearer::Operator { .. } => Ok(()),
            Bearer::Rejected(why) => Err(unauthorized(why)),
            Bearer::Anonymous => anonymous_read(config),
        }
    }
}

/// Whether an anonymous caller may read.
pub fn anonymous_read(config: &Config) -> Result<(), Failure> {
    if config.service_tokens.is_empty() {
        Ok(())
    } else {
        Err(unauthorized(
            "this tidegate requires a service or operator token for reads (service_tokens_sha256 is set)",
        ))
    }
}

/// Whether `top/sub` is a JSON media type (`application/json`, `application/*+json`), compared
/// case-insensitively. Every gate refuses a body declared otherwise (a web page can post a form
/// or `text/plain` without a CORS preflight).
pub fn is_json_media(top: &str, sub: &str) -> bool {
    top.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json") || sub.to_ascii_lowercase().ends_with("+json"))
}

/// 415 `unsupported_media_type`: a body that is not declared as JSON; `got` is what was declared.
pub fn unsupported_media(got: &str) -> Failure {
    Failure::new(
        415,
        "unsupported_media_type",
        format!("the request body must be JSON with `Content-Type: application/json`, got {got}"),
    )
}

/// 401 `unauthorized` with `detail`.
pub fn unauthorized(detail: &str) -> Failure {
    Failure::new(401, "unauthorized", detail)
}

/// How a service token is named in ownership records, limits and errors: not secret (the hash
/// is in the configuration), stable across restarts, distinct per token.
fn service_id(hash: &[u8; 32]) -> String {
    format!("service:{}", &hex::encode(hash)[..12])
}

/// The operator whose token hashes to `digest` (and who passes `wanted`), compared against every
/// configured hash without stopping early, so the time taken does not reveal which (or whether
/// any) entry matched.
pub fn find_operator<'c>(
    config: &'c Config,
    digest: &[u8; 32],
    wanted: impl Fn(&OperatorEntry) -> bool,
) -> Option<&'c OperatorEntry> {
    let mut found = None;
    for op in &config.operators {
        if bool::from(op.token_sha256.ct_eq(digest)) && wanted(op) {
            found = Some(op);
        }
    }
    found
}
