//! REGIONAL and GLOBAL durability of ledger appends (SPEC 12 and 14): after the node WAL's group
//! commit made an event LOCAL, its frame (bytes as written) is confirmed by PostgreSQL
//! (`core::store::postgres::durability::confirm`: `synchronous_commit = local` for REGIONAL,
//! `remote_apply` on a synchronous standby for GLOBAL) and the confirmation is recorded in the WAL as
//! a watermark frame (state REGIONAL 1 or GLOBAL 2, up to the event's LSN). No home-made consensus:
//! replication is PostgreSQL's. A confirmation that fails leaves the event LOCAL (it is in the WAL)
//! and says so; confirming it again later is harmless.

use super::append::{AppendRequest, AppendedEvent, LedgerLog};
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

/// Confirms `frames` (the latest up to `lsn`) at `durability` and records the watermark in the log.
pub fn confirm_appended(
    log: &LedgerLog,
    client: &mut postgres::Client,
    durability: Durability,
    frames: &[Vec<u8>],
    lsn: u64,
) -> Result<Option<Confirmation>, ConfirmError> {
    let Some((level, state)) = durability.replicated() else {
        return Ok(None);
    };
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let confirmation = confirm(client, level, &refs).map_err(|source| ConfirmError::Postgres {
        lsn,
        level: durability.name(),
        source,
    })?;
    if log.wal().watermarks().covered(state) < lsn {
        log.wal()
            .advance(Watermark { state, lsn })
            .map_err(|e| ConfirmError::Watermark {
                lsn,
                level: durability.name(),
                source: e.into(),
            })?;
    }
    Ok(Some(confirmation))
}

/// The event frames of the log at `path` above `covered` (LSN), bytes as stored: what is still to
/// be confirmed at a level whose watermark stands at `covered` (read once when a log is opened).
pub fn frames_above(
    path: &std::path::Path,
    covered: u64,
) -> Result<Vec<(u64, Vec<u8>)>, LedgerError> {
    let mut reader =
        crate::core::wal::WalReader::open(path).map_err(|e| LedgerError::io("open", path, e))?;
    let mut out = Vec::new();
    while let Some(f) = reader
        .next_frame()
        .map_err(|e| LedgerError::io("read", path, e))?
    {
        if f.lsn > covered && f.frame_type != FrameType::Watermark {
            out.push((f.lsn, f.to_frame().encode()));
        }
    }
    Ok(out)
}
