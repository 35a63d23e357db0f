//! Configuration: defaults, then the TOML file, then `TIDEGATE_*` variables, then CLI flags.
//!
//! Every value is checked once at start-up; a bad one stops tidegate with the key and the reason,
//! because a coordinator that guesses at its own configuration is worse than one that won't start.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::core::{
    Fallback, Genesis, Guard, OnBreach, Share, UnitMode, UnitScheme, ZoneClass, ZoneId, ZoneSpec,
    Zones,
};
use crate::duration::parse_duration_ms;

/// The top-level keys of [`Settings`]: the only `TIDEGATE_*` environment variables that are
/// configuration are these (`TIDEGATE_DATA_DIR`) and keys under them (`TIDEGATE_SERVER__PORT`).
/// Every other `TIDEGATE_*` variable (the CLI's `TIDEGATE_TOKEN` and `TIDEGATE_URL`, a service's
/// `TIDEGATE_SERVICE_TOKEN`, the scripts' `TIDEGATE_CACHE` and `TIDEGATE_BIN`) is not ours to
/// read and is ignored. A misspelled key under a known one (`TIDEGATE_SERVER__PROT`) still stops
/// start-up naming it. A unit test keeps this list equal to the struct's fields.
const CONFIG_ENV_KEYS: [&str; 27] = [
    "data_dir",
    "snapshot_every",
    "initial_blue_percent",
    "fallback",
    "write_fallback",
    "server",
    "units",
    "colors",
    "limits",
    "operators",
    "service_tokens_sha256",
    "health",
    "drain",
    "subscribers",
    "ui",
    "lanes",
    "client",
    "openfeature",
    "edge",
    "zones",
    "capacity",
    "store",
    "node",
    "plans",
    "log",
    "channels",
    "freeze",
];

/// Whether a `TIDEGATE_`-stripped, `__`-split environment key (`server.port`) is configuration.
fn is_config_env_key(key: &str) -> bool {
    let top = key.split('.').next().unwrap_or(key);
    CONFIG_ENV_KEYS.iter().any(|k| k.eq_ignore_ascii_case(top))
}

/// The raw, serialisable settings, as written in `config/tidegate.toml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub data_dir: PathBuf,
    /// Write a snapshot of the state every this many log entries (0: only at clean shutdown).
    pub snapshot_every: u64,
    pub initial_blue_percent: f64,
    pub fallback: String,
    /// What a write without a user ID gets at the edge gate: `reject` (the default) or `random`.
    pub write_fallback: String,
    pub server: ServerSettings,
    pub units: UnitSettings,
    pub colors: ColorSettings,
    pub limits: LimitSettings,
    pub operators: Vec<OperatorSettings>,
    pub service_tokens_sha256: Vec<String>,
    pub health: HealthSettings,
    pub drain: DrainSettings,
    pub subscribers: SubscriberSettings,
    pub ui: UiSettings,
    pub lanes: LaneSettings,
    pub client: ClientSettings,
    pub openfeature: OpenFeatureSettings,
    pub edge: EdgeSettings,
    /// Per-zone settings, `[zones.<zone>]`: today only the capacity.
    pub zones: BTreeMap<String, ZoneSettings>,
    pub capacity: CapacitySettings,
    pub store: StoreSettings,
    pub node: NodeSettings,
    pub plans: PlanSettings,
    pub log: LogSettings,
    pub channels: ChannelSettings,
    pub freeze: FreezeSettings,
}

/// `[freeze]`: loss-less changes of owner by default. With `by_default`, maintenance drains,
/// unit and dial moves, pins, channel changes and global-writer moves that do not say
/// `"freeze"` freeze what changes owner for at most `window`; `"freeze": false` still changes
/// at once, and evacuations stay speed first.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FreezeSettings {
    pub by_default: bool,
    pub window: String,
}

impl Default for FreezeSettings {
    fn default() -> Self {
        FreezeSettings { by_default: true, window: "30s".into() }
    }
}

/// `[channels]`: release channels. `services` lists the services a channel may name (a typo
/// such as `order` for `orders` is then refused as `unknown_service`); empty: any valid name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelSettings {
    pub services: Vec<String>,
}

/// `[zones.<zone>]`: the zone's capacity in requests per second, or a PromQL query for it; for a
/// zone beyond the two colours, its `lane` (which makes it one of the zones a new log starts
/// with); and its `class` (`rzone`, `gzone` or `czone`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZoneSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_rps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_query: Option<String>,
}

/// `[plans]`: whether plan triggers may start runs (`triggers`, off by default: automatic
/// failover is opt-in here and per plan), and plans declared in config, `[plans.<name>]`, with
/// the fields of the `PUT /v1/plans/{name}` body less `expected_version` and `reason`. A declared
/// plan is kept as written here; the server checks it at start-up (errors name
/// `plans.<name>.<field>`) and appends it to the log when the log's differs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanSettings {
    pub triggers: bool,
    /// At most one automatic run per this across all plans (default `10m`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_window: Option<String>,
    /// The largest share of users, in percent, one automatic run may move (default 100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_max_share_percent: Option<f64>,
    #[serde(flatten)]
    pub declared: BTreeMap<String, serde_json::Value>,
}

/// `[log]`: what `serve`, `edge` and `demo` log to stderr, and how.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `text` (a line per event: time, level, message, fields) or `json` (one object per line).
    pub format: String,
    /// A filter in `RUST_LOG` syntax: `info`, `warn`, `tidegate=debug,rocket=warn`.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings { format: "text".into(), level: "info".into() }
    }
}

/// `[log]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub json: bool,
    pub filter: String,
}

/// `[capacity]`: the fraction of every zone's capacity kept free.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CapacitySettings {
    pub headroom: f64,
    /// A receiving zone is judged by the highest load it carried over this window ("own peak +
    /// the moved share of the neighbour"), not by its load this minute. "0s" judges the current
    /// load.
    pub peak_window: String,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings { headroom: 0.1, peak_window: "10m".into() }
    }
}

/// `[openfeature]`: the OFREP endpoints of the coordinator and of the edge.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpenFeatureSettings {
    pub flag_key: String,
}

impl Default for OpenFeatureSettings {
    fn default() -> Self {
        OpenFeatureSettings { flag_key: crate::core::DEFAULT_FLAG_KEY.into() }
    }
}

/// `[edge]`: `tidegate edge`, the local evaluator next to a gateway or a group of services.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EdgeSettings {
    pub coordinators: Vec<String>,
    pub address: String,
    pub port: u16,
    pub user_header: String,
    pub user_cookie: String,
    pub user_query: String,
    pub cache_path: String,
    pub zone: String,
    pub subscriber_id: String,
    pub token: String,
    /// The edge listener's connection limits (same keys and defaults as `[server]`).
    pub header_read_timeout: String,
    pub idle_timeout: String,
    pub max_connections: Option<u64>,
    /// Runtime worker threads; 0 or absent: one per core.
    pub workers: Option<u64>,
    /// The stall bound: no event or heartbeat from a coordinator for this long, leave it.
    pub coordinator_timeout: String,
    /// 64 hex digits: the gateway check signs each tag with it (`x-tidegate-signature`), so
    /// services with the same key (`tidegate_client::resolve_signed`) trust only signed tags.
    pub tag_key: String,
    /// The edge's port as a dispatcher (tags and the gateway check on hyper).
    pub fast_path: bool,
    /// `[edge.tls]`: serve HTTPS with these files, as `[server.tls]` does.
    pub tls: Option<TlsSettings>,
    /// Most subscribers that may watch through this edge (the fan-out tree: it re-serves the
    /// watch stream and reports their acknowledgements upward); 0 serves no watch stream.
    pub max_leaves: u64,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            coordinators: Vec::new(),
            address: "127.0.0.1".into(),
            port: 8081,
            user_header: "x-user-id".into(),
            user_cookie: "tidegate-user".into(),
            user_query: "user_id".into(),
            cache_path: String::new(),
            zone: String::new(),
            subscriber_id: String::new(),
            token: String::new(),
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT.into(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT.into(),
            max_connections: None,
            workers: None,
            coordinator_timeout: "8s".into(),
            tag_key: String::new(),
            fast_path: true,
            tls: None,
            max_leaves: DEFAULT_MAX_LEAVES,
        }
    }
}

/// `[store]`: where the command log lives.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    pub kind: String,
    pub kafka: KafkaStoreSettings,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings { kind: "file".into(), kafka: KafkaStoreSettings::default() }
    }
}

