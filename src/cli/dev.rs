//! `airlock dev ...`: developer tools: a State Hub stand-in (`dev upstream`), a load generator
//! (`dev loadgen`) and the relay benchmark (`dev bench`, see docs/benchmarks/relay.md).

use super::output::print_json;
use super::Exit;
use crate::core::outbox::{self, ReplayOptions};
use crate::relay::standin::StandIn;
use crate::relay::{self, RelayConfig};
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use serde::Serialize;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Run the State Hub stand-in (central idempotency; control endpoints under /_standin/).
    Upstream(UpstreamArgs),
    /// Send JSON writes to a URL with concurrent clients and report throughput and latency.
    Loadgen(LoadgenArgs),
    /// Run the relay benchmark on loopback (queueing, forwarding overhead, replay).
    Bench(BenchArgs),
    /// Write a large valid bundle (benchmarks and drills).
    GenBundle(super::generate::GenerateArgs),
    /// WAL group-commit benchmark: N concurrent appenders, each waiting for its own ack.
    WalBench(WalBenchArgs),
    /// Write a valid WAL of about --bytes bytes (input for the recovery benchmark): jobs of 100
    /// events each that `ledger fold` folds without findings.
    WalGen(WalGenArgs),
    /// WAL crash drill: append with N appenders, printing `lsn hlc job_id` per ack (to be killed).
    #[command(hide = true)]
    WalDrill(WalDrillArgs),
    /// WAL crash drill: start `dev wal-drill` --rounds times, SIGKILL it at a random moment, and
    /// check that the log holds every acknowledged append with its exact bytes (exit 1 if not).
    WalCrashDrill(super::wal_drill::WalCrashDrillArgs),
    /// Import benchmark aid: copy an imported store's chain and job rows into a new store with
    /// INSERT ... SELECT in one transaction, and print what SQLite alone took (wall and CPU).
    StoreCopyFloor(StoreCopyFloorArgs),
}

#[derive(Debug, Args)]
pub struct StoreCopyFloorArgs {
    /// The imported store to read.
    pub source: PathBuf,
    /// The new store to write (refused if the file exists).
    pub target: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WalGenArgs {
    /// The WAL file to write (replaced).
    pub file: PathBuf,
    /// Approximate size in bytes.
    #[arg(long, default_value_t = 1 << 30)]
    pub bytes: u64,
    #[arg(long, default_value = "bench")]
    pub node: String,
}

#[derive(Debug, Args)]
pub struct WalDrillArgs {
    #[arg(long)]
    pub file: PathBuf,
    #[arg(long, default_value = "drill")]
    pub node: String,
    #[arg(long, default_value_t = 8)]
    pub appenders: usize,
    #[arg(long, default_value_t = 10_000_000)]
    pub entries: usize,
}

/// `dev wal-bench --runtime`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum WalBenchRuntime {
    CurrentThread,
    MultiThread,
}

