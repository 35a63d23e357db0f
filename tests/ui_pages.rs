//! The operator web UI through `rocket::local`: every page and action, login and logout, roles,
//! CSRF, session expiry, the dial's version conflict, and the MQ lanes page.

mod common;

use common::*;
use rocket::http::{ContentType, Cookie, Header, Status};
use rocket::local::blocking::{Client, LocalResponse};
use serde_json::{Value, json};
use tidegate::config::token_sha256_hex;

/// A fixed key, so two clients can play "the same tidegate after a restart".
const KEY: &str = "4f1c0e2b9a7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3";

fn config() -> String {
    config_toml(&format!("[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n"))
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from =
        text.find(start).unwrap_or_else(|| panic!("`{start}` not in:\n{text}")) + start.len();
    let len = text[from..].find(end).unwrap();
    &text[from..from + len]
}

fn page(client: &Client, path: &str) -> (Status, String) {
    let response = client.get(path.to_owned()).dispatch();
    (response.status(), response.into_string().unwrap_or_default())
}

fn login_form(client: &Client) -> String {
    let (status, html) = page(client, "/ui/login");
    assert_eq!(status, Status::Ok);
    between(&html, "name=\"csrf\" value=\"", "\"").to_owned()
}

fn post_login<'c>(
    client: &'c Client,
    name: &str,
    token: &str,
    form_token: &str,
) -> LocalResponse<'c> {
    client
        .post("/ui/login")
        .header(ContentType::Form)
        .body(format!("name={name}&token={token}&csrf={form_token}"))
        .dispatch()
}

/// Logs in through the form and returns the session's CSRF token, read from the overview page.
fn login(client: &Client, name: &str, token: &str) -> String {
    let form_token = login_form(client);
    let response = post_login(client, name, token, &form_token);
    assert_eq!(response.status(), Status::SeeOther);
    assert_eq!(response.headers().get_one("Location"), Some("/ui"));
    let (status, html) = page(client, "/ui");
    assert_eq!(status, Status::Ok);
    let csrf = between(&html, "data-csrf=\"", "\"").to_owned();
    assert_eq!(csrf.len(), 64);
    csrf
}

fn csrf(token: &str) -> Header<'static> {
    Header::new("X-CSRF-Token", token.to_owned())
}

fn send<'c>(
    client: &'c Client,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> LocalResponse<'c> {
    let mut request = match method {
        "PUT" => client.put(path.to_owned()),
        _ => client.post(path.to_owned()),
    }
    .header(ContentType::JSON)
    .body(body.to_string());
    if let Some(token) = token {
        request = request.header(csrf(token));
    }
    request.dispatch()
}

fn error(response: LocalResponse<'_>, status: Status) -> Value {
    assert_eq!(response.status(), status);
    let body: Value = response.into_json().expect("a JSON error body");
    assert!(body["detail"].as_str().is_some_and(|d| d.len() > 10), "{body}");
    body
}

fn version(client: &Client) -> u64 {
    client.get("/v1/routing").dispatch().into_json::<Value>().unwrap()["version"].as_u64().unwrap()
}

fn dial(blue_percent: u32, expected_version: u64, reason: &str) -> Value {
    json!({"blue_percent": blue_percent, "expected_version": expected_version, "reason": reason})
}

fn latest_audit(client: &Client) -> Value {
    client.get("/v1/audit?limit=1").dispatch().into_json::<Value>().unwrap()["entries"][0].clone()
}

#[test]
fn pages_need_a_session_and_send_the_browser_to_the_login() {
    let (client, _dir) = client_with(&config());
    let response = client.get("/").dispatch();
    assert_eq!(response.status(), Status::SeeOther);
    assert_eq!(response.headers().get_one("Location"), Some("/ui"));
    for path in ["/ui", "/ui/lanes", "/ui/drain", "/ui/audit"] {
        let response = client.get(path).dispatch();
        assert_eq!(response.status(), Status::SeeOther, "{path}");
        assert_eq!(response.headers().get_one("Location"), Some("/ui/login"), "{path}");
    }
}

#[test]
fn the_login_page_sets_a_form_token_cookie_and_security_headers() {
    let (client, _dir) = client_with(&config());
    let response = client.get("/ui/login").dispatch();
    assert_eq!(response.status(), Status::Ok);
    assert_eq!(response.content_type(), Some(ContentType::HTML));
    let csp = response.headers().get_one("Content-Security-Policy").unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(response.headers().get_one("Cache-Control"), Some("no-store"));
    let set_cookie: Vec<&str> = response.headers().get("Set-Cookie").collect();
    let login = set_cookie.iter().find(|c| c.starts_with("tg_login=")).unwrap();
    assert!(login.contains("HttpOnly") && login.contains("SameSite=Strict"), "{login}");
    let html = response.into_string().unwrap();
    assert!(html.contains("id=\"login-form\"") && html.contains("name=\"token\""));
}

#[test]
fn login_checks_the_form_token_the_name_and_the_token() {
    let (client, _dir) = client_with(&config());
    // No form token from this browser at all.
    let response = post_login(&client, "alice", OPERATOR_TOKEN, "forged");
    assert_eq!(response.status(), Status::Forbidden);
    assert!(response.into_string().unwrap().contains("expired or did not come from this page"));
    // A wrong form token (the cookie exists, the value differs).
    login_form(&client);
    assert_eq!(
        post_login(&client, "alice", OPERATOR_TOKEN, &"0".repeat(64)).status(),
        Status::Forbidden
    );
    // Wrong token, another operator's token, an unknown name: all the same 401.
    for (name, token) in
        [("alice", "tg_wrong"), ("alice", VIEWER_TOKEN), ("mallory", OPERATOR_TOKEN)]
    {
        let form_token = login_form(&client);
        let response = post_login(&client, name, token, &form_token);
        assert_eq!(response.status(), Status::Unauthorized, "{name}");
        let html = response.into_string().unwrap();
        assert!(html.contains("do not match the configuration"), "{html}");
        assert_eq!(client.get("/ui").dispatch().status(), Status::SeeOther, "still signed out");
    }
    // A form token is single-use.
    let form_token = login_form(&client);
    assert_eq!(
        post_login(&client, "alice", OPERATOR_TOKEN, &form_token).status(),
        Status::SeeOther
    );
    assert_eq!(
        post_login(&client, "alice", OPERATOR_TOKEN, &form_token).status(),
        Status::Forbidden
    );
    // Missing fields are a readable page, not a crash.
    let response = client.post("/ui/login").header(ContentType::Form).body("name=alice").dispatch();
    assert_eq!(response.status(), Status::BadRequest);
    assert!(response.into_string().unwrap().contains("Fill in your operator name and token"));
}

#[test]
fn the_session_cookie_is_private_httponly_strict_and_expires() {
    let (client, _dir) = client_with(&config());
    let form_token = login_form(&client);
    let response = post_login(&client, "alice", OPERATOR_TOKEN, &form_token);
    let session = response
        .headers()
        .get("Set-Cookie")
        .find(|c| c.starts_with("tg_session="))
        .unwrap()
        .to_owned();
    assert!(session.contains("HttpOnly"), "{session}");
    assert!(session.contains("SameSite=Strict"), "{session}");
    assert!(session.contains("Max-Age=43200"), "12h by default: {session}");
    assert!(session.contains("Expires="), "{session}");
    let value = between(&session, "tg_session=", ";");
    assert!(!value.contains("alice"), "the value is encrypted: {value}");
}

