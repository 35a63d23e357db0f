//! The dual-owner watch: the write observations services report (`POST /v1/writes`), the
//! newest one per user, and the users caught being written by two zones (`core::is_dual_owner`).
//!
//! Bounded whatever the callers send: at most [`MAX_USERS`] users are remembered (the oldest
//! reported forgotten first) and the last [`RECENT_KEPT`] catches are kept for
//! `GET /v1/writes/dual-owners`. In memory and per replica: a catch is a signal for an
//! operator, not state (each replica counts what is reported to it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::core::{WriteObservation, is_dual_owner, newest_after};

/// Most users whose newest write is remembered.
pub const MAX_USERS: usize = 100_000;
/// Most catches kept for the report.
pub const RECENT_KEPT: usize = 50;

/// One user caught written by two zones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catch {
    pub user_id: String,
    pub service: String,
    /// The newer owner's write, and the older-version write of another zone after it.
    pub newer: WriteObservation,
    pub stale: WriteObservation,
}

#[derive(Default)]
struct Inner {
    newest: HashMap<String, WriteObservation>,
    /// Users in the order they were first remembered, for forgetting the oldest.
    order: VecDeque<String>,
    total: u64,
    recent: VecDeque<Catch>,
}

#[derive(Default)]
pub struct WriteWatch {
    inner: Mutex<Inner>,
}

impl WriteWatch {
    /// Records `writes` of `service`; returns how many were caught as dual-owner writes.
    pub fn record(&self, service: &str, writes: Vec<(String, WriteObservation)>) -> u64 {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let inner = &mut *guard;
        let mut caught = 0;
        for (user_id, write) in writes {
            let next = match inner.newest.get(&user_id) {
                Some(newest) => {
                    if is_dual_owner(newest, &write) {
                        caught += 1;
                        let catch = Catch {
                            user_id: user_id.clone(),
                            service: service.to_owned(),
                            newer: newest.clone(),
                            stale: write.clone(),
                        };
                        crate::telemetry::count_dual_owner_write(&write.zone, &newest.zone);
                        tracing::warn!(
                            user_id = %catch.user_id,
                            service,
                            stale_zone = %write.zone,
                            stale_version = write.version,
                            owner_zone = %newest.zone,
                            owner_version = newest.version,
                            "a user was written by two zones"
                        );
                        inner.recent.push_back(catch);
                        if inner.recent.len() > RECENT_KEPT {
                            inner.recent.pop_front();
                        }
                    }
                    newest_after(newest, &write).clone()
                }
                None => {
                    inner.order.push_back(user_id.clone());
                    write
                }
            };
            inner.newest.insert(user_id, next);
            while inner.newest.len() > MAX_USERS {
                match inner.order.pop_front() {
                    Some(old) => {
                        inner.newest.remove(&old);
                    }
                    None => break,
                }
            }
        }
        inner.total += caught;
        caught
    }

    /// The catches so far: their total and the most recent ones, newest first.
    pub fn report(&self) -> (u64, Vec<Catch>) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (inner.total, inner.recent.iter().rev().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(zone: &str, version: u64, at_ms: u64) -> WriteObservation {
        WriteObservation { zone: zone.into(), version, at_ms }
    }

    #[test]
    fn catches_a_stale_zone_and_forgets_the_oldest_users_beyond_the_bound() {
        let watch = WriteWatch::default();
        let caught = watch.record(
            "orders",
            vec![
                ("u1".into(), w("az-b", 5, 10)),
                ("u1".into(), w("az-a", 8, 20)),
                ("u1".into(), w("az-b", 5, 30)),
                ("u2".into(), w("az-b", 5, 10)),
                ("u2".into(), w("az-a", 8, 20)),
            ],
        );
        assert_eq!(caught, 1);
        let (total, recent) = watch.report();
        assert_eq!((total, recent.len()), (1, 1));
        assert_eq!((recent[0].user_id.as_str(), recent[0].stale.zone.as_str()), ("u1", "az-b"));
        let many: Vec<_> =
            (0..MAX_USERS + 10).map(|i| (format!("x{i}"), w("az-a", 1, 1))).collect();
        watch.record("orders", many);
        let inner = watch.inner.lock().unwrap();
        assert_eq!(inner.newest.len(), MAX_USERS);
        assert!(!inner.newest.contains_key("u1"), "the oldest users are forgotten first");
    }
}
