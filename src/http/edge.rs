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
use crate::client::Origin;
use crate::core::{RoutingTable, validate_user_id};
pub use crate::service::edge::EdgeApp;
use crate::service::edge::{GATE_TOKEN_HEADER, GateAnswer, GateRequest, age_seconds, describe};
use crate::telemetry;

/// The table being served, or 503 `no_table` saying why there is none.
fn table(app: &EdgeApp) -> Result<Arc<RoutingTable>, ApiError> {
    app.table().map_err(ApiError::from)
}

/// The Rocket instance of the edge, listening on `[edge] address` and `port`.
pub fn build(app: Arc<EdgeApp>) -> Rocket<Build> {
    let config = Arc::clone(&app.config);
    let body_limit = ByteUnit::from(config.max_body_bytes);
    let mut figment = rocket::Config::figment()
        .merge(("address", config.edge.address))
        .merge(("port", config.edge.port))
        .merge(("limits", Limits::default().limit("json", body_limit).limit("string", body_limit)))
        .merge(("log_level", rocket::config::LogLevel::Critical))
        .merge(("cli_colors", false))
        .merge(("ident", "tidegate-edge"))
        .merge(("secret_key", super::ui::secret_key(&config.ui).to_vec()));
    // `[edge] workers`: the runtime Rocket builds (and the dispatcher runs on).
    if let Some(workers) = config.edge.workers {
        figment = figment.merge(("workers", workers));
    }
    // HTTPS (`[edge.tls]`): Rocket's own TLS on Rocket alone; behind the dispatcher, which
    // terminates TLS itself, the table only makes Rocket announce `https`.
    if let Some(tls) = &config.edge.tls {
        figment =
            figment.merge(("tls", rocket::config::TlsConfig::from_paths(&tls.certs, &tls.key)));
    }
    // The patched Rocket's serve() admits every connection through this guard. Behind the
    // dispatcher, whose guard admitted the connection already, Rocket has a guard of its own
    // with the same limits (as the coordinator's main port does).
    let guard: Arc<rocket::conn_guard::Guard> = if config.edge.fast_path {
        crate::service::connections::guard(&config.edge.connections, "edge")
    } else {
        Arc::clone(&app.connections)
    };
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
                let scheme = if config.tls_enabled() { "https" } else { "http" };
                let at = SocketAddr::new(config.address, config.port);
                println!("tidegate edge listening on {scheme}://{at}");
                let workers = rocket::tokio::runtime::Handle::current().metrics().num_workers();
                tracing::info!(workers, "edge serving on {at}; runtime worker threads: {workers}");
            })
        }))
}

/// Serves `app` until Ctrl-C or SIGTERM: behind the dispatcher (`[edge] fast_path`, the
/// default), which serves tags and the gateway check on hyper and hands the rest to Rocket, or
/// on Rocket alone.
pub fn run(app: EdgeApp) -> Result<(), String> {
    let app = Arc::new(app);
    let rocket = build(Arc::clone(&app));
    if !app.config.edge.fast_path {
        let at = super::listen_address(&rocket);
        return super::Runtime::of(&rocket)
            .run(rocket.launch())
            .map(|_| ())
            .map_err(|e| super::launch_error(e, "edge", &at));
    }
    let at = SocketAddr::new(app.config.edge.address, app.config.edge.port);
    let (handoff, unbound) = super::dispatch::handoff();
    let app_tls = app.config.edge.tls.clone();
    let fast = crate::http_fast::edge::EdgeFast::new(app, Some(handoff));
    let tls = match &app_tls {
        Some(tls) => Some(crate::http_fast::tls::acceptor(&tls.certs, &tls.key, "edge.tls")?),
        None => None,
    };
    let dispatcher = crate::http_fast::dispatch::Dispatcher::bind(fast, at, "edge.port", tls)?;
    let local = dispatcher.local_addr().map_err(|e| format!("edge.port: {e}"))?;
    super::dispatch::launch(rocket, unbound.at(local), vec![Box::pin(dispatcher.serve())], "edge")
}