#[test]
fn an_operator_sees_every_control_and_a_viewer_none() {
    let (client, _dir) = client_with(&config());
    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    let (_, html) = page(&client, "/ui");
    for control in
        ["id=\"dial-form\"", "id=\"dial-apply\"", "id=\"drain-actions\"", "href=\"/ui/drain\""]
    {
        assert!(html.contains(control), "operator page lacks {control}");
    }
    assert!(html.contains("data-role=\"operator\"") && html.contains(&csrf));
    assert!(html.contains("href=\"/ui/audit\""), "the overview links to the audit log");
    assert!(!html.contains("viewer-notice"));

    let (viewer, _dir) = client_with(&config());
    login(&viewer, "victor", VIEWER_TOKEN);
    let (status, html) = page(&viewer, "/ui");
    assert_eq!(status, Status::Ok);
    for control in ["dial-form", "dial-apply", "drain-actions", "drain-pause", "href=\"/ui/drain\""]
    {
        assert!(!html.contains(control), "viewer page holds {control}");
    }
    assert!(html.contains("id=\"viewer-notice\"") && html.contains("data-role=\"viewer\""));
    let (status, html) = page(&viewer, "/ui/drain");
    assert_eq!(status, Status::Ok);
    assert!(!html.contains("id=\"drain-form\"") && html.contains("viewer-notice"));
}

#[test]
fn the_drain_form_is_filled_with_the_configured_defaults() {
    let toml = config_toml(&format!(
        "[drain]\ntick = \"1h\"\nstep_percent = 5\ninterval = \"45s\"\nmax_error_rate = 0.03\nmin_requests = 250\nbreaches = 3\non_breach = \"rollback\"\n[ui]\nsecret_key = \"{KEY}\"\n"
    ));
    let (client, _dir) = client_with(&toml);
    login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui/drain");
    assert_eq!(status, Status::Ok);
    for expected in [
        "id=\"drain-form\"",
        "<option value=\"az-b\">az-b (blue)</option>",
        "id=\"f-step\" name=\"step_percent\" min=\"1\" max=\"100\" step=\"1\" value=\"5\"",
        "id=\"f-interval\" name=\"interval\" value=\"45s\"",
        "value=\"3\"> %",
        "value=\"250\"",
        "<option value=\"rollback\" selected>",
        "id=\"f-mode\" name=\"mode\" value=\"maintenance\"",
    ] {
        assert!(html.contains(expected), "drain form lacks {expected}");
    }
}

/// The page tells the script the server's `[freeze] by_default`, which ticks the loss-less
/// boxes of the dial and the unit move (and every move then says `freeze` either way).
#[test]
fn the_page_carries_the_freeze_default() {
    for (extra, expected) in
        [("[freeze]\nwindow = \"30s\"\n", "true"), ("[freeze]\nby_default = false\n", "false")]
    {
        let toml =
            config_toml(&format!("{extra}[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n"));
        let (client, _dir) = client_with(&toml);
        login(&client, "alice", OPERATOR_TOKEN);
        let (status, html) = page(&client, "/ui");
        assert_eq!(status, Status::Ok);
        assert_eq!(between(&html, "data-freeze-default=\"", "\""), expected);
    }
}

#[test]
fn the_evacuate_action_fills_the_form_with_the_evacuation_defaults_and_the_zone() {
    let toml = config_toml(&format!(
        "[drain]\ntick = \"1h\"\n[drain.evacuate]\nstep_percent = 20\ninterval = \"7s\"\nmin_requests = 15\n[ui]\nsecret_key = \"{KEY}\"\n"
    ));
    let (client, _dir) = client_with(&toml);
    login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui/drain?mode=evacuate&zone=az-a");
    assert_eq!(status, Status::Ok);
    for expected in [
        "Evacuate a zone",
        "Start the evacuation",
        "id=\"f-mode\" name=\"mode\" value=\"evacuate\"",
        "<option value=\"az-a\" selected>az-a (green)</option>",
        "value=\"20\"",
        "id=\"f-interval\" name=\"interval\" value=\"7s\"",
        "value=\"15\"",
    ] {
        assert!(html.contains(expected), "evacuation form lacks {expected}");
    }
}

#[test]
fn assets_are_served_with_their_types_and_unknown_ones_are_json_404s() {
    let (client, _dir) = client_with(&config());
    let js = client.get("/ui/assets/app.js").dispatch();
    assert_eq!(js.content_type(), Some(ContentType::JavaScript));
    assert!(js.into_string().unwrap().contains("X-CSRF-Token"));
    let css = client.get("/ui/assets/app.css").dispatch();
    assert_eq!(css.content_type(), Some(ContentType::CSS));
    let missing = error(client.get("/ui/assets/../../Cargo.toml").dispatch(), Status::NotFound);
    assert_eq!(missing["error"], "not_found");
    assert_eq!(
        error(client.get("/ui/assets/x.js").dispatch(), Status::NotFound)["error"],
        "not_found"
    );
}

#[test]
fn a_dial_change_from_the_ui_is_audited_under_the_operator() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let response = send(&client, "PUT", "/v1/dial", Some(&token), dial(40, 1, "drill from the UI"));
    assert_eq!(response.status(), Status::Ok);
    let body: Value = response.into_json().unwrap();
    assert_eq!((body["version"].as_u64(), body["blue_percent"].as_f64()), (Some(2), Some(40.0)));
    let entry = latest_audit(&client);
    assert_eq!(entry["by"], "alice");
    assert_eq!(entry["action"], "dial");
    assert_eq!(entry["reason"], "drill from the UI");
    // The audit page shows it too.
    let (status, html) = page(&client, "/ui/audit");
    assert_eq!(status, Status::Ok);
    assert!(html.contains(">alice</td>") && html.contains("drill from the UI"), "{html}");
}

#[test]
fn a_cookie_change_without_the_right_csrf_token_is_refused() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let missing =
        error(send(&client, "PUT", "/v1/dial", None, dial(40, 1, "x")), Status::Forbidden);
    assert_eq!(missing["error"], "csrf_failed");
    assert!(missing["detail"].as_str().unwrap().contains("X-CSRF-Token"));
    let mut wrong = token.clone();
    wrong.replace_range(0..1, if wrong.starts_with('a') { "b" } else { "a" });
    let wrong =
        error(send(&client, "PUT", "/v1/dial", Some(&wrong), dial(40, 1, "x")), Status::Forbidden);
    assert_eq!(wrong["error"], "csrf_failed");
    let drain = json!({"zone": "az-b", "target_percent": 0, "reason": "x"});
    assert_eq!(
        error(send(&client, "POST", "/v1/drains", None, drain), Status::Forbidden)["error"],
        "csrf_failed"
    );
    assert_eq!(version(&client), 1, "nothing changed");
    // A bearer token is not an ambient credential: it needs no CSRF token, cookie or not.
    let response = client
        .put("/v1/dial")
        .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
        .body(dial(40, 1, "bearer").to_string())
        .dispatch();
    assert_eq!(response.status(), Status::Ok);
    // And a bad bearer token is not rescued by a good cookie.
    let response = client
        .put("/v1/dial")
        .header(Header::new("Authorization", "Bearer tg_nope"))
        .header(csrf(&token))
        .body(dial(30, 2, "x").to_string())
        .dispatch();
    assert_eq!(error(response, Status::Unauthorized)["error"], "unauthorized");
}

