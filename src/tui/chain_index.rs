//! The chain view's index of a bundle file: one streaming pass of the engine's reader with the
//! engine's [`Verifier`] riding along, recording for every entry only its byte span in the file and
//! the verifier's verdict flags (16 bytes an entry). Rows are read back from the file by span when
//! they scroll into view, so a bundle of any size opens in bounded memory.

use crate::core::bundle::{read_bundle, BundleHeader, BundleVisitor, EntryView, LogFields};
use crate::core::chain::{node_link, payload_hash};
use crate::core::verify::{Finding, ProgressReader, Report, Verifier, VerifyOptions};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Where one entry sits in the file, and the verifier's flags for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySlot {
    pub start: u64,
    pub len: u32,
    /// [`crate::core::verify::entry_flags`] bits.
    pub flags: u8,
}

/// One node log of the bundle.
#[derive(Debug, Clone)]
pub struct LogIndex {
    pub node_id: String,
    pub last_hlc: Option<String>,
    pub chain_head: Option<String>,
    pub entries: Vec<EntrySlot>,
}

/// An indexed bundle.
#[derive(Debug)]
pub struct ChainIndex {
    pub path: PathBuf,
    file: File,
    pub header: BundleHeader,
    pub logs: Vec<LogIndex>,
    pub report: Report,
    pub bytes: u64,
}

/// One entry read back from the file for display. Every field is the file's own text (untrusted:
/// make it visible before drawing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryRow {
    pub node_id: String,
    pub t_hlc: String,
    pub job_id: String,
    pub partition_key: Option<String>,
    pub payload: String,
    pub payload_hash: String,
    pub prev_link: Option<String>,
    pub link: String,
    pub enqueued_at: String,
    /// Set when the entry could not be read back as JSON.
    pub error: Option<String>,
}

/// Stored vs recomputed hashes of one entry (recomputed by the engine's chain functions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recomputed {
    pub payload_hash: String,
    /// `None` when a field needed for the link is unreadable (a schema problem).
    pub link: Option<String>,
}

struct Indexer<'a> {
    verifier: Verifier<'a>,
    logs: Vec<Vec<EntrySlot>>,
}

