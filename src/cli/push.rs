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
use std::time::Duration;

/// Where and how to send.
#[derive(Debug, Clone, Default, Args)]
pub struct PushTarget {
    /// The serve that imports the bundle, e.g. http://127.0.0.1:8443.
    #[arg(long = "to", value_name = "URL")]
    pub to: Option<String>,
    /// File holding the serve's bearer token. Default: $AIRLOCK_TOKEN_FILE.
    #[arg(long, value_name = "FILE", env = "AIRLOCK_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds to wait for the serve: for it to take more of the bundle while sending (a large
    /// bundle is fine while it moves), then for its whole answer once the bundle is sent (it
    /// imports first). Connecting may take at most 10 s; an answer over 256 MiB is refused.
    #[arg(long, value_name = "SECS", env = "AIRLOCK_PUSH_TIMEOUT",
          default_value_t = crate::serve::push::DEFAULT_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..))]
    pub push_timeout: u64,
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
    // The name the serve reports and stores, as `jobs import` names a local file: escaped.
    let name = crate::core::text::visible_path(&a.file);
    let req = PushRequest {
        url,
        token: token.as_deref(),
        name: &name,
        force: a.force,
        dry_run: a.dry_run,
        verify_only: a.verify_only,
        timeout: timeout(&a.target),
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
        timeout: timeout(target),
        ..PushRequest::default()
    };
    present(&push_file(file, &req)?, json)
}

/// The --push-timeout (0, from a target not built by the parser: the default).
fn timeout(t: &PushTarget) -> Option<Duration> {
    (t.push_timeout > 0).then(|| Duration::from_secs(t.push_timeout))
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