#[test]
fn a_viewer_cannot_change_anything_even_with_the_csrf_token() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "victor", VIEWER_TOKEN);
    let refused =
        error(send(&client, "PUT", "/v1/dial", Some(&token), dial(40, 1, "x")), Status::Forbidden);
    assert_eq!(refused["error"], "forbidden");
    assert!(refused["detail"].as_str().unwrap().contains("viewer"));
    let drain = json!({"zone": "az-b", "target_percent": 0, "reason": "x"});
    assert_eq!(
        error(send(&client, "POST", "/v1/drains", Some(&token), drain), Status::Forbidden)["error"],
        "forbidden"
    );
    assert_eq!(version(&client), 1);
    // Reads work.
    assert_eq!(client.get("/v1/zones").dispatch().status(), Status::Ok);
    assert_eq!(page(&client, "/ui/audit").0, Status::Ok);
}

#[test]
fn a_stale_version_from_the_ui_gets_the_conflict_with_the_current_version() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    // Someone else moves the dial first (version 1 -> 2).
    let response = client
        .put("/v1/dial")
        .header(Header::new("Authorization", format!("Bearer {OPERATOR_TOKEN}")))
        .body(dial(30, 1, "someone else").to_string())
        .dispatch();
    assert_eq!(response.status(), Status::Ok);
    let conflict = error(
        send(&client, "PUT", "/v1/dial", Some(&token), dial(40, 1, "mine")),
        Status::Conflict,
    );
    assert_eq!(conflict["error"], "version_conflict");
    assert_eq!(
        (conflict["current_version"].as_u64(), conflict["expected_version"].as_u64()),
        (Some(2), Some(1))
    );
    let routing: Value = client.get("/v1/routing").dispatch().into_json().unwrap();
    assert_eq!(routing["blue_percent"], 30.0, "the other change stands");
    // The page's script explains the conflict and reloads instead of retrying.
    let js = client.get("/ui/assets/app.js").dispatch().into_string().unwrap();
    assert!(js.contains("'version_conflict'") && js.contains("someone else changed the routing"));
}

#[test]
fn drains_started_and_controlled_from_the_ui_are_audited_under_the_operator() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let plan = json!({
        "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "30s",
        "guard": {"max_error_rate": 0.02, "min_requests": 100, "breaches": 2, "on_breach": "pause"},
        "reason": "az-b upgrade from the UI"
    });
    let response = send(&client, "POST", "/v1/drains", Some(&token), plan);
    assert_eq!(response.status(), Status::Created);
    let id = response.into_json::<Value>().unwrap()["id"].as_u64().unwrap();
    assert_eq!(latest_audit(&client)["by"], "alice");
    let control = |id: u64, action: &str| {
        let response = send(
            &client,
            "POST",
            &format!("/v1/drains/{id}/{action}"),
            Some(&token),
            json!({"reason": format!("{action} from the UI")}),
        );
        assert_eq!(response.status(), Status::Ok, "{action}");
        let state = response.into_json::<Value>().unwrap()["state"].as_str().unwrap().to_owned();
        let entry = latest_audit(&client);
        assert_eq!(entry["by"], "alice", "{action}");
        assert_eq!(entry["action"], format!("drain_{action}"));
        state
    };
    assert_eq!(control(id, "pause"), "paused");
    assert_eq!(control(id, "resume"), "running");
    assert_eq!(control(id, "abort"), "aborted");
    let plan = json!({"zone": "az-b", "target_percent": 0, "reason": "second"});
    let second = send(&client, "POST", "/v1/drains", Some(&token), plan);
    let second = second.into_json::<Value>().unwrap()["id"].as_u64().unwrap();
    // No step was taken yet, so rolling back arrives at once.
    assert_eq!(control(second, "rollback"), "rolled_back");
    // Restoring a zone is a change too, and needs the token.
    let restore = json!({"reason": "more to az-b", "target_percent": 60});
    assert_eq!(
        send(&client, "POST", "/v1/zones/az-b/restore", None, restore.clone()).status(),
        Status::Forbidden
    );
    assert_eq!(
        send(&client, "POST", "/v1/zones/az-b/restore", Some(&token), restore).status(),
        Status::Created
    );
}

#[test]
fn logout_needs_the_token_and_ends_the_session() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let response = client.post("/ui/logout").header(ContentType::Form).body("csrf=nope").dispatch();
    assert_eq!(response.status(), Status::Forbidden);
    assert_eq!(page(&client, "/ui").0, Status::Ok, "still signed in");
    let response = client
        .post("/ui/logout")
        .header(ContentType::Form)
        .body(format!("csrf={token}"))
        .dispatch();
    assert_eq!(response.status(), Status::SeeOther);
    assert_eq!(response.headers().get_one("Location"), Some("/ui/login?signed_out=1"));
    assert_eq!(page(&client, "/ui").0, Status::SeeOther);
    let (_, html) = page(&client, "/ui/login?signed_out=1");
    assert!(html.contains("You are logged out."));
    assert_eq!(
        error(
            send(&client, "PUT", "/v1/dial", Some(&token), dial(40, 1, "x")),
            Status::Unauthorized
        )["error"],
        "unauthorized"
    );
}

#[test]
fn expired_foreign_and_unknown_sessions_are_ignored() {
    let (client, _dir) = client_with(&config());
    let forged = |name: &str, expires_ms: u64| {
        let value = json!({"id": "ab".repeat(32), "name": name, "csrf": "c".repeat(64), "expires_ms": expires_ms});
        Cookie::new("tg_session", value.to_string())
    };
    let later = tidegate::http::now_ms() + 60_000;
    // Encrypted with tidegate's key, so the only thing wrong is what is inside.
    let expired = client.get("/ui").private_cookie(forged("alice", 1_000)).dispatch();
    assert_eq!(expired.status(), Status::SeeOther);
    let removed = client.get("/ui").private_cookie(forged("mallory", later)).dispatch();
    assert_eq!(removed.status(), Status::SeeOther);
    let valid = client.get("/ui").private_cookie(forged("alice", later)).dispatch();
    assert_eq!(valid.status(), Status::Ok);
    // A plain (unencrypted) cookie is not a session.
    let plain = client.get("/ui").cookie(forged("alice", later)).dispatch();
    assert_eq!(plain.status(), Status::SeeOther);
    let response = client
        .put("/v1/dial")
        .private_cookie(forged("alice", 1_000))
        .header(csrf(&"c".repeat(64)))
        .body(dial(40, 1, "x").to_string())
        .dispatch();
    assert_eq!(error(response, Status::Unauthorized)["error"], "unauthorized");
}

