//! Who holds a copy of the routing table, which version each has applied, and convergence.
//!
//! Subscribers (gateways, services using `tidegate::client`) watch the table and acknowledge the
//! version they have *applied*. The registry is in-memory: it describes live connections, which a
//! restarted coordinator learns again within one heartbeat as clients reconnect. Time is passed
//! in as `now_ms`, so the bookkeeping is testable without a clock.
//!
//! Acknowledgements move drains (the convergence gate), so each subscriber belongs to the caller
//! identity that registered it (by watching or by a first ack): acks and streams for it from
//! another identity are refused, and each identity may register at most `max_per_caller`
//! subscribers, so one token cannot fill the registry for the others.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::tag_answer::Failure;
use crate::core::FreezeBarrier;
use crate::telemetry;

/// Most subscribers tracked at once; beyond this registration is refused (the table is pushed
/// to every one of them on each change, so this also bounds the fan-out).
pub const MAX_SUBSCRIBERS: usize = 10_000;

/// How many (version, commit time) pairs are remembered for "behind for how long".
const COMMIT_TIMES_KEPT: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscriber {
    pub id: String,
    /// The caller identity that registered it (`service:…`, `operator:NAME`).
    pub owner: String,
    pub zone: String,
    pub kind: String,
    /// The newest version the subscriber says it has applied (0 before its first ack).
    pub applied_version: u64,
    pub applied_at_ms: Option<u64>,
    pub last_seen_ms: u64,
    /// Open watch streams from this subscriber.
    pub streams: u32,
    /// Its last watch stream closed (a dropped `Router`, a closed connection): it left, and is
    /// live for a tenth of `stale_after` (time to reconnect), not all of it; a leased one for
    /// at least as long as its write checks may still answer `owned` (see [`Subscribers::is_live`]).
    pub left: bool,
    /// It keeps the table lease (`lease=1` on its watch): its write checks stop answering
    /// `owned` a lease after the last confirmation it received (`crate::core::lease`).
    pub leased: bool,
}

impl Subscriber {
    fn new(id: &str, owner: &str, zone: &str, kind: &str, now_ms: u64) -> Subscriber {
        Subscriber {
            id: id.to_owned(),
            owner: owner.to_owned(),
            zone: zone.to_owned(),
            kind: kind.to_owned(),
            applied_version: 0,
            applied_at_ms: None,
            last_seen_ms: now_ms,
            streams: 0,
            left: false,
            leased: false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubscriberError {
    #[error(
        "subscriber_id must be 1-128 characters of letters, digits, `.`, `_`, `:` and `-`, got `{0}`"
    )]
    InvalidId(String),
    #[error("`{field}` must be 1-64 characters of letters, digits, `.`, `_` and `-`")]
    InvalidLabel { field: &'static str },
    #[error("no subscriber `{0}`: open the watch stream first, or send zone and kind with the ack")]
    Unknown(String),
    #[error("at most {0} subscribers are tracked here")]
    Full(usize),
    #[error(
        "caller `{caller}` already registered {max} subscribers (subscribers.max_per_caller); reuse subscriber IDs or use another token"
    )]
    CallerFull { caller: String, max: usize },
    #[error(
        "subscriber `{id}` was registered by another caller; it only takes acks and streams from that caller"
    )]
    NotOwner { id: String },
    #[error("version {acked} has not been committed yet (the newest is {current})")]
    FutureVersion { acked: u64, current: u64 },
    #[error("invalid leaves report: {0}")]
    BadSummary(String),
    #[error(
        "this coordinator requires subscribers to keep the table lease ([subscribers] require_lease): watch with `lease=1` (a client of this release does)"
    )]
    LeaseRequired,
}

/// `POST /v1/subscribers/<id>/ack`'s body, parsed the same way on both HTTP edges.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    pub version: u64,
    pub zone: Option<String>,
    pub kind: Option<String>,
    /// The subscriber is going away for good (a dropped `Router`): its write checks answer
    /// nothing more, so its lease is void and barriers count it only for the reconnect grace
    /// ([`Subscribers::release`]).
    #[serde(default)]
    pub leaving: bool,
}

impl AckRequest {
    /// The zone and kind to register an unknown subscriber under (`kind` defaults to `unknown`).
    pub fn identity(&self) -> Option<(&str, &str)> {
        match (&self.zone, &self.kind) {
            (Some(zone), Some(kind)) => Some((zone.as_str(), kind.as_str())),
            (Some(zone), None) => Some((zone.as_str(), "unknown")),
            _ => None,
        }
    }
}

/// The version a reconnecting watcher holds, for the server whose command log is `our_log`:
/// its `Last-Event-ID`, unless it names the log that version belongs to (`log_id` in the watch
/// query) and that log is another one. Versions of two logs say nothing about each other, so such
/// a watcher is sent the current table (which its client refuses, loudly) and is not counted as
/// having applied anything here.
pub fn resumed_version(
    last_event_id: Option<u64>,
    their_log: Option<&str>,
    our_log: &str,
) -> Option<u64> {
    match their_log {
        Some(theirs) if theirs != our_log => None,
        _ => last_event_id,
    }
}

/// The ack answer. `current` was read before the ack, so a concurrent ack of a newer version can
/// leave `applied` above it: the lag is then 0, never a wrapped-around number.
pub fn ack_body(id: &str, applied: u64, current: u64) -> serde_json::Value {
    serde_json::json!({
        "subscriber_id": id,
        "applied_version": applied,
        "current_version": current.max(applied),
        "lag": current.saturating_sub(applied),
    })
}

/// The HTTP failure of each error (one mapping for the Rocket routes and the fast listener).
impl From<SubscriberError> for Failure {
    fn from(e: SubscriberError) -> Failure {
        let detail = e.to_string();
        match e {
            SubscriberError::InvalidId(_) | SubscriberError::InvalidLabel { .. } => {
                Failure::bad_request("invalid_subscriber", detail)
            }
            SubscriberError::Unknown(_) => Failure::new(404, "unknown_subscriber", detail),
            SubscriberError::Full(_) => Failure::new(503, "too_many_subscribers", detail),
            SubscriberError::FutureVersion { .. } => {
                Failure::bad_request("invalid_version", detail)
            }
            SubscriberError::BadSummary(_) => Failure::bad_request("invalid_summary", detail),
            SubscriberError::CallerFull { .. } => Failure::new(429, "caller_limit", detail),
            SubscriberError::NotOwner { .. } => Failure::new(403, "not_subscriber_owner", detail),
            SubscriberError::LeaseRequired => Failure::new(409, "lease_required", detail),
        }
    }
}

/// One subscriber's convergence status against a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Behind {
    pub id: String,
    pub zone: String,
    pub kind: String,
    pub applied_version: u64,
    /// Since when the subscriber lacks the version after the one it applied.
    pub behind_for_ms: u64,
    /// The edge it watches through (a leaf of the fan-out tree), when not this coordinator.
    pub via: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Convergence {
    pub version: u64,
    pub live: usize,
    pub converged: usize,
    pub behind: Vec<Behind>,
    /// Live subscribers of the excluded zone that are behind: not waited for (an evacuation
    /// does not wait for the clients of the zone it evacuates, they are the failure), but named.
    pub excluded: Vec<Behind>,
}

impl Convergence {
    /// Fraction of live subscribers on `version` or newer; 1.0 with no live subscribers (there is
    /// nobody to wait for).
    pub fn fraction(&self) -> f64 {
        if self.live == 0 { 1.0 } else { self.converged as f64 / self.live as f64 }
    }
}

/// A freeze barrier's count ([`Subscribers::barrier`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Barrier {
    pub version: u64,
    /// Subscribers waited for, and how many of them applied `version`.
    pub live: usize,
    pub converged: usize,
    /// Waited for and behind.
    pub behind: Vec<Behind>,
    /// The evacuated zone's behind subscribers without a lease: not waited for, named.
    pub excluded: Vec<Behind>,
    /// Behind, leased, and not waited for: their leases ran out since `version` was committed.
    pub lease_out: usize,
    /// The first of them by name (this replica's own, and the named ones of reports).
    pub lease_out_names: Vec<Behind>,
    /// When the leases of copies that missed `version` run out (`None` without leases).
    pub lease_out_at_ms: Option<u64>,
    /// Why the barrier may not pass even if every counted subscriber applied the version
    /// ([`Subscribers::freeze_hold`]).
    pub hold: Option<String>,
}

impl Barrier {
    /// What the pure `decide` functions of the core take.
    pub fn freeze_barrier(&self) -> FreezeBarrier {
        let behind = name_some(&self.behind);
        let barrier = FreezeBarrier {
            version: self.version,
            all_applied: self.converged >= self.live,
            behind,
        };
        let Some(hold) = &self.hold else { return barrier };
        let behind = format!(
            "{hold}{}{}",
            if barrier.behind.is_empty() { "" } else { "; " },
            barrier.behind
        );
        FreezeBarrier { all_applied: false, behind, ..barrier }
    }

