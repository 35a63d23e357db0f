//! Metrics that the outside review found wrong: counters registered at 0, per-zone gauges that
//! move on their own and clear when health becomes unknown, the breach counter's zone label.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

fn metrics(server: &Server) -> String {
    let mut response = agent().get(&format!("{}/metrics", server.url)).call().unwrap();
    response.body_mut().read_to_string().unwrap()
}

/// The value of the series written exactly as `series` (name plus labels), if exported.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?.strip_prefix(' ')?;
        Some(if rest == "NaN" { f64::NAN } else { rest.parse().unwrap() })
    })
}

fn start(extra: &str) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(&config, config_toml(extra)).unwrap();
    (Server::start(&config, &dir.path().join("data")), dir)
}

#[test]
fn counters_are_exported_at_zero_before_the_first_event() {
    let (server, _dir) = start("");
    let text = metrics(&server);
    for series in [
        r#"tidegate_drain_guard_breaches_total{zone="az-a"}"#,
        r#"tidegate_drain_guard_breaches_total{zone="az-b"}"#,
        r#"tidegate_drain_holds_total{kind="breach"}"#,
        r#"tidegate_changes_total{action="dial"}"#,
        r#"tidegate_changes_total{action="drain_step"}"#,
        r#"tidegate_zone_requests_total{zone="az-a",color="green"}"#,
        r#"tidegate_zone_errors_total{zone="az-b",color="blue"}"#,
        r#"tidegate_presence_dropped_total{reason="unsigned"}"#,
        r#"tidegate_presence_dropped_total{reason="bad_signature"}"#,
    ] {
        assert_eq!(value(&text, series), Some(0.0), "{series} missing or not 0 in:\n{text}");
    }
}

#[test]
fn zone_gauges_move_on_a_timer_and_clear_when_health_becomes_unknown() {
    let (server, _dir) = start("[health]\nwindow = \"1s\"\npublish_interval = \"100ms\"");
    let (status, body) = post_json(
        &format!("{}/v1/outcomes", server.url),
        OPERATOR_TOKEN,
        json!({"zone": "az-a", "color": "green", "ok": 90, "error": 10}),
    );
    assert_eq!(status, 200, "{body}");
    // Nobody reads GET /v1/zones and no drain runs: the timer alone publishes.
    let ratio = r#"tidegate_zone_error_ratio{zone="az-a"}"#;
    let known = r#"tidegate_zone_health_known{zone="az-a"}"#;
    assert!(
        wait_until(Duration::from_secs(3), || value(&metrics(&server), ratio) == Some(0.1)),
        "{}",
        metrics(&server)
    );
    assert_eq!(value(&metrics(&server), known), Some(1.0));
    // The window empties: health is unknown and the ratio is cleared, not frozen at 0.1.
    assert!(
        wait_until(Duration::from_secs(4), || value(&metrics(&server), known) == Some(0.0)),
        "{}",
        metrics(&server)
    );
    let text = metrics(&server);
    assert!(value(&text, ratio).is_some_and(f64::is_nan), "{text}");
}

#[test]
fn a_breach_of_the_receiving_zone_is_counted_under_that_zone() {
    let (server, _dir) = start("[health]\nwindow = \"1s\"\n[drain]\ntick = \"20ms\"\n");
    let outcomes = format!("{}/v1/outcomes", server.url);
    // az-b (drained) is healthy; az-a (receiving) fails 30 % of its requests.
    let feed = || {
        let body = json!([
            {"zone": "az-b", "color": "blue", "ok": 100, "error": 0},
            {"zone": "az-a", "color": "green", "ok": 70, "error": 30}
        ]);
        assert_eq!(post_json(&outcomes, OPERATOR_TOKEN, body).0, 200);
    };
    feed();
    let (status, body) = post_json(
        &format!("{}/v1/drains", server.url),
        OPERATOR_TOKEN,
        json!({
            "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "100ms",
            "guard": {"max_error_rate": 0.02, "min_requests": 10, "breaches": 5, "on_breach": "pause"},
            "reason": "breach label test"
        }),
    );
    assert_eq!(status, 201, "{body}");
    let breached = wait_until(Duration::from_secs(5), || {
        feed();
        value(&metrics(&server), r#"tidegate_drain_guard_breaches_total{zone="az-a"}"#)
            .is_some_and(|v| v >= 1.0)
    });
    let text = metrics(&server);
    assert!(breached, "{text}");
    assert_eq!(value(&text, r#"tidegate_drain_guard_breaches_total{zone="az-b"}"#), Some(0.0));
}
