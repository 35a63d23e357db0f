//! The Rocket instance of `tidegate edge`: tagging, the read-only routing table, the gateway
//! check `GET /v1/gate`, OFREP, health and metrics, all answered from the table a client
//! `Router` keeps current over the watch stream. No request waits for the coordinator.
//!
//! The handlers share their bodies with the coordinator's (`tag::tag_one_with`,
//! `routing::routing_body`, `ofrep::one` / `ofrep::bulk`), so the edge cannot answer differently
//! from the coordinator at the same routing version.

use std::io::Cursor;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use rocket::data::{ByteUnit, Limits};
use rocket::fairing::AdHoc;
use rocket::http::{ContentType, Header, Status};
use rocket::request::{FromRequest, Outcome, Request};
use rocket::response::{self, Responder, Response};
use rocket::serde::json::Json;
use rocket::{Build, Rocket, State, delete, get, patch, post, put, routes};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::{self, ApiError, json_error};
use super::ofrep::{self, IfNoneMatch, Ofrep};
use super::routing::routing_body;
use super::tag::{self, BatchRequest, Tagged, Versioned};
use crate::client::{Origin, Router, RouterStatus};
use crate::config::Config;
use crate::core::{RoutingTable, validate_user_id};
use crate::service::connections::{self, Guard};
use crate::service::tag_answer::{self, Failure};
use crate::telemetry::{self, TagCounters};

/// Everything the edge's handlers need, managed by Rocket.
pub struct EdgeApp {
    pub router: Arc<Router>,
    pub config: Arc<Config>,
    pub tag_counters: TagCounters,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The edge listener's connection guard (`[edge] max_connections` and timeouts).
    pub connections: Arc<Guard>,
}

impl EdgeApp {
    pub fn new(router: Arc<Router>, config: Arc<Config>) -> EdgeApp {
        let metrics = telemetry::install();
        let tag_counters = TagCounters::for_zones(&config.zones);
        let connections = connections::guard(&config.edge.connections, "edge");
        EdgeApp { router, config, tag_counters, metrics, connections }
    }

    /// The table being served, or 503 `no_table` saying why there is none.
    fn table(&self) -> Result<Arc<RoutingTable>, ApiError> {
        self.router.table().ok_or_else(|| {
            ApiError::new(
                Status::ServiceUnavailable,
                "no_table",
                format!(
                    "the edge has no routing table yet: {}",
                    describe(&self.router.status(), None)
                ),
            )
        })
    }
}

/// The Rocket instance of the edge, listening on `[edge] address` and `port`.
pub fn build(app: EdgeApp) -> Rocket<Build> {
    let config = Arc::clone(&app.config);
    let body_limit = ByteUnit::from(config.max_body_bytes);
    let figment = rocket::Config::figment()
        .merge(("address", config.edge.address))
        .merge(("port", config.edge.port))
        .merge(("limits", Limits::default().limit("json", body_limit).limit("string", body_limit)))
        .merge(("log_level", rocket::config::LogLevel::Critical))
        .merge(("cli_colors", false))
        .merge(("ident", "tidegate-edge"))
        .merge(("secret_key", super::ui::secret_key(&config.ui).to_vec()));
    // The patched Rocket's serve() admits every connection through this guard.
    let guard: Arc<rocket::conn_guard::Guard> = Arc::clone(&app.connections);
    rocket::custom(figment)
        .manage(guard)
        .manage(config)
        .manage(app)
        .register("/", error::catchers())
        .mount(
            "/",
            routes![
                tag_one,
                tag_batch,
                get_routing,
                gate,
                gate_post,
                gate_put,
                gate_delete,
                gate_patch,
                evaluate_flag,
                evaluate_flags,
                write_check,
                healthz,
                readyz,
                metrics,
                read_only_put,
                read_only_post,
                read_only_delete,
            ],
        )
        .attach(AdHoc::on_liftoff("announce", |rocket| {
            Box::pin(async move {
                let config = rocket.config();
                // Tests and scripts start the edge on port 0 and read this line for the port.
                println!(
                    "tidegate edge listening on http://{}",
                    SocketAddr::new(config.address, config.port)
                );
            })
        }))
}

