//! The command line: argument parsing and dispatch. Each command group lives in its own file and
//! only translates arguments into engine calls and results into text or JSON.

pub mod chain;
pub mod console;
pub mod demo;
pub mod dev;
pub mod generate;
pub mod import;
pub mod jobs;
pub mod keys;
pub mod outbox;
pub mod output;
pub mod relay;
pub mod sign;

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
    /// The edge relay's outbox: status, list, replay, export, retry, cancel.
    Outbox(outbox::OutboxArgs),
    /// Run the edge relay: forward to the upstream, queue writes durably while it is down.
    Relay(relay::RelayArgs),
    /// Developer tools: State Hub stand-in, load generator, relay benchmark.
    #[command(subcommand)]
    Dev(dev::DevCommand),
}

impl Command {
    /// Whether the command is a one-shot that prints and exits (not a server or the console).
    pub fn writes_to_a_pipe(&self) -> bool {
        !matches!(
            self,
            Command::Relay(_) | Command::Dev(_) | Command::Console(_) | Command::Demo(_)
        )
    }
}

/// Global options every command may need.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub db: Option<PathBuf>,
}

impl Ctx {
    pub fn db_path(&self) -> PathBuf {
        crate::core::paths::db_path(self.db.as_deref())
    }

    /// Where the store is: a SQLite file or a PostgreSQL URL (other URL schemes are refused).
    pub fn db_location(&self) -> Result<crate::core::store::any::StoreLocation> {
        Ok(crate::core::store::any::StoreLocation::parse(
            &self.db_path(),
        )?)
    }

    pub fn open_store(&self) -> Result<crate::core::store::any::AnyStore> {
        Ok(crate::core::store::any::AnyStore::open(
            &self.db_location()?,
        )?)
    }
}

pub fn run(cli: Cli) -> Result<Exit> {
    let ctx = Ctx { db: cli.db };
    match cli.command {
        Command::Jobs(cmd) => jobs::run(&ctx, cmd),
        Command::Chain(cmd) => chain::run(&ctx, cmd),
        Command::Console(a) => console::run(&ctx, a),
        Command::Demo(a) => demo::run(&ctx, a),
        Command::Keys(cmd) => keys::run(&ctx, cmd),
        Command::Outbox(a) => outbox::run(a),
        Command::Relay(a) => relay::run(a),
        Command::Dev(cmd) => dev::run(cmd),
    }
}

/// Signature options shared by every command that checks signatures.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// Trust this public key (SPKI PEM) for this run, in addition to the trust store; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB.pem")]
    pub trusted_keys: Vec<PathBuf>,
    /// Require a signature by a trusted key (an unsigned input fails with `signature-missing`).
    #[arg(long)]
    pub require_signature: bool,
}

impl TrustArgs {
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
