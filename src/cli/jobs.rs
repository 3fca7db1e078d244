//! `airlock jobs ...`: offline enqueue, bundle export, list and verify.

use super::output::{human_bytes, piped_stdin, print_json, safe};
use super::{Ctx, Exit};
use crate::core::bundle::catalog::{self, ListingKind};
use crate::core::hlc::SystemWallClock;
use crate::core::store::nodelog::{self, EnqueueOutcome, NewJob};
use crate::core::store::rules;
use crate::core::text::visible_path;
use crate::core::verify::{verify_file_bounded, VerifyOptions};
use crate::core::{file_input, paths};
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::io::BufRead;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Enqueue jobs into this node's offline log (JSON inline, @file, or - for stdin).
    Enqueue(EnqueueArgs),
    /// Export node logs as a sync bundle.
    Export(ExportArgs),
    /// List the bundles in a directory.
    List(ListArgs),
    /// Verify a bundle: every check, every finding, with the location of each break.
    Verify(VerifyArgs),
    /// Sign (or re-sign) an existing bundle without touching its logs.
    Sign(super::sign::SignArgs),
    /// Import bundles into the tenant's scheduler chain (verify, merge, append; all or nothing).
    Import(super::import::ImportArgs),
    /// Send a bundle to an `airlock serve`, which imports it as `jobs import` would.
    Push(super::push::PushArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Directory to list (default: the current directory).
    #[arg(long, short = 's', default_value = ".")]
    pub source: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The bundle file.
    pub file: PathBuf,
    /// Print the report as JSON (SPEC section 6).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trust: super::TrustArgs,
    #[command(flatten)]
    pub skew: super::SkewArgs,
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Tenant id.
    #[arg(long, short = 't')]
    pub tenant: String,
    /// Node id (default: $AIRLOCK_NODE_ID, else the host name).
    #[arg(long)]
    pub node: Option<String>,
    /// Partition key stored with each job.
    #[arg(long)]
    pub partition_key: Option<String>,
    /// Idempotency key: the job id derives from it instead of the payload.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// Enqueue one payload per line of FILE (- for stdin), all in one transaction.
    #[arg(long, value_name = "FILE", conflicts_with = "payload")]
    pub jsonl: Option<String>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// The payload: JSON text, @FILE, or - for stdin.
    #[arg(required_unless_present = "jsonl")]
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Tenant id.
    #[arg(long, short = 't', default_value = "default")]
    pub tenant: String,
    /// Output file (default: stdout).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Export only this node's log (default: every node log of the tenant).
    #[arg(long)]
    pub node: Option<String>,
    /// Print the result summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Print per-node details.
    #[arg(long)]
    pub verbose: bool,
    /// Sign the bundle (key: --key, else $AIRLOCK_SIGNING_KEY, else `airlock keys default`).
    #[arg(long)]
    pub sign: bool,
    /// Private key to sign with, PKCS#8 PEM (implies --sign).
    #[arg(long, value_name = "KEY.pem")]
    pub key: Option<PathBuf>,
    /// Also write the standard DSSE envelope JSON of the signature to FILE (needs --sign or --key).
    #[arg(long, value_name = "FILE")]
    pub dsse_out: Option<PathBuf>,
    /// Write a portable export, DIR/export-portable-bundle-v1.tgz (-o names the directory), and
    /// record its export.airgap.ready.v1 emission (SPEC section 10).
    #[arg(long, requires = "output", conflicts_with = "dsse_out")]
    pub portable: bool,
    /// Also send the bundle to this `airlock serve` (connected transport); see `jobs push`.
    #[command(flatten)]
    pub push: super::push::PushTarget,
}

pub fn run(ctx: &Ctx, cmd: JobsCommand) -> Result<Exit> {
    match cmd {
        JobsCommand::Enqueue(a) => enqueue(ctx, a),
        JobsCommand::Export(a) => export(ctx, a),
        JobsCommand::List(a) => list(a),
        JobsCommand::Verify(a) => verify(ctx, a),
        JobsCommand::Sign(a) => super::sign::run(ctx, a),
        JobsCommand::Import(a) => super::import::run(ctx, a),
        JobsCommand::Push(a) => super::push::run(a),
    }
}

