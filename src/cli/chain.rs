//! `airlock chain ...`: the tenant scheduler chains: show, verify, snapshot, prove, verify-proof,
//! append (lifecycle actions) and tenants.

use super::output::{print_json, safe};
use super::{Ctx, Exit};
use crate::core::chain::Action;
use crate::core::hlc::SystemWallClock;
use crate::core::paths;
use crate::core::store::rules;
use crate::core::store::scheduler::{self, InclusionProof, DEFAULT_BATCH_SIZE};
use crate::core::text::visible_path;
use crate::text::untrusted;
use clap::{Args, Subcommand};
use color_eyre::eyre::{eyre, WrapErr};
use color_eyre::Result;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum ChainCommand {
    /// List the tenants with a scheduler chain: head, length, last snapshot.
    Tenants(TenantsArgs),
    /// Show chain entries in order with their links and provenance.
    Show(ShowArgs),
    /// Recompute every link, the stored head and every snapshot root, and check every snapshot's
    /// signature against the trust store.
    ///
    /// A snapshot whose DSSE envelope does not verify (or is malformed, e.g. `"signatures": []`)
    /// is a `signature-invalid` finding, one signed by a key not in the trust store (nor given with
    /// --trusted-key) `signer-untrusted`, and, when a signature is required, an unsigned one
    /// `signature-missing`; each names the tenant, the snapshot id and the entries it covers. Exit
    /// 0 when everything verifies, 1 with findings, 2 for usage or store errors.
    Verify(VerifyArgs),
    /// Take a batch snapshot of the entries not yet covered by one.
    Snapshot(SnapshotArgs),
    /// Print an RFC 9162 inclusion proof of a job's chain link in its snapshot.
    Prove(ProveArgs),
    /// Check an inclusion proof file offline.
    VerifyProof(VerifyProofArgs),
    /// Append a lifecycle action (DEQUEUE, EXECUTE, COMPLETE, FAIL) for a known job.
    Append(AppendArgs),
}

#[derive(Debug, Args)]
pub struct TenantsArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Tenant id.
    #[arg(long, short = 't')]
    pub tenant: String,
    /// Print JSON: the findings, and per snapshot its root check and `signature` (pass, fail,
    /// absent or untrusted) with `signedBy`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trust: super::TrustArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[arg(long, short = 't')]
    pub tenant: String,
    #[arg(long)]
    pub json: bool,
    /// First chain position to show.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// How many entries to show (1 or more).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[arg(long, short = 't')]
    pub tenant: String,
    /// Entries per snapshot (the uncovered tail is cut into batches of this size, the last partial).
    #[arg(long, env = "AIRLOCK_BATCH_SIZE", default_value_t = DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    #[arg(long)]
    pub json: bool,
    /// Sign each snapshot: a DSSE envelope over its JCS statement.
    #[arg(long)]
    pub sign: bool,
    /// Private key, PKCS#8 PEM (default: $AIRLOCK_SIGNING_KEY, else the key set with `airlock keys default`).
    #[arg(long, value_name = "KEY.pem", requires = "sign")]
    pub key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProveArgs {
    #[arg(long, short = 't')]
    pub tenant: String,
    /// The job whose ENQUEUE entry is proven.
    #[arg(long)]
    pub job_id: String,
    /// Print the proof as JSON (the format `chain verify-proof` reads).
    #[arg(long)]
    pub json: bool,
    /// Also write the proof JSON to this file (written atomically). An existing file is refused
    /// unless --force is given.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Replace the --output file when it exists.
    #[arg(long, requires = "output")]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct VerifyProofArgs {
    /// A proof written by `chain prove --json` or `--output`; `-` or /dev/stdin reads it from
    /// standard input (a pipe or a redirected file, at most 16 MiB). Other paths must be regular
    /// files: a FIFO or device given by name is refused.
    pub file: PathBuf,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub trust: super::TrustArgs,
}

#[derive(Debug, Args)]
pub struct AppendArgs {
    #[arg(long, short = 't')]
    pub tenant: String,
    #[arg(long)]
    pub job_id: String,
    /// DEQUEUE, EXECUTE, COMPLETE or FAIL.
    #[arg(long)]
    pub action: Action,
    /// This machine's node id (default: $AIRLOCK_NODE_ID, else the host name).
    #[arg(long)]
    pub node: Option<String>,
    #[arg(long, env = "AIRLOCK_BATCH_SIZE", default_value_t = DEFAULT_BATCH_SIZE,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    #[arg(long)]
    pub json: bool,
}

