//! Configuration: defaults, then the TOML file, then `TIDEGATE_*` variables, then CLI flags.
//!
//! Every value is checked once at start-up; a bad one stops tidegate with the key and the reason,
//! because a coordinator that guesses at its own configuration is worse than one that won't start.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::core::{ColorZones, Fallback, Genesis, Guard, OnBreach, Share, UnitMode, UnitScheme};
use crate::duration::parse_duration_ms;

/// Environment variables with the `TIDEGATE_` prefix that belong to the CLI, not to the server.
const CLIENT_ONLY_ENV: [&str; 3] = ["token", "url", "config"];

/// The raw, serialisable settings, as written in `config/tidegate.toml`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub initial_blue_percent: f64,
    pub fallback: String,
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
    pub store: StoreSettings,
    pub node: NodeSettings,
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
}

impl Default for KafkaStoreSettings {
    fn default() -> Self {
        KafkaStoreSettings {
            bootstrap: String::new(),
            topic: "tidegate.commands".into(),
            apply_timeout: "10s".into(),
        }
    }
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
}

impl Default for SubscriberSettings {
    fn default() -> Self {
        SubscriberSettings { stale_after: "30s".into(), heartbeat: "5s".into() }
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
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthSettings {
    pub source: String,
    pub window: String,
    pub down_error_rate: f64,
    pub prometheus: PrometheusSettings,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusSettings {
    pub url: String,
    pub error_rate_query: String,
    pub requests_query: String,
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
}

impl Default for HealthSettings {
    fn default() -> Self {
        HealthSettings {
            source: "outcomes".into(),
            window: "60s".into(),
            down_error_rate: 0.5,
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
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub address: String,
    pub port: u16,
}

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
            initial_blue_percent: 50.0,
            fallback: "random".into(),
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
            store: StoreSettings::default(),
            node: NodeSettings::default(),
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings { address: "127.0.0.1".into(), port: 8080 }
    }
}

impl Default for UnitSettings {
    fn default() -> Self {
        UnitSettings { count: 100, mode: "hash".into(), digits_skip: 0 }
    }
}

impl Default for ColorSettings {
    fn default() -> Self {
        let zones = ColorZones::default();
        ColorSettings { blue: zones.blue, green: zones.green }
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
    pub data_dir: PathBuf,
    pub address: IpAddr,
    pub port: u16,
    pub genesis: Genesis,
    pub zones: ColorZones,
    pub fallback: Fallback,
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
    pub ui: UiConfig,
    pub lanes: LanesConfig,
    pub store: StoreConfig,
    /// This replica's identity; `None` only with the embedded file log.
    pub node: Option<NodeConfig>,
}

/// Where the command log lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreConfig {
    /// The embedded file log under `data_dir` (single node).
    File,
    /// A Kafka topic shared by every replica.
    Kafka { bootstrap: String, topic: String, apply_timeout_ms: u64 },
}

/// A replica's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    pub id: String,
    pub zone: String,
    pub url: String,
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
}

/// Where zone error rates come from.
#[derive(Clone, Debug)]
pub enum HealthSourceConfig {
    Outcomes,
    Prometheus {
        url: String,
        error_rate_query: String,
        requests_query: Option<String>,
        timeout_ms: u64,
    },
}

#[derive(Clone, Debug)]
pub struct HealthConfig {
    pub source: HealthSourceConfig,
    pub window_ms: u64,
    pub down_error_rate: f64,
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
) -> Result<Option<NodeConfig>, ConfigError> {
    if s.id.is_empty() && s.zone.is_empty() && *store == StoreConfig::File {
        return Ok(None);
    }
    check_label("node.id", &s.id)?;
    check_label("node.zone", &s.zone)?;
    let url = if s.url.is_empty() { format!("http://{address}:{port}") } else { s.url.clone() };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(invalid("node.url", format!("`{url}` is not an http(s) URL")));
    }
    Ok(Some(NodeConfig { id: s.id.clone(), zone: s.zone.clone(), url }))
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
        figment = figment.merge(Env::prefixed("TIDEGATE_").split("__").ignore(&CLIENT_ONLY_ENV));
        Config::from_figment(figment, overrides)
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
        let zones = ColorZones { blue: s.colors.blue.clone(), green: s.colors.green.clone() };
        for (key, zone) in [("colors.blue", &zones.blue), ("colors.green", &zones.green)] {
            check_label(key, zone)?;
        }
        if zones.blue == zones.green {
            return Err(invalid("colors.green", "blue and green must run in different zones"));
        }
        let fallback = match s.fallback.as_str() {
            "random" => Fallback::Random,
            "reject" => Fallback::Reject,
            other => {
                return Err(invalid(
                    "fallback",
                    format!("`{other}` is not a fallback: expected `random` or `reject`"),
                ));
            }
        };
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
        let watch_heartbeat_ms = duration("subscribers.heartbeat", &s.subscribers.heartbeat)?;
        if watch_heartbeat_ms * 2 > subscriber_stale_after_ms {
            return Err(invalid(
                "subscribers.heartbeat",
                "must be at most half of subscribers.stale_after, or live streams would look stale",
            ));
        }
        let ui = validate_ui(&s.ui)?;
        let lanes = validate_lanes(&s.lanes)?;
        let store = validate_store(&s.store)?;
        let node = validate_node(&s.node, &store, address, s.server.port)?;
        Ok(Config {
            store,
            node,
            health,
            drain,
            ui,
            lanes,
            subscriber_stale_after_ms,
            watch_heartbeat_ms,
            data_dir: s.data_dir,
            address,
            port: s.server.port,
            genesis: Genesis { scheme, blue_units: share.blue_units },
            zones,
            fallback,
            max_batch: s.limits.max_batch,
            max_body_bytes: s.limits.max_body_bytes,
            operators,
            service_tokens,
        })
    }
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
            HealthSourceConfig::Prometheus {
                url: p.url.clone(),
                error_rate_query: p.error_rate_query.clone(),
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
    Ok(HealthConfig { source, window_ms, down_error_rate })
}

fn validate_drain(d: &DrainSettings, units: u32) -> Result<DrainDefaults, ConfigError> {
    let step = Share::from_percent(d.step_percent, units)
        .map_err(|e| invalid("drain.step_percent", e.to_string()))?;
    if step.blue_units == 0 {
        return Err(invalid("drain.step_percent", "must move at least one unit"));
    }
    let on_breach = match d.on_breach.as_str() {
        "pause" => OnBreach::Pause,
        "rollback" => OnBreach::Rollback,
        other => {
            return Err(invalid(
                "drain.on_breach",
                format!("`{other}` is not an action: expected `pause` or `rollback`"),
            ));
        }
    };
    if d.breaches == 0 {
        return Err(invalid("drain.breaches", "must be at least 1"));
    }
    Ok(DrainDefaults {
        step_percent: d.step_percent,
        interval_ms: duration("drain.interval", &d.interval)?,
        guard: Guard {
            max_error_rate: ratio("drain.max_error_rate", d.max_error_rate)?,
            min_requests: d.min_requests,
            breaches: d.breaches,
            on_breach,
        },
        tick_ms: duration("drain.tick", &d.tick)?,
        convergence_fraction: ratio("drain.convergence_fraction", d.convergence_fraction)?,
        convergence_timeout_ms: duration("drain.convergence_timeout", &d.convergence_timeout)?,
    })
}

fn validate_ui(u: &UiSettings) -> Result<UiConfig, ConfigError> {
    let secret_key = match u.secret_key.trim() {
        "" => None,
        text => {
            let mut key = [0u8; 32];
            hex::decode_to_slice(text, &mut key).map_err(|_| {
                invalid(
                    "ui.secret_key",
                    "must be 64 hex digits (32 random bytes), e.g. from `openssl rand -hex 32`",
                )
            })?;
            // An all-zero key is what a template placeholder looks like, not a secret.
            if key.iter().all(|b| *b == 0) {
                return Err(invalid(
                    "ui.secret_key",
                    "must not be all zeros; use `openssl rand -hex 32`",
                ));
            }
            Some(SecretKey(key))
        }
    };
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
    Ok(LanesConfig {
        session_timeout_ms,
        heartbeat_interval_ms,
        lag_interval_ms,
        kafka_bootstrap: (!bootstrap.is_empty()).then(|| bootstrap.to_owned()),
        max_groups: l.max_groups,
        max_members: l.max_members,
    })
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
