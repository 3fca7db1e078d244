//! Streaming bundle reader: one pass over the file, entries handed to a visitor one at a time,
//! the manifest digest computed on the way. Memory is bounded by the largest single entry.

use super::digest::{write_entry_canonical, ManifestHasher};
use super::dupkeys::{may_hold_keys, repeated_keys};
use super::model::{BundleHeader, EntryRef};
use super::scan::{json_error, ScanError, Scanner};
use crate::core::canonical::canonical_text;
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

/// A field that is missing, ill-typed or unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// JSON path, e.g. `$.jobLogs[0].entries[3].tHlc`.
    pub path: String,
    pub log: Option<usize>,
    pub index: Option<usize>,
    pub message: String,
}

/// The file could not be read as JSON at all (syntax, encoding, truncation, I/O).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset} ({path}): {message}")]
pub struct ReadError {
    pub offset: u64,
    pub path: String,
    pub message: String,
}

impl ReadError {
    fn at(path: &str, e: ScanError) -> Self {
        ReadError {
            offset: e.offset,
            path: path.to_string(),
            message: e.message,
        }
    }
}

/// An entry as the visitor sees it.
pub enum EntryView<'a> {
    /// Every field present with the right type.
    Parsed(&'a EntryRef<'a>),
    /// Some fields missing or ill-typed; well-typed ones are kept (others are empty strings).
    Invalid {
        partial: &'a EntryRef<'a>,
        problems: &'a [SchemaProblem],
    },
}

impl<'a> EntryView<'a> {
    pub fn entry(&self) -> &'a EntryRef<'a> {
        match self {
            EntryView::Parsed(e) => e,
            EntryView::Invalid { partial, .. } => partial,
        }
    }
}

/// The fields of one log object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFields {
    pub node_id: Option<String>,
    pub last_hlc: Option<String>,
    pub chain_head: Option<String>,
    pub entry_count: usize,
    /// Byte range of the log object in the file.
    pub span: Range<u64>,
}

/// Receives a bundle's contents in file order.
pub trait BundleVisitor {
    fn entry(&mut self, log: usize, index: usize, span: Range<u64>, entry: EntryView<'_>);
    /// Called when a log's `entries` array starts, with the log's fields read so far.
    fn entries_begin(&mut self, _log: usize, _fields_so_far: &LogFields) {}
    fn log_end(&mut self, log: usize, fields: &LogFields);
}

/// A visitor that ignores everything (for summaries).
pub struct NoVisitor;
impl BundleVisitor for NoVisitor {
    fn entry(&mut self, _: usize, _: usize, _: Range<u64>, _: EntryView<'_>) {}
    fn log_end(&mut self, _: usize, _: &LogFields) {}
}

/// What one pass over a bundle found besides the entries.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// Header fields (missing or ill-typed ones are empty strings and listed in `problems`).
    pub header: BundleHeader,
    pub has_signature: bool,
    pub logs: Vec<LogFields>,
    pub computed_manifest_digest: String,
    pub problems: Vec<SchemaProblem>,
    pub bytes: u64,
    pub entries: usize,
}

const HEADER_KEYS: [&str; 7] = [
    "bundleId",
    "tenantId",
    "createdAt",
    "createdByNodeId",
    "manifestDigest",
    "signature",
    "signedBy",
];

/// Opens and reads a bundle file. I/O errors name nothing but the cause; callers add the path.
pub fn read_bundle_file(
    path: &Path,
    visitor: &mut impl BundleVisitor,
) -> Result<ReadSummary, BundleFileError> {
    let file = crate::core::notify::open_bundle_source(path)
        .map_err(|e| BundleFileError::Io(e.to_string()))?;
    read_bundle(file, visitor).map_err(BundleFileError::Syntax)
}

/// Why a bundle file could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BundleFileError {
    #[error("{0}")]
    Io(String),
    #[error("not a readable bundle: {0}")]
    Syntax(ReadError),
}

