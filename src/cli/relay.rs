//! `airlock relay`: runs the HTTP edge relay until SIGINT or SIGTERM.

use super::{Ctx, Exit};
use crate::core::config;
use crate::core::outbox;
use crate::relay::{self, RelayConfig};
use clap::Args;
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the relay listens when neither `--listen` nor `relay.listen` says.
const DEFAULT_LISTEN: &str = "127.0.0.1:18080";

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to listen on (port 0 picks a free port; the chosen address is printed). Default:
    /// `relay.listen` in the configuration file, else 127.0.0.1:18080.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Upstream API base URL. Default: $STATEHUB_UPSTREAM_URL, else $API_BASE, else
    /// http://127.0.0.1:8000.
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Outbox file. Default: $STATEHUB_OUTBOX_PATH, else ~/.statehub/edge-outbox.sqlite3.
    #[arg(long, value_name = "PATH")]
    pub outbox: Option<PathBuf>,
    /// Upstream request timeout in milliseconds (a timeout counts as an outage).
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub upstream_timeout_ms: u64,
    #[command(flatten)]
    pub connections: super::connections::ConnectionArgs,
}

/// Installs a stderr logger (`RUST_LOG`, default `info`) once; every line, whichever crate logs
/// it, is written with its control characters escaped ([`crate::log_lines`]).
pub fn init_logging() {
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The HTTP libraries' own debug and trace lines may carry request URIs with unscrubbed query
    // strings; the relay logs every request itself, scrubbed.
    for quiet in [
        "hyper=info",
        "hyper_util=info",
        "reqwest=info",
        "h2=info",
        "axum=info",
        "tower=info",
    ] {
        if let Ok(d) = quiet.parse() {
            filter = filter.add_directive(d);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::log_lines::EscapedLines(std::io::stderr))
        .with_ansi(false)
        .try_init();
}

/// Sets up logging, starts the async runtime, binds `listen` and runs `service` on the listener
/// until it returns (`what` names the service when the address is taken).
pub(super) fn run_listening<F, Fut>(listen: SocketAddr, what: &str, service: F) -> Result<()>
where
    F: FnOnce(tokio::net::TcpListener) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    init_logging();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    let outcome = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .wrap_err_with(|| format!("cannot listen on {listen} (is another {what} running?)"))?;
        service(listener).await
    });
    crate::http_server::finish_runtime(rt);
    outcome
}

/// The relay's listen address: `--listen`, else `relay.listen` of the configuration file, else
/// 127.0.0.1:18080 (the key has no environment variable).
fn listen_address(ctx: &Ctx, a: &RelayArgs) -> Result<SocketAddr> {
    let mut flags = Vec::new();
    if let Some(l) = &a.listen {
        flags.push((config::RELAY_LISTEN, l.clone(), "--listen"));
    }
    let cfg = ctx.load_config(flags)?;
    let text = cfg.text(config::RELAY_LISTEN).unwrap_or(DEFAULT_LISTEN);
    text.parse().map_err(|e| {
        eyre!(
            "{} {}: {e}; expected HOST:PORT such as {DEFAULT_LISTEN}",
            if a.listen.is_some() {
                "--listen"
            } else {
                config::RELAY_LISTEN
            },
            crate::text::visible(text)
        )
    })
}

pub fn run(ctx: &Ctx, a: RelayArgs) -> Result<Exit> {
    let listen = listen_address(ctx, &a)?;
    let upstream = outbox::upstream_url(a.upstream.as_deref());
    outbox::replay::parse_upstream(&upstream)?;
    let outbox_path = outbox::outbox_path(a.outbox.as_deref());
    if a.upstream_timeout_ms == 0 {
        return Err(eyre!("--upstream-timeout-ms must be at least 1"));
    }
    let mut config = RelayConfig::new(upstream.clone(), outbox_path.clone());
    config.upstream_timeout = Duration::from_millis(a.upstream_timeout_ms);
    config.limits = a.connections.limits()?;
    let largest = crate::relay::MAX_FORWARD_BODY as u64;
    if let Some(why) = config
        .limits
        .body_memory_too_small(largest, "the relay's bodies")
    {
        return Err(eyre!(why));
    }
    config.connect_timeout = config.upstream_timeout.min(Duration::from_secs(2));
    run_listening(listen, "relay", |listener| async move {
        let bound = listener.local_addr()?;
        // The outbox must open before "listening" is announced: a bad --outbox fails here.
        let check = outbox_path.clone();
        tokio::task::spawn_blocking(move || outbox::Outbox::open(&check).map(drop))
            .await
            .wrap_err("opening the outbox")??;
        println!(
            "airlock relay listening on http://{bound} (upstream {}, outbox {})",
            crate::text::visible(&upstream),
            crate::text::visible_path(&outbox_path)
        );
        let _ = std::io::stdout().flush();
        relay::serve(
            listener,
            config,
            crate::http_server::shutdown_signal("airlock relay"),
        )
        .await?;
        Ok(())
    })?;
    Ok(Exit::Ok)
}
