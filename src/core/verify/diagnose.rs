//! Break diagnosis for one hash chain (a node log, or a tenant's scheduler chain).
//!
//! Entries are pushed in stored order; the diagnosis keeps 61 bytes per entry (its link, HLC and
//! job id: in memory for the first 256 Ki entries, then in a temporary file, `link_records`) plus
//! a short list of anomalies, and classifies every break when the chain ends:
//!
//! * `prevLink` equals the predecessor's stored link: intact.
//! * the entry's link does not recompute, but does with the predecessor's link in place of its
//!   `prevLink` ([`ChainDiagnosis::push_entry`]): the `prevLink` was edited (the `entry-modified`
//!   there, nothing more).
//! * equals the predecessor's *recomputed* link: the predecessor's link was edited (an
//!   `entry-modified` there, nothing here).
//! * equals the predecessor's own `prevLink`, and the predecessor linked correctly: the predecessor
//!   was inserted (`entry-inserted` at the predecessor).
//! * equals the link of another entry in the chain (or is a second genesis): entries were moved;
//!   overlapping moves are merged into one `entries-reordered` at the first out-of-place index.
//! * matches nothing: entries are missing before this index (`entries-deleted`; at index 0 the
//!   head was removed).

use super::finding::{Finding, FindingKind};
use super::link_records::{LinkRecord, LinkRecords, MEMORY_RECORDS};
use crate::core::chain::Digest32;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use std::collections::HashMap;

/// How an entry refers to its predecessor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prev {
    /// `null`: the first entry of a chain.
    Genesis,
    Link(Digest32),
    /// Unreadable (already reported as a schema problem).
    Unknown,
}

/// What the diagnosis needs of one entry.
#[derive(Debug, Clone, Copy)]
pub struct ChainEntry {
    /// The stored link (None when unreadable).
    pub link: Option<Digest32>,
    pub prev: Prev,
    /// The link recomputed from the stored fields (None when a field is unreadable).
    pub recomputed: Option<Digest32>,
    /// (physical, logical) of the entry's HLC.
    pub hlc: Option<(u64, u32)>,
    pub job_id: Option<[u8; 16]>,
}

/// How link values are shown in findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkText {
    /// Standard base64 (node logs).
    Base64,
    /// Lowercase hex (scheduler chain).
    Hex,
}

