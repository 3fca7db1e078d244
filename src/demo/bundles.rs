//! The demo's bundles, each made by engine calls (enqueue, export, sign); the broken ones are made
//! the way an accident or an attacker would, then repaired only as far as the scenario needs,
//! again with engine functions (relinking a log, the manifest digest).

use super::night::OfflineNight;
use super::TENANT;
use crate::core::bundle::{load_bundle, manifest_digest, write_bundle, Bundle, BundleHeader};
use crate::core::store::nodelog::{self, NewJob};
use crate::core::store::Store;
use crate::core::trust::{self, SigningKey};
use color_eyre::eyre::WrapErr;
use color_eyre::Result;
use std::path::{Path, PathBuf};

/// The keys the bundles are signed with.
pub struct Signers<'a> {
    /// Trusted in the workspace's trust store.
    pub trusted: &'a SigningKey,
    /// Signs, but nobody trusts it.
    pub stranger: &'a SigningKey,
}

/// `n` jobs of one site; `salt` makes payloads of different calls differ.
pub fn jobs(node: &str, n: usize, salt: &str) -> Vec<NewJob> {
    const KINDS: [&str; 4] = ["scan", "sync", "rotate-keys", "export"];
    (0..n)
        .map(|i| NewJob {
            payload_json: format!(
                r#"{{"kind":"{}","target":"registry.local/app-{}:1.{}","site":"{node}","attempt":{},"ticket":"OPS-{}{salt}"}}"#,
                KINDS[i % 4],
                i % 7,
                i % 5,
                i % 3,
                4100 + i
            ),
            partition_key: Some(format!("rack-{}", i % 4)),
            idempotency_key: None,
            origin: format!("demo job {i} of {node}"),
        })
        .collect()
}

/// Enqueues `jobs` on `node`'s log, reading the night's clock.
pub fn enqueue(store: &mut Store, night: &OfflineNight, node: &str, jobs: &[NewJob]) -> Result<()> {
    crate::core::store::rules::enqueue(store, TENANT, node, jobs, night.clone())?;
    Ok(())
}

/// Exports the store's node logs (all, or `node`'s) to `path`, signed with `key` when given.
pub fn export(
    store: &Store,
    node: Option<&str>,
    path: &Path,
    key: Option<&SigningKey>,
) -> Result<()> {
    let signed = key.map(|k| move |h: &BundleHeader| Ok(trust::sign_header(k, h)));
    let signer: Option<nodelog::HeaderSigner<'_>> =
        signed.as_ref().map(|s| s as nodelog::HeaderSigner<'_>);
    let mut out = crate::core::file_output::AtomicFile::create(path)?;
    crate::core::store::rules::export(
        store,
        TENANT,
        node,
        node.unwrap_or("relay-01"),
        out.writer(),
        signer,
    )?;
    out.commit()?;
    Ok(())
}

fn save(bundle: &Bundle, path: &Path) -> Result<()> {
    let f = std::fs::File::create(path).wrap_err_with(|| format!("writing {}", path.display()))?;
    write_bundle(std::io::BufWriter::new(f), bundle)?;
    Ok(())
}

/// Writes the demo's bundles into `dir` (continuing `earlier`, the store whose export was
/// imported first) and returns their file names, in order.
pub fn write_bundles(
    dir: &Path,
    mut earlier: Store,
    night: &OfflineNight,
    keys: &Signers<'_>,
) -> Result<Vec<String>> {
    let mut files = Vec::new();
    let mut file = |name: &str| -> PathBuf {
        files.push(name.to_string());
        dir.join(name)
    };

    // 1. Valid, signed, two nodes (continuing the imported export, whose entries a merge preview
    //    shows as duplicates of the chain); one payload carries a bidi override (shown escaped).
    let s = &mut earlier;
    enqueue(s, night, "edge-a", &jobs("edge-a", 18, "")[9..])?;
    let mut b_jobs = jobs("edge-b", 14, "").split_off(7);
    b_jobs.push(NewJob {
        payload_json: r#"{"kind":"attach","file":"invoice\u202egpj.exe","site":"edge-b"}"#.into(),
        partition_key: Some("rack-0".into()),
        idempotency_key: None,
        origin: "demo hostile file name".into(),
    });
    enqueue(s, night, "edge-b", &b_jobs)?;
    export(s, None, &file("01-edge-ab.signed.json"), Some(keys.trusted))?;

    // 2. A chain break: three entries lost in transit (digest recomputed, so only the break shows).
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, night, "edge-c", &jobs("edge-c", 30, ""))?;
    let path = file("02-edge-c.chain-break.json");
    export(&s, None, &path, None)?;
    let mut b = load_bundle(&path)?;
    b.job_logs[0].entries.drain(11..14);
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    save(&b, &path)?;

    // 3. A forgery that recomputes every hash, link, head and digest: only the signature catches it.
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, night, "edge-d", &jobs("edge-d", 20, ""))?;
    let path = file("03-edge-d.forged.json");
    export(&s, None, &path, Some(keys.trusted))?;
    let mut b = load_bundle(&path)?;
    b.job_logs[0].entries[7].payload = b.job_logs[0].entries[7]
        .payload
        .replace("registry.local", "registry.evil");
    b.job_logs[0].relink(7)?;
    b.header.manifest_digest = manifest_digest(&b.job_logs);
    save(&b, &path)?;

    // 4 + 5. Two bundles that conflict: one idempotency key, two payloads.
    for (node, target, name) in [
        ("edge-e", "app-1:2.0", "04-edge-e.conflict.json"),
        ("edge-f", "app-1:2.1", "05-edge-f.conflict.json"),
    ] {
        let mut s = Store::open_in_memory()?;
        let mut j = jobs(node, 6, "");
        j.push(NewJob {
            payload_json: format!(
                r#"{{"kind":"deploy","target":"registry.local/{target}","site":"{node}"}}"#
            ),
            partition_key: Some("rack-1".into()),
            idempotency_key: Some("deploy-2026-01-release".into()),
            origin: format!("demo conflicting deploy on {node}"),
        });
        enqueue(&mut s, night, node, &j)?;
        export(&s, None, &file(name), Some(keys.trusted))?;
    }

    // 6. Signed by a key nobody trusts.
    let mut s = Store::open_in_memory()?;
    enqueue(&mut s, night, "edge-g", &jobs("edge-g", 8, ""))?;
    export(
        &s,
        None,
        &file("06-edge-g.untrusted.json"),
        Some(keys.stranger),
    )?;

    // 7. Not a bundle at all.
    std::fs::write(
        file("README.txt"),
        "Demo workspace made by `airlock demo`. Open it with: airlock console --dir bundles\n\
         The *.alwl files are two gates' node WALs: Enter opens one; screen 0 folds them.\n",
    )?;
    Ok(files)
}
