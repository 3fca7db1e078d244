//! The command line: argument parsing and dispatch. Each command group lives in its own file and
//! only translates arguments into engine calls and results into text or JSON.

mod args;
pub mod audit;
pub mod chain;
pub mod config;
pub mod connections;
pub mod console;
pub mod demo;
pub mod dev;
pub mod generate;
pub mod import;
pub mod inbox;
pub mod jobs;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod notify;
pub mod outbox;
pub mod output;
pub mod portable;
pub mod push;
pub mod relay;
pub mod serve;
pub mod sign;
pub mod triage;
pub mod wal;
pub mod wal_drill;

pub use args::parse_args;
use clap::{Parser, Subcommand};
use color_eyre::Result;
use std::path::PathBuf;

/// Process exit statuses shared by every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// The command ran but its check failed (verification findings, refused import, ...).
    Failed = 1,
    /// Usage, input or I/O error.
    Usage = 2,
}

#[derive(Debug, Parser)]
#[command(
    name = "airlock",
    version,
    about = "Operations console for air-gapped job synchronisation"
)]
pub struct Cli {
    /// The store: a SQLite file path, or a postgres:// (postgresql://) URL for a PostgreSQL store
    /// shared by several machines. Default: $AIRLOCK_DB, else $XDG_DATA_HOME/airlock/airlock.db.
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// The configuration file. Default: $AIRLOCK_CONFIG, else etc/airlock.yaml beside the store.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Node job logs and sync bundles: enqueue, export, list, verify.
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// Tenant scheduler chains: show, verify, snapshot, prove, verify-proof, append, tenants.
    #[command(subcommand)]
    Chain(chain::ChainCommand),
    /// The interactive operations console (terminal UI) over a directory of bundles.
    Console(console::ConsoleArgs),
    /// Build a demo workspace with real engine-made data and open the console on it.
    Demo(demo::DemoArgs),
    /// Signing keys and the trust store: generate, id, list, default, trust add/list/remove.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Export-ready notifications: run deliveries, list, show, retry, export the DLQ, check an event.
    #[command(subcommand)]
    Notify(notify::NotifyCommand),
    /// The edge relay's outbox: status, list, replay, export, retry, cancel.
    Outbox(outbox::OutboxArgs),
    /// Run the edge relay: forward to the upstream, queue writes durably while it is down.
    Relay(relay::RelayArgs),
    /// Node write-ahead logs: inspect, recover, compact, append, advance, dump.
    #[command(subcommand)]
    Wal(wal::WalCommand),
    /// The job ledger over node WALs: fold, append, checkpoint, compact, diff, sync, conflicts.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// The store's hash-chained audit log of operator changes: list, verify.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// The drop-directory inbox (`console --inbox DIR`) without a console: scan.
    #[command(subcommand)]
    Inbox(inbox::InboxCommand),
    /// Triage reports written by the console (`E`): verify.
    #[command(subcommand)]
    Triage(triage::TriageCommand),
    /// Developer tools: State Hub stand-in, load generator, relay benchmark.
    #[command(subcommand)]
    Dev(dev::DevCommand),
    /// The configuration: show the effective values and where each came from.
    #[command(subcommand)]
    Config(config::ConfigCommand),
    /// The persisted metrics in the Prometheus text format (stdout, or --textfile DIR).
    Metrics(metrics::MetricsArgs),
    /// Run the service: chain-verify API, bundle push transport, /metrics, background jobs.
    Serve(serve::ServeArgs),
}

impl Command {
    /// Whether the command is a one-shot that prints and exits (not a server or the console).
    pub fn writes_to_a_pipe(&self) -> bool {
        !matches!(
            self,
            Command::Relay(_)
                | Command::Dev(_)
                | Command::Console(_)
                | Command::Demo(_)
                | Command::Serve(_)
        )
    }
}

/// Global options every command may need.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub db: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

impl Ctx {
    /// The clock-skew tolerance: `--max-clock-skew-ms`, else the configured
    /// `scheduler.hlc.maxClockSkew` (environment, then file), else the default (5 s).
    pub fn max_clock_skew(&self, a: &SkewArgs) -> Result<std::time::Duration> {
        if let Some(ms) = a.max_clock_skew_ms {
            return Ok(std::time::Duration::from_millis(ms));
        }
        Ok(self
            .load_config(Vec::new())?
            .duration(crate::core::config::MAX_CLOCK_SKEW)
            .unwrap_or(crate::core::hlc::DEFAULT_MAX_CLOCK_SKEW))
    }

