//! The dual-owner watch: the write observations services report (`POST /v1/writes`), the
//! newest one per user, and the users caught being written by two zones (`core::is_dual_owner`).
//!
//! Kept per reporting service, so what one service reports can neither raise nor hide a catch
//! in another's writes: each service has its own users (at most [`MAX_USERS_PER_SERVICE`], its
//! own oldest forgotten first, so a flood evicts only the flooder's entries), its own last
//! [`RECENT_PER_SERVICE`] catches and its own rate ([`OBSERVATIONS_PER_SECOND`], bursts of
//! [`BURST_OBSERVATIONS`]). At most [`MAX_SERVICES`] services are watched. Who a report is from
//! is decided by the caller's identity, not by the report (`http::writes`). In memory and per
//! replica: a catch is a signal for an operator, not state (each replica counts what is
//! reported to it).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::core::{WriteObservation, is_dual_owner, newest_after};

/// Most users whose newest write is remembered, per service.
pub const MAX_USERS_PER_SERVICE: usize = 10_000;
/// Most services watched at once (service tokens report under their own identity, so this is
/// reached only by operators naming services).
pub const MAX_SERVICES: usize = 32;
/// Most catches kept for the report, per service.
pub const RECENT_PER_SERVICE: usize = 20;
/// Observations one service may report per second, sustained (a report of none counts as one).
pub const OBSERVATIONS_PER_SECOND: u64 = 10_000;
/// Observations one service may report at once after a quiet spell (twenty full reports).
pub const BURST_OBSERVATIONS: u64 = 20_000;
/// How far in the future (by this coordinator's clock) a write's `at_ms` may be: the writers'
/// clock skew. A later one is refused: kept, it would stay the user's newest write and hide a
/// stale zone's writes until then.
pub const MAX_FUTURE_SKEW_MS: u64 = 5_000;

/// One user caught written by two zones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catch {
    pub user_id: String,
    pub service: String,
    /// The newer owner's write, and the older-version write of another zone after it.
    pub newer: WriteObservation,
    pub stale: WriteObservation,
}

/// Why a report was not recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// [`MAX_SERVICES`] other services are watched already.
    TooManyServices,
    /// The service reported faster than its rate; it may report again after this long.
    RateLimited { retry_after_ms: u64 },
}

/// What one report showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// How many of its writes were caught as dual-owner writes.
    pub caught: u64,
    /// The first of them, for the report's one log event.
    pub first: Option<Catch>,
}

struct ServiceWatch {
    newest: HashMap<String, WriteObservation>,
    /// Users in the order they were first remembered, for forgetting the oldest.
    order: VecDeque<String>,
    total: u64,
    /// The last catches, each with its place in the order of all catches (for the report).
    recent: VecDeque<(u64, Catch)>,
    /// The rate budget, in thousandths of an observation, and when it was last refilled.
    budget_milli: u64,
    refilled_ms: u64,
}

impl ServiceWatch {
    fn new(now_ms: u64) -> ServiceWatch {
        ServiceWatch {
            newest: HashMap::new(),
            order: VecDeque::new(),
            total: 0,
            recent: VecDeque::new(),
            budget_milli: BURST_OBSERVATIONS * 1000,
            refilled_ms: now_ms,
        }
    }

    /// Takes `cost` observations from the budget, or says how long until there are enough.
    fn spend(&mut self, cost: u64, now_ms: u64) -> Result<(), Refused> {
        let elapsed = now_ms.saturating_sub(self.refilled_ms);
        // OBSERVATIONS_PER_SECOND per second is that many thousandths per millisecond.
        self.budget_milli = self
            .budget_milli
            .saturating_add(elapsed.saturating_mul(OBSERVATIONS_PER_SECOND))
            .min(BURST_OBSERVATIONS * 1000);
        self.refilled_ms = self.refilled_ms.max(now_ms);
        let cost_milli = cost.saturating_mul(1000);
        if cost_milli > self.budget_milli {
            let missing = cost_milli - self.budget_milli;
            return Err(Refused::RateLimited {
                retry_after_ms: missing.div_ceil(OBSERVATIONS_PER_SECOND),
            });
        }
        self.budget_milli -= cost_milli;
        Ok(())
    }
}

#[derive(Default)]
struct Inner {
    services: HashMap<String, ServiceWatch>,
    /// Catches so far over every service, numbering them for the report's order.
    seq: u64,
}

#[derive(Default)]
pub struct WriteWatch {
    inner: Mutex<Inner>,
}

