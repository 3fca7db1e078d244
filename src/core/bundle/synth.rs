//! Synthetic, valid bundles of any size (benchmarks, demos, load tests). Entries are generated
//! deterministically twice — once for the manifest digest, once to write — so memory stays flat.

use super::digest::ManifestHasher;
use super::model::{BundleHeader, EntryRef};
use super::writer::BundleWriter;
use crate::core::chain::{encode_digest, NodeLinker};
use crate::core::hlc::hlc_text;
use crate::core::ids::job_id;
use crate::core::time::rfc3339_millis;
use std::borrow::Cow;
use std::io::{self, Write};

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthSpec {
    pub tenant: String,
    pub nodes: usize,
    pub entries_per_node: usize,
    /// Unix ms of the first entry.
    pub start_ms: u64,
    /// Distinguishes payloads of different runs (different seeds give disjoint job ids).
    pub seed: u64,
}

impl SynthSpec {
    /// Tenant `acme`, starting at 2026-01-05T12:00:00Z (1,767,614,400,000 ms): the spec tests
    /// and fixtures use.
    pub fn acme(nodes: usize, entries_per_node: usize, seed: u64) -> SynthSpec {
        SynthSpec {
            tenant: "acme".into(),
            nodes,
            entries_per_node,
            start_ms: 1_767_614_400_000,
            seed,
        }
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i:02}")
}

/// Calls `f` with every entry of node `node`, in order, and returns (lastHlc, chainHead).
fn for_each_entry(
    spec: &SynthSpec,
    node: usize,
    mut f: impl FnMut(&EntryRef<'_>) -> io::Result<()>,
) -> io::Result<(String, String)> {
    let name = node_name(node);
    let mut linker = NodeLinker::default();
    let mut last = (String::new(), String::new());
    for i in 0..spec.entries_per_node {
        // A few milliseconds apart per node, with the node index as an offset so logs interleave.
        let physical = spec.start_ms + (i as u64) * 3 + node as u64;
        let logical = (i % 3 == 0) as u32;
        let t = hlc_text(physical, logical, &name).to_string();
        let payload = format!(
            "{{\"attempt\":{},\"kind\":\"scan\",\"node\":\"{name}\",\"seed\":{},\"seq\":{i},\"target\":\"registry.local/app-{}:1.{}\"}}",
            i % 4,
            spec.seed,
            i % 97,
            i % 13
        );
        let id = job_id(&payload, None);
        let linked = linker.link(&id, &t, &payload);
        let e = EntryRef {
            node_id: Cow::Borrowed(&name),
            t_hlc: Cow::Borrowed(&t),
            job_id: Cow::Owned(id.to_string()),
            partition_key: (i % 5 == 0).then(|| Cow::Owned(format!("p{}", i % 7))),
            payload: Cow::Borrowed(&payload),
            payload_hash: Cow::Owned(encode_digest(&linked.payload_hash)),
            prev_link: linked.prev_link.map(|p| Cow::Owned(encode_digest(&p))),
            link: Cow::Owned(encode_digest(&linked.link)),
            enqueued_at: Cow::Owned(rfc3339_millis(physical)),
        };
        f(&e)?;
        last = (t, encode_digest(&linked.link));
    }
    Ok(last)
}

/// Writes a valid, unsigned bundle per `spec` to `out`; returns the header written.
pub fn write_synthetic_bundle<W: Write>(spec: &SynthSpec, out: W) -> io::Result<BundleHeader> {
    let mut hasher = ManifestHasher::new();
    let mut heads = Vec::new();
    for node in 0..spec.nodes {
        if spec.entries_per_node == 0 {
            continue;
        }
        // The chain head is only known at the end: the hasher buffers this log's entries.
        hasher.begin_well_formed_log(None);
        let (last_hlc, head) = for_each_entry(spec, node, |e| {
            hasher.add_entry(e);
            Ok(())
        })?;
        hasher.end_well_formed_log(Some(&head), &last_hlc, &node_name(node));
        heads.push((last_hlc, head));
    }
    let header = BundleHeader {
        bundle_id: uuid::Uuid::new_v4().to_string(),
        tenant_id: spec.tenant.clone(),
        created_at: rfc3339_millis(crate::core::hlc::unix_ms_now()),
        created_by_node_id: node_name(0),
        manifest_digest: hasher.finish(),
        signature: None,
        signed_by: None,
    };
    let mut w = BundleWriter::new(io::BufWriter::with_capacity(1 << 20, out), &header)?;
    for (node, (last_hlc, head)) in heads.iter().enumerate() {
        w.begin_log(&node_name(node), last_hlc, head)?;
        for_each_entry(spec, node, |e| w.entry(e))?;
        w.end_log()?;
    }
    w.finish(None)?;
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::verify::{verify_reader, VerifyOptions};

    #[test]
    fn synthetic_bundles_verify() {
        let spec = SynthSpec {
            tenant: "bench".into(),
            nodes: 3,
            entries_per_node: 50,
            start_ms: 1_767_614_400_000,
            seed: 1,
        };
        let mut out = Vec::new();
        write_synthetic_bundle(&spec, &mut out).unwrap();
        let r = verify_reader(&out[..], &VerifyOptions::default()).unwrap();
        assert!(r.ok, "{:#?}", r.findings);
        assert_eq!(r.stats.entries, 150);
    }

    #[test]
    fn large_digest_on_the_helper_thread_equals_jcs_of_the_whole_array() {
        let spec = SynthSpec {
            tenant: "bench".into(),
            nodes: 2,
            entries_per_node: 6000,
            start_ms: 1_767_614_400_000,
            seed: 2,
        };
        let mut out = Vec::new();
        let header = write_synthetic_bundle(&spec, &mut out).unwrap();
        assert!(out.len() > 4 << 20, "big enough to use the hashing thread");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let jcs = crate::core::canonical::canonical_text(&v["jobLogs"]).unwrap();
        let want = format!(
            "sha256:{}",
            hex::encode(crate::core::chain::sha256(jcs.as_bytes()))
        );
        assert_eq!(header.manifest_digest, want);
        let r = verify_reader(&out[..], &VerifyOptions::default()).unwrap();
        assert!(r.ok, "{:#?}", r.findings);
    }
}
