//! Replicas seeing each other: each announces itself every [`ANNOUNCE_EVERY`] on a presence bus
//! (Kafka: a topic next to the command topic), and reads the others' announcements, so that
//! `GET /v1/cluster` can list every replica, how far behind it is, and which ones are lost.
//!
//! Why announcements and not the command log: presence is not state. It changes every two seconds
//! on every replica, would grow the infinite-retention log for nothing, and nothing decided from
//! it may move traffic. The bus is behind [`PresenceBus`], so this module never names Kafka.
//!
//! A replica not heard from for [`LOST_AFTER_INTERVALS`] intervals is shown `lost`. Lost is judged
//! on the announcement's own time (`at_ms`) against this replica's clock: replicas' clocks must
//! agree to well under a few seconds, as drain steps already require (docs/src/internals.md).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{NodeConfig, SecretKey};
use crate::service::coordinator::Coordinator;
use crate::service::gate_view::{GATES_EVERY, GateInputs, GateReport};

/// How often a replica announces itself.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(2);
/// How many missed announcements make a replica `lost`.
pub const LOST_AFTER_INTERVALS: u64 = 3;
/// How long a lost replica is still listed (the presence topic's retention).
pub const FORGET_AFTER_MS: u64 = 3_600_000;

/// Moves announcements between replicas. Payloads are opaque bytes (JSON, written here).
pub trait PresenceBus: Send {
    /// Sends one announcement (best effort: the next one replaces a lost one).
    fn announce(&mut self, key: &str, payload: &[u8]) -> Result<(), String>;
    /// The announcements that arrived, waiting up to `wait` for the first.
    fn receive(&mut self, wait: Duration) -> Result<Vec<Vec<u8>>, String>;
}

/// How a signed message on the presence bus starts: `tgsig1 <HMAC-SHA256 as 64 hex digits> `,
/// then the JSON it signs. Signed with `store.kafka.presence_key` (see [`seal`]).
pub const SIGNED_PREFIX: &[u8] = b"tgsig1 ";

/// The HMAC of a presence message's body under `key`. The label keeps it from ever equalling
/// another use of a key (a lane member secret is `HMAC(key, "tidegate lane member v1\n...")`).
fn presence_mac(key: &SecretKey, body: &[u8]) -> [u8; 32] {
    let mut message = Vec::with_capacity(body.len() + 24);
    message.extend_from_slice(b"tidegate presence v1\n");
    message.extend_from_slice(body);
    crate::client::signature::hmac_sha256(&key.0, &message)
}

/// `body` as it goes on the bus: signed with `key` ([`SIGNED_PREFIX`]), or as it is without one.
pub fn seal(key: Option<&SecretKey>, body: &[u8]) -> Vec<u8> {
    let Some(key) = key else { return body.to_vec() };
    let mut out = Vec::with_capacity(SIGNED_PREFIX.len() + 65 + body.len());
    out.extend_from_slice(SIGNED_PREFIX);
    out.extend_from_slice(hex::encode(presence_mac(key, body)).as_bytes());
    out.push(b' ');
    out.extend_from_slice(body);
    out
}

/// Why a message on the presence bus was dropped (the `reason` label of
/// `tidegate_presence_dropped_total`).
pub const DROPPED_UNSIGNED: &str = "unsigned";
pub const DROPPED_BAD_SIGNATURE: &str = "bad_signature";

/// The body of a message from the bus, or why it is dropped. With a key, only a message signed
/// with it is taken (`unsigned`: no signature; `bad_signature`: another key, a changed body, or
/// a malformed signature). Without a key every body is taken as it is, a signed one too (its
/// signature unchecked), so replicas can be given the key one at a time.
pub fn open<'a>(key: Option<&SecretKey>, payload: &'a [u8]) -> Result<&'a [u8], &'static str> {
    let Some(rest) = payload.strip_prefix(SIGNED_PREFIX) else {
        return match key {
            Some(_) => Err(DROPPED_UNSIGNED),
            None => Ok(payload),
        };
    };
    let (Some(mac), Some(b' ')) = (rest.get(..64), rest.get(64)) else {
        return Err(DROPPED_BAD_SIGNATURE);
    };
    let body = &rest[65..];
    let Some(key) = key else { return Ok(body) };
    let mut given = [0u8; 32];
    if hex::decode_to_slice(mac, &mut given).is_err() {
        return Err(DROPPED_BAD_SIGNATURE);
    }
    if bool::from(subtle::ConstantTimeEq::ct_eq(&presence_mac(key, body)[..], &given[..])) {
        Ok(body)
    } else {
        Err(DROPPED_BAD_SIGNATURE)
    }
}