#[derive(Debug, Args)]
pub struct WalBenchArgs {
    /// Concurrent appenders.
    #[arg(long, default_value_t = 8)]
    pub appenders: usize,
    /// Entries in all.
    #[arg(long, default_value_t = 100_000)]
    pub entries: usize,
    /// Payload bytes per entry.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Directory for the temporary log (default: the system temp directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The runtime the appender tasks run on: one thread (the default; the other core is left
    /// to the log's writer and syncer) or two workers.
    #[arg(long, value_enum, default_value_t = WalBenchRuntime::CurrentThread)]
    pub runtime: WalBenchRuntime,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UpstreamArgs {
    /// Port (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Answer every request with this status (e.g. 503) until told otherwise.
    #[arg(long, value_name = "STATUS")]
    pub fail_status: Option<u16>,
    /// Wait this long before each answer.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub delay_ms: u64,
}

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// Base URL of the relay or upstream.
    #[arg(long)]
    pub target: String,
    /// Request path.
    #[arg(long, default_value = "/progress/")]
    pub path: String,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Total requests.
    #[arg(long, default_value_t = 10_000)]
    pub requests: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Writes queued in phase 1 (and replayed in phase 3).
    #[arg(long, default_value_t = 20_000)]
    pub writes: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Requests per forwarding measurement (direct and through the relay).
    #[arg(long, default_value_t = 10_000)]
    pub forward_requests: usize,
    /// Working directory for the outbox files (default: a new directory under the temp dir,
    /// removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: DevCommand) -> Result<Exit> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    match cmd {
        DevCommand::Upstream(a) => rt.block_on(upstream(a)),
        DevCommand::Loadgen(a) => {
            outbox::replay::parse_upstream(&a.target)?;
            if a.clients == 0 || a.requests == 0 {
                return Err(eyre!("--clients and --requests must be at least 1"));
            }
            let r = rt.block_on(loadgen(&a.target, &a.path, a.clients, a.requests, "lg"))?;
            if a.json {
                print_json(&r)?;
            } else {
                println!("{}", r.line());
            }
            Ok(Exit::Ok)
        }
        DevCommand::Bench(a) => rt.block_on(bench(a)),
        DevCommand::GenBundle(a) => super::generate::run(a),
        DevCommand::WalBench(a) => wal_bench(a),
        DevCommand::WalDrill(a) => wal_drill(a),
        DevCommand::WalCrashDrill(a) => super::wal_drill::crash_drill(a),
        DevCommand::StoreCopyFloor(a) => {
            let r = crate::core::store::copy_floor::copy_floor(&a.source, &a.target)?;
            if a.json {
                print_json(&r)?;
            } else {
                println!(
                    "{} chain rows and {} job rows copied in {:.3} s ({:.3} s CPU){}",
                    r.log_rows,
                    r.job_rows,
                    r.seconds,
                    r.cpu_seconds,
                    if r.bulk_journal { "" } else { " in WAL mode" }
                );
            }
            Ok(Exit::Ok)
        }
        DevCommand::WalGen(a) => {
            // Jobs whose ids and event sequences `ledger fold` accepts (no findings).
            let frames = crate::core::ledger::bench::generate_log(&a.file, &a.node, a.bytes)?;
            println!("{}: {frames} frames", crate::text::visible_path(&a.file));
            Ok(Exit::Ok)
        }
    }
}

async fn upstream(a: UpstreamArgs) -> Result<Exit> {
    super::relay::init_logging();
    let addr: SocketAddr = format!("{}:{}", a.host, a.port).parse().map_err(|e| {
        eyre!(
            "--host {} --port {}: {e}",
            crate::text::visible(&a.host),
            a.port
        )
    })?;
    let s = StandIn::start(addr)
        .await
        .wrap_err_with(|| format!("cannot listen on {addr}"))?;
    s.set_fail_status(a.fail_status);
    s.set_delay(Duration::from_millis(a.delay_ms));
    println!("airlock stand-in listening on {}", s.url());
    let _ = std::io::stdout().flush();
    crate::http_server::shutdown_signal("airlock dev upstream").await;
    s.stop().await;
    Ok(Exit::Ok)
}

/// Loadgen results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadReport {
    pub requests: usize,
    pub clients: usize,
    pub elapsed_ms: f64,
    pub per_second: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// (status, count); 0 = network error.
    pub statuses: Vec<(u16, usize)>,
}

