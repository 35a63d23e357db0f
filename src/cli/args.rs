//! The argument types the client commands share with their handlers (`client.rs` reads them,
//! `mod.rs` parses them), in their own file so neither imports the other's.

use std::path::PathBuf;

use clap::Args;

/// The client options, global: `tidegate plans report NAME --json` and `tidegate plans --json
/// report NAME` both work.
#[derive(Args, Debug, Clone)]
pub struct ClientArgs {
    /// Server URL, or several comma-separated (`a,b,c`: coordinator replicas, tried in turn when
    /// one cannot be reached); defaults to the address in --config, else http://127.0.0.1:8080.
    #[arg(long, env = "TIDEGATE_URL", global = true)]
    pub server: Option<String>,
    /// Configuration file to take the server address from.
    #[arg(long, env = "TIDEGATE_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Bearer token for changes (or reads, when service tokens are required).
    #[arg(long, env = "TIDEGATE_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// PEM file of the CA to trust for an https:// server instead of the system's roots
    /// (default: `[client] ca_file` in --config).
    #[arg(long, env = "TIDEGATE_CA_FILE", global = true)]
    pub ca_file: Option<PathBuf>,
    /// Print the server's JSON instead of a summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Following a long operation to its end.
#[derive(Args, Debug, Clone, Default)]
pub struct FollowArgs {
    /// Wait until it ends, printing each change of its state or step; exit non-zero unless it
    /// completed.
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this long (e.g. `10m`), exit non-zero, and leave it running.
    #[arg(long, requires = "wait")]
    pub timeout: Option<String>,
}

#[derive(Args, Debug)]
pub struct DrainStartArgs {
    /// Zone to drain (e.g. az-b).
    #[arg(long)]
    pub zone: String,
    /// Target share of users for the zone, in percent (0 drains it completely).
    #[arg(long = "to")]
    pub to: f64,
    /// Percent of users moved per step (default from config: 10).
    #[arg(long)]
    pub step: Option<f64>,
    /// Time between steps, e.g. 30s (default from config).
    #[arg(long)]
    pub every: Option<String>,
    /// Highest tolerated error rate (0-1) of either zone.
    #[arg(long)]
    pub max_error_rate: Option<f64>,
    /// Fewest requests in the window for the error rate to count.
    #[arg(long)]
    pub min_requests: Option<u64>,
    /// Consecutive failed checks before the guard acts.
    #[arg(long)]
    pub breaches: Option<u32>,
    /// What the guard does: pause or rollback.
    #[arg(long, value_parser = ["pause", "rollback"])]
    pub on_breach: Option<String>,
    /// maintenance (both zones guarded) or evacuate (only the receiving zone and its capacity;
    /// [drain.evacuate] defaults).
    #[arg(long, value_parser = ["maintenance", "evacuate"])]
    pub mode: Option<String>,
    /// The routing domain whose dial the drain steps (default: the default domain).
    #[arg(long)]
    pub domain: Option<String>,
    /// Loss-less steps: freeze each step's units, switch once every subscriber applied the
    /// freeze, unfreeze once every subscriber applied the switch.
    #[arg(long)]
    pub freeze: bool,
    /// Steps at once, without a freeze, even where the server's `[freeze] by_default` would
    /// freeze (a maintenance drain).
    #[arg(long, conflicts_with = "freeze")]
    pub no_freeze: bool,
    /// The freeze's maximum window, e.g. 30s (past it the step aborts back; the server's
    /// `[freeze] window` by default).
    #[arg(long, conflicts_with = "no_freeze")]
    pub freeze_window: Option<String>,
    /// On a table of three or more zones: the zones receiving the drained zone's units, e.g.
    /// `az-a,az-b` (default: every other live zone, spread by free room).
    #[arg(long, value_delimiter = ',')]
    pub receivers: Vec<String>,
    #[arg(long)]
    pub reason: String,
    #[command(flatten)]
    pub follow: FollowArgs,
    #[command(flatten)]
    pub client: ClientArgs,
}