/// `[store.kafka]`: the shared log's topic.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaStoreSettings {
    pub bootstrap: String,
    pub topic: String,
    /// How long a writer waits for its own replica to apply its record.
    pub apply_timeout: String,
    /// Use a command topic whose replication factor or `min.insync.replicas` is below 2, where
    /// the loss of one broker can lose acknowledged changes (refused otherwise). One-broker
    /// development and tests only.
    pub allow_under_replicated: bool,
    /// Offsets of command-log records that cannot be read and that an operator confirmed are
    /// garbage: they take no effect. Any other unreadable record stops the replica there (list
    /// the same offsets on every replica).
    pub skip_offsets: Vec<u64>,
    /// HMAC-SHA256 key (64 hex digits, the same on every replica) that signs every message on
    /// the presence topic (announcements and gate reports); with it, unsigned or wrongly signed
    /// messages are dropped. Empty: nothing is signed (a warning at start).
    pub presence_key: String,
}

impl Default for KafkaStoreSettings {
    fn default() -> Self {
        KafkaStoreSettings {
            bootstrap: String::new(),
            topic: "tidegate.commands".into(),
            apply_timeout: "10s".into(),
            allow_under_replicated: false,
            skip_offsets: Vec::new(),
            presence_key: String::new(),
        }
    }
}

/// `[client]`: how tidegate's own clients (the CLI) reach a coordinator.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientSettings {
    /// PEM file of the CA to trust for `https://` coordinators instead of the system's roots.
    pub ca_file: Option<PathBuf>,
}

/// `[server.tls]`: serve HTTPS with this certificate chain and private key (PEM files).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    pub certs: PathBuf,
    pub key: PathBuf,
}
/// `[node]`: this replica's identity (required with a shared log).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSettings {
    pub id: String,
    pub zone: String,
    /// The URL other replicas and clients reach this one at (default: from `server`).
    pub url: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubscriberSettings {
    pub stale_after: String,
    pub heartbeat: String,
    /// The table lease `T` (docs/src/partitions.md): a copy of the table not confirmed current
    /// for this long answers `unconfirmed` to write checks. At least twice `heartbeat`. Unset:
    /// three heartbeats and at least 6 s (so a configuration written for an older release, with
    /// its 5 s heartbeat, still starts: 15 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// The largest difference allowed between a subscriber's and a replica's wall clocks: a
    /// barrier waits it past a lease.
    pub max_clock_skew: String,
    /// The longest a write may take from its check to its commit (a `write_scope`): a barrier
    /// waits it past a lease, since a write checked just before the lease ran out may still
    /// be committing.
    pub max_write: String,
    /// Most subscribers one caller (token) may register, so one token cannot crowd out others.
    pub max_per_caller: usize,
    /// Refuse subscribers that do not keep the table lease (`lease=1` on the watch: clients of
    /// older releases), 409 `lease_required`. Without it such a subscriber that goes away is
    /// counted by barriers only for the reconnect grace, since nothing bounds how long its write
    /// checks answer `owned`.
    #[serde(default)]
    pub require_lease: bool,
}

