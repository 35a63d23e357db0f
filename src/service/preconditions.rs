//! Plan preconditions: PromQL expressions (true when the value is non-zero) and HTTP checks
//! (true on a 2xx answer). Blocking: call from a blocking context.

use std::sync::Arc;
use std::time::Duration;

use crate::core::{CheckKind, Precondition};
use crate::service::health::Health;

pub struct Preconditions {
    health: Arc<Health>,
    agent: ureq::Agent,
}

impl Preconditions {
    pub fn new(health: Arc<Health>, timeout_ms: u64) -> Preconditions {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(timeout_ms)))
            .build()
            .into();
        Preconditions { health, agent }
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
