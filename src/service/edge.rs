//! What `tidegate edge` serves from, framework-free: its state ([`EdgeApp`]) and the gateway
//! check ([`gate`]), so that the Rocket routes (`http::edge`) and the hyper fast path
//! (`http_fast::edge`) give the same answers by construction.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::client::{Router, RouterStatus, WriteScope};
use crate::config::Config;
use crate::core::{RoutingTable, Rule, TagError, validate_user_id};
use crate::service::bearer::Bearer;
use crate::service::connections::{self, Guard};
use crate::service::tag_answer::{self, Failure};
use crate::telemetry::{self, GateCounters, TagCounters};

/// Everything the edge's handlers need.
pub struct EdgeApp {
    pub router: Arc<Router>,
    pub config: Arc<Config>,
    pub tag_counters: TagCounters,
    pub gate_counters: GateCounters,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The edge listener's connection guard (`[edge] max_connections` and timeouts).
    pub connections: Arc<Guard>,
    /// The fan-out tree: the watch stream this edge re-serves and its subscribers (leaves).
    pub relay: Arc<Relay>,
}

impl EdgeApp {
    pub fn new(router: Arc<Router>, config: Arc<Config>, relay: Arc<Relay>) -> EdgeApp {
        let metrics = telemetry::install();
        let tag_counters = TagCounters::for_zones(&config.zones);
        let gate_counters = GateCounters::for_zones(&config.zones);
        let connections = connections::guard(&config.edge.connections, "edge");
        EdgeApp { router, config, tag_counters, gate_counters, metrics, connections, relay }
    }

    /// Holds a write this edge let through (`owned` from `GET /v1/write-check`, or a write
    /// past the gate), judged with the table of `version`: its caller commits upstream, where
    /// the edge cannot see the commit end, so the edge acknowledges no newer table that freezes
    /// units for `[subscribers] max_write` (docs/src/partitions.md). `scope` was taken before
    /// the table was read. Returns the bound in ms, for the answer's `commit_within_ms`.
    pub fn hold_write(&self, scope: WriteScope<'_>, version: u64) -> u64 {
        let bound = self.config.lease.max_write_ms;
        scope.hold_for(version, Duration::from_millis(bound));
        bound
    }

    /// The table being served, or 503 `no_table` saying why there is none.
    pub fn table(&self) -> Result<Arc<RoutingTable>, Failure> {
        self.router.table().ok_or_else(|| {
            Failure::new(
                503,
                "no_table",
                format!(
                    "the edge has no routing table yet: {}",
                    describe(&self.router.status(), None)
                ),
            )
        })
    }
}

/// A sentence for operators: what is served, from where, and whether the coordinator is reachable.
pub fn describe(status: &RouterStatus, age: Option<f64>) -> String {
    let mut text = status.to_string();
    if let Some(age) = age {
        text.push_str(&format!("; table received {age:.1}s ago"));
    }
    text
}

/// How long ago the table being served arrived.
pub fn age_seconds(status: &RouterStatus) -> Option<f64> {
    let at = status.updated_at?;
    Some(SystemTime::now().duration_since(at).map(|d| d.as_secs_f64()).unwrap_or(0.0))
}

/// The header a gateway sends its tidegate token in (nginx: `proxy_set_header`).
pub const GATE_TOKEN_HEADER: &str = "x-tidegate-token";

/// What a gateway check reads from its request. Header values are the first of their name, as
/// UTF-8 (a value that is not is absent); `cookies` are every `Cookie` header's value.
#[derive(Debug, Default)]
pub struct GateRequest<'a> {
    /// `x-tidegate-token`.
    pub gate_token: Option<&'a str>,
    pub authorization: Option<&'a str>,
    /// The header named by `[edge] user_header`.
    pub user_header: Option<&'a str>,
    pub cookies: Vec<&'a str>,
    /// The check's own query string, and `X-Original-URI` (nginx's `auth_request` subrequest
    /// has a URI of its own).
    pub query: Option<&'a str>,
    pub original_uri: Option<&'a str>,
    /// `x-tidegate-domain` and `x-tidegate-service`, set per location by the gateway.
    pub domain: Option<&'a str>,
    pub service: Option<&'a str>,
    /// The check's own method and `X-Original-Method`.
    pub method: &'a str,
    pub original_method: Option<&'a str>,
}