impl Default for SubscriberSettings {
    fn default() -> Self {
        SubscriberSettings {
            stale_after: "30s".into(),
            heartbeat: "2s".into(),
            lease: None,
            max_clock_skew: "500ms".into(),
            max_write: "2s".into(),
            max_per_caller: 2_500,
            require_lease: false,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiSettings {
    pub secret_key: String,
    pub session_ttl: String,
}

impl Default for UiSettings {
    fn default() -> Self {
        // 12 hours: long enough to cover a night shift, short enough that a forgotten browser
        // does not stay signed in for days.
        UiSettings { secret_key: String::new(), session_ttl: "12h".into() }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LaneSettings {
    pub session_timeout: String,
    pub heartbeat_interval: String,
    pub lag_interval: String,
    pub kafka_bootstrap: String,
    pub max_groups: usize,
    pub max_members: usize,
    /// HMAC key for member secrets, 64 hex digits; the same on every replica. Empty: generated
    /// once and kept in `<data_dir>/lane-member.key`.
    pub member_key: String,
    /// The key `member_key` replaces, during a rotation: secrets made with it are still accepted
    /// (and a heartbeat that presents one is answered with the member's secret under the new
    /// key), so consumers switch without registering again. Empty when no rotation is under way.
    pub previous_member_key: String,
    /// Most groups one caller (token) may create, and most members it may hold in all groups.
    pub max_groups_per_caller: usize,
    pub max_members_per_caller: usize,
    /// With a shared log: how long the lane authority's lease lasts (renewed every third of it).
    /// Empty: two fifths of `session_timeout` (4s with the default 10s).
    pub lease: String,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings {
            session_timeout: "10s".into(),
            heartbeat_interval: "1s".into(),
            lag_interval: "1s".into(),
            kafka_bootstrap: String::new(),
            max_groups: 64,
            max_members: 256,
            member_key: String::new(),
            previous_member_key: String::new(),
            max_groups_per_caller: 16,
            max_members_per_caller: 256,
            lease: String::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSettings {
    pub source: String,
    pub window: String,
    pub down_error_rate: f64,
    /// The recent part of the window that "down" and load are judged on (at most the window):
    /// detection takes `zone_down_for` plus at most this, not the whole window.
    pub detect_window: String,
    /// A zone whose outcome reporters sent nothing for this long is `unknown`, never healthy.
    pub silent_after: String,
    /// How often the per-zone health gauges are refreshed, whether or not anyone asks.
    pub publish_interval: String,
    pub prometheus: PrometheusSettings,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusSettings {
    pub url: String,
    pub error_rate_query: String,
    pub requests_query: String,
    /// A zone's current load in requests per second, for capacity checks.
    pub load_query: String,
    pub timeout: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrainSettings {
    pub step_percent: f64,
    pub interval: String,
    pub max_error_rate: f64,
    pub min_requests: u64,
    pub breaches: u32,
    pub on_breach: String,
    pub tick: String,
    pub convergence_fraction: f64,
    pub convergence_timeout: String,
    /// Defaults of `mode: "evacuate"` drains: faster than maintenance.
    pub evacuate: EvacuateSettings,
}

/// `[drain.evacuate]`: the defaults of an evacuation (its guard judges the receiving zone only).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvacuateSettings {
    pub step_percent: f64,
    pub interval: String,
    pub max_error_rate: f64,
    pub min_requests: u64,
    pub breaches: u32,
    pub on_breach: String,
}

impl Default for EvacuateSettings {
    fn default() -> Self {
        // A failing zone loses users every second it keeps them: big steps, short interval.
        // The guard still pauses (never rolls back: that would send users back into the
        // failing zone) when the receiving zone breaches twice in a row.
        EvacuateSettings {
            step_percent: 25.0,
            interval: "5s".into(),
            max_error_rate: 0.05,
            min_requests: 20,
            breaches: 2,
            on_breach: "pause".into(),
        }
    }
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            source: "outcomes".into(),
            window: "60s".into(),
            down_error_rate: 0.5,
            detect_window: "10s".into(),
            silent_after: "15s".into(),
            publish_interval: "5s".into(),
            prometheus: PrometheusSettings::default(),
        }
    }
}

impl Default for PrometheusSettings {
    fn default() -> Self {
        PrometheusSettings {
            url: String::new(),
            error_rate_query: r#"sum(rate(http_requests_errors_total{zone="$zone"}[1m])) / sum(rate(http_requests_total{zone="$zone"}[1m]))"#.into(),
            requests_query: r#"sum(increase(http_requests_total{zone="$zone"}[1m]))"#.into(),
            load_query: r#"sum(rate(http_requests_total{zone="$zone"}[1m]))"#.into(),
            timeout: "2s".into(),
        }
    }
}

impl Default for DrainSettings {
    fn default() -> Self {
        DrainSettings {
            step_percent: 10.0,
            interval: "30s".into(),
            max_error_rate: 0.02,
            min_requests: 100,
            breaches: 2,
            on_breach: "pause".into(),
            tick: "50ms".into(),
            convergence_fraction: 1.0,
            convergence_timeout: "60s".into(),
            evacuate: EvacuateSettings::default(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub address: String,
    pub port: u16,
    /// A second port serving only `GET`/`POST /v1/tag` on hyper directly (off when absent).
    pub fast_port: Option<u16>,
    /// The main port serves the tag path (tags, watch streams, acks) on hyper directly and hands
    /// every other connection to Rocket (with `[server.tls]` too: the dispatcher terminates it).
    pub fast_path: bool,
    pub tls: Option<TlsSettings>,
    /// How long a new connection may take to send its first request's complete head.
    pub header_read_timeout: String,
    /// How long a kept-alive connection may stay idle before its next request's head is complete.
    pub idle_timeout: String,
    /// Most connections served at once over the main and the fast port; 0 or absent derives
    /// it from the open-file limit.
    pub max_connections: Option<u64>,
    /// Runtime worker threads serving the ports; 0 or absent: one per core.
    pub workers: Option<u64>,
}

/// `[edge] max_leaves` when not set.
pub const DEFAULT_MAX_LEAVES: u64 = 10_000;

/// `[server] header_read_timeout` and `[edge] header_read_timeout` when not set.
pub const DEFAULT_HEADER_READ_TIMEOUT: &str = "10s";
/// `[server] idle_timeout` and `[edge] idle_timeout` when not set.
pub const DEFAULT_IDLE_TIMEOUT: &str = "60s";

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UnitSettings {
    pub count: u32,
    pub mode: String,
    pub digits_skip: u8,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColorSettings {
    pub blue: String,
    pub green: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitSettings {
    pub max_batch: usize,
    pub max_body_bytes: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorSettings {
    pub name: String,
    pub token_sha256: String,
    #[serde(default = "default_role")]
    pub role: String,
}

fn default_role() -> String {
    "operator".into()
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            data_dir: PathBuf::from("data"),
            snapshot_every: 1000,
            initial_blue_percent: 50.0,
            fallback: "random".into(),
            write_fallback: "reject".into(),
            server: ServerSettings::default(),
            units: UnitSettings::default(),
            colors: ColorSettings::default(),
            limits: LimitSettings::default(),
            operators: Vec::new(),
            service_tokens_sha256: Vec::new(),
            health: HealthSettings::default(),
            drain: DrainSettings::default(),
            subscribers: SubscriberSettings::default(),
            ui: UiSettings::default(),
            lanes: LaneSettings::default(),
            client: ClientSettings::default(),
            openfeature: OpenFeatureSettings::default(),
            edge: EdgeSettings::default(),
            zones: BTreeMap::new(),
            capacity: CapacitySettings::default(),
            store: StoreSettings::default(),
            node: NodeSettings::default(),
            plans: PlanSettings::default(),
            log: LogSettings::default(),
            channels: ChannelSettings::default(),
            freeze: FreezeSettings::default(),
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            address: "127.0.0.1".into(),
            port: 8080,
            fast_port: None,
            fast_path: true,
            tls: None,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT.into(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT.into(),
            max_connections: None,
            workers: None,
        }
    }
}

impl Default for UnitSettings {
    fn default() -> Self {
        UnitSettings { count: 100, mode: "hash".into(), digits_skip: 0 }
    }
}

impl Default for ColorSettings {
    fn default() -> Self {
        let zones = Zones::default();
        ColorSettings {
            blue: zones.zone_of(ZoneId::BLUE).to_owned(),
            green: zones.zone_of(ZoneId::GREEN).to_owned(),
        }
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings { max_batch: 10_000, max_body_bytes: 4 * 1024 * 1024 }
    }
}

/// A configuration error: which key, and why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Parse(String),
    #[error("configuration key `{key}`: {reason}")]
    Invalid { key: String, reason: String },
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { key: key.into(), reason: reason.into() }
}

/// Overrides from command-line flags; they win over the file and the environment.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub address: Option<String>,
    pub port: Option<u16>,
    pub data_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Viewer,
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        }
    }
}

/// An operator as the server needs it: the name, the SHA-256 of the token and the role.
#[derive(Clone, Debug)]
pub struct OperatorEntry {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub role: Role,
}

/// Validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub log: LogConfig,
    /// `[channels] services`: the services a release channel may name (`None`: any).
    pub channel_services: Option<Vec<String>>,
    pub data_dir: PathBuf,
    pub snapshot_every: u64,
    pub address: IpAddr,
    pub port: u16,
    pub genesis: Genesis,
    pub zones: Zones,
    pub fallback: Fallback,
    /// The fallback of writes without a user ID (`reject` unless configured).
    pub write_fallback: Fallback,
    pub max_batch: usize,
    pub max_body_bytes: u64,
    pub operators: Vec<OperatorEntry>,
    pub service_tokens: Vec<[u8; 32]>,
    pub health: HealthConfig,
    pub drain: DrainDefaults,
    /// A subscriber silent (no stream, no ack) for this long is stale; forgotten after twice it.
    pub subscriber_stale_after_ms: u64,
    /// Heartbeat period of the watch stream.
    pub watch_heartbeat_ms: u64,
    /// `[subscribers] lease`, `max_clock_skew` and `max_write`, in ms.
    pub lease: LeaseConfig,
    pub ui: UiConfig,
    pub lanes: LanesConfig,
    /// Serve HTTPS with these files; `None` serves plain HTTP.
    pub tls: Option<TlsSettings>,
    /// `[server] fast_port`: the tag path's own plain-HTTP listener on `address` (`http_fast`);
    /// 0 takes any free port.
    pub fast_port: Option<u16>,
    /// `[server] fast_path`: the main port is the dispatcher of `http_fast::dispatch`, which
    /// hands Rocket the connections it does not serve (terminating TLS first with `tls`).
    pub fast_path: bool,
    /// `[server] header_read_timeout`, `idle_timeout`, `max_connections`: the limits of the
    /// main and the fast port, which share one connection guard.
    pub connections: ConnectionLimits,
    /// `[server] workers`: the runtime's worker threads; `None`: one per core.
    pub workers: Option<usize>,
    /// The CA file the CLI trusts (`[client] ca_file`).
    pub client_ca_file: Option<PathBuf>,
    /// Most subscribers one caller may register (`subscribers.max_per_caller`).
    pub subscriber_max_per_caller: usize,
    /// The OpenFeature key of the colour flag.
    pub flag_key: String,
    pub edge: EdgeConfig,
    pub capacity: CapacityConfig,
    pub store: StoreConfig,
    /// This replica's identity; `None` only with the embedded file log.
    pub node: Option<NodeConfig>,
    /// `[plans] triggers`: plan triggers may start runs (opt-in).
    pub plan_triggers: bool,
    /// `[freeze] by_default`: a change of owner whose request does not say `freeze` freezes
    /// (off: such a change is at once).
    pub freeze_by_default: bool,
    /// `[freeze] window`: a freeze's maximum window when the request names none.
    pub freeze_window_ms: u64,
    /// `[plans] auto_window`, in ms: at most one automatic run per window across all plans.
    pub auto_window_ms: u64,
    /// `[plans] auto_max_share_percent`: the share one automatic run may move.
    pub auto_max_share_percent: f64,
    /// `[plans.<name>]`: plans declared in config, by name, as written (checked at start-up).
    pub declared_plans: BTreeMap<String, serde_json::Value>,
}

/// The validated `[edge]` section (used only by `tidegate edge`).
#[derive(Clone, Debug)]
pub struct EdgeConfig {
    /// Coordinator base URLs, tried in turn (empty is refused when the edge starts).
    pub coordinators: Vec<String>,
    pub address: IpAddr,
    pub port: u16,
    /// Lowercase header name carrying the user ID for `GET /v1/gate`.
    pub user_header: String,
    pub user_cookie: String,
    pub user_query: String,
    /// Where the last table is kept; `<data_dir>/edge-table.json` when not configured.
    pub cache_path: PathBuf,
    /// The zone this edge runs in, as reported to the coordinator (`unknown` when not set).
    pub zone: String,
    /// The subscriber ID it acknowledges as (`edge-<host>-<port>` when not set).
    pub subscriber_id: Option<String>,
    /// Bearer token for the coordinator, when it requires service tokens for reads.
    pub token: Option<String>,
    /// `[edge] header_read_timeout`, `idle_timeout`, `max_connections`.
    pub connections: ConnectionLimits,
    /// `[edge] workers`: the runtime's worker threads; `None`: one per core.
    pub workers: Option<usize>,
    /// `edge.coordinator_timeout`: neither an event nor a heartbeat for this long, and the
    /// coordinator is judged stalled and left for the next one (longer than the heartbeat).
    pub coordinator_timeout: std::time::Duration,
    /// `edge.tag_key`: signs the gateway check's tags.
    pub tag_key: Option<crate::client::TagKey>,
    /// `edge.max_leaves`: most subscribers watching through the edge (0: no watch stream).
    pub max_leaves: usize,
    /// `edge.fast_path`: the edge's port is a dispatcher that serves `/v1/tag` and `/v1/gate`
    /// on hyper and hands the rest to Rocket (`http_fast::edge`); false: Rocket alone.
    pub fast_path: bool,
    /// `[edge.tls]`: serve HTTPS with these files; `None` serves plain HTTP.
    pub tls: Option<TlsSettings>,
}

/// A listener's connection limits (`service::connections` builds its guard from them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_read_timeout_ms: u64,
    pub idle_timeout_ms: u64,
    /// `None`: derived from the open-file limit at start-up.
    pub max_connections: Option<usize>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_connections: None,
        }
    }
}

/// The `<section>.header_read_timeout`, `idle_timeout` and `max_connections` keys.
/// `workers`: absent or 0 is one per core; at most 1 024.
fn workers(key: &str, value: Option<u64>) -> Result<Option<usize>, ConfigError> {
    match value {
        None | Some(0) => Ok(None),
        Some(n) if n <= 1024 => Ok(Some(n as usize)),
        Some(_) => Err(invalid(key, "must be from 1 to 1024 (0 or absent: one per core)")),
    }
}

fn validate_connections(
    section: &str,
    header_read_timeout: &str,
    idle_timeout: &str,
    max_connections: Option<u64>,
) -> Result<ConnectionLimits, ConfigError> {
    let header_read_timeout_ms =
        duration(&format!("{section}.header_read_timeout"), header_read_timeout)?;
    let idle_timeout_ms = duration(&format!("{section}.idle_timeout"), idle_timeout)?;
    let max_connections = match max_connections {
        None | Some(0) => None,
        Some(n) if n <= 10_000_000 => Some(n as usize),
        Some(n) => {
            return Err(invalid(
                format!("{section}.max_connections"),
                format!(
                    "must be at most 10000000 (0 derives it from the open-file limit), got {n}"
                ),
            ));
        }
    };
    Ok(ConnectionLimits { header_read_timeout_ms, idle_timeout_ms, max_connections })
}

/// Where a zone's capacity comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ZoneCapacity {
    Rps(f64),
    /// A PromQL query (with `$zone`), when health comes from Prometheus.
    Query(String),
}

/// Capacity checks: per zone (zones without one are not checked) and the headroom kept free.
#[derive(Clone, Debug, Default)]
pub struct CapacityConfig {
    pub zones: BTreeMap<String, ZoneCapacity>,
    pub headroom: f64,
    /// `capacity.peak_window` (0: judge the current load).
    pub peak_window_ms: u64,
}

/// Where the command log lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreConfig {
    /// The embedded file log under `data_dir` (single node).
    File,
    /// A Kafka topic shared by every replica.
    Kafka {
        bootstrap: String,
        topic: String,
        apply_timeout_ms: u64,
        allow_under_replicated: bool,
        skip_offsets: Vec<u64>,
        /// Signs and checks every message on the presence topic (`None`: unsigned).
        presence_key: Option<SecretKey>,
    },
}

/// A replica's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    pub id: String,
    pub zone: String,
    pub url: String,
    /// True when `url` was derived from the listen address (`[node] url` not set): the server
    /// then announces the address it actually bound (port 0 picks one).
    pub url_derived: bool,
}