#[test]
fn sessions_survive_a_restart_with_the_configured_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let first = client_in(&config(), dir.path());
    login(&first, "alice", OPERATOR_TOKEN);
    let cookie = first.cookies().get("tg_session").unwrap().clone();
    drop(first);
    let again = client_in(&config(), dir.path());
    assert_eq!(again.get("/ui").cookie(cookie.clone()).dispatch().status(), Status::Ok);
    drop(again);
    // Without ui.secret_key every start draws a new key: old sessions end.
    let random_key = client_in(&config_toml("[drain]\ntick = \"1h\""), dir.path());
    assert_eq!(random_key.get("/ui").cookie(cookie).dispatch().status(), Status::SeeOther);
}

#[test]
fn user_text_is_escaped_on_the_audit_page() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let reason = "<script>alert(1)</script> & \"quotes\"";
    assert_eq!(
        send(&client, "PUT", "/v1/dial", Some(&token), dial(45, 1, reason)).status(),
        Status::Ok
    );
    let (_, html) = page(&client, "/ui/audit");
    assert!(!html.contains("<script>alert"), "raw markup leaked");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"));
    let (_, html) = page(&client, "/ui/audit?limit=1");
    assert_eq!(html.matches("<tr><td").count(), 1, "limit is honoured");
}

#[test]
fn ui_configuration_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[ui]\nsecret_key = \"short\"", "ui.secret_key"),
        (&*format!("[ui]\nsecret_key = \"{}\"", "0".repeat(64)), "ui.secret_key"),
        ("[ui]\nsession_ttl = \"30s\"", "ui.session_ttl"),
        ("[ui]\nsession_ttl = \"12\"", "ui.session_ttl"),
    ];
    for (toml, key) in cases {
        let figment = figment::Figment::from(figment::providers::Serialized::defaults(
            tidegate::config::Settings::default(),
        ))
        .merge(<figment::providers::Toml as figment::providers::Format>::string(toml));
        let overrides = tidegate::config::Overrides {
            data_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        };
        let error = tidegate::config::Config::from_figment(figment, &overrides).unwrap_err();
        assert!(error.to_string().contains(&format!("`{key}`")), "{toml}: {error}");
    }
}

/// The shell of `/ui/lanes` for whoever is signed in.
fn lanes_page(client: &Client) -> String {
    let (status, html) = page(client, "/ui/lanes");
    assert_eq!(status, Status::Ok);
    html
}

#[test]
fn the_lanes_page_renders_for_operators_and_viewers_and_is_in_the_navigation() {
    for (name, token, role) in
        [("alice", OPERATOR_TOKEN, "operator"), ("victor", VIEWER_TOKEN, "viewer")]
    {
        let (client, _dir) = client_with(&config());
        login(&client, name, token);
        let html = lanes_page(&client);
        assert!(html.contains("<title>MQ lanes · tidegate</title>"), "{role}: {html}");
        assert!(
            html.contains("data-page=\"lanes\"") && html.contains(&format!("data-role=\"{role}\""))
        );
        // The page's script fills this from GET /v1/lanes; the heartbeat interval (1s by
        // default) is what it calls a member late against.
        assert!(
            html.contains("<div id=\"lanes\" class=\"lanes\" data-heartbeat-ms=\"1000\">"),
            "{html}"
        );
        assert!(html.contains("read by consumers in <strong>az-b</strong>"), "blue half's zone");
        assert!(html.contains("read in <strong>az-a</strong>"), "green half's zone");
        assert!(html.contains("dropped after 10s of silence"));
        assert!(
            html.contains("Lag is not read, because <code>lanes.kafka_bootstrap</code> is not set")
        );
        assert!(
            html.contains(
                "<a href=\"/ui/lanes\" aria-current=\"page\" id=\"nav-lanes\">MQ lanes</a>"
            ),
            "{role}: the navigation marks the lanes page"
        );
        // Every page links to it, and it is read-only: no control, for either role.
        let (_, overview) = page(&client, "/ui");
        assert!(overview.contains("<a href=\"/ui/lanes\" id=\"nav-lanes\">MQ lanes</a>"), "{role}");
        let main = between(&html, "<main id=\"main\">", "</main>");
        for control in ["<form", "<button", "<input"] {
            assert!(!main.contains(control), "{role}: the lanes page holds {control}");
        }
        assert_eq!(html.contains("id=\"viewer-notice\""), role == "viewer");
    }
}

#[test]
fn the_lanes_page_says_when_lag_is_read_from_kafka() {
    // Nothing connects to this address: the lag reader only dials out once a group exists.
    let toml = config_toml(&format!(
        "[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n[lanes]\nkafka_bootstrap = \"127.0.0.1:9\"\nlag_interval = \"5s\"\n"
    ));
    let (client, _dir) = client_with(&toml);
    login(&client, "victor", VIEWER_TOKEN);
    let html = lanes_page(&client);
    assert!(html.contains("Lag is read from Kafka every 5s."), "{html}");
    assert!(!html.contains("Lag is not read"));
}