/// The gateway check's answer: 200, no body, these headers.
#[derive(Debug)]
pub struct GateAnswer {
    pub color: std::borrow::Cow<'static, str>,
    pub zone: String,
    pub version: u64,
    pub source: &'static str,
    /// `x-tidegate-signature` of the tag for the user, with `[edge] tag_key`.
    pub signature: Option<String>,
    /// The release channel that decided (`x-tidegate-channel`), when one did.
    pub channel: Option<String>,
    /// The zone taking global writes (`x-tidegate-global-writer`, absent when none) and
    /// whether global data is read-only (`x-tidegate-global-read-only`).
    pub global_writer: Option<String>,
    pub global_read_only: bool,
}

impl GateAnswer {
    /// The answer's headers, in the order both listeners send them.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("x-tidegate-color", self.color.to_string()),
            ("x-tidegate-zone", self.zone.clone()),
            ("x-tidegate-version", self.version.to_string()),
            ("x-tidegate-source", self.source.to_owned()),
        ];
        if let Some(channel) = &self.channel {
            headers.push(("x-tidegate-channel", channel.clone()));
        }
        if let Some(signature) = &self.signature {
            headers.push((crate::client::SIGNATURE_HEADER, signature.clone()));
        }
        if let Some(zone) = &self.global_writer {
            headers.push(("x-tidegate-global-writer", zone.clone()));
        }
        let read_only = if self.global_read_only { "true" } else { "false" };
        headers.push(("x-tidegate-global-read-only", read_only.to_owned()));
        headers
    }
}

/// The gateway's identity: its token in [`GATE_TOKEN_HEADER`], or an `Authorization` header
/// only when that holds a token tidegate knows. Any other `Authorization` is the application's
/// own (the gateway forwards the user's request headers to the check) and is ignored: it used
/// to be taken for a tidegate token and refused every such request with 401.
fn gate_caller(config: &Config, request: &GateRequest<'_>) -> Bearer {
    match (request.gate_token, request.authorization) {
        (Some(token), _) => Bearer::identify(config, Some(&format!("Bearer {}", token.trim()))),
        (None, Some(authorization)) => match Bearer::identify(config, Some(authorization)) {
            Bearer::Rejected(_) => Bearer::Anonymous,
            known => known,
        },
        (None, None) => Bearer::Anonymous,
    }
}

/// The value of cookie `name` among `headers` (each a `Cookie` header's value), parsed as
/// Rocket parses request cookies: pairs split at `;` and trimmed, name and value trimmed and
/// percent-decoded (a pair that does not decode to UTF-8 is skipped), the last pair of a name
/// winning.
pub fn cookie<'h>(headers: &[&'h str], name: &str) -> Option<std::borrow::Cow<'h, str>> {
    let mut found = None;
    for header in headers {
        for pair in header.split(';').map(str::trim) {
            let Some((n, v)) = pair.split_once('=') else { continue };
            let (n, v) = (n.trim(), v.trim());
            if n.is_empty() {
                continue;
            }
            let decode = |s: &'h str| percent_encoding::percent_decode_str(s).decode_utf8();
            let (Ok(n), Ok(v)) = (decode(n), decode(v)) else { continue };
            if n == name {
                found = Some(v);
            }
        }
    }
    found
}

/// The user of a gateway check: the configured header, else the cookie, else the query
/// parameter of this request or of the original request (`X-Original-URI`). A query parameter
/// is decoded exactly as `/v1/tag` decodes `user_id`: not UTF-8 once decoded, or given twice, is
/// refused (400 `invalid_user_id`) instead of tagging a mangled or first ID.
fn gate_user(config: &Config, request: &GateRequest<'_>) -> Result<Option<String>, Failure> {
    let edge = &config.edge;
    let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    if let Some(user) = request.user_header.and_then(nonempty) {
        return Ok(Some(user));
    }
    if let Some(user) = cookie(&request.cookies, &edge.user_cookie).and_then(|c| nonempty(&c)) {
        return Ok(Some(user));
    }
    let original = request.original_uri.and_then(|uri| uri.split_once('?').map(|(_, q)| q));
    for query in [request.query, original].into_iter().flatten() {
        let found = tag_answer::user_param(Some(query), &edge.user_query)?;
        if let Some(user) = found.filter(|u| !u.is_empty()) {
            return Ok(Some(user.into_owned()));
        }
    }
    Ok(None)
}

