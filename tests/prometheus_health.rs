//! The Prometheus health source against a real Prometheus (Debian's package, `scripts/prometheus.sh`).
//!
//! The test serves a small metrics target whose error counters it controls, has a real
//! Prometheus scrape it every second, and runs a drain whose guard reads the error rates through
//! PromQL. If Prometheus cannot be installed or started, the test fails: it never skips.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use serde_json::json;
use tidegate::core::Reading;
use tidegate::service::health::PrometheusSource;

/// Counters for two zones, advanced 100 requests per zone every 100 ms.
struct Target {
    port: u16,
    az_a_error_per_mille: Arc<AtomicU32>,
}

fn serve_target() -> Target {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let counters: Arc<[AtomicU64; 4]> = Arc::new(Default::default()); // a_req, a_err, b_req, b_err
    let az_a_error_per_mille = Arc::new(AtomicU32::new(0));
    let (c, e) = (Arc::clone(&counters), Arc::clone(&az_a_error_per_mille));
    std::thread::spawn(move || {
        loop {
            c[0].fetch_add(100, Ordering::SeqCst);
            c[1].fetch_add(u64::from(e.load(Ordering::SeqCst)) / 10, Ordering::SeqCst);
            c[2].fetch_add(100, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let body = format!(
                "# TYPE http_requests_total counter\nhttp_requests_total{{zone=\"az-a\"}} {}\nhttp_requests_total{{zone=\"az-b\"}} {}\n# TYPE http_requests_errors_total counter\nhttp_requests_errors_total{{zone=\"az-a\"}} {}\nhttp_requests_errors_total{{zone=\"az-b\"}} {}\n",
                counters[0].load(Ordering::SeqCst),
                counters[2].load(Ordering::SeqCst),
                counters[1].load(Ordering::SeqCst),
                counters[3].load(Ordering::SeqCst)
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Target { port, az_a_error_per_mille }
}

const ERROR_RATE: &str = r#"sum(rate(http_requests_errors_total{zone="$zone"}[5s])) / sum(rate(http_requests_total{zone="$zone"}[5s]))"#;
const REQUESTS: &str = r#"sum(increase(http_requests_total{zone="$zone"}[5s]))"#;

#[test]
fn the_drain_guard_reads_real_error_rates_through_promql() {
    let target = serve_target();
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(
        &dir.path().join("prometheus"),
        &format!("127.0.0.1:{}", target.port),
        None,
    );

    // The source on its own: a known rate, an empty result, a broken query, a dead server.
    let source = PrometheusSource::new(&prometheus.url, ERROR_RATE, Some(REQUESTS), 2000);
    assert!(
        wait_until(Duration::from_secs(20), || matches!(
            source.read("az-a").0,
            Reading::Known { .. }
        )),
        "az-a never became known: {:?}",
        source.read("az-a")
    );
    let (reading, requests) = source.read("az-b");
    assert!(
        matches!(reading, Reading::Known { error_rate, .. } if error_rate == 0.0),
        "{reading:?}"
    );
    assert!(requests.unwrap() > 100, "{requests:?}");
    let empty = PrometheusSource::new(
        &prometheus.url,
        r#"sum(rate(no_such_metric_total{zone="$zone"}[5s]))"#,
        None,
        2000,
    );
    assert!(matches!(empty.read("az-a").0, Reading::Unknown { why } if why.contains("no series")));
    let broken = PrometheusSource::new(&prometheus.url, "sum(rate($zone", None, 2000);
    assert!(matches!(broken.read("az-a").0, Reading::Unknown { why } if why.contains("refused")));
    let dead = PrometheusSource::new("http://127.0.0.1:9", ERROR_RATE, None, 500);
    assert!(
        matches!(dead.read("az-a").0, Reading::Unknown { why } if why.contains("did not answer"))
    );

    // tidegate with the Prometheus source, guarding a drain.
    let config = dir.path().join("tidegate.toml");
    std::fs::write(
        &config,
        config_toml(&format!(
            "[drain]\ntick = \"50ms\"\n[health]\nsource = \"prometheus\"\n[health.prometheus]\nurl = \"{}\"\nerror_rate_query = '{ERROR_RATE}'\nrequests_query = '{REQUESTS}'\n",
            prometheus.url
        )),
    )
    .unwrap();
    let server = Server::start(&config, &dir.path().join("data"));
    let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
    assert_eq!(zones["zones"][1]["source"], "prometheus");
    assert_eq!(zones["zones"][1]["error_rate"], 0.0, "{zones}");

    let (status, body) = {
        let mut response = agent()
            .post(&format!("{}/v1/drains", server.url))
            .header("Authorization", &format!("Bearer {OPERATOR_TOKEN}"))
            .send_json(json!({
                "zone": "az-b", "target_percent": 0, "step_percent": 10, "interval": "1s",
                "guard": {"max_error_rate": 0.05, "min_requests": 100, "breaches": 2, "on_breach": "pause"},
                "reason": "prometheus-guarded drain"
            }))
            .unwrap();
        (response.status().as_u16(), response.body_mut().read_json::<serde_json::Value>().unwrap())
    };
    assert_eq!(status, 201, "{body}");
    let drain = || get_json(&format!("{}/v1/drains/1", server.url)).1;
    assert!(
        wait_until(Duration::from_secs(10), || drain()["steps_done"].as_u64() >= Some(1)),
        "{}",
        drain()
    );

    target.az_a_error_per_mille.store(300, Ordering::SeqCst);
    assert!(wait_until(Duration::from_secs(30), || drain()["state"] == "paused"), "{}", drain());
    let paused = drain();
    let reason = paused["hold_reason"].as_str().unwrap();
    assert!(reason.contains("receiving zone az-a") && reason.contains("error rate"), "{reason}");
    let (_, zones) = get_json(&format!("{}/v1/zones", server.url));
    let az_a_rate = zones["zones"][1]["error_rate"].as_f64().unwrap();
    assert!(az_a_rate > 0.05, "az-a's PromQL error rate is {az_a_rate}");
}
