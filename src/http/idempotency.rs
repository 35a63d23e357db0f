//! The `Idempotency-Key` request header of the change endpoints.
//!
//! A key belongs to the caller who sent it (the operator's name) and is bound to a fingerprint
//! of its first request: the method, the path and the parsed body. So:
//!
//! - the same caller sending the same key with the same request gets the first answer again
//!   (on the embedded log too, where a retry would otherwise meet a version conflict);
//! - the same caller sending the same key with another request is refused with 422
//!   `idempotency_key_reused` and nothing is submitted;
//! - another caller's identical key is a different key: it never shows the first caller's result.
//!
//! On a shared (Kafka) log the command id a change is submitted under is
//! `key-<hash of caller and key>-<fingerprint>` (`store::keyed_id`), so a retry of an unknown
//! outcome (a timeout, a replica killed mid-request) with the same key and body, to any replica,
//! applies at most once, and a replica refuses (422, before appending) a key whose scope the log
//! already holds with another fingerprint. Only two different requests under one key sent to two
//! replicas at the same instant can both be appended; each is then decided as its own change.
//! The replica that saw the key also remembers its answer ([`Remembered`], in memory, bounded,
//! 24 hours).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rocket::http::Status;
use rocket::request::{FromRequest, Outcome, Request};
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// The header's name, as documented in openapi.json.
pub const HEADER: &str = "Idempotency-Key";

/// The longest key accepted (a UUID is 36 characters; room for a client prefix).
pub const MAX_LEN: usize = 128;

/// How long a replica remembers a key's fingerprint and answer.
pub const REMEMBER_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// How many keys a replica remembers at most. When full, the caller holding the most keys
/// forgets its oldest, so a caller that floods keys never pushes out another caller's.
pub const REMEMBER_AT_MOST: usize = 10_000;

/// How many keys one caller may hold (its own oldest is forgotten first).
pub const REMEMBER_PER_CALLER: usize = 2_000;

/// The raw header and the request line it came with, checked only when a handler scopes it
/// (so the one error mapping place renders a bad key like every other bad request).
pub struct IdempotencyKey {
    key: Option<String>,
    method: String,
    path: String,
}

#[rocket::async_trait]
impl<'r> FromRequest<'r> for IdempotencyKey {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        Outcome::Success(IdempotencyKey {
            key: request.headers().get_one(HEADER).map(str::to_owned),
            method: request.method().as_str().to_owned(),
            path: request.uri().path().as_str().to_owned(),
        })
    }
}

/// A checked key, scoped to its caller and bound to its request's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scoped {
    caller: String,
    key: String,
    fingerprint: [u8; 32],
}

impl IdempotencyKey {
    /// Checks the key's shape and binds it to `caller` and to this request: its method, path
    /// and `body` (the parsed request, serialised). Without the header the server draws a key
    /// (`srv-` and 128 random bits): it is the `command_id` an `outcome_unknown` or
    /// `not_yet_applied` answer names, to be sent back as this header.
    pub fn scope(self, caller: &str, body: &impl serde::Serialize) -> Result<Scoped, ApiError> {
        let key = match self.key {
            Some(key) => {
                check(&key).map_err(|why| ApiError::bad_request("invalid_idempotency_key", why))?;
                key
            }
            None => format!("srv-{:032x}", rand::random::<u128>()),
        };
        let body = serde_json::to_string(body).unwrap_or_default();
        let mut hash = Sha256::new();
        for part in [self.method.as_str(), self.path.as_str(), body.as_str()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        Ok(Scoped { caller: caller.to_owned(), key, fingerprint: hash.finalize().into() })
    }
}

impl Scoped {
    /// The key as the client sends it.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The shared log's command id: the caller, the key and the fingerprint, hashed (so one
    /// caller's key never meets another caller's record, and a retry of the same request on
    /// any replica is the same command).
    pub fn command_id(&self) -> String {
        let mut hash = Sha256::new();
        hash.update(b"tidegate idempotency v1\n");
        for part in [self.caller.as_bytes(), self.key.as_bytes()] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part);
        }
        let scope: [u8; 32] = hash.finalize().into();
        crate::store::keyed_id(&hex::encode(&scope[..16]), &hex::encode(&self.fingerprint[..12]))
    }
}

/// What a replica remembers of one key: its first request's fingerprint, and the answer once
/// one was given: a body and version, or the refusal of a change that ended without taking
/// effect (a freeze undone: 409 `freeze_aborted`), which a retry must get again.
struct Entry {
    fingerprint: [u8; 32],
    seen: Instant,
    answer: Option<Answer>,
}

