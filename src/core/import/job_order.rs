//! The job rows of an import in job-id order, in bounded memory (an external merge sort).
//!
//! `scheduler_jobs` is a b-tree keyed by job id: rows inserted in key order are appended at its
//! right edge, rows in random order are sought from the root and split pages in the middle of a
//! tree larger than the page cache, whose pages then go out to the file and come back. Inserting
//! one sorted run per 256 Ki jobs (what the import did before) cost its writer thread about a third
//! of its time at 1 M entries. So the rows are sorted in runs of [`RUN_ROWS`] in memory, full runs
//! go to an unnamed temporary file (56 bytes a row), and [`JobOrder::finish`] merges the runs into
//! one stream in job-id order.

use crate::core::chain::Digest32;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// A job row to insert after the chain rows: job id, payloadHash, chain position.
pub(super) type JobRow = ([u8; 16], Digest32, u64);

/// Rows sorted in memory before a run goes to the file (14 MiB).
const RUN_ROWS: usize = 1 << 18;
/// Bytes of one row in the file: job id, payloadHash, chain position (little-endian).
const ROW_BYTES: usize = 16 + 32 + 8;
/// Rows read from the file per run at a time.
const READ_ROWS: usize = 1024;

fn encode(r: &JobRow, out: &mut Vec<u8>) {
    out.extend_from_slice(&r.0);
    out.extend_from_slice(&r.1);
    out.extend_from_slice(&r.2.to_le_bytes());
}

fn decode(b: &[u8]) -> JobRow {
    let mut id = [0u8; 16];
    let mut hash = [0u8; 32];
    let mut seq = [0u8; 8];
    id.copy_from_slice(&b[..16]);
    hash.copy_from_slice(&b[16..48]);
    seq.copy_from_slice(&b[48..ROW_BYTES]);
    (id, hash, u64::from_le_bytes(seq))
}

/// Collects job rows in any order; gives them back sorted by job id.
pub(super) struct JobOrder {
    rows: Vec<JobRow>,
    run_rows: usize,
    /// The runs written so far (created with the first), and each run's row count.
    file: Option<File>,
    runs: Vec<u64>,
}

impl JobOrder {
    /// For about `expected` rows (memory is reserved for at most one run).
    pub(super) fn new(expected: usize) -> Self {
        let mut order = Self::with_run_rows(RUN_ROWS);
        order.rows.reserve_exact(expected.min(RUN_ROWS));
        order
    }

    fn with_run_rows(run_rows: usize) -> Self {
        JobOrder {
            rows: Vec::new(),
            run_rows,
            file: None,
            runs: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, row: JobRow) -> std::io::Result<()> {
        self.rows.push(row);
        if self.rows.len() >= self.run_rows {
            self.rows.sort_unstable_by_key(|j| j.0);
            let file = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(tempfile::tempfile()?),
            };
            let mut buf = Vec::with_capacity(READ_ROWS * ROW_BYTES);
            for chunk in self.rows.chunks(READ_ROWS) {
                buf.clear();
                chunk.iter().for_each(|r| encode(r, &mut buf));
                file.write_all(&buf)?;
            }
            self.runs.push(self.rows.len() as u64);
            self.rows.clear();
        }
        Ok(())
    }

