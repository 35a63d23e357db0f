//! Which replica is the lane authority: the one replica that answers lane membership calls.
//!
//! Lane membership describes running processes and is not logged, so with several coordinator
//! replicas exactly one of them may hand out partitions at a time, or two could grant the same
//! partition to two consumers. That one holds the `lanes` lease in the shared command log
//! (`LogEntry::Lease`, decided in log order by `store::Applier`: a claim is granted when the
//! lease is free, already the claimant's, or past its term).
//!
//! The holder renews every third of the term and **acts only while its own monotonic clock says
//! `sent + term - margin` has not passed**, `sent` being the moment *before* it sent the
//! renewal that was granted. A successor's claim is granted only when its audited `at_ms` is
//! after the old term's `until_ms`, so, with wall clocks agreeing within the margin, the two
//! acting windows never overlap: a holder paused by SIGSTOP wakes with its window passed and
//! answers as a non-authority at once, before it even learns who took over. The file-log single
//! node is always its own authority and writes no lease records.
//!
//! [`run`] is the loop that claims and renews; everything else reads [`LaneAuthority`].

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::service::coordinator::Coordinator;
use crate::store::Lease;

/// The name of the lane lease in the command log.
pub const LANES_LEASE: &str = "lanes";

/// How long after sending a granted claim the holder may act: the term less a margin for clock
/// disagreement between replicas (a quarter of the term).
pub fn acting_window(term_ms: u64) -> Duration {
    Duration::from_millis(term_ms - term_ms / 4)
}

/// Who this replica is, for a leased authority.
#[derive(Clone, Debug)]
pub struct Claimant {
    pub node_id: String,
    pub url: String,
    pub term_ms: u64,
}

#[derive(Default)]
struct Inner {
    /// While `Instant::now()` is before this, this replica is the authority.
    acting_until: Option<Instant>,
    /// Counts takeovers: a new value means membership must start afresh (adoption).
    term: u64,
    /// Wall-clock ms when the current term of authority began.
    since_ms: u64,
    /// The lease as last seen in the log.
    lease: Option<Lease>,
}

/// This replica's view of the lane authority. Cheap to share.
pub struct LaneAuthority {
    claimant: Option<Claimant>,
    inner: Mutex<Inner>,
}

/// What a non-authority tells a caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotAuthority {
    pub myself: String,
    pub holder: Option<String>,
    pub url: Option<String>,
}

impl LaneAuthority {
    /// A single node (file log): always the authority, from the start, in one term.
    pub fn always() -> LaneAuthority {
        LaneAuthority { claimant: None, inner: Mutex::new(Inner::default()) }
    }

