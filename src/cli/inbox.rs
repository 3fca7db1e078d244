//! `airlock inbox scan DIR`: the drop-directory inbox for a host without a console. Lists each
//! file with its state (still copying, or settled and verified: ok, findings, not a bundle) and
//! how many files each decision folder holds. The rules are `core::inbox`'s; decisions are made
//! in the console (`airlock console --inbox DIR`).

use super::output::{print_json, safe};
use super::Exit;
use crate::core::bundle::catalog::ListingKind;
use crate::core::inbox::{self, FileState};
use crate::core::text::visible_path as shown;
use crate::core::verify::VerifyOptions;
use clap::{Args, Subcommand};
use color_eyre::Result;
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// List the inbox: each file still copying or settled and verified, and the decision
    /// folders' counts. A symbolic link, FIFO, socket or device in the inbox is listed as
    /// `refused` with what it is and why, and left where it is: never opened, never followed.
    /// Exit 0, or 2 when the folder cannot be read.
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
    let listed = inbox::scan_twice(&a.dir, settle)
        .and_then(|f| inbox::odd_entries(&a.dir).map(|odd| (f, odd)));
    let (files, odd) = match listed {
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
                "file": shown(&f.path),
                "state": f.state,
                "size": f.stamp.size,
                "verdict": (f.state == FileState::Settled).then_some(word),
                "findings": findings,
                "reason": reason,
            })
        })
        .chain(odd.iter().map(|o| {
            json!({
                "file": shown(&o.path),
                "state": "refused",
                "size": 0,
                "verdict": o.kind.word(),
                "findings": 0,
                "reason": o.reason,
            })
        }))
        .collect();
    let filed = inbox::filed_counts(&a.dir);
    if a.json {
        let folders: serde_json::Map<String, serde_json::Value> = filed
            .iter()
            .map(|(d, n)| (d.folder().to_string(), json!(n)))
            .collect();
        print_json(&json!({ "dir": shown(&a.dir), "files": rows, "filed": folders }))?;
        return Ok(Exit::Ok);
    }
    println!(
        "inbox {} · {} file(s) · settle {} ms",
        safe(&shown(&a.dir)),
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
        // The name as the JSON shows it (bytes that are not UTF-8 as \xNN), without the folder.
        let path = r["file"].as_str().unwrap_or_default();
        let file = path.rsplit('/').next().unwrap_or(path);
        let refused = r["state"] == "refused";
        let size = match refused {
            true => "-".to_string(),
            false => crate::format::human_bytes(r["size"].as_u64().unwrap_or(0)),
        };
        println!(
            "{:<9} {:<16} {:>10}  {}",
            r["state"].as_str().unwrap_or_default(),
            verdict,
            size,
            safe(file)
        );
        if let (true, Some(why)) = (refused, r["reason"].as_str()) {
            println!("{:<9} {}", "", safe(why));
        }
    }
    let counts: Vec<String> = filed
        .iter()
        .map(|(d, n)| format!("{}/ {n}", d.folder()))
        .collect();
    println!("filed: {}", counts.join(" · "));
    Ok(Exit::Ok)
}
