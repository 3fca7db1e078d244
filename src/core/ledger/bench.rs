//! The ledger benchmark (`airlock ledger bench`): generates node WALs of jobs (a creation, two
//! acceptances, progress reports and a completion per job, spread over the WALs), folds them, and
//! runs anti-entropy between two copies of one large ledger that differ in one frame.

use super::antientropy;
use super::event::Event;
use super::parallel::fold_ledgers;
use super::LedgerError;
use crate::core::hlc::Hlc;
use crate::core::wal::{encode_frame_into, file_header, EventType, FrameState, FrameType, WalHlc};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Events per generated job.
pub const EVENTS_PER_JOB: u64 = 100;

/// Fold benchmark figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FoldBench {
    pub events: u64,
    pub wals: usize,
    pub jobs: usize,
    pub bytes: u64,
    pub seconds: f64,
    pub events_per_sec: f64,
    /// Peak resident memory during the fold (the process's peak is reset just before it), bytes.
    pub max_rss_bytes: u64,
    /// CPU time (user + system, all threads) the fold took: on a shared machine the wall clock
    /// also counts other processes' turns, this does not.
    pub cpu_seconds: f64,
    /// `cpu_seconds` per event, in microseconds.
    pub cpu_us_per_event: f64,
}

/// Anti-entropy benchmark figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AntiEntropyBench {
    pub frames: u64,
    pub differing_lsn: u64,
    pub found_lsn: Option<u64>,
    pub exchanges: u32,
    /// The first diff: builds both trees from the files.
    pub first_seconds: f64,
    /// A second diff with the trees' block indexes already on disk.
    pub indexed_seconds: f64,
}

fn frame_for(out: &mut Vec<u8>, lsn: u64, hlc: &Hlc, ty: u8, payload: &str) {
    let wh = WalHlc::from_hlc(hlc).unwrap_or(WalHlc {
        physical: 0,
        logical: 0,
        node_hash: 0,
    });
    let ft = FrameType::from_byte(ty).unwrap_or(FrameType::Event(EventType::JobProgressReported));
    encode_frame_into(out, lsn, wh, FrameState::Pending, ft, &[payload.as_bytes()]);
}

/// The payload (JCS text) of generated event `k` of job `j` (id `job`) at `hlc` (HLC text), and
/// its type byte: a creation assigning euw1 and use1, their two acceptances, progress reports,
/// and a completion as event [`EVENTS_PER_JOB`] - 1.
fn event_text(job: &str, j: u64, k: u64, hlc: &str) -> (u8, String) {
    let dc = ["use1", "euw1"][(k % 2) as usize];
    let json = match k {
        0 => {
            serde_json::json!({"type": "JobCreated", "job_id": job, "spec": {"vus": j % 500}, "assigned_dcs": ["euw1", "use1"], "fence_token": 1, "hlc": hlc})
        }
        1 | 2 => {
            serde_json::json!({"type": "JobAccepted", "job_id": job, "dc_id": dc, "worker_count": 8, "fence_token": 1, "hlc": hlc})
        }
        k if k == EVENTS_PER_JOB - 1 => {
            serde_json::json!({"type": "JobCompleted", "job_id": job, "final_status": "passed", "aggregate_metrics": {"requests": j}, "hlc": hlc})
        }
        _ => {
            // The hot case, written directly as JCS text (keys in order).
            let text = format!(
                r#"{{"completed":{},"dc_id":"{dc}","failed":{},"hlc":"{hlc}","job_id":"{job}"}}"#,
                k * 10,
                k % 3
            );
            return (3, text);
        }
    };
    match Event::from_json(&json.to_string()) {
        Ok(e) => (e.event_type().code(), e.payload_text()),
        Err(_) => (3, String::new()),
    }
}