    /// Why the barrier passed, for the switch's audit reason: who applied the version, and who
    /// was not waited for and why.
    pub fn passed_because(&self) -> String {
        let version = self.version;
        let mut why = if self.live == 0 {
            format!("no live subscriber was waited for on version {version}")
        } else {
            format!(
                "every live subscriber ({} of {}) applied version {version}",
                self.converged, self.live
            )
        };
        if self.lease_out > 0 {
            why.push_str(&format!(
                "; not waiting for {} that did not, whose leases ran out since (they answer `unconfirmed`, never `owned`): {}",
                self.lease_out,
                name_some(&self.lease_out_names)
            ));
        }
        if !self.excluded.is_empty() {
            why.push_str(&format!(
                "; not waiting for {} unleased subscriber(s) of the evacuated zone: {}",
                self.excluded.len(),
                name_some(&self.excluded)
            ));
        }
        why
    }
}

/// The first five subscribers of a list, with their zone and applied version.
pub fn name_some(list: &[Behind]) -> String {
    let mut names: Vec<String> = list
        .iter()
        .take(5)
        .map(|b| match &b.via {
            Some(edge) => {
                format!("{} ({}, on v{}, via edge {edge})", b.id, b.zone, b.applied_version)
            }
            None => format!("{} ({}, on v{})", b.id, b.zone, b.applied_version),
        })
        .collect();
    if list.len() > 5 {
        names.push(format!("and {} more", list.len() - 5));
    }
    names.join(", ")
}

/// How a count treats a subscriber ([`Subscribers::tally`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// The convergence gate: the evacuated zone is left out, leases do not matter.
    Convergence,
    /// A freeze's barrier ([`Subscribers::barrier`]); `lease_out`: the leases of copies that
    /// missed the version ran out.
    Barrier { lease_out: bool },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Converged,
    Behind,
    /// In the evacuated zone and behind: named, not waited for.
    Excluded,
    /// Behind with a lease that ran out: not waited for.
    LeaseOut,
    Skip,
}

impl Rule {
    fn classify(self, current: bool, excluded: bool, leased: bool) -> Class {
        match (self, current, excluded) {
            (_, true, true) => Class::Skip,
            (_, true, false) => Class::Converged,
            (Rule::Convergence, false, true) => Class::Excluded,
            (Rule::Convergence, false, false) => Class::Behind,
            (Rule::Barrier { lease_out: true }, false, _) if leased => Class::LeaseOut,
            (Rule::Barrier { .. }, false, true) if !leased => Class::Excluded,
            (Rule::Barrier { .. }, false, _) => Class::Behind,
        }
    }
}

#[derive(Default)]
struct Tally {
    live: usize,
    converged: usize,
    behind: Vec<Behind>,
    excluded: Vec<Behind>,
    lease_out: usize,
    lease_out_names: Vec<Behind>,
}

impl Tally {
    /// One subscriber known by name.
    fn add(&mut self, class: Class, n: usize, name: impl FnOnce() -> Behind) {
        self.count(class, n);
        self.name(class, name);
    }

    /// `n` subscribers of `class` (a report's counts).
    fn count(&mut self, class: Class, n: usize) {
        match class {
            Class::Converged => {
                self.live += n;
                self.converged += n;
            }
            Class::Behind => self.live += n,
            Class::LeaseOut => self.lease_out += n,
            Class::Excluded | Class::Skip => {}
        }
    }

    /// A subscriber a report names (already in its counts).
    fn name(&mut self, class: Class, name: impl FnOnce() -> Behind) {
        match class {
            Class::Behind => self.behind.push(name()),
            Class::Excluded => self.excluded.push(name()),
            Class::LeaseOut if self.lease_out_names.len() < SUMMARY_NAMES => {
                self.lease_out_names.push(name())
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct Inner {
    subscribers: BTreeMap<String, Subscriber>,
    /// How many of `subscribers` each owner has (the per-caller cap is checked on every
    /// registration: counting by a scan made registering n subscribers cost n^2 / 2).
    owned: BTreeMap<String, usize>,
    commit_times: VecDeque<(u64, u64)>,
    /// What the other replicas' subscribers have applied (`service::gate_view`), by replica.
    peers: BTreeMap<String, (u64, Summary)>,
    /// When a replica with live subscribers was last heard of no more (its report expired):
    /// they are reconnecting elsewhere (see [`Subscribers::reconnect_grace_left`]).
    peer_lost_ms: u64,
    /// The leaves of the fan-out tree: what the subscribers of each edge that watches this
    /// coordinator have applied, as the edge last reported them (`POST
    /// /v1/subscribers/<edge>/leaves`), by the edge's subscriber ID, with when it arrived.
    leaves: BTreeMap<String, (u64, Summary)>,
}

/// Most subscribers a summary names (the furthest behind first); the rest are only counted.
pub const SUMMARY_NAMES: usize = 64;

/// A replica's live subscribers as the other replicas' convergence gates count them: how many
/// per zone have applied each version, and the furthest behind by name. Small whatever the
/// number of subscribers (10 000 watchers on a handful of versions are a handful of rows).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// `[zone, applied version, how many]`.
    pub counts: Vec<(String, u64, u64)>,
    /// The furthest behind live subscribers that lack `table_version` (at most
    /// [`SUMMARY_NAMES`]), with since when each lacks the version after the one it applied (the
    /// reporting replica's clock). One that has it is behind no gate's version yet: naming it
    /// would cost a comparison of IDs per subscriber on every report and tell a gate nothing.
    pub behind: Vec<SummaryBehind>,
    /// The table version the reporting replica had applied when it made the summary (0 from a
    /// replica before this field): a freeze barrier counts a peer's subscribers only from a
    /// summary made at or after the freeze, see [`Subscribers::freeze_hold`].
    #[serde(default)]
    pub table_version: u64,
    /// `[zone, applied version, how many]` of the subscribers in `counts` that keep the table
    /// lease (absent from a replica before leases: none counted as leased). A barrier stops
    /// waiting for a leased one a lease after the freeze, see [`Subscribers::barrier`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leased: Vec<(String, u64, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SummaryBehind {
    pub id: String,
    pub zone: String,
    pub kind: String,
    pub applied_version: u64,
    pub missing_since_ms: u64,
    /// The edge the subscriber watches through, when it is a leaf of the fan-out tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// It keeps the table lease.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leased: bool,
}

/// Most `counts` rows a leaves report may carry (zones times versions in flight).
pub const SUMMARY_ROWS: usize = 4096;

/// Most leaves one edge's report may count: the most `[edge] max_leaves` allows (the
/// coordinator does not know an edge's own setting; this is the bound every edge is under).
pub const MAX_LEAVES_PER_EDGE: u64 = 100_000;

/// How far an edge's clock may be from the coordinator's in a leaves report's
/// `missing_since_ms`: a subscriber cannot lack a version since before it was committed, nor
/// since a time that has not come.
pub const LEAVES_CLOCK_SKEW_MS: u64 = 5_000;

/// How long an edge's leaves report counts (edges report every [`LEAVES_EVERY_MS`] and at once
/// when their leaves acknowledge): an edge that stops reporting drops its leaves from every gate
/// after this, and the gates then wait [`RECONNECT_GRACE_MS`] for them to reconnect elsewhere.
pub const LEAVES_FRESH_MS: u64 = 2_000;
pub const LEAVES_EVERY_MS: u64 = 500;

impl Summary {
    /// How many subscribers it counts.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0, |sum, (_, _, n)| sum.saturating_add(*n))
    }

    /// Checks a report from outside (an edge's): bounded, with valid names, and no subscriber
    /// ahead of the version `current` the coordinator has committed.
    pub fn check(&self, current: u64) -> Result<(), SubscriberError> {
        let bad = |why: String| Err(SubscriberError::BadSummary(why));
        if self.counts.len() > SUMMARY_ROWS {
            return bad(format!("at most {SUMMARY_ROWS} counts rows"));
        }
        if self.behind.len() > SUMMARY_NAMES {
            return bad(format!("at most {SUMMARY_NAMES} subscribers named in `behind`"));
        }
        let mut total: u64 = 0;
        for (zone, applied, n) in &self.counts {
            check_label("zone", zone)?;
            if *applied > current {
                return bad(format!("version {applied} has not been committed (newest {current})"));
            }
            total = match total.checked_add(*n) {
                Some(sum) if sum <= MAX_LEAVES_PER_EDGE => sum,
                _ => {
                    return bad(format!(
                        "the counts add up to more than {MAX_LEAVES_PER_EDGE} leaves (the most an edge serves)"
                    ));
                }
            };
        }
        for b in &self.behind {
            check_id(&b.id)?;
            check_label("zone", &b.zone)?;
            check_label("kind", &b.kind)?;
            if b.applied_version > current {
                return bad(format!(
                    "`{}` applied version {}, which has not been committed (newest {current})",
                    b.id, b.applied_version
                ));
            }
        }
        if self.table_version > current {
            return bad(format!("table_version {} is ahead of {current}", self.table_version));
        }
        if self.leased.len() > self.counts.len() {
            return bad("more `leased` rows than `counts` rows".to_owned());
        }
        for (zone, applied, n) in &self.leased {
            let counted = self
                .counts
                .iter()
                .find(|(z, v, _)| z == zone && v == applied)
                .map_or(0, |(_, _, n)| *n);
            if *n > counted {
                return bad(format!(
                    "{n} leased subscribers of {zone} on version {applied}, but only {counted} counted"
                ));
            }
        }
        Ok(())
    }

    /// Adds `other`'s counts and names (its names marked as seen through `via` unless they
    /// already name an edge), keeping the furthest behind [`SUMMARY_NAMES`].
    fn absorb(&mut self, other: &Summary, via: Option<&str>) {
        let mut counts: BTreeMap<(String, u64), u64> =
            self.counts.drain(..).map(|(z, v, n)| ((z, v), n)).collect();
        for (zone, applied, n) in &other.counts {
            *counts.entry((zone.clone(), *applied)).or_default() += n;
        }
        self.counts = counts.into_iter().map(|((z, v), n)| (z, v, n)).collect();
        let mut leased: BTreeMap<(String, u64), u64> =
            self.leased.drain(..).map(|(z, v, n)| ((z, v), n)).collect();
        for (zone, applied, n) in &other.leased {
            *leased.entry((zone.clone(), *applied)).or_default() += n;
        }
        self.leased = leased.into_iter().map(|((z, v), n)| (z, v, n)).collect();
        self.behind.extend(other.behind.iter().map(|b| SummaryBehind {
            via: b.via.clone().or_else(|| via.map(str::to_owned)),
            ..b.clone()
        }));
        self.behind.sort_by(|a, b| (a.applied_version, &a.id).cmp(&(b.applied_version, &b.id)));
        self.behind.truncate(SUMMARY_NAMES);
    }
}

/// How often acks and connects may recompute the subscriber gauges.
const PUBLISH_EVERY_MS: u64 = 1000;

/// The registry. `stale_after_ms`: a subscriber with no open stream and no ack or heartbeat for
/// this long is no longer live; it is forgotten after twice that.
pub struct Subscribers {
    stale_after_ms: u64,
    max_per_caller: usize,
    /// Most subscribers tracked ([`MAX_SUBSCRIBERS`] on a coordinator, `[edge] max_leaves` on
    /// an edge).
    max_total: usize,
    inner: Mutex<Inner>,
    /// When an ack or a connect last recomputed the gauges (a scan of every subscriber).
    published_ms: AtomicU64,
    /// The version this process replayed up to and when it started (`note_start`): see
    /// [`Subscribers::reconnect_grace_left`].
    replayed_version: AtomicU64,
    started_ms: AtomicU64,
    /// Whether other replicas share this process's log (their reports count in barriers), so a
    /// barrier right after the start waits until they could have been heard.
    has_peers: std::sync::atomic::AtomicBool,
    /// How long a leased subscriber that left is still counted: the lease, the clock skew and
    /// the longest write (`config::LeaseConfig::bound_ms`); 0 without leases.
    lease_hold_ms: u64,
    /// `[subscribers] require_lease`: subscribers without the lease are refused.
    require_lease: bool,
}

/// How long after a start a barrier on a replayed version waits for subscribers to reconnect:
/// twice a Router's longest reconnect backoff (5 s), and never more than `stale_after`.
pub const RECONNECT_GRACE_MS: u64 = 10_000;

fn check_id(id: &str) -> Result<(), SubscriberError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if ok { Ok(()) } else { Err(SubscriberError::InvalidId(id.to_owned())) }
}

fn check_label(field: &'static str, value: &str) -> Result<(), SubscriberError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(SubscriberError::InvalidLabel { field }) }
}

impl Subscribers {
    pub fn new(stale_after_ms: u64, max_per_caller: usize) -> Subscribers {
        Subscribers {
            stale_after_ms,
            max_per_caller,
            max_total: MAX_SUBSCRIBERS,
            inner: Mutex::new(Inner::default()),
            published_ms: AtomicU64::new(0),
            replayed_version: AtomicU64::new(0),
            started_ms: AtomicU64::new(0),
            has_peers: std::sync::atomic::AtomicBool::new(false),
            lease_hold_ms: 0,
            require_lease: false,
        }
    }

