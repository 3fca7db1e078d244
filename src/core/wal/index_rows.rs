//! What the frame index (`LiveIndex`, in `index.rs`) holds: the offset of every frame it read (8
//! bytes a frame), in runs of consecutive LSNs, and the damaged spans between runs. A log read to
//! its end in one go is one run; a log refused for damage is indexed on past it (the index
//! resynchronises at the next CRC-valid frame), one run after each damaged span.
//!
//! Entries are the frames and the spans in file order: span `k` comes after the frames before it
//! and before the next run's first frame.

use super::reader::Damage;

/// Damaged spans recorded at most: past them the index stops (a crafted file of nothing but
/// damage would otherwise cost a span and a resynchronising search per frame).
pub const MAX_DAMAGED_SPANS: usize = 1000;

/// Bytes the index skipped: reading failed at `offset` for `damage`, and `len` bytes on the next
/// CRC-valid frame that could be read starts (or the file ends: `resync` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSpan {
    pub offset: u64,
    pub len: u64,
    /// Why the frame at `offset` failed (SPEC 11's failure list).
    pub damage: Damage,
    /// Where reading went on (`offset + len`), or `None`: nothing valid follows to the file's end.
    pub resync: Option<u64>,
    /// Frames before the span: its place among the frames.
    pub frames_before: usize,
    /// The LSN of the last frame before the span.
    pub lsn_before: Option<u64>,
    /// The LSN of the first frame after it (where reading went on).
    pub lsn_after: Option<u64>,
}

impl DamagedSpan {
    /// LSNs missing between the frames on either side: `Some((first, last))` when the LSN after
    /// the span is above the one before + 1 (frames lost in the span); `None` when nothing is
    /// lost by that count (or one side is unknown).
    pub fn lost_lsns(&self) -> Option<(u64, u64)> {
        let (before, after) = (self.lsn_before?, self.lsn_after?);
        (after > before.saturating_add(1)).then(|| (before + 1, after - 1))
    }

    /// The LSN continuity across the span, in words: what is missing, or that the LSNs go back.
    pub fn lsn_gap_text(&self) -> String {
        match (self.lsn_before, self.lsn_after, self.lost_lsns()) {
            (_, _, Some((a, b))) if a == b => format!("LSN {a} lost"),
            (_, _, Some((a, b))) => format!("LSN {a}-{b} lost ({} LSNs)", b - a + 1),
            (Some(x), Some(y), None) if y <= x => format!("LSN goes back from {x} to {y}"),
            (Some(_), Some(_), None) => "no LSN lost".into(),
            (None, Some(y), None) => format!("no frame before it; LSN {y} after it"),
            (_, None, None) => "no frame after it".into(),
        }
    }
}

/// Frames read one after the other from `first_row` on, LSNs going up by one from `first_lsn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub first_row: usize,
    pub first_lsn: u64,
}

/// One entry of the index in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The frame with this row number (counting frames only).
    Frame(usize),
    /// A damaged span.
    Damage(DamagedSpan),
}

/// The index's table: frame offsets, their runs and the spans between them.
#[derive(Debug, Default)]
pub struct IndexRows {
    pub offsets: Vec<u64>,
    /// Runs in order; `runs[k + 1]` follows `spans[k]`. Empty until the first frame.
    pub runs: Vec<Run>,
    pub spans: Vec<DamagedSpan>,
}

impl IndexRows {
    /// Frames and spans.
    pub fn entries(&self) -> usize {
        self.offsets.len() + self.spans.len()
    }

