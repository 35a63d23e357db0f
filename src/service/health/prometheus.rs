//! The Prometheus health source: instant PromQL queries over the HTTP API (`/api/v1/query`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::core::Reading;

/// Queries with `$zone` substituted by the zone name.
pub struct PrometheusSource {
    base_url: String,
    error_rate_query: String,
    requests_query: Option<String>,
    load_query: Option<String>,
    agent: ureq::Agent,
    /// The last answer to each query, shared by every caller for [`REUSE_FOR`]: `GET
    /// /v1/zones`, the UI and dry runs are reads (anonymous, when reads are open), and each used
    /// to send its own queries to Prometheus, so a flood of reads was a flood of queries.
    answers: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One query's last answer, and the lock its one asker at a time holds.
#[derive(Default)]
struct Slot {
    last: Mutex<Option<Answer>>,
    asking: Mutex<()>,
}

/// One query's last answer and when it came.
type Answer = (Instant, Result<Option<f64>, String>);

/// How long an answer is reused. Prometheus itself changes at its scrape interval (seconds), so
/// a drain ticking every 20 ms loses nothing by it.
const REUSE_FOR: Duration = Duration::from_secs(1);
/// Most distinct queries remembered (templates times zones; more are asked afresh).
const MAX_ANSWERS: usize = 1024;

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
            answers: Mutex::new(HashMap::new()),
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

    /// The single sample of an instant query, `None` for an empty result: the answer of the last
    /// second if there is one; while another caller is asking, the previous answer (or wait for
    /// its answer when there is none), so one query per second is sent whoever asks.
    fn sample(&self, template: &str, zone: &str) -> Result<Option<f64>, String> {
        let query = template.replace("$zone", zone);
        let slot = {
            let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
            if answers.len() >= MAX_ANSWERS && !answers.contains_key(&query) {
                drop(answers);
                return self.ask(&query);
            }
            Arc::clone(answers.entry(query.clone()).or_default())
        };
        let last = || slot.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((at, answer)) = last()
            && at.elapsed() < REUSE_FOR
        {
            return answer;
        }
        let _asking = match slot.asking.try_lock() {
            Ok(guard) => guard,
            // Someone is asking now: the previous answer stands; with none yet, wait for theirs.
            Err(std::sync::TryLockError::WouldBlock) => match last() {
                Some((_, answer)) => return answer,
                None => {
                    drop(slot.asking.lock().unwrap_or_else(|p| p.into_inner()));
                    return last().map_or_else(
                        || Err("Prometheus has not answered yet".into()),
                        |(_, answer)| answer,
                    );
                }
            },
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        };
        // Asked meanwhile by the caller who held the lock before us.
        if let Some((at, answer)) = last()
            && at.elapsed() < REUSE_FOR
        {
            return answer;
        }
        let answer = self.ask(&query);
        *slot.last.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), answer.clone()));
        answer
    }

    /// Sends one instant query.
    fn ask(&self, query: &str) -> Result<Option<f64>, String> {
        let query = query.to_owned();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake Prometheus answering every query with one sample, counting the queries.
    fn fake_prometheus() -> (String, Arc<AtomicUsize>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&count);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        if line == "\r\n" {
                            seen.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(50));
                            let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.25"]}]}}"#;
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            );
                        }
                        line.clear();
                    }
                });
            }
        });
        (url, count)
    }

    #[test]
    fn a_flood_of_readers_sends_one_query_per_second_whoever_asks() {
        let (url, queries) = fake_prometheus();
        let source = Arc::new(PrometheusSource::new(&url, "errors{zone=\"$zone\"}", None, 2_000));
        let readers: Vec<_> = (0..40)
            .map(|_| {
                let source = Arc::clone(&source);
                std::thread::spawn(move || {
                    (0..10).map(|_| source.read("az-a").0).collect::<Vec<_>>()
                })
            })
            .collect();
        for reader in readers {
            for reading in reader.join().unwrap() {
                assert_eq!(reading, Reading::Known { error_rate: 0.25, requests: u64::MAX });
            }
        }
        // 400 readings of one query in well under a second: one query was sent (two if the
        // second boundary fell inside), not 400.
        let sent = queries.load(Ordering::SeqCst);
        assert!((1..=2).contains(&sent), "{sent} queries for 400 readings");
        // Another zone is another query; after a second the answer is asked afresh.
        source.read("az-b");
        assert_eq!(queries.load(Ordering::SeqCst), sent + 1);
        std::thread::sleep(REUSE_FOR + Duration::from_millis(50));
        source.read("az-a");
        assert_eq!(queries.load(Ordering::SeqCst), sent + 2);
    }
}
