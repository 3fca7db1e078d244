//! `airlock serve`: the long-running service until SIGINT or SIGTERM. Translates the configuration
//! (flags over environment over file over defaults) into [`crate::serve::ServeOptions`].

use super::{Ctx, Exit};
use crate::core::config::{self, Config};
use crate::http_server;
use crate::serve::{self, ServeOptions};
use clap::Args;
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8443; port 0 picks a free port, printed at start).
    /// Anything but loopback needs --token-file.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// File whose first line is the bearer token clients must send (needed to accept pushes).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub trust: super::TrustArgs,
    #[command(flatten)]
    pub connections: super::connections::ConnectionArgs,
}

pub fn run(ctx: &Ctx, a: ServeArgs) -> Result<Exit> {
    let mut flags = Vec::new();
    if let Some(l) = &a.listen {
        flags.push((config::SERVE_LISTEN, l.clone(), "--listen"));
    }
    if let Some(t) = &a.token_file {
        flags.push((
            config::SERVE_TOKEN_FILE,
            t.display().to_string(),
            "--token-file",
        ));
    }
    if a.trust.require_signature {
        flags.push((
            config::REQUIRE_SIGNATURE,
            "true".into(),
            "--require-signature",
        ));
    }
    // The signature policy of every other command holds here too: the environment's and the
    // trust store's, besides --require-signature and the file's trust.requireSignature.
    let cfg = ctx.load_config_with_policy(flags)?;
    let listen: SocketAddr = cfg
        .text(config::SERVE_LISTEN)
        .unwrap_or("127.0.0.1:8443")
        .parse()
        .wrap_err("serve.listen")?;
    let options = options_from(&cfg, &a)?;
    if options.token.is_none() && !serve::is_loopback(&listen) {
        return Err(eyre!(
            "serve listens on {listen}, which is not loopback: give --token-file FILE (a bearer token clients must send), or listen on 127.0.0.1"
        ));
    }
    super::relay::init_logging();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    let outcome = rt.block_on(serve_until_stopped(listen, options));
    // Everything serve started has ended by now; store work still running on a blocking thread
    // (one that never returns: a hung PostgreSQL call, a store still opening when the signal came)
    // must not hold the exit.
    http_server::finish_runtime(rt);
    outcome?;
    Ok(Exit::Ok)
}

/// Binds, opens the store, says it listens and serves until the first SIGINT or SIGTERM. A signal
/// before it listens (the store still opening) or before it is ready (the start-up verification
/// still running) stops it at once, with a line on stderr saying so; both exit 0 like any
/// requested stop.
async fn serve_until_stopped(listen: SocketAddr, options: ServeOptions) -> Result<()> {
    let signals = http_server::watch_signals("airlock serve")
        .wrap_err("installing the SIGINT and SIGTERM handlers")?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .wrap_err_with(|| format!("cannot listen on {listen} (is another serve running?)"))?;
    let bound = listener.local_addr()?;
    // The store opens before serve says it listens: one that cannot open (damaged, locked,
    // read-only) fails the start (exit 2) without a "listening" line a supervisor would trust.
    let state = tokio::select! {
        opened = serve::open(options) => opened?,
        name = http_server::first_signal(signals.clone()) => {
            eprintln!("airlock serve: stopped by {name} before listening (the store was still opening)");
            return Ok(());
        }
    };
    println!(
        "airlock serve listening on http://{bound} (store {})",
        crate::text::visible(&crate::core::store::any::display_db(
            &state.options.store_path
        ))
    );
    let _ = std::io::stdout().flush();
    let first = http_server::first_signal(signals.clone());
    let stopped = serve::serve(listener, state, async move {
        first.await;
    })
    .await?;
    if !stopped.became_ready {
        let name = http_server::first_signal(signals).await;
        eprintln!(
            "airlock serve: stopped by {name} before it was ready: the start-up chain verification was cut short (the chains were not all verified)"
        );
    }
    Ok(())
}

