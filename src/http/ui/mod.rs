//! The operator web UI: login and logout, the overview (one card per zone of the table, the
//! dial while blue and green are the only live zones, unit-set moves, the global writer, the
//! drain), the MQ lanes page, the plans page (preview, typed confirmation, live run timeline,
//! reports), the drain form and the audit log.
//!
//! Pages are plain HTML, CSS and JS embedded in the binary, so there is no build step and nothing
//! to deploy beside tidegate. The server renders each page's shell with what only it knows (the
//! operator, the role, the CSRF token, configured defaults). The page's script then reads and
//! changes state only through the `/v1` JSON API, so a change from the browser passes the same
//! checks, coordinator and audit log as one from the CLI, signed with the operator's name.
//!
//! Controls that change state are cut from the HTML for viewers (`<!--operator-->` sections),
//! and the API refuses viewers anyway: hiding is for calm, refusing is for safety.

pub mod session;

use std::net::SocketAddr;

use rocket::fairing::AdHoc;
use rocket::form::{Errors, Form};
use rocket::http::{ContentType, CookieJar, Header, Status};
use rocket::request::{FromRequest, Outcome, Request};
use rocket::response::Redirect;
use rocket::{FromForm, Responder, State, get, post, routes};

use super::auth::check_login;
use super::error::ApiError;
use super::{App, iso8601, now_ms};
use crate::config::{Role, UiConfig};
use crate::core::ZoneId;
use crate::core::{DEFAULT_DOMAIN, OnBreach, RoutingTable};
use crate::duration::format_duration_ms;
use crate::service::login_limit;
use crate::telemetry;
use session::{Csrf, Session};

