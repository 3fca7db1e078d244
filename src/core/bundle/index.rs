//! A bundle's index and evidence, for displays: one streaming pass of the engine's reader with the
//! engine's [`Verifier`] riding along gives the listing, the verification report and, for every
//! entry, only its byte span in the file and the verifier's verdict flags (16 bytes an entry).
//! Rows are read back from the file by span when they scroll into view, so a bundle of any size
//! opens in bounded memory; each row's evidence (stored and recomputed payloadHash and link) is
//! recomputed with the verifier's own strict decoders, so a display can never disagree with the
//! verdict.

use super::catalog::{self, Listing};
use super::reader::BundleFileError;
use crate::core::bundle::{BundleHeader, BundleVisitor, Entry, EntryView, LogFields};
use crate::core::chain::{node_link, payload_hash};
use crate::core::verify::{
    decode_digest, parse_job_id, read_two_threads, Finding, ProgressReader, Report, Verifier,
    VerifyOptions,
};
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
    /// Opened on the first row read (an index kept for a listing holds no descriptor).
    file: std::sync::OnceLock<Result<File, String>>,
    pub header: BundleHeader,
    /// The listing the same pass produced (what `jobs list` shows for the file).
    pub listing: Listing,
    pub logs: Vec<LogIndex>,
    pub report: Report,
    pub bytes: u64,
}

/// One entry read back from the file for display. Every field is the file's own text (untrusted:
/// make it visible before drawing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryRow {
    /// Empty when `error` is set.
    pub entry: Entry,
    /// Set when the entry could not be read back as JSON.
    pub error: Option<String>,
}

/// Stored vs recomputed hashes of one entry, recomputed with the verifier's decoders and the
/// engine's chain functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// SHA-256 of the payload, base64.
    pub payload_hash: String,
    pub payload_hash_matches: bool,
    /// The recomputed link, or why it cannot be (a field the verifier rejects: the same words
    /// as its schema-invalid finding).
    pub link: Result<String, String>,
    pub link_matches: bool,
}

/// What one pass over a file gives: its listing and, for a bundle, its index (with the report).
#[derive(Debug)]
pub struct Examined {
    pub listing: Listing,
    pub index: Option<ChainIndex>,
}

/// Lists, verifies and indexes `path` in one pass (the console reads each bundle once).
pub fn examine(
    path: &Path,
    opts: &VerifyOptions<'_>,
    progress: Option<Arc<AtomicU64>>,
) -> Examined {
    match ChainIndex::build(path, opts, progress) {
        Ok(index) if index.listing.is_bundle() => Examined {
            listing: index.listing.clone(),
            index: Some(index),
        },
        Ok(index) => Examined {
            listing: index.listing,
            index: None,
        },
        Err(e) => Examined {
            listing: catalog::not_bundle(path, &e),
            index: None,
        },
    }
}

struct Indexer<'a> {
    verifier: Verifier<'a>,
    logs: Vec<Vec<EntrySlot>>,
}

