//! REGIONAL and GLOBAL confirmations of ledger events (SPEC sections 12 and 14): a batch of event
//! frames is committed to `airlock.ledger_event` on the PostgreSQL primary, with
//! `synchronous_commit = local` for REGIONAL (durable on the primary) or `remote_apply` for GLOBAL
//! (applied on a synchronous standby before the commit returns). The caller (the ledger) records the
//! returned watermark as a WAL state frame. No home-made consensus: replication is PostgreSQL's.

use super::PgError;
use crate::core::chain::{sha256, Digest32};
use serde::Serialize;

/// The replicated durability levels (the WAL's state bytes 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Level {
    /// Committed and flushed on the primary.
    Regional = 1,
    /// Committed with `remote_apply`: applied on a synchronous standby.
    Global = 2,
}

/// A PostgreSQL WAL position (`pg_lsn`), as u64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Lsn(pub u64);

impl std::fmt::Display for Lsn {
    /// PostgreSQL's text form, `X/Y` in upper-case hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

impl std::str::FromStr for Lsn {
    type Err = String;
    fn from_str(s: &str) -> Result<Lsn, String> {
        let (hi, lo) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not an LSN (X/Y)"))?;
        let hi = u64::from_str_radix(hi, 16).map_err(|e| format!("{s:?}: {e}"))?;
        let lo = u64::from_str_radix(lo, 16).map_err(|e| format!("{s:?}: {e}"))?;
        if hi > u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
            return Err(format!("{s:?} is out of range"));
        }
        Ok(Lsn(hi << 32 | lo))
    }
}

/// What a confirmation guarantees: every frame of the batch is stored at `level`, and every WAL
/// record of the primary up to `watermark` is durable at that level (for GLOBAL: applied on a
/// synchronous standby).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Confirmation {
    pub level: Level,
    pub watermark: Lsn,
    /// Frames in the batch (a frame confirmed before is confirmed again, not stored twice).
    pub frames: u64,
    /// SHA-256 of each frame, in the order given.
    pub digests: Vec<Digest32>,
}

/// Confirms `frames` (whole ledger WAL frames, bytes as written) at `level`: one transaction on the
/// primary, committed with the level's `synchronous_commit`. GLOBAL is refused when the server has
/// no synchronous standby streaming (with none, `remote_apply` would silently mean a local commit).
/// The COMMIT waits at most [`super::commit::TIMEOUT_ENV`] seconds (default 30): a GLOBAL commit
/// whose standby went away then fails with [`PgError::CommitNotReplicated`]: nothing is confirmed
/// (the caller writes no watermark), though the rows are committed on the primary with the level
/// asked for and reach the standby when it catches up.
pub fn confirm(
    client: &mut postgres::Client,
    level: Level,
    frames: &[&[u8]],
) -> Result<Confirmation, PgError> {
    confirm_within(client, level, frames, super::commit::timeout_from_env()?)
}

/// [`confirm`] with its COMMIT deadline given (`None`: wait for the standby forever).
pub fn confirm_within(
    client: &mut postgres::Client,
    level: Level,
    frames: &[&[u8]],
    timeout: Option<std::time::Duration>,
) -> Result<Confirmation, PgError> {
    if level == Level::Global {
        require_sync_standby(client)?;
    }
    let digests: Vec<Digest32> = frames.iter().map(|f| sha256(f)).collect();
    client.batch_execute("BEGIN")?;
    let lsn = match store_frames(client, level, frames, &digests) {
        Ok(lsn) => lsn,
        Err(e) => {
            super::commit::rollback_quietly(client);
            return Err(e);
        }
    };
    super::commit::commit(client, timeout)?;
    Ok(Confirmation {
        level,
        watermark: lsn.parse().map_err(PgError::Server)?,
        frames: frames.len() as u64,
        digests,
    })
}

/// Inside the open transaction: the level's `synchronous_commit`, the frames, and the WAL insert
/// position before COMMIT.
fn store_frames(
    client: &mut postgres::Client,
    level: Level,
    frames: &[&[u8]],
    digests: &[Digest32],
) -> Result<String, PgError> {
    client.batch_execute(match level {
        Level::Regional => "SET LOCAL synchronous_commit = local",
        Level::Global => "SET LOCAL synchronous_commit = remote_apply",
    })?;
    let digest_refs: Vec<&[u8]> = digests.iter().map(|d| d.as_slice()).collect();
    client.execute(
        "INSERT INTO airlock.ledger_event (digest, frame, level)
         SELECT d, f, $3::smallint FROM unnest($1::bytea[], $2::bytea[]) AS t(d, f)
         ON CONFLICT (digest) DO UPDATE SET level = GREATEST(airlock.ledger_event.level, EXCLUDED.level)",
        &[&digest_refs, &frames, &(level as i16)],
    )?;
    // Every record of this transaction is before this position; the commit returns only once its
    // commit record (after it) is durable at the level, so the position is a safe watermark.
    Ok(client
        .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])?
        .get(0))
}

/// Refuses GLOBAL unless `synchronous_standby_names` is set and a standby streams synchronously.
fn require_sync_standby(client: &mut postgres::Client) -> Result<(), PgError> {
    let names: String = client
        .query_one("SHOW synchronous_standby_names", &[])?
        .get(0);
    let streaming: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')",
            &[],
        )?
        .get(0);
    if names.trim().is_empty() || streaming == 0 {
        return Err(PgError::Server(format!(
            "GLOBAL durability needs a synchronous standby: synchronous_standby_names is {names:?} and {streaming} standby streams synchronously; configure one (docs/postgres.md) or confirm REGIONAL"
        )));
    }
    Ok(())
}

/// The frames stored at `level` or above, with their digests (what survives a failover).
pub fn confirmed(
    client: &mut postgres::Client,
    level: Level,
) -> Result<Vec<(Digest32, Vec<u8>)>, PgError> {
    let rows = client.query(
        "SELECT digest, frame FROM airlock.ledger_event WHERE level >= $1 ORDER BY confirmed_at, digest",
        &[&(level as i16)],
    )?;
    rows.iter()
        .map(|r| {
            let d: &[u8] = r.get(0);
            let d = <[u8; 32]>::try_from(d)
                .map_err(|_| PgError::Damaged("a ledger_event digest is not 32 bytes".into()))?;
            Ok((d, r.get::<_, Vec<u8>>(1)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsn_text_round_trips_in_postgres_form() {
        let l: Lsn = "16/B374D848".parse().unwrap();
        assert_eq!(l.0, 0x16_B374_D848);
        assert_eq!(l.to_string(), "16/B374D848");
        assert!("16B374D848".parse::<Lsn>().is_err());
        assert!("1FFFFFFFF/0".parse::<Lsn>().is_err());
        assert!(Lsn(0x1_0000_0000) > Lsn(0xffff_ffff));
    }
}
