//! Batch snapshots: the stored rows and their signed statements (taken by
//! [`crate::core::store::rules::snapshot_now`] and the appender).

use super::SNAPSHOT_PAYLOAD_TYPE;
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

/// A `batch_snapshot` row as a store read it, before its fields are checked: the positions as
/// stored (they may be negative), the envelope as stored text. Both stores decode their rows into
/// this and check them with [`RawSnapshot::check`].
#[derive(Debug, Clone)]
pub struct RawSnapshot {
    pub id: i64,
    pub tenant_id: String,
    pub snapshot_hlc: String,
    pub from_chain_link: String,
    pub to_chain_link: String,
    pub from_seq: i64,
    pub entry_count: i64,
    pub merkle_root: String,
    pub dsse_envelope: Option<String>,
    pub created_at: String,
}

/// A `batch_snapshot` row that does not read as a snapshot: which row, which column, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedSnapshot {
    pub id: i64,
    pub tenant_id: String,
    /// The damaged column, as named in the store's table.
    pub column: &'static str,
    /// What is wrong with it ("is -5 (...)", "is not JSON (...)"), without the stored text.
    pub why: String,
    /// What the column must hold, and what it holds (clipped), for a finding.
    pub expected: &'static str,
    pub actual: String,
    /// The rest of the row when only its `dsse_envelope` is damaged (its envelope `None` there:
    /// it must never be taken for an unsigned snapshot, that would downgrade a signed one); `None`
    /// when a position is damaged (the row covers nothing known).
    pub rest: Option<Box<Snapshot>>,
}

/// One `batch_snapshot` row: a snapshot, or the damage that keeps it from being one.
pub type SnapshotRow = Result<Snapshot, DamagedSnapshot>;

impl DamagedSnapshot {
    /// `batch_snapshot row 3 of tenant "acme": dsse_envelope is not JSON (...)`.
    pub fn describe(&self) -> String {
        format!(
            "batch_snapshot row {} of tenant {}: {} {}",
            self.id,
            crate::core::verify::finding::quoted(&self.tenant_id),
            self.column,
            self.why
        )
    }

    /// The error of a command that needs this row: names it and how to see and repair it.
    pub fn into_error(self) -> super::StoreError {
        super::StoreError::SnapshotDamaged {
            detail: self.describe(),
            tenant: self.tenant_id,
        }
    }
}

impl RawSnapshot {
    /// The snapshot, or its first damaged column: a negative `from_seq`, an `entry_count` below 1
    /// or ending past the largest position, an envelope that is not JSON (damage, never
    /// "unsigned").
    pub fn check(self) -> SnapshotRow {
        let damaged = |column, why: String, expected, actual: String, rest| DamagedSnapshot {
            id: self.id,
            tenant_id: self.tenant_id.clone(),
            column,
            why,
            expected,
            actual,
            rest,
        };
        if self.from_seq < 0 {
            let why = format!("is {}: a chain position is 0 or more", self.from_seq);
            let want = "a chain position (0 or more)";
            return Err(damaged(
                "from_seq",
                why,
                want,
                self.from_seq.to_string(),
                None,
            ));
        }
        if self.entry_count < 1 || self.from_seq.checked_add(self.entry_count).is_none() {
            let why = format!(
                "is {} (from_seq {}): a snapshot covers 1 or more positions",
                self.entry_count, self.from_seq
            );
            let want = "a count of 1 or more";
            let n = self.entry_count.to_string();
            return Err(damaged("entry_count", why, want, n, None));
        }
        let parsed = self.dsse_envelope.as_deref().map(serde_json::from_str);
        let s = Snapshot {
            id: self.id,
            tenant_id: self.tenant_id.clone(),
            snapshot_hlc: self.snapshot_hlc.clone(),
            from_chain_link: self.from_chain_link.clone(),
            to_chain_link: self.to_chain_link.clone(),
            from_seq: self.from_seq as u64,
            entry_count: self.entry_count as u64,
            merkle_root: self.merkle_root.clone(),
            dsse_envelope: None,
            created_at: self.created_at.clone(),
        };
        match parsed {
            None => Ok(s),
            Some(Ok(env)) => Ok(Snapshot {
                dsse_envelope: Some(env),
                ..s
            }),
            Some(Err(e)) => {
                let why = format!("is not JSON ({e}), so its signature cannot be checked");
                let text = self.dsse_envelope.as_deref().unwrap_or_default();
                let actual = crate::core::verify::finding::clip(text).into_owned();
                let want = "a DSSE envelope (JSON)";
                Err(damaged(
                    "dsse_envelope",
                    why,
                    want,
                    actual,
                    Some(Box::new(s)),
                ))
            }
        }
    }
}

