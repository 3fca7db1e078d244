//! Findings: what verification reports (SPEC section 6). The `kind` strings are part of the JSON
//! output contract.

use serde::{Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The most characters of a bundle's own text (a node id, jobId, tHlc, link, as the file has it)
/// that a finding carries: the longest valid tHlc, so every valid value is carried whole. Longer
/// text cannot be valid; it is cut, with a note of its full length, so a hostile field costs
/// neither memory nor output per finding. The import's list of dropped entries clips the same way.
pub const CLIP_CHARS: usize = 160;

/// The most characters of a finding's message: a backstop far above any message made of valid
/// values, for text a message quotes from elsewhere (paths, parser errors).
pub const MESSAGE_CHARS: usize = 1024;

/// `text`, or its first `max_chars` characters followed by `… (N bytes in all)`.
pub fn clip_to(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => Cow::Owned(format!("{}… ({} bytes in all)", &text[..cut], text.len())),
    }
}

/// `text` clipped to [`CLIP_CHARS`].
pub fn clip(text: &str) -> Cow<'_, str> {
    clip_to(text, CLIP_CHARS)
}

/// Whether `text` is longer than [`CLIP_CHARS`] characters (longer than any valid field value
/// but a tenant id or a timestamp).
pub fn too_long(text: &str) -> bool {
    // A character takes at least one byte: text of at most CLIP_CHARS bytes is short, without
    // decoding it (every field of every entry comes through here).
    text.len() > CLIP_CHARS && text.char_indices().nth(CLIP_CHARS).is_some()
}

/// `text` quoted for a message (`{text:?}`); past [`CLIP_CHARS`] characters, its quoted prefix and
/// `… (N bytes in all)`.
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(CLIP_CHARS) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes in all)", &text[..cut], text.len()),
    }
}

/// [`bounded`] for borrowed text (copying at most the kept part).
fn bounded_str(text: &str, max_chars: usize) -> String {
    if text.char_indices().nth(max_chars + NOTE_CHARS).is_none() {
        return text.to_string();
    }
    clip_to(text, max_chars).into_owned()
}

/// Room for the note [`clip_to`] adds (`… (N bytes in all)`, at most 38 characters).
const NOTE_CHARS: usize = 40;

/// An owned value given to a finding, clipped to `max_chars` when it is longer than that and the
/// room of a note: text already clipped (by the caller, with [`clip`] or [`quoted`]) is kept as
/// it is. No copy when it is short enough.
fn bounded(text: String, max_chars: usize) -> String {
    if text.char_indices().nth(max_chars + NOTE_CHARS).is_none() {
        return text;
    }
    clip_to(&text, max_chars).into_owned()
}

/// Every kind of finding, in the order of SPEC section 6's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    SchemaInvalid,
    ManifestMismatch,
    PayloadModified,
    EntryModified,
    EntriesDeleted,
    EntryInserted,
    EntriesReordered,
    TailTruncated,
    HeadMismatch,
    HlcNotIncreasing,
    NodeMismatch,
    ClockSkew,
    SignatureInvalid,
    SignerUntrusted,
    SignatureMissing,
}

/// Which of the report's `checks` a finding fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Schema,
    ManifestDigest,
    Chain,
    Links,
    ChainHead,
    Signature,
}