/// What one replica says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announcement {
    pub log_id: String,
    pub id: String,
    pub zone: String,
    pub url: String,
    pub applied_version: u64,
    #[serde(default)]
    pub applied_position: Option<u64>,
    #[serde(default)]
    pub state_hash: Option<String>,
    pub started_at_ms: u64,
    /// When it was sent, by the sender's clock.
    pub at_ms: u64,
    /// Drawn by each process at start: two processes announcing one `id` are two instances
    /// (0 from a release that did not send it).
    #[serde(default)]
    pub instance: u64,
    /// The newest record format it reads (`core::FORMAT_LEVEL`; 1 from a release that did not
    /// send it).
    #[serde(default = "first_format")]
    pub supports: u32,
}

fn first_format() -> u32 {
    1
}

/// Whether a record of format `level` may be written: every live replica announced (within
/// [`LOST_AFTER_INTERVALS`] intervals) that it reads it. Pure: the clock is an argument. A lost
/// replica is not waited for: it stops at the record when it comes back, never skips it.
pub fn format_gate(
    level: u32,
    others: &[Announcement],
    now_ms: u64,
    interval_ms: u64,
) -> Result<(), String> {
    if level <= 1 {
        return Ok(());
    }
    let behind: Vec<String> = others
        .iter()
        .filter(|a| now_ms.saturating_sub(a.at_ms) <= interval_ms * LOST_AFTER_INTERVALS)
        .filter(|a| a.supports < level)
        .map(|a| format!("{} (reads format {})", a.id, a.supports))
        .collect();
    if behind.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "this change needs record format {level}, and live replica(s) {} would stop at it; upgrade every replica first",
            behind.join(", ")
        ))
    }
}

/// One row of `GET /v1/cluster`'s `replicas`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReplicaView {
    pub id: Option<String>,
    pub zone: Option<String>,
    pub url: Option<String>,
    pub applied_version: u64,
    pub applied_position: Option<u64>,
    pub state_hash: Option<String>,
    /// The highest applied version any replica announced, minus this row's.
    pub behind: u64,
    /// The newest record format it reads (`core::FORMAT_LEVEL` of its release; 1 from a release
    /// that did not announce it): during a rolling upgrade, the rows still below this release's
    /// level are the replicas left to upgrade.
    pub format: u32,
    pub started_at_ms: Option<u64>,
    pub last_seen_ms: u64,
    /// `live` or `lost`.
    pub status: &'static str,
    /// True for the replica that answered.
    #[serde(rename = "self")]
    pub is_self: bool,
}

