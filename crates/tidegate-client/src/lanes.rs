//! The lane membership client: register, heartbeat and leave over `/v1/lanes` (blocking HTTP).
//!
//! `mq::LaneConsumer` drives it; services in other languages can speak the same three calls.
//! Every call sends the service token; heartbeat and leave also present the member secret the
//! registration answered (header `X-Tidegate-Member-Secret`).
//!
//! With several coordinator replicas (a comma-separated list of URLs, as `Router` takes), only
//! the lane authority answers membership calls; the others answer 503 `not_lane_authority`
//! naming it. A call goes to the replica that answered last, and on a connection error, a
//! timeout or that answer, to the named authority if it is in the list, else to the next URL,
//! each at most once per call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// What the coordinator answers a registration or heartbeat with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assigned {
    pub member_id: String,
    /// The member's secret: in the registration answer only (heartbeat answers leave it out).
    pub member_secret: Option<String>,
    pub generation: u64,
    /// Partitions this member may read now.
    pub assignment: Vec<u32>,
    /// Partitions it will get once their previous owner released them.
    pub pending: Vec<u32>,
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneClientError {
    /// The coordinator does not know the member (it expired, or the coordinator restarted), or
    /// does not accept its secret: register again.
    #[error("{0}")]
    MemberGone(String),
    #[error("HTTP {status} {code}: {detail}")]
    Api {
        status: u16,
        code: String,
        detail: String,
        /// The lane authority's URL, when a replica that is not it named it.
        authority: Option<String>,
    },
    #[error("cannot reach tidegate at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("unexpected answer from tidegate: {0}")]
    Decode(String),
}

impl LaneClientError {
    /// Worth asking another replica: it could not be reached, or is not the lane authority.
    fn try_elsewhere(&self) -> bool {
        match self {
            LaneClientError::Unreachable { .. } => true,
            LaneClientError::Api { code, .. } => code == "not_lane_authority",
            _ => false,
        }
    }
}

/// What a member reads, sent with its heartbeats so that a replica that became the lane
/// authority after the member registered can adopt it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reads {
    pub zone: String,
    pub topic: String,
    pub partitions: u32,
}

/// One coordinator URL and its agent (or why none could be built: an unusable CA file for an
/// `https://` base; then every call to it answers with that reason, as an unreachable one does).
#[derive(Clone)]
struct Endpoint {
    agent: Result<ureq::Agent, super::tls::TlsError>,
    base: String,
}

/// A small blocking client for one coordinator, or several replicas of one.
#[derive(Clone)]
pub struct LaneClient {
    endpoints: Arc<[Endpoint]>,
    /// The endpoint to try first: the one that answered last. Shared by clones.
    current: Arc<AtomicUsize>,
    token: Option<String>,
}

impl LaneClient {
    /// `base` is the coordinator URL, e.g. `http://127.0.0.1:8080` or `https://…`, or several
    /// replicas' URLs separated by commas; `token` a service
    /// (or operator) token: membership is a write, so the coordinator refuses anonymous members.
    /// An `https://` coordinator is verified against the system's roots, or the CA file in
    /// `TIDEGATE_CA_FILE` when it is set.
    pub fn new(base: &str, token: Option<String>, timeout: Duration) -> LaneClient {
        LaneClient::with_ca_file(base, token, timeout, super::tls::ca_file_from_env().as_deref())
    }

    /// Like [`LaneClient::new`], trusting only the certificates in `ca_file` (PEM) when given.
    pub fn with_ca_file(
        base: &str,
        token: Option<String>,
        timeout: Duration,
        ca_file: Option<&std::path::Path>,
    ) -> LaneClient {
        let mut endpoints: Vec<Endpoint> = base
            .split(',')
            .map(|b| b.trim().trim_end_matches('/'))
            .filter(|b| !b.is_empty())
            .map(|b| Endpoint { agent: super::tls::agent(b, timeout, ca_file), base: b.to_owned() })
            .collect();
        if endpoints.is_empty() {
            let agent = super::tls::agent(base, timeout, ca_file);
            endpoints.push(Endpoint { agent, base: base.to_owned() });
        }
        LaneClient { endpoints: endpoints.into(), current: Arc::new(AtomicUsize::new(0)), token }
    }