const LAYOUT: &str = include_str!("assets/layout.html");
const LOGIN: &str = include_str!("assets/login.html");
const OVERVIEW: &str = include_str!("assets/overview.html");
const DRAIN: &str = include_str!("assets/drain.html");
const AUDIT: &str = include_str!("assets/audit.html");
const LANES: &str = include_str!("assets/lanes.html");
const PLANS: &str = include_str!("assets/plans.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// Audit rows shown by default on the audit page.
const AUDIT_PAGE_ROWS: usize = 200;

pub fn stage() -> AdHoc {
    AdHoc::on_ignite("operator ui", |rocket| async {
        rocket.mount(
            "/",
            routes![
                root, overview, lanes_page, plans_page, drain_page, audit_page, login_page, login,
                logout, asset
            ],
        )
    })
}

/// The key Rocket encrypts private cookies with: the configured one, or 256 fresh random bits.
/// With a random key every session ends when tidegate restarts (config/tidegate.toml says so).
pub fn secret_key(ui: &UiConfig) -> [u8; 32] {
    match ui.secret_key {
        Some(key) => key.0,
        None => rand::random(),
    }
}

/// An operator signed in to the UI, as the pages need them.
struct SignedIn {
    name: String,
    role: Role,
    csrf: String,
}

#[rocket::async_trait]
impl<'r> FromRequest<'r> for SignedIn {
    type Error = ();

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, ()> {
        let app = request.rocket().state::<App>().expect("App state is managed by http::build");
        let Some(session) = Session::read(request.cookies(), &app.revocations, now_ms()) else {
            return Outcome::Forward(Status::Unauthorized);
        };
        match app.config.operators.iter().find(|op| op.name == session.name) {
            Some(op) => Outcome::Success(SignedIn {
                name: op.name.clone(),
                role: op.role,
                csrf: session.csrf,
            }),
            None => Outcome::Forward(Status::Unauthorized),
        }
    }
}

/// An HTML page with the headers every UI page carries.
#[derive(Responder)]
#[response(content_type = "html")]
struct Page {
    body: String,
    // Scripts and styles only from tidegate itself, no framing: an injected string can neither
    // run script nor make the console clickjackable.
    csp: Header<'static>,
    frame: Header<'static>,
    nosniff: Header<'static>,
    referrer: Header<'static>,
    // Pages carry the CSRF token; they must not sit in shared caches or the back-button cache.
    cache: Header<'static>,
}

impl Page {
    fn new(body: String) -> Page {
        Page {
            body,
            csp: Header::new(
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                 connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            ),
            frame: Header::new("X-Frame-Options", "DENY"),
            nosniff: Header::new("X-Content-Type-Options", "nosniff"),
            referrer: Header::new("Referrer-Policy", "same-origin"),
            cache: Header::new("Cache-Control", "no-store"),
        }
    }
}

/// What a UI route answers: a page, a redirect, or a page with an error status.
#[derive(Responder)]
#[allow(clippy::large_enum_variant)] // one per request; boxing would only add noise
enum Reply {
    Page(Page),
    Redirect(Redirect),
    Refused((Status, Page)),
    /// A refusal for a client that did not ask for HTML, in the API's error shape.
    Api(ApiError),
}

/// Whether the client asked for HTML (a browser's form post) rather than JSON (a script).
struct WantsHtml(bool);

#[rocket::async_trait]
impl<'r> FromRequest<'r> for WantsHtml {
    type Error = std::convert::Infallible;

    async fn from_request(request: &'r Request<'_>) -> Outcome<Self, Self::Error> {
        let accept = request.headers().get_one("Accept").unwrap_or("");
        Outcome::Success(WantsHtml(accept.contains("text/html")))
    }
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Fills `{{key}}` placeholders. Values must already be escaped (or be our own markup).
fn fill(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = template.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// Keeps the `<!--operator-->` sections for operators and the `<!--viewer-->` ones for viewers,
/// and drops the others entirely, so a viewer's page holds no mutating control at all.
fn for_role(template: &str, role: Role) -> String {
    let (keep, drop) = match role {
        Role::Operator => ("operator", "viewer"),
        Role::Viewer => ("viewer", "operator"),
    };
    let mut out =
        template.replace(&format!("<!--{keep}-->"), "").replace(&format!("<!--/{keep}-->"), "");
    let (open, close) = (format!("<!--{drop}-->"), format!("<!--/{drop}-->"));
    while let Some(start) = out.find(&open) {
        let Some(end) = out[start..].find(&close) else { break };
        out.replace_range(start..start + end + close.len(), "");
    }
    out
}

/// Renders `main` inside the layout for `user`.
fn layout(app: &App, user: &SignedIn, page: &str, title: &str, main: &str) -> Page {
    let config = &app.config;
    let table = app.coordinator.table();
    let current =
        |p: &str| if p == page { " aria-current=\"page\"".to_owned() } else { String::new() };
    let html = fill(
        LAYOUT,
        &[
            ("title", esc(title)),
            ("page", page.to_owned()),
            ("role", user.role.as_str().to_owned()),
            ("csrf", esc(&user.csrf)),
            ("name", esc(&user.name)),
            ("units", table.units().to_string()),
            ("window", format_duration_ms(config.health.window_ms)),
            ("guard_max", config.drain.guard.max_error_rate.to_string()),
            ("blue_zone", esc(config.zones.zone_of(ZoneId::BLUE))),
            ("green_zone", esc(config.zones.zone_of(ZoneId::GREEN))),
            ("freeze_default", config.freeze_by_default.to_string()),
            ("nav_overview", current("overview")),
            ("nav_lanes", current("lanes")),
            ("nav_plans", current("plans")),
            ("nav_drain", current("drain")),
            ("nav_audit", current("audit")),
            ("main", main.to_owned()),
        ],
    );
    Page::new(for_role(&html, user.role))
}

/// Whether `name` is a routing domain of `table` (`default` always is).
fn is_domain(table: &RoutingTable, name: &str) -> bool {
    name == DEFAULT_DOMAIN || table.domains().contains_key(name)
}

/// The table's routing domains as `<option>`s, the default domain first, `chosen` selected; with
/// no domain chosen a first, empty option "choose a domain" is selected instead.
fn domain_options(table: &RoutingTable, chosen: Option<&str>) -> String {
    let mut out = String::new();
    if chosen.is_none() {
        out.push_str("<option value=\"\" selected>choose a domain…</option>");
    }
    for name in std::iter::once(DEFAULT_DOMAIN).chain(table.domains().keys().map(String::as_str)) {
        let selected = if Some(name) == chosen { " selected" } else { "" };
        out.push_str(&format!("<option value=\"{0}\"{selected}>{0}</option>", esc(name)));
    }
    out
}

/// The dial's granularity in percent: one unit.
fn unit_step(units: u32) -> String {
    trim_number(100.0 / f64::from(units))
}

fn trim_number(value: f64) -> String {
    let text = format!("{value:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[get("/")]
fn root() -> Redirect {
    Redirect::to("/ui")
}

/// The overview. The zone cards, the split and the global writer are drawn by the page's script
/// from `GET /v1/routing`, for any number of zones; the shell renders what the first paint needs
/// without waiting for it: whether the dial applies (only while blue and green are the only live
/// zones, the rule of `PUT /v1/dial`) and the live zones the "Move units" form can give units to,
/// and the routing domains with `?domain=NAME` selected (the script says so when the table has
/// no such domain, and keeps the selection in the URL).
#[get("/ui?<domain>")]
fn overview(app: &State<App>, user: Option<SignedIn>, domain: Option<&str>) -> Reply {
    let Some(user) = user else { return to_login() };
    let table = app.coordinator.table();
    let chosen = domain.filter(|d| is_domain(&table, d)).unwrap_or(DEFAULT_DOMAIN);
    let zones = table.zones();
    let live: Vec<_> = zones.live().collect();
    let hidden = |on: bool| if on { " hidden".to_owned() } else { String::new() };
    let names: Vec<&str> = live.iter().map(|z| zones.zone_of(*z)).collect();
    let options: String = live
        .iter()
        .map(|z| {
            let (name, lane) = (zones.zone_of(*z), zones.lane(*z));
            format!("<option value=\"{}\">{} ({})</option>", esc(name), esc(name), esc(lane))
        })
        .collect();
    let main = fill(
        OVERVIEW,
        &[
            ("blue_zone", esc(app.config.zones.zone_of(ZoneId::BLUE))),
            ("green_zone", esc(app.config.zones.zone_of(ZoneId::GREEN))),
            ("step", unit_step(table.units())),
            ("units", table.units().to_string()),
            ("units_last", table.units().saturating_sub(1).to_string()),
            ("blue_percent", trim_number(table.blue_percent())),
            ("dial_hidden", hidden(!zones.is_two())),
            ("dial_notice_hidden", hidden(zones.is_two())),
            ("live_count", live.len().to_string()),
            ("live_names", esc(&names.join(", "))),
            ("zone_options", options),
            ("domain_options", domain_options(&table, Some(chosen))),
            ("domain_bar_class", if chosen == DEFAULT_DOMAIN { "" } else { " named" }.to_owned()),
            ("domain_hint", String::new()),
        ],
    );
    Reply::Page(layout(app, &user, "overview", "Overview", &main))
}

/// The MQ lanes page. Read-only for everyone: the page's script renders the groups from
/// `GET /v1/lanes`; the shell only says what the configuration decides (timeouts, whether lag is
/// read at all), which the API does not repeat.
#[get("/ui/lanes")]
fn lanes_page(app: &State<App>, user: Option<SignedIn>) -> Reply {
    let Some(user) = user else { return to_login() };
    let lanes = &app.config.lanes;
    let lag_source = if app.lanes.reads_lag() {
        format!("Lag is read from Kafka every {}.", format_duration_ms(lanes.lag_interval_ms))
    } else {
        "Lag is not read, because <code>lanes.kafka_bootstrap</code> is not set: it shows as \
         unknown, and a drained zone keeps its half."
            .to_owned()
    };
    let main = fill(
        LANES,
        &[
            ("blue_zone", esc(app.config.zones.zone_of(ZoneId::BLUE))),
            ("green_zone", esc(app.config.zones.zone_of(ZoneId::GREEN))),
            ("heartbeat_interval", format_duration_ms(lanes.heartbeat_interval_ms)),
            ("session_timeout", format_duration_ms(lanes.session_timeout_ms)),
            ("heartbeat_ms", lanes.heartbeat_interval_ms.to_string()),
            ("lag_source", lag_source),
        ],
    );
    Reply::Page(layout(app, &user, "lanes", "MQ lanes", &main))
}

/// The plans page: the list, the dry-run preview, the typed confirmation of a run or drill, the
/// live timeline and past reports, all rendered by the page's script from `/v1/plans`. Viewers
/// get the list, previews and reports; the confirmation and run controls are cut for them.
/// `?plan=NAME&confirm=run` (the overview's "Evacuate <zone>") opens that plan's preview and
/// confirmation at once.
#[get("/ui/plans")]
fn plans_page(app: &State<App>, user: Option<SignedIn>) -> Reply {
    let Some(user) = user else { return to_login() };
    Reply::Page(layout(app, &user, "plans", "Plans", PLANS))
}

/// The drain form; `?mode=evacuate&zone=az-b` (the overview's "Evacuate" action) fills in the
/// `[drain.evacuate]` defaults and the zone, `?domain=NAME` (the overview's selected domain) the
/// routing domain. The domain field shows when the table has named domains or one was asked
/// for; a domain the table does not have is never replaced by another: nothing is selected and
/// the field says why.
#[get("/ui/drain?<mode>&<zone>&<domain>")]
fn drain_page(
    app: &State<App>,
    user: Option<SignedIn>,
    mode: Option<&str>,
    zone: Option<&str>,
    domain: Option<&str>,
) -> Reply {
    let Some(user) = user else { return to_login() };
    let table = app.coordinator.table();
    let unknown = domain.filter(|d| !is_domain(&table, d));
    let chosen = match (domain, unknown) {
        (_, Some(_)) => None,
        (Some(d), None) => Some(d),
        (None, None) => Some(DEFAULT_DOMAIN),
    };
    let show_domain = !table.domains().is_empty() || domain.is_some();
    let domain_error = unknown.map_or(String::new(), |d| {
        format!(
            "There is no routing domain “{}” in this table (domains: {}): choose one.",
            esc(d),
            esc(&table.domain_names())
        )
    });
    let evacuate = mode == Some("evacuate");
    let d = &app.config.drain;
    let (step, interval_ms, guard) = if evacuate {
        (d.evacuate.step_percent, d.evacuate.interval_ms, d.evacuate.guard)
    } else {
        (d.step_percent, d.interval_ms, d.guard)
    };
    let selected = |on: bool| if on { " selected".to_owned() } else { String::new() };
    let (title, intro, submit) = if evacuate {
        (
            "Evacuate a zone",
            "An evacuation moves users out of a failing zone step by step. Only the zone receiving them is judged: its error rate and its capacity. The failing zone's errors are logged, never a reason to hold. Defaults come from the <code>[drain.evacuate]</code> configuration.",
            "Start the evacuation",
        )
    } else {
        (
            "Start a drain",
            "A drain moves users out of a zone step by step. Before each step the guard checks the error rate of the zone being drained and of the zone receiving its users. Defaults come from the <code>[drain]</code> configuration.",
            "Start the drain",
        )
    };
    let main = fill(
        DRAIN,
        &[
            ("title", title.to_owned()),
            ("intro", intro.to_owned()),
            ("submit", submit.to_owned()),
            (
                "submit_label",
                match chosen {
                    Some(d) if show_domain => format!("{submit} in domain {}", esc(d)),
                    _ => submit.to_owned(),
                },
            ),
            ("domain_options", domain_options(&table, chosen)),
            (
                "back_query",
                match chosen {
                    Some(d) if d != DEFAULT_DOMAIN => format!("?domain={}", esc(d)),
                    _ => String::new(),
                },
            ),
            ("domain_field_hidden", if show_domain { String::new() } else { " hidden".to_owned() }),
            ("domain_error", domain_error.clone()),
            (
                "domain_error_hidden",
                if domain_error.is_empty() { " hidden" } else { "" }.to_owned(),
            ),
            ("mode", if evacuate { "evacuate" } else { "maintenance" }.to_owned()),
            ("zone_options", drain_zone_options(&table, zone)),
            ("to_options", receiver_options(&table)),
            ("to_field_hidden", if table.zones().is_two() { " hidden" } else { "" }.to_owned()),
            ("step", unit_step(table.units())),
            ("default_step", trim_number(step)),
            ("default_interval", format_duration_ms(interval_ms)),
            ("default_max_error", trim_number(guard.max_error_rate * 100.0)),
            ("default_min_requests", guard.min_requests.to_string()),
            ("default_breaches", guard.breaches.to_string()),
            ("pause_selected", selected(guard.on_breach == OnBreach::Pause)),
            ("rollback_selected", selected(guard.on_breach == OnBreach::Rollback)),
        ],
    );
    Reply::Page(layout(app, &user, "drain", title, &main))
}

/// The drain form's zones: every live zone of the table, by index, `zone` (a name) selected.
fn drain_zone_options(table: &RoutingTable, zone: Option<&str>) -> String {
    let zones = table.zones();
    zones
        .live()
        .map(|id| {
            let name = zones.zone_of(id);
            format!(
                "<option value=\"{n}\"{sel}>{n} ({lane})</option>",
                n = esc(name),
                lane = esc(zones.lane(id)),
                sel = if zone == Some(name) { " selected" } else { "" }
            )
        })
        .collect()
}

/// The drain form's receiving zones on a table of three or more: a checkbox per live zone.
fn receiver_options(table: &RoutingTable) -> String {
    let zones = table.zones();
    zones
        .live()
        .enumerate()
        .map(|(i, id)| {
            format!(
                "<label class=\"check\" for=\"f-to-{i}\"><input type=\"checkbox\" id=\"f-to-{i}\" name=\"to\" value=\"{n}\"> {n} ({lane})</label>",
                n = esc(zones.zone_of(id)),
                lane = esc(zones.lane(id)),
            )
        })
        .collect()
}

#[get("/ui/audit?<limit>")]
fn audit_page(app: &State<App>, user: Option<SignedIn>, limit: Option<usize>) -> Reply {
    let Some(user) = user else { return to_login() };
    let limit =
        limit.unwrap_or(AUDIT_PAGE_ROWS).clamp(1, crate::service::coordinator::AUDIT_IN_MEMORY);
    let records = app.coordinator.audit(limit);
    let mut rows = String::new();
    for r in &records {
        rows.push_str(&format!(
            "<tr><td class=\"nowrap col-when\" data-label=\"When\">{}</td><td class=\"col-who\" data-label=\"Who\">{}</td><td class=\"col-action\" data-label=\"Action\"><code>{}</code></td><td class=\"col-change\" data-label=\"From → to\">{} → {}</td><td class=\"col-reason\" data-label=\"Reason\">{}</td><td class=\"num col-version\" data-label=\"Version\">{}</td></tr>\n",
            esc(&iso8601(r.at_ms).replace('T', " ").replace('Z', "")),
            esc(&r.by),
            esc(r.action),
            esc(&r.from),
            esc(&r.to),
            esc(&r.reason),
            r.version
        ));
    }
    if records.is_empty() {
        rows.push_str("<tr><td colspan=\"6\">No changes yet.</td></tr>\n");
    }
    let more = (limit * 2).min(crate::service::coordinator::AUDIT_IN_MEMORY);
    let main = fill(
        AUDIT,
        &[("rows", rows), ("count", records.len().max(1).to_string()), ("more", more.to_string())],
    );
    Reply::Page(layout(app, &user, "audit", "Audit log", &main))
}

fn to_login() -> Reply {
    Reply::Redirect(Redirect::to("/ui/login"))
}

/// The login page with a fresh form token and an optional notice (already HTML).
fn login_view(app: &App, cookies: &CookieJar<'_>, notice: &str, name: &str) -> Page {
    let notice = if app.config.operators.is_empty() {
        "<p class=\"error\" id=\"login-error\">No operators are configured, so nobody can log in. Create one with <code>tidegate token new --name NAME</code> and add it to the configuration.</p>".to_owned()
    } else {
        notice.to_owned()
    };
    let token = session::issue_login_token(cookies, now_ms());
    Page::new(fill(LOGIN, &[("notice", notice), ("csrf", token), ("name", esc(name))]))
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

fn login_error(text: &str) -> String {
    format!("<p class=\"error\" id=\"login-error\" role=\"alert\">{}</p>", esc(text))
}

#[get("/ui/login?<signed_out>")]
fn login_page(
    app: &State<App>,
    cookies: &CookieJar<'_>,
    user: Option<SignedIn>,
    signed_out: Option<&str>,
) -> Reply {
    if user.is_some() {
        return Reply::Redirect(Redirect::to("/ui"));
    }
    let notice = if signed_out.is_some() {
        "<p class=\"ok\" id=\"login-notice\" role=\"status\">You are logged out.</p>"
    } else {
        ""
    };
    Reply::Page(login_view(app, cookies, notice, ""))
}

#[derive(FromForm)]
struct LoginForm {
    name: String,
    token: String,
    csrf: String,
}

#[post("/ui/login", data = "<form>")]
fn login(
    app: &State<App>,
    cookies: &CookieJar<'_>,
    // The socket's peer, not `client_ip()`: that trusts an `X-Real-IP` header, which a guesser
    // would simply vary.
    remote: Option<SocketAddr>,
    html: WantsHtml,
    form: Result<Form<LoginForm>, Errors<'_>>,
) -> Reply {
    let Ok(form) = form else {
        let notice = login_error("Fill in your operator name and token.");
        return Reply::Refused((Status::BadRequest, login_view(app, cookies, &notice, "")));
    };
    if !session::take_login_token(cookies, &form.csrf) {
        let notice = login_error(
            "This login form had expired or did not come from this page. It has been renewed: log in again.",
        );
        return Reply::Refused((Status::Forbidden, login_view(app, cookies, &notice, &form.name)));
    }
    // Failures are counted per configured operator name and per address; past the limit even
    // the right token is refused until the window moves on, so guessing gains nothing.
    let now = now_ms();
    let address = remote.map_or_else(|| "unknown".to_owned(), |peer| peer.ip().to_string());
    let known = app.config.operators.iter().find(|op| op.name == form.name.trim());
    let name = known.map(|op| op.name.as_str());
    if let Err(limited) = app.login_limiter.check(name, &address, now) {
        telemetry::count_ui_login(false);
        let seconds = limited.retry_after_ms.div_ceil(1000).max(1);
        tracing::info!(
            "ui: login for {:?} from {address} refused: too many failures per {}",
            form.name,
            limited.by
        );
        let detail = format!(
            "too many failed logins for this {} in the last {}; try again in {seconds} s",
            if limited.by == "name" { "operator name" } else { "address" },
            format_duration_ms(login_limit::WINDOW_MS)
        );
        if !html.0 {
            return Reply::Api(
                ApiError::new(Status::TooManyRequests, "too_many_logins", detail)
                    .with("retry_after_seconds", seconds.into()),
            );
        }
        let notice = login_error(&format!("{}.", capitalise(&detail)));
        return Reply::Refused((
            Status::TooManyRequests,
            login_view(app, cookies, &notice, &form.name),
        ));
    }
    let Some(op) = check_login(&app.config, &form.name, &form.token) else {
        app.login_limiter.failed(name, &address, now);
        telemetry::count_ui_login(false);
        tracing::info!("ui: failed login for operator name {:?}", form.name);
        let notice = login_error("That operator name and token do not match the configuration.");
        return Reply::Refused((
            Status::Unauthorized,
            login_view(app, cookies, &notice, &form.name),
        ));
    };
    app.login_limiter.succeeded(&op.name, &address);
    telemetry::count_ui_login(true);
    tracing::info!("ui: {} ({}) logged in", op.name, op.role.as_str());
    Session::new(&op.name, app.config.ui.session_ttl_ms, now).write(cookies, now);
    Reply::Redirect(Redirect::to("/ui"))
}

#[derive(FromForm)]
struct LogoutForm {
    csrf: String,
}

#[post("/ui/logout", data = "<form>")]
fn logout(app: &State<App>, cookies: &CookieJar<'_>, form: Option<Form<LogoutForm>>) -> Reply {
    let now = now_ms();
    let Some(session) = Session::read(cookies, &app.revocations, now) else {
        return to_login();
    };
    // Even logging out needs the token: otherwise any page could sign operators out mid-incident.
    if session.check_csrf(form.as_ref().map(|f| f.csrf.as_str())) != Csrf::Valid {
        let notice = login_error("Logging out needs the page's token. Use the Log out button.");
        let role = app.config.operators.iter().find(|op| op.name == session.name).map(|op| op.role);
        let role = role.unwrap_or(Role::Viewer);
        let user = SignedIn { name: session.name.clone(), role, csrf: session.csrf };
        let main = format!("{notice}<p><a href=\"/ui\">Back to the overview</a></p>");
        return Reply::Refused((Status::Forbidden, layout(app, &user, "logout", "Log out", &main)));
    }
    // End the session on the server first: a copy of the cookie (another tab, a stolen value)
    // must stop working, not only this browser's.
    if let Err(e) = app.revocations.revoke(&session.id, session.expires_ms, now) {
        tracing::info!("ui: could not record the logout of {}: {e}", session.name);
        return Reply::Api(ApiError::new(
            Status::InternalServerError,
            "logout_not_saved",
            format!("the logout could not be saved ({e}), so the session still works; try again"),
        ));
    }
    Session::remove(cookies);
    tracing::info!("ui: {} logged out", session.name);
    Reply::Redirect(Redirect::to("/ui/login?signed_out=1"))
}

#[derive(Responder)]
struct Asset {
    body: &'static str,
    content_type: ContentType,
    // Embedded assets change only with the binary; revalidating keeps an upgrade visible.
    cache: Header<'static>,
    nosniff: Header<'static>,
}

#[get("/ui/assets/<name>")]
fn asset(name: &str) -> Result<Asset, ApiError> {
    let (body, content_type) = match name {
        "app.js" => (APP_JS, ContentType::JavaScript),
        "app.css" => (APP_CSS, ContentType::CSS),
        other => {
            return Err(ApiError::new(
                Status::NotFound,
                "not_found",
                format!("there is no UI asset `{other}`"),
            ));
        }
    };
    Ok(Asset {
        body,
        content_type,
        cache: Header::new("Cache-Control", "no-cache"),
        nosniff: Header::new("X-Content-Type-Options", "nosniff"),
    })
}