/// Serves `app` until Ctrl-C or SIGTERM.
pub fn run(app: EdgeApp) -> Result<(), String> {
    let rocket = build(app);
    let at = super::listen_address(&rocket);
    rocket::execute(rocket.launch()).map(|_| ()).map_err(|e| super::launch_error(e, "edge", &at))
}

#[get("/v1/tag")]
fn tag_one(
    app: &State<EdgeApp>,
    caller: Caller,
    origin: &rocket::http::uri::Origin<'_>,
) -> Result<Tagged, ApiError> {
    caller.require_reader(&app.config)?;
    let user_id = tag::user_id_param(origin)?;
    let query = origin.query().map(|q| q.as_str());
    let domain = crate::service::tag_answer::domain_param(query)?;
    let service = crate::service::tag_answer::service_param(query)?;
    let table = app.table()?;
    tag::tag_one_with(
        &table,
        app.config.fallback,
        &app.tag_counters,
        user_id.as_deref(),
        domain.as_deref(),
        service.as_deref(),
    )
}

#[post("/v1/tag", data = "<request>")]
fn tag_batch(
    app: &State<EdgeApp>,
    caller: Caller,
    request: Result<Json<BatchRequest<'_>>, rocket::serde::json::Error<'_>>,
) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    let table = app.table()?;
    tag::tag_batch_with(&table, app.config.max_batch, &app.tag_counters, &request)
}

#[get("/v1/routing")]
fn get_routing(app: &State<EdgeApp>, caller: Caller) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let table = app.table()?;
    let log_id = app.router.log_id().unwrap_or_default();
    Ok(Versioned::new(&routing_body(&table, &log_id), table.version()))
}

/// Changes go to the coordinator: the edge has no log and no write path.
fn read_only(path: &std::path::Path) -> ApiError {
    ApiError::new(
        Status::MethodNotAllowed,
        "read_only",
        format!(
            "the edge serves routing read-only; send changes to /v1/{} on a coordinator",
            path.display()
        ),
    )
}

#[put("/v1/<path..>", rank = 10)]
fn read_only_put(path: PathBuf) -> ApiError {
    read_only(&path)
}

#[post("/v1/<path..>", rank = 10)]
fn read_only_post(path: PathBuf) -> ApiError {
    read_only(&path)
}

#[delete("/v1/<path..>", rank = 10)]
fn read_only_delete(path: PathBuf) -> ApiError {
    read_only(&path)
}

/// The user ID of a gateway check: the configured header, else the cookie, else the query
/// parameter of this request or of the original request (`X-Original-URI`, which nginx's
/// `auth_request` sets in the example because the subrequest has its own URI). A query
/// parameter is decoded exactly as `/v1/tag` decodes `user_id`: not UTF-8 once decoded, or
/// given twice, is refused (400 `invalid_user_id`) instead of tagging a mangled or first ID.
/// The user of a gateway check and the routing domain the gateway asks about
/// (`x-tidegate-domain`, set per location by the gateway; absent: the default domain).
///
/// The third field says whether the request is a write: its method (`X-Original-Method`, which
/// the shipped nginx config sets, else the check's own method, which Envoy forwards) is not
/// `GET`, `HEAD` or `OPTIONS`.
/// The fourth is the service the location serves (`x-tidegate-service`, set per location like
/// the domain; absent: the global rule): its release channel may decide.
pub struct GateUser(Result<Option<String>, Failure>, Option<String>, bool, Option<String>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for GateUser {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let edge = &request.rocket().state::<EdgeApp>().expect("EdgeApp is managed").config.edge;
        let nonempty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let from_header = request.headers().get_one(&edge.user_header).and_then(nonempty);
        let from_cookie =
            || request.cookies().get(&edge.user_cookie).and_then(|c| nonempty(c.value()));
        let from_query = || -> Result<Option<String>, Failure> {
            let own = request.uri().query().map(|q| q.as_str());
            let original = request
                .headers()
                .get_one("x-original-uri")
                .and_then(|uri| uri.split_once('?').map(|(_, q)| q));
            for query in [own, original].into_iter().flatten() {
                let found = tag_answer::user_param(Some(query), &edge.user_query)?;
                if let Some(user) = found.filter(|u| !u.is_empty()) {
                    return Ok(Some(user.into_owned()));
                }
            }
            Ok(None)
        };
        let user = match from_header.or_else(from_cookie) {
            Some(user) => Ok(Some(user)),
            None => from_query(),
        };
        let domain = request.headers().get_one("x-tidegate-domain").and_then(nonempty);
        let method = request
            .headers()
            .get_one("x-original-method")
            .map(str::trim)
            .unwrap_or_else(|| request.method().as_str());
        let write = !["GET", "HEAD", "OPTIONS"].iter().any(|m| m.eq_ignore_ascii_case(method));
        let service = request.headers().get_one("x-tidegate-service").and_then(nonempty);
        Outcome::Success(GateUser(user, domain, write, service))
    }
}