#[test]
fn the_lanes_page_reads_a_registered_group_with_the_session_even_where_reads_are_closed() {
    // With service tokens configured an anonymous read is refused, so the page's reads only work
    // because the session cookie counts as a reader.
    let toml = config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]\n[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n",
        tidegate::config::token_sha256_hex(SERVICE_TOKEN)
    ));
    let (client, _dir) = client_with(&toml);
    let service = Header::new("Authorization", format!("Bearer {SERVICE_TOKEN}"));
    let register = |id: &str, zone: &str| {
        let member = json!({"name": id, "zone": zone, "topic": "orders", "partitions": 8});
        let response = client
            .post("/v1/lanes/billing/members")
            .header(service.clone())
            .header(ContentType::JSON)
            .body(member.to_string())
            .dispatch();
        assert_eq!(response.status(), Status::Created, "{id}");
    };
    register("b1", "az-b");
    assert_eq!(
        error(client.get("/v1/lanes").dispatch(), Status::Unauthorized)["error"],
        "unauthorized",
        "signed out, reads are closed"
    );

    let csrf = login(&client, "victor", VIEWER_TOKEN);
    lanes_page(&client);
    let read = |client: &Client| -> Value {
        let response = client.get("/v1/lanes").dispatch();
        assert_eq!(response.status(), Status::Ok);
        response.into_json().unwrap()
    };
    let lanes = read(&client);
    assert_eq!(lanes["reads_lag"], false);
    assert_eq!(lanes["authority"], Value::Null, "a single node is its own lane authority");
    let groups = lanes["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1);
    let group = &groups[0];
    assert_eq!(
        (group["group"].as_str(), group["topic"].as_str()),
        (Some("billing"), Some("orders"))
    );
    assert_eq!(group["partitions"], 8);
    assert_eq!(group["generation"], 1);
    // The halves and their zones, as the page draws them.
    assert_eq!(group["zones"][0]["zone"], "az-b");
    assert_eq!(group["zones"][0]["color"], "blue");
    assert_eq!(group["zones"][0]["half"], json!([0, 1, 2, 3]));
    assert_eq!(group["zones"][0]["state"], "serving");
    assert_eq!(group["zones"][1]["zone"], "az-a");
    assert_eq!(group["zones"][1]["half"], json!([4, 5, 6, 7]));
    assert_eq!(group["zones"][1]["state"], "down", "no consumer in az-a");
    // Without Kafka the lag is unknown: null everywhere, never 0.
    assert!(group["lag"].is_null() && group["lag_error"].is_null(), "{group}");
    assert!(group["zones"][0]["lag"].is_null() && group["zones"][1]["lag"].is_null());
    let member = &group["members"][0];
    assert!(member["member_id"].as_str().unwrap().starts_with("b1-"), "{member}");
    assert_eq!(member["zone"], "az-b");
    assert_eq!(
        member["assignment"],
        json!([0, 1, 2, 3, 4, 5, 6, 7]),
        "alone, b1 reads both halves"
    );
    assert!(member["last_seen_at"].as_str().is_some_and(|t| t.ends_with('Z')));

    // A second member changes the assignment and its generation on the next read: the page
    // polls, so this is what it shows two seconds later.
    register("a1", "az-a");
    let group = read(&client)["groups"][0].clone();
    assert_eq!(group["generation"], 2);
    assert_eq!(group["zones"][1]["state"], "serving");
    let a1 = group["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["member_id"].as_str().unwrap().starts_with("a1-"))
        .unwrap();
    assert_eq!(a1["pending"], json!([4, 5, 6, 7]), "b1 has not released the green half yet");

    // An operator's session reads the same.
    let response = client.post("/ui/logout").header(ContentType::Form).body(format!("csrf={csrf}"));
    assert_eq!(response.dispatch().status(), Status::SeeOther);
    login(&client, "alice", OPERATOR_TOKEN);
    assert_eq!(read(&client)["groups"][0]["members"].as_array().unwrap().len(), 2);
}

#[test]
fn logout_ends_the_session_on_the_server_so_a_copied_cookie_stops_working() {
    let dir = tempfile::tempdir().unwrap();
    let client = client_in(&config(), dir.path());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let copied = client.cookies().get("tg_session").unwrap().clone();
    // The copy works while the session is open, for pages and for changes.
    let thief = client_in(&config(), &dir.path().join("other"));
    assert_eq!(thief.get("/ui").cookie(copied.clone()).dispatch().status(), Status::Ok);
    let logout = client.post("/ui/logout").header(ContentType::Form).body(format!("csrf={token}"));
    assert_eq!(logout.dispatch().status(), Status::SeeOther);
    // The same tidegate refuses the copy: the page, and a dial change with the right CSRF token.
    assert_eq!(client.get("/ui").cookie(copied.clone()).dispatch().status(), Status::SeeOther);
    let change = client
        .put("/v1/dial")
        .cookie(copied.clone())
        .header(ContentType::JSON)
        .header(csrf(&token))
        .body(dial(40, 1, "replayed cookie").to_string())
        .dispatch();
    assert_eq!(error(change, Status::Unauthorized)["error"], "unauthorized");
    assert_eq!(version(&client), 1, "nothing changed");
    drop(thief);
    drop(client);
    // The logout is durable: after a restart with the same key the copy still does not work.
    let restarted = client_in(&config(), dir.path());
    assert_eq!(restarted.get("/ui").cookie(copied).dispatch().status(), Status::SeeOther);
    // A fresh login still works.
    login(&restarted, "alice", OPERATOR_TOKEN);
}

fn post_login_as<'c>(
    client: &'c Client,
    name: &str,
    token: &str,
    accept: &str,
    address: &str,
) -> LocalResponse<'c> {
    let form_token = login_form(client);
    client
        .post("/ui/login")
        .header(ContentType::Form)
        .header(Header::new("Accept", accept.to_owned()))
        .remote(format!("{address}:40000").parse().unwrap())
        .body(format!("name={name}&token={token}&csrf={form_token}"))
        .dispatch()
}

#[test]
fn failed_logins_are_limited_per_operator_name_and_address_never_locking_the_operator_out() {
    let (client, _dir) = client_with(&config());
    // An outsider who knows the name fails five times from their address.
    for _ in 0..tidegate::service::login_limit::PER_NAME {
        let response = post_login_as(&client, "alice", "wrong", "text/html", "10.1.0.1");
        assert_eq!(response.status(), Status::Unauthorized);
    }
    // From that address, even with the right token: refused until the window moves on.
    let response = post_login_as(&client, "alice", OPERATOR_TOKEN, "application/json", "10.1.0.1");
    let body = error(response, Status::TooManyRequests);
    assert_eq!(body["error"], "too_many_logins");
    assert!(body["detail"].as_str().unwrap().contains("operator name"), "{body}");
    assert!(body["retry_after_seconds"].as_u64().is_some_and(|s| s > 0 && s <= 300), "{body}");
    // A browser gets the login page with the same status and the sentence.
    let response = post_login_as(&client, "alice", OPERATOR_TOKEN, "text/html", "10.1.0.1");
    assert_eq!(response.status(), Status::TooManyRequests);
    let html = response.into_string().unwrap();
    assert!(html.contains("Too many failed logins for this operator name"), "{html}");
    assert!(client.cookies().get("tg_session").is_none(), "no session was opened");
    // The real operator, from their own address, is not locked out (it used to be: five wrong
    // logins from anyone who knew the name locked alice out from everywhere).
    let response = post_login_as(&client, "alice", OPERATOR_TOKEN, "text/html", "10.1.0.2");
    assert_eq!(response.status(), Status::SeeOther);
}

#[test]
fn failed_logins_are_limited_per_address_across_names() {
    let (client, _dir) = client_with(&config());
    for i in 0..tidegate::service::login_limit::PER_ADDRESS {
        let name = if i % 2 == 0 { format!("nobody{i}") } else { "victor".to_owned() };
        let name = if i >= 8 { format!("guess{i}") } else { name };
        let response = post_login_as(&client, &name, "wrong", "text/html", "10.2.0.1");
        assert_eq!(response.status(), Status::Unauthorized, "attempt {i}");
    }
    // A forwarded-for header does not make the same peer someone else.
    let form_token = login_form(&client);
    let spoofed = client
        .post("/ui/login")
        .header(ContentType::Form)
        .header(Header::new("X-Real-IP", "10.77.0.1"))
        .remote("10.2.0.1:40000".parse().unwrap())
        .body(format!("name=alice&token={OPERATOR_TOKEN}&csrf={form_token}"))
        .dispatch();
    assert_eq!(spoofed.status(), Status::TooManyRequests);
    let response = post_login_as(&client, "alice", OPERATOR_TOKEN, "application/json", "10.2.0.1");
    let body = error(response, Status::TooManyRequests);
    assert!(body["detail"].as_str().unwrap().contains("address"), "{body}");
    // alice from her own address is fine.
    let response = post_login_as(&client, "alice", OPERATOR_TOKEN, "text/html", "10.2.0.9");
    assert_eq!(response.status(), Status::SeeOther);
}

#[test]
fn the_zone_history_is_readable_by_viewers_and_starts_empty() {
    let (client, _dir) = client_with(&config());
    login(&client, "victor", VIEWER_TOKEN);
    let response = client.get("/v1/zones/history").dispatch();
    assert_eq!(response.status(), Status::Ok);
    let body: Value = response.into_json().unwrap();
    assert_eq!(body["every"], "2s");
    assert_eq!(body["keep"], "5m");
    let zones: Vec<&str> =
        body["zones"].as_array().unwrap().iter().map(|z| z["zone"].as_str().unwrap()).collect();
    assert_eq!(zones.len(), 2);
    assert!(body["zones"][0]["samples"].is_array());
}

