//! The connection guard: how many connections a process serves at once, and which one gives
//! way when it is full.
//!
//! Every listener of a process shares one [`Guard`]. [`Guard::admit`] is called for each
//! accepted connection before any byte is read from it:
//!
//! - below `max_connections` the connection is admitted;
//! - at the limit, the **oldest unproven** connection (one that has not yet completed the head
//!   of a request: idle since accept, or half-sent) is evicted and the new one admitted, so idle
//!   and half-sent sockets can never keep a real client out;
//! - when every connection is proven (watch streams, kept-alive clients, requests in flight),
//!   the client (source address) holding the most connections gives its oldest one up, as long
//!   as it holds at least two more than the newcomer's client: one client's flood of proven
//!   connections can no longer keep another client out (max-min fairness per address);
//! - only when the newcomer's client already holds as many as any other is it refused:
//!   [`refuse`] writes a short `HTTP/1.1 503` with
//!   `{"error":"too_many_connections","detail":"..."}` and closes it.
//!
//! A connection's [`Ticket`] is proven ([`Ticket::prove`]) when a request head has been parsed.
//! [`Ticket::closing`] resolves when the listener must drop the connection: evicted, or still
//! unproven `header_read_timeout` after it was accepted. The idle timeout of a kept-alive
//! connection is hyper's header read timer (it starts when the connection goes idle), set by
//! each listener from [`Limits::idle_timeout`].
//!
//! Events (refusals, evictions, timeouts) are counted here and passed to the process's
//! callback, which turns them into metrics and warnings.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// The guard's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most connections served at once, over every listener sharing the guard (at least 1).
    pub max_connections: usize,
    /// How long a new connection may take to send the complete head of its first request.
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may wait, idle, for the complete head of its next request.
    pub idle_timeout: Duration,
}

/// What the guard did, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new connection was refused with 503: every connection was proven.
    Refused,
    /// The oldest unproven connection was closed to admit a new one.
    Evicted,
    /// A connection did not complete its first request head within `header_read_timeout`.
    HeaderTimeout,
    /// A kept-alive connection stayed idle (or half-sent its next head) past `idle_timeout`.
    IdleTimeout,
}

/// Why [`Ticket::closing`] says the connection must go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    Evicted,
    HeaderTimeout,
}

/// The outcome of [`Guard::admit`].
pub enum Admission {
    Admitted(Ticket),
    /// At the limit with every connection proven: answer with [`refuse`].
    Refused,
}

type Callback = Box<dyn Fn(Event) + Send + Sync>;

/// One process's connection accounting, shared by all its listeners.
pub struct Guard {
    limits: Limits,
    slots: Mutex<Slots>,
    on_event: Callback,
    refused: AtomicU64,
    evicted: AtomicU64,
    header_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
}

/// Who a connection is from: its source address (`None` when the listener cannot tell).
pub type Peer = Option<IpAddr>;

#[derive(Default)]
struct Slots {
    next_id: u64,
    /// Every open connection not evicted, by admission order (IDs only grow).
    open: BTreeMap<u64, (Peer, Arc<Notify>)>,
    /// The unproven ones among them: the first is the oldest.
    unproven: BTreeSet<u64>,
    /// The open ones per client address.
    by_peer: HashMap<Peer, BTreeSet<u64>>,
}

impl Slots {
    /// Takes connection `id` out of the accounting (evicted or closed); its notify if it was in.
    fn remove(&mut self, id: u64) -> Option<Arc<Notify>> {
        let (peer, notify) = self.open.remove(&id)?;
        self.unproven.remove(&id);
        if let Some(ids) = self.by_peer.get_mut(&peer) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_peer.remove(&peer);
            }
        }
        Some(notify)
    }

    /// The connection that gives way to a newcomer from `peer` at the limit: the oldest
    /// unproven one, else the oldest of the client holding the most when it holds at least two
    /// more than `peer`; `None`: refuse the newcomer.
    fn victim(&self, peer: &Peer) -> Option<u64> {
        if let Some(id) = self.unproven.first() {
            return Some(*id);
        }
        let mine = self.by_peer.get(peer).map_or(0, BTreeSet::len);
        let (_, ids) = self.by_peer.iter().max_by_key(|(_, ids)| ids.len())?;
        (ids.len() > mine + 1).then(|| ids.first().copied()).flatten()
    }
}