fn options_from(cfg: &Config, a: &ServeArgs) -> Result<ServeOptions> {
    let store_path = PathBuf::from(cfg.text(config::STORE_PATH).unwrap_or("airlock.db"));
    let token = match cfg.text(config::SERVE_TOKEN_FILE) {
        Some(f) => Some(serve::push::read_token_file(&PathBuf::from(f)).map_err(|e| eyre!(e))?),
        None => None,
    };
    let sign = cfg.flag(config::SIGN_SNAPSHOTS).unwrap_or(false);
    let snapshot_key = if sign {
        Some(snapshot_key(cfg.text(config::KEY_ID))?)
    } else {
        None
    };
    // Uploads spool beside a SQLite store; with a PostgreSQL store, in `./spool`.
    let spool_dir = match crate::core::store::any::StoreLocation::parse(&store_path)? {
        crate::core::store::any::StoreLocation::Sqlite(p) => p
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
            .join("spool"),
        crate::core::store::any::StoreLocation::Postgres(_) => PathBuf::from("spool"),
    };
    let duration = |k: &str, d: u64| cfg.duration(k).unwrap_or(std::time::Duration::from_secs(d));
    let notify = crate::core::notify::NotifySettings::from_config(cfg).load()?;
    let limits = a.connections.limits()?;
    let largest = serve::JSON_BODY_LIMIT;
    if let Some(why) = limits.body_memory_too_small(largest, "serve's JSON bodies") {
        return Err(eyre!(why));
    }
    Ok(ServeOptions {
        node_id: cfg.text(config::NODE_ID).unwrap_or("localhost").to_string(),
        max_clock_skew: duration(config::MAX_CLOCK_SKEW, 5),
        hlc_enabled: cfg.flag(config::HLC_ENABLED).unwrap_or(true),
        persistence_interval: duration(config::PERSISTENCE_INTERVAL, 60),
        chain_enabled: cfg.flag(config::CHAIN_ENABLED).unwrap_or(true),
        batch_size: cfg.number(config::BATCH_SIZE).unwrap_or(1000),
        batch_interval: duration(config::BATCH_INTERVAL, 300),
        snapshot_key,
        verify_interval: duration(config::SERVE_VERIFY_INTERVAL, 3600),
        token,
        max_bundle_bytes: cfg.number(config::SERVE_MAX_BUNDLE).unwrap_or(256 << 20),
        require_signature: cfg.flag(config::REQUIRE_SIGNATURE).unwrap_or(false),
        trust: a.trust.trust()?,
        spool_dir,
        store_path,
        notify: (!notify.is_empty()).then_some(notify),
        notify_poll: duration(config::NOTIFY_POLL, 5),
        ledger: ledger_options(cfg)?,
        limits,
    })
}

/// `ledger.dir`, `ledger.durability`, `ledger.postgresUrl`.
fn ledger_options(cfg: &Config) -> Result<Option<serve::ledger_host::LedgerOptions>> {
    use crate::core::ledger::durability::Durability;
    let Some(dir) = cfg.text(config::LEDGER_DIR) else {
        return Ok(None);
    };
    let durability = Durability::parse(cfg.text(config::LEDGER_DURABILITY).unwrap_or("local"))
        .ok_or_else(|| eyre!("ledger.durability: give local, regional or global"))?;
    let postgres = cfg.text(config::LEDGER_POSTGRES).map(str::to_string);
    if durability != Durability::Local && postgres.is_none() {
        return Err(eyre!(
            "ledger.durability is {} but ledger.postgresUrl is not set: give the PostgreSQL URL that confirms it (docs/postgres.md)",
            durability.name()
        ));
    }
    Ok(Some(serve::ledger_host::LedgerOptions {
        dir: PathBuf::from(dir),
        durability,
        postgres,
    }))
}

/// The snapshot signing key: `keyId` (a key name or key id in the key directory), else the default
/// signing key.
fn snapshot_key(key_id: Option<&str>) -> Result<ed25519_dalek::SigningKey> {
    use crate::core::trust;
    let Some(wanted) = key_id else {
        return Ok(super::sign::load_key_for_signing(None)?.key);
    };
    let dir = trust::default_keys_dir();
    let keys = trust::local_keys(&dir)?;
    let found = keys
        .iter()
        .find(|k| k.name == wanted || k.key_id.as_deref() == Some(wanted))
        .and_then(|k| k.private_path.clone())
        .ok_or_else(|| {
            eyre!(
                "scheduler.chain.keyId {}: no private key of that name or id in {} (see `airlock keys list`)",
                crate::text::visible(wanted),
                crate::core::text::visible_path(&dir)
            )
        })?;
    Ok(super::sign::load_key_for_signing(Some(&found))?.key)
}