    /// The `i`th entry in file order, if there is one yet.
    pub fn entry(&self, i: usize) -> Option<Entry> {
        // Span k is entry `frames_before + k`, increasing with k: the first span at or after i.
        let (mut lo, mut hi) = (0, self.spans.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.spans[mid].frames_before + mid < i {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        match self.spans.get(lo) {
            Some(s) if s.frames_before + lo == i => Some(Entry::Damage(s.clone())),
            _ => {
                let row = i - lo;
                (row < self.offsets.len()).then_some(Entry::Frame(row))
            }
        }
    }

    /// The entry number of frame `row`.
    pub fn entry_of_frame(&self, row: usize) -> usize {
        row + self.spans.partition_point(|s| s.frames_before <= row)
    }

    /// Frames after damage start here (`None` when no span has been recorded).
    pub fn first_after_damage(&self) -> Option<usize> {
        self.spans.first().map(|s| s.frames_before)
    }

    /// The run holding frame `row` and how many frames it has (so far).
    fn run_of(&self, row: usize) -> Option<(Run, usize)> {
        let k = self
            .runs
            .partition_point(|r| r.first_row <= row)
            .checked_sub(1)?;
        let run = self.runs[k];
        let end = self
            .runs
            .get(k + 1)
            .map_or(self.offsets.len(), |r| r.first_row);
        Some((run, end - run.first_row))
    }

    /// The LSN frame `row` was indexed with.
    pub fn lsn_of(&self, row: usize) -> Option<u64> {
        if row >= self.offsets.len() {
            return None;
        }
        let (run, _) = self.run_of(row)?;
        Some(run.first_lsn + (row - run.first_row) as u64)
    }

    /// The first frame (in file order) indexed with LSN `lsn`.
    pub fn frame_of_lsn(&self, lsn: u64) -> Option<usize> {
        self.lsn_ranges()
            .into_iter()
            .find_map(|(row, first, last)| {
                (first..=last)
                    .contains(&lsn)
                    .then(|| row + (lsn - first) as usize)
            })
    }

    /// Each run with frames: `(first row, first LSN, last LSN)`.
    pub fn lsn_ranges(&self) -> Vec<(usize, u64, u64)> {
        self.runs
            .iter()
            .filter_map(|r| {
                let (_, n) = self.run_of(r.first_row)?;
                (n > 0).then(|| (r.first_row, r.first_lsn, r.first_lsn + n as u64 - 1))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(offset: u64, frames_before: usize, before: u64, after: u64) -> DamagedSpan {
        DamagedSpan {
            offset,
            len: 10,
            damage: Damage::Crc {
                stored: 1,
                computed: 2,
            },
            resync: Some(offset + 10),
            frames_before,
            lsn_before: Some(before),
            lsn_after: Some(after),
        }
    }

    /// Frames 0-2 (LSN 1-3), a span, frames 3-5 (LSN 5-7), a span, frames 6-7 (LSN 20-21).
    fn rows() -> IndexRows {
        IndexRows {
            offsets: (0..8).map(|i| 8 + i * 100).collect(),
            runs: vec![
                Run {
                    first_row: 0,
                    first_lsn: 1,
                },
                Run {
                    first_row: 3,
                    first_lsn: 5,
                },
                Run {
                    first_row: 6,
                    first_lsn: 20,
                },
            ],
            spans: vec![span(308, 3, 3, 5), span(900, 6, 7, 20)],
        }
    }

    #[test]
    fn entries_put_each_span_between_the_frames_around_it() {
        let r = rows();
        assert_eq!(r.entries(), 10);
        let kinds: Vec<String> = (0..11)
            .map(|i| match r.entry(i) {
                Some(Entry::Frame(f)) => format!("f{f}"),
                Some(Entry::Damage(s)) => format!("d{}", s.offset),
                None => "-".into(),
            })
            .collect();
        assert_eq!(
            kinds,
            ["f0", "f1", "f2", "d308", "f3", "f4", "f5", "d900", "f6", "f7", "-"]
        );
        assert_eq!(r.entry_of_frame(2), 2);
        assert_eq!(r.entry_of_frame(3), 4);
        assert_eq!(r.entry_of_frame(6), 8);
    }

    #[test]
    fn lsns_follow_their_runs_and_gaps_are_named() {
        let r = rows();
        let lsns: Vec<Option<u64>> = (0..9).map(|i| r.lsn_of(i)).collect();
        assert_eq!(
            lsns,
            [1, 2, 3, 5, 6, 7, 20, 21]
                .map(Some)
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
        assert_eq!(r.frame_of_lsn(6), Some(4));
        assert_eq!(r.frame_of_lsn(4), None);
        assert_eq!(r.lsn_ranges(), [(0, 1, 3), (3, 5, 7), (6, 20, 21)]);
        assert_eq!(r.spans[0].lsn_gap_text(), "LSN 4 lost");
        assert_eq!(r.spans[1].lsn_gap_text(), "LSN 8-19 lost (12 LSNs)");
        assert_eq!(span(1, 1, 9, 3).lsn_gap_text(), "LSN goes back from 9 to 3");
    }
}