    /// The same registry refusing subscribers that do not keep the table lease.
    pub fn requiring_lease(self, require_lease: bool) -> Subscribers {
        Subscribers { require_lease, ..self }
    }

    /// Whether a subscriber that keeps the lease (`leased`) or not may register here: call
    /// before [`Subscribers::connect`].
    pub fn admit_lease(&self, leased: bool) -> Result<(), SubscriberError> {
        if self.require_lease && !leased { Err(SubscriberError::LeaseRequired) } else { Ok(()) }
    }

    /// The same registry counting a leased subscriber that left for `lease_hold_ms` after its
    /// last heartbeat (see [`Subscribers::is_live`]).
    pub fn with_lease_hold(self, lease_hold_ms: u64) -> Subscribers {
        Subscribers { lease_hold_ms, ..self }
    }

    /// Marks `id` (just connected) as keeping the table lease, or not.
    pub fn set_leased(&self, id: &str, leased: bool) {
        if let Some(s) = self.lock().subscribers.get_mut(id) {
            s.leased = leased;
        }
    }

    /// The same registry tracking at most `max_total` subscribers.
    pub fn with_max(self, max_total: usize) -> Subscribers {
        Subscribers { max_total, ..self }
    }

    /// Records that this process started at `now_ms` with the log replayed up to `version`, and
    /// whether it shares its log with other replicas (`shared`).
    pub fn note_start(&self, version: u64, now_ms: u64, shared: bool) {
        self.replayed_version.store(version, Ordering::Relaxed);
        self.started_ms.store(now_ms, Ordering::Relaxed);
        self.has_peers.store(shared, Ordering::Relaxed);
    }

    /// How much longer a barrier on `version` must wait for subscribers to reconnect after a
    /// restart (0: none). Who is live is in memory: right after a restart nobody is, and a
    /// barrier that waits for "every live subscriber" would pass at once, switching a freeze
    /// (replayed from the log) that subscribers of the previous process never applied. So a
    /// barrier on a version this process replayed rather than made waits until subscribers had
    /// the time to come back ([`RECONNECT_GRACE_MS`], capped by `stale_after`). Changes started
    /// after the start are not held: their barrier counts whoever is connected then, as always.
    ///
    /// The same holds when another replica with live subscribers goes silent (its report
    /// expires, `gate_view::PEER_FRESH_MS`): its subscribers are reconnecting to the others, and
    /// until they are back no barrier counts them, so every barrier waits the same grace from
    /// then (found by [`Subscribers::convergence_excluding`], which the barriers call first).
    /// Why a freeze barrier on `version` must not pass yet even if every counted subscriber
    /// applied it, or `None`: subscribers may still be reconnecting
    /// ([`Subscribers::reconnect_grace_left`]), this replica started less than
    /// `gate_view::PEER_FRESH_MS` ago (it may not have heard every peer yet), or a live peer has
    /// not reported since it applied `version`. A peer's report is a summary of its subscribers as of when it made it, sent
    /// every `gate_view::GATES_EVERY`; one made before the freeze may lack a subscriber that
    /// connected to it just before (found on three replicas: a unit move switched within 200 ms
    /// while the only stuck subscriber sat on another replica). Call after
    /// [`Subscribers::convergence_excluding`], which expires silent peers.
    pub fn freeze_hold(&self, version: u64, now_ms: u64) -> Option<String> {
        let grace = self.reconnect_grace_left(version, now_ms);
        if grace > 0 {
            return Some(format!("subscribers reconnecting ({grace} ms left)"));
        }
        // Right after a start this replica has not heard the others' reports yet, and a peer it
        // has not heard of cannot be found stale below: wait until it could have (a coordinator
        // alone on its log has no one to hear).
        let fresh = crate::service::peer_reports::PEER_FRESH_MS;
        let started = self.started_ms.load(Ordering::Relaxed);
        if self.has_peers.load(Ordering::Relaxed) && started > 0 && now_ms < started + fresh {
            let left = started + fresh - now_ms;
            return Some(format!(
                "hearing from the other replicas after the start ({left} ms left)"
            ));
        }
        let inner = self.lock();
        let stale: Vec<&str> = inner
            .peers
            .iter()
            .filter(|(_, (_, summary))| summary.table_version < version)
            .map(|(replica, _)| replica.as_str())
            .collect();
        if !stale.is_empty() {
            return Some(format!(
                "replica {} has not reported its subscribers since version {version}",
                stale.join(", ")
            ));
        }
        // An edge re-serves only the tables it has: until it reports having applied `version`,
        // its leaves may include one that has not seen the freeze and is not named yet.
        let edges: Vec<&str> = inner
            .leaves
            .iter()
            .filter(|(_, (_, summary))| summary.table_version < version && summary.total() > 0)
            .map(|(edge, _)| edge.as_str())
            .collect();
        (!edges.is_empty()).then(|| {
            format!("edge {} has not reported its leaves since version {version}", edges.join(", "))
        })
    }