#[test]
fn the_zone_history_needs_a_reader_where_reads_are_closed() {
    let toml = config_toml(&format!(
        "service_tokens_sha256 = [\"{}\"]\n[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n",
        token_sha256_hex(SERVICE_TOKEN)
    ));
    let (client, _dir) = client_with(&toml);
    let response = client.get("/v1/zones/history").dispatch();
    assert_eq!(error(response, Status::Unauthorized)["error"], "unauthorized");
    let response = client
        .get("/v1/zones/history")
        .header(Header::new("Authorization", format!("Bearer {VIEWER_TOKEN}")))
        .dispatch();
    assert_eq!(response.status(), Status::Ok);
}

#[test]
fn a_paused_drains_zone_says_paused_not_draining() {
    let (client, _dir) = client_with(&config());
    let token = login(&client, "alice", OPERATOR_TOKEN);
    let start = json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "1h",
        "reason": "maintenance"});
    assert_eq!(send(&client, "POST", "/v1/drains", Some(&token), start).status(), Status::Created);
    let zone_state = |client: &Client| {
        let zones = client.get("/v1/zones").dispatch().into_json::<Value>().unwrap();
        zones["zones"].as_array().unwrap().iter().find(|z| z["zone"] == "az-b").unwrap()["state"]
            .clone()
    };
    assert_eq!(zone_state(&client), "draining");
    let pause = json!({"reason": "look at dashboards"});
    assert_eq!(
        send(&client, "POST", "/v1/drains/1/pause", Some(&token), pause).status(),
        Status::Ok
    );
    assert_eq!(zone_state(&client), "paused");
}

#[test]
fn the_overview_has_the_cluster_panel_and_the_script_offers_other_replicas_when_this_one_dies() {
    let (client, _dir) = client_with(&config());
    login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui");
    assert_eq!(status, Status::Ok);
    for id in ["id=\"cluster-card\"", "id=\"cluster-self\"", "id=\"cluster\""] {
        assert!(html.contains(id), "{id} missing from the overview");
    }
    // The panel's data: the session reads /v1/cluster, which lists this replica.
    let cluster: Value = client.get("/v1/cluster").dispatch().into_json().unwrap();
    assert_eq!(cluster["replicas"].as_array().unwrap().len(), 1, "{cluster}");
    assert_eq!(cluster["replicas"][0]["self"], true);
    assert_eq!(cluster["replicas"][0]["status"], "live");
    // The script renders it and, on a network error or timeout, links the other consoles.
    let (status, js) = page(&client, "/ui/assets/app.js");
    assert_eq!(status, Status::Ok);
    for needle in ["'/v1/cluster'", "function renderCluster", "id: 'replica-down'", "r.url + '/ui'"]
    {
        assert!(js.contains(needle), "app.js lacks {needle}");
    }
}

#[test]
fn the_plans_page_has_run_controls_for_operators_and_none_for_viewers() {
    let (client, _dir) = client_with(&config());
    let response = client.get("/ui/plans").dispatch();
    assert_eq!(response.status(), Status::SeeOther, "the plans page needs a session");
    assert_eq!(response.headers().get_one("Location"), Some("/ui/login"));

    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui/plans");
    assert_eq!(status, Status::Ok);
    assert!(
        html.contains("<title>Plans · tidegate</title>") && html.contains("data-page=\"plans\"")
    );
    assert!(
        html.contains("<a href=\"/ui/plans\" aria-current=\"page\" id=\"nav-plans\">Plans</a>")
    );
    assert!(html.contains(&csrf), "the page's script sends the session's CSRF token");
    for control in [
        "id=\"plans\"",
        "id=\"plan-preview\"",
        "id=\"plan-confirm\"",
        "id=\"plan-confirm-name\"",
        "id=\"plan-confirm-reason\"",
        "id=\"plan-confirm-go\" class=\"primary\" disabled",
        "id=\"plan-run-actions\"",
        "id=\"plan-run-abort\"",
        "id=\"plan-run-rollback\"",
        "id=\"plan-reports\"",
        "id=\"automation\"",
        "id=\"automation-stop\"",
        "id=\"automation-start\"",
        "id=\"automation-reason\"",
        "autocapitalize=\"off\"",
    ] {
        assert!(html.contains(control), "operator's plans page lacks {control}");
    }
    let (_, overview) = page(&client, "/ui");
    assert!(overview.contains("<a href=\"/ui/plans\" id=\"nav-plans\">Plans</a>"));

    let (viewer, _dir) = client_with(&config());
    login(&viewer, "victor", VIEWER_TOKEN);
    let (status, html) = page(&viewer, "/ui/plans");
    assert_eq!(status, Status::Ok);
    assert!(html.contains("data-role=\"viewer\"") && html.contains("id=\"viewer-notice\""));
    // Viewers see the list, previews, the timeline and reports, never a control that changes state.
    for kept in [
        "id=\"plans\"",
        "id=\"plan-preview\"",
        "id=\"plan-run\"",
        "id=\"plan-reports\"",
        "id=\"automation\"",
    ] {
        assert!(html.contains(kept), "viewer's plans page lacks {kept}");
    }
    let main = between(&html, "<main id=\"main\">", "</main>");
    for control in [
        "plan-confirm",
        "plan-run-actions",
        "plan-run-abort",
        "automation-stop",
        "<button",
        "<input",
    ] {
        assert!(!main.contains(control), "viewer's plans page holds {control}");
    }
}

#[test]
fn a_plan_run_from_the_ui_needs_the_csrf_token_and_an_operator() {
    let (client, _dir) = client_with(&config());
    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    let plans: Value = client.get("/v1/plans").dispatch().into_json().unwrap();
    let plan = json!({
        "expected_version": plans["version"], "reason": "ui test", "rto": "5m",
        "steps": [{"type": "dial", "blue_percent": 40}],
    });
    let response = send(&client, "PUT", "/v1/plans/shift", Some(&csrf), plan);
    assert_eq!(response.status(), Status::Ok);
    // The preview is a read: the session's token is enough, nothing changes.
    let response = send(&client, "POST", "/v1/plans/shift/dry-run", Some(&csrf), json!({}));
    assert_eq!(response.status(), Status::Ok);
    let before = version(&client);
    let run = json!({"reason": "ui test", "plan_revision": 1});
    let missing =
        error(send(&client, "POST", "/v1/plans/shift/run", None, run.clone()), Status::Forbidden);
    assert_eq!(missing["error"], "csrf_failed");
    let (viewer, _dir) = client_with(&config());
    let viewer_csrf = login(&viewer, "victor", VIEWER_TOKEN);
    let refused = error(
        send(&viewer, "POST", "/v1/plans/shift/run", Some(&viewer_csrf), run.clone()),
        Status::Forbidden,
    );
    assert_eq!(refused["error"], "forbidden");
    assert_eq!(version(&client), before, "neither refusal changed anything");
    let response = send(&client, "POST", "/v1/plans/shift/run", Some(&csrf), run);
    assert_eq!(response.status(), Status::Created);
    let body: Value = response.into_json().unwrap();
    assert_eq!(body["started_by"], "alice");
}