/// Splits rows into the snapshots whose positions read (a damaged envelope's row included, with
/// no envelope) and the damaged rows.
pub fn split_snapshot_rows(rows: Vec<SnapshotRow>) -> (Vec<Snapshot>, Vec<DamagedSnapshot>) {
    let mut snaps = Vec::with_capacity(rows.len());
    let mut damaged = Vec::new();
    for r in rows {
        match r {
            Ok(s) => snaps.push(s),
            Err(d) => {
                snaps.extend(d.rest.as_deref().cloned());
                damaged.push(d);
            }
        }
    }
    (snaps, damaged)
}

/// The snapshot covering chain position `seq`: `None` when none does; the damaged row when the
/// covering row's envelope does not read (a proof would lose its signature), or when a row whose
/// positions do not read may be the one covering it.
pub fn covering(rows: Vec<SnapshotRow>, seq: u64) -> Result<Option<Snapshot>, DamagedSnapshot> {
    let mut unplaced = None;
    for r in rows {
        match r {
            Ok(s) if s.covers(seq) => return Ok(Some(s)),
            Ok(_) => {}
            Err(d) => match d.rest.as_deref() {
                Some(s) if s.covers(seq) => return Err(d),
                Some(_) => {}
                None => unplaced = unplaced.or(Some(d)),
            },
        }
    }
    unplaced.map_or(Ok(None), Err)
}

/// The snapshots of `rows` with their signature verdicts against `trust` (a list to show): a row
/// whose envelope does not read is listed with an invalid verdict naming the damage (never as
/// unsigned, which would downgrade a signed snapshot); the rows whose positions do not read cover
/// nothing known and are returned apart, to be named.
pub fn checked_snapshot_rows(
    rows: Vec<SnapshotRow>,
    trust: &crate::core::trust::TrustSet,
) -> (
    Vec<(Snapshot, crate::core::trust::SignatureCheck)>,
    Vec<DamagedSnapshot>,
) {
    let mut listed = Vec::with_capacity(rows.len());
    let mut unplaced = Vec::new();
    for r in rows {
        match r {
            Ok(s) => {
                let check = check_snapshot_signature(&s, trust);
                listed.push((s, check));
            }
            Err(d) => match d.rest.as_deref().cloned() {
                Some(s) => {
                    let reason = d.describe();
                    let check = crate::core::trust::SignatureCheck::Invalid {
                        key_id: String::new(),
                        reason,
                    };
                    listed.push((s, check));
                }
                None => unplaced.push(d),
            },
        }
    }
    (listed, unplaced)
}

/// Checks a snapshot's DSSE envelope: its statement must be this snapshot's, its signature by a
/// trusted key. `Absent` when the snapshot is unsigned (it has no envelope); an envelope that is
/// malformed, `"signatures": []` included ([`DsseEnvelope::from_signed_json`]), is `Invalid`.
/// Every surface checks snapshot signatures with this one function: `chain verify-proof`
/// ([`super::check_proof`]), `chain verify` and the console.
///
/// [`DsseEnvelope::from_signed_json`]: crate::core::trust::DsseEnvelope::from_signed_json
pub fn check_snapshot_signature(
    s: &Snapshot,
    trust: &crate::core::trust::TrustSet,
) -> crate::core::trust::SignatureCheck {
    use crate::core::trust::{DsseEnvelope, SignatureCheck};
    let Some(env) = &s.dsse_envelope else {
        return SignatureCheck::Absent;
    };
    let env = match DsseEnvelope::from_signed_json(env) {
        Ok(e) => e,
        Err(reason) => {
            return SignatureCheck::Invalid {
                key_id: String::new(),
                reason,
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