    /// Takes in the report of edge `id` (a subscriber of this coordinator, registered by
    /// `owner`) about the subscribers that watch through it; returns how many it counts.
    pub fn receive_leaves(
        &self,
        id: &str,
        owner: &str,
        summary: Summary,
        current_version: u64,
        now_ms: u64,
    ) -> Result<u64, SubscriberError> {
        check_id(id)?;
        summary.check(current_version)?;
        let mut summary = summary;
        let mut inner = self.lock();
        match inner.subscribers.get(id) {
            None => return Err(SubscriberError::Unknown(id.to_owned())),
            Some(s) if s.owner != owner => {
                return Err(SubscriberError::NotOwner { id: id.to_owned() });
            }
            Some(_) => {}
        }
        for b in &mut summary.behind {
            b.missing_since_ms = Self::bounded_missing_since(&inner, b, now_ms)?;
        }
        if let Some(s) = inner.subscribers.get_mut(id) {
            s.last_seen_ms = now_ms;
        }
        let total = summary.total();
        inner.leaves.insert(id.to_owned(), (now_ms, summary));
        Ok(total)
    }

    /// Since when a leaf an edge names lacks the version after the one it applied, as the gates
    /// may count it: refused when before that version was committed or after now (beyond
    /// [`LEAVES_CLOCK_SKEW_MS`] either way). For a version older than every commit time this
    /// coordinator remembers, at most as long as its own subscribers would be behind (since the
    /// oldest time it remembers, see `missing_since`).
    fn bounded_missing_since(
        inner: &Inner,
        b: &SummaryBehind,
        now_ms: u64,
    ) -> Result<u64, SubscriberError> {
        let bad = |why: String| Err(SubscriberError::BadSummary(why));
        if b.missing_since_ms > now_ms.saturating_add(LEAVES_CLOCK_SKEW_MS) {
            return bad(format!(
                "`{}` lacks a version since {} ms, ahead of this coordinator's clock ({now_ms} ms)",
                b.id, b.missing_since_ms
            ));
        }
        let missing = b.applied_version.saturating_add(1);
        // Commit times only grow with versions: the newest remembered version at or before the
        // missing one was committed no later than it.
        let committed_by = inner.commit_times.iter().rev().find(|(v, _)| *v <= missing);
        match (committed_by, inner.commit_times.front()) {
            (Some((v, at)), _) if b.missing_since_ms.saturating_add(LEAVES_CLOCK_SKEW_MS) < *at => {
                bad(format!(
                    "`{}` lacks version {missing} since {} ms, before version {v} was committed ({at} ms)",
                    b.id, b.missing_since_ms
                ))
            }
            (Some(_), _) | (None, None) => Ok(b.missing_since_ms),
            (None, Some((_, oldest))) => Ok(b.missing_since_ms.max(*oldest)),
        }
    }

    /// How many leaves each edge reported, by edge (reports heard within [`LEAVES_FRESH_MS`]).
    pub fn leaves_by_edge(&self, now_ms: u64) -> BTreeMap<String, u64> {
        let inner = self.lock();
        inner
            .leaves
            .iter()
            .filter(|(_, (at, _))| now_ms.saturating_sub(*at) <= LEAVES_FRESH_MS)
            .map(|(edge, (_, summary))| (edge.clone(), summary.total()))
            .collect()
    }

    pub fn reconnect_grace_left(&self, version: u64, now_ms: u64) -> u64 {
        let grace = RECONNECT_GRACE_MS.min(self.stale_after_ms);
        let peer_lost = self.lock().peer_lost_ms;
        let after_peer =
            if peer_lost == 0 { 0 } else { (peer_lost + grace).saturating_sub(now_ms) };
        let started = self.started_ms.load(Ordering::Relaxed);
        if started == 0 || version > self.replayed_version.load(Ordering::Relaxed) {
            return after_peer;
        }
        after_peer.max((started + grace).saturating_sub(now_ms))
    }

    /// Checks that `owner` may use `id`, registering it if it is new (and there is room).
    fn admit(
        &self,
        inner: &mut Inner,
        id: &str,
        owner: &str,
        zone: &str,
        kind: &str,
        now_ms: u64,
    ) -> Result<(), SubscriberError> {
        if let Some(s) = inner.subscribers.get(id) {
            return if s.owner == owner {
                Ok(())
            } else {
                Err(SubscriberError::NotOwner { id: id.to_owned() })
            };
        }
        let owned = |inner: &Inner| inner.owned.get(owner).copied().unwrap_or(0);
        if inner.subscribers.len() >= self.max_total || owned(inner) >= self.max_per_caller {
            self.expire(inner, now_ms);
        }
        if owned(inner) >= self.max_per_caller {
            return Err(SubscriberError::CallerFull {
                caller: owner.to_owned(),
                max: self.max_per_caller,
            });
        }
        if inner.subscribers.len() >= self.max_total {
            return Err(SubscriberError::Full(self.max_total));
        }
        inner.subscribers.insert(id.to_owned(), Subscriber::new(id, owner, zone, kind, now_ms));
        *inner.owned.entry(owner.to_owned()).or_default() += 1;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stale_after_ms(&self) -> u64 {
        self.stale_after_ms
    }

    /// Records that `version` was committed at `at_ms` (for "behind for how long").
    pub fn committed(&self, version: u64, at_ms: u64) {
        let mut inner = self.lock();
        if inner.commit_times.back().is_some_and(|(v, _)| *v >= version) {
            return;
        }
        inner.commit_times.push_back((version, at_ms));
        while inner.commit_times.len() > COMMIT_TIMES_KEPT {
            inner.commit_times.pop_front();
        }
    }

    /// A watch stream opened. `applied` is the version the client says it holds (Last-Event-ID),
    /// which counts as an acknowledgement.
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        &self,
        id: &str,
        owner: &str,
        zone: &str,
        kind: &str,
        applied: Option<u64>,
        current_version: u64,
        now_ms: u64,
    ) -> Result<(), SubscriberError> {
        check_id(id)?;
        check_label("zone", zone)?;
        check_label("kind", kind)?;
        let mut inner = self.lock();
        self.admit(&mut inner, id, owner, zone, kind, now_ms)?;
        let s = inner.subscribers.get_mut(id).expect("admitted above");
        s.zone = zone.to_owned();
        s.kind = kind.to_owned();
        s.streams += 1;
        s.left = false;
        s.last_seen_ms = now_ms;
        if let Some(v) = applied.filter(|v| *v <= current_version && *v > s.applied_version) {
            s.applied_version = v;
            s.applied_at_ms = Some(now_ms);
        }
        drop(inner);
        self.publish_soon(now_ms, current_version);
        Ok(())
    }

    /// A watch stream closed.
    pub fn disconnect(&self, id: &str, now_ms: u64) {
        let mut inner = self.lock();
        if let Some(s) = inner.subscribers.get_mut(id) {
            s.streams = s.streams.saturating_sub(1);
            s.left = s.streams == 0;
            s.last_seen_ms = now_ms;
        }
    }

    /// `id` (already acknowledged by its owner) went away for good: its lease no longer
    /// holds barriers (see [`Subscribers::is_live`]); it is counted like a subscriber without
    /// one.
    pub fn release(&self, id: &str) {
        if let Some(s) = self.lock().subscribers.get_mut(id) {
            s.leased = false;
        }
    }

    /// A heartbeat on an open stream.
    pub fn touch(&self, id: &str, now_ms: u64) {
        if let Some(s) = self.lock().subscribers.get_mut(id) {
            s.last_seen_ms = now_ms;
        }
    }

    /// An explicit acknowledgement. Unknown subscribers may register here by giving their zone
    /// and kind (for clients that poll instead of watching).
    pub fn ack(
        &self,
        id: &str,
        owner: &str,
        version: u64,
        identity: Option<(&str, &str)>,
        current_version: u64,
        now_ms: u64,
    ) -> Result<Subscriber, SubscriberError> {
        check_id(id)?;
        if version > current_version {
            return Err(SubscriberError::FutureVersion {
                acked: version,
                current: current_version,
            });
        }
        let mut inner = self.lock();
        if !inner.subscribers.contains_key(id) {
            let Some((zone, kind)) = identity else {
                return Err(SubscriberError::Unknown(id.to_owned()));
            };
            // A subscriber that polls keeps no lease.
            self.admit_lease(false)?;
            check_label("zone", zone)?;
            check_label("kind", kind)?;
            self.admit(&mut inner, id, owner, zone, kind, now_ms)?;
        } else {
            self.admit(&mut inner, id, owner, "", "", now_ms)?;
        }
        let s = inner.subscribers.get_mut(id).expect("inserted above");
        s.last_seen_ms = now_ms;
        if version > s.applied_version {
            s.applied_version = version;
            s.applied_at_ms = Some(now_ms);
        }
        let snapshot = s.clone();
        drop(inner);
        self.publish_soon(now_ms, current_version);
        Ok(snapshot)
    }

    /// Whether barriers count `s`.
    ///
    /// One that left keeps a tenth of `stale_after` to reconnect (a stream broken by the
    /// network, a coordinator restart), so a reconnect does not drop it from the gate. A leased
    /// one keeps at least `lease_hold_ms` from when it left: its last confirmation was sent no
    /// later than that, so until then its write checks may still answer `owned` on the table it
    /// had (a stream cut by the network closes here while the client goes on serving), and a
    /// barrier that stopped counting it sooner could switch under it (issue 45: a subscriber
    /// whose stream closed was dropped after 3 s while it answered `owned` for 1 000 commits).
    fn is_live(&self, s: &Subscriber, now_ms: u64) -> bool {
        let keep = if s.left {
            let reconnect = self.stale_after_ms / 10;
            if s.leased { reconnect.max(self.lease_hold_ms) } else { reconnect }
        } else {
            self.stale_after_ms
        };
        s.streams > 0 || now_ms.saturating_sub(s.last_seen_ms) <= keep
    }

