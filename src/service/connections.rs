//! The connection guard of a process's listeners, built from its configuration.
//!
//! One [`Guard`] per process: the coordinator's main (Rocket) port and fast port share one, and
//! `tidegate edge` has its own. The guard itself (admission, eviction of the oldest unproven
//! connection, the 503 refusal, the header read deadline) is the `tidegate-conn-guard` crate,
//! which the patched Rocket (`vendor/rocket`) and `http_fast` both call; this module raises the
//! open-file limit, derives the connection limit, and turns the guard's events into metrics
//! and a rate-limited warning.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use tidegate_conn_guard::{Admission, Event, Guard, Limits, Ticket, refuse};

use crate::config::ConnectionLimits;
use crate::telemetry;

/// At most one warning line per this interval, whatever the rate of events.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Raises the soft open-file limit to the hard one, derives `max_connections` when it is not
/// configured, and builds the guard. `section` (`server`, `edge`) names the keys in warnings.
pub fn guard(limits: &ConnectionLimits, section: &'static str) -> Arc<Guard> {
    let nofile = tidegate_conn_guard::raise_nofile_limit();
    let max_connections = match (limits.max_connections, nofile) {
        (Some(max), _) => max,
        (None, Some(nofile)) => tidegate_conn_guard::derived_max_connections(nofile),
        // The limit cannot be read (not unix): the usual 1 024.
        (None, None) => tidegate_conn_guard::derived_max_connections(1024),
    };
    if let Some(nofile) = nofile
        && limits.max_connections.is_some()
        && max_connections as u64 >= nofile
    {
        tracing::warn!(
            "{section}.max_connections ({max_connections}) is not below the open-file limit ({nofile}): idle sockets can exhaust it before the guard acts; raise LimitNOFILE or lower the key"
        );
    }
    telemetry::set_connections_limit(max_connections);
    let warner = Warner::new(section, max_connections);
    Guard::new(
        Limits {
            max_connections,
            header_read_timeout: Duration::from_millis(limits.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(limits.idle_timeout_ms),
        },
        move |event| warner.event(event),
    )
}

/// Counts events, and says what happened at most once per [`WARN_EVERY`].
struct Warner {
    section: &'static str,
    max_connections: usize,
    refused: AtomicU64,
    evicted: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Warner {
    fn new(section: &'static str, max_connections: usize) -> Warner {
        Warner {
            section,
            max_connections,
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    fn event(&self, event: Event) {
        let name = match event {
            Event::Refused => "refused",
            Event::Evicted => "evicted",
            Event::HeaderTimeout => "header",
            Event::IdleTimeout => "idle",
        };
        telemetry::connection_event(name);
        // Timeouts are routine (a client that goes away); only the limit is worth a line.
        match event {
            Event::Refused => self.refused.fetch_add(1, Ordering::Relaxed),
            Event::Evicted => self.evicted.fetch_add(1, Ordering::Relaxed),
            Event::HeaderTimeout | Event::IdleTimeout => return,
        };
        let now = Instant::now();
        let Ok(mut last) = self.last.try_lock() else { return };
        if last.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return;
        }
        *last = Some(now);
        drop(last);
        let evicted = self.evicted.swap(0, Ordering::Relaxed);
        let refused = self.refused.swap(0, Ordering::Relaxed);
        tracing::warn!(
            "{}.max_connections ({}) reached: {evicted} connection(s) closed to admit new ones (idle, half-sent, or the oldest of the client holding the most) and {refused} refused with 503 since the last warning (tidegate_connections_evicted_total, tidegate_connections_refused_total)",
            self.section,
            self.max_connections
        );
    }
}
