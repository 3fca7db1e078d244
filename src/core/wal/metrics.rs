//! Counters and histograms of one WAL, as plain engine structs (a service exposes them later).

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Log-linear buckets: exact below 64, then 32 buckets per power of two (about 3% wide).
const SUB_BITS: u32 = 5;
const SUB: u32 = 1 << SUB_BITS;
const EXACT: u64 = 2 * SUB as u64;
const BUCKETS: usize = EXACT as usize + (64 - SUB_BITS as usize - 1) * SUB as usize;

/// A lock-free histogram of u64 samples.
pub struct Histogram {
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let sub = ((v >> (e - SUB_BITS)) & (SUB as u64 - 1)) as usize;
    (EXACT as usize + (e - SUB_BITS - 1) as usize * SUB as usize + sub).min(BUCKETS - 1)
}

/// The smallest value of a bucket.
fn bucket_floor(i: usize) -> u64 {
    if (i as u64) < EXACT {
        return i as u64;
    }
    let e = ((i - EXACT as usize) / SUB as usize) as u32 + SUB_BITS + 1;
    let sub = ((i - EXACT as usize) % SUB as usize) as u64;
    (1u64 << e) | (sub << (e - SUB_BITS))
}

impl Histogram {
    pub fn record(&self, v: u64) {
        self.record_n(v, 1);
    }

    /// Records `n` samples of value `v`.
    pub fn record_n(&self, v: u64, n: u64) {
        self.counts[bucket_of(v)].fetch_add(n, Relaxed);
        self.sum.fetch_add(v * n, Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(u64, u64)> = self
            .counts
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let n = c.load(Relaxed);
                (n > 0).then(|| (bucket_floor(i), n))
            })
            .collect();
        HistogramSnapshot {
            count: buckets.iter().map(|b| b.1).sum(),
            sum: self.sum.load(Relaxed),
            buckets,
        }
    }
}

/// A histogram at one moment: `(bucket lower bound, count)` for non-empty buckets.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct HistogramSnapshot {
    pub count: u64,
    pub sum: u64,
    pub buckets: Vec<(u64, u64)>,
}

impl HistogramSnapshot {
    /// The lower bound of the bucket holding quantile `q` (0..=1); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for &(floor, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return floor;
            }
        }
        0
    }
}

/// Counters of one open log.
#[derive(Default)]
pub struct WalMetrics {
    pub appends: AtomicU64,
    pub batches: AtomicU64,
    pub fdatasyncs: AtomicU64,
    pub bytes: AtomicU64,
    pub recoveries: AtomicU64,
    pub torn_tails: AtomicU64,
    pub failures: AtomicU64,
    /// Frames per batch.
    pub batch_size: Histogram,
    /// fdatasync latency in microseconds.
    pub fdatasync_micros: Histogram,
    /// fdatasync latency in microseconds once per frame of its batch: what the appenders waited
    /// on the disk alone (its quantiles bound the acknowledgement latency's from below).
    pub fdatasync_per_frame_micros: Histogram,
    /// Where the writer thread's time goes, in microseconds summed over batches.
    pub phases: WriterPhases,
}

/// Time the writer thread spent in each phase of its group-commit cycle (microseconds, summed):
/// waiting for a first entry, waiting for more entries of the batch, encoding, writing, releasing
/// the appenders (fdatasync is [`WalMetrics::fdatasync_micros`]).
#[derive(Default)]
pub struct WriterPhases {
    pub idle: AtomicU64,
    pub fill: AtomicU64,
    pub encode: AtomicU64,
    pub write: AtomicU64,
    pub release: AtomicU64,
}

/// [`WriterPhases`] at one moment.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WriterPhasesSnapshot {
    pub idle_micros: u64,
    pub fill_micros: u64,
    pub encode_micros: u64,
    pub write_micros: u64,
    pub release_micros: u64,
}

impl WriterPhases {
    pub fn snapshot(&self) -> WriterPhasesSnapshot {
        WriterPhasesSnapshot {
            idle_micros: self.idle.load(Relaxed),
            fill_micros: self.fill.load(Relaxed),
            encode_micros: self.encode.load(Relaxed),
            write_micros: self.write.load(Relaxed),
            release_micros: self.release.load(Relaxed),
        }
    }
}

/// [`WalMetrics`] at one moment.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WalMetricsSnapshot {
    pub appends: u64,
    pub batches: u64,
    pub fdatasyncs: u64,
    pub bytes: u64,
    pub recoveries: u64,
    pub torn_tails: u64,
    pub failures: u64,
    pub batch_size: HistogramSnapshot,
    pub fdatasync_micros: HistogramSnapshot,
    pub fdatasync_per_frame_micros: HistogramSnapshot,
    pub phases: WriterPhasesSnapshot,
}

impl WalMetrics {
    pub fn snapshot(&self) -> WalMetricsSnapshot {
        WalMetricsSnapshot {
            appends: self.appends.load(Relaxed),
            batches: self.batches.load(Relaxed),
            fdatasyncs: self.fdatasyncs.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            recoveries: self.recoveries.load(Relaxed),
            torn_tails: self.torn_tails.load(Relaxed),
            failures: self.failures.load(Relaxed),
            batch_size: self.batch_size.snapshot(),
            fdatasync_micros: self.fdatasync_micros.snapshot(),
            fdatasync_per_frame_micros: self.fdatasync_per_frame_micros.snapshot(),
            phases: self.phases.snapshot(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_tight() {
        let mut last = 0;
        for v in [0u64, 1, 15, 16, 17, 31, 32, 100, 1000, 123_456, 1 << 40] {
            let b = bucket_of(v);
            assert!(b >= last);
            last = b;
            let floor = bucket_floor(b);
            assert!(floor <= v && v - floor <= v / 32, "{v} -> {floor}");
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_samples() {
        let h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.count, 100);
        assert_eq!(s.sum, 5050);
        let p50 = s.quantile(0.5);
        assert_eq!(p50, 50);
        assert!(s.quantile(0.99) >= 88);
        assert_eq!(HistogramSnapshot::default().quantile(0.5), 0);
        let w = Histogram::default();
        w.record_n(10, 98);
        w.record_n(5000, 2);
        let s = w.snapshot();
        assert_eq!((s.count, s.sum), (100, 980 + 10_000));
        assert_eq!(s.quantile(0.98), 10);
        assert!(s.quantile(0.99) > 4800);
    }
}
