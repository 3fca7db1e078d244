//! Crash drills (issue 13): a process appends with many appenders and is killed at a random
//! moment; afterwards the log must hold every acknowledged LSN with its exact bytes, in an unbroken
//! LSN run (nothing after a gap), and recovery must not refuse it. [`drill`] is the appending side
//! (`airlock dev wal-drill`, meant to be killed); [`check_round`] is the check after the kill.

use super::error::WalError;
use super::event::EventBody;
use super::frame::{EventType, FrameType};
use super::reader::read_frames;
use super::recovery::{examine, Outcome};
use super::writer::{WalOptions, WalWriter};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One acknowledged append of a [`drill`]: its LSN and HLC, and the job id its payload carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrillAck {
    pub lsn: u64,
    pub hlc: String,
    pub job_id: String,
}

impl DrillAck {
    /// Parses the `lsn hlc job_id` line `airlock dev wal-drill` prints per acknowledgement.
    pub fn parse_line(line: &str) -> Option<DrillAck> {
        let mut parts = line.split(' ');
        let (lsn, hlc, job_id) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(DrillAck {
            lsn: lsn.parse().ok()?,
            hlc: hlc.to_string(),
            job_id: job_id.to_string(),
        })
    }
}

/// The event the drill appends as the `n`th of one appender (job id `a{appender}-{n}`).
fn drill_event(job_id: &str, n: usize) -> Result<EventBody, WalError> {
    let mut fields = serde_json::Map::new();
    fields.insert("job_id".into(), job_id.into());
    fields.insert("dc_id".into(), "use1".into());
    fields.insert("completed".into(), n.into());
    fields.insert("failed".into(), 0.into());
    EventBody::new(FrameType::Event(EventType::JobProgressReported), &fields)
}

/// Crash drill: `appenders` concurrent appenders append JobProgressReported events (job ids
/// `a{appender}-{n}`) to the log at `path` until `entries` are acked, handing each acknowledged
/// append to `on_ack` (on the calling thread) in acknowledgement order per appender. Meant to be
/// killed at a random moment; recovery must then keep every acknowledged frame.
pub fn drill(
    path: &Path,
    node: &str,
    appenders: usize,
    entries: usize,
    mut on_ack: impl FnMut(DrillAck),
) -> Result<(), WalError> {
    let writer = Arc::new(WalWriter::open(path, node, WalOptions::default())?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .map_err(|e| WalError::io("start runtime for", path, e))?;
    let (tx, rx) = std::sync::mpsc::channel::<Result<DrillAck, WalError>>();
    let next = Arc::new(AtomicUsize::new(0));
    for a in 0..appenders {
        let (w, tx, next, node) = (writer.clone(), tx.clone(), next.clone(), node.to_string());
        rt.spawn(async move {
            let mut n = 0usize;
            while next.fetch_add(1, Ordering::Relaxed) < entries {
                let job_id = format!("a{a}-{n}");
                let sent = match drill_event(&job_id, n) {
                    Ok(body) => w.append_async(body).await.map(|ack| DrillAck {
                        lsn: ack.lsn,
                        hlc: ack.hlc.text(Some(&node)),
                        job_id,
                    }),
                    Err(e) => Err(e),
                };
                let failed = sent.is_err();
                if tx.send(sent).is_err() || failed {
                    return;
                }
                n += 1;
            }
        });
    }
    drop(tx);
    for ack in rx {
        on_ack(ack?);
    }
    Ok(())
}

/// What one round's check found.
#[derive(Debug, Clone, Default)]
pub struct RoundCheck {
    /// Acknowledged appends checked.
    pub acked: usize,
    /// Valid frames in the log after the kill.
    pub frames: usize,
    /// Recovery would cut a torn tail.
    pub torn_tail: bool,
    /// Every acknowledged frame that is missing or differs, and a refusal: empty when the
    /// round passed.
    pub problems: Vec<String>,
}

/// Checks the log after a kill against the acknowledgements printed before it.
pub fn check_round(log: &Path, acks: &[DrillAck]) -> Result<RoundCheck, WalError> {
    let mut check = RoundCheck {
        acked: acks.len(),
        ..RoundCheck::default()
    };
    if !log.exists() {
        if !acks.is_empty() {
            check
                .problems
                .push(format!("{} appends acknowledged, no log", acks.len()));
        }
        return Ok(check);
    }
    let r = examine(log)?;
    check.torn_tail = r.outcome == Outcome::TornTail;
    if r.outcome == Outcome::Refused {
        check
            .problems
            .push(format!("recovery refuses the log at offset {:?}", r.offset));
    }
    let (frames, _) = read_frames(log).map_err(|e| WalError::io("read", log, e))?;
    check.frames = frames.len();
    let first = frames.first().map_or(1, |f| f.lsn);
    for a in acks {
        let Some(f) = a
            .lsn
            .checked_sub(first)
            .and_then(|i| frames.get(i as usize))
        else {
            check
                .problems
                .push(format!("acknowledged LSN {} is not in the log", a.lsn));
            continue;
        };
        let n = a.job_id.rsplit('-').next().and_then(|n| n.parse().ok());
        let want = n
            .and_then(|n| drill_event(&a.job_id, n).ok())
            .map(|body| body.payload(&a.hlc));
        if f.lsn != a.lsn || want.as_deref() != Some(&f.payload[..]) {
            check.problems.push(format!(
                "acknowledged LSN {} does not hold the acknowledged bytes",
                a.lsn
            ));
        }
    }
    Ok(check)
}