    /// Forgets subscribers unseen for twice the stale timeout.
    fn expire(&self, inner: &mut Inner, now_ms: u64) {
        let limit = self.stale_after_ms.saturating_mul(2);
        let owned = &mut inner.owned;
        inner.subscribers.retain(|_, s| {
            let keep = s.streams > 0 || now_ms.saturating_sub(s.last_seen_ms) <= limit;
            if !keep && let Some(n) = owned.get_mut(&s.owner) {
                *n = n.saturating_sub(1);
            }
            keep
        });
        owned.retain(|_, n| *n > 0);
    }

    /// Since when `s` lacks the version after the one it applied.
    fn missing_since(inner: &Inner, s: &Subscriber) -> u64 {
        inner
            .commit_times
            .iter()
            .find(|(v, _)| *v > s.applied_version)
            .map(|(_, at)| *at)
            .unwrap_or(s.applied_at_ms.unwrap_or(s.last_seen_ms))
    }

    /// This replica's live subscribers, for the other replicas' convergence gates (or an edge's
    /// leaves, for its coordinator's), as of `table_version`, the version the reporter has
    /// applied (or re-serves).
    pub fn summary(&self, now_ms: u64, table_version: u64) -> Summary {
        let mut inner = self.lock();
        self.expire(&mut inner, now_ms);
        // Linear in the subscribers and allocation-free per subscriber: an edge summarises up to
        // 100 000 leaves every 25 ms while they acknowledge, holding the registry's lock. Most
        // subscribers share a row of the counts: the last row found is tried first.
        let mut counts: Vec<((&str, u64), u64, u64)> = Vec::new();
        let mut last = usize::MAX;
        let mut live: Vec<&Subscriber> = Vec::new();
        for s in inner.subscribers.values().filter(|s| self.is_live(s, now_ms)) {
            let key = (s.zone.as_str(), s.applied_version);
            if counts.get(last).is_none_or(|(k, _, _)| *k != key) {
                last = match counts.iter().position(|(k, _, _)| *k == key) {
                    Some(at) => at,
                    None => {
                        counts.push((key, 0, 0));
                        counts.len() - 1
                    }
                };
            }
            counts[last].1 += 1;
            counts[last].2 += u64::from(s.leased);
            if s.applied_version < table_version {
                live.push(s);
            }
        }
        counts.sort_unstable();
        // The furthest behind, by name: the first SUMMARY_NAMES picked out, then only they sorted.
        let order = |a: &&Subscriber, b: &&Subscriber| {
            (a.applied_version, a.id.as_str()).cmp(&(b.applied_version, b.id.as_str()))
        };
        if live.len() > SUMMARY_NAMES {
            live.select_nth_unstable_by(SUMMARY_NAMES, order);
            live.truncate(SUMMARY_NAMES);
        }
        live.sort_unstable_by(order);
        let behind = live
            .iter()
            .map(|s| SummaryBehind {
                id: s.id.clone(),
                zone: s.zone.clone(),
                kind: s.kind.clone(),
                applied_version: s.applied_version,
                missing_since_ms: Self::missing_since(&inner, s),
                via: None,
                leased: s.leased,
            })
            .collect();
        let mut summary = Summary {
            leased: counts
                .iter()
                .filter(|(_, _, leased)| *leased > 0)
                .map(|((z, v), _, leased)| ((*z).to_owned(), *v, *leased))
                .collect(),
            counts: counts.into_iter().map(|((z, v), n, _)| (z.to_owned(), v, n)).collect(),
            behind,
            table_version,
        };
        // The leaves of this replica's edges go to the other replicas with its own subscribers
        // (a replica's report is never passed on, so nothing is counted twice).
        for (edge, (at, leaves)) in &inner.leaves {
            if now_ms.saturating_sub(*at) <= LEAVES_FRESH_MS {
                summary.absorb(leaves, Some(edge));
            }
        }
        summary
    }

    /// Takes in another replica's summary sent at `at_ms` (replacing its older ones).
    pub fn receive_peer(&self, replica: &str, at_ms: u64, summary: Summary) {
        let mut inner = self.lock();
        if inner.peers.get(replica).is_none_or(|(at, _)| *at <= at_ms) {
            inner.peers.insert(replica.to_owned(), (at_ms, summary));
        }
    }

    /// Every tracked subscriber with whether it is live, sorted by id.
    pub fn list(&self, now_ms: u64) -> Vec<(Subscriber, bool)> {
        let mut inner = self.lock();
        self.expire(&mut inner, now_ms);
        inner.subscribers.values().map(|s| (s.clone(), self.is_live(s, now_ms))).collect()
    }

    /// How many live subscribers run `version` or newer, and who is behind since when.
    pub fn convergence(&self, version: u64, now_ms: u64) -> Convergence {
        self.convergence_excluding(version, now_ms, None)
    }

    /// [`Subscribers::convergence`] without the subscribers of `excluded_zone`: those behind are
    /// listed in `excluded` instead of `behind`, and count neither as live nor as converged.
    ///
    /// It counts the subscribers of every replica, not only this one's: the others' summaries
    /// heard within `gate_view::PEER_FRESH_MS` are added (their furthest behind by name, the rest
    /// by count), so a replica without watchers waits for a stuck gateway on another replica as
    /// that replica does. A subscriber that moved to this replica is counted once by name
    /// (the newer version wins) but may still be counted by its old replica for a moment: that
    /// errs on the side of waiting.
    ///
    /// This is the convergence *gate* (how far a step has spread). A freeze's barrier, which
    /// decides whether two zones could write for one user, is [`Subscribers::barrier`].
    pub fn convergence_excluding(
        &self,
        version: u64,
        now_ms: u64,
        excluded_zone: Option<&str>,
    ) -> Convergence {
        let t = self.tally(version, now_ms, excluded_zone, Rule::Convergence);
        Convergence {
            version,
            live: t.live,
            converged: t.converged,
            behind: t.behind,
            excluded: t.excluded,
        }
    }

    /// The barrier of a freeze (or of the switch after it) on `version`: whether every copy of
    /// the table that could still answer `owned` under the table before `version` has applied
    /// it (issue 45, docs/src/partitions.md).
    ///
    /// The rule, one place for every kind of move: a switch may come when every live subscriber
    /// applied `version`, **or** the subscriber keeps the table lease and its lease has provably
    /// run out since `version` was committed, whatever the reason it went away (a closed stream,
    /// a silent one, a replica cut off or gone). A subscriber that has not applied `version`
    /// holds no confirmation newer than the commit (a replica confirms only what it has read,
    /// and its streams carry events before the heartbeats behind them), so it stops answering
    /// `owned` at most the lease, the clock skew and the longest write after the commit
    /// (`lease_hold_ms`, measured here from when this replica saw the version, which is no
    /// earlier than its commit). A subscriber without a lease gives no such bound: it is waited
    /// for until it applies the version or is no longer live, as before.
    ///
    /// An evacuation (`excluded_zone`) does not wait for the evacuated zone's clients that
    /// cannot answer `owned` any more; a leased one that may still is waited for until its lease
    /// ran out (issue 45: a cut-off zone evacuated at once kept writing the users the others
    /// took over). The evacuated zone's unleased subscribers are only named, as before.
    pub fn barrier(&self, version: u64, now_ms: u64, excluded_zone: Option<&str>) -> Barrier {
        let lease_out_at = self.lease_out_at(version);
        let lease_out = lease_out_at.is_some_and(|at| now_ms >= at);
        let t = self.tally(version, now_ms, excluded_zone, Rule::Barrier { lease_out });
        Barrier {
            version,
            live: t.live,
            converged: t.converged,
            behind: t.behind,
            excluded: t.excluded,
            lease_out: t.lease_out,
            lease_out_names: t.lease_out_names,
            lease_out_at_ms: lease_out_at,
            hold: self.freeze_hold(version, now_ms),
        }
    }

    /// When every leased copy that has not applied `version` has stopped answering `owned`:
    /// `lease_hold_ms` after this replica first saw `version` or a newer one committed (`None`
    /// without leases, or for a version it has not seen committed).
    fn lease_out_at(&self, version: u64) -> Option<u64> {
        if self.lease_hold_ms == 0 {
            return None;
        }
        let inner = self.lock();
        let (_, seen) = inner.commit_times.iter().find(|(v, _)| *v >= version)?;
        Some(seen.saturating_add(self.lease_hold_ms))
    }