    pub fn db_path(&self) -> PathBuf {
        crate::core::paths::db_path(self.db.as_deref())
    }

    /// Where the store is: a SQLite file or a PostgreSQL URL (other URL schemes are refused).
    pub fn db_location(&self) -> Result<crate::core::store::any::StoreLocation> {
        Ok(crate::core::store::any::StoreLocation::parse(
            &self.db_path(),
        )?)
    }

    /// The store of the scheduler chain and node logs: SQLite or PostgreSQL.
    /// The store, which must exist already: for every command that reads it or changes what is
    /// in it (a mistyped --db is an error, not a new empty store).
    pub fn open_existing_store(&self) -> Result<crate::core::store::any::AnyStore> {
        Ok(crate::core::store::any::AnyStore::open_existing(
            &self.db_location()?,
        )?)
    }

    /// The store, which must exist already, for a command that only reads it: one this user
    /// cannot write (a copy on a read-only medium) is opened read-only instead of refused.
    pub fn open_store_for_reading(&self) -> Result<crate::core::store::any::AnyStore> {
        Ok(crate::core::store::any::AnyStore::open_for_reading(
            &self.db_location()?,
        )?)
    }

    /// The store for reading (one this user cannot write is opened read-only), or an empty one in
    /// memory when its SQLite file is not there (nothing created): for commands that only plan
    /// (`jobs import --dry-run`).
    pub fn open_store_or_empty(&self) -> Result<crate::core::store::any::AnyStore> {
        Ok(crate::core::store::any::AnyStore::open_or_empty(
            &self.db_location()?,
        )?)
    }

    /// The store, made when missing: for the commands that create one (enqueue, import).
    pub fn open_any_store(&self) -> Result<crate::core::store::any::AnyStore> {
        Ok(crate::core::store::any::AnyStore::open(
            &self.db_location()?,
        )?)
    }

    /// [`Ctx::load_config`] with `trust.requireSignature` as verify and import apply it: the
    /// environment's `AIRLOCK_REQUIRE_SIGNATURE` and the trust store's policy folded in
    /// ([`crate::core::config::Config::fold_signature_policy`]).
    pub fn load_config_with_policy(
        &self,
        flags: Vec<(&'static str, String, &'static str)>,
    ) -> Result<crate::core::config::Config> {
        let mut config = self.load_config(flags)?;
        let store = crate::core::trust::TrustStore::open_default()?;
        let env = std::env::var(crate::core::trust::policy::REQUIRE_SIGNATURE_ENV).ok();
        config.fold_signature_policy(
            env.as_deref(),
            store
                .require_signature()
                .then(|| store.path().to_path_buf()),
        )?;
        Ok(config)
    }

    /// The effective configuration: `flags` (key, value, flag name) over the environment, the file
    /// and the defaults; `--db` counts as the `store.path` flag.
    pub fn load_config(
        &self,
        mut flags: Vec<(&'static str, String, &'static str)>,
    ) -> Result<crate::core::config::Config> {
        use crate::core::config::{self, Config, ConfigInputs};
        if let Some(db) = &self.db {
            flags.push((config::STORE_PATH, db.display().to_string(), "--db"));
        }
        let inputs = ConfigInputs {
            file: self.config.clone(),
            flags,
            env: &config::process_env,
        };
        Ok(Config::load(&inputs)?)
    }
}

