//! The operator web UI in real headless Chromium, driven over WebDriver (fantoccini and Debian's
//! chromedriver) against the real tidegate binary: log in, move the dial with confirmation, lose a
//! version race, start a drain and pause it, look at it as a viewer, log out; start an evacuation
//! by hand from the overview when no plan covers the zone; run a stored plan from the overview's
//! "Evacuate <zone>" through the dry-run preview and the typed confirmation, and follow its
//! timeline to the last step; after an evacuation, "Restore <zone>" instead of evacuating the
//! other zone, and "Evacuation" named as such; a dial move the capacity check refuses, forced
//! only with a typed `force` and a reason; capacity holds of a drain and a plan run shown as
//! held, the run's current share, triggers and cooldowns, and every table usable at 390 px; with
//! three zones, three cards, the dial replaced by a sentence, and unit moves through the Move
//! units form's dry-run preview and typed confirmation (refusals shown with their detail); and, as a viewer, watch lane consumers
//! registered through the API appear on the MQ lanes page with their halves; and, with two
//! replicas on a Kafka command log, the overview's replicas panel and, once the page's own replica
//! is killed, the banner linking the other replica's console.
//!
//! Screenshots go to `ci-artifacts/screenshots/` (git-ignored; CI keeps the folder). A missing
//! chromium or chromedriver fails the test: `scripts/test.sh` installs both.

mod common;

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(15);

/// chromedriver on a free loopback port, in its own process group, which is killed on drop:
/// a test that fails before closing its session must not leave Chromium running.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: the browser tests need Debian's `{package}` \
                 (`apt-get install chromium chromium-driver`, which scripts/test.sh does)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        let mut driver = Driver { child, url };
        let ready = wait_until(Duration::from_secs(20), || {
            agent().get(&format!("{}/status", driver.url)).call().is_ok_and(|r| r.status() == 200)
        });
        if !ready {
            let exit = driver.child.try_wait();
            panic!("chromedriver did not answer on {} within 20s (exit: {exit:?})", driver.url);
        }
        driver
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("ci-artifacts/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn browser(driver: &Driver, profile: &Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--disable-crash-reporter", "--disable-breakpad",
                "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("chromedriver could not start chromium: {e}"))
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

/// Waits until `script` (an expression) is truthy; on timeout saves a screenshot and fails with
/// what the page says.
async fn wait_for(c: &Client, what: &str, script: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = js(c, &format!("return !!({script});")).await;
        if value == json!(true) {
            return;
        }
        if Instant::now() > deadline {
            shot(c, &format!("failed-{}", what.replace(' ', "-"))).await;
            let text = js(c, "return document.body ? document.body.innerText : ''").await;
            let url = c.current_url().await.map(|u| u.to_string()).unwrap_or_default();
            panic!("timed out waiting for {what} ({script}) on {url}; the page says:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}")).text().await.unwrap()
}

/// Whether a WebDriver error says the element was replaced (the UI re-renders a panel when its
/// next poll arrives, so an element found a moment ago can be gone by the time it is used).
fn is_stale(e: &fantoccini::error::CmdError) -> bool {
    matches!(e, fantoccini::error::CmdError::Standard(w)
        if w.error == fantoccini::error::ErrorStatus::StaleElementReference)
}

/// Finds `css` and runs `act` on it; a stale element is found again (at most 50 times, 40 ms
/// apart), any other error fails the test.
async fn on_element<F, Fut>(c: &Client, css: &str, act: F)
where
    F: Fn(fantoccini::elements::Element) -> Fut,
    Fut: std::future::Future<Output = Result<(), fantoccini::error::CmdError>>,
{
    for attempt in 0.. {
        let element = c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
        match act(element).await {
            Ok(()) => return,
            Err(e) if is_stale(&e) && attempt < 50 => {
                tokio::time::sleep(Duration::from_millis(40)).await
            }
            Err(e) => panic!("{css}: {e}"),
        }
    }
}

async fn type_into(c: &Client, css: &str, value: &str) {
    on_element(c, css, |field| async move {
        field.clear().await?;
        field.send_keys(value).await
    })
    .await;
}

async fn click(c: &Client, css: &str) {
    on_element(c, css, |element| async move { element.click().await }).await;
}

async fn log_in(c: &Client, base: &str, name: &str, token: &str) {
    c.goto(&format!("{base}/ui")).await.unwrap();
    wait_for(c, "the login form", "document.getElementById('login-form')").await;
    type_into(c, "#login-name", name).await;
    type_into(c, "#login-token", token).await;
    click(c, "#login-submit").await;
    wait_for(
        c,
        "the overview",
        "location.pathname === '/ui' && document.getElementById('routing-version')",
    )
    .await;
    wait_for(c, "the first poll", "document.getElementById('routing-version').textContent !== '–'")
        .await;
}

/// No horizontal scrolling: everything fits the window's width.
async fn assert_fits(c: &Client, width: &str) {
    let overflow = js(c, "return document.documentElement.scrollWidth - window.innerWidth").await;
    assert!(overflow.as_i64().unwrap() <= 0, "at {width} the page is {overflow} px too wide");
}

fn routing(base: &str) -> Value {
    get_json(&format!("{base}/v1/routing")).1
}

fn latest_audit(base: &str) -> Value {
    get_json(&format!("{base}/v1/audit?limit=1")).1["entries"][0].clone()
}

/// Who made each change with `action`, newest first.
fn audit_by(base: &str, action: &str) -> Vec<String> {
    let entries = get_json(&format!("{base}/v1/audit?limit=100")).1["entries"].clone();
    let entries = entries.as_array().unwrap().clone();
    entries
        .iter()
        .filter(|e| e["action"] == action)
        .map(|e| e["by"].as_str().unwrap().to_owned())
        .collect()
}

/// Services in both zones report outcomes, so the zones have error rates and the charts a line.
fn report_outcomes(base: &str, round: u64) {
    let body = json!([
        {"zone": "az-b", "color": "blue", "ok": 900 + round * 7, "error": 4 + round % 3},
        {"zone": "az-a", "color": "green", "ok": 1100 + round * 5, "error": 2 + round % 2},
    ]);
    let status = agent()
        .post(&format!("{base}/v1/outcomes"))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .send_json(body)
        .unwrap()
        .status();
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_moves_the_dial_runs_a_drain_and_logs_out_in_chromium() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("[drain]\ninterval = \"30s\"\n")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    for round in 0..3 {
        report_outcomes(&base, round);
    }
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 900).await.unwrap();

    // The console sends a signed-out browser to the login.
    c.goto(&format!("{base}/ui")).await.unwrap();
    wait_for(&c, "the login redirect", "location.pathname === '/ui/login'").await;
    shot(&c, "01-login").await;
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    assert_eq!(text(&c, "#routing-version").await, "1");
    assert_eq!(text(&c, "#who-name").await, "alice");
    wait_for(&c, "both zones", "document.querySelectorAll('#zones .zone').length === 2").await;

    // Move the dial to 30 % blue: review, read the confirmation, give a reason, confirm.
    report_outcomes(&base, 3);
    type_into(&c, "#dial-number", "30").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    let summary = text(&c, "#dial-summary").await;
    assert!(summary.starts_with("20 % of users (about "), "{summary}");
    assert!(summary.contains("will move from blue (az-b) to green (az-a)"), "{summary}");
    // Confirming without a reason is stopped in the page, next to the button.
    click(&c, "#dial-apply").await;
    wait_for(&c, "the reason message", "!document.getElementById('dial-confirm-error').hidden")
        .await;
    assert!(text(&c, "#dial-confirm-error").await.contains("Give a reason"));
    assert_eq!(routing(&base)["version"], 1, "nothing was sent");
    type_into(&c, "#dial-reason", "browser test: move 20% to green").await;
    shot(&c, "02-dial-confirm").await;
    click(&c, "#dial-apply").await;
    wait_for(&c, "the dial's success message", "!document.getElementById('dial-ok').hidden").await;
    let table = routing(&base);
    assert_eq!((table["version"].as_u64(), table["blue_percent"].as_f64()), (Some(2), Some(30.0)));
    let entry = latest_audit(&base);
    assert_eq!((entry["by"].as_str(), entry["action"].as_str()), (Some("alice"), Some("dial")));
    assert_eq!(entry["reason"], "browser test: move 20% to green");
    wait_for(
        &c,
        "version 2 on the page",
        "document.getElementById('routing-version').textContent === '2'",
    )
    .await;

    // Someone else moves the dial while alice is confirming: her change is refused, explained,
    // and the page shows the other value instead of overwriting it.
    type_into(&c, "#dial-number", "40").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    type_into(&c, "#dial-reason", "back towards 50/50").await;
    let (status, _) = put_json(
        &format!("{base}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 35, "expected_version": 2, "reason": "someone else"}),
    );
    assert_eq!(status, 200);
    click(&c, "#dial-apply").await;
    wait_for(&c, "the conflict message", "!document.getElementById('dial-error').hidden").await;
    let conflict = text(&c, "#dial-error").await;
    assert!(conflict.contains("someone else changed the routing"), "{conflict}");
    assert!(conflict.contains("it is now version 3"), "{conflict}");
    wait_for(&c, "the refreshed value", "document.getElementById('dial-number').value === '35'")
        .await;
    assert_eq!(routing(&base)["blue_percent"], 35.0, "the other change stands");
    assert_eq!(routing(&base)["version"], 3);
    shot(&c, "03-dial-conflict").await;

    // The drain form: defaults filled in, validation messages next to the fields.
    c.set_window_size(1280, 1400).await.unwrap();
    c.goto(&format!("{base}/ui/drain")).await.unwrap();
    wait_for(&c, "the drain form", "document.getElementById('drain-form')").await;
    assert_eq!(
        c.find(Locator::Css("#f-interval")).await.unwrap().prop("value").await.unwrap().as_deref(),
        Some("30s")
    );
    type_into(&c, "#f-target", "2.5").await;
    type_into(&c, "#f-interval", "soon").await;
    click(&c, "#drain-submit").await;
    wait_for(&c, "the field messages", "!document.getElementById('e-target').hidden").await;
    assert!(text(&c, "#e-target").await.contains("whole number of units"));
    assert!(text(&c, "#e-interval").await.contains("with a unit"));
    assert!(text(&c, "#e-reason").await.contains("Give a reason"));
    shot(&c, "04-drain-form-validation").await;
    c.set_window_size(1280, 900).await.unwrap();
    assert_eq!(get_json(&format!("{base}/v1/drains")).1["drains"], json!([]), "nothing was sent");

    // Start it for real, then pause it from the overview.
    type_into(&c, "#f-target", "0").await;
    type_into(&c, "#f-interval", "30s").await;
    type_into(&c, "#f-reason", "browser test: az-b maintenance").await;
    click(&c, "#drain-submit").await;
    wait_for(
        &c,
        "the running drain",
        "(document.getElementById('drain-state') || {}).textContent === '↘ Running'",
    )
    .await;
    assert_eq!(get_json(&format!("{base}/v1/drains/current")).1["state"], "running");
    // The runner may already have taken the first step (as `drain:1`): look for the start.
    assert_eq!(audit_by(&base, "drain_start"), vec!["alice"]);
    report_outcomes(&base, 4);
    type_into(&c, "#drain-reason", "browser test: checking az-a dashboards").await;
    click(&c, "#drain-pause").await;
    wait_for(
        &c,
        "the paused drain",
        "document.getElementById('drain-state').textContent.includes('Paused')",
    )
    .await;
    let drain = get_json(&format!("{base}/v1/drains/current")).1;
    assert_eq!(drain["state"], "paused");
    assert_eq!(audit_by(&base, "drain_pause"), vec!["alice"]);
    let enabled = js(
        &c,
        "return ['drain-pause', 'drain-resume'].map((id) => !document.getElementById(id).disabled)",
    )
    .await;
    assert_eq!(enabled, json!([false, true]), "a paused drain offers Resume, not Pause");
    // Let the zone charts gather a few points before the pictures.
    report_outcomes(&base, 5);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    report_outcomes(&base, 6);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Each zone has a chart, and it has a line by now (the history outlives page changes).
    wait_for(
        &c,
        "two chart lines",
        "document.querySelectorAll('#zones svg.chart polyline.line').length === 2",
    )
    .await;
    // Tall windows, so each picture holds the whole page.
    c.set_window_size(1280, 1300).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_fits(&c, "1280 px").await;
    shot(&c, "05-overview-1280").await;
    c.set_window_size(820, 1900).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_fits(&c, "820 px").await;
    shot(&c, "06-overview-820").await;
    c.set_window_size(1280, 900).await.unwrap();

    // The audit page lists alice's actions.
    click(&c, "#audit-link").await;
    wait_for(&c, "the audit table", "document.getElementById('audit-table')").await;
    let audit = text(&c, "#audit-table").await;
    for expected in
        ["drain_pause", "drain_start", "browser test: move 20% to green", "someone else"]
    {
        assert!(audit.contains(expected), "the audit page lacks {expected}:\n{audit}");
    }
    shot(&c, "07-audit").await;

    // Log out: back to the login, and the console is closed again.
    click(&c, "#logout").await;
    wait_for(&c, "the logged-out login page", "document.getElementById('login-notice')").await;
    c.goto(&format!("{base}/ui")).await.unwrap();
    wait_for(&c, "the login redirect", "location.pathname === '/ui/login'").await;

    // A viewer sees the same numbers and no control at all.
    log_in(&c, &base, "victor", VIEWER_TOKEN).await;
    let controls = js(&c, "return ['dial-form', 'dial-apply', 'drain-actions', 'drain-pause'].filter((id) => document.getElementById(id))").await;
    assert_eq!(controls, json!([]), "the viewer's page has controls");
    wait_for(
        &c,
        "the paused drain",
        "(document.getElementById('drain-state') || {}).textContent === '❚❚ Paused'",
    )
    .await;
    shot(&c, "08-viewer").await;
    click(&c, "#logout").await;
    wait_for(&c, "the logged-out login page", "document.getElementById('login-notice')").await;

    c.close().await.unwrap();
    drop(driver);
    assert_eq!(audit_by(&base, "dial"), vec!["alice", "alice"], "her dial move and the bearer one");
    eprintln!("browser test: {:.1} s including chromium start-up", started.elapsed().as_secs_f64());
    drop(server);
}

/// A lane call as a consumer makes it (membership is a write: a token, and for heartbeats the
/// member's secret); the answer's body.
fn lane_call(base: &str, path: &str, secret: &str, body: Value) -> Value {
    let mut response = agent()
        .post(&format!("{base}/v1/lanes/billing/{path}"))
        .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
        .header("X-Tidegate-Member-Secret", secret)
        .send_json(body)
        .unwrap();
    assert!(response.status().is_success(), "{path}: {}", response.status());
    response.body_mut().read_json().unwrap()
}

/// Registers a member named `name`; the answer carries its ID (`name-<random>`) and secret.
fn register_member(base: &str, name: &str, zone: &str) -> Value {
    lane_call(
        base,
        "members",
        "",
        json!({"name": name, "zone": zone, "topic": "orders", "partitions": 8}),
    )
}

fn heartbeat_member(base: &str, member: &Value, holding: Value) -> Value {
    let id = member["member_id"].as_str().unwrap();
    let secret = member["member_secret"].as_str().unwrap();
    lane_call(base, &format!("members/{id}/heartbeat"), secret, json!({ "holding": holding }))
}

/// The page shows member IDs (`b1-<random>`); the assertions below use the names.
fn named(shown: Value, members: &[&Value]) -> Value {
    let mut text = shown.to_string();
    for m in members {
        let id = m["member_id"].as_str().unwrap();
        text = text.replace(id, id.split('-').next().unwrap());
    }
    serde_json::from_str(&text).unwrap()
}

/// What the lanes page shows for one group, read from its DOM.
const READ_GROUP: &str = r#"
    const g = document.querySelector('article[data-group="billing"]');
    const text = (root, css) => root.querySelector(css).textContent;
    const half = (color) => {
      const h = g.querySelector('.half[data-color="' + color + '"]');
      return {
        zone: h.dataset.zone,
        partitions: text(h, '.half-partitions'),
        state: text(h, '.badge'),
        lag: text(h, '.half-lag'),
        members: [...h.querySelectorAll('tr[data-member]')].map((r) =>
          [r.dataset.member, text(r, '.member-assigned'), text(r, '.member-pending')]),
      };
    };
    const rows = [...g.querySelectorAll('tr[data-partition]')];
    return {
      topic: text(g, '.lane-topic'),
      partitions: text(g, '.lane-partitions'),
      generation: text(g, '.lane-generation'),
      lag: text(g, '.lane-lag'),
      blue: half('blue'),
      green: half('green'),
      read_by: rows.map((r) => text(r, '.read-by')),
      partition_lag: [...new Set(rows.map((r) => text(r, '.partition-lag')))],
    };
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_watches_lane_members_and_halves_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    // The members here never heartbeat on their own: a long session timeout keeps them.
    let lanes = "[lanes]\nsession_timeout = \"5m\"\nheartbeat_interval = \"1s\"\n";
    std::fs::write(&config_file, config_toml(lanes)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 900).await.unwrap();

    // The page is read-only, so a viewer gets all of it. With no consumers it says so calmly.
    log_in(&c, &base, "victor", VIEWER_TOKEN).await;
    click(&c, "#nav-lanes").await;
    wait_for(&c, "the empty state", "document.getElementById('lanes-empty')").await;
    assert!(text(&c, "#lanes-empty").await.contains("No lane groups"));
    js(&c, "window.notReloaded = true; return null").await;
    shot(&c, "09-lanes-empty").await;

    // A consumer in each zone registers, as LaneConsumer does on start; b1 was alone first, so
    // it hands the green half to a1 by reporting that it released it.
    let b1 = register_member(&base, "b1", "az-b");
    assert_eq!(b1["assignment"], json!([0, 1, 2, 3, 4, 5, 6, 7]));
    let a1 = register_member(&base, "a1", "az-a");
    assert_eq!(a1["pending"], json!([4, 5, 6, 7]));
    heartbeat_member(&base, &b1, json!([0, 1, 2, 3, 4, 5, 6, 7]));
    heartbeat_member(&base, &b1, json!([0, 1, 2, 3]));
    assert_eq!(heartbeat_member(&base, &a1, json!([]))["assignment"], json!([4, 5, 6, 7]));
    let generation = get_json(&format!("{base}/v1/lanes/billing")).1["generation"].clone();

    // The page picks it up on its own (polling), without a reload.
    wait_for(
        &c,
        "the group at the API's generation",
        &format!(
            "(document.querySelector('article[data-group=\"billing\"] .lane-generation') || {{}}).textContent === '{generation}'"
        ),
    )
    .await;
    let shown = named(js(&c, READ_GROUP).await, &[&b1, &a1]);
    assert_eq!(shown["topic"], "orders");
    assert_eq!(shown["partitions"], "8");
    assert_eq!(
        shown["blue"],
        json!({"zone": "az-b", "partitions": "0–3", "state": "✓ Serving", "lag": "unknown",
               "members": [["b1", "0–3", "none"]]})
    );
    assert_eq!(
        shown["green"],
        json!({"zone": "az-a", "partitions": "4–7", "state": "✓ Serving", "lag": "unknown",
               "members": [["a1", "4–7", "none"]]})
    );
    assert_eq!(
        shown["read_by"],
        json!(["b1", "b1", "b1", "b1", "a1", "a1", "a1", "a1"]),
        "the assignment, partition by partition"
    );
    // No Kafka is configured, so lag is unknown everywhere and says why; never a 0.
    assert_eq!(shown["partition_lag"], json!(["unknown"]));
    let lag = shown["lag"].as_str().unwrap();
    assert!(lag.contains("Lag unknown") && lag.contains("lanes.kafka_bootstrap"), "{lag}");

    // A second consumer in az-b: the blue half is split, and b2 waits for b1's release.
    let b2 = register_member(&base, "b2", "az-b");
    wait_for(
        &c,
        "b2 on the page",
        &format!(
            "document.querySelector('article[data-group=\"billing\"] tr[data-member=\"{}\"]')",
            b2["member_id"].as_str().unwrap()
        ),
    )
    .await;
    let shown = named(js(&c, READ_GROUP).await, &[&b1, &a1, &b2]);
    assert_eq!(shown["blue"]["members"], json!([["b1", "0–1", "none"], ["b2", "none", "2–3"]]));
    assert_eq!(shown["read_by"][2], "nobody (b1 still releasing it)");
    assert_eq!(js(&c, "return window.notReloaded === true").await, json!(true));

    c.set_window_size(1280, 1500).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_fits(&c, "1280 px").await;
    shot(&c, "10-lanes-1280").await;
    c.set_window_size(820, 2000).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_fits(&c, "820 px").await;
    let stacked = js(&c, "const [b, g] = document.querySelectorAll('.half'); return g.getBoundingClientRect().top >= b.getBoundingClientRect().bottom").await;
    assert_eq!(stacked, json!(true), "at 820 px the halves stack");
    shot(&c, "11-lanes-820").await;
    c.set_window_size(1280, 900).await.unwrap();

    // tidegate goes away: the page says it is no longer updating instead of freezing silently.
    drop(server);
    wait_for(&c, "the stale notice", "document.getElementById('live').classList.contains('stale')")
        .await;
    let live = text(&c, "#live").await;
    assert!(live.contains("Not updating") && live.contains("may be old"), "{live}");
    shot(&c, "12-lanes-tidegate-gone").await;
    c.close().await.unwrap();
}