impl BundleVisitor for Indexer<'_> {
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, entry: EntryView<'_>) {
        let flags = self.verifier.check_entry(log, index, &entry);
        while self.logs.len() <= log {
            self.logs.push(Vec::new());
        }
        self.logs[log].push(EntrySlot {
            start: span.start,
            len: (span.end - span.start).min(u32::MAX as u64) as u32,
            flags,
        });
    }

    fn entries_begin(&mut self, log: usize, fields: &LogFields) {
        BundleVisitor::entries_begin(&mut self.verifier, log, fields);
    }

    fn log_end(&mut self, log: usize, fields: &LogFields) {
        while self.logs.len() <= log {
            self.logs.push(Vec::new());
        }
        BundleVisitor::log_end(&mut self.verifier, log, fields);
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

impl ChainIndex {
    /// Indexes and verifies `path` in one pass; `progress` counts bytes read.
    pub fn build(
        path: &Path,
        opts: &VerifyOptions<'_>,
        progress: Option<Arc<AtomicU64>>,
    ) -> Result<ChainIndex, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err("is a directory, not a bundle file".into());
        }
        let mut indexer = Indexer {
            verifier: Verifier::new(opts.clone()),
            logs: Vec::new(),
        };
        let reader = ProgressReader {
            inner: file.try_clone().map_err(|e| e.to_string())?,
            counter: progress,
        };
        let summary =
            read_bundle(reader, &mut indexer).map_err(|e| format!("not a readable bundle: {e}"))?;
        let Indexer { verifier, mut logs } = indexer;
        let report = verifier.finish(&summary);
        logs.resize_with(summary.logs.len().max(logs.len()), Vec::new);
        let logs = logs
            .into_iter()
            .enumerate()
            .map(|(i, entries)| {
                let f = summary.logs.get(i);
                LogIndex {
                    node_id: f
                        .and_then(|f| f.node_id.clone())
                        .unwrap_or_else(|| format!("log {i}")),
                    last_hlc: f.and_then(|f| f.last_hlc.clone()),
                    chain_head: f.and_then(|f| f.chain_head.clone()),
                    entries,
                }
            })
            .collect();
        Ok(ChainIndex {
            path: path.to_path_buf(),
            file,
            header: summary.header,
            logs,
            report,
            bytes: summary.bytes,
        })
    }

    /// Total entries over all logs.
    pub fn entry_count(&self) -> usize {
        self.logs.iter().map(|l| l.entries.len()).sum()
    }

    /// Reads entry `index` of log `log` back from the file by its span.
    pub fn read_row(&self, log: usize, index: usize) -> EntryRow {
        let Some(slot) = self.logs.get(log).and_then(|l| l.entries.get(index)) else {
            return EntryRow {
                error: Some("no such entry".into()),
                ..EntryRow::default()
            };
        };
        let mut buf = vec![0u8; slot.len as usize];
        if let Err(e) = self.file.read_exact_at(&mut buf, slot.start) {
            return EntryRow {
                error: Some(format!("cannot read the entry at byte {}: {e}", slot.start)),
                ..EntryRow::default()
            };
        }
        match serde_json::from_slice::<Value>(&buf) {
            Ok(v) => EntryRow {
                node_id: text(&v, "nodeId").unwrap_or_default(),
                t_hlc: text(&v, "tHlc").unwrap_or_default(),
                job_id: text(&v, "jobId").unwrap_or_default(),
                partition_key: text(&v, "partitionKey"),
                payload: text(&v, "payload").unwrap_or_default(),
                payload_hash: text(&v, "payloadHash").unwrap_or_default(),
                prev_link: text(&v, "prevLink"),
                link: text(&v, "link").unwrap_or_default(),
                enqueued_at: text(&v, "enqueuedAt").unwrap_or_default(),
                error: None,
            },
            Err(e) => EntryRow {
                error: Some(format!(
                    "the bytes at {}..{} changed since indexing ({e}); rescan",
                    slot.start,
                    slot.start + slot.len as u64
                )),
                ..EntryRow::default()
            },
        }
    }

    /// Findings located at (log, index), in the engine's order.
    pub fn findings_at(&self, log: usize, index: usize) -> impl Iterator<Item = &Finding> {
        self.report
            .findings
            .iter()
            .filter(move |f| f.log == Some(log) && f.index == Some(index as u64))
    }

    /// Findings of one log that have no entry position (e.g. tail truncated, log schema).
    pub fn log_level_findings(&self, log: usize) -> impl Iterator<Item = &Finding> {
        self.report
            .findings
            .iter()
            .filter(move |f| f.log == Some(log) && f.index.is_none())
    }

    /// Findings of the whole bundle (manifest, signature, header schema).
    pub fn bundle_level_findings(&self) -> impl Iterator<Item = &Finding> {
        self.report.findings.iter().filter(|f| f.log.is_none())
    }

    /// The positions (log, index) of every located finding, in the engine's report order.
    pub fn finding_positions(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for f in &self.report.findings {
            if let (Some(l), Some(i)) = (f.log, f.index) {
                let p = (l, i as usize);
                if out.last() != Some(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// Recomputes an entry's payload hash and link with the engine's chain functions.
pub fn recompute(row: &EntryRow) -> Recomputed {
    let ph = payload_hash(&row.payload);
    let decode32 = |s: &str| -> Option<[u8; 32]> { B64.decode(s).ok()?.try_into().ok() };
    let link = (|| {
        let job = uuid::Uuid::parse_str(&row.job_id).ok()?;
        let stored_hash = decode32(&row.payload_hash)?;
        let prev = match &row.prev_link {
            None => None,
            Some(p) => Some(decode32(p)?),
        };
        crate::core::hlc::Hlc::parse(&row.t_hlc).ok()?;
        Some(B64.encode(node_link(prev.as_ref(), &job, &row.t_hlc, &stored_hash)))
    })();
    Recomputed {
        payload_hash: B64.encode(ph),
        link,
    }
}