/// The gateway check (nginx `auth_request`, Envoy HTTP `ext_authz`). `source` says what decided:
/// `unit`, `pin`, `channel` (for a location that names its service; `channel` then names the
/// release channel), or `fallback` for a request without a user ID. With the `reject` fallback
/// such a request gets 403 `missing_user_id` (the gateway refuses it). A write (the original
/// method is not `GET`, `HEAD` or `OPTIONS`) of a user whose unit a move has frozen gets 503
/// `frozen`; a write without a user ID takes the write fallback.
pub fn gate(app: &EdgeApp, request: &GateRequest<'_>) -> Result<GateAnswer, Failure> {
    // A gateway whose token is wrong (rotated, mistyped) must not turn every user request into
    // a refusal: `auth_request` reads 401 and 403 as "refuse this user". The gate answers 500
    // instead, which nginx treats as "the check failed" and serves through its fallback, and
    // counts it (alert TidegateGateCallerRefused) so the token gets fixed.
    if let Err(refused) = gate_caller(&app.config, request).require_reader(&app.config) {
        telemetry::count_gate_caller_refused();
        return Err(Failure::new(
            500,
            "gate_caller_refused",
            format!(
                "the gateway's token was refused ({}); send a service token in the {GATE_TOKEN_HEADER} header",
                refused.detail
            ),
        ));
    }
    let nonempty = |s: &&str| !s.is_empty();
    let domain = request.domain.filter(nonempty);
    let service = request.service.filter(nonempty);
    let method = request.original_method.map(str::trim).unwrap_or(request.method);
    let write = !["GET", "HEAD", "OPTIONS"].iter().any(|m| m.eq_ignore_ascii_case(method));
    // A write let through is committed upstream, where this edge cannot see it end: as for
    // `GET /v1/write-check`, its scope is taken before the table is read and held past the
    // answer for the longest commit (`[subscribers] max_write`), so the edge acknowledges no
    // freeze before the write could have committed (docs/src/partitions.md).
    let scope = write.then(|| app.router.write_scope());
    let table = app.table()?;
    let map = tag_answer::domain_map(&table, domain)?;
    tag_answer::check_service(service)?;
    let user = gate_user(&app.config, request)?;
    let mut channel = None;
    let (color, source) = match &user {
        Some(user_id) => {
            validate_user_id(user_id)?;
            let tag = match service {
                None => table.tag_in(map, user_id)?,
                Some(s) => match table.tag_service(domain, user_id, Some(s)) {
                    Ok(found) => {
                        let (tag, rule) = found.expect("domain_map found the domain");
                        if let Rule::Channel(name) = rule {
                            channel = Some(name.to_owned());
                        }
                        tag
                    }
                    // A suspended channel whose fallback is `reject`: the gateway refuses the
                    // user (403), as the channel's owner asked.
                    Err(e @ TagError::ChannelUnavailable(_)) => {
                        return Err(Failure::new(403, "channel_unavailable", e.to_string()));
                    }
                    Err(e) => return Err(e.into()),
                },
            };
            // A write that a move has frozen waits (a map move's frozen unit, or a channel
            // change's freeze of this service): 503 with Retry-After (and
            // `x-tidegate-refusal: frozen` for gateways), while reads go on.
            if write && table.write_frozen(domain, service, user_id, &tag) {
                app.gate_counters.count(tag.color, table.lane(tag.color), "frozen");
                return Err(frozen_write(tag.unit.0, table.version()));
            }
            let source = match (tag.pinned, &channel) {
                (true, _) => "pin",
                (false, Some(_)) => "channel",
                (false, None) => "unit",
            };
            (tag.color, source)
        }
        None => {
            // Writes take the write fallback (`reject` by default): a write never lands in a
            // zone drawn at random, even while reads do.
            let fallback = if write { app.config.write_fallback } else { app.config.fallback };
            let color = table.untagged(fallback, rand::random::<f64>()).map_err(|e| {
                let detail = if write {
                    "a write without a user ID is refused (write_fallback is `reject`)".to_owned()
                } else {
                    e.to_string()
                };
                Failure::new(403, "missing_user_id", detail)
            })?;
            (color, "fallback")
        }
    };
    if let (Some(scope), Some(_)) = (scope, &user) {
        app.hold_write(scope, table.version());
    }
    app.tag_counters.count(color, 1);
    app.gate_counters.count(color, table.lane(color), source);
    let signature = match (&app.config.edge.tag_key, &user) {
        (Some(key), Some(user_id)) => {
            Some(key.sign_for(table.lane(color), table.version(), user_id, domain, service))
        }
        _ => None,
    };
    Ok(GateAnswer {
        color: table.lane_static(color),
        global_writer: table.global().zone.map(|z| table.zone_of(z).to_owned()),
        global_read_only: table.global().read_only,
        zone: table.zone_of(color).to_owned(),
        version: table.version(),
        source,
        channel,
        signature,
    })
}

