//! Writing chain rows with `COPY ... FROM STDIN BINARY` (inside the caller's transaction, so an
//! import stays all or nothing).

use super::PgError;
use crate::core::chain::Digest32;
use crate::core::store::backend::RowBatch;
use crate::core::store::StoreError;
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};

/// Canonical JSON text sent as a `JSONB` value (binary format: version byte 1, then the text); the
/// server parses it into its own form, the text itself is stored beside it.
#[derive(Debug)]
struct JsonbText<'a>(&'a str);

impl ToSql for JsonbText<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&[1]);
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }
    to_sql_checked!();
}

fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| PgError::Server(format!("{v} is beyond BIGINT")).into())
}

/// Writes `rows` to `scheduler.scheduler_log` (the seed's columns; ids reserved from its sequence
/// first) and `airlock.chain_entry` (position, canonical text, provenance).
pub fn write_rows(
    client: &mut postgres::Client,
    tenant: &str,
    rows: &RowBatch,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let n = i64_of(rows.len() as u64)?;
    let ids: Vec<i64> = client
        .query(
            "SELECT nextval('scheduler.scheduler_log_id_seq') FROM generate_series(1, $1::bigint)",
            &[&n],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let sink = client.copy_in(
        "COPY scheduler.scheduler_log (id, t_hlc, job_id, action, prev_chain_link, chain_link, payload, tenant_id)
         FROM STDIN BINARY",
    )?;
    let mut w = BinaryCopyInWriter::new(
        sink,
        &[
            Type::INT8,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::JSONB,
            Type::TEXT,
        ],
    );
    for (r, id) in rows.iter().zip(&ids) {
        w.write(&[
            id as &(dyn ToSql + Sync),
            &r.t_hlc,
            &r.job_id,
            &r.action.as_str(),
            &r.prev_chain_link,
            &r.chain_link,
            &JsonbText(r.payload),
            &tenant,
        ])?;
    }
    w.finish()?;
    let sink = client.copy_in(
        "COPY airlock.chain_entry (tenant_id, seq, log_id, payload_text, import_id, source_node, orig_link,
                                   orig_prev_link, partition_key, enqueued_at)
         FROM STDIN BINARY",
    )?;
    let mut w = BinaryCopyInWriter::new(
        sink,
        &[
            Type::TEXT,
            Type::INT8,
            Type::INT8,
            Type::TEXT,
            Type::INT8,
            Type::TEXT,
            Type::BYTEA,
            Type::BYTEA,
            Type::TEXT,
            Type::TEXT,
        ],
    );
    for (r, id) in rows.iter().zip(&ids) {
        let v = r.provenance.as_ref();
        w.write(&[
            &tenant as &(dyn ToSql + Sync),
            &i64_of(r.seq)?,
            id,
            &r.payload,
            &v.map(|v| v.import_id),
            &v.map(|v| v.source_node),
            &v.map(|v| v.orig_link.as_slice()),
            &v.and_then(|v| v.orig_prev_link.map(|l| l.as_slice())),
            &v.and_then(|v| v.partition_key),
            &v.map(|v| v.enqueued_at),
        ])?;
    }
    w.finish()?;
    Ok(())
}

/// Writes jobs' ENQUEUE rows to `airlock.chain_jobs`.
pub fn write_jobs(
    client: &mut postgres::Client,
    tenant: &str,
    jobs: &[([u8; 16], Digest32, u64)],
) -> Result<(), StoreError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sink = client.copy_in(
        "COPY airlock.chain_jobs (tenant_id, job_id, payload_hash, enqueue_seq, state, last_seq) FROM STDIN BINARY",
    )?;
    let mut w = BinaryCopyInWriter::new(
        sink,
        &[
            Type::TEXT,
            Type::BYTEA,
            Type::BYTEA,
            Type::INT8,
            Type::TEXT,
            Type::INT8,
        ],
    );
    for (id, hash, seq) in jobs {
        let seq = i64_of(*seq)?;
        w.write(&[
            &tenant as &(dyn ToSql + Sync),
            &id.as_slice(),
            &hash.as_slice(),
            &seq,
            &"ENQUEUE",
            &seq,
        ])?;
    }
    w.finish()?;
    Ok(())
}