enum Answer {
    Body(String, u64),
    Refused(ApiError),
}

/// The keys this replica has seen, per caller.
#[derive(Default)]
pub struct Remembered {
    keys: Mutex<Keys>,
}

#[derive(Default)]
struct Keys {
    entries: HashMap<(String, String), Entry>,
    /// How many keys each caller holds.
    held: HashMap<String, usize>,
}

impl Keys {
    fn get(&self, id: &(String, String)) -> Option<&Entry> {
        self.entries.get(id)
    }

    fn get_mut(&mut self, id: &(String, String)) -> Option<&mut Entry> {
        self.entries.get_mut(id)
    }

    fn forget_expired(&mut self, now: Instant) {
        let held = &mut self.held;
        self.entries.retain(|(caller, _), entry| {
            let keep = now.saturating_duration_since(entry.seen) < REMEMBER_FOR;
            if !keep {
                forget_one(held, caller);
            }
            keep
        });
    }

    /// Forgets the oldest key of `caller`.
    fn forget_oldest_of(&mut self, caller: &str) {
        let oldest = self
            .entries
            .iter()
            .filter(|((c, _), _)| c == caller)
            .min_by_key(|(_, e)| e.seen)
            .map(|(k, _)| k.clone());
        if let Some(id) = oldest {
            self.entries.remove(&id);
            forget_one(&mut self.held, caller);
        }
    }

    fn insert(&mut self, id: (String, String), entry: Entry) {
        *self.held.entry(id.0.clone()).or_default() += 1;
        self.entries.insert(id, entry);
    }
}

fn forget_one(held: &mut HashMap<String, usize>, caller: &str) {
    if let Some(n) = held.get_mut(caller) {
        *n -= 1;
        if *n == 0 {
            held.remove(caller);
        }
    }
}

/// What to do with a request that carries a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// First time (or the same request again without an answer yet): submit it.
    Submit,
    /// The same request was answered before: answer this again.
    Answered(String, u64),
    /// The same request's change ended without taking effect: refuse the retry the same way.
    Refused(ApiError),
}

impl Remembered {
    /// Looks the key up, binding it to this request's fingerprint when it is new; refuses a
    /// key its caller used for another request with 422 `idempotency_key_reused`.
    pub fn check(&self, scoped: &Scoped, now: Instant) -> Result<Seen, ApiError> {
        let mut keys = self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        keys.forget_expired(now);
        let id = (scoped.caller.clone(), scoped.key.clone());
        if let Some(entry) = keys.get(&id) {
            if entry.fingerprint != scoped.fingerprint {
                return Err(ApiError::new(
                    Status::UnprocessableEntity,
                    "idempotency_key_reused",
                    format!(
                        "the {HEADER} `{}` was already used by `{}` for a different request; use a new key for a new change",
                        scoped.key, scoped.caller
                    ),
                ));
            }
            return Ok(match &entry.answer {
                Some(Answer::Body(body, version)) => Seen::Answered(body.clone(), *version),
                Some(Answer::Refused(e)) => Seen::Refused(e.clone()),
                None => Seen::Submit,
            });
        }
        // Each caller has its own pool: a full pool forgets its own oldest key; a full replica
        // forgets the oldest key of whoever holds the most.
        if keys.held.get(&scoped.caller).copied().unwrap_or(0) >= REMEMBER_PER_CALLER {
            keys.forget_oldest_of(&scoped.caller);
        } else if keys.entries.len() >= REMEMBER_AT_MOST
            && let Some(most) = keys
                .held
                .iter()
                .max_by_key(|(c, n)| (**n, std::cmp::Reverse((*c).clone())))
                .map(|(c, _)| c.clone())
        {
            keys.forget_oldest_of(&most);
        }
        keys.insert(id, Entry { fingerprint: scoped.fingerprint, seen: now, answer: None });
        Ok(Seen::Submit)
    }

    /// Remembers the answer given to the key's request.
    pub fn answered(&self, scoped: &Scoped, body: &str, version: u64) {
        let mut keys = self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = keys.get_mut(&(scoped.caller.clone(), scoped.key.clone()))
            && entry.fingerprint == scoped.fingerprint
        {
            entry.answer = Some(Answer::Body(body.to_owned(), version));
        }
    }

    /// Remembers that the key's change ended without taking effect, answered with `refusal`.
    pub fn refused(&self, scoped: &Scoped, refusal: &ApiError) {
        let mut keys = self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = keys.get_mut(&(scoped.caller.clone(), scoped.key.clone()))
            && entry.fingerprint == scoped.fingerprint
        {
            entry.answer = Some(Answer::Refused(refusal.clone()));
        }
    }
}

