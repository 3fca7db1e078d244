//! Human text of engine reports, shared by the CLI (which prints the lines) and the console (which
//! draws them), so the two can never disagree. Every untrusted string goes through
//! [`crate::text::visible`]. No terminal code.

use crate::core::import::{BundleStatus, DroppedEntry, ImportReport, ImportStatus, Refusal};
use crate::core::verify::{BoundedReport, Finding, LogTally, Report, SignatureState, Unwaivable};
use crate::text::visible as safe;

fn short(link: &str) -> String {
    link.chars().take(16).collect()
}

/// The human summary of an import report, one line per element: what `airlock jobs import` prints
/// (dry run, import, verify-only) and what the console's merge preview shows. `show` caps the
/// listed new entries, duplicates and dropped entries.
pub fn import_lines(r: &ImportReport, show: usize) -> Vec<String> {
    let mut out = Vec::new();
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
    out.push(format!(
        "{verdict}  tenant {tenant}: {} bundle(s), {} entries: {} new, {} duplicate(s), {} conflict(s), {} dropped",
        t.bundles, t.entries, t.new, t.duplicates, t.conflicts, t.dropped
    ));
    bundle_lines(&mut out, r);
    chain_lines(&mut out, r);
    refusal_lines(&mut out, r);
    conflict_lines(&mut out, r);
    planned_lines(&mut out, r, show);
    duplicate_lines(&mut out, r, show);
    dropped_lines(&mut out, r, show);
    snapshot_lines(&mut out, r);
    if let Some(c) = &r.clock {
        out.push(format!("local clock now at {}", safe(c)));
    }
    out
}

/// One line per input bundle.
fn bundle_lines(out: &mut Vec<String>, r: &ImportReport) {
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
        out.push(format!(
            "  {}  bundle {}  {} entries  {} new  {} dup  {} dropped  signature {}  [{state}]",
            safe(&b.file),
            safe(&b.bundle_id),
            b.entries,
            b.new_entries,
            b.duplicates,
            b.dropped,
            b.verification.checks.signature
        ));
    }
}

/// The chain before and after.
fn chain_lines(out: &mut Vec<String>, r: &ImportReport) {
    let c = &r.chain;
    match r.status {
        ImportStatus::Imported => out.push(format!(
            "chain: {} -> {} entries, head {} ({})",
            c.length_before,
            c.length,
            c.head.as_deref().unwrap_or("-"),
            safe(c.head_hlc.as_deref().unwrap_or("-"))
        )),
        ImportStatus::Planned => out.push(format!(
            "chain would go {} -> {} entries, new head {}",
            c.length_before,
            c.length,
            c.head.as_deref().unwrap_or("-")
        )),
        ImportStatus::NothingToDo => {
            out.push(format!(
                "every bundle was imported before or every entry is already in the chain; nothing written (chain: {} entries)",
                c.length
            ))
        }
        _ => {}
    }
}

/// A refusal for findings, with the findings of every bundle that has some.
fn refusal_lines(out: &mut Vec<String>, r: &ImportReport) {
    let unwaivable = r.bundles.iter().fold(Unwaivable::default(), |u, b| {
        u.or(b.verification.unwaivable_causes())
    });
    if r.refusal == Some(Refusal::Findings) && unwaivable != Unwaivable::default() {
        out.push(unwaivable_refusal(unwaivable));
        for b in r.bundles.iter().filter(|b| !b.verification.ok) {
            out.extend(verify_lines(&safe(&b.file), &b.verification));
        }
    } else if r.refusal == Some(Refusal::Findings) {
        out.push("refused: verification found problems; nothing was imported. Fix or re-export the bundles, or use --force to import only each broken log's verified prefix.".to_string());
        for b in r.bundles.iter().filter(|b| !b.verification.ok) {
            out.extend(verify_lines(&safe(&b.file), &b.verification));
        }
    } else if let Some(why) = r.nothing_to_import() {
        out.push(safe(&why).into_owned());
    }
}

