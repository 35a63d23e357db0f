//! Plan preconditions: PromQL expressions (true when the value is non-zero) and HTTP checks
//! (true on a 2xx answer). Blocking: call from a blocking context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::core::{CheckKind, Precondition};
use crate::service::health::Health;

/// How long a shared (dry-run) result is reused.
pub const SHARED_FOR: Duration = Duration::from_secs(5);

pub struct Preconditions {
    health: Arc<Health>,
    agent: ureq::Agent,
    /// Results for readers (dry runs), by check: at most one outbound call per check per
    /// [`SHARED_FOR`], whoever asks and however often.
    shared: Mutex<HashMap<String, Shared>>,
}

struct Shared {
    result: Option<Result<bool, String>>,
    at: Instant,
    in_flight: bool,
}

impl Preconditions {
    pub fn new(health: Arc<Health>, timeout_ms: u64) -> Preconditions {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(timeout_ms)))
            .build()
            .into();
        Preconditions { health, agent, shared: Mutex::new(HashMap::new()) }
    }

    /// The check's result for a reader (a dry run): the last result if it is younger than
    /// [`SHARED_FOR`] or another caller is checking right now, else one check by this caller.
    ///
    /// Why: a dry run is a read anyone with read access may make, and each used to run every
    /// precondition on a blocking thread with a 2 s timeout: 2 000 anonymous dry runs against a
    /// plan whose HTTP precondition hung stretched 1 s drain steps to 12 s and made 9 168
    /// outbound calls. Runs, triggers and the plan runner, which act on the answer, still check
    /// afresh with [`Preconditions::check`].
    pub fn check_shared(&self, p: &Precondition) -> Result<bool, String> {
        let key = match &p.check {
            CheckKind::Promql(q) => format!("promql {q}"),
            CheckKind::Http(u) => format!("http {u}"),
        };
        {
            let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = shared.get_mut(&key) {
                let fresh = entry.at.elapsed() < SHARED_FOR;
                if fresh || entry.in_flight {
                    return entry.result.clone().unwrap_or_else(|| {
                        Err("being checked by another caller; ask again in a moment".into())
                    });
                }
                entry.in_flight = true;
            } else {
                // Bounded by the stored plans' preconditions; forget them all if something
                // grew it past reason.
                if shared.len() >= 4_096 {
                    shared.clear();
                }
                shared.insert(
                    key.clone(),
                    Shared { result: None, at: Instant::now(), in_flight: true },
                );
            }
        }
        let result = self.check(p);
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.insert(
            key,
            Shared { result: Some(result.clone()), at: Instant::now(), in_flight: false },
        );
        result
    }

    /// [`Preconditions::check_shared`] for every precondition, by name.
    pub fn check_all_shared(&self, list: &[Precondition]) -> Vec<(String, Result<bool, String>)> {
        list.iter().map(|p| (p.name.clone(), self.check_shared(p))).collect()
    }

    /// Whether the precondition holds now; `Err` when it could not be checked (which never
    /// counts as passing).
    pub fn check(&self, p: &Precondition) -> Result<bool, String> {
        match &p.check {
            CheckKind::Promql(query) => self.health.promql_truth(query),
            CheckKind::Http(url) => match self.agent.get(url).call() {
                Ok(response) => Ok(response.status().is_success()),
                Err(e) => Err(format!("{url} did not answer: {e}")),
            },
        }
    }

    /// Every precondition's result, by name.
    pub fn check_all(&self, list: &[Precondition]) -> Vec<(String, Result<bool, String>)> {
        list.iter().map(|p| (p.name.clone(), self.check(p))).collect()
    }
}