    /// The coordinator URL calls go to first (the one that answered last).
    pub fn base(&self) -> &str {
        &self.endpoints[self.current.load(Ordering::Relaxed) % self.endpoints.len()].base
    }

    /// Every configured coordinator URL.
    pub fn bases(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.base.clone()).collect()
    }

    /// Tries each replica at most once, starting with the one that answered last; on a
    /// `not_lane_authority` answer that names a URL in the list, that one next.
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        secret: Option<&str>,
    ) -> Result<Value, LaneClientError> {
        let n = self.endpoints.len();
        let mut next = self.current.load(Ordering::Relaxed) % n;
        let mut tried = vec![false; n];
        let mut last = None;
        while let Some(index) = (0..n).map(|k| (next + k) % n).find(|i| !tried[*i]) {
            tried[index] = true;
            match self.call_one(&self.endpoints[index], method, path, body.clone(), secret) {
                Err(e) if e.try_elsewhere() => {
                    next = (index + 1) % n;
                    if let LaneClientError::Api { authority: Some(url), .. } = &e
                        && let Some(named) = self.endpoints.iter().position(|p| p.base == *url)
                    {
                        next = named;
                    }
                    self.current.store(next, Ordering::Relaxed);
                    last = Some(e);
                }
                other => {
                    self.current.store(index, Ordering::Relaxed);
                    return other;
                }
            }
        }
        Err(last.unwrap_or_else(|| LaneClientError::Decode("no coordinator URL".into())))
    }

    fn call_one(
        &self,
        endpoint: &Endpoint,
        method: &str,
        path: &str,
        body: Option<Value>,
        secret: Option<&str>,
    ) -> Result<Value, LaneClientError> {
        const SECRET_HEADER: &str = "X-Tidegate-Member-Secret";
        let url = format!("{}{path}", endpoint.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let agent = endpoint.agent.as_ref().map_err(|e| LaneClientError::Unreachable {
            url: endpoint.base.clone(),
            reason: e.to_string(),
        })?;
        let result = match method {
            "GET" => {
                let mut req = agent.get(&url);
                if let Some(auth) = &auth {
                    req = req.header("Authorization", auth);
                }
                req.call()
            }
            "DELETE" => {
                let mut req = agent.delete(&url);
                if let Some(auth) = &auth {
                    req = req.header("Authorization", auth);
                }
                if let Some(secret) = secret {
                    req = req.header(SECRET_HEADER, secret);
                }
                req.call()
            }
            _ => {
                let mut req = agent.post(&url);
                if let Some(auth) = &auth {
                    req = req.header("Authorization", auth);
                }
                if let Some(secret) = secret {
                    req = req.header(SECRET_HEADER, secret);
                }
                req.send_json(body.unwrap_or(json!({})))
            }
        };
        let mut response = result.map_err(|e| LaneClientError::Unreachable {
            url: endpoint.base.clone(),
            reason: e.to_string(),
        })?;
        let status = response.status().as_u16();
        let value: Value = response
            .body_mut()
            .read_json()
            .map_err(|e| LaneClientError::Decode(format!("HTTP {status}, body not JSON: {e}")))?;
        if status >= 400 {
            let code = value["error"].as_str().unwrap_or("error").to_owned();
            let detail = value["detail"].as_str().unwrap_or("").to_owned();
            // A secret this coordinator does not accept (its key was rotated, or a failover
            // reached a replica with another key) means the same as an unknown member: the
            // consumer stops reading and registers again.
            if code == "member_not_found" || code == "member_secret_mismatch" {
                return Err(LaneClientError::MemberGone(detail));
            }
            let authority =
                value["authority"]["url"].as_str().map(|u| u.trim_end_matches('/').to_owned());
            return Err(LaneClientError::Api { status, code, detail, authority });
        }
        Ok(value)
    }

    /// Registers a member. The coordinator answers a fresh member ID (`name`, or the zone, and
    /// 64 random bits) and the member's secret, which heartbeat and leave must present.
    pub fn register(
        &self,
        group: &str,
        name: Option<&str>,
        zone: &str,
        topic: &str,
        partitions: u32,
    ) -> Result<Assigned, LaneClientError> {
        let mut body = json!({ "zone": zone, "topic": topic, "partitions": partitions });
        if let Some(name) = name {
            body["name"] = json!(name);
        }
        let assigned =
            decode(&self.call("POST", &format!("/v1/lanes/{group}/members"), Some(body), None)?)?;
        if assigned.member_secret.is_none() {
            return Err(LaneClientError::Decode("`member_secret` is missing".into()));
        }
        Ok(assigned)
    }

    /// Says the member is alive and still holds `holding`; the answer is what it may read.
    pub fn heartbeat(
        &self,
        group: &str,
        member_id: &str,
        secret: &str,
        holding: &[u32],
    ) -> Result<Assigned, LaneClientError> {
        self.heartbeat_with(group, member_id, secret, holding, None)
    }

    /// [`LaneClient::heartbeat`], also saying what the member reads, so that a replica that
    /// became the lane authority since (the previous one died) adopts it with `holding` instead
    /// of answering `member_not_found`.
    pub fn heartbeat_with(
        &self,
        group: &str,
        member_id: &str,
        secret: &str,
        holding: &[u32],
        reads: Option<&Reads>,
    ) -> Result<Assigned, LaneClientError> {
        let path = format!("/v1/lanes/{group}/members/{member_id}/heartbeat");
        let mut body = json!({ "holding": holding });
        if let Some(r) = reads {
            body["zone"] = json!(r.zone);
            body["topic"] = json!(r.topic);
            body["partitions"] = json!(r.partitions);
        }
        decode(&self.call("POST", &path, Some(body), Some(secret))?)
    }

    /// Leaves the group after releasing everything.
    pub fn leave(&self, group: &str, member_id: &str, secret: &str) -> Result<(), LaneClientError> {
        let path = format!("/v1/lanes/{group}/members/{member_id}");
        self.call("DELETE", &path, None, Some(secret)).map(|_| ())
    }

    /// `GET /v1/lanes/{group}` as JSON.
    pub fn group(&self, group: &str) -> Result<Value, LaneClientError> {
        self.call("GET", &format!("/v1/lanes/{group}"), None, None)
    }
}

fn decode(v: &Value) -> Result<Assigned, LaneClientError> {
    let number = |key: &str| {
        v[key].as_u64().ok_or_else(|| LaneClientError::Decode(format!("`{key}` is missing")))
    };
    let list = |key: &str| -> Result<Vec<u32>, LaneClientError> {
        v[key]
            .as_array()
            .ok_or_else(|| LaneClientError::Decode(format!("`{key}` is not a list")))?
            .iter()
            .map(|p| {
                p.as_u64()
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| LaneClientError::Decode(format!("`{key}` holds {p}")))
            })
            .collect()
    };
    Ok(Assigned {
        member_id: v["member_id"]
            .as_str()
            .ok_or_else(|| LaneClientError::Decode("`member_id` is missing".into()))?
            .to_owned(),
        member_secret: v["member_secret"].as_str().map(str::to_owned),
        generation: number("generation")?,
        assignment: list("assignment")?,
        pending: list("pending")?,
        heartbeat_interval_ms: number("heartbeat_interval_ms")?,
        session_timeout_ms: number("session_timeout_ms")?,
    })
}