/// The `<input …>` tag with `id`, as the page serves it.
fn input_tag<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}"));
    let start = html[..at].rfind("<input").unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..=end]
}

#[test]
fn typed_confirmations_are_never_capitalised_or_corrected_and_only_operators_get_them() {
    let (client, _dir) = client_with(&config());
    login(&client, "alice", OPERATOR_TOKEN);
    // The word `force` past the capacity check, a plan's name before a run or drill, and the
    // receiving zone's name before a unit move.
    for (path, id) in [
        ("/ui", "dial-force-word"),
        ("/ui/plans", "plan-confirm-name"),
        ("/ui", "units-confirm-name"),
        ("/ui", "units-ranges"),
    ] {
        let (status, html) = page(&client, path);
        assert_eq!(status, Status::Ok);
        let tag = input_tag(&html, id);
        for attr in [
            "autocapitalize=\"off\"",
            "autocorrect=\"off\"",
            "spellcheck=\"false\"",
            "autocomplete=\"off\"",
        ] {
            assert!(tag.contains(attr), "{path}: #{id} lacks {attr}: {tag}");
        }
    }
    // The force and restore steps are operator controls: a viewer's page has neither.
    let (status, html) = page(&client, "/ui");
    assert_eq!(status, Status::Ok);
    assert!(html.contains("id=\"dial-force-go\"") && html.contains("id=\"restore-go\""));
    let (viewer, _dir) = client_with(&config());
    login(&viewer, "victor", VIEWER_TOKEN);
    let (_, html) = page(&viewer, "/ui");
    for control in ["dial-force", "restore-confirm", "restore-go", "units-confirm"] {
        assert!(!html.contains(control), "viewer page holds {control}");
    }
}

#[test]
fn the_restore_the_overview_offers_is_a_drain_back_into_the_zone_under_the_operator() {
    let (client, _dir) = client_with(&config());
    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    // Evacuate az-b by moving the dial, as an incident would leave it, then restore it the
    // way the page does: the cookie, the CSRF token, a reason.
    let response =
        send(&client, "PUT", "/v1/dial", Some(&csrf), dial(0, version(&client), "az-b evacuated"));
    assert_eq!(response.status(), Status::Ok);
    let response = send(
        &client,
        "POST",
        "/v1/zones/az-b/restore",
        Some(&csrf),
        json!({"reason": "az-b is healthy again"}),
    );
    assert_eq!(response.status(), Status::Created);
    let drain: Value = response.into_json().unwrap();
    assert_eq!(
        (drain["zone"].as_str(), drain["mode"].as_str()),
        (Some("az-b"), Some("maintenance"))
    );
    assert_eq!(
        (drain["from_percent"].as_f64(), drain["target_percent"].as_f64()),
        (Some(0.0), Some(50.0))
    );
    assert_eq!(drain["started_by"], "alice");
    // The page names what it shows from the drain's own fields.
    let js = client.get("/ui/assets/app.js").dispatch().into_string().unwrap();
    assert!(js.contains("'/v1/zones/' + encodeURIComponent(zone) + '/restore'"));
    assert!(js.contains("d.mode === 'evacuate'") && js.contains("'Evacuation'"));
}

/// The UI's configuration with a third zone: a new log starts with az-b (blue), az-a (green) and
/// az-c (red), so the dial is refused from the start (409 `needs_two_zones`).
fn three_zones() -> String {
    config_toml(&format!(
        "[drain]\ntick = \"1h\"\n[ui]\nsecret_key = \"{KEY}\"\n[zones.az-c]\nlane = \"red\"\n"
    ))
}

/// The element with `id` up to the end of its opening tag.
fn open_tag<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id}"));
    let start = html[..at].rfind('<').unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..=end]
}

#[test]
fn the_overview_offers_unit_moves_to_operators_and_hides_the_dial_with_a_third_live_zone() {
    // Two zones: the dial as always, its N-zone sentence hidden, and the Move units form listing
    // both zones.
    let (client, _dir) = client_with(&config());
    login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui");
    assert_eq!(status, Status::Ok);
    assert!(!open_tag(&html, "dial-form").contains("hidden"), "{}", open_tag(&html, "dial-form"));
    assert!(open_tag(&html, "dial-n-zones").contains("hidden"));
    for expected in [
        "id=\"units-card\"",
        "id=\"units-form\"",
        "id=\"units-reason\"",
        "id=\"units-review\"",
        "id=\"units-confirm\" class=\"confirm\" hidden",
        "id=\"units-confirm-go\" class=\"primary\" disabled",
        "<option value=\"az-b\">az-b (blue)</option><option value=\"az-a\">az-a (green)</option></select>",
        "Ranges and single units of 0–99, comma-separated.",
        "id=\"global-writer\"",
        "id=\"split-more\"",
    ] {
        assert!(html.contains(expected), "the two-zone overview lacks {expected}");
    }

    // Three live zones: the dial form is cut from the first paint, the sentence says why, and
    // the receiving zones include az-c.
    let (client, _dir) = client_with(&three_zones());
    login(&client, "alice", OPERATOR_TOKEN);
    let (status, html) = page(&client, "/ui");
    assert_eq!(status, Status::Ok);
    assert!(open_tag(&html, "dial-form").contains(" hidden>"), "{}", open_tag(&html, "dial-form"));
    assert!(!open_tag(&html, "dial-n-zones").contains("hidden"));
    let notice = between(&html, "id=\"dial-n-zones\">", "</p>");
    for expected in [
        "<strong id=\"dial-live-count\">3</strong> live zones",
        "<span id=\"dial-live-names\">az-b, az-a, az-c</span>",
        "needs_two_zones",
        "<a href=\"#units-card\">Move units</a>",
    ] {
        assert!(notice.contains(expected), "the dial's sentence lacks {expected}: {notice}");
    }
    let select = between(&html, "<select id=\"units-zone\">", "</select>");
    assert_eq!(
        select,
        "<option value=\"az-b\">az-b (blue)</option><option value=\"az-a\">az-a (green)</option>\
         <option value=\"az-c\">az-c (red)</option>"
    );

    // A viewer sees the split, the global writer and the cards, and no form at all.
    let (viewer, _dir) = client_with(&three_zones());
    login(&viewer, "victor", VIEWER_TOKEN);
    let (status, html) = page(&viewer, "/ui");
    assert_eq!(status, Status::Ok);
    for kept in ["id=\"split\"", "id=\"global-writer\"", "id=\"zones\""] {
        assert!(html.contains(kept), "the viewer's overview lacks {kept}");
    }
    for control in ["units-card", "units-form", "units-confirm", "units-zone", "dial-n-zones"] {
        assert!(!html.contains(control), "the viewer's overview holds {control}");
    }
    // The routing domain selector only chooses what the page shows: viewers keep it. Nothing
    // else takes input.
    let main = between(&html, "<main id=\"main\">", "</main>");
    let bar = between(main, "<section class=\"domain-bar", "</section>");
    assert!(bar.contains("<select id=\"domain-select\">"), "{bar}");
    let rest = main.replace(bar, "");
    assert!(!rest.contains("<input") && !rest.contains("<select"), "no field for viewers");

    // The script draws the cards from the table's zones and reuses one typed confirmation.
    let js = client.get("/ui/assets/app.js").dispatch().into_string().unwrap();
    for needle in [
        "function tableZones(r) { return (r && r.zones) || []; }",
        "function dialApplies(r)",
        "dry_run: true",
        "plansView.typed = typedConfirm({",
        "unitsView.typed = typedConfirm({",
        "'/v1/units'",
        "global_writer",
    ] {
        assert!(js.contains(needle), "app.js lacks {needle}");
    }
}