/// The rows for `me` (always live, seen now) and the announcements of the others, sorted by id.
/// Pure: the clock is an argument.
pub fn view(
    me: ReplicaView,
    others: &[Announcement],
    now_ms: u64,
    interval_ms: u64,
) -> Vec<ReplicaView> {
    let lost_after = interval_ms * LOST_AFTER_INTERVALS;
    let mut rows = vec![me];
    for a in others {
        if Some(&a.id) == rows[0].id.as_ref() {
            continue;
        }
        let status = if now_ms.saturating_sub(a.at_ms) > lost_after { "lost" } else { "live" };
        rows.push(ReplicaView {
            id: Some(a.id.clone()),
            zone: Some(a.zone.clone()),
            url: Some(a.url.clone()),
            applied_version: a.applied_version,
            applied_position: a.applied_position,
            state_hash: a.state_hash.clone(),
            behind: 0,
            format: a.supports,
            started_at_ms: Some(a.started_at_ms),
            last_seen_ms: a.at_ms,
            status,
            is_self: false,
        });
    }
    let newest = rows.iter().map(|r| r.applied_version).max().unwrap_or(0);
    for row in &mut rows {
        row.behind = newest - row.applied_version;
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    rows
}

/// This replica's identity and what it has heard from the others.
pub struct Presence {
    node: Option<NodeConfig>,
    url: Mutex<Option<String>>,
    started_at_ms: u64,
    coordinator: Arc<Coordinator>,
    /// The others' newest announcements (empty on a single node, which runs no bus).
    seen: Mutex<BTreeMap<String, Announcement>>,
    /// Set once the server listens: a URL derived from `--port 0` is not known before, and
    /// announcing `http://127.0.0.1:0` sent the other replicas' consoles to a dead link.
    listening: std::sync::atomic::AtomicBool,
    /// The safety gates' inputs, sent to and fed by the other replicas on the same bus.
    gates: Option<GateInputs>,
    /// This process among any others started with the same node id.
    instance: u64,
    /// When this process began reading the bus (`None`: no bus, nothing to check against).
    bus_since: Mutex<Option<std::time::Instant>>,
    /// When this replica last warned about a newer process using its node id.
    warned_duplicate_ms: std::sync::atomic::AtomicU64,
    /// Whether a bus is being started for this replica (see [`Presence::expect_bus`]).
    expects_bus: std::sync::atomic::AtomicBool,
    /// `store.kafka.presence_key`: what every message sent is signed with, and every message
    /// received must be signed with (`None`: nothing is signed or checked).
    key: Option<SecretKey>,
    /// Whether a dropped message was logged (once; the counter counts them all).
    warned_dropped: std::sync::atomic::AtomicBool,
}

/// How long a replica reads presence before it may take the lane lease under its node id: more
/// than one announcement interval, so a live process with the same id is heard from first.
pub const ID_CHECK: Duration = Duration::from_millis(3_000);

/// What a replica does on hearing another process announce its own node id.
#[derive(Debug, PartialEq, Eq)]
pub enum Duplicate {
    /// Not a duplicate: another id, this process, or an earlier instance that is gone (it sent
    /// the announcement before this process started: a restart after kill -9).
    None,
    /// The other process started first: this one must stop.
    Refuse,
    /// This process started first: the other one stops; warn.
    Warn,
}

/// Judges an announcement against this process (pure).
pub fn duplicate(my_id: &str, my_instance: u64, my_start_ms: u64, a: &Announcement) -> Duplicate {
    if a.id != my_id || a.instance == my_instance || a.at_ms <= my_start_ms {
        return Duplicate::None;
    }
    if (a.started_at_ms, a.instance) < (my_start_ms, my_instance) {
        Duplicate::Refuse
    } else {
        Duplicate::Warn
    }
}

impl Presence {
    pub fn new(node: Option<NodeConfig>, coordinator: Arc<Coordinator>, now_ms: u64) -> Presence {
        Presence {
            url: Mutex::new(node.as_ref().map(|n| n.url.clone())),
            node,
            started_at_ms: now_ms,
            coordinator,
            seen: Mutex::new(BTreeMap::new()),
            listening: std::sync::atomic::AtomicBool::new(false),
            gates: None,
            instance: rand::random::<u64>() | 1,
            bus_since: Mutex::new(None),
            warned_duplicate_ms: std::sync::atomic::AtomicU64::new(0),
            expects_bus: std::sync::atomic::AtomicBool::new(false),
            key: None,
            warned_dropped: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Signs every message this replica sends with `key`, and drops every message received that
    /// is not signed with it (`store.kafka.presence_key`).
    pub fn with_key(mut self, key: Option<SecretKey>) -> Presence {
        self.key = key;
        self
    }

    /// Whether this replica may act under its node id (take the lane lease): no other live
    /// process with the same id has announced itself for [`ID_CHECK`] of reading the bus.
    /// Without a bus (a single node, or the presence topic unusable) there is nothing to check.
    pub fn id_checked(&self) -> bool {
        if self.node.is_none() {
            return true;
        }
        match *self.bus_since.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(since) => since.elapsed() >= ID_CHECK,
            // A bus is being connected (in the background): not checked yet.
            None => !self.expects_bus.load(std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// A bus will be started for this replica (`run`): until it has been read for [`ID_CHECK`],
    /// the node id is not checked.
    pub fn expect_bus(&self) {
        self.expects_bus.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Sends these gate inputs every `gate_view::GATES_EVERY` and feeds them the others'.
    pub fn with_gates(mut self, gates: GateInputs) -> Presence {
        self.gates = Some(gates);
        self
    }

    fn gate_report(&self, now_ms: u64) -> Option<GateReport> {
        let gates = self.gates.as_ref()?;
        let id = &self.node.as_ref()?.id;
        Some(gates.report(
            self.coordinator.log_id(),
            id,
            self.coordinator.state().version(),
            now_ms,
        ))
    }

    /// The server is listening at `url`: announce that, unless `[node] url` named one.
    pub fn bound(&self, url: &str) {
        if self.node.as_ref().is_some_and(|n| n.url_derived) {
            *self.url.lock().unwrap_or_else(|p| p.into_inner()) = Some(url.to_owned());
        }
        self.listening.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn my_url(&self) -> Option<String> {
        self.url.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// This replica as it is now.
    fn me(&self, now_ms: u64) -> ReplicaView {
        let log = self.coordinator.log_status();
        ReplicaView {
            id: self.node.as_ref().map(|n| n.id.clone()),
            zone: self.node.as_ref().map(|n| n.zone.clone()),
            url: self.my_url(),
            applied_version: self.coordinator.state().version(),
            applied_position: log.next_position,
            state_hash: log.state_hash.map(|h| format!("{h:016x}")),
            behind: 0,
            format: crate::core::FORMAT_LEVEL,
            started_at_ms: Some(self.started_at_ms),
            last_seen_ms: now_ms,
            status: "live",
            is_self: true,
        }
    }

    /// Whether a record of format `level` may be written now ([`format_gate`] over the others).
    pub fn check_format(&self, level: u32, now_ms: u64) -> Result<(), String> {
        let others: Vec<Announcement> =
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        format_gate(level, &others, now_ms, ANNOUNCE_EVERY.as_millis() as u64)
    }

    /// Every replica known, this one included.
    pub fn replicas(&self, now_ms: u64) -> Vec<ReplicaView> {
        let others: Vec<Announcement> =
            self.seen.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        view(self.me(now_ms), &others, now_ms, ANNOUNCE_EVERY.as_millis() as u64)
    }

    /// Takes in one received payload (foreign logs, garbage and stale repeats are ignored; with
    /// a key, anything not signed with it is dropped and counted).
    pub fn receive(&self, payload: &[u8], now_ms: u64) {
        let payload = match open(self.key.as_ref(), payload) {
            Ok(body) => body,
            Err(reason) => {
                crate::telemetry::count_presence_dropped(reason);
                if !self.warned_dropped.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(
                        "dropped a message on the presence topic ({reason}): store.kafka.presence_key is set and the message is not signed with it, so it counts nowhere (not in /v1/cluster, not in any gate). Someone without the key is writing to the topic, or a replica has another key or none. Logged once; tidegate_presence_dropped_total counts every drop"
                    );
                }
                return;
            }
        };
        if let (Some(gates), Some(node)) = (&self.gates, &self.node)
            && gates.receive(payload, self.coordinator.log_id(), &node.id)
        {
            return;
        }
        let Ok(a) = serde_json::from_slice::<Announcement>(payload) else { return };
        if a.log_id != self.coordinator.log_id() {
            return;
        }
        if let Some(node) = &self.node {
            match duplicate(&node.id, self.instance, self.started_at_ms, &a) {
                Duplicate::None => {}
                Duplicate::Refuse => {
                    tracing::error!(
                        "node id `{}` is already used by a live replica (started at {} ms, {}); every replica needs its own [node] id. Stopping.",
                        node.id,
                        a.started_at_ms,
                        a.url
                    );
                    std::process::exit(1);
                }
                Duplicate::Warn => {
                    let last = self.warned_duplicate_ms.load(std::sync::atomic::Ordering::Relaxed);
                    if now_ms.saturating_sub(last) >= 60_000 {
                        self.warned_duplicate_ms
                            .store(now_ms, std::sync::atomic::Ordering::Relaxed);
                        tracing::error!(
                            "another process started with this replica's node id `{}` ({}); it must stop (it will, on hearing this replica)",
                            node.id,
                            a.url
                        );
                    }
                    crate::telemetry::count_node_id_conflict();
                }
            }
            // This process's own announcements are not another replica.
            if a.id == node.id {
                return;
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.get(&a.id).is_none_or(|old| old.at_ms <= a.at_ms) {
            seen.insert(a.id.clone(), a);
        }
        seen.retain(|_, a| now_ms.saturating_sub(a.at_ms) < FORGET_AFTER_MS);
    }

    fn announcement(&self, now_ms: u64) -> Option<Announcement> {
        let derived = self.node.as_ref().is_some_and(|n| n.url_derived);
        if derived && !self.listening.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let me = self.me(now_ms);
        Some(Announcement {
            log_id: self.coordinator.log_id().to_owned(),
            id: me.id?,
            zone: me.zone.unwrap_or_default(),
            url: me.url.unwrap_or_default(),
            applied_version: me.applied_version,
            applied_position: me.applied_position,
            state_hash: me.state_hash,
            started_at_ms: self.started_at_ms,
            at_ms: now_ms,
            instance: self.instance,
            supports: crate::core::FORMAT_LEVEL,
        })
    }

    /// Announces this replica every [`ANNOUNCE_EVERY`] and takes in the others', on a thread of
    /// its own for as long as the process lives. `clock` gives milliseconds since the epoch.
    pub fn run(
        self: &Arc<Self>,
        mut bus: Box<dyn PresenceBus>,
        clock: fn() -> u64,
    ) -> std::io::Result<()> {
        let presence = Arc::clone(self);
        *self.bus_since.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
        std::thread::Builder::new().name("tidegate-presence".into()).spawn(move || {
            let mut next = std::time::Instant::now();
            let mut next_gates = next;
            let mut failing = false;
            loop {
                let now = std::time::Instant::now();
                if now >= next {
                    next = now + ANNOUNCE_EVERY;
                    if let Some(a) = presence.announcement(clock())
                        && let Ok(body) = serde_json::to_vec(&a)
                        && let Err(e) = bus.announce(&a.id, &seal(presence.key.as_ref(), &body))
                        && !failing
                    {
                        tracing::warn!("cannot announce this replica: {e}");
                    }
                }
                if now >= next_gates {
                    next_gates = now + GATES_EVERY;
                    if presence.listening.load(std::sync::atomic::Ordering::SeqCst)
                        && let Some(r) = presence.gate_report(clock())
                        && let Ok(body) = serde_json::to_vec(&r)
                        && let Err(e) = bus.announce(
                            &format!("{}.gates", r.replica),
                            &seal(presence.key.as_ref(), &body),
                        )
                        && !failing
                    {
                        tracing::warn!("cannot send this replica's gate inputs: {e}");
                    }
                }
                let wait =
                    next.min(next_gates).saturating_duration_since(std::time::Instant::now());
                match bus.receive(wait.min(GATES_EVERY)) {
                    Ok(payloads) => {
                        failing = false;
                        for payload in payloads {
                            presence.receive(&payload, clock());
                        }
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("cannot read replica announcements: {e}");
                            failing = true;
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            }
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(version: u64) -> ReplicaView {
        ReplicaView {
            id: Some("r2".into()),
            zone: Some("az-b".into()),
            url: Some("http://b".into()),
            applied_version: version,
            applied_position: Some(version),
            state_hash: None,
            behind: 0,
            format: crate::core::FORMAT_LEVEL,
            started_at_ms: Some(0),
            last_seen_ms: 10_000,
            status: "live",
            is_self: true,
        }
    }

    fn other(id: &str, version: u64, at_ms: u64) -> Announcement {
        Announcement {
            log_id: "log".into(),
            id: id.into(),
            zone: "az-a".into(),
            url: format!("http://{id}"),
            applied_version: version,
            applied_position: None,
            state_hash: None,
            started_at_ms: 0,
            at_ms,
            instance: 7,
            supports: 1,
        }
    }

    #[test]
    fn with_a_key_only_messages_signed_with_it_are_taken() {
        let key = SecretKey([7; 32]);
        let body = br#"{"gates":1}"#;
        let signed = seal(Some(&key), body);
        assert!(signed.starts_with(SIGNED_PREFIX));
        assert_eq!(open(Some(&key), &signed), Ok(&body[..]));
        assert_eq!(open(Some(&key), body), Err(DROPPED_UNSIGNED));
        assert_eq!(open(Some(&SecretKey([8; 32])), &signed), Err(DROPPED_BAD_SIGNATURE));
        // A changed body, a cut or malformed signature.
        let mut changed = signed.clone();
        *changed.last_mut().unwrap() = b']';
        assert_eq!(open(Some(&key), &changed), Err(DROPPED_BAD_SIGNATURE));
        assert_eq!(open(Some(&key), &signed[..40]), Err(DROPPED_BAD_SIGNATURE));
        let mut bad_hex = signed.clone();
        bad_hex[SIGNED_PREFIX.len()] = b'z';
        assert_eq!(open(Some(&key), &bad_hex), Err(DROPPED_BAD_SIGNATURE));
        // Without a key: as before, and a signed body is taken unchecked.
        assert_eq!(seal(None, body), body.to_vec());
        assert_eq!(open(None, body), Ok(&body[..]));
        assert_eq!(open(None, &signed), Ok(&body[..]));
        // Not a lane member secret under the same key.
        let member = crate::service::member_key::MemberKey::new(key.0).secret("g", "m");
        assert_ne!(hex::encode(presence_mac(&key, b"g\nm")), member);
    }

    #[test]
    fn a_newer_record_is_written_only_once_every_live_replica_reads_it() {
        let mut new = other("r1", 3, 9_000);
        new.supports = 2;
        let old = other("r2", 3, 9_000);
        assert_eq!(format_gate(1, std::slice::from_ref(&old), 10_000, 2_000), Ok(()));
        let err = format_gate(2, &[new.clone(), old.clone()], 10_000, 2_000).unwrap_err();
        assert!(err.contains("r2 (reads format 1)") && !err.contains("r1"), "{err}");
        // A lost replica is not waited for (it stops at the record when it returns).
        assert_eq!(format_gate(2, &[new, other("r2", 3, 1_000)], 10_000, 2_000), Ok(()));
        // An announcement without the field is from a release that reads format 1.
        let a: Announcement = serde_json::from_str(
            r#"{"log_id":"l","id":"r9","zone":"z","url":"u","applied_version":1,"started_at_ms":0,"at_ms":1}"#,
        )
        .unwrap();
        assert_eq!(a.supports, 1);
    }

    #[test]
    fn a_second_process_with_the_same_node_id_stops_and_a_restart_does_not() {
        let mut a = other("r1", 3, 10_000);
        a.started_at_ms = 5_000;
        // Another process, started before this one (at 8 000), still announcing: stop.
        assert_eq!(duplicate("r1", 9, 8_000, &a), Duplicate::Refuse);
        // This one started first: the other stops; this one warns.
        assert_eq!(duplicate("r1", 9, 4_000, &a), Duplicate::Warn);
        // An announcement sent before this process started is a predecessor killed and
        // restarted: not a duplicate.
        assert_eq!(duplicate("r1", 9, 12_000, &a), Duplicate::None);
        // Its own announcements, and other ids, are not duplicates.
        assert_eq!(duplicate("r1", 7, 8_000, &a), Duplicate::None);
        assert_eq!(duplicate("r2", 9, 8_000, &a), Duplicate::None);
    }

    #[test]
    fn behind_counts_from_the_newest_announced_version_and_silence_makes_lost() {
        let rows = view(me(5), &[other("r1", 7, 9_000), other("r3", 7, 3_000)], 10_000, 2_000);
        let ids: Vec<_> = rows.iter().map(|r| r.id.clone().unwrap()).collect();
        assert_eq!(ids, ["r1", "r2", "r3"]);
        assert_eq!((rows[0].behind, rows[0].status), (0, "live"));
        assert_eq!((rows[1].behind, rows[1].is_self), (2, true));
        // 7 s of silence is more than three 2 s intervals.
        assert_eq!(rows[2].status, "lost");
        // Exactly three intervals is still live.
        assert_eq!(view(me(7), &[other("r1", 7, 4_000)], 10_000, 2_000)[0].status, "live");
    }

    #[test]
    fn an_announcement_under_this_replicas_own_id_is_not_listed_twice() {
        let rows = view(me(5), &[other("r2", 9, 9_000)], 10_000, 2_000);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].behind, 0);
    }
}