/// The refusal of a write whose unit is frozen by a move in progress.
pub fn frozen_write(unit: u32, version: u64) -> Failure {
    let retry_ms = crate::core::WRITE_RETRY_AFTER_MS;
    Failure::new(
        503,
        "frozen",
        format!(
            "the user's unit {unit} is frozen by a move in progress at routing version {version}; writes resume once every subscriber applied the switch, retry after {retry_ms} ms (reads go on)"
        ),
    )
    .with("retry_after_seconds", retry_ms.div_ceil(1000).into())
    .with("retry_after_ms", retry_ms.into())
    .with("unit", unit.into())
}

#[cfg(test)]
mod tests {
    use super::cookie;

    #[test]
    fn cookies_are_read_as_rocket_reads_them() {
        for (headers, want) in [
            (&["tidegate-user=u1"][..], Some("u1")),
            (&["a=1; tidegate-user=u2; b=3"][..], Some("u2")),
            (&[" tidegate-user = u3 "][..], Some("u3")),
            (&["tidegate-user=caf%C3%A9"][..], Some("café")),
            (&["tidegate-user=\"quoted\""][..], Some("\"quoted\"")),
            (&["tidegate-user=first", "tidegate-user=last"][..], Some("last")),
            (&["tidegate-user=first; tidegate-user=%ff"][..], Some("first")),
            (&["tidegate%2Duser=encoded-name"][..], Some("encoded-name")),
            (&["Tidegate-User=case"][..], None),
            (&["tidegate-user"][..], None),
            (&["=x; tidegate-user="][..], Some("")),
            (&[][..], None),
        ] {
            assert_eq!(cookie(headers, "tidegate-user").as_deref(), want, "{headers:?}");
        }
    }
}

/// The newest routing event an edge re-serves: the coordinator's event data, framed once.
#[derive(Clone, Debug)]
pub struct RelayFrame {
    pub version: u64,
    pub bytes: Arc<[u8]>,
}

/// The edge's part of the fan-out tree. The edge re-serves the coordinator's watch stream to
/// the Routers and edges near it (its *leaves*, `GET /v1/routing/watch` on the edge), takes
/// their acknowledgements (`POST /v1/subscribers/<id>/ack`) into a registry of its own, and
/// reports that registry upward as a summary (`POST /v1/subscribers/<edge>/leaves` on the
/// coordinator: counts by zone and applied version, the furthest behind by name), at once when
/// a leaf acknowledges or the edge takes a table, and every `LEAVES_EVERY_MS` anyway. The
/// coordinator's convergence gates count the leaves as their own subscribers, so a stuck leaf
/// still holds a drain and is named (with the edge it watches through), while the coordinator
/// holds one stream per edge.
pub struct Relay {
    pub frames: tokio::sync::watch::Sender<Option<RelayFrame>>,
    pub leaves: Arc<crate::service::subscribers::Subscribers>,
    /// Whether leaves may register (the edge has a token to report them with, and
    /// `[edge] max_leaves` is above 0): a leaf registered here and never reported would be a
    /// subscriber no convergence gate waits for.
    pub registers: bool,
    /// Serves the watch stream at all (`[edge] max_leaves` above 0).
    pub serves: bool,
    dirty: (Mutex<bool>, Condvar),
}

