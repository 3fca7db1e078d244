//! Synthetic, valid bundles of any size (benchmarks, demos, load tests). Entries are generated
//! deterministically twice — once for the manifest digest, once to write — so memory stays flat.

use super::digest::ManifestHasher;
use super::model::{BundleHeader, EntryRef};
use super::writer::BundleWriter;
use crate::core::chain::{encode_digest, NodeLinker};
use crate::core::hlc::hlc_text;
use crate::core::ids::job_id;
use crate::core::tenant::{validate_tenant_id, TenantError};
use crate::core::time::{rfc3339_millis, LAST_PRINTABLE_MS};
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

/// Why a bundle of a given total cannot be generated (each would write a bundle that is not the
/// one asked for, or not a valid one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    #[error("--nodes must be at least 1")]
    NoNodes,
    #[error("--entries {entries} is fewer than --nodes {nodes}: every node log needs at least one entry (a log with no entries is not written); give at least {nodes} entries, or fewer nodes")]
    TooFewEntries { entries: usize, nodes: usize },
    #[error("--tenant: {0}")]
    Tenant(#[from] TenantError),
    #[error("--start-ms {start_ms}: the last entry would be past 9999-12-31T23:59:59.999Z ({LAST_PRINTABLE_MS} ms), the last time an RFC 3339 timestamp can hold; give an earlier start")]
    StartTooLate { start_ms: u64 },
}

/// A bundle of `entries` entries in all (`airlock dev gen-bundle`), checked to be valid: split
/// over the node logs as evenly as it goes (the first `entries % nodes` logs one entry longer).
#[derive(Debug, Clone)]
pub struct SynthTotal {
    /// `entries_per_node` is the shorter logs' length.
    spec: SynthSpec,
    longer: usize,
}

impl SynthTotal {
    /// Refuses what would not write exactly this, as a valid bundle: no nodes, fewer entries
    /// than nodes, a tenant id the verifier refuses, or entries past the last RFC 3339 time.
    pub fn new(
        tenant: String,
        nodes: usize,
        entries: usize,
        start_ms: u64,
        seed: u64,
    ) -> Result<SynthTotal, SynthError> {
        if nodes == 0 {
            return Err(SynthError::NoNodes);
        }
        if entries < nodes {
            return Err(SynthError::TooFewEntries { entries, nodes });
        }
        validate_tenant_id(&tenant)?;
        let total = SynthTotal {
            spec: SynthSpec {
                tenant,
                nodes,
                entries_per_node: entries / nodes,
                start_ms,
                seed,
            },
            longer: entries % nodes,
        };
        // The latest entry is the last of the first log (its index is the largest, its node
        // offset 0) or of the last log (the largest node offset).
        let last = [0, nodes - 1]
            .iter()
            .map(|&n| physical_ms(&total.spec, n, total.entries_of(n) - 1))
            .try_fold(0u64, |m, p| p.map(|p| m.max(p)));
        match last {
            Some(last) if last <= LAST_PRINTABLE_MS => Ok(total),
            _ => Err(SynthError::StartTooLate { start_ms }),
        }
    }

    pub fn nodes(&self) -> usize {
        self.spec.nodes
    }

    /// How many entries the log of node `node` has.
    pub fn entries_of(&self, node: usize) -> usize {
        self.spec.entries_per_node + usize::from(node < self.longer)
    }

    /// Writes the bundle to `out`; returns the header written.
    pub fn write<W: Write>(&self, out: W) -> io::Result<BundleHeader> {
        write_logs(&self.spec, &|node| self.entries_of(node), out)
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i:02}")
}

/// Unix ms of entry `i` of node `node`: a few milliseconds apart per node, with the node index as
/// an offset so logs interleave (`None` past `u64`).
fn physical_ms(spec: &SynthSpec, node: usize, i: usize) -> Option<u64> {
    (i as u64)
        .checked_mul(3)?
        .checked_add(node as u64)?
        .checked_add(spec.start_ms)
}

/// Calls `f` with every one of the `count` entries of node `node`, in order, and returns
/// (lastHlc, chainHead).
fn for_each_entry(
    spec: &SynthSpec,
    node: usize,
    count: usize,
    mut f: impl FnMut(&EntryRef<'_>) -> io::Result<()>,
) -> io::Result<(String, String)> {
    let name = node_name(node);
    let mut linker = NodeLinker::default();
    let mut last = (String::new(), String::new());
    for i in 0..count {
        let physical = physical_ms(spec, node, i)
            .ok_or_else(|| io::Error::other("the entries' times overflow: start earlier"))?;
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
    write_logs(spec, &|_| spec.entries_per_node, out)
}

/// Writes the bundle of `spec` whose node `n` has `count(n)` entries (a log of none is not
/// written).
fn write_logs<W: Write>(
    spec: &SynthSpec,
    count: &dyn Fn(usize) -> usize,
    out: W,
) -> io::Result<BundleHeader> {
    let mut hasher = ManifestHasher::new();
    let mut heads = Vec::new();
    for node in 0..spec.nodes {
        if count(node) == 0 {
            continue;
        }
        // The chain head is only known at the end: the hasher buffers this log's entries.
        hasher.begin_well_formed_log(None);
        let (last_hlc, head) = for_each_entry(spec, node, count(node), |e| {
            hasher.add_entry(e);
            Ok(())
        })?;
        hasher.end_well_formed_log(Some(&head), &last_hlc, &node_name(node));
        heads.push((node, last_hlc, head));
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
    for (node, last_hlc, head) in &heads {
        w.begin_log(&node_name(*node), last_hlc, head)?;
        for_each_entry(spec, *node, count(*node), |e| w.entry(e))?;
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
