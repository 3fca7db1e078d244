//! Reading `jobLogs`: each log object, its fields and its entries, hashed for the manifest digest on
//! the way and handed to the visitor one entry at a time.

use super::super::digest::{write_entry_canonical, ManifestHasher};
use super::super::fast_entry::scan_fast;
use super::super::model::EntryRef;
use super::super::scan::{
    json_error, ScanError, Scanner, ARRAY_CLOSE, ARRAY_OPEN, OBJECT_CLOSE, OBJECT_OPEN,
};
use super::partial::partial_entry;
use super::problems::{
    problem, repeats_inside, type_name, ReadError, SchemaProblem, SchemaProblemKind,
};
use super::visitor::{BundleVisitor, EntryView, LogFields, ReadSummary};
use crate::core::canonical::canonical_text;
use serde_json::Value;
use std::collections::HashSet;
use std::io::Read;

/// Where the pieces of the logs go as they are read, and the buffer entries are canonicalised in.
struct Sink<'a, V> {
    visitor: &'a mut V,
    hasher: &'a mut ManifestHasher,
    summary: &'a mut ReadSummary,
    scratch: Vec<u8>,
    /// The unescaped payload of an entry read by the fast path.
    payload: String,
}

/// Steps over a value at `path` that is not the `expected` container ("an array", "an object"):
/// a wrong-type problem, and the repeated keys inside it.
fn skip_wrong_type<R: Read>(
    s: &mut Scanner<R>,
    path: &str,
    log_index: Option<usize>,
    expected: &str,
    problems: &mut Vec<SchemaProblem>,
) -> Result<(), ReadError> {
    let (start, raw) = s.capture().map_err(|e| ReadError::at(path, e))?;
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| ReadError::at(path, json_error(start, raw, &e)))?;
    repeats_inside(raw, path, log_index, None, problems);
    problems.push(problem(
        path,
        log_index,
        None,
        SchemaProblemKind::WrongType,
        &format!("must be {expected}, found {}", type_name(&value)),
    ));
    Ok(())
}

pub(super) fn read_job_logs<R: Read>(
    s: &mut Scanner<R>,
    visitor: &mut impl BundleVisitor,
    hasher: &mut ManifestHasher,
    summary: &mut ReadSummary,
) -> Result<(), ReadError> {
    let here = "$.jobLogs";
    if s.peek().map_err(|e| ReadError::at(here, e))? != Some(ARRAY_OPEN) {
        // Not an array: record the problem and hash what is there.
        return skip_wrong_type(s, here, None, "an array", &mut summary.problems);
    }
    s.expect(ARRAY_OPEN, "'['")
        .map_err(|e| ReadError::at(here, e))?;
    if s.eat(ARRAY_CLOSE).map_err(|e| ReadError::at(here, e))? {
        return Ok(());
    }
    let mut log_index = 0usize;
    let mut out = Sink {
        visitor,
        hasher,
        summary,
        scratch: Vec::with_capacity(4096),
        payload: String::new(),
    };
    loop {
        let path = format!("$.jobLogs[{log_index}]");
        let start = s.offset();
        if s.peek().map_err(|e| ReadError::at(&path, e))? != Some(OBJECT_OPEN) {
            let problems = &mut out.summary.problems;
            skip_wrong_type(s, &path, Some(log_index), "an object", problems)?;
            // hash it as an element of the array
            out.hasher.end_log(Vec::new(), false);
        } else {
            read_log(s, &mut out, log_index, &path, start)?;
        }
        log_index += 1;
        if !s
            .next_or_close(ARRAY_CLOSE, "the jobLogs array")
            .map_err(|e| ReadError::at(here, e))?
        {
            break;
        }
    }
    Ok(())
}