/// The gateway check's answer: 200, no body, the routing headers.
pub struct GateAnswer {
    color: std::borrow::Cow<'static, str>,
    zone: String,
    version: u64,
    source: &'static str,
    /// `x-tidegate-signature` of the tag for the user, with `[edge] tag_key`.
    signature: Option<String>,
    /// The release channel that decided (`x-tidegate-channel`), when one did.
    channel: Option<String>,
    /// The zone taking global writes (`x-tidegate-global-writer`, absent when none) and
    /// whether global data is read-only (`x-tidegate-global-read-only`).
    global_writer: Option<String>,
    global_read_only: bool,
}

impl<'r> Responder<'r, 'static> for GateAnswer {
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'static> {
        let mut response = Response::build();
        response
            .status(Status::Ok)
            .header(Header::new("x-tidegate-color", self.color))
            .header(Header::new("x-tidegate-zone", self.zone))
            .header(Header::new("x-tidegate-version", self.version.to_string()))
            .header(Header::new("x-tidegate-source", self.source));
        if let Some(channel) = self.channel {
            response.header(Header::new("x-tidegate-channel", channel));
        }
        if let Some(signature) = self.signature {
            response.header(Header::new(crate::client::SIGNATURE_HEADER, signature));
        }
        if let Some(zone) = self.global_writer {
            response.header(Header::new("x-tidegate-global-writer", zone));
        }
        response.header(Header::new(
            "x-tidegate-global-read-only",
            if self.global_read_only { "true" } else { "false" },
        ));
        response.sized_body(0, Cursor::new(Vec::new())).ok()
    }
}

/// The gateway check (nginx `auth_request`, Envoy HTTP `ext_authz`). `x-tidegate-source` says
/// what decided: `unit`, `pin`, `channel` (for a location that names its service in
/// `x-tidegate-service`; `x-tidegate-channel` then names the release channel), or `fallback` for
/// a request without a user ID. With the
/// `reject` fallback such a request gets 403 `missing_user_id` (the gateway refuses it).
#[get("/v1/gate/<_..>")]
fn gate(app: &State<EdgeApp>, caller: GateCaller, user: GateUser) -> Result<GateAnswer, ApiError> {
    gate_check(app, &caller, user)
}

// Envoy's HTTP ext_authz forwards the original method, with `path_prefix` before the path.
#[post("/v1/gate/<_..>")]
fn gate_post(
    app: &State<EdgeApp>,
    caller: GateCaller,
    user: GateUser,
) -> Result<GateAnswer, ApiError> {
    gate_check(app, &caller, user)
}

#[put("/v1/gate/<_..>")]
fn gate_put(
    app: &State<EdgeApp>,
    caller: GateCaller,
    user: GateUser,
) -> Result<GateAnswer, ApiError> {
    gate_check(app, &caller, user)
}

#[delete("/v1/gate/<_..>")]
fn gate_delete(
    app: &State<EdgeApp>,
    caller: GateCaller,
    user: GateUser,
) -> Result<GateAnswer, ApiError> {
    gate_check(app, &caller, user)
}