impl Guard {
    /// A guard with `limits` (a `max_connections` of 0 is taken as 1), calling `on_event` for
    /// every refusal, eviction and timeout (keep it cheap: it runs on the accept path).
    pub fn new(limits: Limits, on_event: impl Fn(Event) + Send + Sync + 'static) -> Arc<Guard> {
        let limits = Limits { max_connections: limits.max_connections.max(1), ..limits };
        Arc::new(Guard {
            limits,
            slots: Mutex::new(Slots::default()),
            on_event: Box::new(on_event),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // The critical sections cannot panic; a poisoned lock still holds consistent counts.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`Guard::admit_from`] for a connection whose source address is unknown.
    pub fn admit(self: &Arc<Self>) -> Admission {
        self.admit_from(None)
    }

    /// Admits a just-accepted connection from `peer`; when full, another connection gives way
    /// (see the module's rules) or the new one is refused.
    pub fn admit_from(self: &Arc<Self>, peer: Peer) -> Admission {
        let (evicted, ticket) = {
            let mut slots = self.slots();
            let evicted = if slots.open.len() < self.limits.max_connections {
                None
            } else if let Some(id) = slots.victim(&peer) {
                slots.remove(id)
            } else {
                drop(slots);
                self.note(Event::Refused);
                return Admission::Refused;
            };
            let id = slots.next_id;
            slots.next_id += 1;
            let notify = Arc::new(Notify::new());
            slots.open.insert(id, (peer, Arc::clone(&notify)));
            slots.unproven.insert(id);
            slots.by_peer.entry(peer).or_default().insert(id);
            let ticket = Ticket {
                guard: Arc::clone(self),
                id,
                accepted: Instant::now(),
                proven: AtomicBool::new(false),
                notify,
            };
            (evicted, ticket)
        };
        if let Some(notify) = evicted {
            // `notify_one` keeps a permit when nobody waits yet, so the eviction is never lost.
            notify.notify_one();
            self.note(Event::Evicted);
        }
        Admission::Admitted(ticket)
    }

    /// Counts `event` and tells the callback.
    pub fn note(&self, event: Event) {
        let counter = match event {
            Event::Refused => &self.refused,
            Event::Evicted => &self.evicted,
            Event::HeaderTimeout => &self.header_timeouts,
            Event::IdleTimeout => &self.idle_timeouts,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        (self.on_event)(event);
    }

    /// Connections open now: (unproven, proven).
    pub fn open(&self) -> (usize, usize) {
        let slots = self.slots();
        (slots.unproven.len(), slots.open.len() - slots.unproven.len())
    }

    /// Connections open now from `peer`.
    pub fn open_from(&self, peer: &Peer) -> usize {
        self.slots().by_peer.get(peer).map_or(0, BTreeSet::len)
    }

    /// Events so far: (refused, evicted, header timeouts, idle timeouts).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        (
            self.refused.load(Ordering::Relaxed),
            self.evicted.load(Ordering::Relaxed),
            self.header_timeouts.load(Ordering::Relaxed),
            self.idle_timeouts.load(Ordering::Relaxed),
        )
    }
}

/// One admitted connection's place in the guard; dropping it frees the place.
pub struct Ticket {
    guard: Arc<Guard>,
    id: u64,
    accepted: Instant,
    proven: AtomicBool,
    notify: Arc<Notify>,
}

impl Ticket {
    /// The connection completed a request head: it is no longer evicted to admit others, and
    /// `header_read_timeout` no longer applies to it. Cheap after the first call.
    pub fn prove(&self) {
        if self.proven.load(Ordering::Relaxed) {
            return;
        }
        let mut slots = self.guard.slots();
        // Absent when it was evicted meanwhile: it stays unproven, and `closing` says evicted.
        if slots.unproven.remove(&self.id) {
            self.proven.store(true, Ordering::Relaxed);
        }
    }

    pub fn is_proven(&self) -> bool {
        self.proven.load(Ordering::Relaxed)
    }

    /// Resolves when the connection must be closed: evicted, or unproven `header_read_timeout`
    /// after it was accepted (counted as [`Event::HeaderTimeout`]). A proven connection is
    /// closed only when it gives way to another client's at the limit (its client holds the
    /// most). Cancel-safe: call it in a `select!` next to the connection.
    pub async fn closing(&self) -> Close {
        let deadline =
            tokio::time::Instant::from_std(self.accepted + self.guard.limits.header_read_timeout);
        let notified = self.notify.notified();
        tokio::pin!(notified);
        tokio::select! {
            _ = &mut notified => return Close::Evicted,
            _ = tokio::time::sleep_until(deadline), if !self.is_proven() => {}
        }
        if self.is_proven() {
            notified.await;
            return Close::Evicted;
        }
        self.guard.note(Event::HeaderTimeout);
        Close::HeaderTimeout
    }

    /// The listener's HTTP machinery closed the connection on its header read timer: a header
    /// timeout when no request was ever completed, else an idle timeout.
    pub fn timed_out(&self) {
        let event = if self.is_proven() { Event::IdleTimeout } else { Event::HeaderTimeout };
        self.guard.note(event);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Already out when it was evicted.
        self.guard.slots().remove(self.id);
    }
}

/// The refusal's body, the `{"error", "detail"}` shape of every tidegate error.
pub const REFUSAL_BODY: &str = concat!(
    r#"{"error":"too_many_connections","detail":"#,
    r#""the server is at its connection limit and every connection is in use; retry shortly"}"#
);

/// The refusal: `HTTP/1.1 503`, the body above, and `connection: close`.
pub fn refusal() -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{REFUSAL_BODY}",
        REFUSAL_BODY.len()
    )
    .into_bytes()
}

