//! `airlock ledger ...`: fold node WALs into job views, append with a fence check, checkpoint,
//! compact, diff and sync two copies of a ledger, list conflicts (SPEC 12). Translation only:
//! every rule is in `core::ledger`.

use super::output::{print_json, safe};
use super::Exit;
use crate::core::ledger::antientropy::{self, SyncReport};
use crate::core::ledger::append::{compact, AppendRequest, LedgerLog};
use crate::core::ledger::durability::{self, Durability};
use crate::core::ledger::parallel::fold_ledgers;
use crate::core::ledger::{Decision, Fold, LedgerError, Resolution};
use crate::core::store::any::StoreLocation;
use crate::core::store::postgres::PgStore;
use crate::core::text::visible_path as shown;
use crate::core::wal::WalOptions;
use clap::{Args, Subcommand};
use color_eyre::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Fold node WALs into job views (`{"jobs": {...}}` with --json). Bad frames are reported
    /// with their LSN (exit 1); a torn tail (a crash's last, unacknowledged write) is reported and
    /// left out, and is no failure; the WALs' order does not matter. WALs of one node must be
    /// copies of one log (a copy or prefix: each event counts once); two that hold different
    /// frames at one LSN are refused, nothing folded (exit 1, both files, the node and the LSN
    /// named; see them with `ledger diff A B`).
    Fold(FoldArgs),
    /// Append one event, durable when this returns (LOCAL, or with --durability regional|global
    /// also confirmed by PostgreSQL); a stale fence token is refused.
    Append(AppendArgs),
    /// Write the folded state and the LSN watermarks beside the log, atomically.
    Checkpoint(LogArgs),
    /// Drop the frames the checkpoint covers (the WAL's compaction; no writer may hold the log).
    Compact(LogArgs),
    /// Compare two copies of a node's ledger (Merkle search): first divergent LSN, the events
    /// each lacks, exchanges used. Exit 0 in sync, 1 different.
    Diff(PairArgs),
    /// Copy the frames each copy is missing to it, never overwriting a frame either holds.
    Sync(PairArgs),
    /// Every conflict the fold decided: winner, losers and the rule (cancel-wins, fence, hlc).
    Conflicts(ConflictsArgs),
    /// Crash drill: append generated events (continuing the ledger's drill sequence), printing
    /// each acknowledged LSN, with a checkpoint and compaction every --checkpoint-every events.
    /// Kill it at any time and fold the log.
    Drill(DrillArgs),
    /// Benchmark: fold of --events events from --wals WALs, and anti-entropy of two --frames
    /// ledgers differing in one frame; `openssl dgst -sha256` over the same files as reference.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Directory for the generated WALs (a fresh subdirectory is made and removed).
    #[arg(long, default_value = "/tmp")]
    pub dir: PathBuf,
    #[arg(long, default_value_t = 10_000_000)]
    pub events: u64,
    #[arg(long, default_value_t = 8)]
    pub wals: usize,
    #[arg(long, default_value_t = 10_000_000)]
    pub frames: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FoldArgs {
    /// Node WAL files.
    #[arg(required = true)]
    pub wals: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
    /// Only this job (with its conflicts in the text form).
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The ledger WAL (created if missing; then --node is needed).
    pub wal: PathBuf,
    /// The event: {"type": "JobCreated", ...seed fields without "hlc"}.
    #[arg(long, value_name = "JSON")]
    pub event: String,
    /// The fence token the caller holds (default: the event's fence_token, if it has one).
    #[arg(long, value_name = "N")]
    pub fence: Option<u64>,
    /// The node that owns the log (default: the node named by its events).
    #[arg(long)]
    pub node: Option<String>,
    /// What to wait for: local (fdatasynced in the WAL), regional (and committed by PostgreSQL) or
    /// global (and applied on a synchronous standby). regional/global confirm through --db
    /// postgres://... (else ledger.postgresUrl, $AIRLOCK_LEDGER_POSTGRES).
    #[arg(long, value_parser = ["local", "regional", "global"], default_value = "local")]
    pub durability: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The ledger WAL.
    pub wal: PathBuf,
    /// The node that owns the log (default: the node named by its events).
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PairArgs {
    /// One copy of the ledger.
    pub a: PathBuf,
    /// The other copy (or --peer).
    #[arg(required_unless_present = "peer", conflicts_with = "peer")]
    pub b: Option<PathBuf>,
    /// The other copy on an `airlock serve`: http://HOST:PORT/api/v1/ledger/NODE.
    #[arg(long, value_name = "URL")]
    pub peer: Option<String>,
    /// File whose first line is the serve's bearer token (default: $AIRLOCK_TOKEN_FILE).
    #[arg(long, value_name = "FILE", env = "AIRLOCK_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds one exchange with --peer may take (sending, the serve's work and its answer); a
    /// silent or stalled serve is an error after that. Connecting may take at most 10 s; an
    /// answer over 256 MiB is refused.
    #[arg(long, value_name = "SECS", env = crate::serve::ledger_peer::TIMEOUT_ENV,
          default_value_t = crate::serve::ledger_peer::DEFAULT_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub peer_timeout: u64,
    /// Do not trust the block index beside a log (`<log>.merkle-index`): read, check and hash
    /// every frame of the local copies (the index is rewritten).
    #[arg(long)]
    pub no_index: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConflictsArgs {
    #[arg(required = true)]
    pub wals: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DrillArgs {
    /// The ledger's WAL (created if missing).
    pub wal: PathBuf,
    /// The node that owns the log.
    #[arg(long, default_value = "gate-drill")]
    pub node: String,
    /// How many events to append.
    #[arg(long, default_value_t = 1000)]
    pub events: u64,
    /// Checkpoint and compact after this many events (0: never).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
}

pub fn run(ctx: &super::Ctx, cmd: LedgerCommand) -> Result<Exit> {
    let outcome = match cmd {
        LedgerCommand::Fold(a) => run_fold(a),
        LedgerCommand::Append(a) => run_append(ctx, a),
        LedgerCommand::Checkpoint(a) => run_checkpoint(a),
        LedgerCommand::Compact(a) => run_compact(a),
        LedgerCommand::Diff(a) => run_pair(a, false),
        LedgerCommand::Sync(a) => run_pair(a, true),
        LedgerCommand::Conflicts(a) => run_conflicts(a),
        LedgerCommand::Drill(a) => run_drill(a),
        LedgerCommand::Bench(a) => run_bench(a),
    };
    match outcome {
        // A stale fence is the ledger's rule refusing a valid event (1), and so are two copies
        // of a node's log, or their checkpoints, that differ (1, as `ledger diff` of them); an invalid event is bad
        // input (2, like `wal append` of the same event).
        Err(
            LedgerError::StaleFence { .. }
            | LedgerError::Divergent { .. }
            | LedgerError::DivergentCheckpoints { .. },
        ) => {
            let e = outcome.err().map(|e| e.to_string()).unwrap_or_default();
            eprintln!("refused: {}", safe(&e));
            Ok(Exit::Failed)
        }
        other => Ok(other?),
    }
}

fn report_findings(fold: &Fold) -> Exit {
    let findings = fold.findings();
    for f in &findings {
        eprintln!(
            "{}: {} {}: {}",
            if f.torn_tail { "note" } else { "finding" },
            safe(&f.source),
            f.location(),
            safe(&f.message)
        );
    }
    if fold.findings_not_kept() > 0 {
        eprintln!(
            "finding: ... and {} more not kept (the first {} by source and LSN are listed)",
            fold.findings_not_kept(),
            crate::core::ledger::fold::KEPT_FINDINGS
        );
    }
    if findings.iter().all(|f| f.torn_tail) && fold.findings_not_kept() == 0 {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

fn run_fold(a: FoldArgs) -> Result<Exit, LedgerError> {
    let fold = fold_ledgers(&a.wals)?;
    let mut views = fold.views();
    if let Some(id) = &a.job {
        views.jobs.retain(|k, _| k == id);
        if views.jobs.is_empty() {
            return Err(LedgerError::Usage(format!(
                "job {} is not in these ledgers",
                safe(id)
            )));
        }
    }
    if a.json {
        print_json(&views).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else if let Some(r) = a.job.as_deref().and_then(|id| fold.resolution(id)) {
        print_resolution(&r);
    } else {
        println!(
            "{:<40} {:<11} {:>5}  {:<24} progress",
            "job", "status", "fence", "accepted/assigned"
        );
        for r in fold.resolutions() {
            print_job_row(&r);
        }
    }
    Ok(report_findings(&fold))
}

fn print_job_row(r: &Resolution) {
    let v = &r.view;
    let progress: Vec<String> = v
        .progress
        .iter()
        .map(|(dc, p)| format!("{dc} {} done {} failed", p.completed, p.failed))
        .collect();
    println!(
        "{:<40} {:<11} {:>5}  {:<24} {}",
        safe(&r.job_id),
        v.status.as_str(),
        v.fence_token.map_or("-".into(), |f| f.to_string()),
        format!("{}/{}", v.accepted_dcs.len(), v.assigned_dcs.len()),
        safe(&progress.join(", "))
    );
}

fn print_resolution(r: &Resolution) {
    let v = &r.view;
    println!("job        {}", safe(&r.job_id));
    println!("status     {}", v.status.as_str());
    println!(
        "decided by {}",
        v.decided_by.as_deref().map_or("-".into(), safe)
    );
    println!(
        "fence      {}",
        v.fence_token.map_or("-".into(), |f| f.to_string())
    );
    println!("assigned   {}", safe(&v.assigned_dcs.join(", ")));
    println!("accepted   {}", safe(&v.accepted_dcs.join(", ")));
    println!("cancel ack {}", safe(&v.cancel_acked_dcs.join(", ")));
    for (dc, p) in &v.progress {
        println!(
            "progress   {}: {} completed, {} failed",
            safe(dc),
            p.completed,
            p.failed
        );
    }
    for d in &r.decisions {
        print_decision(d);
    }
}

fn print_decision(d: &Decision) {
    let w = &d.winner;
    println!(
        "{} {}: {} {} ({} LSN {}) wins by {}",
        safe(&d.job_id),
        safe(&d.subject),
        w.kind,
        safe(&w.hlc),
        safe(&w.source),
        w.lsn,
        d.rule.as_str()
    );
    for l in &d.losers {
        println!(
            "    lost: {} {} ({} LSN {}) by {}",
            l.event.kind,
            safe(&l.event.hlc),
            safe(&l.event.source),
            l.event.lsn,
            l.rule.as_str()
        );
    }
}

fn run_append(ctx: &super::Ctx, a: AppendArgs) -> Result<Exit, LedgerError> {
    let durability = Durability::parse(&a.durability)
        .ok_or_else(|| LedgerError::Usage("--durability: local, regional or global".into()))?;
    let req = AppendRequest::from_json(&a.event, a.fence)?;
    req.validate(a.node.as_deref())?;
    // Connect before appending: an unreachable PostgreSQL refuses the append with nothing written.
    let pg = match durability {
        Durability::Local => None,
        _ => Some(connect_postgres(ctx, durability)?),
    };
    let mut log = noted(LedgerLog::open(
        &a.wal,
        a.node.as_deref(),
        WalOptions::default(),
    )?);
    let (acked, confirmed) = match &pg {
        None => (log.append(&req)?, Ok(None)),
        Some(pg) => {
            let mut conn = pg.connection().map_err(|e| {
                LedgerError::Usage(format!(
                    "cannot use the connection to the PostgreSQL that confirms {}: {e}; nothing was appended",
                    durability.name()
                ))
            })?;
            durability::append_confirmed(&mut log, &mut conn, durability, &req)?
        }
    };
    log.close()?;
    let mut answer = serde_json::to_value(&acked).map_err(|e| LedgerError::Usage(e.to_string()))?;
    if let Ok(Some(c)) = &confirmed {
        answer["durability"] = serde_json::json!(durability.name());
        answer["postgresLsn"] = serde_json::json!(c.watermark.to_string());
    }
    if a.json {
        print_json(&answer).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        println!(
            "appended {} for {} at LSN {} (HLC {}, durability {}{})",
            acked.kind,
            safe(&acked.job_id),
            acked.lsn,
            safe(&acked.hlc),
            answer["durability"].as_str().unwrap_or("LOCAL"),
            answer["postgresLsn"]
                .as_str()
                .map(|l| format!(", PostgreSQL LSN {l}"))
                .unwrap_or_default()
        );
    }
    match confirmed {
        Ok(_) => Ok(Exit::Ok),
        Err(e) => {
            eprintln!("not confirmed: {}", safe(&e.to_string()));
            Ok(Exit::Failed)
        }
    }
}

/// The PostgreSQL that confirms REGIONAL/GLOBAL: `--db postgres://...`, else `ledger.postgresUrl`.
fn connect_postgres(ctx: &super::Ctx, durability: Durability) -> Result<PgStore, LedgerError> {
    let url = match ctx.db_location() {
        Ok(StoreLocation::Postgres(u)) => Some(u),
        _ => std::env::var(LEDGER_POSTGRES_ENV)
            .ok()
            .filter(|u| !u.is_empty()),
    };
    let url = url.ok_or_else(|| {
        LedgerError::Usage(format!(
            "--durability {} needs PostgreSQL to confirm it: give --db postgres://... (or ledger.postgresUrl, ${LEDGER_POSTGRES_ENV}); see docs/postgres.md",
            durability.name().to_ascii_lowercase()
        ))
    })?;
    PgStore::connect(&url).map_err(|e| {
        LedgerError::Usage(format!(
            "cannot reach the PostgreSQL that confirms {}: {e}; nothing was appended",
            durability.name()
        ))
    })
}

/// Where `ledger.postgresUrl` of the configuration file reaches one-shot commands.
const LEDGER_POSTGRES_ENV: &str = "AIRLOCK_LEDGER_POSTGRES";

fn run_checkpoint(a: LogArgs) -> Result<Exit, LedgerError> {
    let mut log = noted(LedgerLog::open_existing(
        &a.wal,
        a.node.as_deref(),
        WalOptions::default(),
    )?);
    let cp = log.checkpoint()?;
    log.close()?;
    // A COMPACTED watermark above what the fold applied (core::wal::checkpoint): not claimed.
    if let Some(w) = cp.unheld_compacted_message() {
        eprintln!("warning: {}", safe(&w));
    }
    let unheld = cp
        .unheld_compacted()
        .map(|r| serde_json::json!({"from": r.start(), "to": r.end()}));
    if a.json {
        print_json(&serde_json::json!({
            "checkpoint": crate::core::ledger::append::checkpoint_path(&a.wal),
            "lastLsn": cp.last_lsn,
            "appliedLsn": cp.applied_lsn,
            "watermarks": cp.watermarks,
            "confirmations": cp.state.get("confirmations"),
            "unheldCompacted": unheld,
        }))
        .map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        println!(
            "checkpoint of {} covers LSN 1..={} (written to {}); `airlock ledger compact` may now drop those frames",
            shown(&a.wal),
            cp.applied_lsn,
            shown(&crate::core::ledger::append::checkpoint_path(&a.wal))
        );
        if let Some(serde_json::Value::Object(marks)) = cp.state.get("confirmations") {
            for (level, m) in marks {
                println!(
                    "  {level}: confirmed by PostgreSQL up to LSN {} (PostgreSQL LSN {})",
                    m["walLsn"],
                    m["postgresLsn"].as_str().map_or("-".into(), safe)
                );
            }
        }
    }
    Ok(Exit::Ok)
}

fn run_compact(a: LogArgs) -> Result<Exit, LedgerError> {
    let r = compact(&a.wal)?;
    if a.json {
        let v = super::wal::compact_json(&r).map_err(|e| LedgerError::Usage(e.to_string()))?;
        print_json(&v).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        if let Some(line) = r
            .recovery
            .as_ref()
            .and_then(|rec| super::wal::torn_tail_line(&a.wal, rec))
        {
            println!("{line}");
        }
        println!(
            "compacted {}: frames {} -> {}, bytes {} -> {} (dropped LSN <= {})",
            shown(&a.wal),
            r.frames_before,
            r.frames_after,
            r.bytes_before,
            r.bytes_after,
            r.compacted_lsn
        );
    }
    Ok(Exit::Ok)
}

fn run_pair(a: PairArgs, apply: bool) -> Result<Exit, LedgerError> {
    // A copy that is not there is an empty ledger (so that `sync` can make it); for `diff` a
    // mistyped path would read as a real difference, so say so.
    if !apply {
        for path in std::iter::once(&a.a).chain(a.b.as_ref()) {
            if !path.try_exists().unwrap_or(true) {
                eprintln!(
                    "note: {} does not exist: it is read as an empty ledger (every frame of the other copy is missing there); check the path",
                    crate::core::text::visible_path(path)
                );
            }
        }
    }
    let (r, other) = match (&a.b, &a.peer) {
        (Some(b), _) => (
            antientropy::between_files_with(&a.a, b, apply, trust(a.no_index))?,
            b.clone(),
        ),
        (None, Some(url)) => {
            let token = match &a.token_file {
                Some(f) => {
                    Some(crate::serve::push::read_token_file(f).map_err(LedgerError::Usage)?)
                }
                None => None,
            };
            let timeout = std::time::Duration::from_secs(a.peer_timeout);
            let mut peer = crate::serve::ledger_peer::HttpPeer::new(url, token, timeout)?;
            let mut local = antientropy::Replica::open_with(&a.a, trust(a.no_index))?;
            (
                antientropy::run(&mut local, &mut peer, apply)?,
                PathBuf::from(url),
            )
        }
        (None, None) => return Err(LedgerError::Usage("give B or --peer URL".into())),
    };
    if a.json {
        print_json(&r).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        print_sync(&a.a, &other, &r, apply);
    }
    let settled = if apply {
        r.divergent.is_empty()
    } else {
        r.in_sync()
    };
    Ok(if settled { Exit::Ok } else { Exit::Failed })
}

fn trust(no_index: bool) -> antientropy::Trust {
    if no_index {
        antientropy::Trust::Full
    } else {
        antientropy::Trust::Index
    }
}

fn print_sync(a: &Path, b: &Path, r: &SyncReport, apply: bool) {
    match r.first_divergent_lsn {
        None => println!("in sync ({} exchange(s))", r.exchanges),
        Some(lsn) => println!("first divergent LSN {lsn} ({} exchange(s))", r.exchanges),
    }
    let list = |label: &str, v: &[antientropy::FrameInfo]| {
        for f in v {
            println!(
                "  {label} LSN {} {} {} {}",
                f.lsn,
                f.kind,
                safe(&f.hlc),
                f.job_id.as_deref().map_or("".into(), safe)
            );
        }
    };
    list(&format!("missing in {}:", shown(a)), &r.missing_in_a);
    list(&format!("missing in {}:", shown(b)), &r.missing_in_b);
    if !r.divergent.is_empty() {
        println!(
            "  divergent (both hold a different frame; never overwritten): LSN {:?}",
            r.divergent
        );
    }
    if apply {
        println!(
            "copied {} frame(s) to {}, {} to {}",
            r.copied_to_a.len(),
            shown(a),
            r.copied_to_b.len(),
            shown(b)
        );
    }
    for n in &r.block_index {
        println!("  {}: {}", safe(&n.path), safe(&n.note));
    }
    for c in &r.torn_tails_cut {
        println!(
            "{}",
            super::wal::cut_line(
                &c.path,
                c.cut_bytes,
                c.offset,
                c.saved_tail.as_deref(),
                c.valid_frames
            )
        );
    }
}

fn run_conflicts(a: ConflictsArgs) -> Result<Exit, LedgerError> {
    let fold = fold_ledgers(&a.wals)?;
    let decisions = fold.decisions();
    if a.json {
        print_json(&serde_json::json!({ "conflicts": decisions }))
            .map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else if decisions.is_empty() {
        println!("no conflicts");
    } else {
        for d in &decisions {
            print_decision(d);
        }
    }
    Ok(report_findings(&fold))
}

/// The opened log, having said on stderr what recovery cut from it (a torn tail, saved beside
/// it), as `wal append` does.
fn noted(log: LedgerLog) -> LedgerLog {
    if let Some(line) = super::wal::torn_tail_line(log.path(), log.wal().recovery()) {
        eprintln!("note: {line}");
    }
    log
}

fn run_drill(a: DrillArgs) -> Result<Exit, LedgerError> {
    let mut log = noted(LedgerLog::open(
        &a.wal,
        Some(&a.node),
        WalOptions::default(),
    )?);
    let mut out = std::io::stdout().lock();
    // Continue the drill sequence where the ledger stands.
    let start = log.fold().events_applied();
    for i in start..start + a.events {
        let req = crate::core::ledger::append::drill_event(i);
        let acked = log.append(&req)?;
        let _ = writeln!(out, "acked {} {}", acked.lsn, acked.hlc);
        let _ = out.flush();
        if a.checkpoint_every > 0 && (i + 1) % a.checkpoint_every == 0 {
            log.checkpoint()?;
            log.close()?;
            compact(&a.wal)?;
            let _ = writeln!(out, "compacted");
            log = LedgerLog::open(&a.wal, Some(&a.node), WalOptions::default())?;
        }
    }
    log.close()?;
    Ok(Exit::Ok)
}

/// Seconds `openssl dgst -sha256` takes over the files (the hashing reference).
fn openssl_seconds(paths: &[PathBuf]) -> Result<f64, LedgerError> {
    let t = std::time::Instant::now();
    let status = std::process::Command::new("openssl")
        .arg("dgst")
        .arg("-sha256")
        .args(paths)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| {
            LedgerError::Usage(format!(
                "cannot run openssl (install it: apt-get install openssl): {e}"
            ))
        })?;
    if !status.success() {
        return Err(LedgerError::Usage("openssl dgst -sha256 failed".into()));
    }
    Ok(t.elapsed().as_secs_f64())
}

fn run_bench(a: BenchArgs) -> Result<Exit, LedgerError> {
    use crate::core::ledger::bench;
    let dir = a
        .dir
        .join(format!("airlock-ledger-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| LedgerError::io("create", &dir, e))?;
    let result = (|| {
        let wals = bench::generate(&dir, a.events, a.wals)?;
        let _ = openssl_seconds(&wals)?; // warm the page cache for both measurements
        let fold = bench::fold_bench(&wals)?;
        let sha = openssl_seconds(&wals)?;
        for w in &wals {
            let _ = std::fs::remove_file(w);
        }
        let (pa, pb) = (dir.join("a.alwl"), dir.join("b.alwl"));
        let differ = a.frames / 2 + 1;
        bench::generate_pair(&pa, &pb, a.frames, differ)?;
        let ae = bench::anti_entropy_bench(&pa, &pb, a.frames, differ)?;
        let sha_pair = openssl_seconds(&[pa, pb])?;
        Ok::<_, LedgerError>((fold, sha, ae, sha_pair))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    let (fold, sha, ae, sha_pair) = result?;
    let fold_vs_sha = sha / fold.seconds.max(1e-9);
    if a.json {
        print_json(&serde_json::json!({
            "fold": fold, "opensslSha256Seconds": sha, "foldSpeedVsSha256": fold_vs_sha,
            "antiEntropy": ae, "opensslSha256PairSeconds": sha_pair,
        }))
        .map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        println!(
            "fold: {} events from {} WALs ({} MB, {} jobs) in {:.2} s = {:.2} M events/s; CPU {:.2} s = {:.2} us/event (2 cores at that rate: {:.2} M events/s); peak RSS {} MB; openssl dgst -sha256 over the same files {:.2} s (fold is {:.2}x its speed)",
            fold.events, fold.wals, fold.bytes >> 20, fold.jobs, fold.seconds,
            fold.events_per_sec / 1e6, fold.cpu_seconds, fold.cpu_us_per_event,
            2.0 / fold.cpu_us_per_event.max(1e-9), fold.max_rss_bytes >> 20, sha, fold_vs_sha
        );
        println!(
            "anti-entropy: two {}-frame ledgers differing at LSN {}: found {:?} in {} exchanges; {:.3} s cold (trees built from the files; openssl over both: {:.2} s), {:.3} s with the block index",
            ae.frames, ae.differing_lsn, ae.found_lsn, ae.exchanges, ae.first_seconds, sha_pair, ae.indexed_seconds
        );
    }
    Ok(Exit::Ok)
}
