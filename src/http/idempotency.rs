//! The `Idempotency-Key` request header of the change endpoints: a client-chosen command id.
//!
//! On a shared (Kafka) log the key becomes the proposal's command id, so a client that got no
//! answer (a timeout, a replica killed mid-request, `outcome_unknown`) can send the same request
//! again with the same key, to any replica, and the change applies at most once: the retry is
//! answered with the first attempt's decided outcome. The embedded file log decides a change
//! before answering, so there the key is checked for shape and otherwise has no effect.

use rocket::request::{FromRequest, Outcome, Request};

use super::error::ApiError;

/// The header's name, as documented in openapi.json.
pub const HEADER: &str = "Idempotency-Key";

/// The longest key accepted (a UUID is 36 characters; room for a client prefix).
pub const MAX_LEN: usize = 128;

/// The raw header, checked only when a handler asks for the command id (so the one error
/// mapping place renders a bad key like every other bad request).
pub struct IdempotencyKey(Option<String>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for IdempotencyKey {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        Outcome::Success(IdempotencyKey(request.headers().get_one(HEADER).map(str::to_owned)))
    }
}

impl IdempotencyKey {
    /// The command id to submit under: `None` without the header (the server draws one).
    pub fn command_id(self) -> Result<Option<String>, ApiError> {
        let Some(key) = self.0 else { return Ok(None) };
        check(&key).map_err(|why| ApiError::bad_request("invalid_idempotency_key", why))?;
        Ok(Some(key))
    }
}

/// A key is 1 to [`MAX_LEN`] characters of `A-Z a-z 0-9 - _ . :` (it becomes a Kafka record
/// key and appears in error answers, so nothing that needs escaping).
fn check(key: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if key.is_empty() || key.len() > MAX_LEN || !key.chars().all(allowed) {
        return Err(format!(
            "the {HEADER} header must be 1 to {MAX_LEN} characters of A-Z, a-z, 0-9, '-', '_', '.', ':'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn keys_are_short_plain_tokens() {
        assert!(check("w3-17-0f9a").is_ok());
        assert!(check("550e8400-e29b-41d4-a716-446655440000").is_ok());
        assert!(check("").is_err());
        assert!(check("has space").is_err());
        assert!(check("quote\"").is_err());
        assert!(check(&"a".repeat(129)).is_err());
        assert!(check(&"a".repeat(128)).is_ok());
    }
}
