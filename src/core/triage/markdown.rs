//! The Markdown rendering of a triage report: the same facts as the signed JSON, for people.
//! `verify` renders it again from the signed payload and compares, so an edited Markdown file is
//! found. Untrusted strings (file names, node ids, messages) are escaped for a terminal and kept
//! out of Markdown syntax by code spans.

use super::{Subject, TriageReport};
use crate::core::trust::DsseEnvelope;
use std::fmt::Write as _;

/// A code span that holds any text: control characters made visible, and fenced by one backtick
/// more than the longest run of backticks in it (CommonMark closes a span at a run of exactly the
/// opening length, so no text can close it early and be read as Markdown).
fn code(s: &str) -> String {
    let v = crate::core::text::visible(s).replace('\n', "\\n");
    let mut longest = 0;
    let mut run = 0;
    for c in v.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    if longest == 0 {
        return format!("`{v}`");
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {v} {fence}")
}

fn opt(s: &Option<String>) -> String {
    s.as_deref().map(code).unwrap_or_else(|| "—".into())
}

/// The report as Markdown; `envelope` says who signed it.
pub fn to_markdown(r: &TriageReport, envelope: &DsseEnvelope) -> String {
    let mut out = String::new();
    let what = match r.subject {
        Subject::Bundle => "bundle",
        Subject::MergePlan => "merge plan",
        Subject::TenantChain => "tenant chain",
    };
    let _ = writeln!(out, "# Triage report: {what}\n");
    let _ = writeln!(out, "- verdict: **{}**", code(&r.verdict));
    let _ = writeln!(out, "- decision: **{}**", code(&r.decision.action));
    if !r.decision.note.is_empty() {
        let _ = writeln!(out, "- note: {}", code(&r.decision.note));
    }
    let _ = writeln!(out, "- operator: {}", code(&r.operator));
    let _ = writeln!(out, "- created at: {}", code(&r.created_at));
    for i in &r.inputs {
        let _ = writeln!(out, "- input: {}", code(i));
    }
    match envelope.signatures.first() {
        Some(s) => {
            let _ = writeln!(out, "- signed by key: {}", code(&s.keyid));
        }
        None => out.push_str("- unsigned (no local signing key)\n"),
    }
    let _ = writeln!(out, "\n## Findings ({})\n", r.findings.len());
    if r.findings.is_empty() {
        out.push_str("None.\n");
    }
    for f in &r.findings {
        let at = match (&f.node_id, f.index) {
            (Some(n), Some(i)) => format!(" at node {} index {i}", code(n)),
            (Some(n), None) => format!(" in node {}", code(n)),
            _ => String::new(),
        };
        let _ = writeln!(out, "- {}{at}: {}", code(&f.kind), code(&f.message));
        if f.expected.is_some() || f.actual.is_some() {
            let _ = writeln!(
                out,
                "  - expected {}, actual {}",
                opt(&f.expected),
                opt(&f.actual)
            );
        }
    }
    if !r.plan.is_empty() {
        // An indented code block: no line of the plan can close it.
        out.push_str("\n## Plan\n\n");
        for l in &r.plan {
            let _ = writeln!(out, "    {}", crate::core::text::visible(l));
        }
    }
    if !r.conflicts.is_empty() {
        let _ = writeln!(out, "\n## Conflicts ({})\n", r.conflicts.len());
    }
    for c in &r.conflicts {
        let _ = writeln!(out, "- job {}", code(&c.job_id));
        for s in &c.sides {
            let _ = writeln!(
                out,
                "  - {} payloadHash {}: bundle {}, file {}, node {}, index {}, tHlc {}, chain position {}",
                code(&s.source),
                code(&s.payload_hash),
                opt(&s.bundle_id),
                opt(&s.file),
                opt(&s.node_id),
                s.index.map(|i| i.to_string()).unwrap_or_else(|| "—".into()),
                opt(&s.t_hlc),
                s.chain_seq.map(|i| i.to_string()).unwrap_or_else(|| "—".into()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::code;

    /// The text inside a rendered span: the fence is longer than any backtick run in it, so a
    /// CommonMark reader ends the span only at the closing fence.
    fn fence_holds(rendered: &str, text: &str) {
        let fence: String = rendered.chars().take_while(|&c| c == '`').collect();
        let inner = &rendered[fence.len()..rendered.len() - fence.len()];
        assert!(rendered.ends_with(&fence), "{rendered}");
        assert_eq!(inner.trim_matches(' '), text, "{rendered}");
        assert!(!inner.contains(fence.as_str()), "{rendered} closes early");
    }

    #[test]
    fn a_code_span_is_never_closed_by_the_text_in_it() {
        for text in [
            "plain",
            "a`b",
            "x`` ![t](http://e/x.png) ``y",
            "```",
            "a`b``c```d",
        ] {
            fence_holds(&code(text), text);
        }
    }
}
