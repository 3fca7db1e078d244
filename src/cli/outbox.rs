//! `airlock outbox ...`: inspect, replay, export, retry and cancel the edge relay's outbox. Every
//! command is a thin call into `core::outbox`.

use super::output::{print_json, safe};
use super::Exit;
use crate::core::outbox::store::ReplayLockState;
use crate::core::outbox::{self, EnvelopeStatus, Outbox, OutboxError, ReplayOptions};
use crate::core::text::visible_path;
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct OutboxArgs {
    /// Outbox file. Default: $STATEHUB_OUTBOX_PATH, else ~/.statehub/edge-outbox.sqlite3.
    #[arg(long, global = true, value_name = "PATH")]
    pub outbox: Option<PathBuf>,
    #[command(subcommand)]
    pub command: OutboxCommand,
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// Counts by status, what is due, and whether a replay is running.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Envelopes in creation order.
    List {
        /// Only this status: queued, delivered, conflict, failed, cancelled.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        /// At most this many (1 or more).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// One envelope in full (non-secret fields only).
    Show {
        /// Envelope id (or a unique prefix of at least 4 characters).
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Send due queued envelopes upstream until none remains.
    Replay {
        /// Upstream base URL. Default: $STATEHUB_UPSTREAM_URL, else $API_BASE, else
        /// http://127.0.0.1:8000.
        #[arg(long, value_name = "U")]
        upstream_url: Option<String>,
        /// Per-request timeout in milliseconds.
        #[arg(long, default_value_t = 30_000, value_name = "MS")]
        timeout_ms: u64,
        /// Treat every queued envelope as due now (ignore next_retry_at).
        #[arg(long)]
        ignore_backoff: bool,
        #[arg(long)]
        json: bool,
    },
    /// Write every envelope as non-secret JSON (atomically).
    Export {
        #[arg(long, short = 'o', value_name = "F")]
        output: PathBuf,
        /// Only this status.
        #[arg(long, value_name = "S")]
        status: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Queue a failed or cancelled envelope again (or make a queued one due now).
    Retry {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a queued, failed or conflict envelope: it is never sent.
    Cancel {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Print the route table the relay applies during an outage.
    Routes {
        #[arg(long)]
        json: bool,
    },
}

fn parse_status(s: Option<&str>) -> Result<Option<EnvelopeStatus>> {
    s.map(|s| {
        EnvelopeStatus::parse(s).ok_or_else(|| {
            eyre!(
                "--status {}: unknown status; use one of queued, delivered, conflict, failed, cancelled",
                safe(s)
            )
        })
    })
    .transpose()
}

/// Prints an operation refusal (busy, invalid transition) and returns `Exit::Failed`; other errors
/// go up as usage/I-O errors.
fn refused(e: OutboxError) -> Result<Exit> {
    match e {
        OutboxError::ReplayBusy { .. }
        | OutboxError::Transition { .. }
        | OutboxError::Changed { .. } => {
            eprintln!("error: {}", safe(&e.to_string()));
            Ok(Exit::Failed)
        }
        other => Err(other.into()),
    }
}

pub fn run(a: OutboxArgs) -> Result<Exit> {
    let path = outbox::outbox_path(a.outbox.as_deref());
    match a.command {
        OutboxCommand::Routes { json } => routes(json),
        OutboxCommand::Status { json } => status(&path, json),
        OutboxCommand::List {
            status,
            limit,
            json,
        } => {
            let st = parse_status(status.as_deref())?;
            let ob = Outbox::open_read_only(&path)?;
            let limit = limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
            let list = ob.list(st, limit)?;
            if json {
                print_json(&list)?;
            } else if list.is_empty() {
                println!(
                    "no envelopes{}",
                    st.map(|s| format!(" with status {s}")).unwrap_or_default()
                );
            } else {
                println!(
                    "{:<36}  {:<9}  {:>3}  {:<6}  {:<13}  {:<24}  PATH",
                    "ID", "STATUS", "TRY", "METHOD", "CLASS", "CREATED"
                );
                for e in &list {
                    println!(
                        "{:<36}  {:<9}  {:>3}  {:<6}  {:<13}  {:<24}  {}",
                        safe(&e.request.id),
                        e.status,
                        e.attempt_count,
                        safe(&e.request.method),
                        e.request.route_class,
                        safe(&e.created_at),
                        safe(&e.request.path)
                    );
                }
            }
            Ok(Exit::Ok)
        }
        OutboxCommand::Show { id, json } => {
            let ob = Outbox::open_read_only(&path)?;
            let e = ob.get(&id)?;
            if json {
                print_json(&e)?;
            } else {
                print_envelope(&e);
            }
            Ok(Exit::Ok)
        }
        OutboxCommand::Replay {
            upstream_url,
            timeout_ms,
            ignore_backoff,
            json,
        } => replay(&path, upstream_url, timeout_ms, ignore_backoff, json),
        OutboxCommand::Export {
            output,
            status,
            json,
        } => {
            let st = parse_status(status.as_deref())?;
            let ob = Outbox::open_read_only(&path)?;
            let s = ob.export(&output, st)?;
            if json {
                print_json(&s)?;
            } else {
                println!(
                    "exported {} envelopes to {}",
                    s.envelopes,
                    visible_path(&output)
                );
            }
            Ok(Exit::Ok)
        }
        OutboxCommand::Retry { id, json } => transition(&path, &id, json, true),
        OutboxCommand::Cancel { id, json } => transition(&path, &id, json, false),
    }
}

fn routes(json: bool) -> Result<Exit> {
    if json {
        print_json(&outbox::ROUTES)?;
    } else {
        println!("{:<6}  {:<26}  {:<13}  NOTE", "METHOD", "PATH", "CLASS");
        for r in outbox::ROUTES {
            println!(
                "{:<6}  {:<26}  {:<13}  {}",
                r.method, r.pattern, r.class, r.note
            );
        }
        println!("anything else: online-only (forwarded while the upstream answers, 503 during an outage)");
    }
    Ok(Exit::Ok)
}

fn status(path: &std::path::Path, json: bool) -> Result<Exit> {
    // Reading only: works on an outbox the user can only read, and never creates the lock file.
    let ob = Outbox::open_read_only(path)?;
    let c = ob.counts()?;
    let lock = ob.replay_lock_state();
    if json {
        let running = match &lock {
            ReplayLockState::Held(h) => Some(h.as_str()),
            _ => None,
        };
        print_json(&serde_json::json!({
            "outbox": visible_path(path),
            "counts": c,
            "replayRunning": running,
            "replayLock": lock.to_string(),
        }))?;
        return Ok(Exit::Ok);
    }
    println!("outbox {}", visible_path(path));
    for s in EnvelopeStatus::ALL {
        println!("  {:<10} {}", s.as_str(), c.get(s));
    }
    println!("  due now    {}", c.due);
    if let Some(o) = &c.oldest_queued_at {
        println!("  oldest queued envelope created {}", safe(o));
    }
    if let Some(n) = &c.next_retry_at {
        println!("  earliest retry at {}", safe(n));
    }
    match &lock {
        ReplayLockState::Free => {}
        ReplayLockState::Held(h) => println!("  a replay is running ({})", safe(h)),
        ReplayLockState::Unknown(_) => println!("  replay lock: {}", safe(&lock.to_string())),
    }
    if c.conflict > 0 {
        println!("review conflicts: airlock outbox list --status conflict");
    }
    Ok(Exit::Ok)
}

fn print_envelope(e: &outbox::Envelope) {
    println!("envelope {}", safe(&e.request.id));
    println!("  status          {}", e.status);
    println!(
        "  request         {} {}",
        safe(&e.request.method),
        safe(&e.request.path)
    );
    println!(
        "  route class     {} ({})",
        e.request.route_class,
        safe(&e.request.route_pattern)
    );
    println!("  resource        {}", safe(&e.request.resource_path));
    println!("  idempotency key {}", safe(&e.request.idempotency_key));
    println!("  attempts        {}", e.attempt_count);
    // Every stored text is shown escaped: the outbox file may come from elsewhere.
    println!("  next retry at   {}", safe(&e.next_retry_at));
    println!("  created at      {}", safe(&e.created_at));
    println!("  updated at      {}", safe(&e.updated_at));
    if let Some(a) = &e.acked_at {
        println!("  acked at        {}", safe(a));
    }
    if let Some(s) = e.response_status {
        println!("  response status {s}");
    }
    if let Some(s) = &e.response_summary {
        println!("  response        {}", safe(s));
    }
    if let Some(s) = &e.last_error {
        println!("  last error      {}", safe(s));
    }
    if let Some(b) = &e.request.source.queued_because {
        println!("  queued because  {}", safe(b));
    }
    if let Some(r) = &e.request.source.remote_addr {
        println!("  from            {}", safe(r));
    }
    match &e.request.body {
        Some(b) => println!("  body            {}", safe(b)),
        None => println!("  body            (none)"),
    }
}

fn transition(path: &std::path::Path, id: &str, json: bool, retry: bool) -> Result<Exit> {
    let mut ob = Outbox::open_existing(path)?;
    let r = if retry { ob.retry(id) } else { ob.cancel(id) };
    let e = match r {
        Ok(e) => e,
        Err(e) => return refused(e),
    };
    if json {
        print_json(&e)?;
    } else if retry {
        println!("envelope {} is queued again, due now", safe(&e.request.id));
    } else {
        println!(
            "envelope {} cancelled; it will not be sent",
            safe(&e.request.id)
        );
    }
    Ok(Exit::Ok)
}

fn replay(
    path: &std::path::Path,
    upstream_url: Option<String>,
    timeout_ms: u64,
    ignore_backoff: bool,
    json: bool,
) -> Result<Exit> {
    if !path.exists() {
        return Err(OutboxError::Missing {
            path: path.to_path_buf(),
        }
        .into());
    }
    let url = outbox::upstream_url(upstream_url.as_deref());
    let mut opts = ReplayOptions::new(url.clone());
    opts.timeout = Duration::from_millis(timeout_ms.max(1));
    opts.ignore_backoff = ignore_backoff;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    let show_progress = !json && std::io::stderr().is_terminal();
    let mut last = Instant::now();
    let result = rt.block_on(outbox::replay(path, &opts, |p| {
        if show_progress && last.elapsed() >= Duration::from_millis(250) {
            last = Instant::now();
            eprint!(
                "\r{}/{} sent: {} delivered, {} conflict, {} failed, {} still queued   ",
                p.attempted, p.total, p.delivered, p.conflict, p.failed, p.still_queued
            );
        }
    }));
    if show_progress {
        eprintln!();
    }
    let s = match result {
        Ok(s) => s,
        Err(e) => return refused(e),
    };
    if json {
        print_json(&s)?;
    } else {
        let c = &s.counts;
        println!(
            "replayed against {}: {} sent in {:.1} s",
            safe(&url),
            c.attempted,
            s.elapsed_ms as f64 / 1000.0
        );
        println!("  delivered     {}", c.delivered);
        println!("  conflicts     {}", c.conflict);
        println!("  failed        {}", c.failed);
        println!(
            "  still queued  {} (retry later {}, not due yet {}, waiting behind an earlier envelope {})",
            c.still_queued, c.retry_later, c.not_due, c.waiting
        );
        if let Some(why) = &s.stopped_early {
            println!("stopped early: {}", safe(why));
        }
        if c.conflict > 0 {
            println!("review conflicts: airlock outbox list --status conflict");
        }
    }
    Ok(if s.is_clean() { Exit::Ok } else { Exit::Failed })
}