impl WriteWatch {
    /// Records `writes` reported by `service` at `now_ms`, against that service's own earlier
    /// writes only. Refused as a whole (nothing recorded) beyond the service's rate, or when it
    /// is new and [`MAX_SERVICES`] are watched already. Logs one event per report that caught
    /// anything, never one per observation.
    pub fn record(
        &self,
        service: &str,
        writes: Vec<(String, WriteObservation)>,
        now_ms: u64,
    ) -> Result<Recorded, Refused> {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let inner = &mut *guard;
        if !inner.services.contains_key(service) && inner.services.len() >= MAX_SERVICES {
            return Err(Refused::TooManyServices);
        }
        let watch =
            inner.services.entry(service.to_owned()).or_insert_with(|| ServiceWatch::new(now_ms));
        watch.spend(writes.len().max(1) as u64, now_ms)?;
        let mut recorded = Recorded::default();
        for (user_id, write) in writes {
            let next = match watch.newest.get(&user_id) {
                Some(newest) => {
                    if is_dual_owner(newest, &write) {
                        let catch = Catch {
                            user_id: user_id.clone(),
                            service: service.to_owned(),
                            newer: newest.clone(),
                            stale: write.clone(),
                        };
                        crate::telemetry::count_dual_owner_write(&write.zone, &newest.zone);
                        recorded.caught += 1;
                        recorded.first.get_or_insert_with(|| catch.clone());
                        inner.seq += 1;
                        watch.recent.push_back((inner.seq, catch));
                        if watch.recent.len() > RECENT_PER_SERVICE {
                            watch.recent.pop_front();
                        }
                    }
                    newest_after(newest, &write).clone()
                }
                None => {
                    watch.order.push_back(user_id.clone());
                    write
                }
            };
            watch.newest.insert(user_id, next);
            while watch.newest.len() > MAX_USERS_PER_SERVICE {
                match watch.order.pop_front() {
                    Some(old) => {
                        watch.newest.remove(&old);
                    }
                    None => break,
                }
            }
        }
        watch.total += recorded.caught;
        if let Some(first) = &recorded.first {
            tracing::warn!(
                service,
                caught = recorded.caught,
                user_id = %first.user_id,
                stale_zone = %first.stale.zone,
                stale_version = first.stale.version,
                owner_zone = %first.newer.zone,
                owner_version = first.newer.version,
                "users were written by two zones (the first of this report named)"
            );
        }
        Ok(recorded)
    }

    /// The catches so far: their total, the most recent ones of every service (newest first)
    /// and the total by service.
    pub fn report(&self) -> (u64, Vec<Catch>, BTreeMap<String, u64>) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let by_service: BTreeMap<String, u64> =
            inner.services.iter().map(|(name, w)| (name.clone(), w.total)).collect();
        let mut recent: Vec<&(u64, Catch)> =
            inner.services.values().flat_map(|w| w.recent.iter()).collect();
        recent.sort_unstable_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        (
            by_service.values().sum(),
            recent.into_iter().map(|(_, c)| c.clone()).collect(),
            by_service,
        )
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
        let recorded = watch
            .record(
                "orders",
                vec![
                    ("u1".into(), w("az-b", 5, 10)),
                    ("u1".into(), w("az-a", 8, 20)),
                    ("u1".into(), w("az-b", 5, 30)),
                    ("u2".into(), w("az-b", 5, 10)),
                    ("u2".into(), w("az-a", 8, 20)),
                ],
                0,
            )
            .unwrap();
        assert_eq!(recorded.caught, 1);
        let (total, recent, _) = watch.report();
        assert_eq!((total, recent.len()), (1, 1));
        assert_eq!((recent[0].user_id.as_str(), recent[0].stale.zone.as_str()), ("u1", "az-b"));
        // Later, so the rate allows it.
        let many: Vec<_> =
            (0..MAX_USERS_PER_SERVICE + 10).map(|i| (format!("x{i}"), w("az-a", 1, 1))).collect();
        watch.record("orders", many, 60_000).unwrap();
        let inner = watch.inner.lock().unwrap();
        assert_eq!(inner.services["orders"].newest.len(), MAX_USERS_PER_SERVICE);
        assert!(!inner.services["orders"].newest.contains_key("u1"), "the oldest forgotten first");
    }

    #[test]
    fn one_services_flood_evicts_and_crowds_out_only_its_own() {
        let watch = WriteWatch::default();
        watch.record("orders", vec![("u1".into(), w("az-a", 8, 100))], 0).unwrap();
        // Another service floods users and catches, over time so its rate allows it.
        for round in 0..3u64 {
            let flood: Vec<_> = (0..MAX_USERS_PER_SERVICE)
                .map(|i| (format!("f{round}-{i}"), w("az-a", 8, 100)))
                .collect();
            watch.record("forger", flood, 10_000 * (round + 1)).unwrap();
        }
        let fakes: Vec<_> = (0..200)
            .flat_map(|i| {
                [(format!("p{i}"), w("az-a", 8, 100)), (format!("p{i}"), w("az-b", 1, 200))]
            })
            .collect();
        assert_eq!(watch.record("forger", fakes, 60_000).unwrap().caught, 200);
        // The real stale write is still caught against the owner's write, and listed.
        let real = watch.record("orders", vec![("u1".into(), w("az-b", 5, 150))], 60_000).unwrap();
        assert_eq!(real.caught, 1);
        let (total, recent, by_service) = watch.report();
        assert_eq!(total, 201);
        assert_eq!((by_service["orders"], by_service["forger"]), (1, 200));
        assert_eq!(recent.len(), 1 + RECENT_PER_SERVICE, "the forger's newest 20 and the real one");
        assert!(recent.iter().any(|c| c.service == "orders" && c.user_id == "u1"));
    }

    #[test]
    fn a_service_beyond_its_rate_or_the_service_bound_is_refused_and_records_nothing() {
        let watch = WriteWatch::default();
        let batch =
            |n: usize| -> Vec<_> { (0..n).map(|i| (format!("u{i}"), w("az-a", 1, 1))).collect() };
        for _ in 0..(BURST_OBSERVATIONS / 1000) {
            watch.record("orders", batch(1000), 0).unwrap();
        }
        assert_eq!(
            watch.record("orders", batch(1000), 0),
            Err(Refused::RateLimited { retry_after_ms: 100 })
        );
        // A tenth of a second later there is room for 1000 again; other services never waited.
        assert!(watch.record("orders", batch(1000), 100).is_ok());
        assert!(watch.record("billing", batch(1000), 0).is_ok());
        for i in 2..MAX_SERVICES {
            watch.record(&format!("s{i}"), Vec::new(), 0).unwrap();
        }
        assert_eq!(watch.record("one-more", batch(1), 0), Err(Refused::TooManyServices));
        assert!(watch.record("orders", batch(1), 1000).is_ok(), "known services still report");
    }
}