/// The operator web UI: the key that encrypts session cookies and how long a session lasts.
#[derive(Clone, Debug)]
pub struct UiConfig {
    /// `None`: a random key is drawn at start-up, so sessions end when tidegate restarts.
    pub secret_key: Option<SecretKey>,
    pub session_ttl_ms: u64,
}

/// 256 bits of key material. Its `Debug` hides the bytes so a logged `Config` leaks nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SecretKey(pub [u8; 32]);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(redacted)")
    }
}

/// MQ lane membership and lag (see `crate::service::lane_membership`).
#[derive(Clone, Debug)]
pub struct LanesConfig {
    /// A member that has not heartbeated for this long is dead; its partitions are handed over.
    pub session_timeout_ms: u64,
    /// How often members are told to heartbeat (they learn assignment changes from the answer).
    pub heartbeat_interval_ms: u64,
    /// How often each group's lag is read from Kafka.
    pub lag_interval_ms: u64,
    /// `bootstrap.servers` for reading lag; `None` leaves lag unknown.
    pub kafka_bootstrap: Option<String>,
    pub max_groups: usize,
    pub max_members: usize,
    /// The configured member-secret key; `None`: the data directory's `lane-member.key`.
    pub member_key: Option<SecretKey>,
    /// The key being rotated out (`lanes.previous_member_key`): still verifies, never signs.
    pub previous_member_key: Option<SecretKey>,
    pub max_groups_per_caller: usize,
    pub max_members_per_caller: usize,
    /// With a shared log: the term of the lane authority's lease (`service::lane_authority`).
    pub lease_ms: u64,
}

/// Where zone error rates come from.
#[derive(Clone, Debug)]
pub enum HealthSourceConfig {
    Outcomes,
    Prometheus {
        url: String,
        error_rate_query: String,
        requests_query: Option<String>,
        load_query: String,
        timeout_ms: u64,
    },
}

#[derive(Clone, Debug)]
pub struct HealthConfig {
    pub source: HealthSourceConfig,
    pub window_ms: u64,
    pub down_error_rate: f64,
    pub detect_window_ms: u64,
    pub silent_after_ms: u64,
    pub publish_interval_ms: u64,
}

/// Defaults for drain fields a request leaves out, and the runner's tick.
#[derive(Clone, Debug)]
pub struct DrainDefaults {
    pub step_percent: f64,
    pub interval_ms: u64,
    pub guard: Guard,
    pub tick_ms: u64,
    /// Fraction of live subscribers that must run a step's version before the next step (0 turns
    /// the gate off), and how long to wait before pausing the drain.
    pub convergence_fraction: f64,
    pub convergence_timeout_ms: u64,
    pub evacuate: EvacuateDefaults,
}

/// Defaults of evacuation drains (`[drain.evacuate]`).
#[derive(Clone, Debug)]
pub struct EvacuateDefaults {
    pub step_percent: f64,
    pub interval_ms: u64,
    pub guard: Guard,
}

fn validate_store(s: &StoreSettings) -> Result<StoreConfig, ConfigError> {
    match s.kind.as_str() {
        "file" => Ok(StoreConfig::File),
        "kafka" => {
            if s.kafka.bootstrap.trim().is_empty() {
                return Err(invalid(
                    "store.kafka.bootstrap",
                    "is required when store.kind is `kafka`",
                ));
            }
            if s.kafka.topic.trim().is_empty() {
                return Err(invalid("store.kafka.topic", "must not be empty"));
            }
            let apply_timeout_ms = duration("store.kafka.apply_timeout", &s.kafka.apply_timeout)?;
            Ok(StoreConfig::Kafka {
                bootstrap: s.kafka.bootstrap.clone(),
                topic: s.kafka.topic.clone(),
                apply_timeout_ms,
                allow_under_replicated: s.kafka.allow_under_replicated,
                skip_offsets: s.kafka.skip_offsets.clone(),
                presence_key: secret_key("store.kafka.presence_key", &s.kafka.presence_key)?,
            })
        }
        other => Err(invalid(
            "store.kind",
            format!("`{other}` is not a store: expected `file` or `kafka`"),
        )),
    }
}

fn validate_node(
    s: &NodeSettings,
    store: &StoreConfig,
    address: IpAddr,
    port: u16,
    tls: bool,
) -> Result<Option<NodeConfig>, ConfigError> {
    if s.id.is_empty() && s.zone.is_empty() && *store == StoreConfig::File {
        return Ok(None);
    }
    check_label("node.id", &s.id)?;
    check_label("node.zone", &s.zone)?;
    let url_derived = s.url.is_empty();
    let url = if url_derived {
        let host = if address.is_ipv6() { format!("[{address}]") } else { address.to_string() };
        format!("{}://{host}:{port}", if tls { "https" } else { "http" })
    } else {
        s.url.trim_end_matches('/').to_owned()
    };
    let valid = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .is_some_and(|rest| !rest.is_empty() && !rest.contains(char::is_whitespace));
    if !valid {
        return Err(invalid("node.url", format!("`{url}` is not an http(s) URL")));
    }
    Ok(Some(NodeConfig { id: s.id.clone(), zone: s.zone.clone(), url, url_derived }))
}