/// The refusal `--force` cannot waive: each cause it has, with its own remedy.
fn unwaivable_refusal(u: Unwaivable) -> String {
    const SIGNATURE: (&str, &str) = (
        "a signature is missing, invalid or untrusted",
        "re-export the bundle signed by a trusted key, or trust its signer's key (`airlock keys trust add`)",
    );
    const HEADER: (&str, &str) = (
        "the bundle header is damaged (a header field repeated, missing or ill-typed)",
        "a damaged header names no bundle or tenant that can be trusted, so export the bundle again from its node (`airlock jobs export`) rather than edit it",
    );
    let causes: Vec<(&str, &str)> = [(u.signature, SIGNATURE), (u.header, HEADER)]
        .into_iter()
        .filter_map(|(has, cause)| has.then_some(cause))
        .collect();
    let what: Vec<&str> = causes.iter().map(|c| c.0).collect();
    let remedy: Vec<&str> = causes.iter().map(|c| c.1).collect();
    format!(
        "refused: {}; nothing was imported. --force never waives {}: {}.",
        what.join(", and "),
        if causes.len() > 1 { "these" } else { "this" },
        remedy.join("; ")
    )
}

/// A refusal for conflicts, with every side of each.
fn conflict_lines(out: &mut Vec<String>, r: &ImportReport) {
    if !r.conflicts.is_empty() {
        out.push(format!(
            "refused: {} job(s) have more than one payload; nothing was imported (--force does not override conflicts). Review the sides and fix the producer:",
            r.conflicts.len()
        ));
        for cf in &r.conflicts {
            out.push(format!("  conflict job {}", safe(&cf.job_id)));
            for s in &cf.sides {
                match &s.origin {
                    Some(o) => out.push(format!(
                        "    {} {} node {} #{} {}  payloadHash {}",
                        s.source,
                        safe(&o.file),
                        safe(&o.node_id),
                        o.index,
                        safe(&o.t_hlc),
                        s.payload_hash
                    )),
                    None => out.push(format!(
                        "    chain position {}  payloadHash {}",
                        s.chain_seq.map(|x| x.to_string()).unwrap_or("?".into()),
                        s.payload_hash
                    )),
                }
                if let Some(p) = &s.payload {
                    let p: String = p.chars().take(160).collect();
                    out.push(format!("      payload {}", safe(&p)));
                }
            }
        }
    }
}

/// A plan's new entries in chain order (the first `show`).
fn planned_lines(out: &mut Vec<String>, r: &ImportReport, show: usize) {
    if let Some(planned) = &r.new_entries {
        if !planned.is_empty() {
            out.push("new entries in chain order:".to_string());
        }
        for p in planned.iter().take(show) {
            out.push(format!(
                "  #{:<6} {}  {}  node {}  link {}",
                p.seq,
                safe(&p.t_hlc),
                safe(&p.job_id),
                safe(&p.node_id),
                short(&p.chain_link)
            ));
        }
        if planned.len() > show {
            out.push(format!(
                "  ... {} more (--show N or --json for all)",
                planned.len() - show
            ));
        }
    }
}

/// The duplicates dropped (the first `show`).
fn duplicate_lines(out: &mut Vec<String>, r: &ImportReport, show: usize) {
    if !r.duplicates.is_empty() {
        out.push("duplicates dropped:".to_string());
        for d in r.duplicates.iter().take(show) {
            let kept = match &d.kept {
                Some(k) => format!("kept {} from node {}", safe(&k.t_hlc), safe(&k.node_id)),
                None => "already in the chain".into(),
            };
            out.push(format!(
                "  {}  {}  node {} #{}  ({kept})",
                safe(&d.job_id),
                safe(&d.t_hlc),
                safe(&d.node_id),
                d.index
            ));
        }
        if r.duplicates.len() > show {
            out.push(format!("  ... {} more", r.duplicates.len() - show));
        }
    }
}