fn read_log<R: Read>(
    s: &mut Scanner<R>,
    out: &mut Sink<'_, impl BundleVisitor>,
    log_index: usize,
    path: &str,
    start: u64,
) -> Result<(), ReadError> {
    let mut fields = LogFields::default();
    s.expect(OBJECT_OPEN, "'{'")
        .map_err(|e| ReadError::at(path, e))?;
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    let mut late: Vec<(String, Vec<u8>)> = Vec::new();
    let mut had_entries = false;
    let mut keys: HashSet<String> = HashSet::new();
    if !s.eat(OBJECT_CLOSE).map_err(|e| ReadError::at(path, e))? {
        loop {
            let key = s.key().map_err(|e| ReadError::at(path, e))?;
            let kpath = format!("{path}.{key}");
            if !keys.insert(key.clone()) {
                out.summary.problems.push(problem(
                    &kpath,
                    Some(log_index),
                    None,
                    SchemaProblemKind::DuplicateKey,
                    "duplicate key (a key may appear once per object)",
                ));
            }
            if key == "entries" && !had_entries {
                had_entries = true;
                let streamable = members.iter().any(|(k, _)| k == "chainHead");
                out.hasher
                    .begin_entries(std::mem::take(&mut members), streamable);
                out.visitor.entries_begin(log_index, &fields);
                fields.entry_count = read_entries(s, out, log_index, &kpath)?;
            } else {
                let (vstart, raw) = s.capture().map_err(|e| ReadError::at(&kpath, e))?;
                let value: Value = serde_json::from_slice(raw)
                    .map_err(|e| ReadError::at(&kpath, json_error(vstart, raw, &e)))?;
                repeats_inside(
                    raw,
                    &kpath,
                    Some(log_index),
                    None,
                    &mut out.summary.problems,
                );
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
                    (Some(_), other) => out.summary.problems.push(problem(
                        &kpath,
                        Some(log_index),
                        None,
                        SchemaProblemKind::WrongType,
                        &format!("must be a string, found {}", type_name(&other)),
                    )),
                    (None, _) => out.summary.problems.push(problem(
                        &kpath,
                        Some(log_index),
                        None,
                        SchemaProblemKind::Unknown,
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
                .next_or_close(OBJECT_CLOSE, "a job log object")
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
    out.hasher.end_log(late, had_entries);
    for (key, name) in [
        ("nodeId", &fields.node_id),
        ("lastHlc", &fields.last_hlc),
        ("chainHead", &fields.chain_head),
    ] {
        if name.is_none() && !keys.contains(key) {
            out.summary.problems.push(problem(
                &format!("{path}.{key}"),
                Some(log_index),
                None,
                SchemaProblemKind::Missing,
                "missing required field",
            ));
        }
    }
    if !had_entries {
        out.summary.problems.push(problem(
            &format!("{path}.entries"),
            Some(log_index),
            None,
            SchemaProblemKind::Missing,
            "missing required field",
        ));
    }
    fields.span = start..s.offset();
    out.visitor.log_end(log_index, &fields);
    out.summary.logs.push(fields);
    Ok(())
}

fn read_entries<R: Read>(
    s: &mut Scanner<R>,
    out: &mut Sink<'_, impl BundleVisitor>,
    log_index: usize,
    path: &str,
) -> Result<usize, ReadError> {
    if s.peek().map_err(|e| ReadError::at(path, e))? != Some(ARRAY_OPEN) {
        let problems = &mut out.summary.problems;
        skip_wrong_type(s, path, Some(log_index), "an array", problems)?;
        return Ok(0);
    }
    s.expect(ARRAY_OPEN, "'['")
        .map_err(|e| ReadError::at(path, e))?;
    if s.eat(ARRAY_CLOSE).map_err(|e| ReadError::at(path, e))? {
        return Ok(0);
    }
    let mut index = 0usize;
    loop {
        if !entry_fast(s, out, log_index, index) {
            entry_exact(s, out, log_index, index, path)?;
        }
        index += 1;
        out.summary.entries += 1;
        if !s
            .next_or_close(ARRAY_CLOSE, "an entries array")
            .map_err(|e| ReadError::at(path, e))?
        {
            break;
        }
    }
    Ok(index)
}

/// Reads the next entry by the fast path when it has the common shape (see
/// [`scan_fast`]); false (nothing consumed) otherwise.
fn entry_fast<R: Read>(
    s: &mut Scanner<R>,
    out: &mut Sink<'_, impl BundleVisitor>,
    log_index: usize,
    index: usize,
) -> bool {
    if !matches!(s.peek(), Ok(Some(OBJECT_OPEN))) {
        return false;
    }
    let start = s.offset();
    let Some(found) = scan_fast(s.window(), s.limit()) else {
        return false;
    };
    out.hasher.entry_with(|buf| found.write_canonical(buf));
    let len = found.byte_len();
    let entry = found.entry(&mut out.payload);
    let span = start..start + len as u64;
    out.visitor
        .entry(log_index, index, span, EntryView::Parsed(&entry));
    s.consume(len);
    true
}

/// Reads the next entry by the exact path: capture, strict parse, canonical text; an entry that
/// does not parse strictly is read loosely and handed over with its problems.
fn entry_exact<R: Read>(
    s: &mut Scanner<R>,
    out: &mut Sink<'_, impl BundleVisitor>,
    log_index: usize,
    index: usize,
    path: &str,
) -> Result<(), ReadError> {
    let Sink {
        visitor,
        hasher,
        summary,
        scratch,
        ..
    } = out;
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
                    SchemaProblemKind::Malformed,
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
    Ok(())
}