impl Config {
    /// Loads defaults < `file` (if given) < `TIDEGATE_*` environment < `overrides`.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(file) = file {
            if !file.exists() {
                return Err(ConfigError::Parse(format!("file {} does not exist", file.display())));
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(
            Env::prefixed("TIDEGATE_").split("__").filter(|key| is_config_env_key(key.as_str())),
        );
        Config::from_figment(figment, overrides)
    }

    /// The configuration a TOML text gives over the defaults, without the environment or files:
    /// what `load` does with a file's contents (the config fuzz target's entry point).
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigError> {
        let figment =
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(text));
        Config::from_figment(figment, &Overrides::default())
    }

    pub fn from_figment(figment: Figment, overrides: &Overrides) -> Result<Config, ConfigError> {
        let settings: Settings = figment.extract().map_err(|e| {
            // Figment names keys by profile ("default.units.count"); operators know "units.count".
            let messages: Vec<String> =
                e.into_iter().map(|e| e.to_string().replace("key \"default.", "key \"")).collect();
            ConfigError::Parse(messages.join("; "))
        })?;
        Config::validate(settings, overrides)
    }

    pub fn validate(mut s: Settings, overrides: &Overrides) -> Result<Config, ConfigError> {
        if let Some(address) = &overrides.address {
            s.server.address = address.clone();
        }
        if let Some(port) = overrides.port {
            s.server.port = port;
        }
        if let Some(dir) = &overrides.data_dir {
            s.data_dir = dir.clone();
        }
        let address: IpAddr = s.server.address.parse().map_err(|_| {
            invalid("server.address", format!("`{}` is not an IP address", s.server.address))
        })?;
        if s.data_dir.as_os_str().is_empty() {
            return Err(invalid("data_dir", "must not be empty"));
        }
        let mode = match s.units.mode.as_str() {
            "hash" => UnitMode::Hash,
            "digits" => UnitMode::Digits { skip: s.units.digits_skip },
            other => {
                return Err(invalid(
                    "units.mode",
                    format!("`{other}` is not a mode: expected `hash` or `digits`"),
                ));
            }
        };
        let scheme = UnitScheme::new(s.units.count, mode).map_err(|e| {
            let key = if e.to_string().contains("digits") { "units.mode" } else { "units.count" };
            invalid(key, e.to_string())
        })?;
        let share = Share::from_percent(s.initial_blue_percent, scheme.count())
            .map_err(|e| invalid("initial_blue_percent", e.to_string()))?;
        for (key, zone) in [("colors.blue", &s.colors.blue), ("colors.green", &s.colors.green)] {
            check_label(key, zone)?;
        }
        if s.colors.blue == s.colors.green {
            return Err(invalid("colors.green", "blue and green must run in different zones"));
        }
        let zones = zone_list(&s)?;
        let fallback_of = |key: &str, text: &str| match text {
            "random" => Ok(Fallback::Random),
            "reject" => Ok(Fallback::Reject),
            other => Err(invalid(
                key,
                format!("`{other}` is not a fallback: expected `random` or `reject`"),
            )),
        };
        let fallback = fallback_of("fallback", &s.fallback)?;
        let write_fallback = fallback_of("write_fallback", &s.write_fallback)?;
        if !(1..=100_000).contains(&s.limits.max_batch) {
            return Err(invalid("limits.max_batch", "must be between 1 and 100000"));
        }
        if s.limits.max_body_bytes < 1024 {
            return Err(invalid("limits.max_body_bytes", "must be at least 1024"));
        }
        let mut operators = Vec::new();
        for (i, op) in s.operators.iter().enumerate() {
            let key = format!("operators[{i}]");
            if op.name.trim().is_empty() {
                return Err(invalid(format!("{key}.name"), "must not be empty"));
            }
            if operators.iter().any(|o: &OperatorEntry| o.name == op.name) {
                return Err(invalid(format!("{key}.name"), format!("`{}` appears twice", op.name)));
            }
            let role = match op.role.as_str() {
                "operator" => Role::Operator,
                "viewer" => Role::Viewer,
                other => {
                    return Err(invalid(
                        format!("{key}.role"),
                        format!("`{other}` is not a role: expected `operator` or `viewer`"),
                    ));
                }
            };
            let token_sha256 = parse_sha256(&format!("{key}.token_sha256"), &op.token_sha256)?;
            operators.push(OperatorEntry { name: op.name.clone(), token_sha256, role });
        }
        let service_tokens = s
            .service_tokens_sha256
            .iter()
            .enumerate()
            .map(|(i, h)| parse_sha256(&format!("service_tokens_sha256[{i}]"), h))
            .collect::<Result<Vec<_>, _>>()?;
        let health = validate_health(&s.health)?;
        let drain = validate_drain(&s.drain, scheme.count())?;
        let subscriber_stale_after_ms =
            duration("subscribers.stale_after", &s.subscribers.stale_after)?;
        let freeze_window_ms = duration("freeze.window", &s.freeze.window)?;
        if !(100..=crate::core::MAX_FREEZE_MS).contains(&freeze_window_ms) {
            return Err(invalid("freeze.window", "must be from 100ms to 10m"));
        }
        let watch_heartbeat_ms = duration("subscribers.heartbeat", &s.subscribers.heartbeat)?;
        if watch_heartbeat_ms * 2 > subscriber_stale_after_ms {
            return Err(invalid(
                "subscribers.heartbeat",
                "must be at most half of subscribers.stale_after, or live streams would look stale",
            ));
        }
        let lease = validate_lease(&s.subscribers, watch_heartbeat_ms, subscriber_stale_after_ms)?;
        if !(1..=100_000).contains(&s.subscribers.max_per_caller) {
            return Err(invalid("subscribers.max_per_caller", "must be between 1 and 100000"));
        }
        let ui = validate_ui(&s.ui)?;
        let lanes = validate_lanes(&s.lanes)?;
        if let Some(tls) = &s.server.tls {
            validate_tls("server.tls", tls)?;
        }
        if let Some(fast_port) = s.server.fast_port {
            if s.server.tls.is_some() {
                return Err(invalid(
                    "server.fast_port",
                    "the fast tag listener serves plain HTTP only, and server.tls is set; remove server.fast_port (or serve TLS in front of it)",
                ));
            }
            if fast_port != 0 && fast_port == s.server.port {
                return Err(invalid(
                    "server.fast_port",
                    format!("must differ from server.port ({fast_port})"),
                ));
            }
        }
        if let Some(path) = &s.client.ca_file
            && let Err(e) = std::fs::metadata(path)
        {
            return Err(invalid("client.ca_file", format!("cannot read {}: {e}", path.display())));
        }
        let flag_key = s.openfeature.flag_key.trim().to_owned();
        if flag_key.is_empty() || flag_key.len() > 128 || flag_key.contains('/') {
            return Err(invalid("openfeature.flag_key", "must be 1-128 characters without `/`"));
        }
        let connections = validate_connections(
            "server",
            &s.server.header_read_timeout,
            &s.server.idle_timeout,
            s.server.max_connections,
        )?;
        let edge = validate_edge(&s.edge, &s.data_dir)?;
        let capacity = validate_capacity(&s, &zones, &health)?;
        let store = validate_store(&s.store)?;
        let node = validate_node(&s.node, &store, address, s.server.port, s.server.tls.is_some())?;
        let auto_window_ms =
            duration("plans.auto_window", s.plans.auto_window.as_deref().unwrap_or("10m"))?;
        let auto_max_share_percent = s.plans.auto_max_share_percent.unwrap_or(100.0);
        if !(auto_max_share_percent > 0.0 && auto_max_share_percent <= 100.0) {
            return Err(invalid(
                "plans.auto_max_share_percent",
                format!(
                    "must be a percentage above 0 and at most 100, got {auto_max_share_percent}"
                ),
            ));
        }
        let json = match s.log.format.as_str() {
            "text" => false,
            "json" => true,
            other => {
                return Err(invalid(
                    "log.format",
                    format!("`{other}` is not a log format: text or json"),
                ));
            }
        };
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&s.log.level) {
            return Err(invalid(
                "log.level",
                format!("`{}` is not a log filter ({e})", s.log.level),
            ));
        }
        let log = LogConfig { json, filter: s.log.level.clone() };
        if let Some((i, bad)) =
            s.channels.services.iter().enumerate().find(|(_, n)| !crate::core::valid_name(n))
        {
            return Err(invalid(
                format!("channels.services[{i}]"),
                format!("`{bad}` is not a service name: 1-64 bytes of [a-z0-9_.-]"),
            ));
        }
        let channel_services =
            (!s.channels.services.is_empty()).then(|| s.channels.services.clone());
        Ok(Config {
            log,
            channel_services,
            auto_window_ms,
            auto_max_share_percent,
            store,
            node,
            plan_triggers: s.plans.triggers,
            freeze_by_default: s.freeze.by_default,
            freeze_window_ms,
            declared_plans: s.plans.declared.clone(),
            tls: s.server.tls.clone(),
            fast_port: s.server.fast_port,
            fast_path: s.server.fast_path,
            connections,
            workers: workers("server.workers", s.server.workers)?,
            client_ca_file: s.client.ca_file.clone(),
            flag_key,
            edge,
            capacity,
            health,
            drain,
            ui,
            lanes,
            subscriber_stale_after_ms,
            watch_heartbeat_ms,
            lease,
            data_dir: s.data_dir,
            snapshot_every: s.snapshot_every,
            address,
            port: s.server.port,
            genesis: Genesis { scheme, blue_units: share.blue_units },
            zones,
            fallback,
            write_fallback,
            max_batch: s.limits.max_batch,
            max_body_bytes: s.limits.max_body_bytes,
            operators,
            service_tokens,
            subscriber_max_per_caller: s.subscribers.max_per_caller,
        })
    }
}

