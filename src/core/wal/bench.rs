//! The WAL benchmark (`airlock dev wal-bench`): N concurrent appenders (async tasks), each waiting
//! for its own acknowledgement before the next append, M entries in all; throughput, ack latency,
//! batches and the fdatasync latency measured by the writer in the same run.

use super::error::WalError;
use super::event::EventBody;
use super::frame::{EventType, FrameType};
use super::writer::{WalOptions, WalWriter};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub appenders: usize,
    pub entries: usize,
    pub payload_bytes: usize,
    /// Directory for the log (a fresh file is made and removed).
    pub dir: PathBuf,
    /// The runtime the appenders' tasks run on.
    pub runtime: BenchRuntime,
}

/// Where the appenders' tasks run. With the log's writer and syncer threads beside them, one
/// runtime thread leaves the other core to the log; two workers steal from each other and wake
/// each other, which on two cores costs more than it gains (docs/benchmarks/wal.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BenchRuntime {
    /// A current-thread runtime: every appender task on one thread.
    #[default]
    CurrentThread,
    /// A multi-thread runtime with two workers.
    MultiThread,
}

/// The figures (`--json` prints the fields first, then the details).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchReport {
    pub entries_per_sec: f64,
    pub p50_ack_micros: u64,
    pub p99_ack_micros: u64,
    pub batches: u64,
    pub fdatasyncs: u64,
    pub fdatasync_p50_micros: u64,
    pub fdatasync_mean_micros: f64,
    pub fdatasync_p99_micros: u64,
    /// p99 over acknowledged entries of their own batch's fdatasync latency: a lower bound of
    /// `p99AckMicros` set by the disk alone (an entry is acknowledged after its fdatasync).
    pub fdatasync_p99_per_entry_micros: u64,
    /// Share of the run the writer spent inside fdatasync.
    pub fdatasync_busy: f64,
    pub appenders: usize,
    pub entries: usize,
    pub payload_bytes: usize,
    pub runtime: BenchRuntime,
    pub mean_batch: f64,
    pub elapsed_ms: f64,
    pub bytes: u64,
    /// `appenders / fdatasync p50`: the most acknowledged entries per second possible when every
    /// appender waits for its own fdatasync.
    pub sync_bound_per_sec: f64,
    /// Where the writer thread's time went (microseconds over the run).
    pub writer_phases: super::metrics::WriterPhasesSnapshot,
    /// CPU time of the whole process over the run (user + system), per acknowledged entry.
    pub cpu_nanos_per_entry: f64,
}

