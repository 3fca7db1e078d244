//! Helpers shared by the import and chain tests.
#![allow(dead_code)]

use airlock::core::import::{self, ImportOptions, ImportReport};
use airlock::core::store::Store;
use std::path::{Path, PathBuf};

pub const VECTORS: &str = "../shared/vectors";

pub fn vector(rel: &str) -> PathBuf {
    Path::new(VECTORS).join(rel)
}

pub fn merge_inputs() -> Vec<PathBuf> {
    ["a.json", "b.json", "c.json"]
        .iter()
        .map(|f| vector(&format!("merge/{f}")))
        .collect()
}

pub fn opts() -> ImportOptions<'static> {
    ImportOptions::new("importer-test")
}

pub fn temp_store() -> (tempfile::TempDir, PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("airlock.db");
    let store = Store::open(&path).unwrap();
    (dir, path, store)
}

pub fn import_files(store: &mut Store, files: &[PathBuf], o: &ImportOptions<'_>) -> ImportReport {
    import::import(store, files, o).unwrap()
}

/// Every scheduler table as text, without wall-clock columns and random batch ids.
pub fn dump(store: &Store) -> String {
    let queries = [
        "SELECT tenant_id, seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log ORDER BY tenant_id, seq",
        "SELECT tenant_id, hex(job_id), hex(payload_hash), enqueue_seq, state, last_seq FROM scheduler_jobs ORDER BY tenant_id, job_id",
        "SELECT tenant_id, head_chain_link, head_hlc, length FROM chain_heads ORDER BY tenant_id",
        "SELECT id, tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope FROM batch_snapshot ORDER BY id",
        "SELECT id, tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer, entries, new_entries, duplicates, dropped, forced FROM imports ORDER BY id",
        "SELECT tenant_id, seq, import_id, source_node, hex(orig_link), hex(orig_prev_link), partition_key, enqueued_at FROM scheduler_log WHERE import_id IS NOT NULL ORDER BY tenant_id, seq",
    ];
    let mut out = String::new();
    for q in queries {
        let mut stmt = store.conn().prepare(q).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        out.push_str(q);
        out.push('\n');
        while let Some(r) = rows.next().unwrap() {
            for i in 0..n {
                let v: rusqlite::types::Value = r.get(i).unwrap();
                out.push_str(&format!("{v:?}|"));
            }
            out.push('\n');
        }
    }
    out
}

/// Writes a copy of a bundle with another bundleId (the manifest digest does not cover it).
pub fn copy_with_bundle_id(src: &Path, dst: &Path, new_id: &str) {
    let text = std::fs::read_to_string(src).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let old = v["bundleId"].as_str().unwrap().to_string();
    std::fs::write(dst, text.replacen(&old, new_id, 1)).unwrap();
}

/// Writes a synthetic valid bundle (the engine's generator) to `path`.
pub fn synth_bundle(
    path: &Path,
    tenant: &str,
    nodes: usize,
    entries_per_node: usize,
    start_ms: u64,
    seed: u64,
) {
    let spec = airlock::core::bundle::synth::SynthSpec {
        tenant: tenant.into(),
        nodes,
        entries_per_node,
        start_ms,
        seed,
    };
    let f = std::fs::File::create(path).unwrap();
    airlock::core::bundle::synth::write_synthetic_bundle(&spec, f).unwrap();
}
