//! `tidegate serve`: open the log, rebuild the state, and run the HTTP edge until shutdown.

use std::sync::Arc;

use crate::config::Config;
use crate::http::{self, App, now_ms};
use crate::service::coordinator::{Boot, Coordinator, StartError};
use crate::store::FileLog;

/// Opens the embedded file log under `config.data_dir` and rebuilds the coordinator from it.
/// Torn-tail warnings are printed to stderr: they are expected after a crash, and worth seeing.
pub fn open_coordinator(config: &Config) -> Result<Coordinator, StartError> {
    let opened = FileLog::open(&config.data_dir)?;
    for warning in &opened.warnings {
        eprintln!("tidegate: warning: {warning}");
    }
    let boot = Boot { genesis: config.genesis, zones: config.zones.clone(), now_ms: now_ms() };
    Coordinator::start(Box::new(opened.log), opened.entries, boot)
}

/// Runs the server until Ctrl-C or SIGTERM.
pub fn serve(config: Config) -> Result<(), String> {
    let config = Arc::new(config);
    let coordinator = open_coordinator(&config).map_err(|e| e.to_string())?;
    let table = coordinator.table();
    eprintln!(
        "tidegate: routing version {} ({}% blue in {}, {}% green in {}); log: {}",
        table.version(),
        table.blue_percent(),
        config.zones.blue,
        100.0 - table.blue_percent(),
        config.zones.green,
        coordinator.log_description()
    );
    if config.operators.is_empty() {
        eprintln!(
            "tidegate: note: no operators configured, so changes are refused; run `tidegate token new --name NAME`"
        );
    }
    let app = App::new(Arc::new(coordinator), config);
    http::run(app)
}