/// Sends a signal to the server process (SIGSTOP freezes it as a hung coordinator would be).
fn signal(server: &Server, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

/// What the overview shows during an incident: history from before the page was opened, who made
/// the last change, a paused drain's zone, no "null"; a double Enter sends one change; a stopped
/// coordinator stops looking live; and the audit log on a phone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_tells_the_truth_in_an_incident_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("[drain]\ninterval = \"1h\"\n")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    // The incident starts before anyone opens the console: tidegate samples it meanwhile.
    for round in 0..3 {
        report_outcomes(&base, round);
        tokio::time::sleep(Duration::from_millis(2200)).await;
    }
    let (status, _) = put_json(
        &format!("{base}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 45, "expected_version": 1, "reason": "shift 5% off az-b"}),
    );
    assert_eq!(status, 200);

    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1300).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    // A fresh browser profile has no history of its own: the lines come from tidegate, at once.
    let lines =
        js(&c, "return document.querySelectorAll('#zones svg.chart polyline.line').length").await;
    assert_eq!(lines, json!(2), "both charts have a line on the first poll");
    let points = js(&c, "return document.querySelector('#zones svg.chart polyline.line').getAttribute('points').split(' ').length").await;
    assert!(points.as_u64().unwrap() >= 3, "the line spans the samples taken before: {points}");
    // Who made the last change, and why.
    wait_for(&c, "the last change", "document.getElementById('last-change-by')").await;
    assert_eq!(text(&c, "#last-change-by").await, "alice");
    let last = text(&c, "#last-change").await;
    assert!(last.contains("shift 5% off az-b") && last.contains("dial"), "{last}");

    // Enter twice in the confirmation sends one change, and the page says Done without a conflict.
    type_into(&c, "#dial-number", "40").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    type_into(&c, "#dial-reason", "double enter").await;
    c.find(Locator::Css("#dial-reason"))
        .await
        .unwrap()
        .send_keys("\u{E007}\u{E007}")
        .await
        .unwrap();
    wait_for(&c, "the dial's success message", "!document.getElementById('dial-ok').hidden").await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(routing(&base)["version"], 3, "one change, not two");
    assert_eq!(audit_by(&base, "dial"), vec!["alice", "alice"]);
    let error_shown = js(&c, "return !document.getElementById('dial-error').hidden").await;
    assert_eq!(error_shown, json!(false), "no conflict message next to Done");

    // A paused drain: the zone says so, and nothing reads "null" or "undefined".
    let (status, _) = post_json(
        &format!("{base}/v1/drains"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "1h",
               "reason": "az-b failing"}),
    );
    assert_eq!(status, 201);
    let (status, _) = post_json(
        &format!("{base}/v1/drains/1/pause"),
        OPERATOR_TOKEN,
        json!({"reason": "hold while we look"}),
    );
    assert_eq!(status, 200);
    wait_for(
        &c,
        "the paused zone",
        "(document.getElementById('zone-state-az-b') || {}).textContent === '❚❚ Drain paused'",
    )
    .await;
    let panel = text(&c, "#drain-card").await;
    assert!(!panel.contains("null") && !panel.contains("undefined"), "{panel}");
    let page = js(&c, "return document.body.innerText").await;
    let page = page.as_str().unwrap();
    assert!(
        !page.contains("null") && !page.contains("undefined") && !page.contains("Draining"),
        "{page}"
    );
    shot(&c, "10-incident-overview").await;

    // A stopped coordinator: within a few seconds the page stops saying "Live".
    wait_for(&c, "live", "document.getElementById('live').textContent.startsWith('Live')").await;
    signal(&server, "STOP");
    let stopped = Instant::now();
    wait_for(&c, "the stale banner", "document.getElementById('live').classList.contains('stale')")
        .await;
    let banner = text(&c, "#live").await;
    eprintln!("stale after {:.1} s: {banner}", stopped.elapsed().as_secs_f64());
    assert!(banner.contains("did not answer within 4 s"), "{banner}");
    shot(&c, "11-coordinator-stopped").await;
    signal(&server, "CONT");
    wait_for(&c, "live again", "document.getElementById('live').textContent.startsWith('Live')")
        .await;

    // The audit log on a phone: when, who, action and reason are on screen, and nothing scrolls
    // sideways.
    c.set_window_size(390, 844).await.unwrap();
    c.goto(&format!("{base}/ui/audit")).await.unwrap();
    wait_for(&c, "the audit table", "document.getElementById('audit-table')").await;
    let width = js(&c, "return window.innerWidth").await;
    assert!(width.as_i64().unwrap() <= 520, "a phone-sized viewport: {width}");
    assert_fits(&c, "390 px").await;
    let visible = js(
        &c,
        "const row = document.querySelector('#audit-table tbody tr');
         return ['col-when', 'col-who', 'col-action', 'col-reason'].filter((c) => {
           const r = row.querySelector('.' + c).getBoundingClientRect();
           return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth;
         })",
    )
    .await;
    assert_eq!(visible, json!(["col-when", "col-who", "col-action", "col-reason"]));
    shot(&c, "12-audit-phone").await;

    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuate_on_the_overview_starts_an_evacuation_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    let toml = "[drain]\ninterval = \"30s\"\n[drain.evacuate]\ninterval = \"20s\"\n[zones.az-a]\ncapacity_rps = 100000\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    report_outcomes(&base, 0);
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1400).await.unwrap();

    // A viewer gets no Evacuate action.
    log_in(&c, &base, "victor", VIEWER_TOKEN).await;
    wait_for(&c, "both zones", "document.querySelectorAll('#zones .zone').length === 2").await;
    assert_eq!(js(&c, "return !!document.getElementById('evacuate-az-b')").await, json!(false));
    assert_eq!(js(&c, "return !!document.getElementById('no-plan-az-b')").await, json!(false));
    click(&c, "#logout").await;
    wait_for(&c, "the logged-out login page", "document.getElementById('login-notice')").await;

    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    // No plan evacuates az-b: the card says so, links to how to write one, and offers the
    // evacuation drain by hand.
    wait_for(&c, "the no-plan notice", "document.getElementById('no-plan-az-b')").await;
    assert!(text(&c, "#no-plan-az-b").await.starts_with("No plan for az-b: write one"));
    assert_eq!(text(&c, "#evacuate-drain-az-b").await, "evacuate az-b by hand (a drain)…");
    // az-a has a capacity: its card shows the load against what it may carry.
    wait_for(&c, "az-a's capacity line", "document.querySelector('#zone-az-a .capacity')").await;
    assert!(text(&c, "#zone-az-a .capacity").await.contains("of 90000 rps allowed"));
    shot(&c, "13-evacuate-action").await;
    click(&c, "#evacuate-drain-az-b").await;
    wait_for(&c, "the evacuation form", "document.getElementById('drain-form')").await;
    assert_eq!(text(&c, "#drain-form-title").await, "Evacuate a zone");
    let value = |css: &'static str| {
        let c = c.clone();
        async move { c.find(Locator::Css(css)).await.unwrap().prop("value").await.unwrap() }
    };
    assert_eq!(value("#f-mode").await.as_deref(), Some("evacuate"));
    assert_eq!(value("#f-zone").await.as_deref(), Some("az-b"));
    assert_eq!(value("#f-interval").await.as_deref(), Some("20s"), "[drain.evacuate] defaults");
    type_into(&c, "#f-reason", "browser test: az-b is failing").await;
    shot(&c, "14-evacuate-form").await;
    click(&c, "#drain-submit").await;
    wait_for(
        &c,
        "the overview with the drain",
        "location.pathname === '/ui' && document.getElementById('drain-state')",
    )
    .await;
    let current = get_json(&format!("{base}/v1/drains/current")).1;
    assert_eq!(
        (current["mode"].as_str(), current["zone"].as_str()),
        (Some("evacuate"), Some("az-b"))
    );
    assert_eq!(current["interval_ms"], 20_000);
    assert_eq!(audit_by(&base, "drain_start"), vec!["alice"]);
    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

