//! Failed web UI logins, counted per operator name *from one address* and per client address over
//! a sliding window, so that guessing a token is refused (429) long before it could succeed.
//!
//! Why per name and address, not per name: counted per name alone, five wrong logins from anyone
//! who knew the name locked the real operator out of the UI from everywhere, an outsider's
//! lock-out. Counted per (name, address), an outsider only slows themselves: the operator's own
//! address keeps its own count. (The tokens are long random secrets, so spreading guesses over
//! many addresses gains nothing either.)
//!
//! Only configured operator names get a counter of their own (an unknown name cannot log in
//! anyway, and counting arbitrary names would let a caller grow the table at will). Both tables
//! are bounded: past `MAX_ADDRESSES`, the entry whose last failure is oldest is forgotten.
//! Time is an argument, so the rules are tested without sleeping.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Failed logins allowed per operator name from one address within [`WINDOW_MS`].
pub const PER_NAME: usize = 5;
/// Failed logins allowed per client address within [`WINDOW_MS`].
pub const PER_ADDRESS: usize = 20;
pub const WINDOW_MS: u64 = 5 * 60 * 1000;
const MAX_ADDRESSES: usize = 10_000;

/// Why a login attempt is refused before its token is even checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limited {
    /// `name` or `address`.
    pub by: &'static str,
    /// When the oldest counted failure leaves the window.
    pub retry_after_ms: u64,
}

#[derive(Default)]
pub struct LoginLimiter {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    names: HashMap<String, VecDeque<u64>>,
    addresses: HashMap<String, VecDeque<u64>>,
}

impl LoginLimiter {
    pub fn new() -> LoginLimiter {
        LoginLimiter::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether a login for `name` (a configured operator, or `None`) from `address` may be tried.
    pub fn check(&self, name: Option<&str>, address: &str, now_ms: u64) -> Result<(), Limited> {
        let mut inner = self.lock();
        if let Some(name) = name
            && let Some(limited) =
                over(inner.names.get_mut(&pair(name, address)), PER_NAME, "name", now_ms)
        {
            return Err(limited);
        }
        match over(inner.addresses.get_mut(address), PER_ADDRESS, "address", now_ms) {
            Some(limited) => Err(limited),
            None => Ok(()),
        }
    }

    /// Counts a failed login.
    pub fn failed(&self, name: Option<&str>, address: &str, now_ms: u64) {
        let mut inner = self.lock();
        if let Some(name) = name {
            let key = pair(name, address);
            make_room(&mut inner.names, &key, now_ms);
            push(inner.names.entry(key).or_default(), PER_NAME, now_ms);
        }
        make_room(&mut inner.addresses, address, now_ms);
        push(inner.addresses.entry(address.to_owned()).or_default(), PER_ADDRESS, now_ms);
    }

    /// A successful login clears its name's failures from that address (not the address's own:
    /// one right token must not reset a guesser who also knows one operator).
    pub fn succeeded(&self, name: &str, address: &str) {
        self.lock().names.remove(&pair(name, address));
    }
}

fn pair(name: &str, address: &str) -> String {
    format!("{name}\n{address}")
}

/// Keeps `table` under `MAX_ADDRESSES` entries before `key` is added: expired entries go first,
/// then the one whose last failure is oldest.
fn make_room(table: &mut HashMap<String, VecDeque<u64>>, key: &str, now_ms: u64) {
    if table.contains_key(key) || table.len() < MAX_ADDRESSES {
        return;
    }
    table.retain(|_, times| times.back().is_some_and(|t| t + WINDOW_MS > now_ms));
    if table.len() >= MAX_ADDRESSES {
        let oldest = table
            .iter()
            .min_by_key(|(_, times)| times.back().copied().unwrap_or(0))
            .map(|(key, _)| key.clone());
        if let Some(oldest) = oldest {
            table.remove(&oldest);
        }
    }
}

fn over(
    times: Option<&mut VecDeque<u64>>,
    limit: usize,
    by: &'static str,
    now_ms: u64,
) -> Option<Limited> {
    let times = times?;
    while times.front().is_some_and(|t| t + WINDOW_MS <= now_ms) {
        times.pop_front();
    }
    (times.len() >= limit).then(|| Limited {
        by,
        retry_after_ms: times.front().map_or(0, |t| (t + WINDOW_MS).saturating_sub(now_ms)),
    })
}

fn push(times: &mut VecDeque<u64>, limit: usize, now_ms: u64) {
    times.push_back(now_ms);
    while times.len() > limit {
        times.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_limited_per_address_and_free_again_after_the_window() {
        let limiter = LoginLimiter::new();
        for i in 0..PER_NAME as u64 {
            assert!(limiter.check(Some("alice"), "10.6.6.6", 1_000 + i).is_ok());
            limiter.failed(Some("alice"), "10.6.6.6", 1_000 + i);
        }
        let refused = limiter.check(Some("alice"), "10.6.6.6", 2_000).unwrap_err();
        assert_eq!(refused.by, "name");
        assert_eq!(refused.retry_after_ms, 1_000 + WINDOW_MS - 2_000);
        assert!(limiter.check(Some("bob"), "10.6.6.6", 2_000).is_ok(), "other names are free");
        assert!(limiter.check(Some("alice"), "10.6.6.6", 1_000 + WINDOW_MS + 10).is_ok());
    }

    #[test]
    fn an_outsiders_failures_never_stop_the_real_operator() {
        let limiter = LoginLimiter::new();
        // An outsider who knows the name fails as often as the address limit allows, from as
        // many addresses as they like.
        for a in 0..50u64 {
            for i in 0..PER_NAME as u64 {
                limiter.failed(Some("alice"), &format!("203.0.113.{a}"), 1_000 + i);
            }
        }
        assert!(limiter.check(Some("alice"), "203.0.113.7", 2_000).is_err(), "they are slowed");
        // The operator, from their own address, is not.
        assert!(limiter.check(Some("alice"), "10.0.0.5", 2_000).is_ok());
    }

    #[test]
    fn an_address_is_limited_across_names() {
        let limiter = LoginLimiter::new();
        for i in 0..PER_ADDRESS as u64 {
            limiter.failed(None, "10.0.0.1", i);
        }
        assert_eq!(limiter.check(Some("alice"), "10.0.0.1", 100).unwrap_err().by, "address");
        assert!(limiter.check(Some("alice"), "10.0.0.2", 100).is_ok());
    }

    #[test]
    fn success_clears_the_name_but_not_the_address() {
        let limiter = LoginLimiter::new();
        for i in 0..PER_ADDRESS as u64 {
            limiter.failed(Some("alice"), "10.0.0.1", i);
        }
        limiter.succeeded("alice", "10.0.0.1");
        assert!(limiter.check(Some("alice"), "10.0.0.2", 100).is_ok());
        assert!(limiter.check(Some("alice"), "10.0.0.1", 100).is_err(), "the address still counts");
    }
}