#[get("/v1/tag")]
fn tag_one(
    app: &State<Arc<EdgeApp>>,
    caller: Caller,
    origin: &rocket::http::uri::Origin<'_>,
) -> Result<Tagged, ApiError> {
    caller.require_reader(&app.config)?;
    let user_id = tag::user_id_param(origin)?;
    let query = origin.query().map(|q| q.as_str());
    let domain = crate::service::tag_answer::domain_param(query)?;
    let service = crate::service::tag_answer::service_param(query)?;
    let table = table(app)?;
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
    app: &State<Arc<EdgeApp>>,
    caller: Caller,
    request: Result<Json<BatchRequest<'_>>, rocket::serde::json::Error<'_>>,
) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let request = request.map_err(json_error)?.into_inner();
    let table = table(app)?;
    tag::tag_batch_with(&table, app.config.max_batch, &app.tag_counters, &request)
}

#[get("/v1/routing")]
fn get_routing(app: &State<Arc<EdgeApp>>, caller: Caller) -> Result<Versioned, ApiError> {
    caller.require_reader(&app.config)?;
    let table = table(app)?;
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

/// What a gateway check reads from its request (`service::edge::GateRequest`).
pub struct Gate<'r>(GateRequest<'r>);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for Gate<'r> {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let edge =
            &request.rocket().state::<Arc<EdgeApp>>().expect("EdgeApp is managed").config.edge;
        let headers = request.headers();
        Outcome::Success(Gate(GateRequest {
            gate_token: headers.get_one(GATE_TOKEN_HEADER),
            authorization: headers.get_one("Authorization"),
            user_header: headers.get_one(&edge.user_header),
            cookies: headers.get("Cookie").collect(),
            query: request.uri().query().map(|q| q.as_str()),
            original_uri: headers.get_one("x-original-uri"),
            domain: headers.get_one("x-tidegate-domain"),
            service: headers.get_one("x-tidegate-service"),
            method: request.method().as_str(),
            original_method: headers.get_one("x-original-method"),
        }))
    }
}

/// The gateway check's answer: 200, no body, the routing headers.
pub struct Gated(GateAnswer);

impl<'r> Responder<'r, 'static> for Gated {
    fn respond_to(self, _: &'r Request<'_>) -> response::Result<'static> {
        let mut response = Response::build();
        response.status(Status::Ok);
        for (name, value) in self.0.headers() {
            response.header(Header::new(name, value));
        }
        response.sized_body(0, Cursor::new(Vec::new())).ok()
    }
}

/// The gateway check (nginx `auth_request`, Envoy HTTP `ext_authz`): `service::edge::gate`.
#[get("/v1/gate/<_..>")]
fn gate(app: &State<Arc<EdgeApp>>, request: Gate<'_>) -> Result<Gated, ApiError> {
    gate_check(app, &request)
}

// Envoy's HTTP ext_authz forwards the original method, with `path_prefix` before the path.
#[post("/v1/gate/<_..>")]
fn gate_post(app: &State<Arc<EdgeApp>>, request: Gate<'_>) -> Result<Gated, ApiError> {
    gate_check(app, &request)
}

#[put("/v1/gate/<_..>")]
fn gate_put(app: &State<Arc<EdgeApp>>, request: Gate<'_>) -> Result<Gated, ApiError> {
    gate_check(app, &request)
}

#[delete("/v1/gate/<_..>")]
fn gate_delete(app: &State<Arc<EdgeApp>>, request: Gate<'_>) -> Result<Gated, ApiError> {
    gate_check(app, &request)
}

#[patch("/v1/gate/<_..>")]
fn gate_patch(app: &State<Arc<EdgeApp>>, request: Gate<'_>) -> Result<Gated, ApiError> {
    gate_check(app, &request)
}

fn gate_check(app: &EdgeApp, request: &Gate<'_>) -> Result<Gated, ApiError> {
    crate::service::edge::gate(app, &request.0).map(Gated).map_err(ApiError::from)
}