impl LinkText {
    /// The stored fields a link is computed over (and the links), as the log names them: a
    /// bundle's entry keys, or the store's `scheduler_log` columns.
    pub fn linked_fields(self) -> &'static str {
        match self {
            LinkText::Base64 => "jobId, tHlc, payloadHash, prevLink or link",
            LinkText::Hex => "job_id, t_hlc, action, prev_chain_link or chain_link",
        }
    }

    pub fn show(self, d: &Digest32) -> String {
        match self {
            LinkText::Base64 => B64.encode(d),
            LinkText::Hex => hex::encode(d),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Anomaly {
    index: usize,
    prev: Prev,
    /// prevLink equals the predecessor's prevLink and the predecessor linked correctly.
    predecessor_inserted: bool,
}

/// The chain's own claim about its end (chainHead / lastHlc of a node log, or the stored head).
#[derive(Debug, Clone)]
pub struct HeadClaim {
    pub head: Option<Digest32>,
    /// The claimed last HLC, with its text for messages.
    pub last_hlc: Option<((u64, u32), String)>,
}

/// Accumulates one chain and reports its breaks.
pub struct ChainDiagnosis {
    log: Option<usize>,
    node: Option<String>,
    text: LinkText,
    recs: LinkRecords,
    anomalies: Vec<Anomaly>,
    modified: Vec<usize>,
    hlc_candidates: Vec<usize>,
    prev_entry: Option<(ChainEntry, bool)>,
    last_recomputed: Option<Digest32>,
    last_hlc_text: Option<String>,
}

fn job_text(job: Option<[u8; 16]>) -> Option<String> {
    job.map(|j| uuid::Uuid::from_bytes(j).to_string())
}

impl ChainDiagnosis {
    pub fn new(log: Option<usize>, node: Option<String>, text: LinkText) -> Self {
        ChainDiagnosis {
            log,
            node,
            text,
            recs: LinkRecords::new(MEMORY_RECORDS),
            anomalies: Vec::new(),
            modified: Vec::new(),
            hlc_candidates: Vec::new(),
            prev_entry: None,
            last_recomputed: None,
            last_hlc_text: None,
        }
    }

    /// Names the chain's log position and node for its findings.
    pub fn set_node(&mut self, log: Option<usize>, node: Option<String>) {
        self.log = log;
        self.node = node;
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.len() == 0
    }

    /// The record of entry `i` (all unknown if it cannot be read back).
    fn rec(&self, i: usize) -> LinkRecord {
        self.recs.get(i).unwrap_or_default()
    }

    /// Keeps the records of up to `limit` entries in memory, the rest in a temporary file (tests
    /// of that path).
    #[cfg(test)]
    fn with_memory_limit(mut self, limit: usize) -> Self {
        self.recs = LinkRecords::new(limit);
        self
    }

    fn finding(&self, kind: FindingKind, index: usize, msg: String) -> Finding {
        Finding::new(kind, msg)
            .at(self.log, self.node.as_deref(), Some(index as u64))
            .job(job_text(self.recs.get(index).and_then(|r| r.job)))
    }

    /// Adds the next entry. Returns the `entry-modified` finding for it, if any (reported at once).
    pub fn push(&mut self, e: ChainEntry, hlc_text: Option<&str>) -> Option<Finding> {
        self.push_entry(e, hlc_text, false)
    }

    /// [`ChainDiagnosis::push`] for an entry whose caller may know more: `prev_link_edited` says
    /// the entry's stored link recomputes with its predecessor's link (null for the first entry) in
    /// place of its stored prevLink, so the prevLink itself was edited. That is one
    /// `entry-modified` at this entry (SPEC section 6), not a break in the chain here.
    pub fn push_entry(
        &mut self,
        e: ChainEntry,
        hlc_text: Option<&str>,
        prev_link_edited: bool,
    ) -> Option<Finding> {
        let i = self.recs.len();
        let modified = matches!((e.link, e.recomputed), (Some(l), Some(r)) if l != r);
        self.recs.push(LinkRecord {
            link: e.link,
            hlc: e.hlc,
            job: e.job_id,
        });
        if modified {
            self.modified.push(i);
        }
        // Linkage to the predecessor.
        match (&self.prev_entry, e.prev) {
            (_, Prev::Unknown) => {}
            _ if prev_link_edited && modified => {}
            (None, Prev::Genesis) => {}
            (None, prev @ Prev::Link(_)) => self.anomalies.push(Anomaly {
                index: i,
                prev,
                predecessor_inserted: false,
            }),
            (Some((p, p_linked_ok)), prev) => {
                let intact = match prev {
                    Prev::Link(d) => {
                        p.link == Some(d) || (p.recomputed == Some(d) && p.link != p.recomputed)
                    }
                    _ => false,
                };
                if !intact {
                    self.anomalies.push(Anomaly {
                        index: i,
                        prev,
                        predecessor_inserted: *p_linked_ok && p.prev == prev,
                    });
                }
            }
        }
        // HLC order against the predecessor.
        if let (Some((p, _)), Some(h)) = (&self.prev_entry, e.hlc) {
            if let Some(ph) = p.hlc {
                if h <= ph {
                    self.hlc_candidates.push(i);
                }
            }
        }
        let linked_ok = self.anomalies.last().map(|a| a.index != i).unwrap_or(true);
        self.prev_entry = Some((e, linked_ok));
        self.last_recomputed = e.recomputed;
        match hlc_text {
            // Reuses the buffer: this runs per entry.
            Some(t) => {
                let last = self.last_hlc_text.get_or_insert_with(String::new);
                last.clear();
                last.push_str(t);
            }
            None => self.last_hlc_text = None,
        }
        if modified {
            let (l, r) = (e.link.unwrap_or_default(), e.recomputed.unwrap_or_default());
            Some(
                self.finding(
                    FindingKind::EntryModified,
                    i,
                    format!(
                        "entry {i}'s link does not recompute from its stored fields: its {} was edited",
                        self.text.linked_fields()
                    ),
                )
                .values(Some(self.text.show(&r)), Some(self.text.show(&l))),
            )
        } else {
            None
        }
    }

    /// Whether entry `i` failed its link recomputation.
    pub fn is_modified(&self, i: usize) -> bool {
        self.modified.binary_search(&i).is_ok()
    }

    /// Classifies every break. `head` is the chain's claim about its last entry, when it has one.
    pub fn finish(self, head: Option<HeadClaim>) -> Vec<Finding> {
        let mut out = Vec::new();
        self.finish_into(head, &mut |f| out.push(f));
        out
    }

    /// [`ChainDiagnosis::finish`], handing each finding to `out` as it is made (a chain with a
    /// break at every entry is not held as one vector of findings).
    pub fn finish_into(self, head: Option<HeadClaim>, out: &mut dyn FnMut(Finding)) {
        let n = self.recs.len();
        // The sorted index of links (a sort of every entry) only when a break or a head that is
        // not the last entry's link needs a link looked up.
        let head_elsewhere = head
            .as_ref()
            .and_then(|c| c.head)
            .is_some_and(|h| n > 0 && !self.head_is_last(h));
        // Which entry carries each link a break or the head names: one pass over the records,
        // only when there is one.
        let links = if !self.anomalies.is_empty() || head_elsewhere {
            let prevs = self.anomalies.iter().filter_map(|a| match a.prev {
                Prev::Link(d) => Some(d),
                _ => None,
            });
            let head_link = head.as_ref().and_then(|c| c.head);
            LinkIndex(self.recs.positions_of(prevs.chain(head_link)))
        } else {
            LinkIndex::default()
        };
        let (spans, inserted) = self.link_breaks(&links, out);
        let clusters = self.reorderings(spans, out);
        let in_cluster = |i: usize| clusters.iter().any(|&(s, e)| i >= s && i <= e);
        self.hlc_breaks(&in_cluster, &inserted, out);
        // A head claim that points into a reordered region is explained by the reordering.
        let head = head.filter(|_| n == 0 || !in_cluster(n - 1));
        if let (Some(claim), true) = (head, n > 0) {
            let truncated = match claim.head {
                Some(h) => self.head_link_break(h, &links, out),
                None => false,
            };
            if let Some((claimed, claimed_text)) = claim.last_hlc {
                self.last_hlc_break(claimed, claimed_text, truncated, out);
            }
        }
    }

    /// Inserted and deleted entries from the link anomalies; returns the spans of moved entries
    /// `(start, end, anomaly index)` and the inserted indices.
    fn link_breaks(
        &self,
        links: &LinkIndex,
        out: &mut dyn FnMut(Finding),
    ) -> (Vec<(usize, usize, usize)>, Vec<usize>) {
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        let mut inserted: Vec<usize> = Vec::new();
        for a in &self.anomalies {
            let i = a.index;
            if a.predecessor_inserted {
                let k = i - 1;
                inserted.push(k);
                out(
                    self.finding(
                        FindingKind::EntryInserted,
                        k,
                        format!(
                            "entry {k} links correctly to its predecessor, but entry {i} links to the same predecessor: entry {k} was inserted into the chain"
                        ),
                    )
                    .values(
                        self.recs.get(k.wrapping_sub(1)).and_then(|r| r.link).map(|l| self.text.show(&l)).or(Some("genesis".into())),
                        self.rec(k).link.map(|l| self.text.show(&l)),
                    ),
                );
                continue;
            }
            match a.prev {
                Prev::Genesis => spans.push((0, i, i)),
                Prev::Link(d) => match links.lookup(&d) {
                    Some(j) => {
                        let target = j + 1;
                        spans.push((i.min(target), i.max(target), i));
                    }
                    None => out(self.deleted_before(i, &d)),
                },
                Prev::Unknown => {}
            }
        }
        (spans, inserted)
    }

    /// `entries-deleted` at `i`, whose prevLink `d` matches no entry.
    fn deleted_before(&self, i: usize, d: &Digest32) -> Finding {
        let expected = if i == 0 {
            Some("null (the first entry)".to_string())
        } else {
            self.rec(i - 1).link.map(|l| self.text.show(&l))
        };
        let msg = if i == 0 {
            "the first entry has a prevLink that matches no entry: the head of the log was removed"
                .to_string()
        } else {
            format!("entry {i}'s prevLink matches no entry in the log: one or more entries are missing before index {i}")
        };
        self.finding(FindingKind::EntriesDeleted, i, msg)
            .values(expected, Some(self.text.show(d)))
    }

    /// Merges overlapping moves into clusters, one `entries-reordered` each; returns the clusters.
    fn reorderings(
        &self,
        mut spans: Vec<(usize, usize, usize)>,
        out: &mut dyn FnMut(Finding),
    ) -> Vec<(usize, usize)> {
        let n = self.recs.len();
        spans.sort_unstable();
        let mut clusters: Vec<(usize, usize)> = Vec::new();
        for (s, e, _) in &spans {
            match clusters.last_mut() {
                Some(last) if *s <= last.1 => last.1 = last.1.max(*e),
                _ => clusters.push((*s, *e)),
            }
        }
        for &(s, e) in &clusters {
            let expected = if s == 0 {
                Some("null (the first entry)".to_string())
            } else {
                self.rec(s - 1).link.map(|l| self.text.show(&l))
            };
            let end = e.min(n.saturating_sub(1));
            out(
                self.finding(
                    FindingKind::EntriesReordered,
                    s,
                    format!(
                        "entry {s} is out of place: the prevLinks of entries {s}..={end} point at entries other than their predecessors, so these entries were reordered"
                    ),
                )
                .values(expected, None),
            );
        }
        clusters
    }

    /// `hlc-not-increasing` where no other break explains an HLC going backwards.
    fn hlc_breaks(
        &self,
        in_cluster: &dyn Fn(usize) -> bool,
        inserted: &[usize],
        out: &mut dyn FnMut(Finding),
    ) {
        for &i in &self.hlc_candidates {
            let explained = self.is_modified(i)
                || self.is_modified(i - 1)
                || in_cluster(i)
                || inserted.contains(&i)
                || inserted.contains(&(i - 1));
            if explained {
                continue;
            }
            let (Some(h), Some(p)) = (self.rec(i).hlc, self.rec(i - 1).hlc) else {
                continue;
            };
            out(
                self.finding(
                    FindingKind::HlcNotIncreasing,
                    i,
                    format!(
                        "entry {i}'s HLC is not later than its predecessor's although the links are consistent: the log was rewritten out of HLC order"
                    ),
                )
                .values(
                    Some(format!("later than {}:{}", p.0, p.1)),
                    Some(format!("{}:{}", h.0, h.1)),
                ),
            );
        }
    }

    /// Checks the claimed head link against the last entry; returns whether the tail was truncated.
    /// Whether the head names the last entry (its stored link, or its recomputed one when that
    /// entry was modified). The chain has entries.
    fn head_is_last(&self, h: Digest32) -> bool {
        let last = self.recs.len() - 1;
        Some(h) == self.rec(last).link
            || Some(h) == self.last_recomputed.filter(|_| self.is_modified(last))
    }

    fn head_link_break(
        &self,
        h: Digest32,
        links: &LinkIndex,
        out: &mut dyn FnMut(Finding),
    ) -> bool {
        let last = self.recs.len() - 1;
        let last_link = self.rec(last).link;
        if self.head_is_last(h) {
            return false;
        }
        match links.lookup(&h) {
            Some(j) if j != last => {
                out(self
                    .finding(
                        FindingKind::HeadMismatch,
                        j,
                        format!(
                            "the chain head points at entry {j}, not at the last entry ({last})"
                        ),
                    )
                    .values(
                        last_link.map(|l| self.text.show(&l)),
                        Some(self.text.show(&h)),
                    ));
                false
            }
            _ => {
                out(
                    self.finding(
                        FindingKind::TailTruncated,
                        last,
                        format!("the chain head matches no entry: entries after index {last} were removed"),
                    )
                    .values(Some(self.text.show(&h)), last_link.map(|l| self.text.show(&l))),
                );
                true
            }
        }
    }

    /// Checks the claimed last HLC against the last entry.
    fn last_hlc_break(
        &self,
        claimed: (u64, u32),
        claimed_text: String,
        truncated: bool,
        out: &mut dyn FnMut(Finding),
    ) {
        let last = self.recs.len() - 1;
        let last_hlc = self.rec(last).hlc;
        if Some(claimed) == last_hlc || self.is_modified(last) {
            return;
        }
        let matched = self.recs.position_of_hlc(claimed);
        let beyond = last_hlc.map(|l| claimed > l).unwrap_or(false);
        let last_text = self.last_hlc_text.clone();
        match matched {
            Some(j) => out(
                self.finding(
                    FindingKind::HeadMismatch,
                    j,
                    format!("lastHlc names entry {j}, not the last entry ({last})"),
                )
                .values(last_text, Some(claimed_text)),
            ),
            None if beyond && truncated => {}
            None if beyond => out(
                self.finding(
                    FindingKind::TailTruncated,
                    last,
                    format!("lastHlc is later than every entry: entries after index {last} were removed"),
                )
                .values(Some(claimed_text), last_text),
            ),
            None => out(
                self.finding(
                    FindingKind::HeadMismatch,
                    last,
                    format!("lastHlc does not match the last entry ({last})"),
                )
                .values(last_text, Some(claimed_text)),
            ),
        }
    }
}

/// Which entry (the first) carries each link looked up.
#[derive(Default)]
struct LinkIndex(HashMap<Digest32, usize>);

impl LinkIndex {
    fn lookup(&self, d: &Digest32) -> Option<usize> {
        self.0.get(d).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::chain::sha256;

    /// An intact chain of `n` entries (links from the index, HLCs increasing, a job each).
    fn chain(n: usize) -> Vec<ChainEntry> {
        let mut prev = Prev::Genesis;
        (0..n)
            .map(|i| {
                let link = sha256(&(i as u64).to_le_bytes());
                let e = ChainEntry {
                    link: Some(link),
                    prev,
                    recomputed: Some(link),
                    hlc: Some((1000 + i as u64, 0)),
                    job_id: Some(link[..16].try_into().expect("16")),
                };
                prev = Prev::Link(link);
                e
            })
            .collect()
    }

    fn run(entries: &[ChainEntry], head: Option<HeadClaim>, limit: usize) -> String {
        let mut d = ChainDiagnosis::new(Some(0), Some("n1".into()), LinkText::Base64)
            .with_memory_limit(limit);
        let mut out: Vec<Finding> = entries.iter().filter_map(|e| d.push(*e, None)).collect();
        out.extend(d.finish(head));
        format!("{out:?}")
    }

    #[test]
    fn records_in_a_temporary_file_give_the_same_findings_for_every_break() {
        let n = 40_000;
        let base = chain(n);
        let claim = |e: &ChainEntry| HeadClaim {
            head: e.link,
            last_hlc: e.hlc.map(|h| (h, format!("{}:{}", h.0, h.1))),
        };
        let mut cases: Vec<(Vec<ChainEntry>, Option<HeadClaim>)> = Vec::new();
        let mut deleted = base.clone();
        deleted.remove(30_000);
        cases.push((deleted, None));
        let mut moved = base.clone();
        moved.swap(25_000, 35_000);
        cases.push((moved, None));
        let mut modified = base.clone();
        modified[33_000].link = Some([1; 32]);
        cases.push((modified, None));
        let mut inserted = base.clone();
        let mut extra = base[20_000];
        extra.link = Some([2; 32]);
        extra.recomputed = Some([2; 32]);
        inserted.insert(20_001, extra);
        cases.push((inserted, None));
        let mut hlc = base.clone();
        hlc[36_000].hlc = Some((5, 0));
        cases.push((hlc, None));
        // Head naming an entry in the middle, a head naming nothing, a lastHlc of a middle entry.
        cases.push((base.clone(), Some(claim(&base[30_000]))));
        cases.push((
            base.clone(),
            Some(HeadClaim {
                head: Some([3; 32]),
                last_hlc: None,
            }),
        ));
        let mut mid_hlc = claim(&base[n - 1]);
        mid_hlc.last_hlc = Some(((1000 + 31_000, 0), "31000".into()));
        cases.push((base.clone(), Some(mid_hlc)));
        for (i, (entries, head)) in cases.into_iter().enumerate() {
            let in_memory = run(&entries, head.clone(), usize::MAX);
            assert!(in_memory.len() > 2, "case {i} finds a break: {in_memory}");
            for limit in [0, 1000] {
                assert_eq!(
                    run(&entries, head.clone(), limit),
                    in_memory,
                    "case {i}, limit {limit}"
                );
            }
        }
        assert_eq!(run(&base, Some(claim(&base[n - 1])), 0), "[]");
    }
}
