//! Reading a tenant chain: its head, the tenants summary, stored entries and known jobs.

use super::snapshots::{row_snapshot, Snapshot, SNAPSHOT_COLUMNS};
use crate::core::chain::Digest32;
use crate::core::merge::JobMap;
use crate::core::store::{Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

/// The stored head of a tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    pub tenant_id: String,
    pub head_chain_link: String,
    pub head_hlc: String,
    pub length: u64,
    pub updated_at: String,
}

/// Reads a tenant's head.
pub fn chain_head(conn: &Connection, tenant: &str) -> Result<Option<ChainHead>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT head_chain_link, head_hlc, length, updated_at FROM chain_heads WHERE tenant_id = ?1",
            params![tenant],
            |r| {
                Ok(ChainHead {
                    tenant_id: tenant.to_string(),
                    head_chain_link: r.get(0)?,
                    head_hlc: r.get(1)?,
                    length: r.get::<_, i64>(2)? as u64,
                    updated_at: r.get(3)?,
                })
            },
        )
        .optional()?)
}

/// Summary of one tenant chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSummary {
    pub tenant: String,
    pub head: String,
    pub head_hlc: String,
    pub length: u64,
    pub last_snapshot: Option<Snapshot>,
    /// Entries after the last snapshot.
    pub unsnapshotted: u64,
}

/// Every tenant with a scheduler chain, by tenant id.
pub fn tenants(store: &Store) -> Result<Vec<TenantSummary>, StoreError> {
    let conn = store.conn();
    let mut stmt = conn.prepare(
        "SELECT tenant_id, head_chain_link, head_hlc, length FROM chain_heads ORDER BY tenant_id",
    )?;
    let heads = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)? as u64,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::with_capacity(heads.len());
    for (tenant, head, head_hlc, length) in heads {
        let last = conn
            .query_row(
                &format!("SELECT {SNAPSHOT_COLUMNS} FROM batch_snapshot WHERE tenant_id = ?1 ORDER BY from_seq DESC LIMIT 1"),
                params![tenant],
                row_snapshot,
            )
            .optional()?;
        let covered = last
            .as_ref()
            .map(|s| s.from_seq + s.entry_count)
            .unwrap_or(0);
        out.push(TenantSummary {
            tenant,
            head,
            head_hlc,
            length,
            unsnapshotted: length.saturating_sub(covered),
            last_snapshot: last,
        });
    }
    Ok(out)
}

/// Where an entry came from (ENQUEUE entries written by an import).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub import_id: i64,
    pub bundle_id: String,
    pub file_name: String,
    pub source_node: String,
    pub original_t_hlc: String,
    /// Base64 as in the bundle.
    pub original_link: String,
    pub original_prev_link: Option<String>,
    pub partition_key: Option<String>,
    pub enqueued_at: String,
}

/// One stored chain entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredEntry {
    pub seq: u64,
    pub t_hlc: String,
    pub job_id: String,
    pub action: String,
    pub prev_chain_link: Option<String>,
    pub chain_link: String,
    pub payload: String,
    pub created_at: String,
    pub provenance: Option<Provenance>,
}

/// Entries `from..from+limit` of a tenant chain, in chain order, with provenance.
pub fn chain_entries(
    store: &Store,
    tenant: &str,
    from: u64,
    limit: u64,
) -> Result<Vec<StoredEntry>, StoreError> {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine;
    let mut stmt = store.conn().prepare_cached(
        "SELECT l.seq, l.t_hlc, l.job_id, l.action, l.prev_chain_link, l.chain_link, l.payload, l.created_at,
                l.import_id, i.bundle_id, i.file_name, l.source_node, l.t_hlc, l.orig_link, l.orig_prev_link,
                l.partition_key, l.enqueued_at
         FROM scheduler_log l
         LEFT JOIN imports i ON i.id = l.import_id
         WHERE l.tenant_id = ?1 AND l.seq >= ?2
         ORDER BY l.seq LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![tenant, from as i64, limit.min(i64::MAX as u64) as i64],
        |r| {
            let import_id: Option<i64> = r.get(8)?;
            let provenance = match import_id {
                Some(import_id) => Some(Provenance {
                    import_id,
                    bundle_id: r.get::<_, Option<String>>(9)?.unwrap_or_default(),
                    file_name: r.get::<_, Option<String>>(10)?.unwrap_or_default(),
                    source_node: r.get(11)?,
                    original_t_hlc: r.get(12)?,
                    original_link: B64.encode(r.get::<_, Vec<u8>>(13)?),
                    original_prev_link: r.get::<_, Option<Vec<u8>>>(14)?.map(|b| B64.encode(b)),
                    partition_key: r.get(15)?,
                    enqueued_at: r.get(16)?,
                }),
                None => None,
            };
            Ok(StoredEntry {
                seq: r.get::<_, i64>(0)? as u64,
                t_hlc: r.get(1)?,
                job_id: r.get(2)?,
                action: r.get(3)?,
                prev_chain_link: r.get(4)?,
                chain_link: r.get(5)?,
                payload: r.get(6)?,
                created_at: r.get(7)?,
                provenance,
            })
        },
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The payloadHash of each of `ids` already in the tenant's chain. Loads the whole job table when
/// that is smaller than the question.
pub fn existing_jobs<'a>(
    conn: &Connection,
    tenant: &str,
    chain_length: u64,
    ids: impl ExactSizeIterator<Item = &'a [u8; 16]>,
) -> Result<JobMap<Digest32>, StoreError> {
    let mut out = JobMap::default();
    if chain_length == 0 {
        return Ok(out);
    }
    let to_digest = |v: Vec<u8>, id: &[u8]| -> Result<Digest32, StoreError> {
        Digest32::try_from(v.as_slice()).map_err(|_| StoreError::CorruptRow {
            table: "scheduler_jobs",
            position: format!("tenant {tenant:?} job {}", hex::encode(id)),
            detail: format!("payload_hash is {} bytes, not 32", v.len()),
        })
    };
    if chain_length <= ids.len() as u64 {
        let mut stmt = conn.prepare_cached(
            "SELECT job_id, payload_hash FROM scheduler_jobs WHERE tenant_id = ?1",
        )?;
        let mut rows = stmt.query(params![tenant])?;
        while let Some(r) = rows.next()? {
            let id = r.get_ref(0)?.as_blob().unwrap_or(&[]);
            let id = <[u8; 16]>::try_from(id).map_err(|_| StoreError::CorruptRow {
                table: "scheduler_jobs",
                position: format!("tenant {tenant:?} job {}", hex::encode(id)),
                detail: format!("job_id is {} bytes, not 16", id.len()),
            })?;
            out.insert(id, to_digest(r.get(1)?, &id)?);
        }
    } else {
        let mut stmt = conn.prepare_cached(
            "SELECT payload_hash FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2",
        )?;
        for id in ids {
            if let Some(h) = stmt
                .query_row(params![tenant, id.as_slice()], |r| r.get::<_, Vec<u8>>(0))
                .optional()?
            {
                out.insert(*id, to_digest(h, id)?);
            }
        }
    }
    Ok(out)
}
