//! `airlock triage verify FILE`: checks a triage report written by the console (`E` on Chain,
//! Merge preview or Scheduler): the DSSE envelope's signature against the trust store, and for a
//! `.md` file that it is exactly what the signed JSON beside it renders.

use super::output::{print_json, safe};
use super::Exit;
use crate::core::trust::SignatureCheck;
use clap::{Args, Subcommand};
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum TriageCommand {
    /// Verify a triage report (.json envelope, or .md against the .json beside it): exit 0 when
    /// signed by a trusted key (and the Markdown unaltered), 1 when not, 2 when unreadable.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The report: `triage-….json` or `triage-….md`.
    pub file: PathBuf,
    /// The trust store to check the signature against (default: the user's trust store).
    #[arg(long, value_name = "FILE")]
    pub trust_store: Option<PathBuf>,
    /// Trust this public key (SPKI PEM) for this run too; repeatable.
    #[arg(long = "trusted-key", value_name = "PUB.pem")]
    pub trusted_keys: Vec<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: TriageCommand) -> Result<Exit> {
    let TriageCommand::Verify(a) = cmd;
    let mut trust = match &a.trust_store {
        Some(p) => crate::core::trust::TrustStore::open(p)?.trust_set(),
        None => crate::core::trust::TrustSet::load_default()?,
    };
    for k in &a.trusted_keys {
        trust.add_key_file(k)?;
    }
    let v = match crate::core::triage::verify_file(&a.file, &trust) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}", safe(&e.to_string()));
            return Ok(Exit::Usage);
        }
    };
    let signature = match &v.signature {
        SignatureCheck::Valid { key_id, signer } => {
            format!("signed by {} (key {key_id})", safe(signer))
        }
        SignatureCheck::Invalid { key_id, reason } => {
            format!("signature INVALID (key {}): {}", safe(key_id), safe(reason))
        }
        SignatureCheck::Untrusted { key_id } => {
            format!("signed by an untrusted key {}", safe(key_id))
        }
        SignatureCheck::Absent => "unsigned: nothing vouches for it".to_string(),
    };
    if a.json {
        print_json(&serde_json::json!({
            "ok": v.ok(),
            "signature": v.signature.status_word(),
            "markdownMatches": v.markdown_matches,
            "report": v.report,
        }))?;
    } else {
        let r = &v.report;
        println!(
            "{}: triage report of {} {} · verdict {} · decision {} · {} finding(s), {} conflict(s)",
            if v.ok() { "OK" } else { "FAILED" },
            serde_json::to_value(r.subject)
                .ok()
                .and_then(|s| s.as_str().map(str::to_string))
                .unwrap_or_default(),
            r.inputs
                .iter()
                .map(|i| safe(i).into_owned())
                .collect::<Vec<_>>()
                .join(", "),
            safe(&r.verdict),
            safe(&r.decision.action),
            r.findings.len(),
            r.conflicts.len()
        );
        println!("  {signature}");
        println!("  by {} at {}", safe(&r.operator), safe(&r.created_at));
        if v.markdown_matches == Some(false) {
            println!("  the Markdown differs from what the signed report renders: it was edited");
        }
    }
    Ok(if v.ok() { Exit::Ok } else { Exit::Failed })
}