/// The write check over HTTP, for services in any language that call their edge instead of
/// embedding a Router: `GET /v1/write-check?user_id=&zone=&version=` (`zone`: the service's own
/// zone, by name or lane; `version`: the propagated `x-tidegate-version`, when there is one;
/// `domain`: a named routing domain; `service`: the service writing, whose release channel owns
/// its users' writes of it). 200 `owned`; 421 `misrouted` naming the owner zone; 503 `behind`
/// or `frozen` with `Retry-After`, or `channel_unavailable`. The same function as
/// `Router::check_write` (`Router::check_write_for` with a service). An `owned` answer holds
/// for `commit_within_ms` (`[subscribers] max_write`): the caller commits within it or checks
/// again, and this edge acknowledges no freeze until it has passed (the HTTP write scope).
///
/// `global=true` (no `user_id`) checks a write of global data instead: 200 `owned` in the global
/// writer's zone; 421 `misrouted` elsewhere (or when no zone is the global writer); 503 `frozen`
/// with `Retry-After` while the global writer moves; 503 `read_only` while an operator stopped
/// global writes (`RoutingTable::check_global_write`, `Router::check_global_write`).
#[allow(clippy::too_many_arguments)]
#[get("/v1/write-check?<user_id>&<zone>&<version>&<domain>&<service>&<global>")]
fn write_check(
    app: &State<Arc<EdgeApp>>,
    caller: Caller,
    user_id: Option<&str>,
    zone: Option<&str>,
    version: Option<&str>,
    domain: Option<&str>,
    service: Option<&str>,
    global: Option<bool>,
) -> Result<Json<Value>, ApiError> {
    caller.require_reader(&app.config)?;
    // The write's scope, as `Router::write_scope` gives a Rust service: taken before the table
    // is read, and held past this answer for the longest commit if the answer is `owned`, so
    // this edge acknowledges no freeze before a write it let through could have committed.
    let scope = app.router.write_scope();
    let table = table(app)?;
    if global == Some(true) {
        return global_write_check(app, scope, &table, zone, version);
    }
    let user_id = user_id.filter(|u| !u.is_empty()).ok_or_else(|| {
        ApiError::bad_request("missing_user_id", "a write check needs `user_id`".to_owned())
    })?;
    validate_user_id(user_id)?;
    let (local, incoming) = local_and_incoming(&table, zone, version)?;
    let domain = domain.filter(|d| !d.is_empty() && *d != crate::core::DEFAULT_DOMAIN);
    let service = service.filter(|s| !s.is_empty());
    crate::service::tag_answer::check_service(service).map_err(ApiError::from)?;
    let check =
        table.check_write_for(domain, service, user_id, local, incoming)?.ok_or_else(|| {
            ApiError::bad_request(
                "unknown_domain",
                format!("`domain`: the table has no domain `{}`", domain.unwrap_or_default()),
            )
        })?;
    // A table the coordinator has not confirmed within its lease never answers `owned`.
    let check = check.leased(app.router.lease_confirmed());
    telemetry::count_write_check(check.as_str());
    let version = table.version();
    let retry_ms = crate::core::WRITE_RETRY_AFTER_MS;
    match check {
        crate::core::WriteCheck::Owned => {
            let commit_within_ms = app.hold_write(scope, version);
            Ok(Json(json!({
                "answer": "owned",
                "version": version,
                "zone": table.zone_of(local),
                "lane": table.lane(local),
                "commit_within_ms": commit_within_ms,
            })))
        }
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
        crate::core::WriteCheck::Unconfirmed => {
            let lease = app.router.lease().unwrap_or_default();
            Err(ApiError::new(
                Status::ServiceUnavailable,
                "unconfirmed",
                format!(
                    "this edge's table (version {version}) has not been confirmed current within its lease ({} ms): it cannot tell whether another zone took the user over; retry after {retry_ms} ms (reads and tags go on)",
                    lease.as_millis()
                ),
            )
            .with("retry_after_seconds", retry_ms.div_ceil(1000).into())
            .with("retry_after_ms", retry_ms.into())
            .with("version", version.into()))
        }
    }
}

/// The zone a write check names (`zone`, by name or lane) and the caller's version.
fn local_and_incoming(
    table: &crate::core::RoutingTable,
    zone: Option<&str>,
    version: Option<&str>,
) -> Result<(crate::core::ZoneId, Option<u64>), ApiError> {
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
    Ok((local, incoming))
}