/// A key is 1 to [`MAX_LEN`] characters of `A-Z a-z 0-9 - _ . :` (it appears in error
/// answers, so nothing that needs escaping).
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
    use super::*;

    fn key(key: &str, path: &str) -> IdempotencyKey {
        IdempotencyKey { key: Some(key.into()), method: "PUT".into(), path: path.into() }
    }

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

    #[test]
    fn a_key_is_scoped_by_caller_and_bound_to_its_request() {
        let a = key("k1", "/v1/dial").scope("alice", &"body").unwrap();
        let same = key("k1", "/v1/dial").scope("alice", &"body").unwrap();
        let bob = key("k1", "/v1/dial").scope("bob", &"body").unwrap();
        let other_body = key("k1", "/v1/dial").scope("alice", &"other").unwrap();
        let other_path = key("k1", "/v1/pins/x").scope("alice", &"body").unwrap();
        assert_eq!(a.command_id(), same.command_id());
        for other in [&bob, &other_body, &other_path] {
            assert_ne!(a.command_id(), other.command_id());
        }
        // The shared log's id: one scope per caller and key, the fingerprint beside it.
        let id = a.command_id();
        let scope =
            |s: &Scoped| crate::store::split_keyed_id(&s.command_id()).unwrap().0.to_owned();
        assert!(check(&id).is_ok(), "{id}");
        assert_eq!(scope(&a), scope(&other_body));
        assert_ne!(scope(&a), scope(&bob));
        let remembered = Remembered::default();
        let now = Instant::now();
        assert_eq!(remembered.check(&a, now).unwrap(), Seen::Submit);
        remembered.answered(&a, "{}", 7);
        assert_eq!(remembered.check(&same, now).unwrap(), Seen::Answered("{}".into(), 7));
        assert_eq!(remembered.check(&bob, now).unwrap(), Seen::Submit);
        for reused in [&other_body, &other_path] {
            let refused = remembered.check(reused, now).unwrap_err();
            assert_eq!(refused.code, "idempotency_key_reused");
        }
        // Without the header the server draws a fresh key each time.
        let none = || IdempotencyKey { key: None, method: "PUT".into(), path: "/v1/dial".into() };
        let (first, second) =
            (none().scope("alice", &"b").unwrap(), none().scope("alice", &"b").unwrap());
        assert!(first.key().starts_with("srv-") && first.key() != second.key());
        assert!(check(first.key()).is_ok(), "a drawn key can be sent back as the header");
        // Forgotten after a day: the key is free again.
        let later = now + REMEMBER_FOR + Duration::from_secs(1);
        assert_eq!(remembered.check(&other_body, later).unwrap(), Seen::Submit);
    }

    #[test]
    fn a_caller_flooding_keys_never_pushes_out_another_callers() {
        let remembered = Remembered::default();
        let now = Instant::now();
        let scoped = |caller: &str, k: &str| key(k, "/v1/units").scope(caller, &"body").unwrap();
        let alice = scoped("alice", "alice-1");
        assert_eq!(remembered.check(&alice, now).unwrap(), Seen::Submit);
        remembered.answered(&alice, "{\"moved\":1}", 7);
        // mallory sends more keys than the whole replica remembers.
        for i in 0..REMEMBER_AT_MOST + 10 {
            let m = scoped("mallory", &format!("m-{i}"));
            remembered.check(&m, now + Duration::from_millis(i as u64 + 1)).unwrap();
        }
        let later = now + Duration::from_secs(60);
        assert_eq!(
            remembered.check(&alice, later).unwrap(),
            Seen::Answered("{\"moved\":1}".into(), 7),
            "alice's key survived"
        );
        // mallory kept only its newest REMEMBER_PER_CALLER keys.
        let first = scoped("mallory", "m-0");
        let newest = scoped("mallory", &format!("m-{}", REMEMBER_AT_MOST + 9));
        let keys = remembered.keys.lock().unwrap();
        let held = keys.entries.keys().filter(|(c, _)| c == "mallory").count();
        assert_eq!((held, keys.held["mallory"]), (REMEMBER_PER_CALLER, REMEMBER_PER_CALLER));
        assert!(!keys.entries.contains_key(&(first.caller.clone(), first.key.clone())));
        assert!(keys.entries.contains_key(&(newest.caller.clone(), newest.key.clone())));
    }
}
