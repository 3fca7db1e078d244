//! `airlock inbox scan DIR`: the drop-directory inbox for a host without a console. Lists each
//! file with its state (still copying, or settled and verified: ok, findings, not a bundle) and
//! how many files each decision folder holds. The rules are `core::inbox`'s; decisions are made
//! in the console (`airlock console --inbox DIR`).

use super::output::{print_json, safe};
use super::Exit;
use crate::core::bundle::catalog::ListingKind;
use crate::core::inbox::{self, FileState};
use crate::core::verify::VerifyOptions;
use clap::{Args, Subcommand};
use color_eyre::Result;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// List the inbox: each file still copying or settled and verified, and the decision
    /// folders' counts. Exit 0, or 2 when the folder cannot be read.
    Scan(ScanArgs),
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// The inbox folder.
    pub dir: PathBuf,
    /// How long a file's size and time must stay unchanged to count as settled, in ms (the
    /// scan looks twice, this far apart).
    #[arg(long, value_name = "MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub settle_ms: u64,
    /// Trust this public key (SPKI PEM) for this run too; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB.pem")]
    pub trusted_keys: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// One settled file's verification in words: (verdict word, findings, reason).
fn verdict(path: &std::path::Path, opts: &VerifyOptions<'_>) -> (String, usize, Option<String>) {
    let examined = crate::core::bundle::index::examine(path, opts, None);
    match (&examined.listing.kind, &examined.index) {
        (ListingKind::NotBundle { reason, cause }, _) => {
            (cause.label().to_string(), 0, Some(reason.clone()))
        }
        (_, Some(ix)) if ix.report.ok => ("ok".into(), 0, None),
        (_, Some(ix)) => ("findings".into(), ix.report.findings.len(), None),
        (_, None) => ("unreadable".into(), 0, None),
    }
}

pub fn run(cmd: InboxCommand) -> Result<Exit> {
    let InboxCommand::Scan(a) = cmd;
    let trust = super::trust_for_run(&a.trusted_keys)?;
    let settle = std::time::Duration::from_millis(a.settle_ms);
    let files = match inbox::scan_twice(&a.dir, settle) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {}", safe(&e.to_string()));
            return Ok(Exit::Usage);
        }
    };
    // The verdicts are the ones an import would meet: under the signature policy (the environment,
    // the trust store), an unsigned bundle is `signature-missing`, not ok.
    let required = crate::core::trust::policy::effective_policy(false)?.require_signature;
    let opts = VerifyOptions::trusting(&trust, required);
    let rows: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            let (word, findings, reason) = match f.state {
                FileState::Copying => ("-".to_string(), 0, None),
                FileState::Settled => verdict(&f.path, &opts),
            };
            json!({
                "file": f.path.display().to_string(),
                "state": f.state,
                "size": f.stamp.size,
                "verdict": (f.state == FileState::Settled).then_some(word),
                "findings": findings,
                "reason": reason,
            })
        })
        .collect();
    let filed = inbox::filed_counts(&a.dir);
    if a.json {
        let folders: serde_json::Map<String, serde_json::Value> = filed
            .iter()
            .map(|(d, n)| (d.folder().to_string(), json!(n)))
            .collect();
        print_json(
            &json!({ "dir": a.dir.display().to_string(), "files": rows, "filed": folders }),
        )?;
        return Ok(Exit::Ok);
    }
    println!(
        "inbox {} · {} file(s) · settle {} ms",
        safe(&a.dir.display().to_string()),
        rows.len(),
        a.settle_ms
    );
    println!("{:<9} {:<16} {:>10}  FILE", "STATE", "VERDICT", "SIZE");
    for r in &rows {
        let verdict = match (r["verdict"].as_str(), r["findings"].as_u64()) {
            (Some("findings"), Some(n)) => format!("{n} finding(s)"),
            (Some(w), _) => w.to_string(),
            (None, _) => "waiting".to_string(),
        };
        let file = std::path::Path::new(r["file"].as_str().unwrap_or_default())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{:<9} {:<16} {:>10}  {}",
            r["state"].as_str().unwrap_or_default(),
            verdict,
            crate::format::human_bytes(r["size"].as_u64().unwrap_or(0)),
            safe(&file)
        );
    }
    let counts: Vec<String> = filed
        .iter()
        .map(|(d, n)| format!("{}/ {n}", d.folder()))
        .collect();
    println!("filed: {}", counts.join(" · "));
    Ok(Exit::Ok)
}