    /// Every row pushed, in job-id order, handed to `emit` in chunks of at most `chunk` rows;
    /// stops early when `emit` returns false.
    pub(super) fn finish(
        mut self,
        chunk: usize,
        mut emit: impl FnMut(Vec<JobRow>) -> bool,
    ) -> std::io::Result<()> {
        self.rows.sort_unstable_by_key(|j| j.0);
        let Some(file) = self.file else {
            for c in self.rows.chunks(chunk.max(1)) {
                if !emit(c.to_vec()) {
                    break;
                }
            }
            return Ok(());
        };
        // Each run read through its own small buffer; the rows still in memory are one more run.
        let mut runs: Vec<RunReader> = Vec::with_capacity(self.runs.len() + 1);
        let mut start = 0u64;
        for &len in &self.runs {
            runs.push(RunReader::new(start, len));
            start += len;
        }
        runs.push(RunReader::in_memory(std::mem::take(&mut self.rows)));
        let mut heads = BinaryHeap::with_capacity(runs.len());
        for (k, run) in runs.iter_mut().enumerate() {
            if let Some(r) = run.next(&file)? {
                heads.push(Reverse((r.0, k, r.1, r.2)));
            }
        }
        let mut out = Vec::with_capacity(chunk.max(1));
        while let Some(Reverse((id, k, hash, seq))) = heads.pop() {
            out.push((id, hash, seq));
            if let Some(r) = runs[k].next(&file)? {
                heads.push(Reverse((r.0, k, r.1, r.2)));
            }
            if out.len() >= chunk.max(1)
                && !emit(std::mem::replace(
                    &mut out,
                    Vec::with_capacity(chunk.max(1)),
                ))
            {
                return Ok(());
            }
        }
        if !out.is_empty() {
            emit(out);
        }
        Ok(())
    }
}

/// One sorted run: rows `start..start + len` of the file, or rows kept in memory.
struct RunReader {
    next_row: u64,
    end_row: u64,
    buf: Vec<JobRow>,
    at: usize,
    in_memory: bool,
}

impl RunReader {
    fn new(start: u64, len: u64) -> Self {
        RunReader {
            next_row: start,
            end_row: start + len,
            buf: Vec::new(),
            at: 0,
            in_memory: false,
        }
    }

    fn in_memory(rows: Vec<JobRow>) -> Self {
        RunReader {
            next_row: 0,
            end_row: 0,
            buf: rows,
            at: 0,
            in_memory: true,
        }
    }

    fn next(&mut self, file: &File) -> std::io::Result<Option<JobRow>> {
        if self.at == self.buf.len() {
            if self.in_memory || self.next_row == self.end_row {
                return Ok(None);
            }
            let n = (self.end_row - self.next_row).min(READ_ROWS as u64) as usize;
            let mut bytes = vec![0u8; n * ROW_BYTES];
            file.read_exact_at(&mut bytes, self.next_row * ROW_BYTES as u64)?;
            self.buf.clear();
            self.buf.extend(bytes.chunks_exact(ROW_BYTES).map(decode));
            self.next_row += n as u64;
            self.at = 0;
        }
        self.at += 1;
        Ok(Some(self.buf[self.at - 1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: u64) -> Vec<JobRow> {
        // Job ids in a scrambled order, each row's fields derived from its position.
        (0..n)
            .map(|i| {
                let k = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let mut id = [0u8; 16];
                id[..8].copy_from_slice(&k.to_be_bytes());
                id[8..].copy_from_slice(&i.to_be_bytes());
                (id, [(i % 251) as u8; 32], i)
            })
            .collect()
    }

    fn sorted_through(order: JobOrder, chunk: usize) -> Vec<JobRow> {
        let mut out = Vec::new();
        order
            .finish(chunk, |c| {
                assert!(!c.is_empty() && c.len() <= chunk);
                out.extend(c);
                true
            })
            .unwrap();
        out
    }

    /// From memory only and through runs on file (several, the last partial), the same rows
    /// come back in job-id order.
    #[test]
    fn gives_every_row_back_in_job_id_order() {
        for (n, run) in [(0u64, 8usize), (5, 8), (100, 7), (1000, 64), (1000, 1000)] {
            let input = rows(n);
            let mut order = JobOrder::with_run_rows(run);
            input.iter().for_each(|r| order.push(*r).unwrap());
            let spilled = order.file.is_some();
            assert_eq!(spilled, n as usize >= run, "n {n} run {run}");
            let mut want = input.clone();
            want.sort_unstable_by_key(|j| j.0);
            assert_eq!(sorted_through(order, 33), want, "n {n} run {run}");
        }
    }

    /// `emit` returning false stops the merge.
    #[test]
    fn stops_when_told() {
        let mut order = JobOrder::with_run_rows(10);
        rows(100).iter().for_each(|r| order.push(*r).unwrap());
        let mut calls = 0;
        order
            .finish(7, |_| {
                calls += 1;
                false
            })
            .unwrap();
        assert_eq!(calls, 1);
    }
}