/// How to give `jobs enqueue` its input when standard input is a terminal.
const STDIN_HINT: &str = "pipe the input in (`... | airlock jobs enqueue --tenant T -`) or redirect it from a file, or give the payload as an argument or @FILE";

fn read_source(spec: &str) -> Result<(String, String)> {
    if spec == "-" {
        let stdin = piped_stdin("reading the payload from stdin", STDIN_HINT)?;
        let bytes = file_input::read_capped(stdin.lock(), file_input::MAX_PAYLOAD_BYTES)
            .wrap_err("reading the payload from stdin")?;
        let s = String::from_utf8(bytes).map_err(|e| {
            eyre!(
                "the payload on stdin is not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            )
        })?;
        Ok((s, "stdin".into()))
    } else if let Some(path) = spec.strip_prefix('@') {
        let bytes = file_input::read_regular_capped(Path::new(path), file_input::MAX_PAYLOAD_BYTES)
            .wrap_err_with(|| format!("reading payload file {}", safe(path)))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            eyre!(
                "payload file {} is not UTF-8 (invalid byte at offset {})",
                safe(path),
                e.utf8_error().valid_up_to()
            )
        })?;
        Ok((text, format!("payload file {}", safe(path))))
    } else {
        Ok((spec.to_string(), "payload argument".into()))
    }
}

fn enqueue(ctx: &Ctx, a: EnqueueArgs) -> Result<Exit> {
    let node = paths::node_id(a.node.as_deref());
    let mut jobs = Vec::new();
    if let Some(src) = &a.jsonl {
        let (reader, name): (Box<dyn BufRead>, String) = if src == "-" {
            let stdin = piped_stdin("--jsonl -", STDIN_HINT)?;
            (Box::new(stdin.lock()), "stdin".into())
        } else {
            let f = file_input::open_regular(Path::new(src))
                .wrap_err_with(|| format!("opening {}", safe(src)))?;
            (Box::new(std::io::BufReader::new(f)), safe(src).into_owned())
        };
        let mut reader = reader;
        let mut bytes_read: u64 = 0;
        for i in 0usize.. {
            let Some(line) =
                file_input::read_line_capped(&mut reader, file_input::MAX_PAYLOAD_BYTES)
                    .wrap_err_with(|| format!("reading line {} of {name}", i + 1))?
            else {
                break;
            };
            // The whole input is held until the one transaction: bounded, so an endless stream
            // (`yes '{}' | airlock jobs enqueue --jsonl -`) ends in an error, not out of memory.
            bytes_read = bytes_read.saturating_add(line.len() as u64 + 1);
            if i == file_input::MAX_JSONL_LINES {
                return Err(eyre!(
                    "{name} has more than {} lines, the limit of one --jsonl call; nothing was enqueued. Split it into smaller files and enqueue each (one transaction per call)",
                    file_input::MAX_JSONL_LINES
                ));
            }
            if bytes_read > file_input::MAX_JSONL_BYTES {
                return Err(eyre!(
                    "{name} is larger than the {} limit of one --jsonl call (at line {}); nothing was enqueued. Split it into smaller files and enqueue each (one transaction per call)",
                    file_input::human_limit(file_input::MAX_JSONL_BYTES),
                    i + 1
                ));
            }
            let line = String::from_utf8(line).map_err(|e| {
                eyre!(
                    "line {} of {name} is not UTF-8 (invalid byte at column {})",
                    i + 1,
                    e.utf8_error().valid_up_to() + 1
                )
            })?;
            if line.trim().is_empty() {
                continue;
            }
            if jobs.len() == file_input::MAX_JSONL_JOBS {
                return Err(eyre!(
                    "{name} holds more than {} jobs, the limit of one --jsonl call (line {} is one too many); nothing was enqueued. Split it into smaller files and enqueue each (one transaction per call)",
                    file_input::MAX_JSONL_JOBS,
                    i + 1
                ));
            }
            jobs.push(NewJob {
                payload_json: line,
                partition_key: a.partition_key.clone(),
                idempotency_key: None,
                origin: format!("line {} of {name}", i + 1),
            });
        }
        if a.idempotency_key.is_some() {
            return Err(eyre!(
                "--idempotency-key applies to one payload; it cannot be combined with --jsonl"
            ));
        }
    } else {
        let (text, origin) = read_source(a.payload.as_deref().unwrap_or("-"))?;
        jobs.push(NewJob {
            payload_json: text,
            partition_key: a.partition_key.clone(),
            idempotency_key: a.idempotency_key.clone(),
            origin,
        });
    }
    let store = ctx.open_any_store()?;
    let outcomes = rules::enqueue(&store, &a.tenant, &node, &jobs, SystemWallClock)?;
    if a.json {
        print_json(&serde_json::json!({
            "tenantId": a.tenant,
            "nodeId": node,
            "results": outcomes,
        }))?;
    } else {
        for o in &outcomes {
            match o {
                EnqueueOutcome::Enqueued {
                    index,
                    job_id,
                    t_hlc,
                    ..
                } => {
                    println!("enqueued  #{index:<6} {job_id}  {}", safe(t_hlc))
                }
                EnqueueOutcome::Duplicate {
                    job_id,
                    existing_index,
                } => {
                    println!(
                        "duplicate {job_id} is already entry #{existing_index}; not enqueued again"
                    )
                }
            }
        }
        let n = outcomes
            .iter()
            .filter(|o| matches!(o, EnqueueOutcome::Enqueued { .. }))
            .count();
        println!(
            "{n} enqueued, {} duplicate(s) for tenant {} on node {}",
            outcomes.len() - n,
            safe(&a.tenant),
            safe(&node)
        );
    }
    Ok(Exit::Ok)
}