/// One dropped entry: where it came from and why it was dropped (the report and the merge screen).
pub fn dropped_line(d: &DroppedEntry) -> String {
    format!(
        "{}  node {} #{}  {}  {}  ({})",
        safe(&d.origin.file),
        safe(&d.origin.node_id),
        d.origin.index,
        safe(&d.origin.t_hlc),
        safe(&d.origin.job_id),
        safe(&d.reason)
    )
}

/// The entries dropped after a broken log's verified prefix (the first `show`).
fn dropped_lines(out: &mut Vec<String>, r: &ImportReport, show: usize) {
    let count = r.dropped_count();
    if count > 0 {
        // With --force they are dropped whatever the outcome (a refusal for nothing left to
        // import drops them too); without it only --force would drop them.
        let what = if r.forced {
            "dropped (after the verified prefix of a broken log)"
        } else {
            "would be dropped with --force"
        };
        out.push(format!("{what}:"));
        for d in r.dropped_entries().take(show) {
            match d {
                Ok(d) => out.push(format!("  {}", dropped_line(&d))),
                Err(e) => {
                    out.push(format!("  ({})", safe(&e.to_string())));
                    break;
                }
            }
        }
        if count > show {
            out.push(format!("  ... {} more", count - show));
        }
    }
}

/// The batch snapshots taken.
fn snapshot_lines(out: &mut Vec<String>, r: &ImportReport) {
    match r.snapshots.as_slice() {
        [] => {}
        [s] => out.push(format!(
            "snapshot #{}: entries {}..{} merkle root {}",
            s.id,
            s.from_seq,
            s.from_seq + s.entry_count,
            s.merkle_root
        )),
        [first, .., last] => out.push(format!(
            "{} batch snapshots taken (#{}..#{}), covering entries {}..{}; see `airlock chain tenants`",
            r.snapshots.len(),
            first.id,
            last.id,
            first.from_seq,
            last.from_seq + last.entry_count
        )),
    }
}

/// The human report of one verification (`airlock jobs verify`): verdict, checks, bundle-level
/// findings, then findings grouped per node log.
pub fn verify_lines(file: &str, r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    each_verify_line(file, r, &mut |line| out.push(line));
    out
}

/// [`verify_lines`], handing each line to `emit` as it is made (a report with a million findings
/// is printed without its text being held).
pub fn each_verify_line(file: &str, r: &Report, emit: &mut dyn FnMut(String)) {
    let by_log = r.findings_by_log();
    let tallies = by_log
        .iter()
        .map(|fs| {
            let mut t = LogTally::default();
            fs.iter().for_each(|f| t.add(f));
            t
        })
        .collect();
    let text = VerifyText {
        head: r,
        total: r.findings.len(),
        tallies,
    };
    let mut bundle_level = r.findings.iter().filter(|f| f.log.is_none());
    let mut each_in_log = |log: usize, each: &mut dyn FnMut(&Finding)| {
        by_log.get(log).into_iter().flatten().for_each(|f| each(f));
        Ok(())
    };
    // Nothing is read back: no error.
    let _ = verify_text(file, &text, &mut bundle_level, &mut each_in_log, emit);
}

/// [`each_verify_line`] of a report whose findings are partly in a temporary file (`jobs
/// verify`): the same lines, the findings read back as they are reached. Fails when they cannot
/// be read back (the lines so far were emitted).
pub fn each_bounded_verify_line(
    file: &str,
    r: &BoundedReport,
    emit: &mut dyn FnMut(String),
) -> std::io::Result<()> {
    let head = r.head();
    let text = VerifyText {
        head,
        total: r.len(),
        tallies: (0..head.log_entries.len()).map(|l| r.tally(l)).collect(),
    };
    let counts: Vec<usize> = r.own_counts().collect();
    let mut rest = r.log_findings();
    let mut bundle_level = r.front().iter().filter(|f| f.log.is_none());
    // A log's findings: the bundle's about it, then its own (the next `counts[log]` in order).
    let mut each_in_log = |log: usize, each: &mut dyn FnMut(&Finding)| {
        r.front()
            .iter()
            .filter(|f| f.log == Some(log))
            .for_each(&mut *each);
        for _ in 0..counts.get(log).copied().unwrap_or(0) {
            match rest.next() {
                Some(f) => each(&*f?),
                None => break,
            }
        }
        Ok(())
    };
    verify_text(file, &text, &mut bundle_level, &mut each_in_log, emit)
}