    /// Counts the live subscribers of every replica and edge against `version` under `rule`.
    fn tally(&self, version: u64, now_ms: u64, excluded_zone: Option<&str>, rule: Rule) -> Tally {
        let mut inner = self.lock();
        self.expire(&mut inner, now_ms);
        let mut t = Tally::default();
        for s in inner.subscribers.values().filter(|s| self.is_live(s, now_ms)) {
            let excluded = excluded_zone.is_some_and(|z| z == s.zone);
            let class = rule.classify(s.applied_version >= version, excluded, s.leased);
            if class == Class::Skip {
                continue;
            }
            // Behind since the first version it lacks was committed (or since we met it).
            let missing_since = Self::missing_since(&inner, s);
            t.add(class, 1, || Behind {
                id: s.id.clone(),
                zone: s.zone.clone(),
                kind: s.kind.clone(),
                applied_version: s.applied_version,
                behind_for_ms: now_ms.saturating_sub(missing_since),
                via: None,
            });
        }
        let fresh = crate::service::peer_reports::PEER_FRESH_MS;
        let lost = inner.peers.values().any(|(at, summary)| {
            now_ms.saturating_sub(*at) > fresh && summary.counts.iter().any(|(_, _, n)| *n > 0)
        });
        // An edge gone silent with leaves: they are reconnecting (to another edge, or here).
        let leaves_lost = inner.leaves.values().any(|(at, summary)| {
            now_ms.saturating_sub(*at) > LEAVES_FRESH_MS && summary.total() > 0
        });
        if lost || leaves_lost {
            inner.peer_lost_ms = now_ms;
        }
        inner.peers.retain(|_, (at, _)| now_ms.saturating_sub(*at) <= fresh);
        inner.leaves.retain(|_, (at, _)| now_ms.saturating_sub(*at) <= LEAVES_FRESH_MS);
        let inner = &*inner;
        let local = |id: &str| inner.subscribers.get(id).is_some_and(|s| self.is_live(s, now_ms));
        let reports =
            inner.peers.values().map(|(_, summary)| (summary, None)).chain(
                inner.leaves.iter().map(|(edge, (_, summary))| (summary, Some(edge.as_str()))),
            );
        for (summary, edge) in reports {
            for (zone, applied, n) in &summary.counts {
                let leased = summary
                    .leased
                    .iter()
                    .find(|(z, v, _)| z == zone && v == applied)
                    .map_or(0, |(_, _, m)| (*m).min(*n));
                let excluded = excluded_zone.is_some_and(|z| z == zone);
                let current = *applied >= version;
                for (count, is_leased) in [(leased, true), (n - leased, false)] {
                    let class = rule.classify(current, excluded, is_leased);
                    t.count(class, count as usize);
                }
            }
            for b in summary.behind.iter().filter(|b| b.applied_version < version) {
                // Named here already: this replica's own view of it is the newer one.
                if local(&b.id) {
                    continue;
                }
                let excluded = excluded_zone.is_some_and(|z| z == b.zone);
                let class = rule.classify(false, excluded, b.leased);
                t.name(class, || Behind {
                    id: b.id.clone(),
                    zone: b.zone.clone(),
                    kind: b.kind.clone(),
                    applied_version: b.applied_version,
                    behind_for_ms: now_ms.saturating_sub(b.missing_since_ms),
                    via: b.via.clone().or_else(|| edge.map(str::to_owned)),
                });
            }
        }
        t
    }

    /// Updates the gauges after an ack or a connect, at most every `PUBLISH_EVERY_MS`: each
    /// update scans every subscriber under the lock, so 10 000 subscribers acking one version
    /// made 10 000 scans of 10 000 (about 2.5 s of the coordinator's CPU, most of the dial ->
    /// all acked time). A new version and every `/metrics` scrape update them too, so what is
    /// scraped is exact.
    fn publish_soon(&self, now_ms: u64, current_version: u64) {
        let last = self.published_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= PUBLISH_EVERY_MS
            && self
                .published_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.publish(now_ms, current_version);
        }
    }