/// Reads both PEM files now, so a wrong path or a file of the wrong kind names its key instead
/// of failing later as "binding failed".
fn validate_tls(section: &str, tls: &TlsSettings) -> Result<(), ConfigError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(&tls.certs)
        .map_err(|e| {
            invalid(format!("{section}.certs"), format!("cannot read {}: {e}", tls.certs.display()))
        })?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            invalid(format!("{section}.certs"), format!("{}: {e}", tls.certs.display()))
        })?;
    if certs.is_empty() {
        return Err(invalid(
            format!("{section}.certs"),
            format!("{} holds no PEM certificate", tls.certs.display()),
        ));
    }
    PrivateKeyDer::from_pem_file(&tls.key).map_err(|e| {
        invalid(
            format!("{section}.key"),
            format!(
                "{} holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}",
                tls.key.display()
            ),
        )
    })?;
    Ok(())
}

fn duration(key: &str, text: &str) -> Result<u64, ConfigError> {
    match parse_duration_ms(text) {
        Ok(0) => Err(invalid(key, "must be longer than zero")),
        Ok(ms) => Ok(ms),
        Err(e) => Err(invalid(key, e)),
    }
}

fn ratio(key: &str, value: f64) -> Result<f64, ConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(key, format!("must be a ratio between 0 and 1 (0.02 = 2%), got {value}")))
    }
}

fn validate_health(h: &HealthSettings) -> Result<HealthConfig, ConfigError> {
    let window_ms = duration("health.window", &h.window)?;
    if window_ms < 1_000 {
        return Err(invalid("health.window", "must be at least 1s"));
    }
    let down_error_rate = ratio("health.down_error_rate", h.down_error_rate)?;
    let detect_window_ms = duration("health.detect_window", &h.detect_window)?;
    if detect_window_ms < 1_000 {
        return Err(invalid("health.detect_window", "must be at least 1s"));
    }
    let silent_after_ms = duration("health.silent_after", &h.silent_after)?;
    if silent_after_ms < 1_000 {
        return Err(invalid("health.silent_after", "must be at least 1s"));
    }
    let publish_interval_ms = duration("health.publish_interval", &h.publish_interval)?;
    if !(100..=3_600_000).contains(&publish_interval_ms) {
        return Err(invalid("health.publish_interval", "must be between 100ms and 1h"));
    }
    let source = match h.source.as_str() {
        "outcomes" => HealthSourceConfig::Outcomes,
        "prometheus" => {
            let p = &h.prometheus;
            let url_ok = p.url.starts_with("http://") || p.url.starts_with("https://");
            if !url_ok {
                return Err(invalid(
                    "health.prometheus.url",
                    "must be the Prometheus base URL, e.g. http://127.0.0.1:9090, when health.source = \"prometheus\"",
                ));
            }
            if !p.error_rate_query.contains("$zone") {
                return Err(invalid(
                    "health.prometheus.error_rate_query",
                    "must contain `$zone`, which is replaced by each zone's name",
                ));
            }
            let requests_query =
                (!p.requests_query.trim().is_empty()).then(|| p.requests_query.clone());
            if !p.load_query.contains("$zone") {
                return Err(invalid(
                    "health.prometheus.load_query",
                    "must contain `$zone`, which is replaced by each zone's name",
                ));
            }
            HealthSourceConfig::Prometheus {
                url: p.url.clone(),
                error_rate_query: p.error_rate_query.clone(),
                load_query: p.load_query.clone(),
                requests_query,
                timeout_ms: duration("health.prometheus.timeout", &p.timeout)?,
            }
        }
        other => {
            return Err(invalid(
                "health.source",
                format!("`{other}` is not a source: expected `outcomes` or `prometheus`"),
            ));
        }
    };
    Ok(HealthConfig {
        source,
        window_ms,
        down_error_rate,
        // Both are parts of the window: a longer one would read counts the window has dropped.
        detect_window_ms: detect_window_ms.min(window_ms),
        silent_after_ms: silent_after_ms.min(window_ms),
        publish_interval_ms,
    })
}

/// Step, interval and guard defaults under `prefix` (`drain` or `drain.evacuate`).
#[allow(clippy::too_many_arguments)]
fn drain_defaults(
    prefix: &str,
    units: u32,
    step_percent: f64,
    interval: &str,
    max_error_rate: f64,
    min_requests: u64,
    breaches: u32,
    on_breach: &str,
) -> Result<(f64, u64, Guard), ConfigError> {
    let step = Share::from_percent(step_percent, units)
        .map_err(|e| invalid(format!("{prefix}.step_percent"), e.to_string()))?;
    if step.blue_units == 0 {
        return Err(invalid(format!("{prefix}.step_percent"), "must move at least one unit"));
    }
    let on_breach = match on_breach {
        "pause" => OnBreach::Pause,
        "rollback" => OnBreach::Rollback,
        other => {
            return Err(invalid(
                format!("{prefix}.on_breach"),
                format!("`{other}` is not an action: expected `pause` or `rollback`"),
            ));
        }
    };
    if breaches == 0 {
        return Err(invalid(format!("{prefix}.breaches"), "must be at least 1"));
    }
    let guard = Guard {
        max_error_rate: ratio(&format!("{prefix}.max_error_rate"), max_error_rate)?,
        min_requests,
        breaches,
        on_breach,
    };
    let interval_ms = duration(&format!("{prefix}.interval"), interval)?;
    if interval_ms > crate::core::MAX_DRAIN_INTERVAL_MS {
        return Err(invalid(format!("{prefix}.interval"), "must be at most 24h"));
    }
    Ok((step_percent, interval_ms, guard))
}

fn validate_drain(d: &DrainSettings, units: u32) -> Result<DrainDefaults, ConfigError> {
    let (step_percent, interval_ms, guard) = drain_defaults(
        "drain",
        units,
        d.step_percent,
        &d.interval,
        d.max_error_rate,
        d.min_requests,
        d.breaches,
        &d.on_breach,
    )?;
    let e = &d.evacuate;
    let (ev_step, ev_interval, ev_guard) = drain_defaults(
        "drain.evacuate",
        units,
        e.step_percent,
        &e.interval,
        e.max_error_rate,
        e.min_requests,
        e.breaches,
        &e.on_breach,
    )?;
    Ok(DrainDefaults {
        step_percent,
        interval_ms,
        guard,
        evacuate: EvacuateDefaults {
            step_percent: ev_step,
            interval_ms: ev_interval,
            guard: ev_guard,
        },
        tick_ms: duration("drain.tick", &d.tick)?,
        convergence_fraction: ratio("drain.convergence_fraction", d.convergence_fraction)?,
        convergence_timeout_ms: duration("drain.convergence_timeout", &d.convergence_timeout)?,
    })
}