/// Release channels show on the overview, to a viewer too (issue 24): each with its services,
/// domain, zone, share, what it selects, fallback, expiry and state; when the dial empties its
/// zone the row says it is suspended and what happens to its users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_channels_show_on_the_overview_with_their_state_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1600).await.unwrap();
    log_in(&c, &base, "victor", VIEWER_TOKEN).await;
    wait_for(&c, "the no-channel sentence", "document.getElementById('no-channels')").await;
    let start = routing(&base);
    let green = start["colors"]["green"].as_str().unwrap().to_owned();
    let (status, body) = put_json(
        &format!("{base}/v1/channels/orders-v2"),
        OPERATOR_TOKEN,
        json!({"services": ["orders", "carts"], "zone": "green", "percent": 10, "users": ["alice"],
               "fallback": "reject", "expected_version": start["version"], "reason": "browser test: orders 2.4"}),
    );
    assert_eq!(status, 200, "{body}");
    let row = "#channels-table tr[data-channel=\"orders-v2\"]";
    wait_for(&c, "the channel's row", &format!("document.querySelector('{row}')")).await;
    let cells = js(
        &c,
        &format!("return [...document.querySelectorAll('{row} td')].map((td) => td.textContent)"),
    )
    .await;
    let cells: Vec<String> =
        cells.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
    assert_eq!(
        [&cells[..5], &cells[6..]].concat(),
        [
            "orders-v2",
            "carts, orders",
            "default",
            &format!("{green} (green)"),
            "10 %",
            "reject",
            "never",
            "✓ Active"
        ]
    );
    assert!(
        cells[5].starts_with("units ") && cells[5].ends_with(" + 1 named user"),
        "{}",
        cells[5]
    );
    shots_at_both_widths(&c, "28-release-channels", 1600).await;
    // The dial empties green: the channel is suspended, and its fallback refuses its users.
    let (status, body) = put_json(
        &format!("{base}/v1/dial"),
        OPERATOR_TOKEN,
        json!({"blue_percent": 100, "expected_version": routing(&base)["version"], "reason": "browser test: all blue"}),
    );
    assert_eq!(status, 200, "{body}");
    wait_for(
        &c,
        "the suspended channel",
        &format!(
            "(document.querySelector('{row} td.channel-state') || {{textContent: ''}}).textContent === '❚❚ Suspended: its users are refused'"
        ),
    )
    .await;
    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

/// Release channels are put, edited and deleted from the overview (issue 24). Put: a dry-run
/// preview, the channel's name typed to confirm, the put at the previewed version; a bad service
/// name is refused with the API's detail and the field marked. Edit fills the form, and widening
/// the share keeps the users already in. Delete takes a reason and the typed name. A viewer gets
/// none of the controls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_channels_are_put_edited_and_deleted_from_the_overview_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let green = routing(&base)["colors"]["green"].as_str().unwrap().to_owned();
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 2400).await.unwrap();
    log_in(&c, &base, "victor", VIEWER_TOKEN).await;
    wait_for(&c, "the no-channel sentence", "document.getElementById('no-channels')").await;
    assert_eq!(js(&c, "return !!document.getElementById('channel-form')").await, json!(false));
    click(&c, "#logout").await;
    wait_for(&c, "the logged-out login page", "document.getElementById('login-notice')").await;

    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    wait_for(
        &c,
        "the zones to choose from",
        "document.querySelectorAll('#ch-zone option').length === 2",
    )
    .await;
    type_into(&c, "#ch-name", "orders-v2").await;
    type_into(&c, "#ch-services", "orders, Carts!").await;
    js(
        &c,
        &format!(
            "const s = document.getElementById('ch-zone'); s.value = {green:?}; s.dispatchEvent(new Event('change')); return s.value"
        ),
    )
    .await;
    type_into(&c, "#ch-percent", "10").await;
    type_into(&c, "#ch-reason", "browser test: orders 2.4 canary").await;
    click(&c, "#ch-review").await;
    wait_for(&c, "the refusal", "!document.getElementById('ch-error').hidden").await;
    let refusal = text(&c, "#ch-error").await;
    assert!(refusal.contains("invalid_channel: services:"), "{refusal}");
    assert_eq!(
        js(&c, "return document.getElementById('ch-services').getAttribute('aria-invalid')").await,
        json!("true")
    );
    assert_eq!(routing(&base)["channels"], json!([]), "a refused preview changes nothing");

    type_into(&c, "#ch-services", "orders, carts").await;
    click(&c, "#ch-review").await;
    wait_for(&c, "the preview", "!document.getElementById('ch-confirm').hidden && document.getElementById('ch-preview-summary')")
        .await;
    let summary = text(&c, "#ch-preview-summary").await;
    assert!(
        summary.contains("10 % of users (units ")
            && summary.contains(&format!("to {green} (green)")),
        "{summary}"
    );
    assert_eq!(text(&c, "#ch-preview-fits").await, "✓ tidegate would put this channel now.");
    assert_eq!(routing(&base)["channels"], json!([]), "a preview changes nothing");
    assert_eq!(
        js(&c, "return document.getElementById('ch-confirm-go').disabled").await,
        json!(true)
    );
    type_into(&c, "#ch-confirm-name", "orders-v2").await;
    click(&c, "#ch-confirm-go").await;
    let row = "#channels-table tr[data-channel=\"orders-v2\"]";
    wait_for(&c, "the channel's row", &format!("document.querySelector('{row}')")).await;
    assert!(text(&c, "#ch-ok").await.starts_with("Done: channel orders-v2 put"));
    let (status, put) = get_json(&format!("{base}/v1/channels/orders-v2"));
    assert_eq!(status, 200, "{put}");
    assert_eq!(
        (put["share_percent"].as_f64(), put["zone"].as_str(), put["services"].clone()),
        (Some(10.0), Some(green.as_str()), json!(["carts", "orders"]))
    );
    let first = tidegate::core::UnitSet::parse(put["units"].as_str().unwrap(), 100).unwrap();
    assert_eq!(audit_by(&base, "channel_put"), vec!["alice"]);
    shot(&c, "29-channel-put").await;

    // Edit: the form holds the channel; widen it to 30 %.
    click(&c, &format!("{row} button[data-edit-channel]")).await;
    wait_for(
        &c,
        "the edit form",
        "document.getElementById('channel-form-title').textContent === 'Edit orders-v2'",
    )
    .await;
    assert_eq!(value_of(&c, "#ch-percent").await, json!("10"));
    assert_eq!(value_of(&c, "#ch-services").await, json!("carts, orders"));
    assert_eq!(value_of(&c, "#ch-zone").await, json!(green));
    assert_eq!(js(&c, "return document.getElementById('ch-name').readOnly").await, json!(true));
    type_into(&c, "#ch-percent", "30").await;
    type_into(&c, "#ch-reason", "browser test: orders 2.4 to 30 %").await;
    // Loss-less, with a subscriber that does not acknowledge: the card says what is frozen until
    // it leaves (it stops counting a few seconds after), then the change switches.
    let stuck = stuck_router(&base).await;
    click(&c, "#ch-freeze").await;
    click(&c, "#ch-review").await;
    wait_for(&c, "the edit preview", "!document.getElementById('ch-confirm').hidden && document.getElementById('ch-preview-was')")
        .await;
    assert!(text(&c, "#ch-preview-was").await.starts_with("It replaces: 10 % of users (units "));
    let freeze = text(&c, "#ch-preview-freeze").await;
    assert!(
        freeze.starts_with("Loss-less: the writes of carts, orders by users of units "),
        "{freeze}"
    );
    type_into(&c, "#ch-confirm-name", "orders-v2").await;
    click(&c, "#ch-confirm-go").await;
    wait_for(&c, "the freeze notice", "!document.getElementById('channel-change').hidden").await;
    let notice = text(&c, "#channel-change").await;
    assert!(
        notice.starts_with(
            "❄ Changing orders-v2 loss-lessly: writes of carts, orders are frozen for units "
        ),
        "{notice}"
    );
    assert!(text(&c, "#ch-ok").await.starts_with("Freezing: channel orders-v2"));
    shot(&c, "30-channel-freezing").await;
    tokio::task::spawn_blocking(move || drop(stuck)).await.unwrap();
    wait_for(
        &c,
        "the wider share",
        &format!(
            "(document.querySelector('{row} td.num') || {{textContent: ''}}).textContent === '30 %'"
        ),
    )
    .await;
    wait_for(&c, "the notice gone", "document.getElementById('channel-change').hidden").await;
    assert_eq!(audit_by(&base, "channel_unfreeze"), vec!["channels"], "the runner unfroze it");
    let wider = get_json(&format!("{base}/v1/channels/orders-v2")).1;
    let wider = tidegate::core::UnitSet::parse(wider["units"].as_str().unwrap(), 100).unwrap();
    assert_eq!(wider.len(), 30);
    assert!(
        first.iter().all(|u| wider.contains(u)),
        "widening keeps the first 10 %: {first} in {wider}"
    );
    assert_eq!(audit_by(&base, "channel_put"), vec!["alice"]);
    assert_eq!(audit_by(&base, "channel_freeze"), vec!["alice"], "the loss-less change is hers");

    // Delete: a reason and the typed name.
    click(&c, &format!("{row} button[data-delete-channel]")).await;
    wait_for(&c, "the delete confirmation", "!document.getElementById('ch-delete').hidden").await;
    type_into(&c, "#ch-delete-name", "orders-v2").await;
    click(&c, "#ch-delete-go").await;
    wait_for(&c, "the missing reason", "!document.getElementById('ch-delete-error').hidden").await;
    assert!(get_json(&format!("{base}/v1/channels/orders-v2")).0 == 200, "no reason, no delete");
    type_into(&c, "#ch-delete-reason", "browser test: orders 2.4 released").await;
    click(&c, "#ch-delete-go").await;
    wait_for(&c, "no channel left", "document.getElementById('no-channels')").await;
    assert_eq!(get_json(&format!("{base}/v1/channels/orders-v2")).0, 404);
    assert_eq!(audit_by(&base, "channel_delete"), vec!["alice"]);
    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

