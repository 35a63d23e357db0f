//! The Prometheus health source: instant PromQL queries over the HTTP API (`/api/v1/query`).

use std::time::Duration;

use serde_json::Value;

use crate::core::Reading;

/// Queries with `$zone` substituted by the zone name.
pub struct PrometheusSource {
    base_url: String,
    error_rate_query: String,
    requests_query: Option<String>,
    load_query: Option<String>,
    agent: ureq::Agent,
}

impl PrometheusSource {
    pub fn new(
        base_url: &str,
        error_rate_query: &str,
        requests_query: Option<&str>,
        timeout_ms: u64,
    ) -> PrometheusSource {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(timeout_ms)))
            .build()
            .into();
        PrometheusSource {
            base_url: base_url.trim_end_matches('/').to_owned(),
            error_rate_query: error_rate_query.to_owned(),
            requests_query: requests_query.map(str::to_owned),
            load_query: None,
            agent,
        }
    }

    /// The query of a zone's load in requests per second (capacity checks).
    pub fn with_load_query(mut self, load_query: &str) -> PrometheusSource {
        self.load_query = Some(load_query.to_owned());
        self
    }

    /// The zone's load in requests per second, or why it is unknown.
    pub fn load(&self, zone: &str) -> Result<f64, String> {
        let query = self.load_query.as_deref().ok_or("no load query is configured")?;
        match self.query(query, zone)? {
            rps if rps >= 0.0 => Ok(rps),
            rps => Err(format!("the load query for {zone} returned {rps}")),
        }
    }

    /// The zone's error rate (and request count, when a requests query is configured).
    /// Without a requests query the count is unknown, so `min_requests` cannot hold a drain
    /// back: the reading then reports `u64::MAX` requests so the rate always counts.
    pub fn read(&self, zone: &str) -> (Reading, Option<u64>) {
        let error_rate = match self.query(&self.error_rate_query, zone) {
            Ok(rate) if (0.0..=1.0).contains(&rate) => rate,
            Ok(rate) => {
                let why = format!("the error-rate query for {zone} returned {rate}, not a ratio");
                return (Reading::Unknown { why }, None);
            }
            Err(why) => return (Reading::Unknown { why }, None),
        };
        let requests = match &self.requests_query {
            None => None,
            Some(query) => match self.query(query, zone) {
                Ok(count) if count >= 0.0 => Some(count.round() as u64),
                Ok(count) => {
                    let why = format!("the requests query for {zone} returned {count}");
                    return (Reading::Unknown { why }, None);
                }
                Err(why) => return (Reading::Unknown { why }, None),
            },
        };
        let reading = Reading::Known { error_rate, requests: requests.unwrap_or(u64::MAX) };
        (reading, requests)
    }

    /// Runs one instant query and returns its single sample value.
    pub fn query(&self, template: &str, zone: &str) -> Result<f64, String> {
        let query = template.replace("$zone", zone);
        self.sample(template, zone)?
            .ok_or_else(|| format!("`{query}` returned no series (empty result)"))
    }

    /// Whether a PromQL condition holds, the way alerting rules read it: an empty result (a
    /// comparison that filtered every series out) is false, a single sample is true when it is
    /// not zero.
    pub fn truth(&self, query: &str) -> Result<bool, String> {
        Ok(self.sample(query, "")?.is_some_and(|v| v != 0.0))
    }

    /// The single sample of an instant query, `None` for an empty result.
    fn sample(&self, template: &str, zone: &str) -> Result<Option<f64>, String> {
        let query = template.replace("$zone", zone);
        let url = format!("{}/api/v1/query", self.base_url);
        let mut response = self
            .agent
            .get(&url)
            .query("query", &query)
            .call()
            .map_err(|e| format!("Prometheus at {} did not answer: {e}", self.base_url))?;
        let status = response.status().as_u16();
        let body: Value = response
            .body_mut()
            .read_json()
            .map_err(|e| format!("Prometheus answered HTTP {status} without JSON: {e}"))?;
        if body["status"] != "success" {
            return Err(format!(
                "Prometheus refused `{query}`: {}",
                body["error"].as_str().unwrap_or("unknown error")
            ));
        }
        let result = &body["data"]["result"];
        let sample = match body["data"]["resultType"].as_str() {
            Some("vector") => match result.as_array().map(Vec::as_slice) {
                Some([one]) => &one["value"][1],
                Some([]) => return Ok(None),
                Some(_) => {
                    return Err(format!(
                        "`{query}` returned several series; aggregate it with sum()"
                    ));
                }
                None => return Err("Prometheus returned a malformed vector".into()),
            },
            Some("scalar") => &result[1],
            other => return Err(format!("`{query}` returned a {other:?}, not a vector")),
        };
        let value: f64 = sample
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("`{query}` returned a sample that is not a number"))?;
        if value.is_finite() {
            Ok(Some(value))
        } else {
            Err(format!("`{query}` returned {value} (no traffic in the range?)"))
        }
    }
}