fn validate_capacity(
    s: &Settings,
    zones: &Zones,
    health: &HealthConfig,
) -> Result<CapacityConfig, ConfigError> {
    let headroom = s.capacity.headroom;
    if !(0.0..1.0).contains(&headroom) {
        return Err(invalid(
            "capacity.headroom",
            "must be at least 0 and below 1 (0.2 = keep 20% free)",
        ));
    }
    let mut out = BTreeMap::new();
    for (zone, z) in &s.zones {
        let key = format!("zones.{zone}");
        if zones.color_in(zone).is_none() {
            return Err(invalid(
                key,
                format!("`{zone}` is not one of this tidegate's zones ({})", zones.names()),
            ));
        }
        let capacity = match (z.capacity_rps, &z.capacity_query) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    format!("{key}.capacity_query"),
                    "give capacity_rps or capacity_query, not both",
                ));
            }
            (Some(rps), None) => {
                if !(rps.is_finite() && rps > 0.0) {
                    return Err(invalid(
                        format!("{key}.capacity_rps"),
                        "must be a positive number of requests per second",
                    ));
                }
                ZoneCapacity::Rps(rps)
            }
            (None, Some(query)) => {
                if !matches!(health.source, HealthSourceConfig::Prometheus { .. }) {
                    return Err(invalid(
                        format!("{key}.capacity_query"),
                        "needs health.source = \"prometheus\" (use capacity_rps otherwise)",
                    ));
                }
                ZoneCapacity::Query(query.clone())
            }
            (None, None) => continue,
        };
        out.insert(zone.clone(), capacity);
    }
    let peak_window_ms = duration("capacity.peak_window", &s.capacity.peak_window)?;
    if peak_window_ms > 24 * 3_600_000 {
        return Err(invalid("capacity.peak_window", "must be at most 24h"));
    }
    Ok(CapacityConfig { zones: out, headroom, peak_window_ms })
}

fn validate_ui(u: &UiSettings) -> Result<UiConfig, ConfigError> {
    let secret_key = secret_key("ui.secret_key", &u.secret_key)?;
    let session_ttl_ms = duration("ui.session_ttl", &u.session_ttl)?;
    if session_ttl_ms < 60_000 {
        return Err(invalid("ui.session_ttl", "must be at least 1m"));
    }
    Ok(UiConfig { secret_key, session_ttl_ms })
}

fn validate_lanes(l: &LaneSettings) -> Result<LanesConfig, ConfigError> {
    let session_timeout_ms = duration("lanes.session_timeout", &l.session_timeout)?;
    let heartbeat_interval_ms = duration("lanes.heartbeat_interval", &l.heartbeat_interval)?;
    // Two heartbeats per session at least, or one delayed heartbeat would kill a healthy member.
    if heartbeat_interval_ms.saturating_mul(2) > session_timeout_ms {
        return Err(invalid(
            "lanes.heartbeat_interval",
            format!(
                "must be at most half of lanes.session_timeout ({}), got {}",
                l.session_timeout, l.heartbeat_interval
            ),
        ));
    }
    let lag_interval_ms = duration("lanes.lag_interval", &l.lag_interval)?;
    let lease_ms = if l.lease.is_empty() {
        session_timeout_ms * 2 / 5
    } else {
        duration("lanes.lease", &l.lease)?
    };
    // A consumer whose authority died must reach the next one before its own session runs out:
    // the next authority may take up to a lease term to appear.
    if lease_ms.saturating_mul(2) > session_timeout_ms || (lease_ms < 300 && !l.lease.is_empty()) {
        return Err(invalid(
            "lanes.lease",
            format!(
                "must be at least 300ms and at most half of lanes.session_timeout ({}), got {}",
                l.session_timeout, l.lease
            ),
        ));
    }
    let bootstrap = l.kafka_bootstrap.trim();
    if bootstrap.chars().any(char::is_whitespace) {
        return Err(invalid(
            "lanes.kafka_bootstrap",
            "must be a comma-separated host:port list without spaces",
        ));
    }
    if !(1..=10_000).contains(&l.max_groups) {
        return Err(invalid("lanes.max_groups", "must be between 1 and 10000"));
    }
    if !(1..=10_000).contains(&l.max_members) {
        return Err(invalid("lanes.max_members", "must be between 1 and 10000"));
    }
    if !(1..=10_000).contains(&l.max_groups_per_caller) {
        return Err(invalid("lanes.max_groups_per_caller", "must be between 1 and 10000"));
    }
    if !(1..=100_000).contains(&l.max_members_per_caller) {
        return Err(invalid("lanes.max_members_per_caller", "must be between 1 and 100000"));
    }
    let member_key = secret_key("lanes.member_key", &l.member_key)?;
    let previous_member_key = secret_key("lanes.previous_member_key", &l.previous_member_key)?;
    if previous_member_key.is_some() && member_key.is_none() {
        return Err(invalid(
            "lanes.previous_member_key",
            "a rotation needs the new key in lanes.member_key (set both, the same on every replica)",
        ));
    }
    if let (Some(new), Some(old)) = (&member_key, &previous_member_key)
        && new.0 == old.0
    {
        return Err(invalid("lanes.previous_member_key", "is the same key as lanes.member_key"));
    }
    Ok(LanesConfig {
        session_timeout_ms,
        heartbeat_interval_ms,
        lag_interval_ms,
        kafka_bootstrap: (!bootstrap.is_empty()).then(|| bootstrap.to_owned()),
        max_groups: l.max_groups,
        max_members: l.max_members,
        member_key,
        previous_member_key,
        max_groups_per_caller: l.max_groups_per_caller,
        max_members_per_caller: l.max_members_per_caller,
        lease_ms,
    })
}

fn validate_edge(e: &EdgeSettings, data_dir: &Path) -> Result<EdgeConfig, ConfigError> {
    let address: IpAddr = e
        .address
        .parse()
        .map_err(|_| invalid("edge.address", format!("`{}` is not an IP address", e.address)))?;
    let mut coordinators = Vec::new();
    for (i, url) in e.coordinators.iter().enumerate() {
        coordinators.push(check_coordinator_url(&format!("edge.coordinators[{i}]"), url)?);
    }
    let name = |key: &str, value: &str| -> Result<String, ConfigError> {
        let value = value.trim().to_ascii_lowercase();
        let ok = !value.is_empty()
            && value.len() <= 64
            && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if ok {
            Ok(value)
        } else {
            Err(invalid(key, "must be 1-64 characters of a-z, 0-9, `-`, `_`"))
        }
    };
    let zone = if e.zone.is_empty() { "unknown".to_owned() } else { e.zone.clone() };
    check_label("edge.zone", &zone)?;
    let subscriber_id = if e.subscriber_id.is_empty() {
        None
    } else {
        check_label("edge.subscriber_id", &e.subscriber_id)?;
        Some(e.subscriber_id.clone())
    };
    Ok(EdgeConfig {
        coordinators,
        address,
        port: e.port,
        user_header: name("edge.user_header", &e.user_header)?,
        user_cookie: name("edge.user_cookie", &e.user_cookie)?,
        user_query: name("edge.user_query", &e.user_query)?,
        cache_path: if e.cache_path.is_empty() {
            data_dir.join("edge-table.json")
        } else {
            PathBuf::from(&e.cache_path)
        },
        zone,
        subscriber_id,
        token: (!e.token.is_empty()).then(|| e.token.clone()),
        connections: validate_connections(
            "edge",
            &e.header_read_timeout,
            &e.idle_timeout,
            e.max_connections,
        )?,
        workers: workers("edge.workers", e.workers)?,
        coordinator_timeout: coordinator_timeout(&e.coordinator_timeout)?,
        tag_key: secret_key("edge.tag_key", &e.tag_key)?
            .map(|k| crate::client::TagKey::new(&k.0).expect("32 bytes")),
        fast_path: e.fast_path,
        max_leaves: match usize::try_from(e.max_leaves) {
            Ok(n) if n <= 100_000 => n,
            _ => {
                return Err(invalid(
                    "edge.max_leaves",
                    format!(
                        "{} is more than 100000 (the subscribers watching through one edge; 0 serves no watch stream)",
                        e.max_leaves
                    ),
                ));
            }
        },
        tls: match &e.tls {
            Some(tls) => {
                validate_tls("edge.tls", tls)?;
                Some(tls.clone())
            }
            None => None,
        },
    })
}

/// The table lease and the margins a barrier waits past it (docs/src/partitions.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    pub lease_ms: u64,
    pub max_clock_skew_ms: u64,
    pub max_write_ms: u64,
    /// `[subscribers] require_lease`.
    pub required: bool,
}