/// A JobProgressReported whose payload (with a typical HLC text) is about `bytes` long.
pub fn sized_event(bytes: usize, node: &str, n: usize) -> Result<EventBody, WalError> {
    let fields = |job: String| {
        let mut m = serde_json::Map::new();
        m.insert("job_id".into(), job.into());
        m.insert("dc_id".into(), "use1".into());
        m.insert("completed".into(), (n % 1000).into());
        m.insert("failed".into(), 0.into());
        m
    };
    let hlc_len = 13 + 1 + 1 + 1 + node.len();
    let base = EventBody::new(
        FrameType::Event(EventType::JobProgressReported),
        &fields(String::new()),
    )?;
    let pad = bytes.saturating_sub(base.payload_len(hlc_len));
    // Zero-padded by hand: a format width above 65,535 panics.
    let digits = n.to_string();
    let job = "0".repeat(pad.saturating_sub(digits.len())) + &digits;
    EventBody::new(
        FrameType::Event(EventType::JobProgressReported),
        &fields(job),
    )
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// Runs the benchmark on a fresh log in `cfg.dir`.
pub fn run(cfg: &BenchConfig) -> Result<BenchReport, WalError> {
    let path = cfg
        .dir
        .join(format!("wal-bench-{}.alwl", uuid::Uuid::new_v4().simple()));
    let result = run_on(cfg, &path);
    let _ = std::fs::remove_file(&path);
    result
}

fn run_on(cfg: &BenchConfig, path: &Path) -> Result<BenchReport, WalError> {
    const NODE: &str = "bench";
    let mut opts = WalOptions::default();
    if let Some(us) = std::env::var("AIRLOCK_WAL_SPIN_MICROS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        opts.spin = std::time::Duration::from_micros(us);
    }
    let writer = Arc::new(WalWriter::open(path, NODE, opts)?);
    let body = sized_event(cfg.payload_bytes, NODE, 0)?;
    let rt = match cfg.runtime {
        BenchRuntime::CurrentThread => tokio::runtime::Builder::new_current_thread().build(),
        BenchRuntime::MultiThread => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build(),
    }
    .map_err(|e| WalError::io("start runtime for", path, e))?;
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = crate::core::cpu_time::process_cpu_seconds();
    let started = Instant::now();
    let latencies: Result<Vec<u64>, WalError> = rt.block_on(async {
        let tasks: Vec<_> = (0..cfg.appenders)
            .map(|_| {
                let (w, body, next, total) =
                    (writer.clone(), body.clone(), next.clone(), cfg.entries);
                tokio::spawn(async move {
                    let mut lat = Vec::new();
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        let t = Instant::now();
                        w.append_async(body.clone()).await?;
                        lat.push(t.elapsed().as_micros() as u64);
                    }
                    Ok::<_, WalError>(lat)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(cfg.entries);
        for t in tasks {
            all.extend(t.await.map_err(|_| WalError::Closed)??);
        }
        Ok(all)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = ((crate::core::cpu_time::process_cpu_seconds() - cpu_before) * 1e9).max(0.0) as u64;
    let mut lat = latencies?;
    lat.sort_unstable();
    let m = writer.metrics();
    let fsync_p50 = m.fdatasync_micros.quantile(0.5);
    Ok(BenchReport {
        entries_per_sec: lat.len() as f64 / elapsed,
        p50_ack_micros: percentile(&lat, 0.5),
        p99_ack_micros: percentile(&lat, 0.99),
        batches: m.batches,
        fdatasyncs: m.fdatasyncs,
        fdatasync_p50_micros: fsync_p50,
        fdatasync_mean_micros: m.fdatasync_micros.sum as f64
            / m.fdatasync_micros.count.max(1) as f64,
        fdatasync_p99_micros: m.fdatasync_micros.quantile(0.99),
        fdatasync_p99_per_entry_micros: m.fdatasync_per_frame_micros.quantile(0.99),
        fdatasync_busy: m.fdatasync_micros.sum as f64 / 1e6 / elapsed,
        appenders: cfg.appenders,
        runtime: cfg.runtime,
        entries: lat.len(),
        payload_bytes: body.payload_len(13 + 3 + NODE.len()),
        mean_batch: m.appends as f64 / m.batches.max(1) as f64,
        elapsed_ms: elapsed * 1e3,
        bytes: m.bytes,
        sync_bound_per_sec: cfg.appenders as f64 * 1e6 / fsync_p50.max(1) as f64,
        writer_phases: m.phases,
        cpu_nanos_per_entry: cpu as f64 / lat.len().max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_event_is_about_the_asked_size_and_the_bench_acks_every_entry() {
        let body = sized_event(100, "bench", 7).expect("event");
        assert_eq!(body.payload_len(13 + 3 + 5), 100);
        let dir = tempfile::tempdir().expect("tempdir");
        for runtime in [BenchRuntime::CurrentThread, BenchRuntime::MultiThread] {
            let r = run(&BenchConfig {
                appenders: 4,
                entries: 40,
                payload_bytes: 100,
                dir: dir.path().to_path_buf(),
                runtime,
            })
            .expect("bench");
            assert_eq!((r.entries, r.runtime), (40, runtime));
            assert!(r.batches >= 1 && r.batches <= 40);
            assert!(r.p99_ack_micros >= r.p50_ack_micros);
            assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
        }
    }
}