impl Relay {
    pub fn new(config: &Config) -> Relay {
        let max = config.edge.max_leaves;
        let leaves = crate::service::subscribers::Subscribers::new(
            config.subscriber_stale_after_ms,
            config.subscriber_max_per_caller,
        )
        .with_max(max)
        .with_lease_hold(config.lease.bound_ms())
        .requiring_lease(config.lease.required);
        Relay {
            frames: tokio::sync::watch::Sender::new(None),
            leaves: Arc::new(leaves),
            registers: max > 0 && config.edge.token.is_some(),
            serves: max > 0,
            dirty: (Mutex::new(false), Condvar::new()),
        }
    }

    /// Takes the routing event of `version` (its data as the coordinator sent it) if it is newer
    /// than the one re-served.
    pub fn publish(&self, version: u64, data: &str) {
        let taken = self.frames.send_if_modified(|held| {
            if held.as_ref().is_some_and(|f| f.version >= version) {
                return false;
            }
            let mut text = format!("id:{version}\nevent:routing\n");
            for line in data.split('\n') {
                text.push_str("data:");
                text.push_str(line);
                text.push('\n');
            }
            text.push('\n');
            *held = Some(RelayFrame { version, bytes: Arc::from(text.into_bytes()) });
            true
        });
        if taken {
            self.mark();
        }
    }

    /// The version re-served (0 before the first).
    pub fn version(&self) -> u64 {
        self.frames.borrow().as_ref().map_or(0, |f| f.version)
    }

    /// Something the coordinator should hear soon: a leaf acknowledged, or a new table. Only
    /// the first mark since the last report wakes the reporter (a wake is a system call; 100 000
    /// leaves acknowledge one change): it finds the mark set when it next waits.
    pub fn mark(&self) {
        let mut dirty = self.dirty.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !*dirty {
            *dirty = true;
            self.dirty.1.notify_one();
        }
    }

    /// Waits until [`Relay::mark`] or `timeout`; clears the mark.
    fn wait(&self, timeout: Duration) {
        let guard = self.dirty.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut dirty, _) = self
            .dirty
            .1
            .wait_timeout_while(guard, timeout, |dirty| !*dirty)
            .unwrap_or_else(PoisonError::into_inner);
        *dirty = false;
    }
}

/// Reports the leaves to the coordinator the edge watches until the router is dropped: soon
/// (after [`REPORT_GAP`], which gathers the acks of one change) when marked, else every
/// `LEAVES_EVERY_MS`. The summary's `table_version` is read before the registry, so every leaf
/// that could still hold an older table is in the summary (a leaf registering later is sent the
/// newer table first).
pub fn report_leaves(router: std::sync::Weak<Router>, relay: Arc<Relay>, edge_id: String) {
    use crate::service::subscribers::LEAVES_EVERY_MS;
    let path = format!("/v1/subscribers/{}/leaves", percent_encode(&edge_id));
    let mut last_error: Option<(String, std::time::Instant)> = None;
    loop {
        relay.wait(Duration::from_millis(LEAVES_EVERY_MS));
        // Gather the acks of one change: at most one report per REPORT_GAP, so the coordinator's
        // work follows the number of edges, not of leaves (100 000 leaves acking over seconds
        // made a report every few ms from each edge).
        std::thread::sleep(REPORT_GAP);
        let Some(router) = router.upgrade() else { return };
        let table_version = relay.version();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let summary = relay.leaves.summary(now, table_version);
        let leaves = summary.total();
        let outcome = match router.post_upstream(&path, &serde_json::json!({ "summary": summary }))
        {
            Ok(status) if (200..300).contains(&status) => Ok(()),
            Ok(status) => Err(format!("the coordinator answered the leaves report with {status}")),
            Err(e) => Err(e),
        };
        drop(router);
        telemetry::edge_leaves(leaves);
        match outcome {
            Ok(()) => last_error = None,
            Err(why) => {
                // Once per cause and minute: a coordinator that is down is logged by the
                // reachability log already.
                let repeat = last_error
                    .as_ref()
                    .is_some_and(|(w, at)| *w == why && at.elapsed() < Duration::from_secs(60));
                if !repeat {
                    tracing::warn!(component = "edge", leaves, "leaves report failed: {why}");
                    last_error = Some((why, std::time::Instant::now()));
                }
            }
        }
    }
}

/// The shortest time between two leaves reports of one edge.
const REPORT_GAP: Duration = Duration::from_millis(25);

fn percent_encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}