#[patch("/v1/gate/<_..>")]
fn gate_patch(
    app: &State<EdgeApp>,
    caller: GateCaller,
    user: GateUser,
) -> Result<GateAnswer, ApiError> {
    gate_check(app, &caller, user)
}

/// The gateway's identity on `/v1/gate`: its token in its own header, [`GATE_TOKEN_HEADER`], or an
/// `Authorization` header only when that holds a token tidegate knows. Any other `Authorization`
/// is the application's own (the gateway forwards the user's request headers to the check) and
/// is ignored: it used to be taken for a tidegate token and refused every such request with 401.
pub struct GateCaller(Caller);

/// The header a gateway sends its tidegate token in (nginx: `proxy_set_header`).
pub const GATE_TOKEN_HEADER: &str = "x-tidegate-token";

#[rocket::async_trait]
impl<'r> FromRequest<'r> for GateCaller {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let config = &request.rocket().state::<EdgeApp>().expect("EdgeApp is managed").config;
        let headers = request.headers();
        let caller = match (headers.get_one(GATE_TOKEN_HEADER), headers.get_one("Authorization")) {
            (Some(token), _) => Caller::identify(config, Some(&format!("Bearer {}", token.trim()))),
            (None, Some(authorization)) => match Caller::identify(config, Some(authorization)) {
                Caller::Rejected(_) => Caller::Anonymous,
                known => known,
            },
            (None, None) => Caller::Anonymous,
        };
        Outcome::Success(GateCaller(caller))
    }
}