/// `GET /v1/write-check?global=true&zone=`: the global write check, with the same write scope
/// (an `owned` answer holds for `commit_within_ms`).
fn global_write_check(
    app: &EdgeApp,
    scope: crate::client::WriteScope<'_>,
    table: &crate::core::RoutingTable,
    zone: Option<&str>,
    version: Option<&str>,
) -> Result<Json<Value>, ApiError> {
    use crate::core::GlobalWriteCheck as G;
    let (local, incoming) = local_and_incoming(table, zone, version)?;
    let check = table.check_global_write(local, incoming).leased(app.router.lease_confirmed());
    telemetry::count_write_check(check.as_str());
    let version = table.version();
    let owner = check.owner();
    let owner_zone = owner.map(|z| table.zone_of(z).to_owned());
    let writer = owner_zone.clone().unwrap_or_else(|| "no zone".to_owned());
    let refusal = |status: Status, code: &'static str, detail: String| {
        let mut e = ApiError::new(status, code, detail)
            .with("global", true.into())
            .with("owner_zone", owner_zone.clone().into())
            .with("owner_lane", owner.map(|z| table.lane(z).to_owned()).into())
            .with("version", version.into());
        if let Some(ms) = check.retry_after_ms() {
            e = e
                .with("retry_after_seconds", ms.div_ceil(1000).into())
                .with("retry_after_ms", ms.into());
        }
        e
    };
    match check {
        G::Owned => {
            let commit_within_ms = app.hold_write(scope, version);
            Ok(Json(json!({
                "answer": "owned",
                "global": true,
                "version": version,
                "zone": table.zone_of(local),
                "lane": table.lane(local),
                "commit_within_ms": commit_within_ms,
            })))
        }
        G::Misrouted { .. } => Err(refusal(
            Status::MisdirectedRequest,
            "misrouted",
            format!(
                "global writes belong to {writer} at routing version {version}, not to {}; forward the write there once, or refuse it",
                table.zone_of(local)
            ),
        )),
        G::Behind { incoming, local } => Err(refusal(
            Status::ServiceUnavailable,
            "behind",
            format!(
                "the caller routed at version {incoming}, this edge's table is at {local}; retry once it catches up"
            ),
        )),
        G::Frozen { .. } => Err(refusal(
            Status::ServiceUnavailable,
            "frozen",
            format!(
                "global writes are frozen while the global writer moves (version {version}); retry shortly"
            ),
        )),
        G::ReadOnly { .. } => Err(refusal(
            Status::ServiceUnavailable,
            "read_only",
            format!(
                "global data is read-only (routing version {version}): an operator stopped global writes"
            ),
        )),
        G::Unconfirmed => Err(refusal(
            Status::ServiceUnavailable,
            "unconfirmed",
            format!(
                "this edge's table (version {version}) has not been confirmed current within its lease; retry shortly"
            ),
        )),
    }
}

/// The refusal of a write whose unit is frozen by a move in progress.
fn frozen_write(unit: u32, version: u64) -> ApiError {
    crate::service::edge::frozen_write(unit, version).into()
}

#[post("/ofrep/v1/evaluate/flags/<key>", data = "<body>")]
fn evaluate_flag(app: &State<Arc<EdgeApp>>, caller: Caller, key: &str, body: String) -> Ofrep {
    if let Err(e) = caller.require_reader(&app.config) {
        return Ofrep::Refused(e);
    }
    let table = app.router.table();
    ofrep::one(table.as_deref(), &app.config.flag_key, app.config.fallback, key, &body)
}

#[post("/ofrep/v1/evaluate/flags", data = "<body>")]
fn evaluate_flags(
    app: &State<Arc<EdgeApp>>,
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

/// Ready once a table is served; says whether it came from a coordinator or the disk cache, how
/// old it is, and whether a coordinator is reachable right now: `coordinator_state` is
/// `connected`, `stalled` (the last one sent neither an event nor a heartbeat within
/// `edge.coordinator_timeout`: the table may be stale while the edge moves on) or
/// `unreachable`. `refused` names a table from another command log, refused.
#[get("/readyz")]
fn readyz(app: &State<Arc<EdgeApp>>) -> Result<Json<Value>, ApiError> {
    let status = app.router.status();
    let age = age_seconds(&status);
    let table = table(app)?;
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
        // The table lease: while it has run out, write checks answer `unconfirmed` (reads and
        // tags go on, so the edge stays ready).
        "lease_seconds": status.lease.map(|d| d.as_secs_f64()),
        "lease_left_seconds": status.lease_left.map(|d| d.as_secs_f64()),
        "writes_confirmed": app.router.lease_confirmed(),
        "detail": describe(&status, age),
    })))
}

#[get("/metrics")]
fn metrics(app: &State<Arc<EdgeApp>>) -> (ContentType, String) {
    let status = app.router.status();
    telemetry::publish_edge(status.connected, age_seconds(&status));
    let confirmed_age = status
        .confirmed_at
        .map(|at| SystemTime::now().duration_since(at).map_or(0.0, |d| d.as_secs_f64()));
    telemetry::publish_lease(confirmed_age, status.lease.map_or(0.0, |d| d.as_secs_f64()));
    if let Some(table) = app.router.table() {
        telemetry::publish_table(&table);
    }
    let text = ContentType::new("text", "plain").with_params([("version", "0.0.4")]);
    (text, app.metrics.render())
}
