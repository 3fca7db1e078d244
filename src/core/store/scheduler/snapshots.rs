//! Batch snapshots: the stored rows, their signed statements, and on-demand snapshots.

use super::append::ChainAppender;
use super::read::chain_head;
use super::{SchedulerError, SNAPSHOT_PAYLOAD_TYPE};
use crate::core::store::{Store, StoreError};
use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

/// A batch snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub id: i64,
    pub tenant_id: String,
    pub snapshot_hlc: String,
    pub from_chain_link: String,
    pub to_chain_link: String,
    /// Chain position of the first covered entry.
    pub from_seq: u64,
    pub entry_count: u64,
    pub merkle_root: String,
    /// The DSSE envelope (JSON) when signed.
    pub dsse_envelope: Option<serde_json::Value>,
    pub created_at: String,
}

impl Snapshot {
    /// The statement a signature covers: JCS of the six keys of SPEC section 8.
    pub fn statement(&self) -> String {
        snapshot_statement(
            &self.tenant_id,
            &self.snapshot_hlc,
            &self.from_chain_link,
            &self.to_chain_link,
            self.entry_count,
            &self.merkle_root,
        )
    }

    pub fn covers(&self, seq: u64) -> bool {
        seq >= self.from_seq && seq - self.from_seq < self.entry_count
    }
}

/// Checks a snapshot's DSSE envelope: its statement must be this snapshot's, its signature by a
/// trusted key. `Absent` when the snapshot is unsigned.
pub fn check_snapshot_signature(
    s: &Snapshot,
    trust: &crate::core::trust::TrustSet,
) -> crate::core::trust::SignatureCheck {
    use crate::core::trust::{DsseEnvelope, SignatureCheck};
    let Some(env) = &s.dsse_envelope else {
        return SignatureCheck::Absent;
    };
    let env: DsseEnvelope = match serde_json::from_value(env.clone()) {
        Ok(e) => e,
        Err(e) => {
            return SignatureCheck::Invalid {
                key_id: String::new(),
                reason: format!("not a DSSE envelope ({e})"),
            }
        }
    };
    let key_id = env
        .signatures
        .first()
        .map(|x| x.keyid.clone())
        .unwrap_or_default();
    if env.payload_type != SNAPSHOT_PAYLOAD_TYPE {
        return SignatureCheck::Invalid {
            key_id,
            reason: format!(
                "payloadType is {:?}, not {SNAPSHOT_PAYLOAD_TYPE}",
                env.payload_type
            ),
        };
    }
    if env.statement().ok().as_deref() != Some(s.statement().as_str()) {
        return SignatureCheck::Invalid {
            key_id,
            reason: "the signed statement is not this snapshot's".into(),
        };
    }
    env.check(trust)
}

/// JCS of `{entryCount, fromChainLink, merkleRoot, snapshotHlc, tenantId, toChainLink}`.
pub fn snapshot_statement(
    tenant: &str,
    snapshot_hlc: &str,
    from: &str,
    to: &str,
    count: u64,
    root: &str,
) -> String {
    let v = serde_json::json!({
        "tenantId": tenant,
        "snapshotHlc": snapshot_hlc,
        "fromChainLink": from,
        "toChainLink": to,
        "entryCount": count,
        "merkleRoot": root,
    });
    crate::core::canonical::canonical_text(&v).expect("plain strings and integers canonicalise")
}

/// Signs a snapshot statement: receives (payloadType, statement bytes), returns the DSSE envelope.
pub type SnapshotSigner<'a> = &'a (dyn Fn(&str, &[u8]) -> Result<serde_json::Value, String> + Sync);

pub(crate) fn row_snapshot(r: &rusqlite::Row<'_>) -> rusqlite::Result<Snapshot> {
    let env: Option<String> = r.get(8)?;
    // Positions are checked here once, so every sum over them fits (a tampered row is an error
    // naming the field, never a wrapped number).
    let from_seq: i64 = r.get(5)?;
    let entry_count: i64 = r.get(6)?;
    let bad = |field: &str, detail: String| {
        rusqlite::Error::FromSqlConversionFailure(
            5,
            rusqlite::types::Type::Integer,
            format!(
                "batch_snapshot row {}: {field} {detail}",
                r.get::<_, i64>(0).unwrap_or(-1)
            )
            .into(),
        )
    };
    if from_seq < 0 {
        return Err(bad("from_seq", format!("{from_seq} is negative")));
    }
    if entry_count < 1 || from_seq.checked_add(entry_count).is_none() {
        return Err(bad(
            "entry_count",
            format!("{entry_count} is out of range (from_seq {from_seq})"),
        ));
    }
    Ok(Snapshot {
        id: r.get(0)?,
        tenant_id: r.get(1)?,
        snapshot_hlc: r.get(2)?,
        from_chain_link: r.get(3)?,
        to_chain_link: r.get(4)?,
        from_seq: from_seq as u64,
        entry_count: entry_count as u64,
        merkle_root: r.get(7)?,
        dsse_envelope: env.and_then(|e| serde_json::from_str(&e).ok()),
        created_at: r.get(9)?,
    })
}

pub(super) const SNAPSHOT_COLUMNS: &str = "id, tenant_id, snapshot_hlc, from_chain_link, to_chain_link, from_seq, entry_count, merkle_root, dsse_envelope, created_at";

/// The tenant's snapshots in chain order.
pub fn snapshots(store: &Store, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
    load_snapshots(store.conn(), tenant)
}

pub(super) fn load_snapshots(conn: &Connection, tenant: &str) -> Result<Vec<Snapshot>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq"
    ))?;
    let rows = stmt.query_map(params![tenant], row_snapshot)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Takes an on-demand snapshot of the tenant's uncovered tail (batches of `batch_size`, the last one
/// partial), optionally signed.
pub fn snapshot_now(
    store: &mut Store,
    tenant: &str,
    batch_size: u64,
    signer: Option<SnapshotSigner<'_>>,
) -> Result<Vec<Snapshot>, SchedulerError> {
    let tx = store.begin_write()?;
    let head = chain_head(&tx, tenant)?.ok_or_else(|| SchedulerError::NoChain(tenant.into()))?;
    let app = ChainAppender::begin(&tx, tenant, crate::core::hlc::unix_ms_now())?;
    if app.uncovered.is_empty() {
        return Err(SchedulerError::NothingToSnapshot(tenant.into()));
    }
    let summary = app.finish(
        &tx,
        batch_size,
        true,
        signer,
        Some(head.head_chain_link),
        head.length,
    )?;
    tx.commit()?;
    let count = summary.snapshots.len() as u64;
    crate::core::metrics::record_quietly(
        store.conn(),
        &[crate::core::metrics::Event::Snapshots { count }],
    );
    Ok(summary.snapshots)
}
