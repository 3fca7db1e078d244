//! What can be wrong with a bundle's shape: schema problems (the reader goes on; verification turns
//! them into findings) and errors that stop the reader (syntax, I/O).

use super::super::dupkeys::{may_hold_keys, repeated_keys};
use super::super::scan::ScanError;
use serde_json::Value;

/// What is wrong with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaProblemKind {
    /// A required field is absent.
    Missing,
    /// A field has the wrong JSON type.
    WrongType,
    /// An entry that is not a JSON object (`null`, an array, a number, a string, a boolean): it
    /// has no fields at all, so none of them is checked or reported on its own.
    NotAnObject,
    /// A field the schema does not define.
    Unknown,
    /// A key appears twice in one object.
    DuplicateKey,
    /// Fields that must appear together do not (signature and signedBy).
    Unpaired,
    /// An entry the strict parse refused for another reason (the message says why).
    Malformed,
}

/// A field that is missing, ill-typed or unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// JSON path, e.g. `$.jobLogs[0].entries[3].tHlc`.
    pub path: String,
    pub log: Option<usize>,
    pub index: Option<usize>,
    pub kind: SchemaProblemKind,
    /// What is wrong, for people.
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
    pub(super) fn at(path: &str, e: ScanError) -> Self {
        ReadError {
            offset: e.offset,
            path: path.to_string(),
            message: e.message,
        }
    }
}

/// Why a bundle file could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BundleFileError {
    #[error("{0}")]
    Io(String),
    #[error("not a readable bundle: {0}")]
    Syntax(ReadError),
}

impl BundleFileError {
    /// Why the input at `path` could not be opened, without its path (the caller names the file
    /// once: `nosuch.json: cannot read it: ...`, not `nosuch.json: cannot read nosuch.json: ...`).
    pub fn opening(
        path: &std::path::Path,
        e: crate::core::notify::portable::PortableError,
    ) -> Self {
        use crate::core::notify::portable::PortableError;
        match e {
            PortableError::Io { source, .. }
                if crate::core::fd_limit::is_out_of_descriptors(&source) =>
            {
                let advice = crate::core::fd_limit::out_of_descriptors_advice();
                BundleFileError::Io(format!("cannot read it: {source}; {advice}"))
            }
            // `-` is a file name here: bundles are read from files (a verified import reads its
            // inputs twice), never from standard input.
            PortableError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound && path.as_os_str() == "-" =>
            {
                BundleFileError::Io(format!(
                    "cannot read it: {source}; bundles are read from files, not standard input: \
                     save it to a file first (`... > bundle.json`) and give that file"
                ))
            }
            PortableError::Io { source, .. } => {
                BundleFileError::Io(format!("cannot read it: {source}"))
            }
            other => {
                let text = other.to_string();
                let named = format!("{}: ", crate::core::text::visible_path(path));
                BundleFileError::Io(text.strip_prefix(&named).unwrap_or(&text).to_string())
            }
        }
    }
}

/// Records every key repeated inside `raw` (an object or array at `path`) as a problem.
pub(super) fn repeats_inside(
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
            SchemaProblemKind::DuplicateKey,
            "duplicate key (a key may appear once per object)",
        ));
    }
}

pub(super) fn problem(
    path: &str,
    log: Option<usize>,
    index: Option<usize>,
    kind: SchemaProblemKind,
    message: &str,
) -> SchemaProblem {
    SchemaProblem {
        path: path.to_string(),
        log,
        index,
        kind,
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