/// Hands the findings of log `log` to `each`, in order.
type EachInLog<'a> = dyn FnMut(usize, &mut dyn FnMut(&Finding)) -> std::io::Result<()> + 'a;

/// What the text of a report needs besides its findings.
struct VerifyText<'a> {
    /// Ids, verdict, checks, stats, logs (not its findings).
    head: &'a Report,
    /// How many findings there are.
    total: usize,
    /// Each log's tally over the findings naming it.
    tallies: Vec<LogTally>,
}

/// The lines of [`each_verify_line`]: verdict, checks, the bundle-level findings
/// (`bundle_level`), then each log's (`each_in_log(log, ..)` hands them over in order).
fn verify_text(
    file: &str,
    t: &VerifyText<'_>,
    bundle_level: &mut dyn Iterator<Item = &Finding>,
    each_in_log: &mut EachInLog<'_>,
    emit: &mut dyn FnMut(String),
) -> std::io::Result<()> {
    let mut out = Emit(emit);
    let finding_lines = |out: &mut Emit<'_>, f: &Finding| {
        for line in f.text_lines() {
            out.push(line);
        }
    };
    let r = t.head;
    let id = r.bundle_id.as_deref().map(safe).unwrap_or_default();
    let tenant = r.tenant_id.as_deref().map(safe).unwrap_or_default();
    if r.ok {
        out.push(format!(
            "OK  {file}: bundle {id}, tenant {tenant}: {} node log(s), {} entries, no findings",
            r.stats.nodes, r.stats.entries
        ));
    } else {
        out.push(format!(
            "FAILED  {file}: bundle {id}, tenant {tenant}: {} finding(s) in {} node log(s), {} entries",
            t.total,
            r.stats.nodes,
            r.stats.entries
        ));
    }
    let c = &r.checks;
    out.push(format!(
        "checks: schema {} | manifestDigest {} | chain {} | links {} | chainHead {} | signature {}",
        c.schema, c.manifest_digest, c.chain, c.links, c.chain_head, c.signature
    ));
    if let Some(signer) = &r.stats.signer {
        out.push(format!(
            "signed by {} ({})",
            safe(signer),
            safe(r.stats.signed_by.as_deref().unwrap_or(""))
        ));
    }
    let mut bundle_level = bundle_level.peekable();
    if bundle_level.peek().is_some() {
        out.push("bundle:".to_string());
        for f in bundle_level {
            finding_lines(&mut out, f);
        }
    }
    for (log, node) in r.log_nodes.iter().enumerate() {
        // A node id from the bundle: a hostile one is clipped like the findings' texts.
        let node = crate::core::verify::finding::clip(node);
        let tally = t.tallies.get(log).cloned().unwrap_or_default();
        let entries = r.log_entries.get(log).copied().unwrap_or(0);
        if tally.count == 0 {
            out.push(format!("node {} ({entries} entries): ok", safe(&node)));
            continue;
        }
        out.push(format!(
            "node {} ({entries} entries): {} finding(s)",
            safe(&node),
            tally.count
        ));
        if let Some((index, kind)) = tally.first_break {
            out.push(format!(
                "  first break at entry {index} ({kind}); entries 0..{} verify",
                tally.prefix(entries)
            ));
        }
        each_in_log(log, &mut |f| finding_lines(&mut out, f))?;
    }
    if !r.ok && r.checks.signature != SignatureState::Pass {
        out.push("note: a forgery that recomputes every hash, link, head and digest is caught only by a signature; use --require-signature with trusted keys".to_string());
    }
    Ok(())
}

/// A line sink with `push`, so the report reads the same whether collected or printed.
struct Emit<'a>(&'a mut dyn FnMut(String));

impl Emit<'_> {
    fn push(&mut self, line: String) {
        (self.0)(line)
    }
}
