//! `tidegate edge`: a local evaluator next to a gateway or a group of services.
//!
//! It watches one or more coordinators (`http://` or `https://`) through the client `Router`
//! (subscriber kind `edge`, disk cache with the log id, first choice spread by subscriber ID,
//! failover in list order, a coordinator silent for `edge.coordinator_timeout` left as stalled)
//! and serves tagging, the gateway check and OFREP from the table it holds (see `http::edge`).
//! When every coordinator is unreachable it keeps serving its last table, says so in `/readyz`
//! and `/metrics`, and logs each change of reachability.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{Identity, Router, RouterOptions, TableHook};
use crate::config::Config;
use crate::http::edge::EdgeApp;
use crate::service::edge::{Relay, report_leaves};

/// Runs the edge until Ctrl-C or SIGTERM.
pub fn run(config: Config) -> Result<(), String> {
    let edge = &config.edge;
    if edge.coordinators.is_empty() {
        return Err(
            "edge.coordinators: give at least one coordinator URL (--coordinator http://host:port)"
                .into(),
        );
    }
    if let Some(dir) = edge.cache_path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("edge.cache_path: cannot create {}: {e}", dir.display()))?;
    }
    let subscriber_id =
        edge.subscriber_id.clone().unwrap_or_else(|| format!("edge-{}-{}", hostname(), edge.port));
    let identity = Identity {
        subscriber_id: subscriber_id.clone(),
        zone: edge.zone.clone(),
        kind: "edge".into(),
    };
    // The fan-out tree: each table the edge takes is re-served to the subscribers watching it.
    let relay = Arc::new(Relay::new(&config));
    let hook = {
        let relay = Arc::clone(&relay);
        TableHook(Arc::new(move |version, data: &str| relay.publish(version, data)))
    };
    let options = RouterOptions {
        token: edge.token.clone(),
        cache_path: Some(edge.cache_path.clone()),
        fallback: config.fallback,
        read_timeout: edge.coordinator_timeout,
        // For https:// coordinators: --ca-file / TIDEGATE_CA_FILE, else `[client] ca_file`,
        // else the system's roots (checked here, so a wrong CA file stops the start).
        ca_file: config.client_ca_file.clone(),
        on_table: relay.serves.then_some(hook),
        ..RouterOptions::default()
    };
    let router = Arc::new(
        Router::connect(&edge.coordinators.join(","), identity, options)
            .map_err(|e| format!("edge.coordinators: {e}"))?,
    );
    spawn_reachability_log(Arc::downgrade(&router));
    if relay.serves {
        // A table from the disk cache is re-served too (the edge serves it to gateways).
        if let Some((version, data)) = router.event() {
            relay.publish(version, &data);
        }
    }
    if relay.registers {
        let (router, relay) = (Arc::downgrade(&router), Arc::clone(&relay));
        std::thread::Builder::new()
            .name("tidegate-edge-leaves".into())
            .spawn(move || report_leaves(router, relay, subscriber_id))
            .map_err(|e| format!("cannot start the leaves reporter: {e}"))?;
    }
    crate::http::edge::run(EdgeApp::new(router, Arc::new(config), relay))
}

/// Logs to stderr whenever the edge gains or loses its coordinator.
fn spawn_reachability_log(router: std::sync::Weak<Router>) {
    std::thread::spawn(move || {
        let mut last: Option<(bool, Option<u64>)> = None;
        while let Some(router) = router.upgrade() {
            let status = router.status();
            let now = (status.connected, status.version);
            if last.map(|(connected, _)| connected) != Some(status.connected) {
                tracing::info!(component = "edge", "{status}");
            }
            last = Some(now);
            drop(router);
            std::thread::sleep(Duration::from_millis(500));
        }
    });
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty() && h.len() <= 40)
        .unwrap_or_else(|| "local".into())
}