fn export(ctx: &Ctx, a: ExportArgs) -> Result<Exit> {
    if a.portable && a.push.to.is_some() {
        return Err(eyre!(
            "--portable writes an archive for the air gap; --to pushes a plain bundle: use one of them"
        ));
    }
    if a.push.to.is_some() {
        return export_then_push(ctx, a);
    }
    if a.portable {
        let p = super::portable::ExportParams {
            tenant: a.tenant,
            node: a.node,
            output: a.output,
            sign: a.sign,
            key: a.key,
            json: a.json,
        };
        return super::portable::export(ctx, p);
    }
    let signing = if a.sign || a.key.is_some() {
        crate::core::trust::check_dsse_target(a.dsse_out.as_deref(), a.output.as_deref())?;
        Some(crate::core::trust::BundleHeaderSigner::new(
            super::sign::load_key_for_signing(a.key.as_deref())?.key,
        ))
    } else if a.dsse_out.is_some() {
        return Err(eyre!(
            "--dsse-out writes the signature's envelope: add --sign (or --key KEY.pem)"
        ));
    } else {
        None
    };
    // The envelope's path is checked (and its file made) before the bundle is written.
    let dsse = match (&a.dsse_out, &signing) {
        (Some(d), Some(_)) => Some(crate::core::trust::DsseOut::prepare(
            d,
            a.output.as_deref(),
        )?),
        _ => None,
    };
    let sign_fn = signing.as_ref().map(|s| s.signer());
    let signer: Option<nodelog::HeaderSigner<'_>> =
        sign_fn.as_ref().map(|f| f as nodelog::HeaderSigner<'_>);
    let store = ctx.open_store_for_reading()?;
    let created_by = paths::node_id(None);
    let summary = match &a.output {
        Some(path) => {
            let mut tmp = crate::core::file_output::AtomicFile::create(path)?;
            let s = rules::export(
                &store,
                &a.tenant,
                a.node.as_deref(),
                &created_by,
                tmp.writer(),
                signer,
            )?;
            tmp.commit()?;
            s
        }
        None => {
            let stdout = std::io::stdout();
            let out = std::io::BufWriter::new(stdout.lock());
            rules::export(
                &store,
                &a.tenant,
                a.node.as_deref(),
                &created_by,
                out,
                signer,
            )?
        }
    };
    if let (Some(d), Some(s)) = (dsse, &signing) {
        if let Some(h) = s.signed_header() {
            d.write(&h)?;
        }
    }
    if a.json {
        if a.output.is_some() {
            print_json(&summary)?;
        }
    } else if a.output.is_some() || a.verbose {
        let dest = a
            .output
            .as_ref()
            .map(|p| visible_path(p))
            .unwrap_or_else(|| "stdout".into());
        eprintln!(
            "exported bundle {} for tenant {}: {} node log(s), {} entries, {} -> {dest}",
            summary.bundle_id,
            safe(&summary.tenant_id),
            summary.nodes.len(),
            summary.entries,
            human_bytes(summary.bytes)
        );
        if let Some(by) = &summary.signed_by {
            eprintln!("  signed by key {}", safe(by));
        }
        if let Some(d) = &a.dsse_out {
            eprintln!("  DSSE envelope -> {}", visible_path(d));
        }
        if a.verbose {
            for n in &summary.nodes {
                eprintln!(
                    "  {}: {} entries, last {}, head {}",
                    safe(&n.node_id),
                    n.entries,
                    safe(&n.last_hlc),
                    n.chain_head
                );
            }
            eprintln!("  manifest {}", summary.manifest_digest);
        }
    }
    Ok(Exit::Ok)
}

fn list(a: ListArgs) -> Result<Exit> {
    let listings = catalog::scan_dir(&a.source)?;
    if a.json {
        print_json(&listings)?;
        return Ok(Exit::Ok);
    }
    if listings.is_empty() {
        println!("no files in {}", visible_path(&a.source));
        return Ok(Exit::Ok);
    }
    println!(
        "{:<28} {:<36} {:<12} {:>5} {:>9} {:<24} {:<8} {:>9}",
        "FILE", "BUNDLE", "TENANT", "NODES", "ENTRIES", "CREATED", "SIGNED", "SIZE"
    );
    for l in &listings {
        match &l.kind {
            ListingKind::Bundle {
                bundle_id,
                tenant_id,
                nodes,
                entries,
                created_at,
                signed,
                ..
            } => println!(
                "{:<28} {:<36} {:<12} {:>5} {:>9} {:<24} {:<8} {:>9}",
                super::portable::file_label(&l.file, l.portable),
                safe(bundle_id),
                safe(tenant_id),
                nodes,
                entries,
                safe(created_at),
                if *signed { "signed" } else { "unsigned" },
                human_bytes(l.size)
            ),
            ListingKind::NotBundle { reason, cause } => println!(
                "{:<28} !! {}: {}  ({})",
                safe(&l.file),
                cause.label(),
                safe(reason),
                human_bytes(l.size)
            ),
        }
    }
    let bundles = listings.iter().filter(|l| l.is_bundle()).count();
    println!(
        "{bundles} bundle(s), {} other file(s)",
        listings.len() - bundles
    );
    Ok(Exit::Ok)
}

fn verify(ctx: &Ctx, a: VerifyArgs) -> Result<Exit> {
    let skew = ctx.max_clock_skew(&a.skew)?;
    if crate::core::notify::is_portable_file(&a.file) {
        return super::portable::verify(&a.file, a.json, &a.trust, skew);
    }
    let trust = a.trust.trust()?;
    let mut opts = VerifyOptions::trusting(&trust, a.trust.signature_required()?);
    opts.max_clock_skew = Some(skew);
    let shown = visible_path(&a.file);
    // The findings past a memory budget wait in a temporary file (a damaged bundle may have one
    // for every entry) and are read back as the report is printed.
    let report = verify_file_bounded(&a.file, &opts).map_err(|e| eyre!("{shown}: {e}"))?;
    if a.json {
        print_json(&report)?;
    } else {
        let mut read_back = Ok(());
        super::output::print_lines(|emit| {
            read_back = crate::report_text::each_bounded_verify_line(&shown, &report, emit);
        })?;
        read_back.map_err(|e| eyre!("{shown}: {e}"))?;
    }
    Ok(if report.ok() { Exit::Ok } else { Exit::Failed })
}

/// `jobs export --to URL`: exports (to `--output`, else a temporary file), then pushes the bundle.
fn export_then_push(ctx: &Ctx, mut a: ExportArgs) -> Result<Exit> {
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
        .map(|p| crate::core::text::visible_path(p))
        .unwrap_or_else(|| format!("export-{}.json", safe(&a.tenant)));
    a.output = Some(file.clone());
    a.json = false;
    let exit = export(ctx, a)?;
    if exit != Exit::Ok {
        return Ok(exit);
    }
    super::push::push_exported(&file, &name, &target, json)
}