/// Loss-less dial and unit moves from the overview (issue 23): with "Loss-less" ticked the dial
/// freezes the users it moves, the card says which units are frozen while a subscriber that
/// does not acknowledge holds the move, and the dial moves once it leaves; a unit move does the
/// same. Each is audited as the operator's `units_freeze`, with the runner's switch and
/// unfreeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_less_dial_and_unit_moves_from_the_overview_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 2400).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    let stuck = stuck_router(&base).await;

    type_into(&c, "#dial-number", "40").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    click(&c, "#dial-freeze").await;
    type_into(&c, "#dial-reason", "browser test: loss-less dial").await;
    click(&c, "#dial-apply").await;
    wait_for(&c, "the dial's answer", "!document.getElementById('dial-ok').hidden").await;
    let said = text(&c, "#dial-ok").await;
    assert!(
        said.starts_with(
            "Freezing: the users the dial moves have their writes frozen (units 40-49"
        ),
        "{said}"
    );
    wait_for(&c, "the frozen notice", "!document.getElementById('dial-frozen').hidden").await;
    assert!(
        text(&c, "#dial-frozen").await.starts_with("❄ Units 40-49 are frozen by a loss-less move")
    );
    assert_eq!(routing(&base)["blue_units"], 50, "held by the stuck subscriber");
    shot(&c, "31-dial-freezing").await;
    tokio::task::spawn_blocking(move || drop(stuck)).await.unwrap();
    wait_for(
        &c,
        "the dial at 40 %",
        "document.getElementById('blue-percent').textContent === '40 %'",
    )
    .await;
    wait_for(&c, "the notice gone", "document.getElementById('dial-frozen').hidden").await;
    assert_eq!(audit_by(&base, "units_freeze"), vec!["alice"]);
    assert_eq!(audit_by(&base, "units_unfreeze"), vec!["units"]);

    // A unit move, loss-less: nobody holds it now.
    preview_move(&c, "0-4", "az-a", "browser test: loss-less unit move").await;
    wait_for(&c, "the move's preview", "!document.getElementById('units-confirm').hidden").await;
    click(&c, "#units-freeze").await;
    type_into(&c, "#units-confirm-name", "az-a").await;
    click(&c, "#units-confirm-go").await;
    wait_for(&c, "the move's answer", "!document.getElementById('units-ok').hidden").await;
    assert!(text(&c, "#units-ok").await.starts_with("Freezing: units 0-4 are frozen"));
    let moved = wait_until(Duration::from_secs(10), || {
        let t = routing(&base);
        t["frozen"] == json!({}) && t["blue_units"] == 35
    });
    assert!(moved, "the move switched and unfroze: {}", routing(&base));
    assert_eq!(audit_by(&base, "units_freeze"), vec!["alice", "alice"]);
    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

/// Two coordinator replicas on one Kafka command log: the overview lists both; when the one
/// serving the page is killed, the page says so and links the other's console, which works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_offers_the_other_replicas_console_when_its_own_dies_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let topic = kafka::unique("ui-replicas");
    let replica = |n: usize| {
        let extra = format!(
            "[ui]\nsecret_key = \"{}\"\n[store]\nkind = \"kafka\"\n[store.kafka]\nbootstrap = \"{}\"\ntopic = \"{topic}\"\nallow_under_replicated = true\n[node]\nid = \"r{n}\"\nzone = \"zone-{n}\"\n",
            "7a".repeat(32),
            kafka::bootstrap()
        );
        let file = dir.path().join(format!("r{n}.toml"));
        std::fs::write(&file, config_toml(&extra)).unwrap();
        Server::start(&file, &dir.path().join(format!("data-{n}")))
    };
    let (r1, r2) = (replica(1), replica(2));
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1300).await.unwrap();
    log_in(&c, &r1.url, "alice", OPERATOR_TOKEN).await;
    wait_for(
        &c,
        "both replicas live",
        "document.querySelectorAll('#replicas tbody tr').length === 2 && !document.querySelector('#replicas tr.replica-lost')",
    )
    .await;
    assert_eq!(text(&c, "#cluster-me").await, "r1");
    let link =
        js(&c, "return document.querySelector('#replicas tr[data-replica=\"r2\"] a').href").await;
    assert_eq!(link, json!(format!("{}/ui", r2.url)));
    shot(&c, "13-replicas").await;

    r1.kill9();
    wait_for(&c, "the replica-down banner", "document.getElementById('replica-down')").await;
    let banner = text(&c, "#live").await;
    assert!(
        banner.contains("The replica serving this page (r1") && banner.contains("not answering"),
        "{banner}"
    );
    let own = text(&c, "#replicas tr[data-replica=\"r1\"]").await;
    assert!(own.contains("Not answering"), "{own}");
    let href = js(&c, "return document.querySelector('#replica-down a.replica-link').href").await;
    assert_eq!(href, json!(format!("{}/ui", r2.url)));
    shot(&c, "14-replica-down").await;
    // Following the link opens r2's console (same secret key: the session carries over, else log in).
    // Clicked from the page itself: the banner is rebuilt on every failed poll, so a link found
    // over WebDriver can go stale before the click lands.
    js(&c, "document.querySelector('#replica-down a.replica-link').click(); return null").await;
    wait_for(&c, "r2's page", "location.pathname === '/ui' || location.pathname === '/ui/login'")
        .await;
    if js(&c, "return location.pathname").await == json!("/ui/login") {
        log_in(&c, &r2.url, "alice", OPERATOR_TOKEN).await;
    }
    wait_for(
        &c,
        "r2 talking",
        "(document.getElementById('cluster-me') || {}).textContent === 'r2'",
    )
    .await;
    wait_for(
        &c,
        "r1 lost on r2",
        "(document.querySelector('#replicas tr[data-replica=\"r1\"]') || {className: ''}).className === 'replica-lost'",
    )
    .await;
    c.close().await.unwrap();
    drop(driver);
    drop(r2);
}

/// Reports outcomes for both zones every 200 ms until dropped, so the receiving zone's guard has
/// a reading for every step of a run.
struct Outcomes {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Outcomes {
    fn start(base: &str) -> Outcomes {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, base) = (stop.clone(), base.to_owned());
        let thread = std::thread::spawn(move || {
            let mut round = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                report_outcomes(&base, round);
                round += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Outcomes { stop, thread: Some(thread) }
    }
}

impl Drop for Outcomes {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuate_runs_the_zones_plan_after_a_preview_and_a_typed_confirmation_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    let toml = "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\n[drain.evacuate]\nstep_percent = 25\ninterval = \"300ms\"\nmin_requests = 10\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = Outcomes::start(&base);
    let version = get_json(&format!("{base}/v1/plans")).1["version"].clone();
    let plan = json!({
        "expected_version": version, "reason": "browser test: az-b is failing", "rto": "5m",
        "steps": [
            {"type": "evacuate", "zone": "az-b", "to_percent": 25},
            {"type": "evacuate", "zone": "az-b", "to_percent": 0},
        ],
    });
    let (status, stored) =
        put_json(&format!("{base}/v1/plans/evacuate-az-b"), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{stored}");
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1600).await.unwrap();

    // The overview's Evacuate action is the zone's plan.
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    wait_for(&c, "the Evacuate action", "document.getElementById('evacuate-az-b')").await;
    assert_eq!(text(&c, "#evacuate-az-b").await, "Evacuate az-b…");
    let href = js(&c, "return document.getElementById('evacuate-az-b').getAttribute('href')").await;
    assert_eq!(href, json!("/ui/plans?plan=evacuate-az-b&confirm=run"));
    // az-a receives users and has no plan of its own.
    assert_eq!(js(&c, "return !!document.getElementById('no-plan-az-a')").await, json!(true));
    click(&c, "#evacuate-az-b").await;