/// Writes [`refusal`] to a refused connection (for at most a second) and closes it. The request
/// is not read: the answer goes out first, as a server at its limit can afford nothing more.
pub async fn refuse<S: AsyncWrite + Unpin>(mut stream: S) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(&refusal()).await?;
        stream.shutdown().await
    })
    .await;
}

/// Raises the soft open-file limit to the hard one (as Go's runtime does at start-up) and
/// returns the soft limit in force afterwards; `None` when it cannot be read.
pub fn raise_nofile_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        // `None` is "unlimited".
        if limit.current.is_some() && limit.current != limit.maximum {
            let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                limit = raised;
            }
        }
        Some(limit.current.unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection limit derived from an open-file limit: the limit less a reserve for the log
/// and snapshot files, Kafka's sockets, outbound calls (Prometheus, preconditions) and the
/// listeners themselves: an eighth of it, between 64 and 1 024 descriptors. At least 16.
pub fn derived_max_connections(nofile: u64) -> usize {
    let nofile = nofile.min(1 << 20);
    let reserve = (nofile / 8).clamp(64, 1024);
    nofile.saturating_sub(reserve).max(16) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn guard(max: usize) -> (Arc<Guard>, Arc<AtomicUsize>) {
        let events = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&events);
        let limits = Limits {
            max_connections: max,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        };
        (Guard::new(limits, move |_| _ = seen.fetch_add(1, Ordering::Relaxed)), events)
    }

    fn admitted(a: Admission) -> Ticket {
        match a {
            Admission::Admitted(t) => t,
            Admission::Refused => panic!("refused"),
        }
    }

    #[tokio::test]
    async fn a_new_connection_evicts_the_oldest_unproven_one() {
        let (g, events) = guard(2);
        let first = admitted(g.admit());
        let second = admitted(g.admit());
        let third = admitted(g.admit());
        assert_eq!(first.closing().await, Close::Evicted);
        assert_eq!(g.counts().1, 1);
        assert_eq!(events.load(Ordering::Relaxed), 1);
        drop(first);
        assert_eq!(g.open(), (2, 0));
        second.prove();
        let fourth = admitted(g.admit());
        // The third (unproven) went, not the proven second.
        assert_eq!(third.closing().await, Close::Evicted);
        assert!(second.is_proven());
        drop((third, fourth));
    }

    #[tokio::test]
    async fn refused_only_when_every_connection_is_proven() {
        let (g, _) = guard(2);
        let a = admitted(g.admit());
        let b = admitted(g.admit());
        a.prove();
        b.prove();
        assert!(matches!(g.admit(), Admission::Refused));
        assert_eq!(g.counts().0, 1);
        drop(a);
        assert_eq!(g.open(), (0, 1));
        let c = admitted(g.admit());
        assert_eq!(g.open(), (1, 1));
        drop((b, c));
        assert_eq!(g.open(), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unproven_connection_times_out_and_a_proven_one_does_not() {
        let (g, _) = guard(10);
        let slow = admitted(g.admit());
        assert_eq!(slow.closing().await, Close::HeaderTimeout);
        assert_eq!(g.counts().2, 1);
        let quick = admitted(g.admit());
        quick.prove();
        let waited = tokio::time::timeout(Duration::from_secs(3600), quick.closing()).await;
        assert!(waited.is_err(), "a proven connection is never closed by the guard");
    }

    #[tokio::test]
    async fn an_eviction_that_races_the_proof_still_closes() {
        let (g, _) = guard(1);
        let old = admitted(g.admit());
        let new = admitted(g.admit());
        old.prove();
        assert!(!old.is_proven());
        assert_eq!(old.closing().await, Close::Evicted);
        drop(old);
        assert_eq!(g.open(), (1, 0));
        drop(new);
    }

    #[tokio::test]
    async fn a_client_flooding_proven_connections_gives_way_to_another_client() {
        let (g, _) = guard(4);
        let (flooder, victim) =
            (Some(IpAddr::from([127, 0, 0, 3])), Some(IpAddr::from([127, 0, 0, 4])));
        let flood: Vec<Ticket> = (0..4).map(|_| admitted(g.admit_from(flooder))).collect();
        flood.iter().for_each(Ticket::prove);
        // Control: the flooder's next connection is refused (it holds the most already).
        assert!(matches!(g.admit_from(flooder), Admission::Refused));
        // Another client gets in: the flooder's oldest (proven: a watch stream, a kept-alive
        // connection) gives way, twice, until both hold two.
        let v1 = admitted(g.admit_from(victim));
        assert_eq!(flood[0].closing().await, Close::Evicted);
        v1.prove();
        let v2 = admitted(g.admit_from(victim));
        assert_eq!(flood[1].closing().await, Close::Evicted);
        v2.prove();
        assert_eq!((g.open_from(&flooder), g.open_from(&victim)), (2, 2));
        // Now even: the victim's third is refused, as the flooder's would be.
        assert!(matches!(g.admit_from(victim), Admission::Refused));
        assert!(matches!(g.admit_from(flooder), Admission::Refused));
        // The evicted tickets closing changes no count twice.
        drop(flood);
        assert_eq!(g.open(), (0, 2));
        drop((v1, v2));
        assert_eq!(g.open(), (0, 0));
    }

    #[test]
    fn the_refusal_is_a_complete_json_answer() {
        let text = String::from_utf8(refusal()).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(body.starts_with(r#"{"error":"too_many_connections","detail":""#));
    }

    #[test]
    fn derived_limits_keep_a_reserve() {
        assert_eq!(derived_max_connections(1024), 896);
        assert_eq!(derived_max_connections(256), 192);
        assert_eq!(derived_max_connections(65_536), 64_512);
        assert_eq!(derived_max_connections(20), 16);
    }
}
