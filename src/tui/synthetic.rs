//! Synthetic bundles of any size for the console's benchmark and tests, built only from engine
//! functions (canonical payloads, job ids, payload hashes, links, the streaming manifest hasher and
//! the bundle writer). Entries are generated twice from the same seed: once for the manifest
//! digest, once to write, so nothing is held in memory.

use crate::core::bundle::digest::{canonical_string, write_entry_canonical};
use crate::core::bundle::{BundleHeader, BundleWriter, EntryRef, ManifestHasher};
use crate::core::chain::{node_link, payload_hash, Digest32};
use crate::core::hlc::Hlc;
use crate::core::ids::job_id;
use crate::core::time::rfc3339_millis;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::borrow::Cow;
use std::io::{BufWriter, Write};
use std::path::Path;

const BASE_MS: u64 = 1_767_600_000_000; // 2026-01-05T08:00:00Z

fn node_name(log: usize) -> String {
    format!("edge-{:02}", log + 1)
}

/// Calls `f` with every entry of log `log` in order; when `tamper_at` is set, that entry's payload
/// is changed after its hash and link were computed (a `payload-modified` break).
fn for_each_entry(
    log: usize,
    entries: usize,
    tamper_at: Option<usize>,
    mut f: impl FnMut(&EntryRef<'_>) -> std::io::Result<()>,
) -> std::io::Result<(String, String)> {
    let node = node_name(log);
    let mut prev: Option<Digest32> = None;
    let mut last = (String::new(), String::new());
    for i in 0..entries {
        let physical = BASE_MS + i as u64 * 40 + log as u64 * 7;
        let t_hlc = Hlc::new(physical, (i % 3) as u32, node.clone()).to_string();
        let payload = format!(
            "{{\"kind\":\"{}\",\"seq\":{i},\"site\":\"{node}\",\"target\":\"vault-{:03}\"}}",
            ["scan", "sync", "rotate", "export"][i % 4],
            i % 997
        );
        let id = job_id(&payload, None);
        let hash = payload_hash(&payload);
        let link = node_link(prev.as_ref(), &id, &t_hlc, &hash);
        let shown_payload = if tamper_at == Some(i) {
            payload.replace("\"seq\"", "\"Seq\"")
        } else {
            payload
        };
        let link_b64 = B64.encode(link);
        let e = EntryRef {
            node_id: Cow::Borrowed(&node),
            t_hlc: Cow::Borrowed(&t_hlc),
            job_id: Cow::Owned(id.to_string()),
            partition_key: Some(Cow::Owned(format!("p{}", i % 16))),
            payload: Cow::Owned(shown_payload),
            payload_hash: Cow::Owned(B64.encode(hash)),
            prev_link: prev.map(|p| Cow::Owned(B64.encode(p))),
            link: Cow::Borrowed(&link_b64),
            enqueued_at: Cow::Owned(rfc3339_millis(physical + 3)),
        };
        f(&e)?;
        prev = Some(link);
        last = (t_hlc.clone(), link_b64.clone());
    }
    Ok(last)
}

/// Writes a bundle with `logs` node logs of `entries_per_log` entries each; `tamper_at` changes
/// one payload of the first log. Returns the file size.
pub fn write_synthetic_bundle(
    path: &Path,
    logs: usize,
    entries_per_log: usize,
    tamper_at: Option<usize>,
) -> std::io::Result<u64> {
    let tamper = |log: usize| if log == 0 { tamper_at } else { None };
    let mut hasher = ManifestHasher::new();
    let mut heads = Vec::new();
    let mut scratch = Vec::with_capacity(512);
    for log in 0..logs {
        // The same order as a written log: nodeId, lastHlc, chainHead, then entries; the head
        // is only known after the entries, so compute it first with a dry pass.
        let (last_hlc, head) = for_each_entry(log, entries_per_log, tamper(log), |_| Ok(()))?;
        hasher.begin_entries(vec![("chainHead".into(), canonical_string(&head))], true);
        for_each_entry(log, entries_per_log, tamper(log), |e| {
            scratch.clear();
            write_entry_canonical(&mut scratch, e);
            hasher.entry(&scratch);
            Ok(())
        })?;
        hasher.end_log(
            vec![
                ("lastHlc".into(), canonical_string(&last_hlc)),
                ("nodeId".into(), canonical_string(&node_name(log))),
            ],
            true,
        );
        heads.push((last_hlc, head));
    }
    let header = BundleHeader {
        bundle_id: "5e1f0c3a-0000-4000-8000-00000000b1c6".into(),
        tenant_id: "acme".into(),
        created_at: rfc3339_millis(BASE_MS + 86_400_000),
        created_by_node_id: "bench".into(),
        manifest_digest: hasher.finish(),
        signature: None,
        signed_by: None,
    };
    let file = std::fs::File::create(path)?;
    let mut w = BundleWriter::new(BufWriter::with_capacity(1 << 20, file), &header)?;
    for (log, (last_hlc, head)) in heads.iter().enumerate() {
        w.begin_log(&node_name(log), last_hlc, head)?;
        for_each_entry(log, entries_per_log, tamper(log), |e| w.entry(e))?;
        w.end_log()?;
    }
    let mut out = w.finish(None)?;
    out.flush()?;
    drop(out);
    Ok(std::fs::metadata(path)?.len())
}