    /// A replica of a shared log: the authority only while it holds the lease.
    pub fn leased(claimant: Claimant) -> LaneAuthority {
        LaneAuthority { claimant: Some(claimant), inner: Mutex::new(Inner::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Ok((term, since_ms))` while this replica is the authority (`since_ms` is `None` for a
    /// single node, whose authority never changed hands); otherwise who is.
    pub fn current(&self) -> Result<(u64, Option<u64>), NotAuthority> {
        let Some(claimant) = &self.claimant else {
            return Ok((0, None));
        };
        let inner = self.lock();
        if inner.acting_until.is_some_and(|until| Instant::now() < until) {
            return Ok((inner.term, Some(inner.since_ms)));
        }
        let lease = inner.lease.as_ref().filter(|l| l.holder != claimant.node_id);
        Err(NotAuthority {
            myself: claimant.node_id.clone(),
            holder: lease.map(|l| l.holder.clone()),
            url: lease.and_then(|l| l.url.clone()),
        })
    }

    /// The lease as this replica last saw it (for `GET /v1/cluster`).
    pub fn lease(&self) -> Option<Lease> {
        self.lock().lease.clone()
    }

    /// Whether this replica needs the loop at all.
    pub fn is_leased(&self) -> bool {
        self.claimant.is_some()
    }

    /// Records the outcome of a claim sent at `sent` (monotonic) and `at_ms` (wall clock).
    /// Returns `Some(true)` when it began a new term, `Some(false)` when it lost the authority.
    pub(crate) fn record(
        &self,
        granted: bool,
        lease: Option<Lease>,
        sent: Instant,
        at_ms: u64,
    ) -> Option<bool> {
        let Some(claimant) = &self.claimant else { return None };
        let mut inner = self.lock();
        inner.lease = lease;
        let was = inner.acting_until.is_some_and(|until| Instant::now() < until);
        if granted {
            // A lapse (a pause, a slow log) may have let another replica act meanwhile as far as
            // this one knows, so a lapsed window starts a new term even if the lease stayed ours.
            let lapsed = inner.acting_until.is_none_or(|until| until <= sent);
            inner.acting_until = Some(sent + acting_window(claimant.term_ms));
            if lapsed {
                inner.term += 1;
                inner.since_ms = at_ms;
                return Some(true);
            }
            None
        } else {
            inner.acting_until = None;
            was.then_some(false)
        }
    }

    fn observe(&self, lease: Option<Lease>) {
        self.lock().lease = lease;
    }
}

/// Claims and renews the lane lease until `shutdown` completes. A replica that does not hold it
/// claims only once the log shows the current term over, so an idle replica writes nothing.
///
/// It claims nothing until `id_checked` says no other live process uses this node id (two
/// processes with one id would both be granted: the lease is "already the claimant's").
pub async fn run(
    authority: Arc<LaneAuthority>,
    coordinator: Arc<Coordinator>,
    now_ms: fn() -> u64,
    id_checked: impl Fn() -> bool,
    shutdown: impl Future<Output = ()>,
) {
    let Some(claimant) = authority.claimant.clone() else { return };
    tokio::pin!(shutdown);
    let renew_every = Duration::from_millis(claimant.term_ms / 3);
    let poll = Duration::from_millis((claimant.term_ms / 20).clamp(20, 250));
    let mut last_sent: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(poll) => {}
        }
        let lease = coordinator.lease(LANES_LEASE);
        let now = now_ms();
        let mine = lease.as_ref().is_some_and(|l| l.holder == claimant.node_id);
        let due = match &lease {
            None => true,
            Some(_) if mine => last_sent.is_none_or(|sent| sent.elapsed() >= renew_every),
            Some(l) => l.until_ms < now,
        };
        if !due || !id_checked() {
            authority.observe(lease);
            continue;
        }
        let sent = Instant::now();
        last_sent = Some(sent);
        let at_ms = now_ms();
        let (c, id, url) =
            (Arc::clone(&coordinator), claimant.node_id.clone(), claimant.url.clone());
        let until_ms = at_ms + claimant.term_ms;
        let claimed = tokio::task::spawn_blocking(move || {
            c.claim_lease(LANES_LEASE, &id, Some(&url), at_ms, until_ms)
        })
        .await;
        match claimed {
            Ok(Ok((granted, lease))) => match authority.record(granted, lease, sent, at_ms) {
                Some(true) => tracing::info!(
                    event = "lane_authority_gained",
                    node_id = %claimant.node_id,
                    until_ms = until_ms,
                    "this replica ({}) is the lane authority now",
                    claimant.node_id
                ),
                Some(false) => tracing::warn!(
                    event = "lane_authority_lost",
                    node_id = %claimant.node_id,
                    "this replica ({}) is no longer the lane authority",
                    claimant.node_id
                ),
                None => {}
            },
            // The window runs out on its own: no renewal, no authority.
            Ok(Err(e)) => {
                tracing::warn!(event = "lane_lease_renewal_failed", error = %e, "cannot renew the lane lease: {e}")
            }
            Err(e) => tracing::warn!("the lane lease task failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str) -> Lease {
        Lease {
            holder: holder.into(),
            url: Some(format!("http://{holder}")),
            at_ms: 0,
            until_ms: 1,
        }
    }

    #[test]
    fn a_single_node_is_always_the_authority() {
        assert_eq!(LaneAuthority::always().current(), Ok((0, None)));
    }

    #[test]
    fn a_replica_acts_only_inside_the_window_of_its_last_granted_claim() {
        let a = LaneAuthority::leased(Claimant {
            node_id: "r1".into(),
            url: "http://r1".into(),
            term_ms: 400,
        });
        assert_eq!(a.current().unwrap_err().holder, None);
        let sent = Instant::now();
        assert_eq!(a.record(true, Some(lease("r1")), sent, 5), Some(true));
        assert_eq!(a.current(), Ok((1, Some(5))));
        // A renewal inside the window keeps the term.
        assert_eq!(a.record(true, Some(lease("r1")), Instant::now(), 6), None);
        assert_eq!(a.current(), Ok((1, Some(5))));
        // The window (300 ms of a 400 ms term) passes without a renewal: not the authority.
        std::thread::sleep(Duration::from_millis(320));
        assert!(a.current().is_err());
        // Granted again after a lapse: a new term.
        assert_eq!(a.record(true, Some(lease("r1")), Instant::now(), 9), Some(true));
        assert_eq!(a.current(), Ok((2, Some(9))));
        // Refused: another holder, named in the answer.
        assert_eq!(a.record(false, Some(lease("r2")), Instant::now(), 10), Some(false));
        let not = a.current().unwrap_err();
        assert_eq!((not.holder.as_deref(), not.url.as_deref()), (Some("r2"), Some("http://r2")));
    }
}
