//! `Router`: a local, always-up-to-date copy of the routing table for services to tag with.
//!
//! A background thread keeps the watch stream open, applies each new table, acknowledges it, and
//! saves it to disk. Tagging reads the current table through an `ArcSwap` and never waits for the
//! network, so a service keeps routing on its last table while the coordinator is down, and can
//! start from the disk copy when the coordinator is unreachable at boot.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use serde_json::Value;

use super::sse::{self, Endpoint, Item};
use super::tls;
use super::wire::decode_table;
use crate::metrics::CLIENT_MISROUTED;
use tidegate_core::{Fallback, RoutingTable, TagError, UnitError, ZoneId, validate_user_id};

/// How this client names itself to the coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub subscriber_id: String,
    pub zone: String,
    pub kind: String,
}

/// Connection and behaviour settings; `RouterOptions::default()` suits most services.
#[derive(Clone, Debug)]
pub struct RouterOptions {
    /// Bearer token (a service token), sent on the watch and on every ack. Registering as a
    /// subscriber and acknowledging are writes (they steer drains through the convergence gate):
    /// without a token the client only reads the table, anonymously, and is not counted.
    pub token: Option<String>,
    /// Where to keep the last known table (written atomically on every new version).
    pub cache_path: Option<PathBuf>,
    /// What an untagged read (a request without a user ID) gets.
    pub fallback: Fallback,
    /// What an untagged write gets: `Reject` by default, so a write never lands in a zone drawn
    /// at random (see [`Router::untagged_write`]).
    pub write_fallback: Fallback,
    pub connect_timeout: Duration,
    /// The stall bound: when neither an event nor a heartbeat arrives within this long (nor,
    /// on a new connection, the answer), the coordinator is judged stalled (a hung process
    /// keeps its socket open and says nothing) and the client moves to the next one. Keep it
    /// longer than the coordinators' `subscribers.heartbeat` (2 s by default; 5 s before the
    /// table lease), with margin.
    pub read_timeout: Duration,
    /// Reconnect backoff: doubles from `backoff_min` to `backoff_max`, with full jitter.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Acknowledge applied versions (turn off only to simulate a stuck subscriber in tests).
    pub acknowledge: bool,
    /// Keep the table lease the coordinator announces: write checks answer `unconfirmed` once
    /// the table has not been confirmed current for a lease (docs/src/partitions.md). Turn off
    /// for a subscriber whose answers no lease bounds (the database fence: its rows decide
    /// writes however long it has not heard from a coordinator), or to reproduce a client of an
    /// older release in tests. Barriers wait for a subscriber without a lease until it applies
    /// a version or is gone, never only until a lease ran out.
    pub keep_lease: bool,
    /// For `https://` coordinators: trust only the certificates in this PEM file instead of the
    /// system's roots. Defaults to `TIDEGATE_CA_FILE` when that is set.
    pub ca_file: Option<PathBuf>,
    /// Called on the watcher thread with each table the client takes: its version and its
    /// routing event's data (the JSON the coordinator sent). `tidegate edge` re-serves the watch
    /// stream from here (the fan-out tree); keep it short, the next event waits for it.
    pub on_table: Option<TableHook>,
}

/// A callback for [`RouterOptions::on_table`].
#[derive(Clone)]
pub struct TableHook(pub Arc<TableFn>);

/// What a [`TableHook`] calls: the table's version and its routing event's data.
pub type TableFn = dyn Fn(u64, &str) + Send + Sync;

impl std::fmt::Debug for TableHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TableHook")
    }
}

/// The default stall bound: the coordinators' heartbeat of older releases (5 s) and 3 s of
/// margin (today's default heartbeat is 2 s; the bound grows to a coordinator's announced
/// heartbeat plus a second).
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(8);

impl Default for RouterOptions {
    fn default() -> Self {
        RouterOptions {
            token: None,
            cache_path: None,
            fallback: Fallback::Random,
            write_fallback: Fallback::Reject,
            connect_timeout: Duration::from_secs(3),
            read_timeout: DEFAULT_STALL_TIMEOUT,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            acknowledge: true,
            keep_lease: true,
            ca_file: super::tls::ca_file_from_env(),
            on_table: None,
        }
    }
}

/// A user's tag, evaluated locally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub color: ZoneId,
    /// The lane (colour) users and headers see: `blue`, `green`, or a further zone's lane
    /// (borrowed, like `zone`: a tag allocates nothing).
    pub lane: std::borrow::Cow<'static, str>,
    pub unit: u32,
    /// The zone's name (`az-a`), borrowed from the names every table interns.
    pub zone: std::borrow::Cow<'static, str>,
    pub version: u64,
    pub pinned: bool,
}

/// Where the table being served came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// No table yet: tagging fails until one arrives.
    Nothing,
    /// Loaded from the disk cache; the coordinator has not been reached since start.
    DiskCache,
    /// Received from the coordinator's watch stream.
    Coordinator,
    /// Given to `Router::fixed`.
    Fixed,
}

#[derive(Clone, Debug)]
pub struct RouterStatus {
    pub connected: bool,
    pub origin: Origin,
    pub version: Option<u64>,
    pub updated_at: Option<SystemTime>,
    pub last_error: Option<String>,
    pub reconnects: u64,
    /// The coordinator the stream is open to (or was last tried), when watching.
    pub coordinator: Option<String>,
    /// The last coordinator was judged stalled: it sent neither an event nor a heartbeat within
    /// the stall bound (`RouterOptions::read_timeout`). Cleared when a stream opens again.
    pub stalled: bool,
    /// When the last event or heartbeat arrived from a coordinator.
    pub last_heard: Option<SystemTime>,
    /// A table offered from another command log than the held table's, refused (the held
    /// table is kept); cleared when a table is taken.
    pub refused: Option<String>,
    /// The heartbeat interval the coordinator of the open (or last) stream announced.
    pub coordinator_heartbeat: Option<Duration>,
    /// The stall bound in force for that stream: `RouterOptions::read_timeout`, raised to the
    /// coordinator's heartbeat plus a second when it is shorter (see [`crate::sse::stall_bound`]).
    pub stall_bound: Option<Duration>,
    /// The table lease the coordinator of the open (or last) stream announced
    /// (`x-tidegate-lease-ms`); `None` from a coordinator that confirms nothing (an older one),
    /// and then write checks are not leased.
    pub lease: Option<Duration>,
    /// When the coordinator last confirmed the held table current (its clock), if it did.
    pub confirmed_at: Option<SystemTime>,
    /// How long write checks may still answer `owned` on the held table (zero: they answer
    /// `unconfirmed`); `None` without a lease.
    pub lease_left: Option<Duration>,
}

impl std::fmt::Display for RouterStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let version = self.version.map_or("no table".to_owned(), |v| format!("version {v}"));
        let origin = match self.origin {
            Origin::Nothing => "nothing",
            Origin::DiskCache => "the disk cache",
            Origin::Coordinator => "the coordinator",
            Origin::Fixed => "a fixed table",
        };
        write!(f, "serving {version} from {origin}")?;
        if self.lease_left == Some(Duration::ZERO) {
            write!(f, "; not confirmed current (writes answer unconfirmed)")?;
        }
        if let Some(refused) = &self.refused {
            write!(f, "; {refused}")?;
        }
        if !self.connected && self.origin != Origin::Fixed {
            if self.stalled {
                write!(f, "; coordinator stalled")?;
            } else {
                write!(f, "; coordinator unreachable")?;
            }
            if let Some(e) = &self.last_error {
                write!(f, " ({e})")?;
            }
        }
        Ok(())
    }
}