fn gate_check(app: &EdgeApp, caller: &GateCaller, user: GateUser) -> Result<GateAnswer, ApiError> {
    // A gateway whose token is wrong (rotated, mistyped) must not turn every user request into
    // a refusal: `auth_request` reads 401 and 403 as "refuse this user". The gate answers 500
    // instead, which nginx treats as "the check failed" and serves through its fallback, and
    // counts it (alert TidegateGateCallerRefused) so the token gets fixed.
    if let Err(refused) = caller.0.require_reader(&app.config) {
        telemetry::count_gate_caller_refused();
        return Err(ApiError::new(
            Status::InternalServerError,
            "gate_caller_refused",
            format!(
                "the gateway's token was refused ({}); send a service token in the {GATE_TOKEN_HEADER} header",
                refused.detail
            ),
        ));
    }
    let table = app.table()?;
    let map = crate::service::tag_answer::domain_map(&table, user.1.as_deref())?;
    let write = user.2;
    let domain = user.1.clone();
    let service = user.3.clone();
    tag_answer::check_service(service.as_deref()).map_err(ApiError::from)?;
    let user = user.0.map_err(ApiError::from)?;
    let mut channel = None;
    let (color, source) = match &user {
        Some(user_id) => {
            validate_user_id(user_id)?;
            let tag = match service.as_deref() {
                None => table.tag_in(map, user_id)?,
                Some(s) => match table.tag_service(domain.as_deref(), user_id, Some(s)) {
                    Ok(found) => {
                        let (tag, rule) = found.expect("domain_map found the domain");
                        if let crate::core::Rule::Channel(name) = rule {
                            channel = Some(name.to_owned());
                        }
                        tag
                    }
                    // A suspended channel whose fallback is `reject`: the gateway refuses the
                    // user (403), as the channel's owner asked.
                    Err(e @ crate::core::TagError::ChannelUnavailable(_)) => {
                        return Err(ApiError::new(
                            Status::Forbidden,
                            "channel_unavailable",
                            e.to_string(),
                        ));
                    }
                    Err(e) => return Err(e.into()),
                },
            };
            // A write of a user whose unit a move has frozen waits: 503 with Retry-After (and
            // `x-tidegate-refusal: frozen` for gateways), while reads go on.
            if write
                && !tag.pinned
                && table.frozen_in(domain.as_deref()).is_some_and(|set| set.contains(tag.unit.0))
            {
                telemetry::count_gate(table.lane(tag.color), "frozen");
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
                ApiError::new(Status::Forbidden, "missing_user_id", detail)
            })?;
            (color, "fallback")
        }
    };
    app.tag_counters.count(color, 1);
    telemetry::count_gate(table.lane(color), source);
    let signature = match (&app.config.edge.tag_key, &user) {
        (Some(key), Some(user_id)) => Some(key.sign(table.lane(color), table.version(), user_id)),
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

/// The write check over HTTP, for services in any language that call their edge instead of
/// embedding a Router: `GET /v1/write-check?user_id=&zone=&version=` (`zone`: the service's own
/// zone, by name or lane; `version`: the propagated `x-tidegate-version`, when there is one;
/// `domain`: a named routing domain). 200 `owned`; 421 `misrouted` naming the owner zone; 503
/// `behind` or `frozen` with `Retry-After`. The same function as `Router::check_write`.
#[get("/v1/write-check?<user_id>&<zone>&<version>&<domain>")]
fn write_check(
    app: &State<EdgeApp>,
    caller: Caller,
    user_id: Option<&str>,
    zone: Option<&str>,
    version: Option<&str>,
    domain: Option<&str>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    let table = app.table()?;
    let user_id = user_id.filter(|u| !u.is_empty()).ok_or_else(|| {
        ApiError::bad_request("missing_user_id", "a write check needs `user_id`".to_owned())
    })?;
    validate_user_id(user_id)?;
    let zone = zone.ok_or_else(|| {
        ApiError::bad_request(
            "invalid_zone",
            "a write check needs `zone`: the service's own zone".to_owned(),
        )
    })?;
    let local = table
        .zones()
        .resolve(zone)
        .map_err(|e| ApiError::bad_request("unknown_zone", e.to_string()))?;
    let incoming = match version {
        None | Some("") => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::bad_request(
                "invalid_version",
                format!("`version` must be a routing version, got `{text}`"),
            )
        })?),
    };
    let domain = domain.filter(|d| !d.is_empty() && *d != crate::core::DEFAULT_DOMAIN);
    let check = table.check_write(domain, user_id, local, incoming)?.ok_or_else(|| {
        ApiError::bad_request(
            "unknown_domain",
            format!("`domain`: the table has no domain `{}`", domain.unwrap_or_default()),
        )
    })?;
    telemetry::count_write_check(check.as_str());
    let version = table.version();
    let retry_ms = crate::core::WRITE_RETRY_AFTER_MS;
    match check {
        crate::core::WriteCheck::Owned => Ok(Json(json!({
            "answer": "owned",
            "version": version,
            "zone": table.zone_of(local),
            "lane": table.lane(local),
        }))),
        crate::core::WriteCheck::Misrouted { owner } => Err(ApiError::new(
            Status::MisdirectedRequest,
            "misrouted",
            format!(
                "user {user_id} belongs to {} ({}) at routing version {version}, not to {}; forward the write there once, or refuse it",
                table.zone_of(owner),
                table.lane(owner),
                table.zone_of(local)
            ),
        )
        .with("owner_zone", table.zone_of(owner).into())
        .with("owner_lane", table.lane(owner).into())
        .with("version", version.into())),
        crate::core::WriteCheck::Behind { incoming, local } => Err(ApiError::new(
            Status::ServiceUnavailable,
            "behind",
            format!(
                "the caller routed at version {incoming}, this edge's table is at {local}; retry after {retry_ms} ms, once it catches up"
            ),
        )
        .with("retry_after_seconds", retry_ms.div_ceil(1000).into())
        .with("retry_after_ms", retry_ms.into())
        .with("version", local.into())),
        crate::core::WriteCheck::Frozen { unit, .. } => Err(frozen_write(unit, version)),
    }
}

/// The refusal of a write whose unit is frozen by a move in progress.
pub fn frozen_write(unit: u32, version: u64) -> ApiError {
    let retry_ms = crate::core::WRITE_RETRY_AFTER_MS;
    ApiError::new(
        Status::ServiceUnavailable,
        "frozen",
        format!(
            "the user's unit {unit} is frozen by a move in progress at routing version {version}; writes resume once every subscriber applied the switch, retry after {retry_ms} ms (reads go on)"
        ),
    )
    .with("retry_after_seconds", retry_ms.div_ceil(1000).into())
    .with("retry_after_ms", retry_ms.into())
    .with("unit", unit.into())
}

