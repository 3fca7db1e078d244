//! The checks made when a node log ends: its own fields (nodeId, entries, chainHead, lastHlc) and
//! the classification of its chain's breaks.

use super::diagnose::HeadClaim;
use super::entry::LogState;
use super::finding::{clip, quoted, too_long, Finding, FindingKind};
use super::spill::FindingLog;
use crate::core::bundle::LogFields;
use crate::core::chain::decode_digest;
use crate::core::hlc::{validate_node_id, Hlc};

/// Every finding of the log `st` read, sorted by entry (log-level ones last), added to the
/// report's `findings` in that order (past the memory budget some already wait in its temporary
/// file). A failure to read those back is returned.
pub(super) fn end_log(
    mut st: LogState,
    fields: &LogFields,
    findings: &mut FindingLog,
) -> std::io::Result<()> {
    let log = st.log;
    let node_ref = fields.node_id.as_deref();
    let mut log_findings = Vec::new();
    let schema =
        |msg: String| Finding::new(FindingKind::SchemaInvalid, msg).at(Some(log), node_ref, None);
    if let Some(n) = &fields.node_id {
        if too_long(n) {
            log_findings.push(schema(format!(
                "$.jobLogs[{log}].nodeId: {} is longer than any valid node id",
                quoted(n)
            )));
        } else if let Err(e) = validate_node_id(n) {
            log_findings.push(schema(format!("$.jobLogs[{log}].nodeId: {e}")));
        }
        // Entries were compared with the first entry's node when the log's nodeId came late.
        if st.node.is_none() {
            if let Some(first) = &st.first_entry_node {
                if first != n && st.node_mismatches.len() < st.diag.len() {
                    log_findings.push(
                        Finding::new(
                            FindingKind::NodeMismatch,
                            format!(
                                "the log claims node {} but its entries belong to node {}",
                                quoted(n),
                                quoted(first)
                            ),
                        )
                        .at(Some(log), Some(n), None)
                        .values(Some(clip(first).into_owned()), Some(clip(n).into_owned())),
                    );
                }
            }
        }
    }
    if fields.entry_count == 0 {
        log_findings.push(schema(format!(
            "$.jobLogs[{log}].entries: a log with no entries must not be written"
        )));
    }
    let head = match &fields.chain_head {
        Some(h) if too_long(h) => {
            log_findings.push(schema(format!(
                "$.jobLogs[{log}].chainHead: {} is longer than any valid chainHead",
                quoted(h)
            )));
            None
        }
        Some(h) => match decode_digest(h) {
            Ok(d) => Some(d),
            Err(m) => {
                log_findings.push(schema(format!("$.jobLogs[{log}].chainHead: {m}")));
                None
            }
        },
        None => None,
    };
    let last_hlc = match &fields.last_hlc {
        Some(t) if too_long(t) => {
            log_findings.push(schema(format!(
                "$.jobLogs[{log}].lastHlc: {} is longer than any valid lastHlc",
                quoted(t)
            )));
            None
        }
        Some(t) => match Hlc::parse(t) {
            Ok(h) => Some(((h.physical, h.logical), t.clone())),
            Err(e) => {
                log_findings.push(schema(format!("$.jobLogs[{log}].lastHlc: {e}")));
                None
            }
        },
        None => None,
    };
    st.diag.set_node(
        Some(log),
        fields.node_id.as_deref().map(|n| clip(n).into_owned()),
    );
    let mut all = st.findings;
    let claim = Some(HeadClaim { head, last_hlc });
    st.diag
        .finish_into(claim, &mut |f| findings.push_late(&mut all, f));
    for f in log_findings {
        findings.push_late(&mut all, f);
    }
    // Sorted by entry, log-level ones last. A finding without a node takes the log's (the
    // log-level ones name it already).
    findings.end_log(all, &|f| {
        if f.node_id.is_none() {
            f.node_id = fields.node_id.as_deref().map(|n| clip(n).into_owned());
        }
    })
}