/// Makes the configuration file's values reach the one-shot commands (SPEC 13: flag, environment,
/// file, default): every key the file sets that has an environment variable, and no value in the
/// environment, is put into this process's environment, where the commands' flags already look
/// (clap `env`, `$AIRLOCK_DB`, `$AIRLOCK_NODE_ID`, ...); flags still win. `trust.requireSignature:
/// true` sets `$AIRLOCK_REQUIRE_SIGNATURE`. Returns whether anything was set (then parse the
/// arguments again). `serve` and `config show` read the file themselves and are left alone.
/// Call before any thread starts.
pub fn apply_config_environment(cli: &Cli) -> Result<bool> {
    use crate::core::config::{Source, REQUIRE_SIGNATURE};
    if matches!(cli.command, Command::Serve(_) | Command::Config(_)) {
        return Ok(false);
    }
    let ctx = Ctx {
        db: cli.db.clone(),
        config: cli.config.clone(),
    };
    let cfg = ctx.load_config(Vec::new())?;
    let mut set = false;
    for s in cfg.settings() {
        if !matches!(s.source, Source::File { .. }) {
            continue;
        }
        let (var, value) = match (s.spec.env, s.spec.key, &s.value) {
            (Some(var), _, Some(v)) => (var, v.display()),
            (None, REQUIRE_SIGNATURE, Some(crate::core::config::Value::Bool(true))) => (
                crate::core::trust::policy::REQUIRE_SIGNATURE_ENV,
                "1".into(),
            ),
            _ => continue,
        };
        if std::env::var_os(var).is_none_or(|v| v.is_empty()) {
            std::env::set_var(var, value);
            set = true;
        }
    }
    Ok(set)
}

pub fn run(cli: Cli) -> Result<Exit> {
    let ctx = Ctx {
        db: cli.db,
        config: cli.config,
    };
    match cli.command {
        Command::Jobs(cmd) => jobs::run(&ctx, cmd),
        Command::Chain(cmd) => chain::run(&ctx, cmd),
        Command::Console(a) => console::run(&ctx, a),
        Command::Demo(a) => demo::run(&ctx, a),
        Command::Keys(cmd) => keys::run(&ctx, cmd),
        Command::Notify(cmd) => notify::run(&ctx, cmd),
        Command::Outbox(a) => outbox::run(a),
        Command::Audit(cmd) => audit::run(&ctx, cmd),
        Command::Triage(cmd) => triage::run(cmd),
        Command::Inbox(cmd) => inbox::run(cmd),
        Command::Relay(a) => relay::run(&ctx, a),
        Command::Wal(cmd) => wal::run(&ctx, cmd),
        Command::Ledger(cmd) => ledger::run(&ctx, cmd),
        Command::Dev(cmd) => dev::run(cmd),
        Command::Config(cmd) => config::run(&ctx, cmd),
        Command::Metrics(a) => metrics::run(&ctx, a),
        Command::Serve(a) => serve::run(&ctx, a),
    }
}

/// The clock-skew tolerance of the bundle checks a command makes (`jobs verify`, `jobs import`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SkewArgs {
    /// Maximum tolerated clock skew in milliseconds: an entry further ahead of this machine's
    /// clock is a `clock-skew` finding. Default: `scheduler.hlc.maxClockSkew` from
    /// $AIRLOCK_MAX_CLOCK_SKEW or the configuration file (hh:mm:ss), else 5 s.
    #[arg(long, value_name = "MS")]
    pub max_clock_skew_ms: Option<u64>,
}

/// Signature options shared by every command that checks signatures.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// Trust this public key (SPKI PEM) for this run, in addition to the trust store; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB.pem")]
    pub trusted_keys: Vec<PathBuf>,
    /// Require a signature by a trusted key (an unsigned input fails with `signature-missing`).
    /// Also required when $AIRLOCK_REQUIRE_SIGNATURE is set to 1 or the trust store's policy says
    /// so (`airlock keys policy --require-signature on`); `--force` never waives it.
    #[arg(long)]
    pub require_signature: bool,
}

impl TrustArgs {
    /// Whether this run requires a signature: the flag, the environment or the trust store's policy.
    pub fn signature_required(&self) -> Result<bool> {
        Ok(crate::core::trust::policy::effective_policy(self.require_signature)?.require_signature)
    }

    /// The trust store plus this run's `--trusted-key` files.
    pub fn trust(&self) -> Result<crate::core::trust::TrustSet> {
        trust_for_run(&self.trusted_keys)
    }
}

/// The trusted keys for one run: the trust store plus `--trusted-key` files.
pub fn trust_for_run(extra: &[PathBuf]) -> Result<crate::core::trust::TrustSet> {
    let mut trust = crate::core::trust::TrustSet::load_default()?;
    for path in extra {
        trust.add_key_file(path)?;
    }
    Ok(trust)
}