impl LeaseConfig {
    /// How long after a subscriber's last heartbeat (or a freeze's commit) its write checks have
    /// surely stopped answering `owned` and its last write checked before that has committed.
    pub fn bound_ms(&self) -> u64 {
        crate::core::lease::lease_bound_ms(self.lease_ms, self.max_clock_skew_ms)
            .saturating_add(self.max_write_ms)
    }
}

fn validate_lease(
    s: &SubscriberSettings,
    heartbeat_ms: u64,
    stale_after_ms: u64,
) -> Result<LeaseConfig, ConfigError> {
    let Some(lease) = &s.lease else {
        let lease_ms = heartbeat_ms.saturating_mul(3).max(6_000).min(stale_after_ms);
        return lease_margins(s, lease_ms);
    };
    let lease_ms = duration("subscribers.lease", lease)?;
    if lease_ms < heartbeat_ms.saturating_mul(2) {
        return Err(invalid(
            "subscribers.lease",
            "must be at least twice subscribers.heartbeat, or one late heartbeat would stop every write",
        ));
    }
    if lease_ms > stale_after_ms {
        return Err(invalid(
            "subscribers.lease",
            "must be at most subscribers.stale_after (a subscriber is counted for its whole lease)",
        ));
    }
    lease_margins(s, lease_ms)
}

fn lease_margins(s: &SubscriberSettings, lease_ms: u64) -> Result<LeaseConfig, ConfigError> {
    let max_clock_skew_ms = duration("subscribers.max_clock_skew", &s.max_clock_skew)?;
    if max_clock_skew_ms > 60_000 {
        return Err(invalid("subscribers.max_clock_skew", "must be at most 1m"));
    }
    let max_write_ms = duration("subscribers.max_write", &s.max_write)?;
    if max_write_ms > 600_000 {
        return Err(invalid("subscribers.max_write", "must be at most 10m"));
    }
    Ok(LeaseConfig { lease_ms, max_clock_skew_ms, max_write_ms, required: s.require_lease })
}

/// `edge.coordinator_timeout`: from 1s to 10 minutes. Each coordinator announces its heartbeat
/// interval on the watch stream (`x-tidegate-heartbeat-ms`), and the edge raises the bound for a
/// coordinator whose heartbeat plus a second is longer (`tidegate_client::sse::stall_bound`), so
/// the edge needs no copy of the coordinators' `[subscribers] heartbeat`.
fn coordinator_timeout(text: &str) -> Result<std::time::Duration, ConfigError> {
    const KEY: &str = "edge.coordinator_timeout";
    let ms = duration(KEY, text)?;
    if ms < 1000 {
        return Err(invalid(
            KEY,
            format!(
                "`{text}` must be at least 1s (coordinators send a heartbeat every few seconds; the edge waits at least one heartbeat plus a second whatever this says)"
            ),
        ));
    }
    if ms > 600_000 {
        return Err(invalid(KEY, format!("`{text}` must be at most 10m")));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// A coordinator base URL as the edge's watcher takes it: `http://host:port` or
/// `https://host:port` (verified against `--ca-file` / `[client] ca_file` or the system's
/// roots), no path.
pub fn check_coordinator_url(key: &str, url: &str) -> Result<String, ConfigError> {
    let url = url.trim().trim_end_matches('/');
    let rest =
        url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).ok_or_else(|| {
            invalid(key, format!("`{url}` must be an http://host:port or https://host:port URL"))
        })?;
    if rest.is_empty() || rest.contains('/') || rest.contains(',') {
        return Err(invalid(key, format!("`{url}` must be http(s)://host:port without a path")));
    }
    Ok(url.to_owned())
}

/// The zones a new log starts with: blue and green from `[colors]`, then every `[zones.<zone>]`
/// that names a `lane`, in name order; classes from `[zones.<zone>] class`.
fn zone_list(s: &Settings) -> Result<Zones, ConfigError> {
    let class_of = |zone: &str| -> Result<ZoneClass, ConfigError> {
        match s.zones.get(zone).and_then(|z| z.class.as_deref()) {
            None => Ok(ZoneClass::Rzone),
            Some(c) => ZoneClass::parse(c)
                .map_err(|e| invalid(format!("zones.{zone}.class"), e.to_string())),
        }
    };
    let mut specs = vec![
        ZoneSpec::new(&s.colors.blue, "blue", class_of(&s.colors.blue)?),
        ZoneSpec::new(&s.colors.green, "green", class_of(&s.colors.green)?),
    ];
    for (zone, z) in &s.zones {
        let key = format!("zones.{zone}.lane");
        let Some(lane) = z.lane.as_deref() else { continue };
        let colour = [(&s.colors.blue, "blue"), (&s.colors.green, "green")]
            .into_iter()
            .find(|(name, _)| *name == zone);
        match colour {
            Some((_, expected)) if lane == expected => continue,
            Some((_, expected)) => {
                return Err(invalid(key, format!("`{zone}` runs the {expected} lane ([colors])")));
            }
            None => {}
        }
        check_label(&key, lane)?;
        check_label(&format!("zones.{zone}"), zone)?;
        specs.push(ZoneSpec::new(zone, lane, class_of(zone)?));
    }
    Zones::from_specs(specs).map_err(|e| invalid("zones", e.to_string()))
}

fn check_label(key: &str, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(invalid(key, format!("`{value}` must be 1-64 characters of a-z, 0-9, `-`, `_`, `.`")))
    }
}

/// A 32-byte key given as 64 hex digits; empty means none configured.
fn secret_key(key_name: &str, text: &str) -> Result<Option<SecretKey>, ConfigError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let mut key = [0u8; 32];
    hex::decode_to_slice(text, &mut key).map_err(|_| {
        invalid(
            key_name,
            "must be 64 hex digits (32 random bytes), e.g. from `openssl rand -hex 32`",
        )
    })?;
    // An all-zero key is what a template placeholder looks like, not a secret.
    if key.iter().all(|b| *b == 0) {
        return Err(invalid(key_name, "must not be all zeros; use `openssl rand -hex 32`"));
    }
    Ok(Some(SecretKey(key)))
}

fn parse_sha256(key: &str, hex_text: &str) -> Result<[u8; 32], ConfigError> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_text.trim(), &mut out).map_err(|_| {
        invalid(key, "must be the SHA-256 of the token as 64 hex digits (see `tidegate token new`)")
    })?;
    Ok(out)
}

/// SHA-256 of a token as lowercase hex: what goes into `token_sha256`.
pub fn token_sha256_hex(token: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edge_takes_https_coordinators_and_a_stall_bound_of_a_second_or_more() {
        assert_eq!(check_coordinator_url("k", "https://c:8443/").unwrap(), "https://c:8443");
        assert_eq!(check_coordinator_url("k", " http://c:8080").unwrap(), "http://c:8080");
        assert!(check_coordinator_url("k", "ftp://c").unwrap_err().to_string().contains("k"));
        assert_eq!(coordinator_timeout("3s").unwrap(), std::time::Duration::from_secs(3));
        assert_eq!(coordinator_timeout("8s").unwrap(), std::time::Duration::from_secs(8));
        let err = coordinator_timeout("900ms").unwrap_err().to_string();
        assert!(err.contains("edge.coordinator_timeout") && err.contains("at least 1s"), "{err}");
        let err = coordinator_timeout("11m").unwrap_err().to_string();
        assert!(err.contains("at most 10m"), "{err}");
        assert_eq!(
            EdgeSettings::default().coordinator_timeout,
            "8s",
            "the default stays the Router's"
        );
        assert_eq!(crate::client::DEFAULT_STALL_TIMEOUT, std::time::Duration::from_secs(8));
    }

    #[test]
    fn config_env_keys_are_the_settings_top_level_keys() {
        let value = serde_json::to_value(Settings::default()).unwrap();
        let fields: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = fields.clone();
        expected.sort_unstable();
        let mut listed = CONFIG_ENV_KEYS.to_vec();
        listed.sort_unstable();
        assert_eq!(listed, expected, "CONFIG_ENV_KEYS must list every top-level key of Settings");
    }

    #[test]
    fn only_configuration_keys_are_read_from_the_environment() {
        for key in ["server.port", "SERVER.PORT", "data_dir", "edge.cache_path", "zones.az-a.x"] {
            assert!(is_config_env_key(key), "{key}");
        }
        for key in ["service_token", "cache", "bin", "token", "url", "config", "ca_file"] {
            assert!(!is_config_env_key(key), "{key}");
        }
    }
}