/// Reads a bundle from any byte source in one pass.
pub fn read_bundle<R: Read>(
    reader: R,
    visitor: &mut impl BundleVisitor,
) -> Result<ReadSummary, ReadError> {
    let mut s = Scanner::new(reader);
    let mut summary = ReadSummary::default();
    let mut hasher = ManifestHasher::new();
    let mut seen_keys: HashSet<String> = HashSet::new();
    let mut saw_job_logs = false;

    if s.peek().map_err(|e| ReadError::at("$", e))? == Some(0xEF) && s.offset() == 0 {
        return Err(ReadError::at(
            "$",
            ScanError::new(0, "the file starts with a UTF-8 byte order mark (EF BB BF), which JSON does not allow; it was probably saved by an editor that adds one: remove the first 3 bytes (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`) and retry"),
        ));
    }
    s.expect(b'{', "'{' (a bundle is a JSON object)")
        .map_err(|e| ReadError::at("$", e))?;
    if !s.eat(b'}').map_err(|e| ReadError::at("$", e))? {
        loop {
            let key = s.key().map_err(|e| ReadError::at("$", e))?;
            let path = format!("$.{key}");
            if !seen_keys.insert(key.clone()) {
                summary.problems.push(problem(
                    &path,
                    None,
                    None,
                    "duplicate key (a key may appear once per object)",
                ));
            }
            if key == "jobLogs" {
                saw_job_logs = true;
                read_job_logs(&mut s, visitor, &mut hasher, &mut summary)?;
            } else {
                let (start, raw) = s.capture().map_err(|e| ReadError::at(&path, e))?;
                let value: Value = serde_json::from_slice(raw)
                    .map_err(|e| ReadError::at(&path, json_error(start, raw, &e)))?;
                repeats_inside(raw, &path, None, None, &mut summary.problems);
                if HEADER_KEYS.contains(&key.as_str()) {
                    match value {
                        Value::String(v) => set_header(&mut summary.header, &key, v),
                        other => summary.problems.push(problem(
                            &path,
                            None,
                            None,
                            &format!("must be a string, found {}", type_name(&other)),
                        )),
                    }
                    if key == "signature" {
                        summary.has_signature = true;
                    }
                } else {
                    summary
                        .problems
                        .push(problem(&path, None, None, "unknown field"));
                }
            }
            if !s
                .next_or_close(b'}', "the bundle object")
                .map_err(|e| ReadError::at("$", e))?
            {
                break;
            }
        }
    }
    s.expect_end().map_err(|e| ReadError::at("$", e))?;
    for key in [
        "bundleId",
        "tenantId",
        "createdAt",
        "createdByNodeId",
        "manifestDigest",
    ] {
        if !seen_keys.contains(key) {
            summary.problems.push(problem(
                &format!("$.{key}"),
                None,
                None,
                "missing required field",
            ));
        }
    }
    if !saw_job_logs {
        summary
            .problems
            .push(problem("$.jobLogs", None, None, "missing required field"));
    }
    let signed_by_present = seen_keys.contains("signedBy");
    if summary.has_signature != signed_by_present {
        summary.problems.push(problem(
            "$.signedBy",
            None,
            None,
            "signature and signedBy must appear together",
        ));
    }
    summary.bytes = s.offset();
    summary.computed_manifest_digest = hasher.finish();
    Ok(summary)
}

fn set_header(h: &mut BundleHeader, key: &str, v: String) {
    match key {
        "bundleId" => h.bundle_id = v,
        "tenantId" => h.tenant_id = v,
        "createdAt" => h.created_at = v,
        "createdByNodeId" => h.created_by_node_id = v,
        "manifestDigest" => h.manifest_digest = v,
        "signature" => h.signature = Some(v),
        "signedBy" => h.signed_by = Some(v),
        _ => {}
    }
}