impl LoadReport {
    fn line(&self) -> String {
        format!(
            "{} requests, {} clients: {:.0}/s, p50 {} us, p90 {} us, p99 {} us, max {} us, statuses {:?}",
            self.requests,
            self.clients,
            self.per_second,
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.max_us,
            self.statuses
        )
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Sends `requests` POSTs of a ~200-byte JSON body to `target + path` from `clients` concurrent
/// clients, each with a unique Idempotency-Key (`{tag}-{n}`).
pub async fn loadgen(
    target: &str,
    path: &str,
    clients: usize,
    requests: usize,
    tag: &str,
) -> Result<LoadReport> {
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(clients * 2)
        .timeout(Duration::from_secs(30))
        .build()
        .wrap_err("building the HTTP client")?;
    let url = outbox::replay::join_url(target, path)
        .map_err(|why| eyre!("{why}"))?
        .to_string();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, url, next, tag) = (client.clone(), url.clone(), next.clone(), tag.to_string());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut statuses: Vec<u16> = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= requests {
                    break;
                }
                let body = serde_json::json!({
                    "sessionId": format!("bench-{tag}"),
                    "seq": n,
                    "summary": "benchmark progress event from the airlock load generator",
                    "tokens": {"input": 1200, "output": 340},
                });
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .header("idempotency-key", format!("{tag}-{n}"))
                    .json(&body)
                    .send()
                    .await;
                let code = match r {
                    Ok(resp) => {
                        let c = resp.status().as_u16();
                        let _ = resp.bytes().await;
                        c
                    }
                    Err(_) => 0,
                };
                lat.push(t.elapsed().as_micros() as u64);
                statuses.push(code);
            }
            (lat, statuses)
        }));
    }
    let mut lat = Vec::with_capacity(requests);
    let mut hist = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        let (l, s) = t.await.wrap_err("a load generator task failed")?;
        lat.extend(l);
        for c in s {
            *hist.entry(c).or_default() += 1;
        }
    }
    let elapsed = started.elapsed();
    lat.sort_unstable();
    Ok(LoadReport {
        requests,
        clients,
        elapsed_ms: elapsed.as_secs_f64() * 1000.0,
        per_second: requests as f64 / elapsed.as_secs_f64(),
        p50_us: percentile(&lat, 0.50),
        p90_us: percentile(&lat, 0.90),
        p99_us: percentile(&lat, 0.99),
        max_us: lat.last().copied().unwrap_or(0),
        statuses: hist.into_iter().collect(),
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BenchReport {
    queueing: LoadReport,
    forward_direct: LoadReport,
    forward_relay: LoadReport,
    added_p50_us: i64,
    added_p99_us: i64,
    replay_envelopes: u64,
    replay_delivered: u64,
    replay_ms: u64,
    replay_per_second: f64,
}

async fn start_relay(
    upstream: &str,
    outbox: PathBuf,
) -> Result<(
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let config = RelayConfig::new(upstream, outbox);
    let task = tokio::spawn(async move {
        if let Err(e) = relay::serve(listener, config, async {
            let _ = rx.await;
        })
        .await
        {
            tracing::error!(error = %e, "bench relay failed");
        }
    });
    Ok((url, tx, task))
}

async fn bench(a: BenchArgs) -> Result<Exit> {
    if a.clients == 0 || a.writes == 0 || a.forward_requests == 0 {
        return Err(eyre!(
            "--writes, --clients and --forward-requests must be at least 1"
        ));
    }
    let (dir, remove) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("airlock-bench-{}", uuid::Uuid::new_v4().simple())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir)
        .wrap_err_with(|| format!("creating {}", crate::core::text::visible_path(&dir)))?;
    let say = |s: &str| {
        if !a.json {
            eprintln!("{s}");
        }
    };

    // Phase 1: durable queueing with the upstream down (a port that refuses connections).
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}", l.local_addr()?)
    };
    let queue_outbox = dir.join("queue.sqlite3");
    let (relay_url, stop, task) = start_relay(&dead, queue_outbox.clone()).await?;
    say("phase 1: queueing with the upstream down ...");
    let queueing = loadgen(&relay_url, "/progress/", a.clients, a.writes, "q").await?;
    let _ = stop.send(());
    let _ = task.await;

    // Phase 2: forwarding overhead against the stand-in.
    let standin = StandIn::start("127.0.0.1:0".parse()?).await?;
    say("phase 2: forwarding overhead ...");
    let _warm = loadgen(&standin.url(), "/progress/", a.clients, 500, "w").await?;
    let forward_direct = loadgen(
        &standin.url(),
        "/progress/",
        a.clients,
        a.forward_requests,
        "d",
    )
    .await?;
    let (relay_url, stop, task) = start_relay(&standin.url(), dir.join("forward.sqlite3")).await?;
    let _warm = loadgen(&relay_url, "/progress/", a.clients, 500, "wr").await?;
    let forward_relay =
        loadgen(&relay_url, "/progress/", a.clients, a.forward_requests, "r").await?;
    let _ = stop.send(());
    let _ = task.await;

    // Phase 3: replay the phase-1 outbox into the stand-in.
    say("phase 3: replay ...");
    let opts = ReplayOptions::new(standin.url());
    let s = outbox::replay(&queue_outbox, &opts, |_| {}).await?;
    standin.stop().await;
    let report = BenchReport {
        added_p50_us: forward_relay.p50_us as i64 - forward_direct.p50_us as i64,
        added_p99_us: forward_relay.p99_us as i64 - forward_direct.p99_us as i64,
        queueing,
        forward_direct,
        forward_relay,
        replay_envelopes: s.counts.attempted,
        replay_delivered: s.counts.delivered,
        replay_ms: s.elapsed_ms,
        replay_per_second: s.counts.attempted as f64 / (s.elapsed_ms.max(1) as f64 / 1000.0),
    };
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if a.json {
        print_json(&report)?;
    } else {
        println!("| measurement | result |");
        println!("| --- | --- |");
        println!("| queueing, upstream down | {} |", report.queueing.line());
        println!("| stand-in direct | {} |", report.forward_direct.line());
        println!("| through relay | {} |", report.forward_relay.line());
        println!(
            "| added latency by the relay | p50 {} us, p99 {} us |",
            report.added_p50_us, report.added_p99_us
        );
        println!(
            "| replay | {} envelopes ({} delivered) in {} ms: {:.0}/s |",
            report.replay_envelopes,
            report.replay_delivered,
            report.replay_ms,
            report.replay_per_second
        );
    }
    Ok(Exit::Ok)
}

