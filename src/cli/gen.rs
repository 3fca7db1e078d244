//! `airlock dev gen-bundles` (hidden): writes large, valid, deterministic bundles for benchmarks and
//! tests. Links are computed directly (no store, no enqueue), so a million entries take seconds.

use super::output::print_json;
use super::Exit;
use crate::core::bundle::digest::{canonical_string, write_entry_canonical};
use crate::core::bundle::{BundleHeader, BundleWriter, EntryRef, ManifestHasher};
use crate::core::chain::{node_link, payload_hash, Digest32};
use crate::core::ids::job_id;
use crate::core::time::rfc3339_millis;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use clap::{Args, Subcommand};
use color_eyre::eyre::WrapErr;
use color_eyre::Result;
use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Write synthetic bundles (valid, unsigned, deterministic).
    GenBundles(GenArgs),
}

#[derive(Debug, Args, Clone)]
pub struct GenArgs {
    /// Output directory (bundle-0.json, bundle-1.json, ...).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Number of bundles.
    #[arg(long, default_value_t = 4)]
    pub bundles: u32,
    /// Entries per bundle.
    #[arg(long, default_value_t = 250_000)]
    pub entries: u64,
    /// Node logs per bundle.
    #[arg(long, default_value_t = 2)]
    pub nodes: u32,
    /// The first N payloads of every bundle are the same jobs (duplicates across bundles).
    #[arg(long, default_value_t = 0)]
    pub shared: u64,
    #[arg(long, default_value = "bench")]
    pub tenant: String,
    /// First physical time (Unix ms) of the generated HLCs.
    #[arg(long, default_value_t = 1_767_614_400_000)]
    pub start_ms: u64,
}

/// One generated bundle file.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedBundle {
    pub path: PathBuf,
    pub bundle_id: String,
    pub entries: u64,
    pub bytes: u64,
}

pub fn run(cmd: DevCommand) -> Result<Exit> {
    match cmd {
        DevCommand::GenBundles(a) => {
            std::fs::create_dir_all(&a.out)
                .wrap_err_with(|| format!("creating {}", a.out.display()))?;
            let mut out = Vec::new();
            for b in 0..a.bundles {
                let path = a.out.join(format!("bundle-{b}.json"));
                out.push(write_bundle_file(&path, &a, b)?);
            }
            print_json(&out)?;
            Ok(Exit::Ok)
        }
    }
}

struct Gen<'a> {
    spec: &'a GenArgs,
    bundle: u32,
}

struct GenEntry {
    node: String,
    t_hlc: String,
    job_id: String,
    payload: String,
    payload_hash: String,
    prev: Option<String>,
    link: String,
    enqueued_at: String,
}

impl Gen<'_> {
    fn node(&self, n: u32) -> String {
        format!("gen-b{}-n{}", self.bundle, n)
    }

    /// Walks log `n`'s entries in order, computing links on the way.
    fn each_entry(&self, n: u32, mut f: impl FnMut(&GenEntry) -> Result<()>) -> Result<()> {
        let node = self.node(n);
        let mut prev: Option<Digest32> = None;
        let nodes = self.spec.nodes.max(1) as u64;
        let mut j = n as u64;
        while j < self.spec.entries {
            let payload = if j < self.spec.shared {
                format!("{{\"kind\":\"shared\",\"seq\":{j}}}")
            } else {
                format!(
                    "{{\"bundle\":{},\"kind\":\"bench\",\"seq\":{j},\"target\":\"registry.local/app-{}:1.{}\"}}",
                    self.bundle,
                    j % 97,
                    j % 13
                )
            };
            let physical = self.spec.start_ms + j;
            let t_hlc = format!("{physical}:0:{node}");
            let id = job_id(&payload, None);
            let hash = payload_hash(&payload);
            let link = node_link(prev.as_ref(), &id, &t_hlc, &hash);
            let e = GenEntry {
                node: node.clone(),
                t_hlc,
                job_id: id.to_string(),
                payload_hash: B64.encode(hash),
                prev: prev.map(|p| B64.encode(p)),
                link: B64.encode(link),
                enqueued_at: rfc3339_millis(physical),
                payload,
            };
            f(&e)?;
            prev = Some(link);
            j += nodes;
        }
        Ok(())
    }
}

fn entry_ref(e: &GenEntry) -> EntryRef<'_> {
    EntryRef {
        node_id: Cow::Borrowed(&e.node),
        t_hlc: Cow::Borrowed(&e.t_hlc),
        job_id: Cow::Borrowed(&e.job_id),
        partition_key: None,
        payload: Cow::Borrowed(&e.payload),
        payload_hash: Cow::Borrowed(&e.payload_hash),
        prev_link: e.prev.as_deref().map(Cow::Borrowed),
        link: Cow::Borrowed(&e.link),
        enqueued_at: Cow::Borrowed(&e.enqueued_at),
    }
}

/// Writes bundle number `bundle` of `spec` to `path`.
pub fn write_bundle_file(path: &Path, spec: &GenArgs, bundle: u32) -> Result<GeneratedBundle> {
    let g = Gen { spec, bundle };
    let nodes: Vec<u32> = (0..spec.nodes.max(1))
        .filter(|&n| (n as u64) < spec.entries)
        .collect();
    // Pass 1: each log's head and last HLC.
    let mut heads = Vec::new();
    for &n in &nodes {
        let mut last = (String::new(), String::new());
        g.each_entry(n, |e| {
            last = (e.link.clone(), e.t_hlc.clone());
            Ok(())
        })?;
        heads.push(last);
    }
    // Pass 2: the manifest digest.
    let mut hasher = ManifestHasher::new();
    let mut scratch = Vec::with_capacity(512);
    for (i, &n) in nodes.iter().enumerate() {
        hasher.begin_entries(
            vec![("chainHead".into(), canonical_string(&heads[i].0))],
            true,
        );
        g.each_entry(n, |e| {
            scratch.clear();
            write_entry_canonical(&mut scratch, &entry_ref(e));
            hasher.entry(&scratch);
            Ok(())
        })?;
        hasher.end_log(
            vec![
                ("lastHlc".into(), canonical_string(&heads[i].1)),
                ("nodeId".into(), canonical_string(&g.node(n))),
            ],
            true,
        );
    }
    let seed =
        crate::core::chain::sha256(format!("airlock-gen:{}:{bundle}", spec.tenant).as_bytes());
    let mut id_bytes = [0u8; 16];
    id_bytes.copy_from_slice(&seed[..16]);
    let bundle_id = uuid::Builder::from_random_bytes(id_bytes)
        .into_uuid()
        .to_string();
    let header = BundleHeader {
        bundle_id: bundle_id.clone(),
        tenant_id: spec.tenant.clone(),
        created_at: rfc3339_millis(spec.start_ms + spec.entries + 1000),
        created_by_node_id: g.node(0),
        manifest_digest: hasher.finish(),
        signature: None,
        signed_by: None,
    };
    // Pass 3: write.
    let mut file = crate::core::fsutil::AtomicFile::create(path)?;
    {
        let mut w = BundleWriter::new(file.writer(), &header)?;
        for (i, &n) in nodes.iter().enumerate() {
            w.begin_log(&g.node(n), &heads[i].1, &heads[i].0)?;
            g.each_entry(n, |e| Ok(w.entry(&entry_ref(e))?))?;
            w.end_log()?;
        }
        w.finish(None)?.flush()?;
    }
    file.commit()?;
    let bytes = std::fs::metadata(path)?.len();
    Ok(GeneratedBundle {
        path: path.to_path_buf(),
        bundle_id,
        entries: spec.entries,
        bytes,
    })
}