impl FindingKind {
    pub const ALL: [FindingKind; 15] = [
        FindingKind::SchemaInvalid,
        FindingKind::ManifestMismatch,
        FindingKind::PayloadModified,
        FindingKind::EntryModified,
        FindingKind::EntriesDeleted,
        FindingKind::EntryInserted,
        FindingKind::EntriesReordered,
        FindingKind::TailTruncated,
        FindingKind::HeadMismatch,
        FindingKind::HlcNotIncreasing,
        FindingKind::NodeMismatch,
        FindingKind::ClockSkew,
        FindingKind::SignatureInvalid,
        FindingKind::SignerUntrusted,
        FindingKind::SignatureMissing,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::SchemaInvalid => "schema-invalid",
            FindingKind::ManifestMismatch => "manifest-mismatch",
            FindingKind::PayloadModified => "payload-modified",
            FindingKind::EntryModified => "entry-modified",
            FindingKind::EntriesDeleted => "entries-deleted",
            FindingKind::EntryInserted => "entry-inserted",
            FindingKind::EntriesReordered => "entries-reordered",
            FindingKind::TailTruncated => "tail-truncated",
            FindingKind::HeadMismatch => "head-mismatch",
            FindingKind::HlcNotIncreasing => "hlc-not-increasing",
            FindingKind::NodeMismatch => "node-mismatch",
            FindingKind::ClockSkew => "clock-skew",
            FindingKind::SignatureInvalid => "signature-invalid",
            FindingKind::SignerUntrusted => "signer-untrusted",
            FindingKind::SignatureMissing => "signature-missing",
        }
    }

    pub fn parse(s: &str) -> Option<FindingKind> {
        FindingKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The check this kind fails.
    pub fn check(self) -> Check {
        match self {
            FindingKind::SchemaInvalid => Check::Schema,
            FindingKind::ManifestMismatch => Check::ManifestDigest,
            FindingKind::PayloadModified | FindingKind::EntryModified => Check::Links,
            FindingKind::EntriesDeleted
            | FindingKind::EntryInserted
            | FindingKind::EntriesReordered
            | FindingKind::HlcNotIncreasing
            | FindingKind::NodeMismatch
            | FindingKind::ClockSkew => Check::Chain,
            FindingKind::TailTruncated | FindingKind::HeadMismatch => Check::ChainHead,
            FindingKind::SignatureInvalid
            | FindingKind::SignerUntrusted
            | FindingKind::SignatureMissing => Check::Signature,
        }
    }

    /// A short label for people.
    pub fn title(self) -> &'static str {
        match self {
            FindingKind::SchemaInvalid => "schema invalid",
            FindingKind::ManifestMismatch => "manifest digest mismatch",
            FindingKind::PayloadModified => "payload modified",
            FindingKind::EntryModified => "entry modified",
            FindingKind::EntriesDeleted => "entries deleted",
            FindingKind::EntryInserted => "entry inserted",
            FindingKind::EntriesReordered => "entries reordered",
            FindingKind::TailTruncated => "tail truncated",
            FindingKind::HeadMismatch => "head mismatch",
            FindingKind::HlcNotIncreasing => "HLC not increasing",
            FindingKind::NodeMismatch => "node mismatch",
            FindingKind::ClockSkew => "clock skew",
            FindingKind::SignatureInvalid => "signature invalid",
            FindingKind::SignerUntrusted => "signer untrusted",
            FindingKind::SignatureMissing => "signature missing",
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FindingKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One problem found in a bundle or chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub kind: FindingKind,
    pub node_id: Option<String>,
    pub index: Option<u64>,
    pub job_id: Option<String>,
    pub expected: Option<String>,
    pub actual: Option<String>,
    pub message: String,
    /// Position of the node log in the bundle (not part of the JSON contract).
    #[serde(skip)]
    pub log: Option<usize>,
}

impl Finding {
    /// A finding with `message` (clipped to [`MESSAGE_CHARS`]). The builders below clip the
    /// values they are given to [`CLIP_CHARS`] (text already clipped stays as it is): a finding's
    /// size is bounded whatever the bundle holds, and every valid value is carried whole.
    pub fn new(kind: FindingKind, message: impl Into<String>) -> Self {
        Finding {
            kind,
            node_id: None,
            index: None,
            job_id: None,
            expected: None,
            actual: None,
            message: bounded(message.into(), MESSAGE_CHARS),
            log: None,
        }
    }

    pub fn at(mut self, log: Option<usize>, node_id: Option<&str>, index: Option<u64>) -> Self {
        self.log = log;
        self.node_id = node_id.map(|n| bounded_str(n, CLIP_CHARS));
        self.index = index;
        self
    }

    pub fn job(mut self, job_id: Option<String>) -> Self {
        self.job_id = job_id.map(|j| bounded(j, CLIP_CHARS));
        self
    }

    pub fn values(mut self, expected: Option<String>, actual: Option<String>) -> Self {
        self.expected = expected.map(|v| bounded(v, CLIP_CHARS));
        self.actual = actual.map(|v| bounded(v, CLIP_CHARS));
        self
    }

    /// Names the finding's node (clipped to [`CLIP_CHARS`]).
    pub fn on_node(mut self, node_id: Option<&str>) -> Self {
        self.node_id = node_id.map(|n| bounded_str(n, CLIP_CHARS));
        self
    }
}

impl Finding {
    /// The finding's optional values with their labels, in display order (`job`, `expected`,
    /// `actual`). Untrusted text: make it visible before drawing.
    pub fn details(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("job", &self.job_id),
            ("expected", &self.expected),
            ("actual", &self.actual),
        ]
        .into_iter()
        .filter_map(|(label, v)| v.as_deref().map(|v| (label, v)))
    }

    /// The finding as the text every report prints: `  x [index] kind: message`, then one indented
    /// line per detail. Untrusted text is made visible.
    pub fn text_lines(&self) -> Vec<String> {
        use crate::core::text::visible;
        let loc = self.index.map(|i| format!("[{i}] ")).unwrap_or_default();
        let mut out = vec![format!(
            "  x {loc}{}: {}",
            self.kind,
            visible(&self.message)
        )];
        for (label, value) in self.details() {
            out.push(format!("      {label:<8} {}", visible(value)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_clipped_once_and_valid_text_is_kept_whole() {
        let valid = "n".repeat(CLIP_CHARS);
        assert_eq!(clip(&valid), valid.as_str());
        assert_eq!(quoted(&valid), format!("{valid:?}"));
        assert!(!too_long(&valid));
        assert!(too_long(&"n".repeat(CLIP_CHARS + 1)));
        // Counted in characters: more bytes than CLIP_CHARS is not yet too long.
        assert!(!too_long(&"é".repeat(CLIP_CHARS)));
        assert!(too_long(&"é".repeat(CLIP_CHARS + 1)));
        // Characters, not bytes: a multi-byte prefix is cut on a character boundary.
        let long = "é".repeat(1000);
        let clipped = format!("{}… (2000 bytes in all)", "é".repeat(CLIP_CHARS));
        assert_eq!(clip(&long), clipped.as_str());
        assert!(too_long(&long));
        assert_eq!(
            quoted(&long),
            format!("{:?}… (2000 bytes in all)", "é".repeat(CLIP_CHARS))
        );
        // The builders clip what they are given, and leave text already clipped as it is.
        let f = Finding::new(FindingKind::NodeMismatch, "x".repeat(5000))
            .at(Some(0), Some(&long), Some(1))
            .job(Some(long.clone()))
            .values(Some(clipped.clone()), Some(valid.clone()))
            .on_node(Some(&clipped));
        assert_eq!(f.node_id.as_deref(), Some(clipped.as_str()));
        assert_eq!(f.job_id.as_deref(), Some(clipped.as_str()));
        assert_eq!(f.expected.as_deref(), Some(clipped.as_str()));
        assert_eq!(f.actual.as_deref(), Some(valid.as_str()));
        assert_eq!(
            f.message,
            format!("{}… (5000 bytes in all)", "x".repeat(MESSAGE_CHARS))
        );
    }

    #[test]
    fn a_finding_reads_the_same_everywhere_and_escapes_its_values() {
        let f = Finding::new(FindingKind::PayloadModified, "payload changed")
            .at(Some(0), Some("n1"), Some(3))
            .job(Some("job-1".into()))
            .values(Some("abc".into()), Some("x\u{1b}[2J".into()));
        assert_eq!(
            f.text_lines(),
            vec![
                "  x [3] payload-modified: payload changed".to_string(),
                "      job      job-1".to_string(),
                "      expected abc".to_string(),
                format!(
                    "      actual   {}",
                    crate::core::text::visible("x\u{1b}[2J")
                ),
            ]
        );
        assert!(!f.text_lines()[3].contains('\u{1b}'));
        let bare = Finding::new(FindingKind::ManifestMismatch, "m");
        assert_eq!(
            bare.text_lines(),
            vec!["  x manifest-mismatch: m".to_string()]
        );
    }
}