    // The plans page lists it, never drilled, and opens the dry-run preview and the confirmation.
    wait_for(&c, "the plan's card", "document.getElementById('plan-evacuate-az-b')").await;
    assert!(text(&c, "#plan-last-drill-evacuate-az-b").await.starts_with("Never drilled"));
    wait_for(
        &c,
        "the preview's steps",
        "document.querySelectorAll('#plan-preview-steps tbody tr').length === 2",
    )
    .await;
    let summary = text(&c, "#plan-preview-summary").await;
    assert!(summary.contains("against an RTO of 5m") && summary.contains("fits"), "{summary}");
    let first = text(&c, "#plan-preview-steps tbody tr[data-step='0']").await;
    assert!(first.contains("50 % → 25 %") && first.contains("25 %"), "users moved: {first}");
    assert_eq!(text(&c, "#plan-preview-start").await, "✓ It would start now.");
    wait_for(&c, "the confirmation", "!document.getElementById('plan-confirm').hidden").await;
    let go_disabled = "return document.getElementById('plan-confirm-go').disabled";
    assert_eq!(js(&c, go_disabled).await, json!(true), "nothing typed yet");
    type_into(&c, "#plan-confirm-name", "evacuate-az-").await;
    assert_eq!(js(&c, go_disabled).await, json!(true), "a prefix is not the name");
    type_into(&c, "#plan-confirm-name", "evacuate-az-b").await;
    assert_eq!(js(&c, go_disabled).await, json!(false), "the typed name matches");
    // Enter without a reason asks for one and sends nothing.
    c.find(Locator::Css("#plan-confirm-name")).await.unwrap().send_keys("\u{E007}").await.unwrap();
    wait_for(&c, "the reason error", "!document.getElementById('plan-confirm-error').hidden").await;
    assert!(text(&c, "#plan-confirm-error").await.starts_with("Give a reason"));
    let runs = || get_json(&format!("{base}/v1/plans/evacuate-az-b/runs")).1["runs"].clone();
    assert_eq!(runs(), json!([]));
    shot(&c, "15-plan-preview-confirm").await;
    // Enter twice: one run.
    type_into(&c, "#plan-confirm-reason", "browser test: az-b is failing").await;
    let reason = c.find(Locator::Css("#plan-confirm-reason")).await.unwrap();
    reason.send_keys("\u{E007}\u{E007}").await.unwrap();

    // The live timeline follows the run to its last step.
    wait_for(&c, "the run's timeline", "document.getElementById('plan-run-timeline')").await;
    wait_for(
        &c,
        "the run to complete",
        "document.getElementById('plan-run-state').dataset.state === 'completed'",
    )
    .await;
    wait_for(
        &c,
        "the last step done",
        "document.querySelector('#plan-run-timeline tr[data-step=\"1\"]').dataset.status === 'done'",
    )
    .await;
    assert_eq!(text(&c, "#plan-run-verdict").await, "RTO met");
    assert!(text(&c, "#plan-run-step").await.starts_with("2 of 2"));
    // The moving zone's share: az-b's, now 0 %, and each step's target.
    wait_for(
        &c,
        "the share line",
        "(document.getElementById('plan-run-share') || {}).textContent === '0 %'",
    )
    .await;
    let shares = js(
        &c,
        "return [...document.querySelectorAll('#plan-run-timeline tbody tr')].map((r) => r.children[5].textContent)",
    )
    .await;
    assert_eq!(shares, json!(["az-b 25 %", "az-b 0 %"]));
    shot(&c, "16-plan-run-timeline").await;
    let runs = runs();
    assert_eq!(runs.as_array().unwrap().len(), 1, "Enter twice sent one run: {runs}");
    assert_eq!(runs[0]["started_by"], "alice");
    assert_eq!(runs[0]["state"], "completed");
    assert_eq!(routing(&base)["blue_percent"], 0.0, "az-b is evacuated");

    // Past reports list it.
    click(&c, "#reports-evacuate-az-b").await;
    wait_for(
        &c,
        "the report row",
        "document.querySelectorAll('#plan-reports-table tbody tr').length === 1",
    )
    .await;
    let row = text(&c, "#plan-reports-table tbody tr").await;
    assert!(row.contains("alice") && row.contains("RTO met"), "{row}");
    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    drop(server);
}

/// Takes the page at 1280 px and at 390 px (a phone), each tall enough for the whole page, and
/// checks at 390 px that nothing is wider than the window: every table either fits or scrolls
/// inside its own container.
async fn shots_at_both_widths(c: &Client, name: &str, height: u32) {
    c.set_window_size(1280, height).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_fits(c, "1280 px").await;
    shot(c, &format!("{name}-1280")).await;
    c.set_window_size(390, height.max(1200) + 600).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_tables_usable(c).await;
    shot(c, &format!("{name}-390")).await;
    c.set_window_size(1280, height).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// At a phone's width: the page does not scroll sideways, and a table wider than the window is
/// inside a container no wider than the window that scrolls it (`overflow-x: auto`).
async fn assert_tables_usable(c: &Client) {
    let width = js(c, "return window.innerWidth").await.as_i64().unwrap();
    assert!(width <= 520, "a phone-sized viewport: {width}");
    let scroll = js(c, "return document.documentElement.scrollWidth").await.as_i64().unwrap();
    assert!(scroll <= width, "at {width} px the page is {scroll} px wide");
    let bad = js(
        c,
        "return [...document.querySelectorAll('table')].filter((t) => t.getClientRects().length).flatMap((t) => {
           const r = t.getBoundingClientRect();
           if (r.left >= 0 && r.right <= window.innerWidth + 0.5) return [];
           const wrap = t.closest('.table-wrap');
           if (!wrap) return [(t.id || t.className || 'a table') + ': wider than the window, not in a scroll container'];
           const w = wrap.getBoundingClientRect();
           const scrolls = getComputedStyle(wrap).overflowX === 'auto' && wrap.scrollWidth > wrap.clientWidth;
           return w.left >= 0 && w.right <= window.innerWidth + 0.5 && scrolls ? [] : [(t.id || t.className || 'a table') + ': its container does not scroll it'];
         })",
    )
    .await;
    assert_eq!(bad, json!([]), "tables at {width} px");
}

fn drains(base: &str) -> Vec<Value> {
    get_json(&format!("{base}/v1/drains")).1["drains"].as_array().unwrap().clone()
}

fn drain_action(base: &str, id: &Value, action: &str) {
    let (status, body) = post_json(
        &format!("{base}/v1/drains/{id}/{action}"),
        OPERATOR_TOKEN,
        json!({"reason": format!("browser test: {action}")}),
    );
    assert_eq!(status, 200, "{action}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_evacuation_the_overview_offers_restore_and_names_the_evacuation_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    let toml = "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\ninterval = \"300ms\"\nmin_requests = 10\n[drain.evacuate]\nstep_percent = 25\ninterval = \"300ms\"\nmin_requests = 10\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = Outcomes::start(&base);
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1600).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;
    wait_for(&c, "the Evacuate action", "document.getElementById('evacuate-drain-az-b')").await;
    assert_eq!(js(&c, "return !!document.getElementById('restore-az-b')").await, json!(false));

    // An evacuation of az-b, paused at once so the page can be read while it is active.
    let (status, started) = post_json(
        &format!("{base}/v1/drains"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "mode": "evacuate", "target_percent": 0, "reason": "browser test: az-b is failing"}),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].clone();
    drain_action(&base, &id, "pause");
    wait_for(
        &c,
        "the paused evacuation",
        "(document.getElementById('drain-heading') || {}).textContent && document.getElementById('zone-state-az-b').textContent === '❚❚ Evacuation paused'",
    )
    .await;
    let heading = text(&c, "#drain-heading").await;
    assert!(heading.starts_with(&format!("Evacuation {id}: az-b → az-a")), "{heading}");
    assert_eq!(text(&c, "#drain-title").await, "Evacuation");
    // The receiving zone is not offered for evacuation while az-b's users move into it.
    assert_eq!(
        js(&c, "return !!document.getElementById('evacuate-drain-az-a')").await,
        json!(false)
    );
    assert!(text(&c, "#evacuate-blocked-az-a").await.contains("is moving its users here"));
    shots_at_both_widths(&c, "17-evacuation-paused", 1600).await;

    // Resumed, it empties az-b.
    drain_action(&base, &id, "resume");
    assert!(
        wait_until(Duration::from_secs(20), || drains(&base)[0]["state"] == "completed"),
        "the evacuation completes: {:?}",
        drains(&base)
    );
    assert_eq!(routing(&base)["blue_percent"], 0.0);
    wait_for(&c, "the Restore action", "document.getElementById('restore-az-b')").await;
    assert_eq!(text(&c, "#restore-az-b").await, "Restore az-b…");
    let offered = js(
        &c,
        "return ['evacuate-az-a', 'evacuate-drain-az-a', 'no-plan-az-a', 'evacuate-blocked-az-a'].filter((id) => document.getElementById(id))",
    )
    .await;
    assert_eq!(
        offered,
        json!(["evacuate-blocked-az-a"]),
        "no Evacuate az-a after az-b's evacuation"
    );
    assert!(
        text(&c, "#evacuate-blocked-az-a").await.contains("restore az-b before evacuating az-a")
    );
    let latest = text(&c, "#latest-drain").await;
    assert!(latest.starts_with(&format!("Latest: evacuation {id} of az-b")), "{latest}");
    shots_at_both_widths(&c, "18-restore-offered", 1600).await;