pub fn run(ctx: &Ctx, cmd: ChainCommand) -> Result<Exit> {
    match cmd {
        ChainCommand::Tenants(a) => tenants(ctx, a),
        ChainCommand::Show(a) => show(ctx, a),
        ChainCommand::Verify(a) => verify(ctx, a),
        ChainCommand::Snapshot(a) => snapshot(ctx, a),
        ChainCommand::Prove(a) => prove(ctx, a),
        ChainCommand::VerifyProof(a) => verify_proof(a),
        ChainCommand::Append(a) => append(ctx, a),
    }
}

fn tenants(ctx: &Ctx, a: TenantsArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let list = rules::tenants(&store)?;
    if a.json {
        print_json(&list)?;
        return Ok(Exit::Ok);
    }
    if list.is_empty() {
        println!("no scheduler chains yet; import bundles with `airlock jobs import`");
    }
    for t in &list {
        let snap = match &t.last_snapshot {
            Some(s) => format!(
                "last snapshot #{} up to entry {}",
                s.id,
                s.from_seq + s.entry_count
            ),
            None => "no snapshot".into(),
        };
        let damaged = match t.damaged_snapshots.as_slice() {
            [] => String::new(),
            ids => format!(
                "; damaged snapshot row(s) {} (`airlock chain verify --tenant {}` shows them)",
                ids.iter()
                    .map(|i| format!("#{i}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                untrusted(&t.tenant)
            ),
        };
        println!(
            "{}  {} entries  head {} ({})  {snap}, {} unsnapshotted{damaged}",
            untrusted(&t.tenant),
            t.length,
            untrusted(&t.head),
            untrusted(&t.head_hlc),
            t.unsnapshotted
        );
    }
    Ok(Exit::Ok)
}

fn show(ctx: &Ctx, a: ShowArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    // A tenant without a chain (a mistyped id) is an error, as for `chain verify`.
    let (head, entries) = rules::show_chain(&store, &a.tenant, a.from, a.limit)?;
    if a.json {
        print_json(&serde_json::json!({
            "tenantId": a.tenant,
            "head": head,
            "from": a.from,
            "entries": entries,
        }))?;
        return Ok(Exit::Ok);
    }
    match &head {
        Some(head) => println!(
            "tenant {}: {} entries, head {} ({})",
            safe(&a.tenant),
            head.length,
            untrusted(&head.head_chain_link),
            untrusted(&head.head_hlc)
        ),
        None => println!(
            "tenant {}: entries without a stored head (`airlock chain verify --tenant` reports it)",
            safe(&a.tenant)
        ),
    }
    for e in &entries {
        println!(
            "#{:<6} {:<32} {} {:<8} prev {}  link {}",
            e.seq,
            safe(&e.t_hlc),
            safe(&e.job_id),
            safe(&e.action),
            e.prev_chain_link
                .as_deref()
                .map(|p| safe(p).chars().take(16).collect::<String>())
                .unwrap_or_else(|| "genesis".into()),
            safe(&e.chain_link).chars().take(16).collect::<String>()
        );
        if let Some(p) = &e.provenance {
            println!(
                "        from bundle {} ({}), node {}, original link {}{}",
                safe(&p.bundle_id),
                safe(&p.file_name),
                safe(&p.source_node),
                untrusted(&p.original_link),
                p.partition_key
                    .as_deref()
                    .map(|k| format!(", partition {}", safe(k)))
                    .unwrap_or_default()
            );
        }
    }
    let length = head
        .as_ref()
        .map_or(a.from.saturating_add(entries.len() as u64), |h| h.length);
    if entries.is_empty() && head.is_some() && a.from >= length {
        println!(
            "--from {} is past the chain's end: its entries are seq 0 to {}",
            a.from,
            length.saturating_sub(1)
        );
    }
    let shown_to = a.from.saturating_add(entries.len() as u64);
    if shown_to < length {
        println!("... {} more (--from {shown_to})", length - shown_to);
    }
    Ok(Exit::Ok)
}

fn verify(ctx: &Ctx, a: VerifyArgs) -> Result<Exit> {
    use crate::core::chain::verify::{verify_existing_chain_trusting, SnapshotTrust};
    let trust = a.trust.trust()?;
    let require_signature = a.trust.signature_required()?;
    let store = ctx.open_store_for_reading()?;
    // A tenant without a chain (a mistyped id) is an error, not a chain that verifies.
    let r = verify_existing_chain_trusting(
        &store,
        &a.tenant,
        None,
        SnapshotTrust {
            trust: &trust,
            require_signature,
        },
    )?;
    if a.json {
        print_json(&r)?;
        return Ok(if r.ok { Exit::Ok } else { Exit::Failed });
    }
    let snaps_ok = r.snapshots.iter().filter(|s| s.ok).count();
    let signed = r.signed_by_trusted_key();
    if r.ok {
        println!(
            "OK  tenant {}: {} entries, every link and the head verify; {} snapshot root(s) verify, {} signed by a trusted key{}",
            safe(&a.tenant),
            r.length,
            snaps_ok,
            signed,
            if signed < snaps_ok {
                " (an unsigned snapshot's root is only as trustworthy as this store)"
            } else {
                ""
            }
        );
    } else {
        println!(
            "FAILED  tenant {}: {} entries, {} finding(s), {} of {} snapshot(s) fail",
            safe(&a.tenant),
            r.length,
            r.findings.len(),
            r.snapshots.len() - snaps_ok,
            r.snapshots.len()
        );
        if let Some(first) = r.findings.iter().find(|f| f.index.is_some()) {
            println!(
                "  first break at chain position {} ({})",
                first.index.unwrap_or(0),
                first.kind
            );
        }
        for line in r.findings.iter().flat_map(|f| f.text_lines()) {
            println!("{line}");
        }
        for s in r.snapshots.iter().filter(|s| !s.ok) {
            let span = match s.unreadable {
                Some(_) => "positions do not read".to_string(),
                None => format!("entries {}..{}", s.from_seq, s.from_seq + s.entry_count),
            };
            println!(
                "  x snapshot #{} ({span}): {}",
                s.id,
                safe(s.message.as_deref().unwrap_or("root mismatch"))
            );
        }
    }
    Ok(if r.ok { Exit::Ok } else { Exit::Failed })
}

fn snapshot(ctx: &Ctx, a: SnapshotArgs) -> Result<Exit> {
    let key = if a.sign {
        Some(super::sign::load_key_for_signing(a.key.as_deref())?)
    } else {
        None
    };
    let signer = key
        .as_ref()
        .map(|k| crate::core::trust::snapshot_signer(&k.key));
    let store = ctx.open_existing_store()?;
    let snaps = rules::snapshot_now(
        &store,
        &a.tenant,
        a.batch_size,
        signer.as_ref().map(|f| f as scheduler::SnapshotSigner<'_>),
    )?;
    if a.json {
        print_json(&snaps)?;
        return Ok(Exit::Ok);
    }
    for s in &snaps {
        let signed = match (&s.dsse_envelope, &key) {
            (Some(_), Some(k)) => format!(", signed by key {}", k.key_id),
            _ => String::new(),
        };
        println!(
            "snapshot #{} of tenant {}: entries {}..{} ({}), merkle root {}, at {}{signed}",
            s.id,
            safe(&s.tenant_id),
            s.from_seq,
            s.from_seq + s.entry_count,
            s.entry_count,
            untrusted(&s.merkle_root),
            untrusted(&s.snapshot_hlc)
        );
    }
    Ok(Exit::Ok)
}

fn prove(ctx: &Ctx, a: ProveArgs) -> Result<Exit> {
    let store = ctx.open_store_for_reading()?;
    let p = rules::prove(&store, &a.tenant, &a.job_id)?;
    if let Some(path) = &a.output {
        let shown = visible_path(path);
        let text = serde_json::to_vec_pretty(&p)?;
        let written = match a.force {
            true => crate::core::file_output::write_atomic(path, &text),
            // Any directory entry counts, a dangling symlink too, and one made while the proof
            // was written: the name is taken without replacing (`write_new`).
            false => crate::core::file_output::write_new(path, &text),
        };
        match written {
            Err(e) if e.source.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(eyre!(
                    "{shown} already exists; nothing was written. Pass --force to replace it, or choose another file name with -o"
                ));
            }
            r => r.wrap_err_with(|| format!("writing the proof to {shown}"))?,
        }
    }
    if a.json {
        print_json(&p)?;
        return Ok(Exit::Ok);
    }
    println!(
        "job {} is entry {} of tenant {}, leaf {} of {} in snapshot #{} (root {})",
        safe(&p.entry.job_id),
        p.entry.seq,
        safe(&p.tenant_id),
        p.leaf_index,
        p.tree_size,
        p.snapshot.id,
        untrusted(&p.merkle_root)
    );
    println!("  chain link {}", untrusted(&p.entry.chain_link));
    println!("  leaf hash  {}", untrusted(&p.leaf_hash));
    for (i, h) in p.proof.iter().enumerate() {
        println!("  path[{i}]    {}", untrusted(h));
    }
    if a.output.is_none() {
        println!(
            "(use --json or --output FILE for the proof document `chain verify-proof` checks)"
        );
    }
    Ok(Exit::Ok)
}

/// Whether a proof path names standard input: `-` or `/dev/stdin`.
fn is_stdin(path: &std::path::Path) -> bool {
    path.as_os_str() == "-" || path.as_os_str() == "/dev/stdin"
}

/// The bytes of a proof: from standard input for `-` and `/dev/stdin` (a pipe or a redirected
/// file; a terminal is refused rather than waited on), else from a regular file (a FIFO or device
/// named by its path is refused, as for every input). At most `MAX_PROOF_BYTES` either way.
fn read_proof(path: &std::path::Path, shown: &str) -> Result<Vec<u8>> {
    use crate::core::file_input::{read_capped, read_regular_capped, MAX_PROOF_BYTES};
    if is_stdin(path) {
        let stdin = super::output::piped_stdin(
            shown,
            "pipe the proof in (`airlock chain prove ... --json | airlock chain verify-proof -`) or give its file",
        )?;
        return read_capped(stdin.lock(), MAX_PROOF_BYTES)
            .wrap_err_with(|| format!("reading the proof from standard input ({shown})"));
    }
    read_regular_capped(path, MAX_PROOF_BYTES).wrap_err_with(|| format!("reading {shown}"))
}

fn verify_proof(a: VerifyProofArgs) -> Result<Exit> {
    let shown = if a.file.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        visible_path(&a.file)
    };
    let bytes = read_proof(&a.file, &shown)?;
    let proof: InclusionProof = serde_json::from_slice(&bytes).map_err(|e| {
        // serde_json's message ends with the line and column.
        eyre!("{shown}: not an inclusion proof: {e}")
    })?;
    let trust = a.trust.trust()?;
    let required = a.trust.signature_required()?;
    let verdict = scheduler::check_proof(&proof, &trust, required);
    let (signature, result) = (&verdict.signature, &verdict.outcome);
    if a.json {
        print_json(&serde_json::json!({
            "ok": result.is_ok(),
            "tenantId": proof.tenant_id,
            "jobId": proof.entry.job_id,
            "seq": proof.entry.seq,
            "merkleRoot": proof.merkle_root,
            "signature": signature.status_word(),
            "error": result.as_ref().err().map(|e| e.to_string()),
        }))?;
    } else {
        match &result {
            Ok(()) => println!(
                "OK  {shown}: job {} (entry {} of tenant {}) is included in snapshot #{} with root {}{}",
                safe(&proof.entry.job_id),
                proof.entry.seq,
                safe(&proof.tenant_id),
                proof.snapshot.id,
                untrusted(&proof.merkle_root),
                match signature {
                    crate::core::trust::SignatureCheck::Valid { signer, .. } =>
                        format!("; snapshot signed by {}", safe(signer)),
                    crate::core::trust::SignatureCheck::Untrusted { key_id } =>
                        format!("; snapshot signed by untrusted key {}", safe(key_id)),
                    _ => " (the snapshot is unsigned: the root is only as trustworthy as its source)".into(),
                }
            ),
            Err(e) => println!("FAILED  {shown}: {}", safe(&e.to_string())),
        }
    }
    Ok(if result.is_ok() {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

fn append(ctx: &Ctx, a: AppendArgs) -> Result<Exit> {
    // A lifecycle action needs the tenant's chain: a store that is not there has none (and a
    // mistyped --db must not leave a new empty store behind).
    let store = ctx.open_existing_store()?;
    let node = paths::node_id(a.node.as_deref());
    let r = rules::append_action(
        &store,
        &a.tenant,
        &a.job_id,
        a.action,
        &node,
        SystemWallClock,
        a.batch_size,
    )?;
    if a.json {
        print_json(&r)?;
        return Ok(Exit::Ok);
    }
    println!(
        "appended {} for job {} at chain position {} ({}), link {}; the job was {}",
        r.action,
        safe(&r.job_id),
        r.seq,
        safe(&r.t_hlc),
        untrusted(&r.chain_link),
        safe(&r.previous_state)
    );
    for s in &r.snapshots {
        println!(
            "snapshot #{}: entries {}..{} merkle root {}",
            s.id,
            s.from_seq,
            s.from_seq + s.entry_count,
            untrusted(&s.merkle_root)
        );
    }
    Ok(Exit::Ok)
}
