//! The demo's gates: two node write-ahead logs (`*.alwl`) written by the engine's WAL writer,
//! holding the job events the Ledger screen folds: a job run to completion, a cancellation that
//! races a completion (the cancellation wins), a failure against a time-out (the later one wins),
//! a job still running, and a REGIONAL watermark. The second gate crashed mid-write: its log ends
//! in half a frame, the torn tail the WAL screen shows and `R` (or `airlock wal recover`) cuts.

use super::night::OfflineNight;
use crate::core::hlc::WallClock;
use crate::core::wal::{
    EventBody, EventType, FrameState, FrameType, WalOptions, WalWriter, Watermark,
};
use color_eyre::eyre::eyre;
use color_eyre::Result;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// One gate's log being written.
struct Gate {
    writer: WalWriter,
}

impl Gate {
    fn open(path: &Path, node: &str, night: &OfflineNight) -> Result<Gate> {
        // No preallocation: the demo's logs end where their last frame does. The HLCs read the
        // night's clock, so the Ledger screen's lanes spread over it.
        let opts = WalOptions {
            prealloc_chunk: 0,
            wall: std::sync::Arc::new(night.clone()),
            ..WalOptions::default()
        };
        Ok(Gate {
            writer: WalWriter::open(path, node, opts)?,
        })
    }

    /// Appends one event; returns its LSN and its HLC's text.
    fn event(&self, t: EventType, fields: Value) -> Result<(u64, String)> {
        let fields = fields
            .as_object()
            .ok_or_else(|| eyre!("a demo event is a JSON object"))?;
        let done = self
            .writer
            .append(EventBody::new(FrameType::Event(t), fields)?)?;
        let hlc = format!(
            "{}:{}:{}",
            done.hlc.physical,
            done.hlc.logical,
            self.writer.node()
        );
        Ok((done.lsn, hlc))
    }
}

/// A job id of SPEC 12: `{region_code}-{timestamp_ms}-{gate_id}-{sequence}`.
fn job_id(region: &str, at_ms: u64, gate: &str, seq: u32) -> String {
    format!("{region}-{at_ms}-{gate}-{seq:05}")
}

/// Writes `gate-a.alwl` and `gate-b.alwl` into `dir`, their events through `night`; returns
/// their paths.
pub fn write_gate_logs(dir: &Path, night: &OfflineNight) -> Result<Vec<PathBuf>> {
    let (a_path, b_path) = (dir.join("gate-a.alwl"), dir.join("gate-b.alwl"));
    let a = Gate::open(&a_path, "gate-a", night)?;
    let b = Gate::open(&b_path, "gate-b", night)?;
    let now = night.now_ms();
    let dcs = json!(["euw1", "use1"]);
    let created = |g: &Gate, job: &str, workflow: &str| {
        g.event(
            EventType::JobCreated,
            json!({"job_id": job, "spec": {"workflow": workflow, "vus": 200}, "assigned_dcs": dcs, "fence_token": 1}),
        )
    };
    let accepted = |g: &Gate, job: &str, dc: &str| {
        g.event(
            EventType::JobAccepted,
            json!({"job_id": job, "dc_id": dc, "worker_count": 8, "fence_token": 1}),
        )
    };
    let progress = |g: &Gate, job: &str, dc: &str, done: u64, failed: u64| {
        g.event(
            EventType::JobProgressReported,
            json!({"job_id": job, "dc_id": dc, "completed": done, "failed": failed}),
        )
    };

    // 1. Run to completion on gate-a; REGIONAL confirmed up to its completion.
    let done = job_id("use1", now, "gatea", 1);
    created(&a, &done, "checkout-load")?;
    for dc in ["use1", "euw1"] {
        accepted(&a, &done, dc)?;
    }
    for (i, dc) in ["use1", "euw1", "use1", "euw1"].iter().enumerate() {
        progress(&a, &done, dc, (i as u64 + 1) * 1200, i as u64 / 2)?;
    }
    let (completed, _) = a.event(
        EventType::JobCompleted,
        json!({"job_id": done, "final_status": "passed", "aggregate_metrics": {"requests": 48000, "p99_ms": 212}}),
    )?;
    a.writer.advance(Watermark {
        state: FrameState::Regional,
        lsn: completed,
    })?;

    // 2. gate-a records a completion; gate-b had an operator's cancellation: the cancellation
    //    beats every other terminal event, and both DCs acknowledge it.
    let raced = job_id("use1", now + 1, "gatea", 2);
    created(&a, &raced, "search-soak")?;
    accepted(&a, &raced, "use1")?;
    accepted(&b, &raced, "euw1")?;
    progress(&a, &raced, "use1", 800, 0)?;
    b.event(
        EventType::JobCancellationRequested,
        json!({"job_id": raced, "reason": "wrong target environment", "requestor": "ops-oncall", "fence_token": 1}),
    )?;
    a.event(
        EventType::JobCompleted,
        json!({"job_id": raced, "final_status": "passed", "aggregate_metrics": {"requests": 9600}}),
    )?;
    for (g, dc) in [(&b, "euw1"), (&a, "use1")] {
        g.event(
            EventType::JobCancellationAcked,
            json!({"job_id": raced, "dc_id": dc, "workflows_cancelled": 4}),
        )?;
    }

    // 3. A failure seen by gate-a and a time-out seen later by gate-b: the later one wins.
    let lost = job_id("euw1", now + 2, "gateb", 1);
    created(&b, &lost, "payments-spike")?;
    accepted(&b, &lost, "euw1")?;
    let (_, progress_hlc) = progress(&b, &lost, "euw1", 300, 12)?;
    a.event(
        EventType::JobFailed,
        json!({"job_id": lost, "error": "worker pool exhausted", "failed_dc": "use1"}),
    )?;
    b.event(
        EventType::JobTimedOut,
        json!({"job_id": lost, "timeout_type": "progress", "last_progress_hlc": progress_hlc}),
    )?;

    // 4. Still running on both DCs.
    let running = job_id("euw1", now + 3, "gateb", 2);
    created(&b, &running, "nightly-regression")?;
    for dc in ["euw1", "use1"] {
        accepted(&b, &running, dc)?;
        progress(&b, &running, dc, 450, 3)?;
    }
    a.writer.close()?;
    b.writer.close()?;
    tear_the_tail(&b_path)?;
    Ok(vec![a_path, b_path])
}

/// gate-b crashed while writing: half of a frame (the bytes of its first one) after its last.
fn tear_the_tail(path: &Path) -> Result<()> {
    use std::io::Write;
    let bytes = std::fs::read(path)?;
    let first_frame = bytes.get(8..60).unwrap_or_default();
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(first_frame)?;
    f.sync_all()?;
    Ok(())
}
