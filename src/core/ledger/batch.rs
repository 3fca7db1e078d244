//! Progress reports held by one reader until it takes their shard's lock once for many of them.
//!
//! Parallel readers fold into one job-sharded fold (`ledger::parallel`). Reports of the same jobs
//! arrive at both readers at about the same time (a job's events are spread over every WAL), so
//! taking a shard's lock per report would hand its cache line back and forth between cores. A
//! reader instead copies each report (its numbers and its three texts) into the batch of its
//! shard and applies the batch under one lock when it is full. The fold is a join, so applying
//! reports later and grouped changes nothing.

use super::progress::{HlcRef, ProgressRef};

/// Reports per batch before it is applied.
pub const BATCH: usize = 128;

/// One held report: its numbers, and where its texts end in [`Batch::text`].
struct Held {
    job_end: usize,
    dc_end: usize,
    node_end: usize,
    completed: u64,
    failed: u64,
    physical: u64,
    logical: u32,
}

/// Reports held for one shard (the texts of all of them in one string, reused).
#[derive(Default)]
pub struct Batch {
    text: String,
    held: Vec<Held>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Copies a report in (no allocation once the buffers have grown to a batch's size).
    pub fn push(&mut self, p: &ProgressRef<'_>) {
        for s in [p.job_id, p.dc_id, p.hlc.node] {
            self.text.push_str(s);
        }
        let node_end = self.text.len();
        let dc_end = node_end - p.hlc.node.len();
        self.held.push(Held {
            job_end: dc_end - p.dc_id.len(),
            dc_end,
            node_end,
            completed: p.completed,
            failed: p.failed,
            physical: p.hlc.physical,
            logical: p.hlc.logical,
        });
    }

    /// Hands every held report to `apply`, in the order they came, and empties the batch.
    pub fn drain(&mut self, mut apply: impl FnMut(&ProgressRef<'_>)) {
        let mut start = 0;
        for h in &self.held {
            let p = ProgressRef {
                job_id: &self.text[start..h.job_end],
                dc_id: &self.text[h.job_end..h.dc_end],
                completed: h.completed,
                failed: h.failed,
                hlc: HlcRef {
                    physical: h.physical,
                    logical: h.logical,
                    node: &self.text[h.dc_end..h.node_end],
                },
            };
            apply(&p);
            start = h.node_end;
        }
        self.held.clear();
        self.text.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_come_out_as_they_went_in() {
        let reports: Vec<ProgressRef<'_>> = (0..5u64)
            .map(|i| ProgressRef {
                job_id: ["use1-1-g-00001", "euw1-22-gate.x-00002"][(i % 2) as usize],
                dc_id: ["use1", "e"][(i % 2) as usize],
                completed: i * 7,
                failed: i,
                hlc: HlcRef {
                    physical: 1_700_000_000_000 + i,
                    logical: i as u32,
                    node: ["gate-4", "n"][(i % 2) as usize],
                },
            })
            .collect();
        let mut b = Batch::default();
        for r in &reports {
            b.push(r);
        }
        assert_eq!(b.len(), 5);
        type Owned = (String, String, u64, u64, u64, u32, String);
        let owned = |p: &ProgressRef<'_>| -> Owned {
            (
                p.job_id.to_string(),
                p.dc_id.to_string(),
                p.completed,
                p.failed,
                p.hlc.physical,
                p.hlc.logical,
                p.hlc.node.to_string(),
            )
        };
        let mut out = Vec::new();
        b.drain(|p| out.push(owned(p)));
        let want: Vec<Owned> = reports.iter().map(owned).collect();
        assert_eq!(out, want);
        assert!(b.is_empty());
        b.drain(|_| panic!("empty"));
    }
}
