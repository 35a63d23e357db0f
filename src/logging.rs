//! Structured logs: every event of `serve`, `edge` and `demo` goes to stderr through `tracing`,
//! with a level, a message an operator can read and fields a machine can filter on (`[log]
//! format = "json"` writes one JSON object per line). The CLI's own answers stay plain text.
//!
//! `[log] level` takes a filter in `RUST_LOG` syntax (`warn`, `tidegate=debug,rocket=warn`), and
//! `TIDEGATE_LOG__LEVEL` / `TIDEGATE_LOG__FORMAT` override it like any other key.

use crate::config::LogConfig;

/// Installs the subscriber once for the process (later calls, as in tests that start several
/// servers in one process, keep the first).
pub fn init(config: &LogConfig) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false);
    let _ = if config.json {
        builder.json().flatten_event(true).with_current_span(false).try_init()
    } else {
        builder.try_init()
    };
}
