//! Findings: what verification reports (SPEC section 6). The `kind` strings are part of the JSON
//! output contract.

use serde::{Serialize, Serializer};
use std::fmt;

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
    pub fn new(kind: FindingKind, message: impl Into<String>) -> Self {
        Finding {
            kind,
            node_id: None,
            index: None,
            job_id: None,
            expected: None,
            actual: None,
            message: message.into(),
            log: None,
        }
    }

    pub fn at(mut self, log: Option<usize>, node_id: Option<&str>, index: Option<u64>) -> Self {
        self.log = log;
        self.node_id = node_id.map(str::to_string);
        self.index = index;
        self
    }

    pub fn job(mut self, job_id: Option<String>) -> Self {
        self.job_id = job_id;
        self
    }

    pub fn values(mut self, expected: Option<String>, actual: Option<String>) -> Self {
        self.expected = expected;
        self.actual = actual;
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
