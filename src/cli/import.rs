//! `airlock jobs import BUNDLE...`: verify, merge and append to the tenant's scheduler chain.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::import::{self, BundleStatus, ImportOptions, ImportReport, ImportStatus, Refusal};
use crate::core::paths;
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Bundle files, all of one tenant; merged in one deterministic order whatever their order here.
    #[arg(required = true, value_name = "BUNDLE")]
    pub bundles: Vec<PathBuf>,
    /// Only verify the bundles (every finding), import nothing.
    #[arg(long, conflicts_with = "dry_run")]
    pub verify_only: bool,
    /// Import the verified prefix of broken logs and report what was dropped (conflicts still refuse).
    #[arg(long)]
    pub force: bool,
    /// Show the plan (new entries in order, duplicates, conflicts, dropped) and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Trust this public key (SPKI PEM) for this run; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB.pem")]
    pub trusted_keys: Vec<PathBuf>,
    /// Refuse unsigned bundles (`signature-missing`).
    #[arg(long)]
    pub require_signature: bool,
    /// Entries per automatic batch snapshot.
    #[arg(long, env = "AIRLOCK_BATCH_SIZE", default_value_t = crate::core::store::scheduler::DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    /// Maximum tolerated clock skew in milliseconds (entries further in the future are `clock-skew`).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub max_clock_skew_ms: u64,
    /// This machine's node id (default: $AIRLOCK_NODE_ID, else the host name).
    #[arg(long)]
    pub node: Option<String>,
    /// Imports of at least this many bytes of bundles write their pages once, with a rollback
    /// journal instead of the WAL, when no other connection has the store open (tuning, tests).
    #[arg(long, hide = true, env = "AIRLOCK_BULK_JOURNAL_MIN_BYTES", value_name = "BYTES",
          default_value_t = import::BULK_JOURNAL_BYTES)]
    pub bulk_journal_min_bytes: u64,
    /// How many planned entries / duplicates / dropped entries to list in human output.
    #[arg(long, default_value_t = 50)]
    pub show: usize,
}

pub fn run(ctx: &Ctx, a: ImportArgs) -> Result<Exit> {
    let trust = super::trust_for_run(&a.trusted_keys)?;
    let mut opts = ImportOptions::new(paths::node_id(a.node.as_deref()));
    opts.force = a.force;
    opts.require_signature = a.require_signature;
    opts.trust = Some(&trust);
    opts.batch_size = a.batch_size;
    opts.bulk_journal_min_bytes = a.bulk_journal_min_bytes;
    opts.max_clock_skew = std::time::Duration::from_millis(a.max_clock_skew_ms);
    let report = if a.verify_only {
        import::verify_inputs(&a.bundles, &opts)
    } else if a.dry_run {
        let store = ctx.open_store()?;
        import::plan_import(&store, &a.bundles, &opts)
    } else {
        let mut store = ctx.open_store()?;
        let r = import::import(&mut store, &a.bundles, &opts);
        drop(store);
        import::phase("close store");
        r
    }
    .map_err(|e| eyre!("{e}"))?;
    if a.json {
        print_json(&report)?;
    } else {
        print_human(&report, a.show);
    }
    Ok(match report.status {
        ImportStatus::Refused => Exit::Failed,
        _ => Exit::Ok,
    })
}

fn short(link: &str) -> String {
    link.chars().take(16).collect()
}