impl BundleVisitor for Indexer<'_> {
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, entry: EntryView<'_>) {
        let flags = self.verifier.check_entry_flags(log, index, &entry);
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
    /// Indexes and verifies `path` in one pass (the checks on a second thread beside the reading);
    /// `progress` counts bytes read.
    pub fn build(
        path: &Path,
        opts: &VerifyOptions<'_>,
        progress: Option<Arc<AtomicU64>>,
    ) -> Result<ChainIndex, BundleFileError> {
        let io = |e: std::io::Error| BundleFileError::Io(e.to_string());
        // Never waits on a FIFO or device swapped in since the file was listed.
        let file = crate::core::file_input::open_regular(path).map_err(io)?;
        let mut indexer = Indexer {
            verifier: Verifier::new(opts.clone()),
            logs: Vec::new(),
        };
        let reader = ProgressReader::new(file, progress.as_deref());
        let summary = read_two_threads(reader, &mut indexer).map_err(BundleFileError::Syntax)?;
        let listing = catalog::listing_of(path, &summary);
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
            file: std::sync::OnceLock::new(),
            listing,
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
        let file = match self.file.get_or_init(|| {
            // On the console's thread: a FIFO swapped in since indexing must not block it.
            crate::core::file_input::open_regular(&self.path).map_err(|e| e.to_string())
        }) {
            Ok(f) => f,
            Err(e) => {
                return EntryRow {
                    error: Some(format!("cannot open the file again: {e}")),
                    ..EntryRow::default()
                }
            }
        };
        let mut buf = vec![0u8; slot.len as usize];
        if let Err(e) = file.read_exact_at(&mut buf, slot.start) {
            return EntryRow {
                error: Some(format!("cannot read the entry at byte {}: {e}", slot.start)),
                ..EntryRow::default()
            };
        }
        match serde_json::from_slice::<Value>(&buf) {
            Ok(v) => EntryRow {
                entry: Entry {
                    node_id: text(&v, "nodeId").unwrap_or_default(),
                    t_hlc: text(&v, "tHlc").unwrap_or_default(),
                    job_id: text(&v, "jobId").unwrap_or_default(),
                    partition_key: text(&v, "partitionKey"),
                    payload: text(&v, "payload").unwrap_or_default(),
                    payload_hash: text(&v, "payloadHash").unwrap_or_default(),
                    prev_link: text(&v, "prevLink"),
                    link: text(&v, "link").unwrap_or_default(),
                    enqueued_at: text(&v, "enqueuedAt").unwrap_or_default(),
                },
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

/// Recomputes an entry's payload hash and link as the verifier does: its strict decoders (a
/// braced or uppercase jobId, unpadded base64 or a bad tHlc make the link not computable, with the
/// verifier's reason) and the engine's chain functions.
pub fn evidence(row: &EntryRow) -> Evidence {
    let ph = B64.encode(payload_hash(&row.entry.payload));
    let link = (|| -> Result<String, String> {
        let job = parse_job_id(&row.entry.job_id).map_err(|e| format!("jobId: {e}"))?;
        let stored_hash =
            decode_digest(&row.entry.payload_hash).map_err(|e| format!("payloadHash: {e}"))?;
        let prev = match &row.entry.prev_link {
            None => None,
            Some(p) => Some(decode_digest(p).map_err(|e| format!("prevLink: {e}"))?),
        };
        crate::core::hlc::Hlc::parse(&row.entry.t_hlc).map_err(|e| format!("tHlc: {e}"))?;
        Ok(B64.encode(node_link(
            prev.as_ref(),
            &job,
            &row.entry.t_hlc,
            &stored_hash,
        )))
    })();
    Evidence {
        payload_hash_matches: ph == row.entry.payload_hash,
        payload_hash: ph,
        link_matches: link.as_ref().is_ok_and(|l| *l == row.entry.link),
        link,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_of(entry: &Entry) -> EntryRow {
        EntryRow {
            entry: entry.clone(),
            error: None,
        }
    }

    /// An uppercase jobId is schema-invalid for `verify`; the evidence agrees (the link is not
    /// recomputed, with the verifier's reason) instead of showing a matching link.
    #[test]
    fn evidence_uses_the_verifiers_strict_decoders() {
        let b =
            crate::core::bundle::load_bundle(Path::new("../shared/vectors/bundles/two-nodes.json"))
                .unwrap();
        let good = row_of(&b.job_logs[0].entries[0]);
        let ev = evidence(&good);
        assert!(ev.payload_hash_matches && ev.link_matches, "{ev:?}");
        let mut upper = good.clone();
        upper.entry.job_id = upper.entry.job_id.to_uppercase();
        let ev = evidence(&upper);
        assert!(!ev.link_matches);
        let why = ev.link.unwrap_err();
        assert!(why.starts_with("jobId:"), "{why}");
        let mut braced = good.clone();
        braced.entry.job_id = format!("{{{}}}", good.entry.job_id);
        assert!(evidence(&braced).link.is_err());
    }

    /// One pass gives the listing, the same report as `verify_file`, and the index.
    #[test]
    fn one_pass_gives_listing_report_and_index() {
        let path = Path::new("../shared/vectors/tamper/payload-modified.json");
        let opts = VerifyOptions::default();
        let ex = examine(path, &opts, None);
        assert!(ex.listing.is_bundle());
        let index = ex.index.unwrap();
        let report = crate::core::verify::verify_file(path, &opts).unwrap();
        assert_eq!(index.report.findings, report.findings);
        assert_eq!(index.report.ok, report.ok);
        assert_eq!(index.entry_count(), report.stats.entries);
        let (l, i) = index.finding_positions()[0];
        let ev = evidence(&index.read_row(l, i));
        assert!(!ev.payload_hash_matches);
        let not = examine(Path::new("Cargo.toml"), &opts, None);
        assert!(!not.listing.is_bundle() && not.index.is_none());
    }

    /// A bundle swapped for a FIFO after it was listed (or after it was indexed) is refused at
    /// once: examining it, reading a row back and the half-copied check never wait on the pipe.
    #[cfg(unix)]
    #[test]
    fn a_fifo_swapped_in_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        std::fs::copy("../shared/vectors/bundles/two-nodes.json", &path).unwrap();
        let opts = VerifyOptions::default();
        let index = examine(&path, &opts, None).index.unwrap();
        std::fs::remove_file(&path).unwrap();
        crate::core::file_input::make_fifo(&path);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let row = index.read_row(0, 0);
            let built = ChainIndex::build(&path, &opts, None).err();
            let cut = crate::core::bundle::catalog::stops_mid_object(&path);
            let _ = done_tx.send((row.error, built, cut));
        });
        let (row, built, cut) = done_rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("no open waits on the FIFO");
        assert!(row.unwrap().contains("not a regular file"));
        assert!(built.unwrap().to_string().contains("not a regular file"));
        assert!(!cut);
    }
}
