//! `airlock jobs push FILE --to URL` and `airlock jobs export ... --to URL`: the connected
//! transport's client. The receiving serve imports the bundle exactly as `jobs import` would and
//! answers with the same report; the exit status is the one `jobs import` would have.

use super::output::{print_json, safe};
use super::Exit;
use crate::serve::push::{push_file, read_token_file, PushOutcome, PushRequest};
use clap::Args;
use color_eyre::eyre::eyre;
use color_eyre::Result;
use std::path::{Path, PathBuf};

/// Where and how to send.
#[derive(Debug, Clone, Default, Args)]
pub struct PushTarget {
    /// The serve that imports the bundle, e.g. http://127.0.0.1:8443.
    #[arg(long = "to", value_name = "URL")]
    pub to: Option<String>,
    /// File holding the serve's bearer token. Default: $AIRLOCK_TOKEN_FILE.
    #[arg(long, value_name = "FILE", env = "AIRLOCK_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The bundle file.
    pub file: PathBuf,
    #[command(flatten)]
    pub target: PushTarget,
    /// Import the verified prefix of broken logs (as `jobs import --force`).
    #[arg(long)]
    pub force: bool,
    /// Ask for the plan only (as `jobs import --dry-run`).
    #[arg(long, conflicts_with = "verify_only")]
    pub dry_run: bool,
    /// Ask for verification only (as `jobs import --verify-only`).
    #[arg(long)]
    pub verify_only: bool,
    /// Print the serve's report JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: PushArgs) -> Result<Exit> {
    let Some(url) = a.target.to.as_deref() else {
        return Err(eyre!("give the receiving serve with --to URL"));
    };
    let token = token(&a.target)?;
    let name = a.file.display().to_string();
    let req = PushRequest {
        url,
        token: token.as_deref(),
        name: &name,
        force: a.force,
        dry_run: a.dry_run,
        verify_only: a.verify_only,
    };
    let outcome = push_file(&a.file, &req)?;
    present(&outcome, a.json)
}

/// Sends an exported bundle (`jobs export --to`) and reports like `jobs push`.
pub fn push_exported(file: &Path, name: &str, target: &PushTarget, json: bool) -> Result<Exit> {
    let url = target.to.as_deref().unwrap_or_default();
    let token = token(target)?;
    let req = PushRequest {
        url,
        token: token.as_deref(),
        name,
        ..PushRequest::default()
    };
    present(&push_file(file, &req)?, json)
}

fn token(t: &PushTarget) -> Result<Option<String>> {
    t.token_file
        .as_deref()
        .map(read_token_file)
        .transpose()
        .map_err(|e| eyre!(e))
}

/// Prints the answer; the exit status follows `jobs import`: 0 done, 1 refused, 2 anything else.
fn present(o: &PushOutcome, json: bool) -> Result<Exit> {
    let is_report = o.status == 200 || o.status == 422;
    if !is_report {
        let message = o.body["message"].as_str().unwrap_or("no message");
        return Err(eyre!("the serve answered {}: {}", o.status, safe(message)));
    }
    if json {
        print_json(&o.body)?;
    } else {
        let b = &o.body;
        let t = &b["totals"];
        println!(
            "{} by the serve: tenant {}, {} bundle(s), {} entries, {} new, {} duplicate(s), {} conflict(s), {} dropped, {} finding(s){}",
            safe(b["status"].as_str().unwrap_or("?")),
            safe(b["tenantId"].as_str().unwrap_or("?")),
            t["bundles"], t["entries"], t["new"], t["duplicates"], t["conflicts"], t["dropped"], t["findings"],
            b["refusal"].as_str().map(|r| format!("; refused: {}", safe(r))).unwrap_or_default(),
        );
        if let Some(head) = b["chain"]["head"].as_str() {
            println!(
                "  chain head {} ({} entries)",
                safe(head),
                b["chain"]["length"]
            );
        }
    }
    Ok(if o.status == 422 {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

/// `jobs export --to URL`: exports (to `--output`, else a temporary file), then pushes the bundle.
pub fn export_then_push(ctx: &super::Ctx, mut a: super::jobs::ExportArgs) -> Result<Exit> {
    let target = std::mem::take(&mut a.push);
    let json = a.json;
    let tmp = tempfile::tempdir()?;
    let file = a
        .output
        .clone()
        .unwrap_or_else(|| tmp.path().join("bundle.json"));
    let name = a
        .output
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("export-{}.json", safe(&a.tenant)));
    a.output = Some(file.clone());
    a.json = false;
    let exit = super::jobs::export(ctx, a)?;
    if exit != Exit::Ok {
        return Ok(exit);
    }
    push_exported(&file, &name, &target, json)
}
