//! REGIONAL and GLOBAL durability of ledger appends (SPEC 12 and 14): after the node WAL's group
//! commit made an event LOCAL, its frame (bytes as written) is confirmed by PostgreSQL
//! (`core::store::postgres::durability::confirm`: `synchronous_commit = local` for REGIONAL,
//! `remote_apply` on a synchronous standby for GLOBAL) and the confirmation is recorded in the WAL as
//! a watermark frame (state REGIONAL 1 or GLOBAL 2, up to the event's LSN), and PostgreSQL's LSN in
//! the log's confirmation record (carried by checkpoints). No home-made consensus: replication is
//! PostgreSQL's. A confirmation that fails leaves the event LOCAL (it is in the WAL) and says so;
//! confirming it again later is harmless. Frames awaiting confirmation are held in memory up to
//! [`PendingLimits`], then read back from the WAL ([`PendingFrames`]).

use super::append::{AppendRequest, AppendedEvent, LedgerLog};
use super::confirmations::{self, ConfirmedMark};
use super::LedgerError;
use crate::core::hlc::Hlc;
use crate::core::store::postgres::durability::{confirm, Confirmation, Level};
use crate::core::store::postgres::PgError;
use crate::core::wal::frame::encode_frame_into;
use crate::core::wal::{EventBody, FrameState, FrameType, WalHlc, Watermark};

/// What an append waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fdatasynced in the node WAL.
    Local,
    /// and committed on the PostgreSQL primary.
    Regional,
    /// and applied on a synchronous standby.
    Global,
}

impl Durability {
    /// `local`, `regional`, `global` (the configuration's `ledger.durability`).
    pub fn parse(text: &str) -> Option<Durability> {
        match text {
            "local" => Some(Durability::Local),
            "regional" => Some(Durability::Regional),
            "global" => Some(Durability::Global),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Durability::Local => "LOCAL",
            Durability::Regional => "REGIONAL",
            Durability::Global => "GLOBAL",
        }
    }

    /// The PostgreSQL level and WAL state of a replicated level; `None` for LOCAL.
    pub fn replicated(self) -> Option<(Level, FrameState)> {
        match self {
            Durability::Local => None,
            Durability::Regional => Some((Level::Regional, FrameState::Regional)),
            Durability::Global => Some((Level::Global, FrameState::Global)),
        }
    }
}

/// Why an event is only LOCAL.
#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error("event at LSN {lsn} is LOCAL (fdatasynced in the node WAL) but not {level}: {source}")]
    Postgres {
        lsn: u64,
        level: &'static str,
        #[source]
        source: PgError,
    },
    #[error("event at LSN {lsn} was confirmed {level} by PostgreSQL but its watermark could not be written: {source}")]
    Watermark {
        lsn: u64,
        level: &'static str,
        #[source]
        source: LedgerError,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// The frame of an appended event exactly as the WAL wrote it (state PENDING): the same canonical
/// payload with the assigned HLC, the same header.
pub fn frame_bytes(req: &AppendRequest, appended: &AppendedEvent) -> Result<Vec<u8>, LedgerError> {
    let body = EventBody::new(FrameType::Event(req.event_type), &req.fields)?;
    let payload = body.payload(&appended.hlc);
    let hlc = Hlc::parse(&appended.hlc)
        .map_err(|e| LedgerError::Usage(format!("appended HLC {}: {e}", appended.hlc)))?;
    let hlc = WalHlc::from_hlc(&hlc)
        .map_err(|e| LedgerError::Usage(format!("appended HLC {}: {e}", appended.hlc)))?;
    let mut out = Vec::with_capacity(crate::core::wal::FRAME_HEADER_LEN + payload.len());
    encode_frame_into(
        &mut out,
        appended.lsn,
        hlc,
        FrameState::Pending,
        body.frame_type(),
        &[&payload],
    );
    Ok(out)
}

/// How many unconfirmed frames (and bytes) a ledger holds in memory. Past either, it stops holding
/// them (a *spill*): the frames are in the node WAL already, and the next confirmation reads them
/// back from it in batches of at most these sizes. Memory stays bounded however long PostgreSQL is
/// unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLimits {
    pub frames: usize,
    pub bytes: usize,
}