    // Restore: a reason first, then it starts the restore drain.
    click(&c, "#restore-az-b").await;
    wait_for(&c, "the restore step", "!document.getElementById('restore-confirm').hidden").await;
    let summary = text(&c, "#restore-summary").await;
    assert!(
        summary.contains("from 0 % to 50 %") && summary.contains("error rate now"),
        "{summary}"
    );
    click(&c, "#restore-go").await;
    wait_for(&c, "the reason message", "!document.getElementById('restore-error').hidden").await;
    assert!(text(&c, "#restore-error").await.starts_with("Give a reason"));
    assert_eq!(drains(&base).len(), 1, "nothing was sent");
    type_into(&c, "#restore-reason", "browser test: az-b is healthy again").await;
    shot(&c, "19-restore-confirm").await;
    click(&c, "#restore-go").await;
    wait_for(
        &c,
        "the restore's message",
        "document.getElementById('drain-flash').textContent.startsWith('Restore of az-b started')",
    )
    .await;
    let list = drains(&base);
    assert_eq!(list.len(), 2, "{list:?}");
    let restore = &list[0];
    assert_eq!(
        (restore["zone"].as_str(), restore["mode"].as_str(), restore["started_by"].as_str()),
        (Some("az-b"), Some("maintenance"), Some("alice"))
    );
    assert_eq!(
        (restore["from_percent"].as_f64(), restore["target_percent"].as_f64()),
        (Some(0.0), Some(50.0))
    );
    assert_eq!(restore["reason"], "browser test: az-b is healthy again");
    assert!(
        wait_until(Duration::from_secs(20), || routing(&base)["blue_percent"] == 50.0),
        "the restore brings az-b back to 50 %"
    );
    wait_for(&c, "the Evacuate action again", "document.getElementById('evacuate-drain-az-b')")
        .await;
    assert_eq!(js(&c, "return !!document.getElementById('restore-az-b')").await, json!(false));
    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_move_refused_by_capacity_is_forced_only_with_a_typed_reason_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    // az-a may carry 1 rps: moving users into it is refused (or unknown, which blocks too).
    let toml = "[health]\nwindow = \"2s\"\n[zones.az-a]\ncapacity_rps = 1\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = Outcomes::start(&base);
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1300).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;

    type_into(&c, "#dial-number", "30").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    type_into(&c, "#dial-reason", "browser test: move 20% to az-a").await;
    click(&c, "#dial-apply").await;
    wait_for(&c, "the force step", "!document.getElementById('dial-force').hidden").await;
    let refusal = text(&c, "#dial-confirm-error").await;
    assert!(refusal.contains("capacity check refused it"), "{refusal}");
    let detail = text(&c, "#dial-force-detail").await;
    // The sentence starts with the zone when the load is known ("Az-a would carry ...", the UI
    // capitalises it) and names it later when it is unknown ("... project az-a's load ...").
    let lower = detail.to_lowercase();
    assert!(lower.contains("az-a") && lower.contains("capacity"), "{detail}");
    assert!(!detail.contains("\"force\": true"), "the API's hint is for API callers: {detail}");
    assert_eq!(routing(&base)["version"], 1, "refused: nothing changed");
    // The typed confirmation is never capitalised or corrected by a phone's keyboard.
    let attrs = js(
        &c,
        "const f = document.getElementById('dial-force-word');
         return ['autocapitalize', 'autocorrect', 'spellcheck', 'autocomplete'].map((a) => f.getAttribute(a))",
    )
    .await;
    assert_eq!(attrs, json!(["off", "off", "false", "off"]));
    let go_disabled = "return document.getElementById('dial-force-go').disabled";
    assert_eq!(js(&c, go_disabled).await, json!(true), "nothing typed yet");
    type_into(&c, "#dial-force-word", "Force").await;
    assert_eq!(js(&c, go_disabled).await, json!(true), "the word is `force`, exactly");
    type_into(&c, "#dial-force-word", "force").await;
    assert_eq!(js(&c, go_disabled).await, json!(false));
    // Without a reason of its own the force is stopped in the page.
    click(&c, "#dial-force-go").await;
    wait_for(&c, "the force reason message", "!document.getElementById('dial-force-error').hidden")
        .await;
    assert!(text(&c, "#dial-force-error").await.contains("reason for forcing"));
    assert_eq!(routing(&base)["version"], 1, "nothing was sent");
    type_into(&c, "#dial-force-reason", "browser test: az-b is down, az-a is scaling").await;
    shots_at_both_widths(&c, "20-dial-force", 1300).await;
    click(&c, "#dial-force-go").await;
    wait_for(&c, "the dial's success message", "!document.getElementById('dial-ok').hidden").await;
    assert!(text(&c, "#dial-ok").await.contains("forced past the capacity check"));
    let table = routing(&base);
    assert_eq!((table["version"].as_u64(), table["blue_percent"].as_f64()), (Some(2), Some(30.0)));
    let entry = latest_audit(&base);
    assert_eq!((entry["by"].as_str(), entry["action"].as_str()), (Some("alice"), Some("dial")));
    let reason = entry["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "browser test: az-b is down, az-a is scaling [forced: insufficient_capacity"
        ),
        "{reason}"
    );
    assert!(js(&c, "return document.getElementById('dial-force').hidden").await == json!(true));
    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_holds_triggers_and_tables_on_a_phone_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    let toml = "[health]\nwindow = \"2s\"\n[drain]\ntick = \"20ms\"\n[drain.evacuate]\ninterval = \"300ms\"\nmin_requests = 10\n[plans]\ntriggers = true\n[zones.az-a]\ncapacity_rps = 1\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = Outcomes::start(&base);
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1400).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;

    // An evacuation into a zone that cannot take the load holds: shown as held, not running.
    let (status, started) = post_json(
        &format!("{base}/v1/drains"),
        OPERATOR_TOKEN,
        json!({"zone": "az-b", "mode": "evacuate", "target_percent": 0, "reason": "browser test: az-b is failing"}),
    );
    assert_eq!(status, 201, "{started}");
    let id = started["id"].clone();
    assert!(
        wait_until(Duration::from_secs(15), || {
            let d = &drains(&base)[0];
            d["state"] == "running"
                && d["hold_reason"].as_str().is_some_and(|r| r.contains("insufficient_capacity"))
        }),
        "the evacuation holds on capacity: {:?}",
        drains(&base)
    );
    wait_for(
        &c,
        "the held badge",
        "(document.getElementById('drain-state') || {dataset: {}}).dataset.held === 'capacity'",
    )
    .await;
    assert_eq!(text(&c, "#drain-state").await, "◷ Held: capacity");
    let hold = text(&c, "#drain-hold").await;
    assert!(hold.starts_with("held: insufficient_capacity:"), "{hold}");
    let badge =
        js(&c, "return getComputedStyle(document.getElementById('drain-state')).borderTopStyle")
            .await;
    assert_eq!(badge, json!("double"), "the held badge is distinct from running and failed");
    shots_at_both_widths(&c, "21-drain-held-capacity", 1400).await;
    drain_action(&base, &id, "abort");

    // A plan whose dial step cannot fit az-a: its run holds, and its timeline shows az-b's
    // share; another plan has a trigger and a cooldown.
    let version = get_json(&format!("{base}/v1/plans")).1["version"].clone();
    let plan = json!({
        "expected_version": version, "reason": "browser test: everyone to az-a", "rto": "5m",
        "steps": [{"type": "dial", "blue_percent": 0}],
    });
    let (status, stored) = put_json(&format!("{base}/v1/plans/all-to-az-a"), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{stored}");
    let version = get_json(&format!("{base}/v1/plans")).1["version"].clone();
    let plan = json!({
        "expected_version": version, "reason": "browser test: az-a failover", "rto": "5m",
        "steps": [{"type": "evacuate", "zone": "az-a", "to_percent": 0}],
        "trigger": {"zone_down_for": "5m"}, "cooldown": "10m",
    });
    let (status, body) = put_json(&format!("{base}/v1/plans/evacuate-az-a"), OPERATOR_TOKEN, plan);
    assert_eq!(status, 200, "{body}");
    let (status, run) = post_json(
        &format!("{base}/v1/plans/all-to-az-a/run"),
        OPERATOR_TOKEN,
        json!({"reason": "browser test: held run", "plan_revision": stored["revision"]}),
    );
    assert!(status == 200 || status == 201, "{status}: {run}");
    assert!(
        wait_until(Duration::from_secs(15), || {
            let r = get_json(&format!("{base}/v1/plans/all-to-az-a/runs/{}", run["id"])).1;
            r["hold_reason"].as_str().is_some_and(|h| h.contains("insufficient_capacity"))
        }),
        "the run holds on capacity"
    );
    c.goto(&format!("{base}/ui/plans")).await.unwrap();
    wait_for(&c, "the run's timeline", "document.getElementById('plan-run-timeline')").await;
    wait_for(
        &c,
        "the held run",
        "document.getElementById('plan-run-state').dataset.held === 'capacity'",
    )
    .await;
    assert_eq!(text(&c, "#plan-run-state").await, "◷ Held: capacity");
    assert!(text(&c, "#plan-run-hold").await.starts_with("held: insufficient_capacity:"));
    let row = "#plan-run-timeline tr[data-step='0']";
    wait_for(
        &c,
        "the held step",
        &format!("document.querySelector(\"{row}\").dataset.status === 'held'"),
    )
    .await;
    // The current share: az-b (the dial's blue zone) still has half the users.
    wait_for(&c, "the live share", "document.getElementById('plan-run-share')").await;
    assert_eq!(text(&c, "#plan-run-share").await, "50 %");
    assert_eq!(text(&c, "#plan-run-share-cell").await, "az-b 50 % now → 0 %");
    // Triggers and cooldowns, and the stop switch, on the plans page.
    let trigger = text(&c, "#plan-trigger-evacuate-az-a").await;
    assert!(trigger.contains("down for 5m") && trigger.contains("cooldown 10m"), "{trigger}");
    assert!(trigger.contains("● Armed"), "{trigger}");
    assert!(text(&c, "#plan-trigger-all-to-az-a").await.starts_with("No trigger"));
    wait_for(&c, "the held run in the list", "document.getElementById('plan-active-all-to-az-a').textContent.includes('held by the capacity check')").await;
    assert_eq!(
        text(&c, "#plan-all-to-az-a .zone-head .badge[data-held]").await,
        "◷ Held: capacity"
    );
    shots_at_both_widths(&c, "22-plan-run-held-and-triggers", 2000).await;
    // The held run's runner writes too, so the version may move under us: retry a conflict.
    let stopped = wait_until(Duration::from_secs(10), || {
        let (status, body) = put_json(
            &format!("{base}/v1/automation"),
            OPERATOR_TOKEN,
            json!({"stopped": true, "expected_version": routing(&base)["version"], "reason": "browser test: hands off"}),
        );
        assert!(status == 200 || body["error"] == "version_conflict", "{status}: {body}");
        status == 200
    });
    assert!(stopped, "the stop switch is set");
    wait_for(
        &c,
        "the stopped trigger",
        "document.getElementById('plan-trigger-evacuate-az-a').dataset.trigger === 'stopped'",
    )
    .await;
    assert!(
        text(&c, "#plan-trigger-evacuate-az-a")
            .await
            .contains("Automation stopped: it will not fire")
    );

    // Every page's tables on a phone: the preview's steps, the reports, the replicas, the audit.
    click(&c, "#preview-all-to-az-a").await;
    wait_for(
        &c,
        "the preview's steps",
        "document.querySelectorAll('#plan-preview-steps tbody tr').length === 1",
    )
    .await;
    click(&c, "#reports-all-to-az-a").await;
    wait_for(
        &c,
        "the report row",
        "document.querySelectorAll('#plan-reports-table tbody tr').length === 1",
    )
    .await;
    shots_at_both_widths(&c, "23-plans-tables", 2600).await;
    // On a phone the plan tables are one block per row, each cell labelled with its column.
    c.set_window_size(390, 2600).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stacked = js(
        &c,
        "return ['plan-preview-steps', 'plan-run-timeline', 'plan-reports-table'].map((id) => {
           const t = document.getElementById(id);
           const cell = t.querySelector('tbody td:nth-child(2)');
           return [getComputedStyle(t.querySelector('thead')).display, getComputedStyle(cell).display, getComputedStyle(cell, '::before').content];
         })",
    )
    .await;
    assert_eq!(
        stacked,
        json!([
            ["none", "block", "\"Step: \""],
            ["none", "block", "\"Step: \""],
            ["none", "block", "\"Kind: \""]
        ])
    );
    c.set_window_size(1280, 1400).await.unwrap();
    for (page, ready) in [
        ("/ui", "document.querySelector('#replicas tbody tr')"),
        ("/ui/audit", "document.getElementById('audit-table')"),
        ("/ui/lanes", "document.getElementById('lanes-empty')"),
    ] {
        c.set_window_size(390, 1400).await.unwrap();
        c.goto(&format!("{base}{page}")).await.unwrap();
        wait_for(&c, page, ready).await;
        assert_tables_usable(&c).await;
    }
    shot(&c, "24-lanes-390").await;
    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    drop(server);
}

/// Outcomes for three zones (az-c runs the `red` lane) every 200 ms until dropped, so every zone
/// has a load the capacity check can project.
const THREE_ZONES: &[(&str, &str, u64, u64)] =
    &[("az-b", "blue", 900, 4), ("az-a", "green", 1100, 2), ("az-c", "red", 50, 0)];

