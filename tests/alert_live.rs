//! An alert fired by a real Prometheus from the real binary's metrics (issue 20): a zone whose
//! reporters go silent while it has users pages as `TidegateZoneHealthUnknown`, the other zone
//! does not, and the alert resolves when the reports come back. The rule is the shipped one from
//! `dashboards/rules/tidegate.rules.yml`, with its `for: 1m` shortened to 3 s so the test takes
//! seconds (the expression, which is what could be wrong, is unchanged).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{OPERATOR_TOKEN, Prometheus, Server, agent, config_toml, wait_until};
use serde_json::{Value, json};

/// The zones `TidegateZoneHealthUnknown` fires for now.
fn firing(prometheus: &Prometheus) -> Vec<String> {
    let answer =
        prometheus.query(r#"ALERTS{alertname="TidegateZoneHealthUnknown", alertstate="firing"}"#);
    answer["data"]["result"]
        .as_array()
        .map(|series| {
            series.iter().filter_map(|s| s["metric"]["zone"].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_silent_zone_pages_in_a_live_prometheus_and_the_page_resolves_when_it_reports_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tidegate.toml");
    std::fs::write(
        &config,
        config_toml(
            "[health]\nwindow = \"6s\"\ndetect_window = \"3s\"\nsilent_after = \"2s\"\npublish_interval = \"500ms\"\n",
        ),
    )
    .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));

    // az-a reports all along; az-b until `b_silent`.
    let (stop, b_silent) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let feeder = {
        let (url, stop, b_silent) = (server.url.clone(), Arc::clone(&stop), Arc::clone(&b_silent));
        std::thread::spawn(move || {
            let agent = agent();
            while !stop.load(Ordering::SeqCst) {
                let mut batch =
                    vec![json!({"zone": "az-a", "color": "green", "ok": 50, "error": 0})];
                if !b_silent.load(Ordering::SeqCst) {
                    batch.push(json!({"zone": "az-b", "color": "blue", "ok": 50, "error": 0}));
                }
                let _ = agent
                    .post(&format!("{url}/v1/outcomes"))
                    .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
                    .send_json(Value::Array(batch));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("dashboards/rules/tidegate.rules.yml"),
    )
    .unwrap();
    let at = shipped.find("alert: TidegateZoneHealthUnknown").expect("the rule is shipped");
    let for_at = at + shipped[at..].find("for: 1m").expect("its for: 1m");
    let rules = format!("{}for: 3s{}", &shipped[..for_at], &shipped[for_at + "for: 1m".len()..]);
    let rules_file = dir.path().join("rules.yml");
    std::fs::write(&rules_file, rules).unwrap();
    let target = server.url.trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(&dir.path().join("prometheus"), &target, Some(&rules_file));

    // The control: both zones reporting, nothing fires (long enough for `for: 3s` twice over).
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(firing(&prometheus), Vec::<String>::new(), "an alert with both zones reporting");

    b_silent.store(true, Ordering::SeqCst);
    let silenced = Instant::now();
    let fired = wait_until(Duration::from_secs(30), || firing(&prometheus) == ["az-b"]);
    let fired_after = silenced.elapsed();
    assert!(fired, "az-b silent for {fired_after:?}: firing {:?}", firing(&prometheus));
    println!(
        "TidegateZoneHealthUnknown fired for az-b {fired_after:?} after its reporters stopped (silent_after 2s, for 3s, 1s scrapes)"
    );

    b_silent.store(false, Ordering::SeqCst);
    let resolved = wait_until(Duration::from_secs(30), || firing(&prometheus).is_empty());
    assert!(resolved, "still firing after az-b reports again: {:?}", firing(&prometheus));
    stop.store(true, Ordering::SeqCst);
    feeder.join().unwrap();
}
