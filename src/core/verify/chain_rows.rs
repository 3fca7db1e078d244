//! The checks of a stored scheduler-chain row that depend on that row alone (SPEC section 6 schema
//! checks, the payload's SHA-256 and the recomputed link), done a page at a time on a second thread
//! by `chain::verify` while its own thread reads the next page from the store. What depends on the
//! rows before (break diagnosis, snapshots, the job lookup of a changed payload) stays with the
//! reading thread, which applies these results in chain order.

use super::diagnose::Prev;
use super::finding::{clip, quoted, Finding, FindingKind};
use crate::core::chain::{scheduler_chain_digest_of, sha256, Action, Digest32};
use crate::core::hlc::Hlc;
use crate::core::merkle;
use crate::core::store::backend::{ChainPage, ChainRow};
use crate::core::store::scheduler::{hex32, unhex32};
use std::ops::Range;

/// What one row's own checks found.
#[derive(Debug, Clone, Copy)]
pub struct RowCheck {
    /// The jobId's bytes (None: not a UUID).
    pub job: Option<[u8; 16]>,
    /// The stored link (None: not 64 lowercase hex digits).
    pub link: Option<Digest32>,
    pub prev: Prev,
    /// The payload's SHA-256 and the link recomputed with it from the stored fields as they are
    /// (an action that is not one of the five included: its link does not recompute, as with any
    /// edited field); None when the prevChainLink is unreadable (nothing to recompute).
    pub recomputed: Option<(Digest32, Digest32)>,
    /// The Merkle leaf hash of the stored link (of zeros when unreadable), when asked for.
    pub leaf: Option<Digest32>,
    /// This row's schema findings: `findings[first..end]` of its [`PageChecks`].
    pub findings: (usize, usize),
}

/// The row checks of one page (reused from page to page).
#[derive(Debug, Default)]
pub struct PageChecks {
    pub rows: Vec<RowCheck>,
    pub findings: Vec<Finding>,
}

impl PageChecks {
    /// Checks every row of `page`, whose first row is chain position `first`; with `leaves`, also
    /// hashes each link into its Merkle leaf (for rows a snapshot covers).
    pub fn check(&mut self, page: &ChainPage, first: u64, leaves: bool) {
        self.check_rows(page, first, leaves, 0..page.len());
    }

    /// [`check`](Self::check) of the page's rows `rows` only: from row 0 it starts afresh, from
    /// a later row it continues where an earlier call on the same page stopped.
    pub fn check_rows(&mut self, page: &ChainPage, first: u64, leaves: bool, rows: Range<usize>) {
        if rows.start == 0 {
            self.rows.clear();
            self.findings.clear();
        }
        debug_assert_eq!(self.rows.len(), rows.start);
        for k in rows {
            let mut c = check_row(first + k as u64, &page.get(k), &mut self.findings);
            if leaves {
                c.leaf = Some(merkle::leaf_hash(&c.link.unwrap_or_default()));
            }
            self.rows.push(c);
        }
    }

    /// Row `k`'s schema findings, in the order the checks ran.
    pub fn findings_of(&self, k: usize) -> &[Finding] {
        let (a, b) = self.rows[k].findings;
        &self.findings[a..b]
    }
}

fn schema(i: u64, job: Option<&str>, msg: String) -> Finding {
    Finding::new(
        FindingKind::SchemaInvalid,
        format!("chain entry {i}: {msg}"),
    )
    .at(None, None, Some(i))
    .job(job.map(|j| clip(j).into_owned()))
}

/// The stored action exactly as written (one of the five names, uppercase).
fn action_of(text: &str) -> Option<Action> {
    Action::ALL.into_iter().find(|a| a.as_str() == text)
}