#[test]
fn a_unit_move_from_the_ui_is_previewed_then_made_at_the_previewed_version_under_the_operator() {
    let (client, _dir) = client_with(&three_zones());
    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    let routing: Value = client.get("/v1/routing").dispatch().into_json().unwrap();
    let zones: Vec<(&str, &str, u64)> = routing["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| {
            (z["name"].as_str().unwrap(), z["lane"].as_str().unwrap(), z["units"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(zones, [("az-b", "blue", 50), ("az-a", "green", 50), ("az-c", "red", 0)]);
    let start = routing["version"].as_u64().unwrap();
    let moves = json!([{"units": "25-49", "zone": "az-c"}]);

    // The preview: the page's first call, with the session and the CSRF token.
    let preview =
        json!({"moves": moves, "expected_version": start, "reason": "ui test", "dry_run": true});
    let response = send(&client, "PUT", "/v1/units", Some(&csrf), preview.clone());
    assert_eq!(response.status(), Status::Ok);
    let dry: Value = response.into_json().unwrap();
    assert_eq!((dry["dry_run"].as_bool(), dry["moved_units"].as_u64()), (Some(true), Some(25)));
    assert!(dry["would_refuse"].is_null(), "{dry}");
    assert!(
        dry["unit_map"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["units"] == "25-49" && r["zone"] == "az-c")
    );
    assert_eq!(version(&client), start, "a dry run changes nothing");

    // Refusals the page shows with their detail: a bad range names the field; without the CSRF
    // token, or as a viewer, nothing is moved.
    let bad = json!({"moves": [{"units": "90-100", "zone": "az-c"}], "expected_version": start,
                     "reason": "ui test", "dry_run": true});
    let refused = error(send(&client, "PUT", "/v1/units", Some(&csrf), bad), Status::BadRequest);
    assert_eq!(refused["error"], "invalid_units");
    assert!(refused["detail"].as_str().unwrap().starts_with("moves[0].units"), "{refused}");
    let real = json!({"moves": moves, "expected_version": start, "reason": "ui test: give az-c a quarter"});
    let missing = error(send(&client, "PUT", "/v1/units", None, real.clone()), Status::Forbidden);
    assert_eq!(missing["error"], "csrf_failed");
    let (viewer, _dir) = client_with(&three_zones());
    let viewer_csrf = login(&viewer, "victor", VIEWER_TOKEN);
    let refused =
        error(send(&viewer, "PUT", "/v1/units", Some(&viewer_csrf), preview), Status::Forbidden);
    assert_eq!(refused["error"], "forbidden");
    assert_eq!(version(&client), start, "no refusal changed anything");

    // The confirmed move, at the previewed version, audited under alice.
    let response = send(&client, "PUT", "/v1/units", Some(&csrf), real.clone());
    assert_eq!(response.status(), Status::Ok);
    let body: Value = response.into_json().unwrap();
    assert_eq!(
        (body["moved_units"].as_u64(), body["version"].as_u64()),
        (Some(25), Some(start + 1))
    );
    assert_eq!(body["zones"][2]["units"], 25);
    assert_eq!(body["zones"][0]["units"], 25, "az-b gave units 25-49");
    let entry = latest_audit(&client);
    assert_eq!(
        (entry["by"].as_str(), entry["action"].as_str()),
        (Some("alice"), Some("units_move"))
    );
    assert_eq!(entry["reason"], "ui test: give az-c a quarter");
    // The same confirmation again is at a stale version: refused with the current one.
    let conflict = error(send(&client, "PUT", "/v1/units", Some(&csrf), real), Status::Conflict);
    assert_eq!(conflict["error"], "version_conflict");
    assert_eq!(conflict["current_version"], start + 1);
    // And the dial the page hides is refused by the API too.
    let refused = error(
        send(&client, "PUT", "/v1/dial", Some(&csrf), dial(40, start + 1, "ui test")),
        Status::Conflict,
    );
    assert_eq!(refused["error"], "needs_two_zones");
}

/// The overview and the drain form render the routing domains with the one asked for in
/// `?domain=` selected; a name the table does not have selects the default domain on the
/// overview (whose script says so) and nothing on the drain form, which says why.
#[test]
fn the_overview_and_the_drain_form_select_the_domain_of_the_url() {
    let (client, _dir) = client_with(&config());
    let csrf = login(&client, "alice", OPERATOR_TOKEN);
    // One domain: the overview lists it; the drain form has no domain field.
    let (_, html) = page(&client, "/ui");
    let select = between(&html, "<select id=\"domain-select\">", "</select>");
    assert_eq!(select, "<option value=\"default\" selected>default</option>");
    let (_, html) = page(&client, "/ui/drain");
    assert!(
        open_tag(&html, "f-domain-field").contains(" hidden>"),
        "{}",
        open_tag(&html, "f-domain-field")
    );
    assert!(html.contains(">Start the drain</button>"), "no domain named with one domain");

    let body = json!({"name": "search", "expected_version": version(&client), "reason": "a second domain"});
    assert_eq!(send(&client, "POST", "/v1/domains", Some(&csrf), body).status(), Status::Ok);
    let (_, html) = page(&client, "/ui?domain=search");
    let select = between(&html, "<select id=\"domain-select\">", "</select>");
    assert_eq!(
        select,
        "<option value=\"default\">default</option><option value=\"search\" selected>search</option>"
    );
    assert!(html.contains("class=\"domain-bar named\""), "a named domain's bar stands out");
    let (_, html) = page(&client, "/ui?domain=serch");
    let select = between(&html, "<select id=\"domain-select\">", "</select>");
    assert!(select.starts_with("<option value=\"default\" selected>"), "{select}");

    let (_, html) = page(&client, "/ui/drain?domain=search");
    assert!(!open_tag(&html, "f-domain-field").contains("hidden"));
    let select = between(&html, "<select id=\"f-domain\" name=\"domain\">", "</select>");
    assert_eq!(
        select,
        "<option value=\"default\">default</option><option value=\"search\" selected>search</option>"
    );
    assert!(html.contains(">Start the drain in domain search</button>"));
    // Another domain is never picked for one the table does not have.
    let (_, html) = page(&client, "/ui/drain?domain=%3Cb%3Eserch");
    let select = between(&html, "<select id=\"f-domain\" name=\"domain\">", "</select>");
    assert!(
        select.starts_with("<option value=\"\" selected>choose a domain…</option>"),
        "{select}"
    );
    assert!(!select.contains("\" selected>default"), "{select}");
    let error = between(&html, "id=\"e-domain\" role=\"alert\">", "</p>");
    assert_eq!(
        error,
        "There is no routing domain “&lt;b&gt;serch” in this table (domains: default, search): choose one."
    );
    assert!(html.contains(">Start the drain</button>"), "no domain named while none is chosen");
}