fn read_job_logs<R: Read>(
    s: &mut Scanner<R>,
    visitor: &mut impl BundleVisitor,
    hasher: &mut ManifestHasher,
    summary: &mut ReadSummary,
) -> Result<(), ReadError> {
    let here = "$.jobLogs";
    if s.peek().map_err(|e| ReadError::at(here, e))? != Some(b'[') {
        // Not an array: record the problem and hash what is there.
        let (start, raw) = s.capture().map_err(|e| ReadError::at(here, e))?;
        let value: Value = serde_json::from_slice(raw)
            .map_err(|e| ReadError::at(here, json_error(start, raw, &e)))?;
        repeats_inside(raw, here, None, None, &mut summary.problems);
        summary.problems.push(problem(
            here,
            None,
            None,
            &format!("must be an array, found {}", type_name(&value)),
        ));
        return Ok(());
    }
    s.expect(b'[', "'['").map_err(|e| ReadError::at(here, e))?;
    if s.eat(b']').map_err(|e| ReadError::at(here, e))? {
        return Ok(());
    }
    let mut log_index = 0usize;
    let mut scratch = Vec::with_capacity(4096);
    loop {
        let path = format!("$.jobLogs[{log_index}]");
        let start = s.offset();
        if s.peek().map_err(|e| ReadError::at(&path, e))? != Some(b'{') {
            let (start, raw) = s.capture().map_err(|e| ReadError::at(&path, e))?;
            let value: Value = serde_json::from_slice(raw)
                .map_err(|e| ReadError::at(&path, json_error(start, raw, &e)))?;
            repeats_inside(raw, &path, Some(log_index), None, &mut summary.problems);
            summary.problems.push(problem(
                &path,
                Some(log_index),
                None,
                &format!("must be an object, found {}", type_name(&value)),
            ));
            // hash it as an element of the array
            hasher.end_log(Vec::new(), false);
        } else {
            read_log(
                s,
                visitor,
                hasher,
                summary,
                log_index,
                &path,
                start,
                &mut scratch,
            )?;
        }
        log_index += 1;
        if !s
            .next_or_close(b']', "the jobLogs array")
            .map_err(|e| ReadError::at(here, e))?
        {
            break;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn read_log<R: Read>(
    s: &mut Scanner<R>,
    visitor: &mut impl BundleVisitor,
    hasher: &mut ManifestHasher,
    summary: &mut ReadSummary,
    log_index: usize,
    path: &str,
    start: u64,
    scratch: &mut Vec<u8>,
) -> Result<(), ReadError> {
    let mut fields = LogFields::default();
    s.expect(b'{', "'{'").map_err(|e| ReadError::at(path, e))?;
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    let mut late: Vec<(String, Vec<u8>)> = Vec::new();
    let mut had_entries = false;
    let mut keys: HashSet<String> = HashSet::new();
    if !s.eat(b'}').map_err(|e| ReadError::at(path, e))? {
        loop {
            let key = s.key().map_err(|e| ReadError::at(path, e))?;
            let kpath = format!("{path}.{key}");
            if !keys.insert(key.clone()) {
                summary.problems.push(problem(
                    &kpath,
                    Some(log_index),
                    None,
                    "duplicate key (a key may appear once per object)",
                ));
            }
            if key == "entries" && !had_entries {
                had_entries = true;
                let streamable = members.iter().any(|(k, _)| k == "chainHead");
                hasher.begin_entries(std::mem::take(&mut members), streamable);
                visitor.entries_begin(log_index, &fields);
                fields.entry_count =
                    read_entries(s, visitor, hasher, summary, log_index, &kpath, scratch)?;
            } else {
                let (vstart, raw) = s.capture().map_err(|e| ReadError::at(&kpath, e))?;
                let value: Value = serde_json::from_slice(raw)
                    .map_err(|e| ReadError::at(&kpath, json_error(vstart, raw, &e)))?;
                repeats_inside(raw, &kpath, Some(log_index), None, &mut summary.problems);
                let canonical = canonical_text(&value)
                    .map_err(|e| ReadError::at(&kpath, ScanError::new(vstart, e.to_string())))?
                    .into_bytes();
                let slot = match key.as_str() {
                    "nodeId" => Some(&mut fields.node_id),
                    "lastHlc" => Some(&mut fields.last_hlc),
                    "chainHead" => Some(&mut fields.chain_head),
                    _ => None,
                };
                match (slot, value) {
                    (Some(slot), Value::String(v)) => *slot = Some(v),
                    (Some(_), other) => summary.problems.push(problem(
                        &kpath,
                        Some(log_index),
                        None,
                        &format!("must be a string, found {}", type_name(&other)),
                    )),
                    (None, _) => summary.problems.push(problem(
                        &kpath,
                        Some(log_index),
                        None,
                        "unknown field",
                    )),
                }
                if had_entries {
                    late.push((key, canonical));
                } else {
                    members.push((key, canonical));
                }
            }
            if !s
                .next_or_close(b'}', "a job log object")
                .map_err(|e| ReadError::at(path, e))?
            {
                break;
            }
        }
    }
    if !had_entries {
        members.extend(late);
        late = members;
    }
    hasher.end_log(late, had_entries);
    for (key, name) in [
        ("nodeId", &fields.node_id),
        ("lastHlc", &fields.last_hlc),
        ("chainHead", &fields.chain_head),
    ] {
        if name.is_none() && !keys.contains(key) {
            summary.problems.push(problem(
                &format!("{path}.{key}"),
                Some(log_index),
                None,
                "missing required field",
            ));
        }
    }
    if !had_entries {
        summary.problems.push(problem(
            &format!("{path}.entries"),
            Some(log_index),
            None,
            "missing required field",
        ));
    }
    fields.span = start..s.offset();
    visitor.log_end(log_index, &fields);
    summary.logs.push(fields);
    Ok(())
}

fn read_entries<R: Read>(
    s: &mut Scanner<R>,
    visitor: &mut impl BundleVisitor,
    hasher: &mut ManifestHasher,
    summary: &mut ReadSummary,
    log_index: usize,
    path: &str,
    scratch: &mut Vec<u8>,
) -> Result<usize, ReadError> {
    if s.peek().map_err(|e| ReadError::at(path, e))? != Some(b'[') {
        let (vstart, raw) = s.capture().map_err(|e| ReadError::at(path, e))?;
        let value: Value = serde_json::from_slice(raw)
            .map_err(|e| ReadError::at(path, json_error(vstart, raw, &e)))?;
        repeats_inside(raw, path, Some(log_index), None, &mut summary.problems);
        summary.problems.push(problem(
            path,
            Some(log_index),
            None,
            &format!("must be an array, found {}", type_name(&value)),
        ));
        return Ok(0);
    }
    s.expect(b'[', "'['").map_err(|e| ReadError::at(path, e))?;
    if s.eat(b']').map_err(|e| ReadError::at(path, e))? {
        return Ok(0);
    }
    let mut index = 0usize;
    loop {
        let (start, raw) = s
            .capture()
            .map_err(|e| ReadError::at(&format!("{path}[{index}]"), e))?;
        let end = start + raw.len() as u64;
        scratch.clear();
        match serde_json::from_slice::<EntryRef<'_>>(raw) {
            Ok(entry) => {
                write_entry_canonical(scratch, &entry);
                hasher.entry(scratch);
                visitor.entry(log_index, index, start..end, EntryView::Parsed(&entry));
            }
            Err(why) => {
                let epath = format!("{path}[{index}]");
                let value: Value = serde_json::from_slice(raw)
                    .map_err(|e| ReadError::at(&epath, json_error(start, raw, &e)))?;
                let canonical = canonical_text(&value)
                    .map_err(|e| ReadError::at(&epath, ScanError::new(start, e.to_string())))?;
                hasher.entry(canonical.as_bytes());
                let (partial, mut problems) = partial_entry(&value, &epath, log_index, index);
                repeats_inside(raw, &epath, Some(log_index), Some(index), &mut problems);
                if problems.is_empty() {
                    // Whatever made the strict parse fail is a finding: an entry is never dropped
                    // without one.
                    let why = json_error(start, raw, &why);
                    problems.push(problem(
                        &epath,
                        Some(log_index),
                        Some(index),
                        &format!("byte {}: {}", why.offset, why.message),
                    ));
                }
                summary.problems.extend(problems.iter().cloned());
                visitor.entry(
                    log_index,
                    index,
                    start..end,
                    EntryView::Invalid {
                        partial: &partial,
                        problems: &problems,
                    },
                );
            }
        }
        index += 1;
        summary.entries += 1;
        if !s
            .next_or_close(b']', "an entries array")
            .map_err(|e| ReadError::at(path, e))?
        {
            break;
        }
    }
    Ok(index)
}

const ENTRY_KEYS: [&str; 9] = [
    "nodeId",
    "tHlc",
    "jobId",
    "partitionKey",
    "payload",
    "payloadHash",
    "prevLink",
    "link",
    "enqueuedAt",
];

/// Builds a best-effort entry from an ill-shaped one and lists what is wrong with it.
fn partial_entry(
    value: &Value,
    path: &str,
    log: usize,
    index: usize,
) -> (EntryRef<'static>, Vec<SchemaProblem>) {
    let mut problems = Vec::new();
    let empty = serde_json::Map::new();
    let obj = match value {
        Value::Object(m) => m,
        other => {
            problems.push(problem(
                path,
                Some(log),
                Some(index),
                &format!("must be an object, found {}", type_name(other)),
            ));
            &empty
        }
    };
    for key in obj.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            problems.push(problem(
                &format!("{path}.{key}"),
                Some(log),
                Some(index),
                "unknown field",
            ));
        }
    }
    let mut get = |key: &str, optional: bool, nullable: bool| -> Option<String> {
        let fpath = format!("{path}.{key}");
        match obj.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Null) if nullable => None,
            None if optional => None,
            None => {
                if matches!(value, Value::Object(_)) {
                    problems.push(problem(
                        &fpath,
                        Some(log),
                        Some(index),
                        "missing required field",
                    ));
                }
                None
            }
            Some(other) => {
                problems.push(problem(
                    &fpath,
                    Some(log),
                    Some(index),
                    &format!(
                        "must be a string{}, found {}",
                        if nullable { " or null" } else { "" },
                        type_name(other)
                    ),
                ));
                None
            }
        }
    };
    let node_id = get("nodeId", false, false).unwrap_or_default();
    let t_hlc = get("tHlc", false, false).unwrap_or_default();
    let job_id = get("jobId", false, false).unwrap_or_default();
    let partition_key = get("partitionKey", true, false);
    let payload = get("payload", false, false).unwrap_or_default();
    let payload_hash = get("payloadHash", false, false).unwrap_or_default();
    let prev_link = get("prevLink", false, true);
    let link = get("link", false, false).unwrap_or_default();
    let enqueued_at = get("enqueuedAt", false, false).unwrap_or_default();
    use std::borrow::Cow::Owned;
    (
        EntryRef {
            node_id: Owned(node_id),
            t_hlc: Owned(t_hlc),
            job_id: Owned(job_id),
            partition_key: partition_key.map(Owned),
            payload: Owned(payload),
            payload_hash: Owned(payload_hash),
            prev_link: prev_link.map(Owned),
            link: Owned(link),
            enqueued_at: Owned(enqueued_at),
        },
        problems,
    )
}