    /// Updates the subscriber gauges (current / behind / stale).
    pub fn publish(&self, now_ms: u64, current_version: u64) {
        let inner = self.lock();
        let (mut current, mut behind, mut stale) = (0u64, 0u64, 0u64);
        for s in inner.subscribers.values() {
            if !self.is_live(s, now_ms) {
                stale += 1;
            } else if s.applied_version >= current_version {
                current += 1;
            } else {
                behind += 1;
            }
        }
        telemetry::publish_subscribers(current, behind, stale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_on_a_replayed_version_waits_for_reconnects_and_a_new_one_does_not() {
        let subscribers = Subscribers::new(30_000, 100);
        assert_eq!(subscribers.reconnect_grace_left(5, 1_000), 0, "before note_start: no grace");
        subscribers.note_start(7, 1_000_000, true);
        assert_eq!(subscribers.reconnect_grace_left(7, 1_000_000), RECONNECT_GRACE_MS);
        assert_eq!(subscribers.reconnect_grace_left(3, 1_004_000), RECONNECT_GRACE_MS - 4_000);
        assert_eq!(subscribers.reconnect_grace_left(7, 1_000_000 + RECONNECT_GRACE_MS), 0);
        assert_eq!(subscribers.reconnect_grace_left(8, 1_000_000), 0, "made after the start");
        // A change made after the start still waits until the other replicas could be heard.
        assert!(subscribers.freeze_hold(8, 1_000_500).unwrap().contains("hearing"));
        let heard = 1_000_000 + crate::service::peer_reports::PEER_FRESH_MS;
        assert_eq!(subscribers.freeze_hold(8, heard), None);
        // A coordinator alone on its log has no replica to hear: no wait after its start for a
        // change made since, while a replayed version still waits for reconnects.
        let alone = Subscribers::new(30_000, 100);
        alone.note_start(7, 1_000_000, false);
        assert_eq!(alone.freeze_hold(8, 1_000_001), None);
        assert!(alone.freeze_hold(7, 1_000_001).unwrap().contains("reconnecting"));
        // A replica whose subscribers were counted goes silent: every barrier waits the grace.
        let here = Subscribers::new(30_000, 100);
        let summary =
            Summary { counts: vec![("az-a".into(), 9, 3)], table_version: 8, ..Summary::default() };
        here.receive_peer("r2", 2_000_000, summary.clone());
        let fresh = crate::service::peer_reports::PEER_FRESH_MS;
        assert_eq!(here.convergence_excluding(9, 2_000_000, None).live, 3);
        assert_eq!(here.reconnect_grace_left(9, 2_000_000), 0);
        // Its summary was made before version 9: it may lack a subscriber, so it holds.
        let hold = here.freeze_hold(9, 2_000_000).expect("a summary older than the freeze holds");
        assert!(hold.contains("r2") && hold.contains("version 9"), "{hold}");
        here.receive_peer("r2", 2_000_000, Summary { table_version: 9, ..summary });
        assert_eq!(here.freeze_hold(9, 2_000_000), None);
        let gone = 2_000_001 + fresh;
        assert_eq!(here.convergence_excluding(9, gone, None).live, 0, "its report expired");
        assert_eq!(here.reconnect_grace_left(9, gone), RECONNECT_GRACE_MS);
        assert!(here.freeze_hold(9, gone).unwrap().contains("reconnecting"));
        assert_eq!(here.reconnect_grace_left(9, gone + RECONNECT_GRACE_MS), 0);
        // Never longer than the liveness window.
        let short = Subscribers::new(2_000, 100);
        short.note_start(7, 1_000_000, true);
        assert_eq!(short.reconnect_grace_left(7, 1_000_500), 1_500);
    }

    /// The barrier's rule, a row per case: (applied, leased, zone, excluded zone, at) ->
    /// (live, converged, waited behind, lease ran out). The freeze (version 7) was seen
    /// committed at 1 000; leases run out 8 500 ms later.
    #[test]
    fn a_barrier_waits_for_a_leased_copy_until_its_lease_ran_out_and_for_an_unleased_one_until_it_applies()
     {
        let out = 1_000 + 8_500;
        for (applied, leased, zone, excluded, now, expected) in [
            (7, true, "az-a", None, 2_000, (1, 1, 0, 0)), // applied: counted, converged
            (6, true, "az-a", None, 2_000, (1, 0, 1, 0)), // behind, lease may still answer owned
            (6, true, "az-a", None, out - 1, (1, 0, 1, 0)), // a ms before its lease ran out
            (6, true, "az-a", None, out, (0, 0, 0, 1)),   // its lease ran out: not waited for
            (6, false, "az-a", None, out + 60_000, (1, 0, 1, 0)), // no lease: waited for
            (6, true, "az-b", Some("az-b"), 2_000, (1, 0, 1, 0)), // evacuated, leased: waited
            (6, true, "az-b", Some("az-b"), out, (0, 0, 0, 1)), // ... until its lease ran out
            (6, false, "az-b", Some("az-b"), 2_000, (0, 0, 0, 0)), // evacuated, unleased: named
            (7, true, "az-b", Some("az-b"), 2_000, (0, 0, 0, 0)), // evacuated, applied: left out
        ] {
            let subs = Subscribers::new(30_000, 100).with_lease_hold(8_500);
            subs.committed(6, 500);
            subs.committed(7, 1_000);
            subs.connect("s", "svc", zone, "service", Some(applied), 7, 900).unwrap();
            subs.set_leased("s", leased);
            let b = subs.barrier(7, now, excluded);
            let row = (applied, leased, zone, excluded, now);
            assert_eq!((b.live, b.converged, b.behind.len(), b.lease_out), expected, "{row:?}");
            assert_eq!(b.excluded.len(), usize::from(!leased && excluded.is_some()), "{row:?}");
            assert_eq!(b.lease_out_at_ms, Some(out));
            let passes = b.freeze_barrier().all_applied;
            assert_eq!(passes, expected.0 == expected.1, "{row:?}");
        }
    }

    #[test]
    fn a_barrier_without_leases_or_before_the_commit_was_seen_never_counts_a_lease_out() {
        let subs = Subscribers::new(30_000, 100);
        subs.committed(7, 1_000);
        subs.connect("s", "svc", "az-a", "service", Some(6), 7, 900).unwrap();
        subs.set_leased("s", true);
        let b = subs.barrier(7, 1_000_000, None);
        assert_eq!((b.live, b.lease_out, b.lease_out_at_ms), (1, 0, None));
        // Leases on, but version 8 not seen committed here yet: nothing ran out.
        let subs = Subscribers::new(30_000, 100).with_lease_hold(8_500);
        subs.committed(7, 1_000);
        subs.connect("s", "svc", "az-a", "service", Some(7), 7, 900).unwrap();
        subs.set_leased("s", true);
        let b = subs.barrier(8, 1_000_000, None);
        assert_eq!((b.live, b.lease_out, b.lease_out_at_ms), (1, 0, None));
    }

    #[test]
    fn a_barrier_counts_the_leased_copies_of_other_replicas_by_their_reports() {
        let (here, there) = (
            Subscribers::new(30_000, 100).with_lease_hold(8_500),
            Subscribers::new(30_000, 100).with_lease_hold(8_500),
        );
        here.committed(7, 1_000);
        for (id, applied, leased) in [("cut-1", 6, true), ("cut-2", 6, true), ("old", 6, false)] {
            there.connect(id, "svc", "az-c", "service", Some(applied), 7, 900).unwrap();
            there.set_leased(id, leased);
        }
        let report = there.summary(9_400, 7);
        assert_eq!(report.leased, vec![("az-c".to_owned(), 6, 2)]);
        assert!(report.behind.iter().filter(|b| b.leased).count() == 2, "{report:?}");
        // Through JSON, as replicas exchange them (an older replica sends no `leased`).
        let json = serde_json::to_string(&report).unwrap();
        here.receive_peer("r2", 9_400, serde_json::from_str(&json).unwrap());
        let b = here.barrier(7, 9_499, None);
        assert_eq!((b.live, b.converged, b.lease_out), (3, 0, 0));
        let b = here.barrier(7, 9_500, None);
        assert_eq!((b.live, b.converged, b.lease_out), (1, 0, 2));
        let names: Vec<_> = b.behind.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(names, ["old"]);
        assert!(b.passed_because().contains("leases ran out"), "{}", b.passed_because());
        // A report claiming more leased than counted is refused.
        let forged = Summary { leased: vec![("az-c".to_owned(), 6, 4)], ..report };
        assert!(forged.check(7).is_err());
    }

    #[test]
    fn a_replica_without_watchers_waits_for_a_stuck_gateway_on_another_replica() {
        let (here, there) = (Subscribers::new(10_000, 100), Subscribers::new(10_000, 100));
        for (id, v) in [("gw-ok", 7), ("gw-stuck", 3), ("svc-b", 3)] {
            let zone = if id == "svc-b" { "az-b" } else { "az-a" };
            there.ack(id, "svc", v, Some((zone, "gateway")), 7, 1_000).unwrap();
        }
        // Alone, this replica has nobody to wait for.
        assert_eq!(here.convergence(7, 1_100).fraction(), 1.0);
        here.receive_peer("r2", 1_050, there.summary(1_050, 7));
        let c = here.convergence(7, 1_100);
        assert_eq!((c.live, c.converged), (3, 1));
        let names: Vec<_> = c.behind.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(names, ["gw-stuck", "svc-b"]);
        // An evacuation of az-b leaves its subscriber out, by name.
        let c = here.convergence_excluding(7, 1_100, Some("az-b"));
        assert_eq!((c.live, c.converged, c.excluded.len()), (2, 1, 1));
        // A subscriber that moved here counts by its newer version here, named once.
        here.ack("gw-stuck", "svc", 7, Some(("az-a", "gateway")), 7, 1_100).unwrap();
        let c = here.convergence(7, 1_100);
        assert_eq!(c.behind.iter().filter(|b| b.id == "gw-stuck").count(), 0);
        // A replica that stopped reporting stops counting.
        let c = here.convergence(7, 1_050 + crate::service::peer_reports::PEER_FRESH_MS + 1);
        assert_eq!((c.live, c.converged), (1, 1));
    }

    /// The summary an edge sends for many leaves: exact counts by zone and version, and the
    /// [`SUMMARY_NAMES`] furthest behind in (version, name) order, as a full sort gives them.
    #[test]
    fn a_summary_of_many_subscribers_names_the_furthest_behind_in_order() {
        let subscribers = Subscribers::new(10_000, 1_000).with_max(1_000);
        let mut all = Vec::new();
        for n in 0..500u64 {
            let (id, zone, version) = (
                format!("leaf-{:03}", (n * 7919) % 500),
                ["az-a", "az-b"][(n % 2) as usize],
                1 + (n * 31) % 9,
            );
            subscribers.ack(&id, "service:l", version, Some((zone, "service")), 9, 1_000).unwrap();
            all.push((version, id, zone));
        }
        let summary = subscribers.summary(1_000, 10);
        all.sort();
        let names: Vec<_> =
            summary.behind.iter().map(|b| (b.applied_version, b.id.clone())).collect();
        let expected: Vec<_> =
            all.iter().take(SUMMARY_NAMES).map(|(v, id, _)| (*v, id.clone())).collect();
        assert_eq!(names, expected);
        let mut counts = BTreeMap::new();
        for (v, _, zone) in &all {
            *counts.entry((zone.to_string(), *v)).or_insert(0u64) += 1;
        }
        let expected: Vec<_> = counts.into_iter().map(|((z, v), n)| (z, v, n)).collect();
        assert_eq!(summary.counts, expected);
        assert_eq!(summary.total(), 500);
        // Only those that lack the reporter's version are named; all are still counted.
        let as_of_3 = subscribers.summary(1_000, 3);
        assert!(!as_of_3.behind.is_empty());
        assert!(as_of_3.behind.iter().all(|b| b.applied_version < 3), "{:?}", as_of_3.behind);
        let lacking = all.iter().filter(|(v, _, _)| *v < 3).count();
        assert_eq!(as_of_3.behind.len(), lacking.min(SUMMARY_NAMES));
        assert_eq!((as_of_3.counts, as_of_3.table_version), (summary.counts, 3));
    }

    #[test]
    fn a_leaves_report_with_an_impossible_count_or_lag_is_refused() {
        let now = 1_800_000_000_000;
        let coordinator = Subscribers::new(10_000, 100);
        coordinator.committed(6, now - 5_000_000);
        coordinator.committed(7, now - 60_000);
        coordinator.connect("edge-1", "service:e", "az-a", "edge", Some(7), 7, now).unwrap();
        let leaf = |applied: u64, since: u64| SummaryBehind {
            id: "leaf".into(),
            zone: "az-a".into(),
            kind: "service".into(),
            applied_version: applied,
            missing_since_ms: since,
            via: None,
            leased: false,
        };
        let report = |counts: Vec<(String, u64, u64)>, behind: Vec<SummaryBehind>| Summary {
            counts,
            behind,
            table_version: 7,
            leased: Vec::new(),
        };
        let receive = |s: Summary| coordinator.receive_leaves("edge-1", "service:e", s, 7, now);
        // Counts: a sum that would wrap, and one above any edge's bound.
        let wraps = report(vec![("az-a".into(), 7, u64::MAX), ("az-b".into(), 7, 2)], vec![]);
        assert!(matches!(receive(wraps), Err(SubscriberError::BadSummary(_))));
        let huge = report(vec![("az-a".into(), 7, MAX_LEAVES_PER_EDGE + 1)], vec![]);
        assert!(matches!(receive(huge), Err(SubscriberError::BadSummary(_))));
        // Lag: lacking version 7 since before it was committed (56 years), or since the future.
        let counts = vec![("az-a".into(), 6, 1)];
        let ancient = report(counts.clone(), vec![leaf(6, now - 56 * 365 * 86_400_000)]);
        assert!(matches!(receive(ancient), Err(SubscriberError::BadSummary(_))));
        let future = report(counts.clone(), vec![leaf(6, now + 60_000)]);
        assert!(matches!(receive(future), Err(SubscriberError::BadSummary(_))));
        let ahead = report(counts.clone(), vec![leaf(8, now)]);
        assert!(matches!(receive(ahead), Err(SubscriberError::BadSummary(_))));
        // A version older than any remembered commit: no longer behind than since the oldest.
        assert_eq!(receive(report(counts.clone(), vec![leaf(2, 0)])), Ok(1));
        let c = coordinator.convergence(7, now);
        assert_eq!(c.behind[0].behind_for_ms, 5_000_000, "{c:?}");
        // The control: the same leaf, behind since version 7 was committed, counts.
        assert_eq!(receive(report(counts, vec![leaf(6, now - 59_000)])), Ok(1));
        let c = coordinator.convergence(7, now);
        assert_eq!((c.live, c.behind[0].behind_for_ms), (2, 59_000), "{c:?}");
        let max = report(vec![("az-a".into(), 7, MAX_LEAVES_PER_EDGE)], vec![]);
        assert_eq!(receive(max), Ok(MAX_LEAVES_PER_EDGE));
    }

    #[test]
    fn an_edges_leaves_count_in_the_gates_name_their_edge_and_expire_with_its_reports() {
        let (coordinator, edge) = (Subscribers::new(10_000, 100), Subscribers::new(10_000, 100));
        coordinator.connect("edge-1", "service:e", "az-a", "edge", Some(7), 7, 1_000).unwrap();
        edge.ack("leaf-ok", "service:l", 7, Some(("az-a", "service")), 7, 1_000).unwrap();
        edge.ack("leaf-stuck", "service:l", 5, Some(("az-b", "service")), 7, 1_000).unwrap();
        let report = edge.summary(1_000, 7);
        // Only the caller that registered the edge may report for it, and only for a known one.
        assert_eq!(
            coordinator.receive_leaves("edge-1", "service:x", report.clone(), 7, 1_000),
            Err(SubscriberError::NotOwner { id: "edge-1".into() })
        );
        assert_eq!(
            coordinator.receive_leaves("edge-9", "service:e", report.clone(), 7, 1_000),
            Err(SubscriberError::Unknown("edge-9".into()))
        );
        assert!(matches!(
            coordinator.receive_leaves("edge-1", "service:e", report.clone(), 6, 1_000),
            Err(SubscriberError::BadSummary(_))
        ));
        assert_eq!(coordinator.receive_leaves("edge-1", "service:e", report, 7, 1_000), Ok(2));
        let c = coordinator.convergence(7, 1_100);
        assert_eq!((c.live, c.converged), (3, 2));
        let stuck: Vec<_> = c.behind.iter().map(|b| (b.id.as_str(), b.via.as_deref())).collect();
        assert_eq!(stuck, [("leaf-stuck", Some("edge-1"))]);
        // The coordinator's report to the other replicas carries the leaves, with their edge.
        let onward = coordinator.summary(1_100, 7);
        assert_eq!(onward.total(), 3);
        assert!(
            onward
                .behind
                .iter()
                .any(|b| b.id == "leaf-stuck" && b.via.as_deref() == Some("edge-1"))
        );
        // A freeze on a version the edge has not re-served yet waits for its next report.
        let hold = coordinator.freeze_hold(8, 1_100).expect("the edge reported only v7");
        assert!(hold.contains("edge edge-1"), "{hold}");
        // The edge goes silent: its leaves stop counting, and the gates wait for them to
        // reconnect elsewhere.
        let gone = 1_001 + LEAVES_FRESH_MS;
        assert_eq!(coordinator.convergence(7, gone).live, 1);
        assert_eq!(coordinator.reconnect_grace_left(7, gone), RECONNECT_GRACE_MS);
    }

    #[test]
    fn convergence_counts_live_subscribers_on_or_after_a_version() {
        let subs = Subscribers::new(1000, 100);
        subs.committed(5, 100);
        subs.committed(6, 200);
        subs.connect("gw-1", "svc", "az-a", "gateway", Some(6), 6, 210).unwrap();
        subs.connect("gw-2", "svc", "az-b", "gateway", Some(5), 6, 210).unwrap();
        subs.ack("svc-1", "svc", 4, Some(("az-a", "service")), 6, 220).unwrap();
        let c = subs.convergence(6, 300);
        assert_eq!((c.live, c.converged), (3, 1));
        let gw2 = c.behind.iter().find(|b| b.id == "gw-2").unwrap();
        assert_eq!(gw2.behind_for_ms, 100, "missing version 6 since it was committed at 200");
        let svc = c.behind.iter().find(|b| b.id == "svc-1").unwrap();
        assert_eq!(svc.behind_for_ms, 200, "missing version 5 since 100");
        subs.ack("gw-2", "svc", 6, None, 6, 310).unwrap();
        assert_eq!(subs.convergence(6, 320).converged, 2);
    }

    #[test]
    fn silent_subscribers_go_stale_then_are_forgotten_but_streams_keep_them_live() {
        let subs = Subscribers::new(1000, 100);
        subs.ack("poller", "svc", 1, Some(("az-a", "service")), 1, 0).unwrap();
        subs.connect("watcher", "svc", "az-a", "gateway", None, 1, 0).unwrap();
        assert_eq!(subs.convergence(1, 500).live, 2);
        assert_eq!(subs.convergence(1, 1500).live, 1, "the poller went stale");
        assert_eq!(subs.list(1500).len(), 2);
        assert_eq!(subs.list(2500).len(), 1, "forgotten after twice the timeout");
        subs.disconnect("watcher", 2600);
        assert_eq!(subs.convergence(1, 4000).live, 0);
        assert_eq!(subs.convergence(1, 4000).fraction(), 1.0);
    }

    #[test]
    fn bad_input_is_refused() {
        let subs = Subscribers::new(1000, 100);
        assert!(subs.connect("", "svc", "az-a", "k", None, 1, 0).is_err());
        assert!(subs.connect("a b", "svc", "az-a", "k", None, 1, 0).is_err());
        assert!(subs.connect("ok", "svc", "az a", "k", None, 1, 0).is_err());
        assert_eq!(
            subs.ack("nobody", "svc", 1, None, 1, 0),
            Err(SubscriberError::Unknown("nobody".into()))
        );
        assert!(matches!(
            subs.ack("x", "svc", 9, Some(("az-a", "k")), 3, 0),
            Err(SubscriberError::FutureVersion { .. })
        ));
    }

    #[test]
    fn a_subscriber_takes_acks_and_streams_only_from_its_owner() {
        let subs = Subscribers::new(1000, 100);
        subs.connect("gw-1", "service:aaaa", "az-a", "gateway", None, 3, 0).unwrap();
        assert_eq!(
            subs.ack("gw-1", "service:bbbb", 3, None, 3, 10),
            Err(SubscriberError::NotOwner { id: "gw-1".into() })
        );
        assert_eq!(
            subs.connect("gw-1", "service:bbbb", "az-a", "gateway", Some(3), 3, 10),
            Err(SubscriberError::NotOwner { id: "gw-1".into() })
        );
        assert_eq!(subs.list(20)[0].0.applied_version, 0, "the foreign ack changed nothing");
        assert_eq!(subs.ack("gw-1", "service:aaaa", 3, None, 3, 20).unwrap().applied_version, 3);
    }

    #[test]
    fn each_caller_has_its_own_cap() {
        let subs = Subscribers::new(1000, 3);
        for i in 0..3 {
            subs.connect(&format!("flood-{i}"), "service:bad", "az-a", "k", None, 1, 0).unwrap();
        }
        assert!(matches!(
            subs.connect("flood-3", "service:bad", "az-a", "k", None, 1, 0),
            Err(SubscriberError::CallerFull { .. })
        ));
        assert!(matches!(
            subs.ack("flood-4", "service:bad", 1, Some(("az-a", "k")), 1, 0),
            Err(SubscriberError::CallerFull { .. })
        ));
        subs.connect("gw-1", "service:good", "az-a", "gateway", None, 1, 0).unwrap();
        subs.connect("flood-0", "service:bad", "az-a", "k", None, 1, 0).unwrap();
        // Forgotten subscribers (closed, unseen for twice the stale timeout) free their owner's
        // slots, and only theirs.
        for i in 0..3 {
            subs.disconnect(&format!("flood-{i}"), 0);
        }
        subs.disconnect("flood-0", 0);
        for i in 5..8 {
            subs.connect(&format!("flood-{i}"), "service:bad", "az-a", "k", None, 1, 2_001)
                .unwrap();
        }
        assert!(matches!(
            subs.connect("flood-8", "service:bad", "az-a", "k", None, 1, 2_001),
            Err(SubscriberError::CallerFull { .. })
        ));
        subs.connect("gw-2", "service:good", "az-a", "gateway", None, 1, 2_001).unwrap();
    }

    #[test]
    fn require_lease_refuses_subscribers_without_one() {
        let subs = Subscribers::new(30_000, 100).requiring_lease(true);
        assert_eq!(subs.admit_lease(false), Err(SubscriberError::LeaseRequired));
        assert_eq!(subs.admit_lease(true), Ok(()));
        // A poller registering through an ack keeps no lease: refused too.
        let polled = subs.ack("p1", "service:x", 1, Some(("az-a", "service")), 1, 0);
        assert_eq!(polled.unwrap_err(), SubscriberError::LeaseRequired);
        // Off (the default): both are taken.
        let open = Subscribers::new(30_000, 100);
        assert_eq!(open.admit_lease(false), Ok(()));
        assert!(open.ack("p1", "service:x", 1, Some(("az-a", "service")), 1, 0).is_ok());
    }
}