/// The checks of row `r` at chain position `i`; its schema findings are appended to `out`.
pub fn check_row(i: u64, r: &ChainRow<'_>, out: &mut Vec<Finding>) -> RowCheck {
    let start = out.len();
    let (t_hlc, job_id, action, link_text) = (r.t_hlc, r.job_id, r.action, r.chain_link);
    let job = uuid::Uuid::parse_str(job_id).ok().map(|u| *u.as_bytes());
    if job.is_none() {
        out.push(schema(
            i,
            None,
            format!("jobId {} is not a UUID", quoted(job_id)),
        ));
    }
    if Hlc::parse(t_hlc).is_err() {
        out.push(schema(
            i,
            Some(job_id),
            format!("tHlc {} is not an HLC timestamp", quoted(t_hlc)),
        ));
    }
    if action_of(action).is_none() {
        out.push(schema(
            i,
            Some(job_id),
            format!(
                "action {} is not one of ENQUEUE, DEQUEUE, EXECUTE, COMPLETE, FAIL",
                quoted(action)
            ),
        ));
    }
    let link = unhex32(link_text);
    if link.is_none() {
        out.push(schema(
            i,
            Some(job_id),
            format!(
                "chainLink {} is not 64 lowercase hex digits",
                quoted(link_text)
            ),
        ));
    }
    let prev = match r.prev_chain_link {
        None => Prev::Genesis,
        Some(p) => match unhex32(p) {
            Some(d) => Prev::Link(d),
            None => {
                out.push(schema(
                    i,
                    Some(job_id),
                    format!("prevChainLink {} is not 64 lowercase hex digits", quoted(p)),
                ));
                Prev::Unknown
            }
        },
    };
    let recomputed = match prev {
        Prev::Genesis | Prev::Link(_) => {
            let payload = sha256(r.payload.as_bytes());
            let mut buf = [0u8; 64];
            let digest = hex32(&payload, &mut buf);
            let l = scheduler_chain_digest_of(t_hlc, job_id, action, r.prev_chain_link, digest);
            Some((payload, l))
        }
        Prev::Unknown => None,
    };
    RowCheck {
        job,
        link,
        prev,
        recomputed,
        leaf: None,
        findings: (start, out.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::chain::scheduler_chain_link;

    fn row<'a>(action: &'a str, prev: Option<&'a str>, link: &'a str) -> ChainRow<'a> {
        ChainRow {
            seq: 0,
            t_hlc: "1700000000000:0:node-a",
            job_id: "0b8f9e3c-2a51-4c1e-9d3e-5f0a7b6c8d9e",
            action,
            prev_chain_link: prev,
            chain_link: link,
            payload: "{\"a\":1}",
            payload_agrees: true,
        }
    }

    #[test]
    fn a_sound_row_recomputes_its_link_and_has_no_findings() {
        let digest = hex::encode(sha256(b"{\"a\":1}"));
        let r0 = row("ENQUEUE", None, "");
        let l = scheduler_chain_link(r0.t_hlc, r0.job_id, Action::Enqueue, None, &digest);
        let r = row("ENQUEUE", None, &l);
        let mut out = Vec::new();
        let c = check_row(3, &r, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let (payload, recomputed) = c.recomputed.expect("recomputed");
        assert_eq!(hex::encode(payload), digest);
        assert_eq!(Some(recomputed), c.link);
        assert_eq!(c.prev, Prev::Genesis);
    }

    #[test]
    fn a_page_checked_in_two_parts_is_the_page_checked_at_once() {
        let mut page = ChainPage::default();
        page.push(row("ENQUEUE", None, "not hex"));
        page.push(row("enqueue", Some("XYZ"), &"ab".repeat(32)));
        page.push(row("FAIL", Some(&"cd".repeat(32)), &"ef".repeat(32)));
        let mut whole = PageChecks::default();
        whole.check(&page, 10, true);
        for split in 0..=page.len() {
            let mut parts = PageChecks::default();
            parts.check(&page, 99, false);
            parts.check_rows(&page, 10, true, 0..split);
            parts.check_rows(&page, 10, true, split..page.len());
            assert_eq!(
                format!("{parts:?}"),
                format!("{whole:?}"),
                "split at {split}"
            );
        }
        assert_eq!(whole.findings.len(), 3);
    }

    #[test]
    fn each_unreadable_field_is_a_schema_finding_in_check_order() {
        let mut r = row("enqueue", Some("XYZ"), "not hex");
        r.job_id = "not-a-uuid";
        r.t_hlc = "17:x";
        let mut out = vec![schema(0, None, "an earlier row".into())];
        let c = check_row(7, &r, &mut out);
        assert_eq!(c.findings, (1, 6));
        let texts: Vec<&str> = out[1..].iter().map(|f| f.message.as_str()).collect();
        assert!(texts[0].starts_with("chain entry 7: jobId"), "{texts:?}");
        assert!(texts[1].contains("tHlc"), "{texts:?}");
        assert!(texts[2].contains("action \"enqueue\""), "{texts:?}");
        assert!(texts[3].contains("chainLink \"not hex\""), "{texts:?}");
        assert!(texts[4].contains("prevChainLink \"XYZ\""), "{texts:?}");
        assert!(out[1..].iter().all(|f| f.index == Some(7)));
        assert_eq!(c.prev, Prev::Unknown);
        assert!(c.recomputed.is_none() && c.job.is_none() && c.link.is_none());
    }
}