fn print_human(r: &ImportReport, show: usize) {
    let t = &r.totals;
    let tenant = r.tenant_id.as_deref().map(safe).unwrap_or_default();
    let verdict = match (r.status, r.dry_run) {
        (ImportStatus::Imported, _) => "IMPORTED",
        (ImportStatus::NothingToDo, _) => "NOTHING TO DO",
        (ImportStatus::Refused, true) => "WOULD BE REFUSED",
        (ImportStatus::Refused, false) => "REFUSED",
        (ImportStatus::Verified, _) => "VERIFIED",
        (ImportStatus::Planned, _) => "PLAN (dry run, nothing written)",
    };
    println!(
        "{verdict}  tenant {tenant}: {} bundle(s), {} entries: {} new, {} duplicate(s), {} conflict(s), {} dropped",
        t.bundles, t.entries, t.new, t.duplicates, t.conflicts, t.dropped
    );
    for b in &r.bundles {
        let state = match b.status {
            BundleStatus::New => {
                if b.verification.ok {
                    "verified".to_string()
                } else {
                    format!("{} finding(s)", b.verification.findings.len())
                }
            }
            BundleStatus::AlreadyImported => format!(
                "already imported at {}; skipped",
                safe(b.already_imported_at.as_deref().unwrap_or("?"))
            ),
            BundleStatus::RepeatedInput => "given twice; the repeat is skipped".into(),
        };
        println!(
            "  {}  bundle {}  {} entries  {} new  {} dup  {} dropped  signature {}  [{state}]",
            safe(&b.file),
            safe(&b.bundle_id),
            b.entries,
            b.new_entries,
            b.duplicates,
            b.dropped,
            b.verification.checks.signature
        );
    }
    let c = &r.chain;
    match r.status {
        ImportStatus::Imported => println!(
            "chain: {} -> {} entries, head {} ({})",
            c.length_before,
            c.length,
            c.head.as_deref().unwrap_or("-"),
            safe(c.head_hlc.as_deref().unwrap_or("-"))
        ),
        ImportStatus::Planned => println!(
            "chain would go {} -> {} entries, new head {}",
            c.length_before,
            c.length,
            c.head.as_deref().unwrap_or("-")
        ),
        ImportStatus::NothingToDo => {
            println!(
                "every bundle was imported before or every entry is already in the chain; nothing written (chain: {} entries)",
                c.length
            )
        }
        _ => {}
    }
    if r.refusal == Some(Refusal::Findings) {
        println!("refused: verification found problems; nothing was imported. Fix or re-export the bundles, or use --force to import only each broken log's verified prefix.");
        for b in r.bundles.iter().filter(|b| !b.verification.ok) {
            super::jobs::print_report(&safe(&b.file), &b.verification);
        }
    }
    if !r.conflicts.is_empty() {
        println!(
            "refused: {} job(s) have more than one payload; nothing was imported (--force does not override conflicts). Review the sides and fix the producer:",
            r.conflicts.len()
        );
        for cf in &r.conflicts {
            println!("  conflict job {}", safe(&cf.job_id));
            for s in &cf.sides {
                match &s.origin {
                    Some(o) => println!(
                        "    {} {} node {} #{} {}  payloadHash {}",
                        s.source,
                        safe(&o.file),
                        safe(&o.node_id),
                        o.index,
                        safe(&o.t_hlc),
                        s.payload_hash
                    ),
                    None => println!(
                        "    chain position {}  payloadHash {}",
                        s.chain_seq.map(|x| x.to_string()).unwrap_or("?".into()),
                        s.payload_hash
                    ),
                }
                if let Some(p) = &s.payload {
                    let p: String = p.chars().take(160).collect();
                    println!("      payload {}", safe(&p));
                }
            }
        }
    }
    if let Some(planned) = &r.new_entries {
        if !planned.is_empty() {
            println!("new entries in chain order:");
        }
        for p in planned.iter().take(show) {
            println!(
                "  #{:<6} {}  {}  node {}  link {}",
                p.seq,
                safe(&p.t_hlc),
                safe(&p.job_id),
                safe(&p.node_id),
                short(&p.chain_link)
            );
        }
        if planned.len() > show {
            println!(
                "  ... {} more (--show N or --json for all)",
                planned.len() - show
            );
        }
    }
    if !r.duplicates.is_empty() {
        println!("duplicates dropped:");
        for d in r.duplicates.iter().take(show) {
            let kept = match &d.kept {
                Some(k) => format!("kept {} from node {}", safe(&k.t_hlc), safe(&k.node_id)),
                None => "already in the chain".into(),
            };
            println!(
                "  {}  {}  node {} #{}  ({kept})",
                safe(&d.job_id),
                safe(&d.t_hlc),
                safe(&d.node_id),
                d.index
            );
        }
        if r.duplicates.len() > show {
            println!("  ... {} more", r.duplicates.len() - show);
        }
    }
    if !r.dropped.is_empty() {
        let what = if r.status == ImportStatus::Imported {
            "dropped (after the verified prefix of a broken log)"
        } else {
            "would be dropped with --force"
        };
        println!("{what}:");
        for d in r.dropped.iter().take(show) {
            println!(
                "  {}  node {} #{}  {}  {}  ({})",
                safe(&d.file),
                safe(&d.node_id),
                d.index,
                safe(&d.t_hlc),
                safe(&d.job_id),
                safe(&d.reason)
            );
        }
        if r.dropped.len() > show {
            println!("  ... {} more", r.dropped.len() - show);
        }
    }
    match r.snapshots.as_slice() {
        [] => {}
        [s] => println!(
            "snapshot #{}: entries {}..{} merkle root {}",
            s.id,
            s.from_seq,
            s.from_seq + s.entry_count,
            s.merkle_root
        ),
        [first, .., last] => println!(
            "{} batch snapshots taken (#{}..#{}), covering entries {}..{}; see `airlock chain tenants`",
            r.snapshots.len(),
            first.id,
            last.id,
            first.from_seq,
            last.from_seq + last.entry_count
        ),
    }
    if let Some(c) = &r.clock {
        println!("local clock now at {}", safe(c));
    }
}