#[post("/ofrep/v1/evaluate/flags/<key>", data = "<body>")]
fn evaluate_flag(app: &State<EdgeApp>, caller: Caller, key: &str, body: String) -> Ofrep {
    if let Err(e) = caller.require_reader(&app.config) {
        return Ofrep::Refused(e);
    }
    let table = app.router.table();
    ofrep::one(table.as_deref(), &app.config.flag_key, app.config.fallback, key, &body)
}

#[post("/ofrep/v1/evaluate/flags", data = "<body>")]
fn evaluate_flags(
    app: &State<EdgeApp>,
    caller: Caller,
    if_none_match: IfNoneMatch,
    body: String,
) -> Ofrep {
    if let Err(e) = caller.require_reader(&app.config) {
        return Ofrep::Refused(e);
    }
    let table = app.router.table();
    let flag_key = &app.config.flag_key;
    ofrep::bulk(table.as_deref(), flag_key, app.config.fallback, &body, if_none_match.0.as_deref())
}

#[get("/healthz")]
fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// A sentence for operators: what is served, from where, and whether the coordinator is reachable.
fn describe(status: &RouterStatus, age: Option<f64>) -> String {
    let mut text = status.to_string();
    if let Some(age) = age {
        text.push_str(&format!("; table received {age:.1}s ago"));
    }
    text
}

fn age_seconds(status: &RouterStatus) -> Option<f64> {
    let at = status.updated_at?;
    Some(SystemTime::now().duration_since(at).map(|d| d.as_secs_f64()).unwrap_or(0.0))
}

/// Ready once a table is served; says whether it came from a coordinator or the disk cache, how
/// old it is, and whether a coordinator is reachable right now: `coordinator_state` is
/// `connected`, `stalled` (the last one sent neither an event nor a heartbeat within
/// `edge.coordinator_timeout`: the table may be stale while the edge moves on) or
/// `unreachable`. `refused` names a table from another command log, refused.
#[get("/readyz")]
fn readyz(app: &State<EdgeApp>) -> Result<Json<Value>, ApiError> {
    let status = app.router.status();
    let age = age_seconds(&status);
    let table = app.table()?;
    let source = match status.origin {
        Origin::Coordinator => "coordinator",
        Origin::DiskCache => "cache",
        Origin::Fixed => "fixed",
        Origin::Nothing => "nothing",
    };
    let state = match (status.connected, status.stalled) {
        (true, _) => "connected",
        (false, true) => "stalled",
        (false, false) => "unreachable",
    };
    let silent = status
        .last_heard
        .map(|at| SystemTime::now().duration_since(at).map(|d| d.as_secs_f64()).unwrap_or(0.0));
    Ok(Json(json!({
        "status": "ready",
        "version": table.version(),
        "log_id": app.router.log_id(),
        "source": source,
        "table_age_seconds": age,
        "coordinator_connected": status.connected,
        "coordinator_state": state,
        "coordinator": status.coordinator,
        "coordinator_silent_seconds": silent,
        "coordinator_timeout_seconds": app.config.edge.coordinator_timeout.as_secs_f64(),
        // What the coordinator announced, and the bound in force for it: the configured
        // timeout, or the coordinator's heartbeat plus a second when that is longer.
        "coordinator_heartbeat_seconds": status.coordinator_heartbeat.map(|d| d.as_secs_f64()),
        "stall_bound_seconds": status.stall_bound.map(|d| d.as_secs_f64()),
        "refused": status.refused,
        "last_error": status.last_error,
        "detail": describe(&status, age),
    })))
}

#[get("/metrics")]
fn metrics(app: &State<EdgeApp>) -> (ContentType, String) {
    let status = app.router.status();
    telemetry::publish_edge(status.connected, age_seconds(&status));
    if let Some(table) = app.router.table() {
        telemetry::publish_table(&table);
    }
    let text = ContentType::new("text", "plain").with_params([("version", "0.0.4")]);
    (text, app.metrics.render())
}