fn wal_bench(a: WalBenchArgs) -> Result<Exit> {
    if a.appenders == 0 || a.entries == 0 {
        return Err(eyre!("--appenders and --entries must be at least 1"));
    }
    let r = crate::core::wal::bench::run(&crate::core::wal::bench::BenchConfig {
        appenders: a.appenders,
        entries: a.entries,
        payload_bytes: a.payload_bytes,
        dir: a.dir.unwrap_or_else(std::env::temp_dir),
        runtime: match a.runtime {
            WalBenchRuntime::CurrentThread => crate::core::wal::bench::BenchRuntime::CurrentThread,
            WalBenchRuntime::MultiThread => crate::core::wal::bench::BenchRuntime::MultiThread,
        },
    })?;
    if a.json {
        print_json(&r)?;
    } else {
        println!(
            "{} appenders, {} entries of {} bytes: {:.0} acked entries/s, ack p50 {} us, p99 {} us; {} batches (mean {:.1}), {} fdatasyncs, fdatasync p50 {} us (bound {:.0}/s)",
            r.appenders, r.entries, r.payload_bytes, r.entries_per_sec, r.p50_ack_micros,
            r.p99_ack_micros, r.batches, r.mean_batch, r.fdatasyncs, r.fdatasync_p50_micros,
            r.sync_bound_per_sec
        );
    }
    Ok(Exit::Ok)
}

fn wal_drill(a: WalDrillArgs) -> Result<Exit> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut broken = false;
    crate::core::wal::drill::drill(&a.file, &a.node, a.appenders, a.entries, |ack| {
        if !broken {
            broken = writeln!(out, "{} {} {}", ack.lsn, ack.hlc, ack.job_id)
                .and_then(|_| out.flush())
                .is_err();
        }
    })?;
    Ok(Exit::Ok)
}