impl Default for PendingLimits {
    fn default() -> PendingLimits {
        PendingLimits {
            frames: 4096,
            bytes: 16 << 20,
        }
    }
}

/// The event frames of a replicated ledger appended but not yet confirmed, bounded by
/// [`PendingLimits`]. A ledger just opened starts *spilled*: what an earlier process appended and
/// never confirmed (a failed confirmation, a crash) is read back from the WAL by the first
/// confirmation.
#[derive(Debug)]
pub struct PendingFrames {
    durability: Durability,
    limits: PendingLimits,
    frames: Vec<Vec<u8>>,
    bytes: usize,
    spilled: bool,
    spills: u64,
}

impl PendingFrames {
    pub fn new(durability: Durability, limits: PendingLimits) -> PendingFrames {
        PendingFrames {
            durability,
            limits,
            frames: Vec::new(),
            bytes: 0,
            spilled: true,
            spills: 0,
        }
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Holds an appended frame until it is confirmed; returns true when this push spilled (the
    /// limits were reached: every held frame is dropped from memory, the WAL has them).
    pub fn push(&mut self, frame: Vec<u8>) -> bool {
        if self.spilled || self.durability == Durability::Local {
            return false;
        }
        if self.frames.len() + 1 > self.limits.frames
            || self.bytes + frame.len() > self.limits.bytes
        {
            self.frames = Vec::new();
            self.bytes = 0;
            self.spilled = true;
            self.spills += 1;
            return true;
        }
        self.bytes += frame.len();
        self.frames.push(frame);
        false
    }

    /// Frames and bytes held in memory now.
    pub fn held(&self) -> (usize, usize) {
        (self.frames.len(), self.bytes)
    }

    /// Whether unconfirmed frames are (also) only in the WAL.
    pub fn is_spilled(&self) -> bool {
        self.spilled
    }

    /// How many times the limits were reached since this ledger was opened.
    pub fn spills(&self) -> u64 {
        self.spills
    }
}

/// Confirms every unconfirmed event frame of `log` up to `lsn` (the latest append) at the pending
/// frames' level, records the WAL watermark and the confirmation (with PostgreSQL's LSN; see
/// [`super::confirmations`]). Held frames go in one batch; after a spill (or on a ledger just
/// opened) they are read back from the WAL above the last confirmed LSN, in bounded batches, each
/// confirmed and recorded before the next is read. `None` for LOCAL.
pub fn confirm_pending(
    log: &mut LedgerLog,
    client: &mut postgres::Client,
    pending: &mut PendingFrames,
    lsn: u64,
) -> Result<Option<Confirmation>, ConfirmError> {
    let durability = pending.durability;
    if durability.replicated().is_none() {
        return Ok(None);
    }
    if !pending.spilled {
        let c = confirm_batch(log, client, durability, &pending.frames, lsn)?;
        pending.frames.clear();
        pending.bytes = 0;
        return Ok(Some(c));
    }
    let from = unconfirmed_from(log, durability);
    let path = log.path().to_path_buf();
    let mut reader =
        crate::core::wal::WalReader::open(&path).map_err(|e| LedgerError::io("open", &path, e))?;
    let (mut batch, mut bytes, mut last) = (Vec::new(), 0usize, None);
    while let Some(f) = reader
        .next_frame()
        .map_err(|e| LedgerError::io("read", &path, e))?
    {
        if f.lsn > lsn {
            break;
        }
        if f.lsn <= from || f.frame_type == FrameType::Watermark {
            continue;
        }
        let frame = f.to_frame().encode();
        if !batch.is_empty()
            && (batch.len() + 1 > pending.limits.frames
                || bytes + frame.len() > pending.limits.bytes)
        {
            let upto = last.unwrap_or(f.lsn - 1);
            confirm_batch(log, client, durability, &batch, upto)?;
            batch.clear();
            bytes = 0;
        }
        bytes += frame.len();
        batch.push(frame);
        last = Some(f.lsn);
    }
    let confirmation = match last {
        Some(upto) if !batch.is_empty() => {
            Some(confirm_batch(log, client, durability, &batch, upto)?)
        }
        _ => None,
    };
    pending.spilled = false;
    pending.frames.clear();
    pending.bytes = 0;
    Ok(confirmation)
}

/// The node WAL LSN below which every event is confirmed at `durability`: the recorded
/// confirmation (GLOBAL counts for REGIONAL), else the WAL's own watermark for the level.
pub fn unconfirmed_from(log: &LedgerLog, durability: Durability) -> u64 {
    let Some((_, state)) = durability.replicated() else {
        return u64::MAX;
    };
    confirmations::confirmed_up_to(log.confirmations(), durability.name())
        .unwrap_or_else(|| log.wal().watermarks().covered(state))
}

/// Confirms one batch (the frames up to `lsn`), then records the watermark frame and the
/// confirmation.
fn confirm_batch(
    log: &mut LedgerLog,
    client: &mut postgres::Client,
    durability: Durability,
    frames: &[Vec<u8>],
    lsn: u64,
) -> Result<Confirmation, ConfirmError> {
    let Some((level, state)) = durability.replicated() else {
        return Err(ConfirmError::Ledger(LedgerError::Usage(
            "LOCAL needs no confirmation".into(),
        )));
    };
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let confirmation = confirm(client, level, &refs).map_err(|source| ConfirmError::Postgres {
        lsn,
        level: durability.name(),
        source,
    })?;
    let watermark = |source: LedgerError| ConfirmError::Watermark {
        lsn,
        level: durability.name(),
        source,
    };
    if log.wal().watermarks().covered(state) < lsn {
        log.wal()
            .advance(Watermark { state, lsn })
            .map_err(|e| watermark(e.into()))?;
    }
    log.record_confirmation(
        durability.name(),
        ConfirmedMark {
            wal_lsn: lsn,
            postgres_lsn: confirmation.watermark.to_string(),
        },
    )
    .map_err(watermark)?;
    Ok(confirmation)
}

/// What [`append_confirmed`] did: the append (durable LOCAL), and its confirmation or why not.
pub type ConfirmedAppend = (AppendedEvent, Result<Option<Confirmation>, ConfirmError>);

/// `ledger append --durability regional|global`: appends (LOCAL), then confirms this event and
/// every earlier unconfirmed one of the log. An append refused (validation, fence) is the error; a
/// failed confirmation leaves the events LOCAL and is returned beside the acknowledgement.
pub fn append_confirmed(
    log: &mut LedgerLog,
    client: &mut postgres::Client,
    durability: Durability,
    req: &AppendRequest,
) -> Result<ConfirmedAppend, LedgerError> {
    if durability.replicated().is_some() {
        log.require_confirmation()?;
    }
    let mut pending = PendingFrames::new(durability, PendingLimits::default());
    let appended = log.append(req)?;
    let confirmation = confirm_pending(log, client, &mut pending, appended.lsn);
    Ok((appended, confirmation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_frames_are_bounded_and_spill_to_the_wal() {
        let limits = PendingLimits {
            frames: 3,
            bytes: 100,
        };
        // A ledger just opened may have unconfirmed frames in its WAL: it starts spilled.
        let mut p = PendingFrames::new(Durability::Regional, limits);
        assert!(p.is_spilled());
        assert!(!p.push(vec![0; 10]));
        assert_eq!(p.held(), (0, 0));
        // Once confirmed (un-spilled), frames are held up to the frame limit...
        p.spilled = false;
        for _ in 0..3 {
            assert!(!p.push(vec![0; 10]));
        }
        assert_eq!(p.held(), (3, 30));
        assert!(p.push(vec![0; 10]), "the fourth frame spills");
        assert_eq!((p.held(), p.is_spilled(), p.spills()), ((0, 0), true, 1));
        assert!(!p.push(vec![0; 10]), "spilled: the WAL holds them");
        assert_eq!(p.held(), (0, 0));
        // ... and the byte limit.
        p.spilled = false;
        assert!(!p.push(vec![0; 60]));
        assert!(p.push(vec![0; 41]));
        assert_eq!((p.held(), p.spills()), ((0, 0), 2));
        // LOCAL holds nothing.
        let mut local = PendingFrames::new(Durability::Local, limits);
        local.spilled = false;
        assert!(!local.push(vec![0; 10]));
        assert_eq!(local.held(), (0, 0));
    }
}