/// Records every key repeated inside `raw` (an object or array at `path`) as a problem.
fn repeats_inside(
    raw: &[u8],
    path: &str,
    log: Option<usize>,
    index: Option<usize>,
    out: &mut Vec<SchemaProblem>,
) {
    if !may_hold_keys(raw) {
        return;
    }
    // `raw` already parsed as JSON, so the walk cannot fail; a failure would be reported by it.
    for p in repeated_keys(raw, path).unwrap_or_default() {
        out.push(problem(
            &p,
            log,
            index,
            "duplicate key (a key may appear once per object)",
        ));
    }
}

fn problem(path: &str, log: Option<usize>, index: Option<usize>, message: &str) -> SchemaProblem {
    SchemaProblem {
        path: path.to_string(),
        log,
        index,
        message: message.to_string(),
    }
}

/// The JSON type name of a value, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads a whole bundle into memory (small bundles: tests, the demo, signing).
pub fn load_bundle(path: &Path) -> Result<super::model::Bundle, BundleFileError> {
    struct Collect(Vec<Vec<super::model::Entry>>);
    impl BundleVisitor for Collect {
        fn entry(&mut self, log: usize, _: usize, _: Range<u64>, e: EntryView<'_>) {
            while self.0.len() <= log {
                self.0.push(Vec::new());
            }
            self.0[log].push(e.entry().to_owned_entry());
        }
        fn log_end(&mut self, log: usize, _: &LogFields) {
            while self.0.len() <= log {
                self.0.push(Vec::new());
            }
        }
    }
    let mut c = Collect(Vec::new());
    let summary = read_bundle_file(path, &mut c)?;
    let job_logs = summary
        .logs
        .iter()
        .zip(c.0)
        .map(|(f, entries)| super::model::JobLog {
            node_id: f.node_id.clone().unwrap_or_default(),
            last_hlc: f.last_hlc.clone().unwrap_or_default(),
            chain_head: f.chain_head.clone().unwrap_or_default(),
            entries,
        })
        .collect();
    Ok(super::model::Bundle {
        header: summary.header,
        job_logs,
    })
}