/// Outcomes `(zone, lane, ok, error)` for each zone every 200 ms until dropped.
struct ZoneOutcomes {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ZoneOutcomes {
    fn start(base: &str, zones: &'static [(&'static str, &'static str, u64, u64)]) -> ZoneOutcomes {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, base) = (stop.clone(), base.to_owned());
        let thread = std::thread::spawn(move || {
            let mut round = 0u64;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let body: Vec<Value> = zones
                    .iter()
                    .map(|(zone, lane, ok, error)| {
                        json!({"zone": zone, "color": lane, "ok": ok + round % 5, "error": error})
                    })
                    .collect();
                let _ = agent()
                    .post(&format!("{base}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(body);
                round += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        ZoneOutcomes { stop, thread: Some(thread) }
    }
}

impl Drop for ZoneOutcomes {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The units each zone owns in a routing body, by zone index.
fn zone_units(routing: &Value) -> Vec<u64> {
    routing["zones"].as_array().unwrap().iter().map(|z| z["units"].as_u64().unwrap()).collect()
}

/// The element `css` at a phone's width, scrolled to the top of a 390 x 1000 window: a picture
/// small enough to read (the whole page at 390 px is several screens tall).
async fn phone_shot(c: &Client, css: &str, name: &str) {
    c.set_window_size(390, 1000).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_tables_usable(c).await;
    js(c, &format!("document.querySelector({css:?}).scrollIntoView({{block: 'start'}})")).await;
    shot(c, name).await;
    c.set_window_size(1280, 1600).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// Fills in the Move units form and asks for its dry run.
async fn preview_move(c: &Client, units: &str, zone: &str, reason: &str) {
    type_into(c, "#units-ranges", units).await;
    c.find(Locator::Css("#units-zone")).await.unwrap().select_by_value(zone).await.unwrap();
    type_into(c, "#units-reason", reason).await;
    click(c, "#units-review").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_zones_show_three_cards_and_units_move_after_a_preview_and_a_typed_confirmation_in_chromium()
 {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    // az-a may carry 1 rps, so a move into it is refused; az-c has room for anything here.
    let toml = "[health]\nwindow = \"2s\"\n[capacity]\nheadroom = 0.0\n[zones.az-a]\ncapacity_rps = 1\n[zones.az-c]\nlane = \"red\"\ncapacity_rps = 100000\n";
    std::fs::write(&config_file, config_toml(toml)).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = ZoneOutcomes::start(&base, THREE_ZONES);
    let start = routing(&base);
    assert_eq!(zone_units(&start), [50, 50, 0], "{start}");
    let version = start["version"].as_u64().unwrap();
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1600).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;

    // Three cards from GET /v1/routing, in index order, each with its lane, class and units.
    wait_for(&c, "three zone cards", "document.querySelectorAll('#zones .zone').length === 3")
        .await;
    let cards = js(
        &c,
        "return [...document.querySelectorAll('#zones .zone')].map((z) => [z.id, z.dataset.lane, z.querySelector('.chip-class').textContent, z.querySelector('dd').textContent])",
    )
    .await;
    assert_eq!(
        cards,
        json!([
            ["zone-az-b", "blue", "rzone", "50 of 100"],
            ["zone-az-a", "green", "rzone", "50 of 100"],
            ["zone-az-c", "red", "rzone", "0 of 100"]
        ])
    );
    assert_eq!(text(&c, "#zone-state-az-c").await, "○ Owns no units");
    assert_eq!(text(&c, "#share-az-c").await, "0 %");
    // The dial is refused with a third live zone: the page says so instead of offering it.
    assert_eq!(js(&c, "return document.getElementById('dial-form').hidden").await, json!(true));
    let notice = text(&c, "#dial-n-zones").await;
    assert!(notice.contains("3 live zones (az-b, az-a, az-c)"), "{notice}");
    assert!(notice.contains("needs_two_zones") && notice.contains("Move units"), "{notice}");
    assert_eq!(text(&c, "#dial-title").await, "Traffic split");
    assert!(text(&c, "#no-drain").await.contains("move unit ranges instead"));
    // The global writer, named through the API, shows on the overview and on its card.
    assert_eq!(text(&c, "#global-writer-zone").await, "no zone named");
    let (status, body) = put_json(
        &format!("{base}/v1/global-writer"),
        OPERATOR_TOKEN,
        json!({"zone": "az-a", "read_only": false, "expected_version": version, "reason": "browser test: GZone"}),
    );
    assert_eq!(status, 200, "{body}");
    let version = version + 1;
    wait_for(
        &c,
        "the global writer",
        "document.getElementById('global-writer-zone').textContent === 'az-a (green)'",
    )
    .await;
    assert!(text(&c, "#global-writer").await.ends_with("· read-write"));
    wait_for(&c, "az-a's writer badge", "document.getElementById('zone-writer-az-a')").await;

    // A range outside the table: the dry run's refusal, with the field it names.
    preview_move(&c, "90-100", "az-c", "browser test: too far").await;
    wait_for(&c, "the range error", "!document.getElementById('units-error').hidden").await;
    let refusal = text(&c, "#units-error").await;
    assert!(
        refusal.starts_with("The dry run was refused: invalid_units: moves[0].units"),
        "{refusal}"
    );
    let invalid = "return document.getElementById('units-ranges').getAttribute('aria-invalid')";
    assert_eq!(js(&c, invalid).await, json!("true"));
    assert_eq!(js(&c, "return document.getElementById('units-confirm').hidden").await, json!(true));

    // Into az-a, which may carry 1 rps: the preview says tidegate would refuse it, and
    // confirming shows the 409 with its detail. Nothing moves.
    preview_move(&c, "0-9", "az-a", "browser test: into a full zone").await;
    wait_for(&c, "the preview", "!document.getElementById('units-confirm').hidden").await;
    wait_for(&c, "the refusal warning", "document.getElementById('units-preview-refuse')").await;
    assert!(
        text(&c, "#units-preview-refuse")
            .await
            .starts_with("tidegate would refuse this move now: ")
    );
    let verdict = js(&c, "return document.querySelector('#units-preview-zones tr[data-zone=\"az-a\"] td[data-verdict]')?.dataset.verdict ?? 'none'").await;
    assert_ne!(verdict, json!("fits"), "az-a cannot take 10 units at 1 rps");
    type_into(&c, "#units-confirm-name", "az-a").await;
    click(&c, "#units-confirm-go").await;
    wait_for(&c, "the capacity refusal", "!document.getElementById('units-confirm-error').hidden")
        .await;
    let refusal = text(&c, "#units-confirm-error").await;
    assert!(refusal.starts_with("Not applied: insufficient_capacity: "), "{refusal}");
    assert_eq!(routing(&base)["version"], version, "refused: nothing changed");
    click(&c, "#units-confirm-cancel").await;

    // 25-49 to az-c: the preview (who gains and loses, az-c's projected load), then the typed
    // name, then one move at the previewed version.
    preview_move(&c, "25-49", "az-c", "browser test: give az-c a quarter").await;
    wait_for(&c, "the preview", "!document.getElementById('units-confirm').hidden && document.getElementById('units-preview-fits')").await;
    assert_eq!(text(&c, "#units-preview-moved").await, "25 units");
    let rows = js(
        &c,
        "return [...document.querySelectorAll('#units-preview-zones tbody tr')].map((r) => [r.dataset.zone, r.querySelector('.units-after').textContent, r.querySelector('.units-change').textContent])",
    )
    .await;
    assert_eq!(rows, json!([["az-b", "25", "−25"], ["az-a", "50", "0"], ["az-c", "25", "+25"]]));
    let capacity =
        text(&c, "#units-preview-zones tr[data-zone='az-c'] td[data-verdict='fits']").await;
    assert!(
        capacity.starts_with("✓ az-c: ") && capacity.contains("of 100000 rps allowed"),
        "{capacity}"
    );
    let go_disabled = "return document.getElementById('units-confirm-go').disabled";
    assert_eq!(js(&c, go_disabled).await, json!(true), "nothing typed yet");
    type_into(&c, "#units-confirm-name", "az-").await;
    assert_eq!(js(&c, go_disabled).await, json!(true), "a prefix is not the name");
    type_into(&c, "#units-confirm-name", "az-c").await;
    assert_eq!(js(&c, go_disabled).await, json!(false), "the typed name matches");
    assert_eq!(routing(&base)["version"], version, "a preview changes nothing");
    js(&c, "window.scrollTo(0, 0)").await;
    shots_at_both_widths(&c, "25-three-zones-move-preview", 2000).await;
    phone_shot(&c, "#units-confirm", "25-three-zones-move-preview-390-confirm").await;
    // Enter twice: one move.
    let name = c.find(Locator::Css("#units-confirm-name")).await.unwrap();
    name.send_keys("\u{E007}\u{E007}").await.unwrap();
    wait_for(&c, "the move's success message", "!document.getElementById('units-ok').hidden").await;
    assert_eq!(
        text(&c, "#units-ok").await,
        format!("Done: 25 units moved to az-c (routing version {}).", version + 1)
    );
    let after = routing(&base);
    assert_eq!(after["version"].as_u64(), Some(version + 1));
    assert_eq!(zone_units(&after), [25, 50, 25], "{after}");
    let runs: Vec<(&str, &str)> = after["unit_map"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["units"].as_str().unwrap(), r["zone"].as_str().unwrap()))
        .collect();
    assert_eq!(runs, [("0-24", "az-b"), ("25-49", "az-c"), ("50-99", "az-a")]);
    assert_eq!(audit_by(&base, "units_move"), vec!["alice"], "Enter twice sent one move");
    assert_eq!(latest_audit(&base)["reason"], "browser test: give az-c a quarter");

    // The cards and the split follow the table.
    wait_for(
        &c,
        "az-c's 25 units",
        "document.getElementById('zone-units-az-c').textContent === '25 of 100'",
    )
    .await;
    assert_eq!(text(&c, "#zone-units-az-b").await, "25 of 100");
    assert_eq!(text(&c, "#zone-share-az-c").await, "25 %");
    assert_eq!(text(&c, "#share-az-c").await, "25 %");
    assert_eq!(text(&c, "#blue-percent").await, "25 %");
    // az-c owns units now: never "owns no units", and never healthy without a reading.
    assert_ne!(text(&c, "#zone-state-az-c").await, "○ Owns no units");
    // Each card's chart draws its own zone's series from GET /v1/zones/history, az-c's too.
    let line = |zone: &str| {
        format!(
            "document.querySelector('svg.chart[data-zone=\"{zone}\"] polyline') || document.querySelector('svg.chart[data-zone=\"{zone}\"] circle')"
        )
    };
    for zone in ["az-b", "az-a", "az-c"] {
        wait_for(&c, &format!("{zone}'s error-rate line"), &line(zone)).await;
    }
    let label = js(
        &c,
        "return document.querySelector('svg.chart[data-zone=\"az-c\"]').getAttribute('aria-label')",
    )
    .await;
    assert_eq!(label, json!("az-c: error rate over the last 5 minutes, now 0.00 %"));
    // A card's "Move <zone>'s units…" fills the form with what the zone owns.
    click(&c, "#move-from-az-c").await;
    let ranges = js(&c, "return document.getElementById('units-ranges').value").await;
    assert_eq!(ranges, json!("25-49"));
    let zone = js(&c, "return document.getElementById('units-zone').value").await;
    assert_ne!(zone, json!("az-c"), "the receiving zone is another one");
    type_into(&c, "#units-ranges", "").await;
    js(&c, "window.scrollTo(0, 0)").await;
    shots_at_both_widths(&c, "26-three-zones-after-move", 2000).await;
    phone_shot(&c, "#zones-card", "26-three-zones-after-move-390-cards").await;

    // A drain among three zones, started from the form: az-c's 25 units go to az-b only (the
    // zone ticked), step by step, and az-a keeps its 50.
    click(&c, "#drain-start").await;
    wait_for(&c, "the drain form", "document.getElementById('drain-form')").await;
    assert_eq!(js(&c, "return document.getElementById('f-to-field').hidden").await, json!(false));
    let zones =
        js(&c, "return [...document.querySelectorAll('#f-zone option')].map((o) => o.value)").await;
    assert_eq!(zones, json!(["az-b", "az-a", "az-c"]));
    let receivers = js(
        &c,
        "return [...document.querySelectorAll('#f-to-field input[name=to]')].map((i) => i.value)",
    )
    .await;
    assert_eq!(receivers, json!(["az-b", "az-a", "az-c"]));
    js(&c, "document.getElementById('f-zone').value = 'az-c'").await;
    type_into(&c, "#f-interval", "200ms").await;
    type_into(&c, "#f-reason", "browser test: drain az-c into az-b").await;
    // Only the drained zone ticked: refused in the page, nothing sent.
    click(&c, "#f-to-2").await;
    click(&c, "#drain-submit").await;
    wait_for(&c, "the receivers error", "!document.getElementById('e-to').hidden").await;
    assert!(text(&c, "#e-to").await.starts_with("The zone being drained cannot receive"));
    assert!(drains(&base).is_empty(), "nothing was sent");
    click(&c, "#f-to-2").await;
    click(&c, "#f-to-0").await;
    js(&c, "window.scrollTo(0, 0)").await;
    shots_at_both_widths(&c, "27-three-zones-drain-form", 1800).await;
    click(&c, "#drain-submit").await;
    wait_for(
        &c,
        "the overview with the zone drain",
        "location.pathname === '/ui' && document.getElementById('drain-heading')",
    )
    .await;
    let heading = text(&c, "#drain-heading").await;
    assert!(heading.ends_with("az-c → az-b"), "{heading}");
    let drain = drains(&base).remove(0);
    assert_eq!(drain["zone"], "az-c", "{drain}");
    assert_eq!(drain["receiving_zones"], json!(["az-b"]), "{drain}");
    assert!(
        wait_until(Duration::from_secs(30), || zone_units(&routing(&base)) == [50, 50, 0]),
        "az-c's units went to az-b: {}",
        routing(&base)
    );
    let steps = audit_by(&base, "drain_step");
    assert!(steps.len() >= 2, "step by step: {steps:?}");
    assert_eq!(audit_by(&base, "drain_start"), vec!["alice"]);

    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    eprintln!(
        "three-zone browser test: {:.1} s including chromium start-up",
        started.elapsed().as_secs_f64()
    );
    drop(server);
}

/// A Router subscribed to `base` that never acknowledges a table and keeps no lease (as a
/// client of an older release, or the database fence): it holds every freeze barrier until it
/// is dropped (then it stops counting a few seconds later).
async fn stuck_router(base: &str) -> tidegate::client::Router {
    let url = base.to_owned();
    tokio::task::spawn_blocking(move || {
        let identity = tidegate::client::Identity {
            subscriber_id: "stuck-1".into(),
            zone: "az-b".into(),
            kind: "service".into(),
        };
        let options = tidegate::client::RouterOptions {
            token: Some(OPERATOR_TOKEN.into()),
            acknowledge: false,
            keep_lease: false,
            ..Default::default()
        };
        let router = tidegate::client::Router::connect(&url, identity, options).unwrap();
        assert!(router.wait_for_version(1, Duration::from_secs(10)));
        router
    })
    .await
    .unwrap()
}

/// The selected routing domain's value of a select or input.
async fn value_of(c: &Client, css: &str) -> Value {
    js(c, &format!("return document.querySelector({css:?}).value")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_domain_is_selected_and_only_its_dial_moves_in_chromium() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("tidegate.toml");
    std::fs::write(&config_file, config_toml("[health]\nwindow = \"2s\"\n")).unwrap();
    let server = Server::start(&config_file, &dir.path().join("data"));
    let base = server.url.clone();
    let outcomes = Outcomes::start(&base);
    // A second domain, `search`, as a copy of the default domain's map (50 % blue).
    let (status, body) = post_json(
        &format!("{base}/v1/domains"),
        OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": 1, "reason": "browser test: a second domain"}),
    );
    assert_eq!(status, 200, "{body}");
    let before = routing(&base);
    let version = before["version"].as_u64().unwrap();
    assert_eq!(before["domains"]["search"]["blue_percent"], 50.0, "{before}");
    let driver = Driver::start();
    let c = browser(&driver, &dir.path().join("chromium-profile")).await;
    c.set_window_size(1280, 1600).await.unwrap();
    log_in(&c, &base, "alice", OPERATOR_TOKEN).await;

    // The selector lists both domains, default first and selected; every card names it.
    let options = js(
        &c,
        "return [...document.querySelectorAll('#domain-select option')].map((o) => o.value)",
    )
    .await;
    assert_eq!(options, json!(["default", "search"]));
    assert_eq!(value_of(&c, "#domain-select").await, json!("default"));
    wait_for(&c, "the dial's domain tag", "document.querySelector('#dial-domain .domain-tag')")
        .await;
    assert_eq!(text(&c, "#dial-domain").await, "◆ default");

    // Select `search`: the URL keeps it, the tags and the hint say it.
    c.find(Locator::Css("#domain-select")).await.unwrap().select_by_value("search").await.unwrap();
    wait_for(&c, "the URL's domain", "location.search === '?domain=search'").await;
    assert_eq!(text(&c, "#dial-domain").await, "◆ search");
    assert_eq!(text(&c, "#zones-domain").await, "◆ search");
    assert_eq!(text(&c, "#units-domain").await, "◆ search");
    let hint = text(&c, "#domain-hint").await;
    assert!(
        hint.starts_with("Showing domain search: ")
            && hint.contains("Domain default does not move."),
        "{hint}"
    );
    assert_eq!(
        js(&c, "return document.getElementById('domain-bar').classList.contains('named')").await,
        json!(true)
    );
    let drain_link =
        js(&c, "return document.getElementById('drain-start').getAttribute('href')").await;
    assert_eq!(drain_link, json!("/ui/drain?domain=search"));

    // Move search's dial to 30 % blue: the summary names the domain and the one that stays, and
    // the button waits for the domain's name; the default domain's name is not enough.
    type_into(&c, "#dial-number", "30").await;
    click(&c, "#dial-review").await;
    wait_for(&c, "the confirm step", "!document.getElementById('dial-confirm').hidden").await;
    let summary = text(&c, "#dial-summary").await;
    assert_eq!(
        summary,
        "In domain search, 20 % of users will move from blue (az-b) to green (az-a). The search dial goes from 50 % to 30 % blue. Domain default does not move."
    );
    assert_eq!(text(&c, "#dial-apply").await, "Move the search dial");
    assert_eq!(text(&c, "#dial-domain-expected").await, "search");
    let go_disabled = "return document.getElementById('dial-apply').disabled";
    assert_eq!(js(&c, go_disabled).await, json!(true), "nothing typed yet");
    type_into(&c, "#dial-domain-name", "default").await;
    assert_eq!(js(&c, go_disabled).await, json!(true), "the other domain's name");
    type_into(&c, "#dial-reason", "browser test: search to 30").await;
    // Enter in the reason with the wrong name typed: refused in the page, nothing sent.
    c.find(Locator::Css("#dial-reason")).await.unwrap().send_keys("\u{E007}").await.unwrap();
    wait_for(&c, "the typed-name message", "!document.getElementById('dial-confirm-error').hidden")
        .await;
    assert!(text(&c, "#dial-confirm-error").await.starts_with("Type the domain’s name, search,"));
    assert_eq!(routing(&base)["version"], version, "nothing was sent");
    type_into(&c, "#dial-domain-name", "search").await;
    assert_eq!(js(&c, go_disabled).await, json!(false), "the typed name matches");
    js(&c, "window.scrollTo(0, 0)").await;
    shots_at_both_widths(&c, "27-domain-dial-confirm", 1600).await;
    phone_shot(&c, "#dial-card", "27-domain-dial-confirm-390-dial").await;
    // Enter twice: one change.
    let field = c.find(Locator::Css("#dial-domain-name")).await.unwrap();
    field.send_keys("\u{E007}\u{E007}").await.unwrap();
    wait_for(&c, "the dial's success message", "!document.getElementById('dial-ok').hidden").await;
    assert_eq!(
        text(&c, "#dial-ok").await,
        format!("Done: the search dial is at 30 % blue (routing version {}).", version + 1)
    );

    // Through the API: search moved, the default domain did not (same map, same dial).
    let after = routing(&base);
    assert_eq!(after["version"].as_u64(), Some(version + 1), "{after}");
    assert_eq!(after["domains"]["search"]["blue_percent"], 30.0, "{after}");
    assert_eq!(after["blue_percent"], before["blue_percent"], "the default dial stays");
    assert_eq!(after["unit_map"], before["unit_map"], "the default map stays");
    assert_eq!(audit_by(&base, "dial"), vec!["alice"], "Enter twice sent one change");
    // The page shows search's dial, split and units; the default domain's stay 50 %.
    wait_for(
        &c,
        "search at 30 %",
        "document.getElementById('blue-percent').textContent === '30 %'",
    )
    .await;
    assert_eq!(text(&c, "#green-percent").await, "70 %");
    assert_eq!(text(&c, "#zone-units-az-b").await, "30 of 100");
    assert_eq!(text(&c, "#zone-units-az-a").await, "70 of 100");
    assert_eq!(value_of(&c, "#dial-number").await, json!("30"));

    // Reload: the selection holds.
    c.refresh().await.unwrap();
    wait_for(
        &c,
        "the first poll",
        "document.getElementById('routing-version').textContent !== '–'",
    )
    .await;
    wait_for(
        &c,
        "search after the reload",
        "document.getElementById('blue-percent').textContent === '30 %'",
    )
    .await;
    assert_eq!(value_of(&c, "#domain-select").await, json!("search"));
    assert_eq!(js(&c, "return location.search").await, json!("?domain=search"));
    assert_eq!(text(&c, "#dial-domain").await, "◆ search");
    // The hand-made evacuation drain keeps the domain too.
    let evacuate =
        js(&c, "return document.getElementById('evacuate-drain-az-b').getAttribute('href')");
    assert_eq!(evacuate.await, json!("/ui/drain?mode=evacuate&zone=az-b&domain=search"));

    // The Move units preview names the domain too (then cancelled: nothing moves).
    preview_move(&c, "0-4", "az-a", "browser test: search units").await;
    wait_for(&c, "the units preview", "!document.getElementById('units-confirm').hidden").await;
    assert_eq!(
        text(&c, "#units-confirm-title").await,
        "Confirm: move 5 units of domain search to az-a"
    );
    let preview = text(&c, "#units-preview-summary").await;
    assert!(
        preview.starts_with("5 units (5 % of search’s users) will move to az-a in domain search")
            && preview.ends_with("Domain default does not move."),
        "{preview}"
    );
    let rows = js(
        &c,
        "return [...document.querySelectorAll('#units-preview-zones tbody tr')].map((r) => [r.dataset.zone, r.children[1].textContent, r.querySelector('.units-after').textContent])",
    )
    .await;
    assert_eq!(rows, json!([["az-b", "30", "25"], ["az-a", "70", "75"]]), "search's units");
    assert_eq!(text(&c, "#units-confirm-go").await, "Move search’s units to az-a");
    click(&c, "#units-confirm-cancel").await;
    assert_eq!(routing(&base)["version"].as_u64(), Some(version + 1), "a preview moves nothing");

    // Start a drain from the overview's link: the form has search selected and says so.
    c.goto(&format!("{base}/ui/drain?domain=search")).await.unwrap();
    wait_for(&c, "the drain form", "document.getElementById('drain-form')").await;
    assert_eq!(value_of(&c, "#f-domain").await, json!("search"));
    assert_eq!(text(&c, "#drain-submit").await, "Start the drain in domain search");
    type_into(&c, "#f-target", "0").await;
    type_into(&c, "#f-step", "10").await;
    type_into(&c, "#f-interval", "1h").await;
    type_into(&c, "#f-reason", "browser test: drain search's az-b").await;
    shots_at_both_widths(&c, "28-domain-drain-form", 1400).await;
    click(&c, "#drain-submit").await;
    wait_for(
        &c,
        "the overview after the start",
        "location.pathname === '/ui' && document.getElementById('drain-heading')",
    )
    .await;
    assert_eq!(js(&c, "return location.search").await, json!("?started=1&domain=search"));
    let heading = text(&c, "#drain-heading").await;
    assert_eq!(heading, "Drain 1 in domain search: az-b → az-a");
    let panel = text(&c, "#drain-view").await;
    assert!(!panel.contains("null"), "no value shows as null: {panel}");
    let all = drains(&base);
    let drain = &all[0];
    assert_eq!((drain["domain"].as_str(), drain["zone"].as_str()), (Some("search"), Some("az-b")));
    assert_eq!(routing(&base)["unit_map"], before["unit_map"], "the default map stays");
    js(&c, "window.scrollTo(0, 0)").await;
    shots_at_both_widths(&c, "29-domain-drain-running", 1600).await;
    drain_action(&base, &drain["id"], "abort");

    // A link to a domain the table does not have: said, and the default domain shown.
    c.goto(&format!("{base}/ui?domain=serch")).await.unwrap();
    wait_for(&c, "the unknown-domain notice", "!document.getElementById('domain-unknown').hidden")
        .await;
    assert_eq!(
        text(&c, "#domain-unknown").await,
        "There is no routing domain “serch” in this table (domains: default, search). Showing the default domain instead: choose another above."
    );
    assert_eq!(value_of(&c, "#domain-select").await, json!("default"));
    assert_eq!(js(&c, "return location.search").await, json!(""));
    wait_for(
        &c,
        "the default dial",
        "document.getElementById('blue-percent').textContent === '50 %'",
    )
    .await;
    assert_eq!(text(&c, "#zone-units-az-b").await, "50 of 100");
    // And the drain form never picks a domain for an unknown one.
    c.goto(&format!("{base}/ui/drain?domain=serch")).await.unwrap();
    wait_for(&c, "the drain form", "document.getElementById('drain-form')").await;
    assert_eq!(value_of(&c, "#f-domain").await, json!(""));
    assert!(text(&c, "#e-domain").await.starts_with("There is no routing domain “serch”"));

    c.close().await.unwrap();
    drop(outcomes);
    drop(driver);
    eprintln!(
        "two-domain browser test: {:.1} s including chromium start-up",
        started.elapsed().as_secs_f64()
    );
    drop(server);
}