/// Writes `wals` node WALs holding `events` events in all; returns their paths.
pub fn generate(dir: &Path, events: u64, wals: usize) -> Result<Vec<PathBuf>, LedgerError> {
    let wals = wals.max(1);
    let paths: Vec<PathBuf> = (0..wals)
        .map(|w| dir.join(format!("gate-{w}.alwl")))
        .collect();
    let mut files = Vec::new();
    for p in &paths {
        let f = std::fs::File::create(p).map_err(|e| LedgerError::io("create", p, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        w.write_all(&file_header())
            .map_err(|e| LedgerError::io("write", p, e))?;
        files.push(w);
    }
    let mut lsn = vec![0u64; wals];
    let mut buf = Vec::with_capacity(512);
    for n in 0..events {
        let (j, k) = (n / EVENTS_PER_JOB, n % EVENTS_PER_JOB);
        let w = ((j + k) % wals as u64) as usize;
        lsn[w] += 1;
        let hlc = Hlc::new(1_700_000_000_000 + n, 0, format!("gate-{w}"));
        let job = format!("use1-1700000000000-gate{}-{:05}", j % 8, j / 8 % 100_000);
        let (ty, payload) = event_text(&job, j, k, &hlc.to_string());
        buf.clear();
        frame_for(&mut buf, lsn[w], &hlc, ty, &payload);
        files[w]
            .write_all(&buf)
            .map_err(|e| LedgerError::io("write", &paths[w], e))?;
    }
    for (w, mut f) in files.into_iter().enumerate() {
        f.flush()
            .map_err(|e| LedgerError::io("write", &paths[w], e))?;
    }
    Ok(paths)
}

/// The first HLC of a log written by [`generate_log`] (2023-11-14), well behind any clock.
pub const GENERATED_BASE_MS: u64 = 1_700_000_000_000;

/// Writes one node WAL of about `bytes` bytes for `node` (`airlock dev wal-gen`, the recovery
/// benchmark's input), straight to disk with one final fsync, LSN from 1; returns its frame
/// count. Its events are jobs of [`EVENTS_PER_JOB`] events ([`event_text`]; the last job may be
/// cut short, then it is running) whose ids follow the ledger's job-id rule
/// (`use1-{creation ms}-{node, '-' as '_'}-{job number mod 100,000}`, unique: a sequence comes
/// back 10 s of HLC later), so `ledger fold` folds it without findings. HLCs: 1,000 per
/// millisecond from [`GENERATED_BASE_MS`] (a 1 GiB log spans about 8 s, all in the past).
pub fn generate_log(path: &Path, node: &str, bytes: u64) -> Result<u64, LedgerError> {
    use crate::core::hlc::hlc_text;
    use crate::core::wal::{node_hash, FILE_HEADER_LEN};
    crate::core::hlc::validate_node_id(node).map_err(|e| LedgerError::Usage(e.to_string()))?;
    let gate: String = node
        .chars()
        .take(64)
        .map(|c| if c == '-' { '_' } else { c })
        .collect();
    let mut out = crate::core::file_output::AtomicFile::create(path)
        .map_err(|e| LedgerError::io("create", path, e.source))?;
    let werr = |e| LedgerError::io("write", path, e);
    out.writer().write_all(&file_header()).map_err(werr)?;
    let hash = node_hash(node);
    let (mut written, mut n, mut job) = (FILE_HEADER_LEN, 0u64, String::new());
    let mut frame = Vec::with_capacity(512);
    while written < bytes {
        let (j, k) = (n / EVENTS_PER_JOB, n % EVENTS_PER_JOB);
        let wh = WalHlc {
            physical: GENERATED_BASE_MS + n / 1000,
            logical: (n % 1000) as u16,
            node_hash: hash,
        };
        if k == 0 {
            let sequence = (j % 100_000) as u32;
            job = super::JobId::from_parts("use1", wh.physical, &gate, sequence)
                .map_err(|e| LedgerError::Usage(e.to_string()))?
                .as_str()
                .to_string();
        }
        let hlc = hlc_text(wh.physical, u32::from(wh.logical), node).to_string();
        let (ty, payload) = event_text(&job, j, k, &hlc);
        let ft =
            FrameType::from_byte(ty).unwrap_or(FrameType::Event(EventType::JobProgressReported));
        n += 1;
        frame.clear();
        encode_frame_into(
            &mut frame,
            n,
            wh,
            FrameState::Pending,
            ft,
            &[payload.as_bytes()],
        );
        out.writer().write_all(&frame).map_err(werr)?;
        written += frame.len() as u64;
    }
    out.commit()
        .map_err(|e| LedgerError::io("write", path, e.source))?;
    Ok(n)
}

/// Folds the WALs and measures.
pub fn fold_bench(paths: &[PathBuf]) -> Result<FoldBench, LedgerError> {
    let bytes = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    reset_peak_rss();
    let cpu = crate::core::cpu_time::process_cpu_seconds();
    let t = Instant::now();
    let fold = fold_ledgers(paths)?;
    let seconds = t.elapsed().as_secs_f64();
    let cpu_seconds = crate::core::cpu_time::process_cpu_seconds() - cpu;
    let events = fold.events_applied();
    Ok(FoldBench {
        events,
        wals: paths.len(),
        jobs: fold.jobs.len(),
        bytes,
        seconds,
        events_per_sec: events as f64 / seconds.max(1e-9),
        max_rss_bytes: max_rss_bytes(),
        cpu_seconds,
        cpu_us_per_event: cpu_seconds * 1e6 / events.max(1) as f64,
    })
}

/// Resets the process's peak resident set size (`/proc/self/clear_refs`, Linux), so the next
/// [`max_rss_bytes`] measures from here (generating the input does not count).
fn reset_peak_rss() {
    if let Err(e) = std::fs::write("/proc/self/clear_refs", "5") {
        tracing::debug!(error = %e, "peak RSS not reset; the figure includes earlier work");
    }
}

/// Peak resident set size of this process (`VmHWM`, else getrusage).
pub fn max_rss_bytes() -> u64 {
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
    if let Some(kb) = hwm {
        return kb * 1024;
    }
    // SAFETY: getrusage fills the struct it is given; no other memory is touched.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc == 0 {
        (ru.ru_maxrss.max(0) as u64) * 1024
    } else {
        0
    }
}

/// Writes one node's ledger of `frames` progress frames to `a`, and to `b` the same with frame
/// `differ` replaced by another event at the same LSN and HLC.
pub fn generate_pair(a: &Path, b: &Path, frames: u64, differ: u64) -> Result<(), LedgerError> {
    let mut wa = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(a).map_err(|e| LedgerError::io("create", a, e))?,
    );
    let mut wb = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(b).map_err(|e| LedgerError::io("create", b, e))?,
    );
    let ea = |e| LedgerError::io("write", a, e);
    let eb = |e| LedgerError::io("write", b, e);
    wa.write_all(&file_header()).map_err(ea)?;
    wb.write_all(&file_header()).map_err(eb)?;
    let mut buf = Vec::with_capacity(256);
    for i in 1..=frames {
        let hlc = Hlc::new(1_700_000_000_000 + i, 0, "gate-a");
        let job = format!("use1-1700000000000-gatea-{:05}", i / 100 % 100_000);
        let text = |completed: u64| {
            format!(
                r#"{{"completed":{completed},"dc_id":"use1","failed":0,"hlc":"{hlc}","job_id":"{job}"}}"#
            )
        };
        buf.clear();
        frame_for(&mut buf, i, &hlc, 3, &text(i));
        wa.write_all(&buf).map_err(ea)?;
        if i == differ {
            buf.clear();
            frame_for(&mut buf, i, &hlc, 3, &text(i + 1));
        }
        wb.write_all(&buf).map_err(eb)?;
    }
    wa.flush().map_err(ea)?;
    wb.flush().map_err(eb)?;
    Ok(())
}

/// Diffs the two ledgers twice (cold: trees built from the files; then with indexes on disk).
pub fn anti_entropy_bench(
    a: &Path,
    b: &Path,
    frames: u64,
    differ: u64,
) -> Result<AntiEntropyBench, LedgerError> {
    let t = Instant::now();
    let first = antientropy::between_files(a, b, false)?;
    let first_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let second = antientropy::between_files(a, b, false)?;
    let indexed_seconds = t.elapsed().as_secs_f64();
    debug_assert_eq!(first.first_divergent_lsn, second.first_divergent_lsn);
    Ok(AntiEntropyBench {
        frames,
        differing_lsn: differ,
        found_lsn: second.first_divergent_lsn,
        exchanges: second.exchanges,
        first_seconds,
        indexed_seconds,
    })
}
