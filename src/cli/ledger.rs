//! `airlock ledger ...`: fold node WALs into job views, append with a fence check, checkpoint,
//! compact, diff and sync two copies of a ledger, list conflicts (SPEC 12). Translation only:
//! every rule is in `core::ledger`.

use super::output::{print_json, safe};
use super::Exit;
use crate::core::ledger::antientropy::{self, SyncReport};
use crate::core::ledger::append::{compact, AppendRequest, LedgerLog};
use crate::core::ledger::source::fold_ledgers;
use crate::core::ledger::{Decision, Fold, LedgerError, Resolution};
use crate::core::wal::WalOptions;
use clap::{Args, Subcommand};
use color_eyre::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Fold node WALs into job views (`{"jobs": {...}}` with --json). Bad frames are reported
    /// with their LSN (exit 1); the WALs' order does not matter.
    Fold(FoldArgs),
    /// Append one event, durable (LOCAL) when this returns; a stale fence token is refused.
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
    /// Crash drill: append generated events, printing each acknowledged LSN, with a checkpoint
    /// and compaction every --checkpoint-every events. Kill it at any time and fold the log.
    Drill(DrillArgs),
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
    /// The other copy.
    pub b: PathBuf,
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
    pub wal: PathBuf,
    #[arg(long, default_value = "gate-drill")]
    pub node: String,
    #[arg(long, default_value_t = 1000)]
    pub events: u64,
    /// Checkpoint and compact after this many events (0: never).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
}

pub fn run(cmd: LedgerCommand) -> Result<Exit> {
    let outcome = match cmd {
        LedgerCommand::Fold(a) => run_fold(a),
        LedgerCommand::Append(a) => run_append(a),
        LedgerCommand::Checkpoint(a) => run_checkpoint(a),
        LedgerCommand::Compact(a) => run_compact(a),
        LedgerCommand::Diff(a) => run_pair(a, false),
        LedgerCommand::Sync(a) => run_pair(a, true),
        LedgerCommand::Conflicts(a) => run_conflicts(a),
        LedgerCommand::Drill(a) => run_drill(a),
    };
    match outcome {
        Err(LedgerError::StaleFence { .. }) | Err(LedgerError::Event(_)) => {
            let e = outcome.err().map(|e| e.to_string()).unwrap_or_default();
            eprintln!("refused: {}", safe(&e));
            Ok(Exit::Failed)
        }
        other => Ok(other?),
    }
}

fn shown(p: &Path) -> String {
    safe(&p.display().to_string()).into_owned()
}

fn report_findings(fold: &Fold) -> Exit {
    let findings = fold.findings();
    for f in &findings {
        let lsn = f.lsn.map_or("-".to_string(), |l| l.to_string());
        let offset = f.offset.map_or("-".to_string(), |o| o.to_string());
        eprintln!(
            "finding: {} LSN {lsn} (byte offset {offset}): {}",
            safe(&f.source),
            safe(&f.message)
        );
    }
    if findings.is_empty() {
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

fn run_append(a: AppendArgs) -> Result<Exit, LedgerError> {
    let req = AppendRequest::from_json(&a.event, a.fence)?;
    let mut log = LedgerLog::open(&a.wal, a.node.as_deref(), WalOptions::default())?;
    let acked = log.append(&req)?;
    log.close()?;
    if a.json {
        print_json(&acked).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        println!(
            "appended {} for {} at LSN {} (HLC {}, durability {})",
            acked.kind,
            safe(&acked.job_id),
            acked.lsn,
            safe(&acked.hlc),
            acked.durability
        );
    }
    Ok(Exit::Ok)
}

fn run_checkpoint(a: LogArgs) -> Result<Exit, LedgerError> {
    let mut log = LedgerLog::open(&a.wal, a.node.as_deref(), WalOptions::default())?;
    let cp = log.checkpoint()?;
    log.close()?;
    if a.json {
        print_json(&serde_json::json!({
            "checkpoint": crate::core::ledger::append::checkpoint_path(&a.wal),
            "lastLsn": cp.last_lsn,
            "appliedLsn": cp.applied_lsn,
            "watermarks": cp.watermarks,
        }))
        .map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        println!(
            "checkpoint of {} covers LSN 1..={} (written to {}); `airlock ledger compact` may now drop those frames",
            shown(&a.wal),
            cp.applied_lsn,
            shown(&crate::core::ledger::append::checkpoint_path(&a.wal))
        );
    }
    Ok(Exit::Ok)
}

fn run_compact(a: LogArgs) -> Result<Exit, LedgerError> {
    let r = compact(&a.wal)?;
    if a.json {
        print_json(&r).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
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
    let r = antientropy::between_files(&a.a, &a.b, apply)?;
    if a.json {
        print_json(&r).map_err(|e| LedgerError::Usage(e.to_string()))?;
    } else {
        print_sync(&a.a, &a.b, &r, apply);
    }
    let settled = if apply {
        r.divergent.is_empty()
    } else {
        r.in_sync()
    };
    Ok(if settled { Exit::Ok } else { Exit::Failed })
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

fn run_drill(a: DrillArgs) -> Result<Exit, LedgerError> {
    let mut log = LedgerLog::open(&a.wal, Some(&a.node), WalOptions::default())?;
    let mut out = std::io::stdout().lock();
    for i in 0..a.events {
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
