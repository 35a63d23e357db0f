//! The command line: `serve` runs the coordinator, `demo` runs it with a mock Kafka and simulated
//! traffic; the other commands talk to one over HTTP.

mod args;
mod client;
mod log;

pub use args::{ClientArgs, DrainStartArgs, FollowArgs};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Overrides, token_sha256_hex};

#[derive(Parser, Debug)]
#[command(
    name = "tidegate",
    version,
    about = "Blue-green, same-city active-active traffic coordinator"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Commands,
}

#[derive(Subcommand, Debug)]
pub enum Commands {
    /// Run the coordinator (embedded defaults unless --config is given).
    Serve(ServeArgs),
    /// Run an edge: a local evaluator for gateways (GET /v1/gate) and OpenFeature (OFREP), fed
    /// by the coordinators' watch stream.
    Edge(EdgeArgs),
    /// Run a self-contained MQ lanes demo: coordinator, mock Kafka, producers and consumers.
    Demo(DemoArgs),
    /// Ask the server which colour a user belongs to.
    Tag {
        user_id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Read or move the blue/green dial.
    Dial {
        #[command(subcommand)]
        action: DialAction,
    },
    /// Pin a user to a colour, whatever their unit.
    Pin {
        user_id: String,
        color: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove a user's pin.
    Unpin {
        user_id: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the routing table, readiness and recent changes.
    Status {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the coordinator replicas: which one answers, each one's zone, version, lag and
    /// whether it is live or lost.
    Cluster {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the audit log, newest first.
    Audit {
        /// Records per page (1 to 10 000).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only records below this version (the `next_before` of the previous page).
        #[arg(long)]
        before: Option<u64>,
        /// Every page back to version 1, one line per record (`--json`: one JSON object a line).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Unit sets on N zones and domains: `units move UNITS ZONE` gives units to a zone (one
    /// version; `--domain`, `--dry-run`), `units evacuate ZONE` empties a zone into the others
    /// by their free capacity, in every domain.
    Units {
        #[command(subcommand)]
        action: UnitsCommand,
    },
    /// Release channels: `channels put NAME --service S --zone Z --percent P` routes a sticky
    /// share of S's users to Z ahead of the global map; `channels list`, `channels delete NAME`.
    Channels {
        #[command(subcommand)]
        action: ChannelsCommand,
    },
    /// Drain a zone step by step, guarded by error rates, and control the running drain.
    Drain {
        #[command(subcommand)]
        action: DrainCommand,
    },
    /// Show each zone's state, share and health; `zones restore ZONE` brings a zone back.
    Zones {
        #[command(subcommand)]
        action: Option<ZoneCommand>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Automatic failover: show its caps and the automatic runs since it was armed, stop every
    /// plan trigger (`stop`), or start them again and re-arm the caps (`start`).
    Automation {
        #[command(subcommand)]
        action: Option<AutomationCommand>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Prepared plans: list, show or dry-run them (a dry run changes nothing), and run, drill,
    /// report and control them (these change the routing, audited).
    Plans {
        #[command(subcommand)]
        action: Option<PlansCommand>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Back up or move the command log: `log export` writes a file log or a Kafka topic's
    /// history as JSON lines, `log import` appends them to a fresh, empty topic.
    Log {
        #[command(subcommand)]
        action: LogAction,
    },
    /// Drill a plan (the same as `plans drill NAME`).
    Drill {
        name: String,
        #[arg(long, default_value = "30s")]
        hold: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        follow: FollowArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Manage operator tokens.
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// The fence at the database: a write by a zone that does not own the user's unit is
    /// refused by the database itself (docs/src/partitions.md).
    Fence {
        #[command(subcommand)]
        action: FenceAction,
    },
}

#[derive(Subcommand, Debug)]
pub enum FenceAction {
    /// Print the SQL that installs the fence's schema and functions, and the trigger for TABLE.
    Sql {
        /// The table to fence (`table` or `schema.table`).
        #[arg(long)]
        table: String,
        /// Its column holding the user ID.
        #[arg(long)]
        user_column: String,
        /// The routing domain whose map owns the table's users.
        #[arg(long, default_value = "default")]
        domain: String,
    },
    /// Keep a PostgreSQL database's ownership table current: a subscriber of the coordinators
    /// that acknowledges each routing version once the database holds it.
    Postgres {
        /// The database (e.g. postgresql://tidegate@db:5432/shop); the schema is installed.
        #[arg(long, env = "TIDEGATE_FENCE_DATABASE", hide_env_values = true)]
        database: String,
        /// Coordinator URL(s), comma-separated; tried in turn.
        #[arg(long = "coordinator", env = "TIDEGATE_URL")]
        coordinators: String,
        /// A service token: subscribers that acknowledge must be writers.
        #[arg(long, env = "TIDEGATE_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Subscriber ID (default: fence-<hostname>).
        #[arg(long)]
        id: Option<String>,
        /// The zone this fence runs in (shown in convergence).
        #[arg(long, default_value = "unknown")]
        zone: String,
        /// The routing domain whose map the fenced tables follow.
        #[arg(long, default_value = "default")]
        domain: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// TOML configuration file (see config/tidegate.toml).
    #[arg(long, env = "TIDEGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (wins over file and environment).
    #[arg(long)]
    pub address: Option<String>,
    /// Port to listen on; 0 picks a free one (the real port is printed).
    #[arg(long)]
    pub port: Option<u16>,
    /// Directory holding the command log.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct EdgeArgs {
    /// TOML configuration file; the edge reads its `[edge]` section (and fallback, tokens).
    #[arg(long, env = "TIDEGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Coordinator URL(s), comma-separated or repeated; tried in turn (wins over edge.coordinators).
    #[arg(long = "coordinator", value_delimiter = ',')]
    pub coordinators: Vec<String>,
    /// Address to listen on (wins over edge.address).
    #[arg(long)]
    pub address: Option<String>,
    /// Port to listen on; 0 picks a free one (the real port is printed).
    #[arg(long)]
    pub port: Option<u16>,
    /// PEM file of the CA to trust for https:// coordinators instead of the system's roots
    /// (default: `[client] ca_file` in --config).
    #[arg(long, env = "TIDEGATE_CA_FILE")]
    pub ca_file: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// HTTP port (default 8080, or a free port when 8080 is taken).
    #[arg(long)]
    pub port: Option<u16>,
    /// Messages the simulated producers send per second.
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Directory for the demo's command log (default: a fresh temporary directory).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Seconds between status lines (0: none).
    #[arg(long, default_value_t = 5)]
    pub status_every: u64,
}

#[derive(Subcommand, Debug)]
pub enum UnitsCommand {
    /// Give UNITS (`25-49`, `25-49,60`) to ZONE (a name or a lane), with a capacity verdict per
    /// receiving zone; `--dry-run` shows it without changing anything.
    Move {
        units: String,
        zone: String,
        #[arg(long)]
        reason: String,
        /// The routing domain (default: `default`).
        #[arg(long)]
        domain: Option<String>,
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        freeze: FreezeArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Move every unit of ZONE to the other live zones, split by their free capacity.
    Evacuate {
        zone: String,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum ChannelsCommand {
    /// Every release channel, one line each.
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Create or replace channel NAME: the users it selects (`--percent`, or `--units`, plus any
    /// `--user`) of the `--service`s go to `--zone`, ahead of the global map.
    Put {
        name: String,
        /// A service whose calls the channel routes (repeat for several).
        #[arg(long = "service", required = true)]
        services: Vec<String>,
        /// The receiving zone (a name or a lane).
        #[arg(long)]
        zone: String,
        /// A sticky share of the users, in percent.
        #[arg(long, conflicts_with = "units")]
        percent: Option<f64>,
        /// Explicit units (`0-9,17`).
        #[arg(long)]
        units: Option<String>,
        /// A user the channel selects besides its units (repeat for several).
        #[arg(long = "user")]
        users: Vec<String>,
        /// What the channel's users get while it is suspended: `global` or `reject`.
        #[arg(long)]
        fallback: Option<String>,
        /// Remove the channel after this long (`2h`, `30m`).
        #[arg(long)]
        expires_in: Option<String>,
        /// The routing domain (default: `default`).
        #[arg(long)]
        domain: Option<String>,
        #[arg(long)]
        reason: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        freeze: FreezeArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove channel NAME: its users go back to the global map.
    Delete {
        name: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        freeze: FreezeArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// A loss-less channel change: freeze, switch, unfreeze.
#[derive(clap::Args, Debug)]
pub struct FreezeArgs {
    /// Loss-less: freeze the writes the change moves, switch once every live subscriber has the
    /// freeze, unfreeze once every one has the switch; waits for the change to end.
    #[arg(long)]
    pub freeze: bool,
    /// Move at once, without a freeze, even where the server's `[freeze] by_default` would
    /// freeze.
    #[arg(long, conflicts_with = "freeze")]
    pub no_freeze: bool,
    /// The freeze's maximum window (the server's `[freeze] window`, 30s, by default; at most
    /// `10m`).
    #[arg(long, conflicts_with = "no_freeze")]
    pub freeze_window: Option<String>,
}

impl FreezeArgs {
    /// Adds `freeze` and `freeze_window` to a request body (neither: the server's default).
    fn add_to(&self, body: &mut serde_json::Value) {
        if self.freeze {
            body["freeze"] = serde_json::json!(true);
        }
        if self.no_freeze {
            body["freeze"] = serde_json::json!(false);
        }
        if let Some(w) = &self.freeze_window {
            body["freeze_window"] = serde_json::json!(w);
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum DialAction {
    /// Show the current split.
    Get {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Move the dial to PERCENT blue.
    Set {
        percent: f64,
        #[arg(long)]
        reason: String,
        /// Version you expect the table to be at; by default the version just read.
        #[arg(long)]
        expected_version: Option<u64>,
        /// Move even when the receiving zone's capacity says no (recorded in the audit).
        #[arg(long)]
        force: bool,
        /// The routing domain whose dial moves (default: the default domain).
        #[arg(long)]
        domain: Option<String>,
        #[command(flatten)]
        freeze: FreezeArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Subcommand, Debug)]
pub enum AutomationCommand {
    /// The stop switch, the caps and the automatic runs that count against them (the default).
    Status,
    /// Stop every plan trigger (durable and audited; operators can still run plans).
    Stop {
        #[arg(long)]
        reason: String,
    },
    /// Start the triggers again and re-arm the caps: earlier automatic runs no longer count.
    Start {
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum PlansCommand {
    /// List the stored plans (the default).
    List,
    /// Show one plan's preconditions and steps.
    Show { name: String },
    /// What running the plan now would do: users moved, projected load, duration vs RTO, holds.
    DryRun { name: String },
    /// Run the plan as one audited action (its preconditions are checked first).
    Run {
        name: String,
        #[arg(long)]
        reason: String,
        /// The plan revision you reviewed; a plan changed since is refused.
        #[arg(long)]
        revision: Option<u64>,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// Drill the plan: run it, hold for --hold, restore the starting table, report it.
    Drill {
        name: String,
        /// How long to hold the switched table before restoring, e.g. `30s`.
        #[arg(long, default_value = "30s")]
        hold: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        follow: FollowArgs,
    },
    /// A run's report (the plan's latest run by default): timeline, errors, time vs RTO.
    Report { name: String, run: Option<u64> },
    /// Pause, resume, abort or roll back a run (the plan's active run by default).
    Control {
        name: String,
        #[arg(value_parser = ["pause", "resume", "abort", "rollback"])]
        action: String,
        #[arg(long)]
        run: Option<u64>,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum DrainCommand {
    /// Start draining a zone toward a target share.
    Start(Box<DrainStartArgs>),
    /// Show the current (or a given) drain with a progress bar and the guard's readings.
    Status {
        /// Drain ID; the active drain by default.
        id: Option<u64>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Pause the drain (it stays where it is; the dial is free while paused).
    Pause(DrainControlArgs),
    /// Resume a paused drain.
    Resume(DrainControlArgs),
    /// Stop the drain for good, leaving the share where it is.
    Abort(DrainControlArgs),
    /// Step back to the share the drain started from.
    Rollback(DrainControlArgs),
    /// Report a settling drain completed without waiting for its zone's MQ backlog.
    Complete(DrainControlArgs),
}

#[derive(Args, Debug)]
pub struct DrainControlArgs {
    /// Drain ID; the active drain by default.
    pub id: Option<u64>,
    #[arg(long)]
    pub reason: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Subcommand, Debug)]
pub enum ZoneCommand {
    /// Bring a drained zone back gradually (to its share before the drain, or --to).
    Restore {
        zone: String,
        #[arg(long = "to")]
        to: Option<f64>,
        #[arg(long)]
        step: Option<f64>,
        #[arg(long)]
        every: Option<String>,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum LogAction {
    /// Write the log's whole history (genesis, then every change with its audit) to stdout as
    /// JSON lines: the file log of `data_dir`, or, when --config names a Kafka store, the decided
    /// history of its command topic (a backup that `log import` restores into a fresh topic).
    Export {
        /// The node's data directory (default: `data_dir` from --config).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Configuration file to take `data_dir` from.
        #[arg(long, env = "TIDEGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Append an export to the Kafka command topic of --config, which must be empty, and check
    /// that it replays to the file log's version and state hash.
    Import {
        /// A replica's configuration (`[store] kind = "kafka"`, the topic, the colours).
        #[arg(long, env = "TIDEGATE_CONFIG")]
        config: PathBuf,
        /// The export to read (default: stdin).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum TokenAction {
    /// Generate a token and print the `[[operators]]` entry holding its hash.
    New {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "operator", value_parser = ["operator", "viewer"])]
        role: String,
    },
}

pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Commands::Serve(args) => serve(args),
        Commands::Edge(args) => edge(args),
        Commands::Demo(args) => crate::demo::run(crate::demo::DemoOptions {
            port: args.port,
            rate: args.rate,
            data_dir: args.data_dir,
            status_every: args.status_every,
        }),
        Commands::Fence { action: FenceAction::Sql { table, user_column, domain } } => {
            crate::fence::trigger_sql(&table, &user_column, &domain).map(|trigger| {
                println!("{}\n-- The trigger of {table}:\n{trigger}", crate::fence::SCHEMA_SQL);
            })
        }
        Commands::Fence {
            action: FenceAction::Postgres { database, coordinators, token, id, zone, domain },
        } => {
            crate::logging::init(&crate::config::LogConfig { json: false, filter: "info".into() });
            crate::fence::postgres::run(crate::fence::postgres::Options {
                database,
                coordinators,
                token,
                subscriber_id: id.unwrap_or_else(|| format!("fence-{}", crate::edge::hostname())),
                zone,
                domain,
            })
        }
        Commands::Token { action: TokenAction::New { name, role } } => {
            new_token(&name, &role);
            Ok(())
        }
        Commands::Log { action: LogAction::Export { data_dir, config } } => {
            log_export(data_dir, config)
        }
        Commands::Log { action: LogAction::Import { config, file } } => {
            log::import(&config, file.as_ref())
        }
        Commands::Tag { user_id, client } => client::tag(&client, &user_id),
        Commands::Units {
            action:
                UnitsCommand::Move { units, zone, reason, domain, dry_run, force, freeze, client },
        } => {
            let mut m = serde_json::json!({"units": units, "zone": zone});
            if let Some(d) = domain {
                m["domain"] = serde_json::json!(d);
            }
            let mut body = serde_json::json!({"moves": [m], "dry_run": dry_run, "force": force});
            freeze.add_to(&mut body);
            client::units(&client, "PUT", "/v1/units", body, &reason)
        }
        Commands::Units {
            action: UnitsCommand::Evacuate { zone, reason, dry_run, force, client },
        } => {
            let body = serde_json::json!({"zone": zone, "dry_run": dry_run, "force": force});
            client::units(&client, "POST", "/v1/units/evacuate", body, &reason)
        }
        Commands::Channels { action: ChannelsCommand::List { client } } => {
            client::channels_list(&client)
        }
        Commands::Channels {
            action:
                ChannelsCommand::Put {
                    name,
                    services,
                    zone,
                    percent,
                    units,
                    users,
                    fallback,
                    expires_in,
                    domain,
                    reason,
                    dry_run,
                    force,
                    freeze,
                    client,
                },
        } => {
            let mut body = serde_json::json!({
                "services": services, "zone": zone, "users": users,
                "dry_run": dry_run, "force": force,
            });
            freeze.add_to(&mut body);
            for (key, value) in [
                ("units", units.map(serde_json::Value::from)),
                ("percent", percent.map(serde_json::Value::from)),
                ("fallback", fallback.map(serde_json::Value::from)),
                ("expires_in", expires_in.map(serde_json::Value::from)),
                ("domain", domain.map(serde_json::Value::from)),
            ] {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            client::channel_change(&client, "PUT", &name, body, &reason)
        }
        Commands::Channels { action: ChannelsCommand::Delete { name, reason, freeze, client } } => {
            let mut body = serde_json::json!({});
            freeze.add_to(&mut body);
            client::channel_change(&client, "DELETE", &name, body, &reason)
        }
        Commands::Dial { action: DialAction::Get { client } } => client::dial_get(&client),
        Commands::Dial {
            action:
                DialAction::Set { percent, reason, expected_version, force, domain, freeze, client },
        } => {
            let mut extra = serde_json::json!({});
            freeze.add_to(&mut extra);
            let ask = client::DialAsk {
                percent,
                expected_version,
                force,
                domain: domain.as_deref(),
                extra,
            };
            client::dial_set(&client, ask, &reason)
        }
        Commands::Pin { user_id, color, reason, client } => {
            client::pin(&client, &user_id, Some(&color), &reason)
        }
        Commands::Unpin { user_id, reason, client } => {
            client::pin(&client, &user_id, None, &reason)
        }
        Commands::Status { client } => client::status(&client),
        Commands::Cluster { client } => client::cluster(&client),
        Commands::Audit { limit, before, all, client } => {
            client::audit(&client, limit, before, all)
        }
        Commands::Drain { action } => match action {
            DrainCommand::Start(args) => client::drain_start(&args),
            DrainCommand::Status { id, client } => client::drain_status(&client, id),
            DrainCommand::Pause(a) => client::drain_control(&a.client, a.id, "pause", &a.reason),
            DrainCommand::Resume(a) => client::drain_control(&a.client, a.id, "resume", &a.reason),
            DrainCommand::Abort(a) => client::drain_control(&a.client, a.id, "abort", &a.reason),
            DrainCommand::Rollback(a) => {
                client::drain_control(&a.client, a.id, "rollback", &a.reason)
            }
            DrainCommand::Complete(a) => {
                client::drain_control(&a.client, a.id, "complete", &a.reason)
            }
        },
        Commands::Plans { action, client } => match action {
            None | Some(PlansCommand::List) => client::plans_list(&client),
            Some(PlansCommand::Show { name }) => client::plan_show(&client, &name),
            Some(PlansCommand::DryRun { name }) => client::plan_dry_run(&client, &name),
            Some(PlansCommand::Run { name, reason, revision, follow }) => {
                client::plan_run(&client, &name, &reason, revision, None, &follow)
            }
            Some(PlansCommand::Drill { name, hold, reason, follow }) => {
                client::plan_run(&client, &name, &reason, None, Some(&hold), &follow)
            }
            Some(PlansCommand::Report { name, run }) => client::plan_report(&client, &name, run),
            Some(PlansCommand::Control { name, action, run, reason }) => {
                client::plan_control(&client, &name, &action, run, &reason)
            }
        },
        Commands::Drill { name, hold, reason, follow, client } => {
            client::plan_run(&client, &name, &reason, None, Some(&hold), &follow)
        }
        Commands::Automation { action, client } => match action {
            None | Some(AutomationCommand::Status) => client::automation(&client, None),
            Some(AutomationCommand::Stop { reason }) => {
                client::automation(&client, Some((true, &reason)))
            }
            Some(AutomationCommand::Start { reason }) => {
                client::automation(&client, Some((false, &reason)))
            }
        },
        Commands::Zones { action: None, client } => client::zones(&client),
        Commands::Zones {
            action: Some(ZoneCommand::Restore { zone, to, step, every, reason }),
            client,
        } => client::restore(&client, &zone, to, step, every.as_deref(), &reason),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tidegate: {message}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: ServeArgs) -> Result<(), String> {
    let overrides = Overrides { address: args.address, port: args.port, data_dir: args.data_dir };
    let config = Config::load(args.config.as_deref(), &overrides).map_err(|e| e.to_string())?;
    crate::logging::init(&config.log);
    crate::server::serve(config)
}

fn log_export(data_dir: Option<PathBuf>, config: Option<PathBuf>) -> Result<(), String> {
    let explicit_dir = data_dir.is_some();
    let overrides = Overrides { data_dir, ..Overrides::default() };
    let config = Config::load(config.as_deref(), &overrides).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    if let crate::config::StoreConfig::Kafka { bootstrap, topic, .. } = &config.store {
        if explicit_dir {
            return Err("--data-dir: the configuration's store is a Kafka topic, which `log export` reads instead; leave --data-dir out".into());
        }
        let count = log::export_kafka(bootstrap, topic, &mut std::io::stdout().lock())?;
        eprintln!(
            "tidegate: exported {count} entries from Kafka topic `{topic}` in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let count = log::export(&config.data_dir, &mut std::io::stdout().lock())?;
    eprintln!(
        "tidegate: exported {count} entries from {} in {:.1} s",
        config.data_dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn edge(args: EdgeArgs) -> Result<(), String> {
    let mut config =
        Config::load(args.config.as_deref(), &Overrides::default()).map_err(|e| e.to_string())?;
    if !args.coordinators.is_empty() {
        config.edge.coordinators = args
            .coordinators
            .iter()
            .map(|url| crate::config::check_coordinator_url("--coordinator", url))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
    }
    if let Some(address) = args.address {
        config.edge.address =
            address.parse().map_err(|_| format!("--address: `{address}` is not an IP address"))?;
    }
    if let Some(port) = args.port {
        config.edge.port = port;
    }
    // As for the CLI: --ca-file (or TIDEGATE_CA_FILE) wins over `[client] ca_file`.
    if args.ca_file.is_some() {
        config.client_ca_file = args.ca_file;
    }
    crate::logging::init(&config.log);
    crate::edge::run(config)
}

fn new_token(name: &str, role: &str) {
    let bytes: [u8; 32] = rand::random();
    let token = format!("tg_{}", hex::encode(bytes));
    println!("# Token for {name} (shown once; keep it in your secret store):");
    println!("#   {token}");
    println!("[[operators]]");
    println!("name = {name:?}");
    println!("token_sha256 = \"{}\"", token_sha256_hex(&token));
    println!("role = \"{role}\"");
}
