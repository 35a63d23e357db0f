//! The operator UI's browser session: a private cookie holding the operator's name, an expiry
//! and the session's CSRF token.
//!
//! Why a private cookie and no server-side session table: Rocket encrypts and authenticates the
//! value with the configured `ui.secret_key`, so the server can trust what it reads back without
//! storing every session, and a tidegate restart with the same key keeps operators signed in.
//! What the server does store is the IDs of sessions that were logged out early
//! (`service::ui_sessions`, durable): logging out ends the session on the server, so a copy of
//! the cookie stops working too. The role is *not* stored: it is looked up in the configuration
//! on every request, so a session of an operator who was removed from the config stops working.

use rocket::http::{Cookie, CookieJar, SameSite};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::service::ui_sessions::Revocations;

/// The session cookie. (Not `tidegate_…`: tidy reserves that prefix for metric names.)
pub const COOKIE: &str = "tg_session";
/// The short-lived cookie that ties a login form to the browser that fetched it.
pub const LOGIN_COOKIE: &str = "tg_login";
/// The header a cookie-authenticated change must carry, holding the session's CSRF token.
pub const CSRF_HEADER: &str = "X-CSRF-Token";

/// How long a login form stays valid: long enough to find the token in a password manager.
const LOGIN_FORM_TTL_MS: u64 = 30 * 60 * 1000;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Session {
    /// Random, names the session in the revocation list when it is logged out.
    pub id: String,
    pub name: String,
    pub csrf: String,
    pub expires_ms: u64,
}

/// Whether a request carried the session's CSRF token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csrf {
    Missing,
    Wrong,
    Valid,
}

impl Session {
    pub fn new(name: &str, ttl_ms: u64, now_ms: u64) -> Session {
        Session {
            id: random_token(),
            name: name.to_owned(),
            csrf: random_token(),
            expires_ms: now_ms + ttl_ms,
        }
    }

    /// The session in `cookies`, if there is one that decrypts, parses, has not expired and was
    /// not logged out. The expiry inside the encrypted value is what counts: the cookie's own
    /// `Max-Age` is only a hint to the browser, and a client could ignore it.
    pub fn read(cookies: &CookieJar<'_>, revoked: &Revocations, now_ms: u64) -> Option<Session> {
        let cookie = cookies.get_private(COOKIE)?;
        let session: Session = serde_json::from_str(cookie.value()).ok()?;
        (session.expires_ms > now_ms && !revoked.is_revoked(&session.id)).then_some(session)
    }

    pub fn write(&self, cookies: &CookieJar<'_>, now_ms: u64) {
        let value = serde_json::to_string(self).expect("a session always serialises");
        cookies.add_private(cookie(COOKIE, value, now_ms, self.expires_ms));
    }

    pub fn remove(cookies: &CookieJar<'_>) {
        cookies.remove_private(Cookie::build(COOKIE).path("/"));
    }

    /// Compares `given` with this session's token in constant time.
    pub fn check_csrf(&self, given: Option<&str>) -> Csrf {
        match given {
            None => Csrf::Missing,
            Some(given) if bool::from(given.as_bytes().ct_eq(self.csrf.as_bytes())) => Csrf::Valid,
            Some(_) => Csrf::Wrong,
        }
    }
}

/// Issues a fresh login-form token: stored in a private cookie and returned for the form.
/// Login CSRF (a foreign page signing the victim in as the attacker) needs both halves.
pub fn issue_login_token(cookies: &CookieJar<'_>, now_ms: u64) -> String {
    let token = random_token();
    cookies.add_private(cookie(LOGIN_COOKIE, token.clone(), now_ms, now_ms + LOGIN_FORM_TTL_MS));
    token
}

/// True when `given` matches the login token of this browser. The token is single-use.
pub fn take_login_token(cookies: &CookieJar<'_>, given: &str) -> bool {
    let Some(cookie) = cookies.get_private(LOGIN_COOKIE) else {
        return false;
    };
    cookies.remove_private(Cookie::build(LOGIN_COOKIE).path("/"));
    !given.is_empty() && bool::from(given.as_bytes().ct_eq(cookie.value().as_bytes()))
}

/// Both `Max-Age` and `Expires`: Rocket would otherwise add its own one-week `Expires`.
fn cookie(name: &'static str, value: String, now_ms: u64, expires_ms: u64) -> Cookie<'static> {
    let seconds = |ms: u64| i64::try_from(ms / 1000).unwrap_or(i64::MAX);
    let expires = rocket::time::OffsetDateTime::from_unix_timestamp(seconds(expires_ms))
        .unwrap_or(rocket::time::OffsetDateTime::UNIX_EPOCH);
    Cookie::build((name, value))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .max_age(rocket::time::Duration::seconds(seconds(expires_ms.saturating_sub(now_ms))))
        .expires(expires)
        .build()
}

/// 256 random bits as hex: unguessable, and safe in headers, forms and HTML attributes.
pub fn random_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}