/// A tag's refusal as the client reports it (the one mapping `tag_for_service` and
/// `check_write_for` share).
impl From<TagError> for ClientError {
    fn from(e: TagError) -> ClientError {
        match e {
            TagError::InvalidUserId(e) => ClientError::InvalidUserId(e),
            TagError::ChannelUnavailable(name) => ClientError::ChannelUnavailable(name),
            TagError::Untagged => ClientError::Untagged,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("no routing table yet (coordinator unreachable and no disk cache)")]
    NoTable,
    #[error(transparent)]
    InvalidUserId(#[from] UnitError),
    #[error("the request carries no tag and no user ID, and the fallback is `reject`")]
    Untagged,
    #[error("invalid coordinator URL: {0}")]
    InvalidUrl(String),
    /// An unusable `RouterOptions` value (named).
    #[error("invalid router option: {0}")]
    InvalidOption(String),
    /// The table has no routing domain of that name.
    #[error("the routing table has no domain `{0}`")]
    UnknownDomain(String),
    /// The user's release channel is suspended and its fallback is `reject`.
    #[error("release channel `{0}` is suspended and its fallback is `reject`")]
    ChannelUnavailable(String),
    /// The `https://` coordinator's trust settings are unusable (a missing CA file, no roots).
    #[error(transparent)]
    Tls(#[from] super::tls::TlsError),
}

/// A write for a user this colour does not own: refuse it (the LDC "last line" check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("user {user_id} belongs to {owner_lane} at routing version {version}, not to {local_lane}")]
pub struct Misrouted {
    pub user_id: String,
    /// The owner's zone, when the table could tell (not without a table or with a bad ID).
    pub owner: Option<ZoneId>,
    pub owner_lane: String,
    pub local: ZoneId,
    pub local_lane: String,
    pub version: u64,
}

/// A write in flight ([`Router::write_scope`]): the Router acknowledges no newer table until
/// it is dropped.
#[must_use = "the scope must live until the write is committed"]
pub struct WriteScope<'a> {
    _guard: RwLockReadGuard<'a, ()>,
    shared: &'a Shared,
}

impl WriteScope<'_> {
    /// Keeps the scope's hold past its end, for `bound`: the Router acknowledges no table newer
    /// than `judged_version` that freezes units until `bound` from now has passed. For a write
    /// whose commit this process cannot see end, such as one checked over HTTP (`GET
    /// /v1/write-check` on an edge), whose caller commits somewhere else within at most `bound`
    /// (`[subscribers] max_write`); `judged_version` is the version of the table that answered
    /// it. Tables without a freeze are acknowledged as before (no barrier waits on them), and
    /// writes judged with the freeze's own table never hold it.
    pub fn hold_for(self, judged_version: u64, bound: Duration) {
        let until = self.shared.lease.now_ns().saturating_add(duration_ns(bound));
        let mut holds = self.shared.write_holds.lock().unwrap_or_else(PoisonError::into_inner);
        let held = holds.entry(judged_version).or_insert(0);
        *held = (*held).max(until);
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

struct Shared {
    table: ArcSwapOption<RoutingTable>,
    status: Mutex<RouterStatus>,
    stop: AtomicBool,
    /// The open stream, so `Drop` can shut it down and wake the reader at once.
    socket: Mutex<Option<std::net::TcpStream>>,
    acked: AtomicU64,
    /// The command log the held table came from (`log_id` of its routing event), if known.
    log_id: Mutex<Option<String>>,
    /// Writes in flight ([`Router::write_scope`]) hold it shared; the watcher takes it
    /// exclusively before it acknowledges a version, so an acknowledgement says that no write
    /// judged with an older table is still being committed.
    writes: RwLock<()>,
    /// Writes answered `owned` whose commit ends elsewhere, by the version that judged them:
    /// until when (ns on `lease.epoch`'s clock) they hold acknowledgements of newer tables with
    /// a freeze ([`WriteScope::hold_for`]).
    write_holds: Mutex<BTreeMap<u64, u64>>,
    /// The held table's routing event data (from the stream or the disk cache), with its version.
    event: Mutex<Option<(u64, Arc<str>)>>,
    /// What acknowledgements go out with, for [`Router::post_upstream`] (none on a fixed router).
    agent: Option<ureq::Agent>,
    token: Option<String>,
    /// The table lease ([`tidegate_core::lease`]).
    lease: Lease,
    /// Who acknowledges (a token and acknowledgements on): told to the coordinator on drop.
    acknowledger: Option<Identity>,
}

/// The held table's lease: written by the watcher thread, read by every write check.
struct Lease {
    /// What `until_ns` counts from.
    epoch: Instant,
    /// The lease the stream announced, in ms (0: none announced, write checks are not leased).
    lease_ms: AtomicU64,
    /// Write checks may answer `owned` until `epoch + until_ns` (0: never confirmed).
    until_ns: AtomicU64,
    /// The last confirmation's time on the coordinator's clock (ms since the Unix epoch).
    confirmed_at_ms: AtomicU64,
}

impl Lease {
    fn new() -> Lease {
        Lease {
            epoch: Instant::now(),
            lease_ms: AtomicU64::new(0),
            until_ns: AtomicU64::new(0),
            confirmed_at_ms: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a write check may answer `owned`: no lease announced, or one not run out.
    fn confirmed(&self) -> bool {
        self.lease_ms.load(Ordering::Acquire) == 0
            || self.now_ns() < self.until_ns.load(Ordering::Acquire)
    }

    /// A confirmation at `confirmed_at_ms` (the coordinator's clock) arrived: the lease runs
    /// for what is left of it by our wall clock, from now on our monotonic clock. Never moves
    /// the end back (a late confirmation after a newer one buys nothing).
    fn confirm(&self, confirmed_at_ms: u64) {
        let lease_ms = self.lease_ms.load(Ordering::Acquire);
        let left = tidegate_core::lease::lease_left(confirmed_at_ms, lease_ms, wall_ms());
        if left == 0 {
            return;
        }
        let until = self.now_ns().saturating_add(left.saturating_mul(1_000_000));
        self.until_ns.fetch_max(until, Ordering::AcqRel);
        self.confirmed_at_ms.fetch_max(confirmed_at_ms, Ordering::AcqRel);
    }

    /// (the lease, when it was last confirmed, what is left) for [`RouterStatus`].
    fn status(&self) -> (Option<Duration>, Option<SystemTime>, Option<Duration>) {
        let lease_ms = self.lease_ms.load(Ordering::Acquire);
        if lease_ms == 0 {
            return (None, None, None);
        }
        let confirmed = self.confirmed_at_ms.load(Ordering::Acquire);
        let at = (confirmed > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_millis(confirmed));
        let left = self.until_ns.load(Ordering::Acquire).saturating_sub(self.now_ns());
        (Some(Duration::from_millis(lease_ms)), at, Some(Duration::from_nanos(left)))
    }
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What to do with a table that arrives while `held` (version, log id) is held.
#[derive(Debug, PartialEq, Eq)]
enum Arrival {
    Take,
    /// Not newer, from the same log (or an unknown one): keep the held table quietly.
    Keep,
    /// From another log than the held table's: the coordinators were moved to a new log (or
    /// this client points at another cluster). Versions of two logs say nothing about each
    /// other, so a higher one is no better: keep routing with the held table, and say so loudly
    /// rather than keep it silently or jump to a table of unknown relation.
    Refuse(String),
}

fn arrival(held: Option<(u64, Option<&str>)>, version: u64, log_id: Option<&str>) -> Arrival {
    let Some((held_version, held_log)) = held else { return Arrival::Take };
    if let (Some(held_log), Some(log_id)) = (held_log, log_id)
        && held_log != log_id
    {
        return Arrival::Refuse(format!(
            "refused the table at version {version} of command log {log_id}: the held table is at version {held_version} of another log ({held_log})"
        ));
    }
    if version > held_version { Arrival::Take } else { Arrival::Keep }
}

/// The client. Cheap to share behind an `Arc`; dropping the last handle stops the watcher.
pub struct Router {
    shared: Arc<Shared>,
    fallback: Fallback,
    write_fallback: Fallback,
    watcher: Option<JoinHandle<()>>,
}

impl Router {
    /// Starts watching `url` (e.g. `http://127.0.0.1:8080`, or several comma-separated
    /// coordinators, tried in turn whenever the stream breaks). Returns at once: with the disk
    /// cache's table if there is one, else with no table until the first event arrives (see
    /// [`Router::wait_for_version`]).
    pub fn connect(
        url: &str,
        identity: Identity,
        options: RouterOptions,
    ) -> Result<Router, ClientError> {
        let endpoints = url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(Endpoint::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(ClientError::InvalidUrl)?;
        if endpoints.is_empty() {
            return Err(ClientError::InvalidUrl("no coordinator URL given".into()));
        }
        if options.read_timeout.is_zero() {
            return Err(ClientError::InvalidOption(
                "read_timeout (the stall bound) must be longer than zero".into(),
            ));
        }
        let ack_timeout = ACK_TIMEOUT.min(options.read_timeout);
        // TLS settings are checked here, so a wrong CA file fails `connect`, not every retry.
        let (tls, agent) = match endpoints.iter().find(|e| e.tls) {
            Some(https) => {
                let ca_file = options.ca_file.as_deref();
                let config = tls::client_config(ca_file).map_err(ClientError::Tls)?;
                let agent = tls::agent(&https.base_url(), ack_timeout, ca_file)
                    .map_err(ClientError::Tls)?;
                (Some(config), agent)
            }
            None => (
                None,
                ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(ack_timeout))
                    .build()
                    .into(),
            ),
        };
        let shared = Arc::new(Shared {
            table: ArcSwapOption::empty(),
            status: Mutex::new(RouterStatus {
                connected: false,
                origin: Origin::Nothing,
                version: None,
                updated_at: None,
                last_error: None,
                reconnects: 0,
                coordinator: None,
                stalled: false,
                last_heard: None,
                refused: None,
                coordinator_heartbeat: None,
                stall_bound: None,
                lease: None,
                confirmed_at: None,
                lease_left: None,
            }),
            stop: AtomicBool::new(false),
            socket: Mutex::new(None),
            acked: AtomicU64::new(0),
            log_id: Mutex::new(None),
            writes: RwLock::new(()),
            write_holds: Mutex::new(BTreeMap::new()),
            event: Mutex::new(None),
            agent: Some(agent.clone()),
            token: options.token.clone(),
            lease: Lease::new(),
            acknowledger: (options.acknowledge && options.token.is_some())
                .then(|| identity.clone()),
        });
        if let Some(path) = &options.cache_path
            && let Some((table, log_id, data)) = load_cache(path)
        {
            // The cache keeps the log its table came from, so a restarted client still knows
            // (and serves) it, and refuses a table from another log as a running one does.
            *shared.log_id.lock().unwrap_or_else(PoisonError::into_inner) = log_id;
            let mut status = shared.status.lock().unwrap_or_else(PoisonError::into_inner);
            status.origin = Origin::DiskCache;
            status.version = Some(table.version());
            // The cache is rewritten on every new version, so its age is the table's age.
            status.updated_at = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            *shared.event.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((table.version(), Arc::from(data)));
            shared.table.store(Some(Arc::new(table)));
        }
        let (fallback, write_fallback) = (options.fallback, options.write_fallback);
        let thread_shared = Arc::clone(&shared);
        let watcher = std::thread::Builder::new()
            .name(format!("tidegate-watch-{}", identity.subscriber_id))
            .spawn(move || watch_loop(&thread_shared, &endpoints, tls, agent, &identity, &options))
            .expect("spawning the watcher thread");
        Ok(Router { shared, fallback, write_fallback, watcher: Some(watcher) })
    }

    /// A router over a fixed table, with no network: for tests, benchmarks and offline tools.
    pub fn fixed(table: RoutingTable) -> Router {
        let shared = Arc::new(Shared {
            status: Mutex::new(RouterStatus {
                connected: false,
                origin: Origin::Fixed,
                version: Some(table.version()),
                updated_at: Some(SystemTime::now()),
                last_error: None,
                reconnects: 0,
                coordinator: None,
                stalled: false,
                last_heard: None,
                refused: None,
                coordinator_heartbeat: None,
                stall_bound: None,
                lease: None,
                confirmed_at: None,
                lease_left: None,
            }),
            table: ArcSwapOption::from_pointee(table),
            stop: AtomicBool::new(true),
            socket: Mutex::new(None),
            acked: AtomicU64::new(0),
            log_id: Mutex::new(None),
            writes: RwLock::new(()),
            write_holds: Mutex::new(BTreeMap::new()),
            event: Mutex::new(None),
            agent: None,
            token: None,
            lease: Lease::new(),
            acknowledger: None,
        });
        Router {
            shared,
            fallback: Fallback::Random,
            write_fallback: Fallback::Reject,
            watcher: None,
        }
    }

    /// The current table, if any.
    pub fn table(&self) -> Option<Arc<RoutingTable>> {
        self.shared.table.load_full()
    }

    pub fn version(&self) -> Option<u64> {
        self.shared.table.load().as_ref().map(|t| t.version())
    }

    /// The newest version this client has acknowledged to the coordinator.
    pub fn acked_version(&self) -> u64 {
        self.shared.acked.load(Ordering::SeqCst)
    }

    /// The held table's routing event data, as the coordinator sent it (or the disk cache kept
    /// it), with its version: what `tidegate edge` re-serves to the subscribers below it.
    pub fn event(&self) -> Option<(u64, Arc<str>)> {
        self.shared.event.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Posts `body` as JSON to `path` on the coordinator this client watches (or last tried),
    /// with its token, through the connection pool its acknowledgements use; the answer's status.
    /// `tidegate edge` reports the subscribers below it this way.
    pub fn post_upstream(&self, path: &str, body: &Value) -> Result<u16, String> {
        let agent = self.shared.agent.as_ref().ok_or("a fixed router has no coordinator")?;
        let base = self.status().coordinator.ok_or("no coordinator tried yet")?;
        let mut request = agent.post(&format!("{base}{path}"));
        if let Some(token) = &self.shared.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        match request.send_json(body) {
            Ok(response) => Ok(response.status().as_u16()),
            Err(e) => Err(format!("{base}{path}: {e}")),
        }
    }

    /// The command log the held table came from (`log_id` of its routing event), if known.
    pub fn log_id(&self) -> Option<String> {
        self.shared.log_id.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn status(&self) -> RouterStatus {
        let mut status = self.shared.status.lock().unwrap_or_else(PoisonError::into_inner).clone();
        (status.lease, status.confirmed_at, status.lease_left) = self.shared.lease.status();
        status
    }

    /// Whether write checks may answer `owned` now: the coordinator confirmed the held table
    /// within its lease, or announced no lease (an older coordinator, a fixed table, a table
    /// from the disk cache before any stream opened). Reads and tags never depend on it.
    pub fn lease_confirmed(&self) -> bool {
        self.shared.lease.confirmed()
    }

    /// The newest confirmation's time on the coordinator's clock (ms since the Unix epoch; 0:
    /// none yet): what `tidegate edge` forwards in the heartbeats of the streams it serves.
    pub fn confirmed_at_ms(&self) -> u64 {
        self.shared.lease.confirmed_at_ms.load(Ordering::Acquire)
    }

    /// The lease the coordinator announced (`None`: no lease).
    pub fn lease(&self) -> Option<Duration> {
        match self.shared.lease.lease_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Blocks until the table is at `version` or newer, or `timeout` passes.
    pub fn wait_for_version(&self, version: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.version().is_some_and(|v| v >= version) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Tags a user locally: the same hash and table as the server's `GET /v1/tag`.
    #[inline]
    pub fn tag(&self, user_id: &str) -> Result<Tag, ClientError> {
        validate_user_id(user_id)?;
        let guard = self.shared.table.load();
        let table = guard.as_ref().ok_or(ClientError::NoTable)?;
        let tag = table.tag(user_id)?;
        Ok(Tag {
            color: tag.color,
            lane: table.lane_static(tag.color),
            unit: tag.unit.0,
            zone: table.zone_static(tag.color),
            version: table.version(),
            pinned: tag.pinned,
        })
    }

    /// Tags a user locally in the routing domain `domain` (the default domain's table for
    /// `default`); [`ClientError::UnknownDomain`] when the table has no such domain.
    pub fn tag_in(&self, domain: &str, user_id: &str) -> Result<Tag, ClientError> {
        validate_user_id(user_id)?;
        let guard = self.shared.table.load();
        let table = guard.as_ref().ok_or(ClientError::NoTable)?;
        let map = table
            .map_of(Some(domain))
            .ok_or_else(|| ClientError::UnknownDomain(domain.to_owned()))?;
        let tag = table.tag_in(map, user_id)?;
        Ok(Tag {
            color: tag.color,
            lane: table.lane_static(tag.color),
            unit: tag.unit.0,
            zone: table.zone_static(tag.color),
            version: table.version(),
            pinned: tag.pinned,
        })
    }

    /// Tags a call of `service` for a user in `domain` (`None`: the default domain): a pin wins,
    /// then the service's release channel when it selects the user, then the map, exactly as
    /// the server's `GET /v1/tag?service=` does. Also returns the rule that decided (`pin`,
    /// `channel:<name>`, `unit`). [`ClientError::ChannelUnavailable`] when the channel is
    /// suspended and its fallback is `reject`.
    pub fn tag_for_service(
        &self,
        domain: Option<&str>,
        service: &str,
        user_id: &str,
    ) -> Result<(Tag, String), ClientError> {
        validate_user_id(user_id)?;
        let guard = self.shared.table.load();
        let table = guard.as_ref().ok_or(ClientError::NoTable)?;
        let (tag, rule) = table
            .tag_service(domain, user_id, Some(service))
            .map_err(ClientError::from)?
            .ok_or_else(|| ClientError::UnknownDomain(domain.unwrap_or_default().to_owned()))?;
        let tag = Tag {
            color: tag.color,
            lane: table.lane_static(tag.color),
            unit: tag.unit.0,
            zone: table.zone_static(tag.color),
            version: table.version(),
            pinned: tag.pinned,
        };
        Ok((tag, rule.describe().into_owned()))
    }

    /// The colour of a request without a user ID, by the configured fallback.
    pub fn untagged(&self) -> Result<ZoneId, ClientError> {
        let table = self.table().ok_or(ClientError::NoTable)?;
        table.untagged(self.fallback, rand::random::<f64>()).map_err(|_| ClientError::Untagged)
    }

    /// The zone of a write without a user ID, by the write fallback (`reject` unless configured
    /// otherwise): [`ClientError::Untagged`] rather than a zone drawn at random.
    pub fn untagged_write(&self) -> Result<ZoneId, ClientError> {
        let table = self.table().ok_or(ClientError::NoTable)?;
        table
            .untagged(self.write_fallback, rand::random::<f64>())
            .map_err(|_| ClientError::Untagged)
    }

    /// The ownership check of a write of `user_id` by this service in `local`, which the caller
    /// routed here at `incoming_version` (the propagated `x-tidegate-version`, when there is
    /// one). See [`crate::write::WriteAnswer`] for the answers and what to do with each.
    pub fn check_write(
        &self,
        user_id: &str,
        local: ZoneId,
        incoming_version: Option<u64>,
    ) -> Result<crate::write::WriteAnswer, ClientError> {
        self.check_write_in(None, user_id, local, incoming_version)
    }

    /// [`Router::check_write`] in the routing domain `domain` (`None`: the default domain).
    pub fn check_write_in(
        &self,
        domain: Option<&str>,
        user_id: &str,
        local: ZoneId,
        incoming_version: Option<u64>,
    ) -> Result<crate::write::WriteAnswer, ClientError> {
        validate_user_id(user_id)?;
        let table = self.table().ok_or(ClientError::NoTable)?;
        let check = table
            .check_write(domain, user_id, local, incoming_version)?
            .ok_or_else(|| ClientError::UnknownDomain(domain.unwrap_or_default().to_owned()))?
            .leased(self.lease_confirmed());
        let answer = crate::write::WriteAnswer::new(&table, check);
        crate::write::count(&answer);
        Ok(answer)
    }

    /// The global write check: may this service, in `local`, write global data (data of no
    /// user) now, its caller having routed it at `incoming_version`? Behind, frozen (a
    /// global-writer move in progress), read-only, misrouted (another zone, or none, is the
    /// global writer), else owned, which turns into unconfirmed when this copy's lease has run
    /// out ([`tidegate_core::GlobalWriteCheck`]). Hold a [`Router::write_scope`] around the
    /// write, as for a user's write, so a move's freeze waits for it.
    pub fn check_global_write(
        &self,
        local: ZoneId,
        incoming_version: Option<u64>,
    ) -> Result<tidegate_core::GlobalWriteCheck, ClientError> {
        let table = self.table().ok_or(ClientError::NoTable)?;
        Ok(table.check_global_write(local, incoming_version).leased(self.lease_confirmed()))
    }

    /// [`Router::check_write_in`] of a write by `service`: a release channel of that service
    /// that selects the user owns their writes of it, as it routes their calls (pin > channel >
    /// map); [`ClientError::ChannelUnavailable`] while such a channel is suspended with
    /// `reject`.
    pub fn check_write_for(
        &self,
        domain: Option<&str>,
        service: &str,
        user_id: &str,
        local: ZoneId,
        incoming_version: Option<u64>,
    ) -> Result<crate::write::WriteAnswer, ClientError> {
        validate_user_id(user_id)?;
        let table = self.table().ok_or(ClientError::NoTable)?;
        let check = table
            .check_write_for(domain, Some(service), user_id, local, incoming_version)?
            .ok_or_else(|| ClientError::UnknownDomain(domain.unwrap_or_default().to_owned()))?
            .leased(self.lease_confirmed());
        let answer = crate::write::WriteAnswer::new(&table, check);
        crate::write::count(&answer);
        Ok(answer)
    }

    /// Opens a write's scope: hold it from before [`Router::check_write`] until the write is
    /// committed (or refused). While any scope is open the Router does not acknowledge a newer
    /// table (it still applies it: checks made meanwhile use it), so the coordinator's barrier
    /// "every live subscriber applied the freeze" also means "no write judged with the older
    /// table is still in flight here". Without it a write checked just before the freeze arrived
    /// could commit after the switch, when the unit already belongs to another zone. Keep a scope
    /// short (one write): an acknowledgement waits for every open one.
    pub fn write_scope(&self) -> WriteScope<'_> {
        WriteScope {
            _guard: self.shared.writes.read().unwrap_or_else(PoisonError::into_inner),
            shared: &self.shared,
        }
    }

    /// The last-line ownership check for write paths: `Ok` when `user_id` belongs to
    /// `local_color` under the current table, else `Misrouted` (counted in metrics). It knows
    /// neither the caller's version nor freezes: prefer [`Router::check_write`].
    pub fn owns(&self, user_id: &str, local_color: ZoneId) -> Result<(), Misrouted> {
        let local_lane = self.lane_name(local_color);
        let owner = match self.tag(user_id) {
            Ok(tag) => tag,
            // No table or a malformed ID: we cannot prove ownership, so refuse the write.
            Err(_) => {
                metrics::counter!(CLIENT_MISROUTED, "color" => "unknown").increment(1);
                return Err(Misrouted {
                    user_id: user_id.to_owned(),
                    owner: None,
                    owner_lane: "unknown".to_owned(),
                    local: local_color,
                    local_lane,
                    version: self.version().unwrap_or(0),
                });
            }
        };
        if owner.color == local_color && self.lease_confirmed() {
            return Ok(());
        }
        if owner.color == local_color {
            // Ours by a table the coordinator has not confirmed within its lease: refused like
            // any write check's `unconfirmed` (the owner may have changed meanwhile).
            metrics::counter!(CLIENT_MISROUTED, "color" => "unconfirmed").increment(1);
            return Err(Misrouted {
                user_id: user_id.to_owned(),
                owner: None,
                owner_lane: "unconfirmed".to_owned(),
                local: local_color,
                local_lane,
                version: owner.version,
            });
        }
        metrics::counter!(CLIENT_MISROUTED, "color" => owner.lane.to_string()).increment(1);
        Err(Misrouted {
            user_id: user_id.to_owned(),
            owner: Some(owner.color),
            owner_lane: owner.lane.into_owned(),
            local: local_color,
            local_lane,
            version: owner.version,
        })
    }

    /// The zone that takes writes to global data (the GZone) and whether global data is
    /// read-only, from the current table; `None` without a table.
    pub fn global_writer(&self) -> Option<(Option<ZoneId>, bool)> {
        self.table().map(|t| (t.global().zone, t.global().read_only))
    }

    /// The zone whose lane is `lane` in the current table; without a table, the first two
    /// lanes every table has (`blue`, `green`).
    pub fn zone_of_lane(&self, lane: &str) -> Option<ZoneId> {
        match self.table() {
            Some(table) => table.zones().by_lane(lane),
            None => match lane {
                "blue" => Some(ZoneId::BLUE),
                "green" => Some(ZoneId::GREEN),
                _ => None,
            },
        }
    }

    /// The lane of `zone` in the current table (its default name without one).
    pub fn lane_name(&self, zone: ZoneId) -> String {
        match self.table() {
            Some(table) if table.zones().contains(zone) => table.lane(zone).to_owned(),
            _ => zone.default_lane().into_owned(),
        }
    }
}

/// How long a dropped Router's last acknowledgement may take (on a thread of its own: the drop
/// does not wait for it).
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

impl Router {
    /// Tells the coordinator this subscriber goes away for good (an acknowledgement with
    /// `leaving`): a dropped Router checks no more writes, so its lease no longer needs to hold
    /// barriers, which otherwise count a subscriber that left for its whole lease (it might be
    /// cut off and still answering). Best effort within [`LEAVE_TIMEOUT`]: an older coordinator
    /// refuses the field, an unreachable one never hears it, a process that exits first never
    /// sends it, and each of them then waits out the lease, which is the safe side. Sent on a
    /// thread of its own, so a drop never waits for a slow coordinator.
    fn leave(&self) {
        let shared = &self.shared;
        let (Some(identity), Some(agent)) = (&shared.acknowledger, &shared.agent) else { return };
        // Before its first answer comes back, the version it holds: the coordinator may have
        // applied that acknowledgement already (a Router dropped right after the coordinator
        // showed it current), and a leave skipped for it held barriers for the whole lease.
        let acked = match shared.acked.load(Ordering::SeqCst) {
            0 => self.version().unwrap_or(0),
            acked => acked,
        };
        let connected = shared.status.lock().unwrap_or_else(PoisonError::into_inner).connected;
        let Some(base) = self.status().coordinator.filter(|_| connected && acked > 0) else {
            return;
        };
        let url = format!("{base}/v1/subscribers/{}/ack", encode(&identity.subscriber_id));
        let body = serde_json::json!({
            "version": acked, "zone": identity.zone, "kind": identity.kind, "leaving": true,
        });
        let mut request = agent.post(&url).config().timeout_global(Some(LEAVE_TIMEOUT)).build();
        if let Some(token) = &shared.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let _ = std::thread::Builder::new()
            .name("tidegate-leave".into())
            .spawn(move || drop(request.send_json(body)));
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.leave();
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(socket) =
            self.shared.socket.lock().unwrap_or_else(PoisonError::into_inner).take()
        {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
    }
}

/// The cached table and the command log it came from (`log_id` of the saved routing event;
/// `None` when the cache predates it or names none).
fn load_cache(path: &Path) -> Option<(RoutingTable, Option<String>, String)> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    let table = decode_table(&value).ok()?;
    let log_id = log_id_of(&value);
    Some((table, log_id, text))
}

fn log_id_of(value: &Value) -> Option<String> {
    value.get("log_id").and_then(Value::as_str).filter(|id| !id.is_empty()).map(str::to_owned)
}

/// Which of `count` coordinators a client tries first: spread by its subscriber ID (FNV-1a with
/// a final mix), so one hung coordinator at the head of every client's list holds only its share
/// of them, not all. The rest follow in list order from there.
pub fn first_choice(subscriber_id: &str, count: usize) -> usize {
    if count <= 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in subscriber_id.bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h % count as u64) as usize
}

/// Writes the table atomically: a crash mid-write leaves the previous copy intact.
///
/// The data is fsynced before the rename (or the rename could land before the bytes, leaving an
/// empty cache after a power loss), and the directory after it (or the rename itself could be
/// lost).
fn save_cache(path: &Path, data: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(data.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}

fn sleep_unless_stopped(shared: &Shared, duration: Duration) {
    let deadline = Instant::now() + duration;
    while !shared.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10).min(deadline - Instant::now()));
    }
}

/// How long an acknowledgement may take.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);

fn watch_loop(
    shared: &Shared,
    endpoints: &[Endpoint],
    tls_config: Option<Arc<rustls::ClientConfig>>,
    agent: ureq::Agent,
    identity: &Identity,
    options: &RouterOptions,
) {
    // Acknowledgements go through their own thread, so the reader goes on applying tables (a
    // freeze among them) while an acknowledgement waits for open write scopes.
    let (to_acker, pending) = std::sync::mpsc::channel::<(u64, &Endpoint)>();
    let acknowledging = options.acknowledge && options.token.is_some();
    std::thread::scope(|scope| {
        if acknowledging {
            let agent = &agent;
            scope.spawn(move || acknowledger(shared, agent, identity, options, pending));
        }
        // Dropping the sender when the loop ends stops the acknowledger.
        let to_acker = to_acker;
        follow(
            shared,
            endpoints,
            tls_config.as_ref(),
            identity,
            options,
            acknowledging.then_some(&to_acker),
        );
    });
}

/// Watches the coordinators in turn until the Router is dropped.
fn follow<'e>(
    shared: &Shared,
    endpoints: &'e [Endpoint],
    tls_config: Option<&Arc<rustls::ClientConfig>>,
    identity: &Identity,
    options: &RouterOptions,
    to_acker: Option<&ToAcker<'e>>,
) {
    let mut backoff = options.backoff_min;
    // Spread the first choice, then go round the list from there.
    let mut next = first_choice(&identity.subscriber_id, endpoints.len());
    // Coordinators tried since the last open stream (or the last backoff).
    let mut tried = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        // Failover: each new attempt goes to the next coordinator in the list.
        let endpoint = &endpoints[next % endpoints.len()];
        next += 1;
        tried += 1;
        shared.status.lock().unwrap_or_else(PoisonError::into_inner).coordinator =
            Some(endpoint.base_url());
        // Only an https:// endpoint speaks TLS, even when another one in the list does.
        let tls = if endpoint.tls { tls_config } else { None };
        let ended = watch_once(shared, endpoint, tls, identity, options, &mut backoff, to_acker);
        {
            let mut status = shared.status.lock().unwrap_or_else(PoisonError::into_inner);
            status.connected = false;
            status.stalled = ended.stalled;
            if let Some(e) = ended.error {
                status.last_error = Some(e);
            }
            status.reconnects += 1;
        }
        if ended.opened {
            // A stream that was open broke: this coordinator starts a new round.
            tried = 1;
        }
        if tried < endpoints.len() {
            // Another coordinator is left to try in this round: try it at once.
            continue;
        }
        tried = 0;
        // Full jitter: many clients losing the coordinator at once must not return in lockstep.
        let jittered = backoff.mul_f64(rand::random::<f64>());
        sleep_unless_stopped(shared, jittered.max(Duration::from_millis(10)));
        backoff = (backoff * 2).min(options.backoff_max);
    }
}

/// How one connection ended.
#[derive(Debug, Default)]
struct Ended {
    /// The stream had been opened (the coordinator answered 200).
    opened: bool,
    /// The coordinator fell silent for longer than the stall bound.
    stalled: bool,
    /// Why, as a sentence (`None` when the router is being dropped).
    error: Option<String>,
}

/// One connection: open, apply events until the stream ends.
#[allow(clippy::too_many_arguments)]
fn watch_once<'e>(
    shared: &Shared,
    endpoint: &'e Endpoint,
    tls: Option<&Arc<rustls::ClientConfig>>,
    identity: &Identity,
    options: &RouterOptions,
    backoff: &mut Duration,
    to_acker: Option<&ToAcker<'e>>,
) -> Ended {
    let held_log = shared.log_id.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut query = Vec::new();
    // This client keeps the table lease (`tidegate_core::lease`): a coordinator's barrier may
    // count on its write checks stopping at the lease's end.
    if options.keep_lease {
        query.push("lease=1".to_owned());
    }
    if options.token.is_some() {
        query.push(format!("subscriber_id={}", encode(&identity.subscriber_id)));
        query.push(format!("zone={}", encode(&identity.zone)));
        query.push(format!("kind={}", encode(&identity.kind)));
    }
    // The log the resumed version belongs to: a coordinator on another log sends its current
    // table (which `arrival` refuses, loudly) instead of nothing at an equal version.
    if let Some(log_id) = &held_log {
        query.push(format!("log_id={}", encode(log_id)));
    }
    let path = if query.is_empty() {
        "/v1/routing/watch".to_owned()
    } else {
        format!("/v1/routing/watch?{}", query.join("&"))
    };
    let mut headers = Vec::new();
    // Resume: the server sends nothing until something newer than `Last-Event-ID` exists, and
    // a registered subscriber counts it as acknowledged. So a subscriber names the version it
    // has *acknowledged* (a table applied while a write scope was open is not, yet), and a plain
    // watcher the version it holds.
    let resume = if options.token.is_some() {
        Some(shared.acked.load(Ordering::SeqCst)).filter(|v| *v > 0)
    } else {
        shared.table.load().as_ref().map(|t| t.version())
    };
    if let Some(version) = resume
        && options.acknowledge
    {
        headers.push(("Last-Event-ID", version.to_string()));
    }
    if let Some(token) = &options.token {
        headers.push(("Authorization", format!("Bearer {token}")));
    }
    let bound = options.read_timeout;
    let base = endpoint.base_url();
    let (socket, mut events) = match sse::open(
        endpoint,
        tls,
        &path,
        &headers,
        options.connect_timeout,
        bound,
    ) {
        Ok(opened) => opened,
        Err(e) if sse::is_silence(&e) => {
            return Ended {
                opened: false,
                stalled: true,
                error: Some(format!(
                    "{base} is stalled: it took the connection but did not answer the watch within {bound:?}"
                )),
            };
        }
        Err(e) => {
            return Ended { error: Some(format!("cannot watch {base}: {e}")), ..Ended::default() };
        }
    };
    *shared.socket.lock().unwrap_or_else(PoisonError::into_inner) = Some(socket);
    if shared.stop.load(Ordering::SeqCst) {
        return Ended { opened: true, ..Ended::default() };
    }
    {
        let mut status = shared.status.lock().unwrap_or_else(PoisonError::into_inner);
        status.connected = true;
        status.stalled = false;
        status.last_error = None;
        status.last_heard = Some(SystemTime::now());
        status.coordinator_heartbeat = events.heartbeat();
        status.stall_bound = events.bound();
    }
    let lease_ms = events
        .lease()
        .filter(|_| options.keep_lease)
        .map_or(0, |l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
    shared.lease.lease_ms.store(lease_ms, Ordering::Release);
    // The bound the server's heartbeat allows (the configured one, or longer).
    let bound = events.bound().unwrap_or(bound);
    *backoff = options.backoff_min;
    read_events(shared, &mut events, &base, bound, options, to_acker.map(|tx| (tx, endpoint)))
}

/// Versions applied from a stream, to acknowledge to the coordinator that sent them.
type ToAcker<'e> = std::sync::mpsc::Sender<(u64, &'e Endpoint)>;

/// Applies the stream's routing events until it ends; hands each version to be acknowledged
/// to the acknowledger (with the coordinator it came from).
fn read_events<'e>(
    shared: &Shared,
    events: &mut sse::EventReader,
    base: &str,
    bound: Duration,
    options: &RouterOptions,
    to_acker: Option<(&ToAcker<'e>, &'e Endpoint)>,
) -> Ended {
    let broke = |error: String| Ended { opened: true, stalled: false, error: Some(error) };
    // A coordinator that keeps the stream alive but has not confirmed the table for a whole
    // lease cannot read its log (cut off from it, or its tail stalled): leave it for one that can.
    let lease = events.lease().filter(|_| options.keep_lease);
    let mut last_confirmed = Instant::now();
    // The last table offered came from another log and was refused: its confirmations say
    // nothing about the table held, so they renew nothing.
    let mut refusing = false;
    loop {
        if let Some(lease) = lease
            && last_confirmed.elapsed() > lease
        {
            return Ended {
                opened: true,
                stalled: true,
                error: Some(format!(
                    "{base} has not confirmed its table for {lease:?} (it cannot read its log); moving to the next coordinator"
                )),
            };
        }
        let item = match events.next_item() {
            Ok(item) => item,
            Err(e) if sse::is_silence(&e) => {
                return Ended {
                    opened: true,
                    stalled: true,
                    error: Some(format!(
                        "{base} is stalled: neither an event nor a heartbeat within {bound:?}; moving to the next coordinator"
                    )),
                };
            }
            Err(e) => return broke(format!("watch stream broke: {e}")),
        };
        if item.is_some() {
            shared.status.lock().unwrap_or_else(PoisonError::into_inner).last_heard =
                Some(SystemTime::now());
        }
        let event = match item {
            None => return broke("the coordinator closed the watch stream".into()),
            Some(Item::Comment) => continue,
            Some(Item::Confirmation(confirmed_at_ms)) => {
                // Every event before this heartbeat was applied (one thread reads and applies in
                // stream order), so the confirmation covers the table held now.
                if !refusing {
                    shared.lease.confirm(confirmed_at_ms);
                    last_confirmed = Instant::now();
                }
                continue;
            }
            Some(Item::Event(event)) if event.event == "routing" => event,
            Some(Item::Event(_)) => continue,
        };
        let value: Value = match serde_json::from_str(&event.data) {
            Ok(value) => value,
            Err(e) => return broke(format!("bad routing event: {e}")),
        };
        let table = match decode_table(&value) {
            Ok(table) => table,
            Err(e) => return broke(e.to_string()),
        };
        let version = table.version();
        let log_id = log_id_of(&value);
        let decision = {
            let held_log = shared.log_id.lock().unwrap_or_else(PoisonError::into_inner);
            let held = shared.table.load().as_ref().map(|t| t.version());
            arrival(held.map(|v| (v, held_log.as_deref())), version, log_id.as_deref())
        };
        match decision {
            Arrival::Refuse(why) => {
                let why = match &options.cache_path {
                    Some(path) => format!(
                        "{why}; if the coordinators' log was replaced on purpose, remove the disk cache {} and restart the client to follow it",
                        path.display()
                    ),
                    None => format!(
                        "{why}; if the coordinators' log was replaced on purpose, restart the client to follow it"
                    ),
                };
                let mut status = shared.status.lock().unwrap_or_else(PoisonError::into_inner);
                status.last_error = Some(why.clone());
                status.refused = Some(why);
                refusing = true;
                // Neither taken, nor saved, nor acknowledged: the coordinator's convergence
                // sees this client stuck, which holds drains until someone looks.
                continue;
            }
            Arrival::Keep => refusing = false,
            Arrival::Take => {
                refusing = false;
                *shared.log_id.lock().unwrap_or_else(PoisonError::into_inner) = log_id;
                // The status first: whoever sees the new table's version then sees where it
                // came from (the other order let a reader see the version with the old origin).
                {
                    let mut status = shared.status.lock().unwrap_or_else(PoisonError::into_inner);
                    status.origin = Origin::Coordinator;
                    status.version = Some(version);
                    status.updated_at = Some(SystemTime::now());
                    status.refused = None;
                }
                shared.table.store(Some(Arc::new(table)));
                *shared.event.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((version, Arc::from(event.data.as_str())));
                if let Some(hook) = &options.on_table {
                    (hook.0)(version, &event.data);
                }
                if let Some(path) = &options.cache_path
                    && let Err(e) = save_cache(path, &event.data)
                {
                    shared.status.lock().unwrap_or_else(PoisonError::into_inner).last_error =
                        Some(format!("cannot save {}: {e}", path.display()));
                }
            }
        }
        if let Some((to_acker, endpoint)) = to_acker {
            let _ = to_acker.send((version, endpoint));
        }
    }
}

/// Acknowledges the versions the reader applied, newest first: before each acknowledgement it
/// waits for the writes judged with an older table (`Router::write_scope`) to end. The table is
/// already stored when its version arrives here, so every write that starts after that judges
/// with it, and once the exclusive lock is taken no write that started before is in flight.
/// One per Router, for its lifetime: a stream that breaks while an acknowledgement waits does
/// not hold the reconnect (the new stream resumes from the acknowledged version, so the
/// coordinator sends the current table again, and that is acknowledged to it).
fn acknowledger(
    shared: &Shared,
    agent: &ureq::Agent,
    identity: &Identity,
    options: &RouterOptions,
    pending: std::sync::mpsc::Receiver<(u64, &Endpoint)>,
) {
    while let Ok((mut version, mut endpoint)) = pending.recv() {
        let writes_done = shared.writes.write().unwrap_or_else(PoisonError::into_inner);
        // Acknowledging the newest applied version covers the older ones; taken while no
        // write is in flight, so versions applied while this waited are covered too.
        while let Ok((newer, from)) = pending.try_recv() {
            if newer >= version {
                (version, endpoint) = (newer, from);
            }
        }
        // Writes answered `owned` before this table and committed elsewhere
        // (`WriteScope::hold_for`) may still be in flight: a table with a freeze is what a
        // barrier waits on, so its acknowledgement waits for them too.
        let hold_until = {
            let mut holds = shared.write_holds.lock().unwrap_or_else(PoisonError::into_inner);
            let older = holds.range(..version).map(|(_, until)| *until).max().unwrap_or(0);
            let now = shared.lease.now_ns();
            holds.retain(|_, until| *until > now);
            older
        };
        drop(writes_done);
        let freezes = shared.table.load().as_ref().is_some_and(|t| has_freeze(t));
        while freezes && shared.lease.now_ns() < hold_until && !shared.stop.load(Ordering::SeqCst) {
            let left = hold_until.saturating_sub(shared.lease.now_ns());
            std::thread::sleep(Duration::from_nanos(left).min(Duration::from_millis(50)));
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        acknowledge(shared, agent, endpoint, identity, options, version);
    }
}

/// Whether `table` freezes writes (a unit move's, a channel's or a global-writer move's freeze).
fn has_freeze(table: &RoutingTable) -> bool {
    table.channel_freeze().is_some()
        || table.global().frozen
        || table.frozen().values().any(|units| !units.is_empty())
}

fn acknowledge(
    shared: &Shared,
    agent: &ureq::Agent,
    endpoint: &Endpoint,
    identity: &Identity,
    options: &RouterOptions,
    version: u64,
) {
    let url =
        format!("{}/v1/subscribers/{}/ack", endpoint.base_url(), encode(&identity.subscriber_id));
    let body =
        serde_json::json!({ "version": version, "zone": identity.zone, "kind": identity.kind });
    let mut request = agent.post(&url);
    if let Some(token) = &options.token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    match request.send_json(body) {
        Ok(response) if response.status().is_success() => {
            shared.acked.fetch_max(version, Ordering::SeqCst);
        }
        Ok(response) => {
            shared.status.lock().unwrap_or_else(PoisonError::into_inner).last_error =
                Some(format!("ack of v{version} got HTTP {}", response.status()));
        }
        Err(e) => {
            shared.status.lock().unwrap_or_else(PoisonError::into_inner).last_error =
                Some(format!("ack of v{version} failed: {e}"))
        }
    }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod log_identity_tests {
    use super::{Arrival, arrival};

    #[test]
    fn a_table_from_another_log_is_refused_not_silently_ignored() {
        assert_eq!(arrival(None, 3, Some("a")), Arrival::Take);
        assert_eq!(arrival(Some((3, Some("a"))), 4, Some("a")), Arrival::Take);
        assert_eq!(arrival(Some((3, Some("a"))), 2, Some("a")), Arrival::Keep);
        assert_eq!(arrival(Some((3, None)), 2, Some("b")), Arrival::Keep);
        assert_eq!(arrival(Some((3, None)), 4, Some("b")), Arrival::Take);
        match arrival(Some((9, Some("a"))), 2, Some("b")) {
            Arrival::Refuse(why) => assert!(why.contains("version 2 of command log b"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A higher version of another log is no better: versions of two logs are unrelated.
        match arrival(Some((9, Some("a"))), 12, Some("b")) {
            Arrival::Refuse(why) => assert!(why.contains("version 9 of another log (a)"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod stall_tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use super::*;

    fn routing_event(version: u64, log_id: &str) -> String {
        let data = serde_json::json!({
            "version": version, "log_id": log_id, "units": 100, "blue_units": version,
            "colors": {"blue": "az-a", "green": "az-b"}, "pins": {}, "unit_mode": "hash",
            "digits_skip": null, "hash": tidegate_core::HASH_ALGORITHM,
        });
        format!("id:{version}\nevent:routing\ndata:{data}\n\n")
    }

    /// A coordinator stand-in: answers every watch with `first`, then, with `heartbeat`, sends
    /// a heartbeat comment every 50 ms; without, it says nothing more and keeps the socket open
    /// (what a SIGSTOPped process looks like from outside).
    fn fake_coordinator(first: String, heartbeat: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let first = first.clone();
                std::thread::spawn(move || serve(stream, &first, heartbeat));
            }
        });
        url
    }

    fn serve(mut stream: TcpStream, first: &str, heartbeat: bool) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
            line.clear();
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
        if stream.write_all(format!("{head}{first}").as_bytes()).is_err() {
            return;
        }
        loop {
            std::thread::sleep(Duration::from_millis(50));
            if heartbeat && stream.write_all(b":heartbeat\n\n").is_err() {
                return;
            }
        }
    }

    /// A subscriber ID whose first choice among `count` coordinators is `index`.
    fn id_starting_at(index: usize, count: usize) -> String {
        (0..).map(|n| format!("edge-{n}")).find(|id| first_choice(id, count) == index).unwrap()
    }

    fn options(bound: Duration) -> RouterOptions {
        RouterOptions {
            read_timeout: bound,
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            ca_file: None,
            ..RouterOptions::default()
        }
    }

    fn identity(subscriber_id: String) -> Identity {
        Identity { subscriber_id, zone: "az-a".into(), kind: "edge".into() }
    }

    #[test]
    fn first_choices_spread_over_the_list() {
        for count in [2usize, 3, 5] {
            let mut seen = vec![0usize; count];
            for n in 0..3000 {
                seen[first_choice(&format!("edge-host-{n}-8081"), count)] += 1;
            }
            let even = 3000 / count;
            for (i, n) in seen.iter().enumerate() {
                assert!(n * 10 > even * 8 && n * 10 < even * 12, "{count}: index {i} got {n}");
            }
        }
        assert_eq!(first_choice("anything", 1), 0);
        assert_eq!(first_choice("edge-a", 3), first_choice("edge-a", 3), "deterministic");
    }

    #[test]
    fn a_silent_coordinator_is_left_within_the_bound_and_the_status_says_stalled() {
        let hung = fake_coordinator(routing_event(1, "log-1"), false);
        let live = fake_coordinator(routing_event(2, "log-1"), true);
        let bound = Duration::from_millis(400);
        let id = id_starting_at(0, 2);
        let router =
            Router::connect(&format!("{hung},{live}"), identity(id), options(bound)).unwrap();
        assert!(router.wait_for_version(1, Duration::from_secs(5)), "{}", router.status());
        let got_first = Instant::now();
        assert_eq!(router.version(), Some(1), "started on the first coordinator, as chosen");
        while router.version() == Some(1) && got_first.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let left = got_first.elapsed();
        assert_eq!(router.version(), Some(2), "{}", router.status());
        assert!(left >= bound - Duration::from_millis(50), "left after {left:?}, before the bound");
        assert!(left < bound + Duration::from_millis(400), "left after {left:?}");
        let status = router.status();
        assert!(status.connected && !status.stalled, "{status:?}");
        assert!(status.coordinator.as_deref().is_some_and(|c| live.ends_with(&c[7..])));
        // Heartbeats keep a live stream open past the bound.
        std::thread::sleep(bound * 3);
        assert!(
            router.status().connected && router.status().reconnects == 1,
            "{:?}",
            router.status()
        );
    }

    #[test]
    fn a_coordinator_that_takes_the_connection_but_never_answers_is_left_within_the_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mute = format!("http://{}", listener.local_addr().unwrap());
        // Never accepted: the kernel completes the handshake, nobody reads or answers.
        let live = fake_coordinator(routing_event(3, "log-1"), true);
        let started = Instant::now();
        let router = Router::connect(
            &format!("{mute},{live}"),
            identity(id_starting_at(0, 2)),
            options(Duration::from_millis(300)),
        )
        .unwrap();
        assert!(router.wait_for_version(3, Duration::from_secs(5)), "{}", router.status());
        assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
        // With nowhere else to go, the status says stalled (not connected, not unreachable).
        let alone =
            Router::connect(&mute, identity("alone".into()), options(Duration::from_millis(200)))
                .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let status = alone.status();
        assert!(status.stalled && !status.connected, "{status:?}");
        assert!(status.to_string().contains("coordinator stalled"), "{status}");
        drop(listener);
    }

    #[test]
    fn a_restart_from_the_cache_keeps_the_log_id_and_refuses_another_logs_table() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("table.json");
        let event = routing_event(5, "log-old");
        let data = event.lines().find_map(|l| l.strip_prefix("data:")).unwrap();
        std::fs::write(&cache, data).unwrap();
        let other = fake_coordinator(routing_event(7, "log-new"), true);
        let router = Router::connect(
            &other,
            identity("edge-cache".into()),
            RouterOptions { cache_path: Some(cache.clone()), ..options(Duration::from_secs(2)) },
        )
        .unwrap();
        assert_eq!(router.log_id().as_deref(), Some("log-old"), "the cache keeps the log id");
        assert_eq!(router.version(), Some(5));
        let refused = (0..500).find_map(|_| {
            std::thread::sleep(Duration::from_millis(10));
            router.status().refused
        });
        let refused = refused.expect("the refusal shows in the status");
        assert!(refused.contains("version 7 of command log log-new"), "{refused}");
        assert!(refused.contains(&cache.display().to_string()), "names the cache: {refused}");
        assert!(router.status().to_string().contains("refused the table"));
        assert_eq!((router.version(), router.log_id().as_deref()), (Some(5), Some("log-old")));
        assert_eq!(std::fs::read_to_string(&cache).unwrap(), data, "the cache is not overwritten");
    }

    /// A coordinator stand-in: the first watch stream gets `events`, `gap` apart, then
    /// heartbeats (or, with `close_first`, ends); later streams get only heartbeats. Any other
    /// request (an acknowledgement) gets 200 and an empty body. Every request head is recorded.
    fn coordinator_sending(
        events: Vec<String>,
        gap: Duration,
        close_first: bool,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&heads);
        std::thread::spawn(move || {
            let streams = Arc::new(AtomicU64::new(0));
            for mut stream in listener.incoming().map_while(Result::ok) {
                let (events, heads, streams) =
                    (events.clone(), Arc::clone(&recorded), Arc::clone(&streams));
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let (mut line, mut request) = (String::new(), String::new());
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        request.push_str(&line);
                        line.clear();
                    }
                    heads.lock().unwrap().push(request.clone());
                    if !request.starts_with("GET /v1/routing/watch") {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        );
                        return;
                    }
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
                    let _ = stream.write_all(head.as_bytes());
                    let first = streams.fetch_add(1, Ordering::SeqCst) == 0;
                    if first {
                        for (n, event) in events.iter().enumerate() {
                            if n > 0 {
                                std::thread::sleep(gap);
                            }
                            let _ = stream.write_all(event.as_bytes());
                        }
                        if close_first {
                            std::thread::sleep(gap);
                            let _ = stream.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                    }
                    while stream.write_all(b":heartbeat\n\n").is_ok() {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                });
            }
        });
        (url, heads)
    }

    fn wait_acked(router: &Router, version: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(5);
        while router.acked_version() < version && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        router.acked_version()
    }

    #[test]
    fn an_open_write_scope_holds_back_the_acknowledgement_not_the_tables() {
        let (url, heads) = coordinator_sending(
            vec![routing_event(1, "log-1"), routing_event(2, "log-1"), routing_event(3, "log-1")],
            Duration::from_millis(300),
            false,
        );
        let router = Router::connect(
            &url,
            identity("writer-1".into()),
            RouterOptions { token: Some("t".into()), ..options(Duration::from_secs(2)) },
        )
        .unwrap();
        assert!(router.wait_for_version(1, Duration::from_secs(5)), "{}", router.status());
        assert_eq!(wait_acked(&router, 1), 1);
        // A write in flight, judged with version 1, while versions 2 and 3 arrive: both are
        // applied (the reader is not held by the scope; a freeze among them takes effect at
        // once), neither is acknowledged.
        let scope = router.write_scope();
        assert!(router.wait_for_version(2, Duration::from_secs(5)), "{}", router.status());
        assert_eq!(router.tag("user-1").unwrap().version, 2, "new checks use the new table");
        assert!(router.wait_for_version(3, Duration::from_secs(5)), "{}", router.status());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(router.acked_version(), 1, "acknowledged while a write was in flight");
        drop(scope);
        assert_eq!(wait_acked(&router, 3), 3, "{}", router.status());
        let acks: Vec<String> = heads
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.starts_with("POST"))
            .map(|h| h.lines().next().unwrap().to_owned())
            .collect();
        assert_eq!(acks.len(), 2, "1, then 3 (covering 2): {acks:?}");
    }

    /// `routing_event` with units 0-49 of the default domain frozen by a move in progress.
    fn freezing_event(version: u64, log_id: &str) -> String {
        let plain = routing_event(version, log_id);
        let data = plain.lines().find_map(|l| l.strip_prefix("data:")).unwrap();
        let mut data: serde_json::Value = serde_json::from_str(data).unwrap();
        data["frozen"] = serde_json::json!({"default": "0-49"});
        format!("id:{version}\nevent:routing\ndata:{data}\n\n")
    }

    #[test]
    fn a_held_write_delays_the_acknowledgement_of_a_freeze_and_of_nothing_else() {
        let (url, _heads) = coordinator_sending(
            vec![routing_event(1, "log-1"), routing_event(2, "log-1"), freezing_event(3, "log-1")],
            Duration::from_millis(300),
            false,
        );
        let router = Router::connect(
            &url,
            identity("edge-hold".into()),
            RouterOptions { token: Some("t".into()), ..options(Duration::from_secs(2)) },
        )
        .unwrap();
        assert_eq!(wait_acked(&router, 1), 1, "{}", router.status());
        // An `owned` answered over HTTP: the caller commits elsewhere within 1.2 s.
        let held = Instant::now();
        router.write_scope().hold_for(1, Duration::from_millis(1200));
        // Version 2 freezes nothing: no barrier waits on it, its acknowledgement is not held.
        assert_eq!(wait_acked(&router, 2), 2, "{}", router.status());
        assert!(held.elapsed() < Duration::from_millis(1000), "{:?}", held.elapsed());
        // Version 3 freezes units: applied at once, acknowledged only once the hold ran out.
        assert!(router.wait_for_version(3, Duration::from_secs(5)), "{}", router.status());
        // A write judged with the freeze's own table does not hold the freeze.
        router.write_scope().hold_for(3, Duration::from_secs(5));
        assert_eq!(router.acked_version(), 2, "a freeze acknowledged inside the hold");
        assert_eq!(wait_acked(&router, 3), 3, "{}", router.status());
        let acked_after = held.elapsed();
        assert!(acked_after >= Duration::from_millis(1200), "{acked_after:?}");
        assert!(acked_after < Duration::from_millis(2200), "{acked_after:?}");
    }

    #[test]
    fn a_reconnect_resumes_from_the_acknowledged_version_of_its_log() {
        let (url, heads) = coordinator_sending(
            vec![routing_event(1, "log-1"), routing_event(2, "log-1")],
            Duration::from_millis(300),
            true,
        );
        let router = Router::connect(
            &url,
            identity("writer-2".into()),
            RouterOptions { token: Some("t".into()), ..options(Duration::from_secs(2)) },
        )
        .unwrap();
        assert_eq!(wait_acked(&router, 1), 1);
        // Version 2 is applied while a write is in flight, then the stream breaks: the new
        // stream must not tell the server (which counts `Last-Event-ID` as applied) that 2 is.
        let scope = router.write_scope();
        assert!(router.wait_for_version(2, Duration::from_secs(5)), "{}", router.status());
        let deadline = Instant::now() + Duration::from_secs(5);
        let reopened = loop {
            let watches: Vec<String> = heads
                .lock()
                .unwrap()
                .iter()
                .filter(|h| h.starts_with("GET /v1/routing/watch"))
                .cloned()
                .collect();
            if watches.len() >= 2 || Instant::now() > deadline {
                break watches;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(reopened.len() >= 2, "the client reconnected: {reopened:?}");
        let second = reopened[1].to_ascii_lowercase();
        assert!(second.contains("last-event-id: 1\r\n"), "resumes from the acked 1: {second}");
        assert!(second.contains("&log_id=log-1"), "names its log: {second}");
        assert_eq!(router.acked_version(), 1);
        drop(scope);
        // The coordinator stand-in sends nothing on the new stream (a real one sends its
        // current table, since 1 is behind it, and that is acknowledged once the scope ends).
        assert_eq!(router.version(), Some(2));
    }

    #[test]
    fn a_zero_stall_bound_is_refused() {
        let err =
            Router::connect("http://127.0.0.1:9", identity("x".into()), options(Duration::ZERO))
                .err()
                .unwrap();
        assert!(err.to_string().contains("read_timeout"), "{err}");
    }
}

#[cfg(test)]
mod lease_tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    /// A coordinator stand-in that announces `lease_ms` (or no lease), sends one table (every
    /// unit blue, so user writes in blue are `owned`) and then a heartbeat every 30 ms: while
    /// `confirming`, `:heartbeat c=<now + offset_ms>`, else a bare `:heartbeat`.
    struct Fake {
        url: String,
        confirming: Arc<AtomicBool>,
        offset_ms: Arc<AtomicI64>,
    }

    fn fake(lease_ms: Option<u64>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let confirming = Arc::new(AtomicBool::new(true));
        let offset_ms = Arc::new(AtomicI64::new(0));
        let (c, o) = (Arc::clone(&confirming), Arc::clone(&offset_ms));
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let (c, o) = (Arc::clone(&c), Arc::clone(&o));
                std::thread::spawn(move || serve(stream, lease_ms, &c, &o));
            }
        });
        Fake { url, confirming, offset_ms }
    }

    fn serve(
        mut stream: TcpStream,
        lease_ms: Option<u64>,
        confirming: &AtomicBool,
        offset: &AtomicI64,
    ) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
            line.clear();
        }
        let lease = lease_ms.map_or(String::new(), |ms| format!("x-tidegate-lease-ms: {ms}\r\n"));
        let data = serde_json::json!({
            "version": 5, "log_id": "log-1", "units": 100, "blue_units": 100,
            "colors": {"blue": "az-a", "green": "az-b"}, "pins": {}, "unit_mode": "hash",
            "digits_skip": null, "hash": tidegate_core::HASH_ALGORITHM,
        });
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{lease}\r\nid:5\nevent:routing\ndata:{data}\n\n"
        );
        if stream.write_all(head.as_bytes()).is_err() {
            return;
        }
        loop {
            let beat = if confirming.load(Ordering::SeqCst) {
                let c = wall_ms() as i64 + offset.load(Ordering::SeqCst);
                format!(":heartbeat c={c}\n\n")
            } else {
                ":heartbeat\n\n".to_owned()
            };
            if stream.write_all(beat.as_bytes()).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    fn router(url: &str) -> Router {
        let options = RouterOptions {
            read_timeout: Duration::from_secs(2),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            ca_file: None,
            ..RouterOptions::default()
        };
        let identity =
            Identity { subscriber_id: "svc-1".into(), zone: "az-a".into(), kind: "service".into() };
        let router = Router::connect(url, identity, options).unwrap();
        assert!(router.wait_for_version(5, Duration::from_secs(5)), "{}", router.status());
        router
    }

    fn answer(router: &Router) -> &'static str {
        router.check_write("user-1", ZoneId::BLUE, None).unwrap().check.as_str()
    }

    /// Polls until the write check answers `want`; how long that took.
    fn until(router: &Router, want: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        while answer(router) != want {
            assert!(started.elapsed() < limit, "not {want} within {limit:?}: {}", router.status());
            std::thread::sleep(Duration::from_millis(2));
        }
        started.elapsed()
    }

    #[test]
    fn writes_are_owned_while_confirmed_and_unconfirmed_a_lease_after_the_last_confirmation() {
        let coordinator = fake(Some(400));
        let router = router(&coordinator.url);
        until(&router, "owned", Duration::from_secs(2));
        // Confirmed every 30 ms: owned for several leases.
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(1_000) {
            assert_eq!(answer(&router), "owned", "{}", router.status());
            std::thread::sleep(Duration::from_millis(10));
        }
        coordinator.confirming.store(false, Ordering::SeqCst);
        let stopped = Instant::now();
        let took = until(&router, "unconfirmed", Duration::from_secs(3));
        // Not before the lease (less the 30 ms between heartbeats), not long after it.
        assert!(took >= Duration::from_millis(330), "unconfirmed after {took:?}");
        assert!(took <= Duration::from_millis(900), "unconfirmed after {took:?}");
        let status = router.status();
        assert_eq!(status.lease, Some(Duration::from_millis(400)));
        assert_eq!(status.lease_left, Some(Duration::ZERO));
        assert!(status.to_string().contains("not confirmed current"), "{status}");
        // Reads and tags go on; other answers are untouched; the last-line check refuses.
        assert!(router.tag("user-1").is_ok());
        assert_eq!(
            router.check_write("user-1", ZoneId::GREEN, None).unwrap().check.as_str(),
            "misrouted"
        );
        assert!(router.owns("user-1", ZoneId::BLUE).is_err());
        let answer = router.check_write("user-1", ZoneId::BLUE, None).unwrap();
        assert_eq!((answer.status(), answer.retry_after().is_some()), (Some(503), true));
        // Confirmations again: owned again.
        coordinator.confirming.store(true, Ordering::SeqCst);
        until(&router, "owned", Duration::from_secs(2));
        println!("unconfirmed {took:?} after the confirmations stopped ({:?})", stopped.elapsed());
    }

    #[test]
    fn a_late_confirmation_buys_only_what_is_left_of_its_lease() {
        let coordinator = fake(Some(1_000));
        // Every confirmation is 900 ms old when sent: 100 ms left of each.
        coordinator.offset_ms.store(-900, Ordering::SeqCst);
        let router = router(&coordinator.url);
        until(&router, "owned", Duration::from_secs(2));
        coordinator.confirming.store(false, Ordering::SeqCst);
        let took = until(&router, "unconfirmed", Duration::from_secs(2));
        assert!(took <= Duration::from_millis(400), "a 900 ms old confirmation held {took:?}");
    }

    #[test]
    fn a_coordinator_without_a_lease_leaves_write_checks_as_they_were() {
        let coordinator = fake(None);
        coordinator.confirming.store(false, Ordering::SeqCst);
        let router = router(&coordinator.url);
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(800) {
            assert_eq!(answer(&router), "owned", "{}", router.status());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(router.status().lease, None);
        assert!(router.lease_confirmed());
        assert!(Router::fixed(router.table().unwrap().as_ref().clone()).lease_confirmed());
    }

    #[test]
    fn a_coordinator_that_stops_confirming_is_left_for_one_that_confirms() {
        let stale = fake(Some(300));
        stale.confirming.store(false, Ordering::SeqCst);
        let fresh = fake(Some(300));
        let id = (0..).map(|n| format!("svc-{n}")).find(|id| first_choice(id, 2) == 0).unwrap();
        let options = RouterOptions {
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            ca_file: None,
            ..RouterOptions::default()
        };
        let identity = Identity { subscriber_id: id, zone: "az-a".into(), kind: "service".into() };
        let router =
            Router::connect(&format!("{},{}", stale.url, fresh.url), identity, options).unwrap();
        assert!(router.wait_for_version(5, Duration::from_secs(5)));
        let took = until(&router, "owned", Duration::from_secs(3));
        let status = router.status();
        assert!(
            status.coordinator.as_deref().is_some_and(|c| fresh.url.ends_with(&c[7..])),
            "{status:?}"
        );
        assert!(took >= Duration::from_millis(250), "owned after {took:?}, before leaving");
    }
}
