//! Verifying a stored chain and its snapshots ([`verify_chain`]).

use super::read::chain_head;
use super::snapshots::{load_snapshots, Snapshot};
use super::{hex32, unhex32, SchedulerError};
use crate::core::chain::{scheduler_chain_link, sha256, Action, Digest32};
use crate::core::hlc::Hlc;
use crate::core::merkle::{self, RootBuilder};
use crate::core::store::Store;
use crate::core::verify::{
    ChainDiagnosis, ChainEntry, Finding, FindingKind, HeadClaim, LinkText, Prev,
};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The result of checking one stored snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotCheck {
    pub id: i64,
    pub from_seq: u64,
    pub entry_count: u64,
    pub ok: bool,
    pub expected_root: String,
    pub computed_root: String,
    pub message: Option<String>,
}

/// `chain verify`: every link, the stored head, every snapshot root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainReport {
    pub tenant_id: String,
    pub ok: bool,
    pub length: u64,
    pub stored_length: Option<u64>,
    pub head: Option<String>,
    pub findings: Vec<Finding>,
    pub snapshots: Vec<SnapshotCheck>,
}

/// Recomputes every link of a tenant chain and its head (findings of SPEC section 6, positions are
/// chain positions) and every snapshot's Merkle root. `progress` counts entries checked.
///
/// The scheduler chain is in append order; HLC order is not checked across it because a later
/// import may carry earlier offline timestamps.
pub fn verify_chain(
    store: &Store,
    tenant: &str,
    progress: Option<Arc<AtomicU64>>,
) -> Result<ChainReport, SchedulerError> {
    let conn = store.conn();
    let head = chain_head(conn, tenant)?;
    let snaps = load_snapshots(conn, tenant)?;
    let mut diag = ChainDiagnosis::new(None, None, LinkText::Hex);
    let mut findings: Vec<Finding> = Vec::new();
    let mut snap_idx = 0usize;
    let mut builder: Option<(RootBuilder, String)> = None; // (root so far, problem)
    let mut snap_checks = Vec::with_capacity(snaps.len());
    let mut stmt = conn.prepare(
        "SELECT seq, t_hlc, job_id, action, prev_chain_link, chain_link, payload FROM scheduler_log
         WHERE tenant_id = ?1 ORDER BY seq",
    )?;
    let mut job_hash = conn
        .prepare("SELECT payload_hash FROM scheduler_jobs WHERE tenant_id = ?1 AND job_id = ?2")?;
    let mut rows = stmt.query(params![tenant])?;
    let mut n: u64 = 0;
    let decode = unhex32;
    let mut digest_buf = [0u8; 64];
    let mut last_link_text = String::new();
    let mut last_link: Option<Digest32> = None;
    let schema = |i: u64, job: Option<&str>, msg: String| {
        Finding::new(
            FindingKind::SchemaInvalid,
            format!("chain entry {i}: {msg}"),
        )
        .at(None, None, Some(i))
        .job(job.map(str::to_string))
    };
    while let Some(r) = rows.next()? {
        let i = n;
        let t_hlc = r.get_ref(1)?.as_str().unwrap_or("");
        let job_id = r.get_ref(2)?.as_str().unwrap_or("");
        let action = r.get_ref(3)?.as_str().unwrap_or("");
        let prev_text = r.get_ref(4)?.as_str_or_null().unwrap_or(None);
        let link_text = r.get_ref(5)?.as_str().unwrap_or("");
        let payload = r.get_ref(6)?.as_str().unwrap_or("");
        let job = uuid::Uuid::parse_str(job_id).ok();
        if job.is_none() {
            findings.push(schema(i, None, format!("jobId {job_id:?} is not a UUID")));
        }
        if Hlc::parse(t_hlc).is_err() {
            findings.push(schema(
                i,
                Some(job_id),
                format!("tHlc {t_hlc:?} is not an HLC timestamp"),
            ));
        }
        let act = action
            .parse::<Action>()
            .ok()
            .filter(|a| a.as_str() == action);
        if act.is_none() {
            findings.push(schema(
                i,
                Some(job_id),
                format!(
                    "action {action:?} is not one of ENQUEUE, DEQUEUE, EXECUTE, COMPLETE, FAIL"
                ),
            ));
        }
        let link = decode(link_text);
        if link.is_none() {
            findings.push(schema(
                i,
                Some(job_id),
                format!("chainLink {link_text:?} is not 64 lowercase hex digits"),
            ));
        }
        let prev = match prev_text {
            None => Prev::Genesis,
            // The usual case: the previous row's link, already decoded.
            Some(p) if p == last_link_text && last_link.is_some() => {
                Prev::Link(last_link.expect("checked"))
            }
            Some(p) => match decode(p) {
                Some(d) => Prev::Link(d),
                None => {
                    findings.push(schema(
                        i,
                        Some(job_id),
                        format!("prevChainLink {p:?} is not 64 lowercase hex digits"),
                    ));
                    Prev::Unknown
                }
            },
        };
        let recomputed = match (act, &prev) {
            (Some(a), Prev::Genesis | Prev::Link(_)) => {
                let digest = hex32(&sha256(payload.as_bytes()), &mut digest_buf);
                let l = scheduler_chain_link(t_hlc, job_id, a, prev_text, digest);
                let mut d = if l == link_text { link } else { decode(&l) };
                if d != link && link.is_some() {
                    // Does the link hold with the payloadHash recorded at enqueue? Then only the payload changed.
                    let recorded: Option<Vec<u8>> = job_hash
                        .query_row(
                            params![
                                tenant,
                                job.map(|u| u.into_bytes().to_vec()).unwrap_or_default()
                            ],
                            |r| r.get(0),
                        )
                        .optional()?;
                    if let Some(h) = recorded {
                        let l2 =
                            scheduler_chain_link(t_hlc, job_id, a, prev_text, &hex::encode(&h));
                        if decode(&l2) == link {
                            findings.push(
                                Finding::new(
                                    FindingKind::PayloadModified,
                                    format!("chain entry {i}'s payload was changed after it was written: its SHA-256 no longer matches the digest its link was computed with"),
                                )
                                .at(None, None, Some(i))
                                .job(Some(job_id.to_string()))
                                .values(Some(hex::encode(&h)), Some(digest.to_string())),
                            );
                            d = link;
                        }
                    }
                }
                d
            }
            _ => None,
        };
        if let Some(f) = diag.push(
            ChainEntry {
                link,
                prev,
                recomputed,
                hlc: None,
                job_id: job.map(|u| *u.as_bytes()),
            },
            Some(t_hlc),
        ) {
            findings.push(f);
        }
        // The snapshot covering this position (snapshots are disjoint and in chain order).
        if let Some(s) = snaps.get(snap_idx) {
            if s.covers(i) {
                let (b, problem) =
                    builder.get_or_insert_with(|| (RootBuilder::default(), String::new()));
                if i == s.from_seq && link_text != s.from_chain_link && problem.is_empty() {
                    *problem = format!(
                        "fromChainLink {} is not the link of entry {i} ({link_text})",
                        s.from_chain_link
                    );
                }
                if i == s.from_seq + s.entry_count - 1
                    && link_text != s.to_chain_link
                    && problem.is_empty()
                {
                    *problem = format!(
                        "toChainLink {} is not the link of entry {i} ({link_text})",
                        s.to_chain_link
                    );
                }
                b.push(merkle::leaf_hash(&link.unwrap_or_default()));
                if i == s.from_seq + s.entry_count - 1 {
                    let (b, problem) = builder.take().expect("set above");
                    snap_checks.push(check_snapshot(s, &b, problem));
                    snap_idx += 1;
                }
            }
        }
        last_link_text.clear();
        last_link_text.push_str(link_text);
        last_link = link;
        n += 1;
        if let Some(p) = &progress {
            if n.is_multiple_of(4096) {
                p.store(n, Ordering::Relaxed);
            }
        }
    }
    if let Some(p) = &progress {
        p.store(n, Ordering::Relaxed);
    }
    // Snapshots reaching past the end of the chain.
    if let Some((b, problem)) = builder.take() {
        let s = &snaps[snap_idx];
        let problem = if problem.is_empty() {
            format!(
                "the snapshot covers entries {}..{} but the chain has only {n}",
                s.from_seq,
                s.from_seq + s.entry_count
            )
        } else {
            problem
        };
        snap_checks.push(check_snapshot(s, &b, problem));
        snap_idx += 1;
    }
    for s in snaps.iter().skip(snap_idx) {
        if snap_checks.iter().any(|c| c.id == s.id) {
            continue;
        }
        snap_checks.push(SnapshotCheck {
            id: s.id,
            from_seq: s.from_seq,
            entry_count: s.entry_count,
            ok: false,
            expected_root: s.merkle_root.clone(),
            computed_root: String::new(),
            message: Some(format!("the snapshot of entries {}..{} could not be checked: it overlaps an earlier snapshot or reaches past the end of the chain ({n} entries)", s.from_seq, s.from_seq + s.entry_count)),
        });
    }
    // The head's HLC is compared as text below (chain entries carry no HLC order here).
    let claim = head.as_ref().map(|h| HeadClaim {
        head: decode(&h.head_chain_link),
        last_hlc: None,
    });
    if head.is_some() && n == 0 {
        findings.push(
            Finding::new(
                FindingKind::TailTruncated,
                "the chain head is stored but the chain has no entries: every entry was removed",
            )
            .values(head.as_ref().map(|h| h.head_chain_link.clone()), None),
        );
    }
    findings.extend(diag.finish(claim));
    if let Some(h) = &head {
        if n > 0 && h.length != n {
            // Deleted or truncated entries already explain a wrong length.
            let already = !findings.is_empty();
            if !already {
                findings.push(
                    Finding::new(
                        FindingKind::HeadMismatch,
                        format!(
                            "the stored chain length is {} but the chain has {n} entries",
                            h.length
                        ),
                    )
                    .at(None, None, Some(n - 1))
                    .values(Some(n.to_string()), Some(h.length.to_string())),
                );
            }
        }
        if n > 0 {
            let last_hlc: Option<String> = conn
                .query_row(
                    "SELECT t_hlc FROM scheduler_log WHERE tenant_id = ?1 ORDER BY seq DESC LIMIT 1",
                    params![tenant],
                    |r| r.get(0),
                )
                .optional()?;
            let already = findings.iter().any(|f| {
                matches!(
                    f.kind,
                    FindingKind::TailTruncated | FindingKind::HeadMismatch
                )
            });
            if last_hlc.as_deref() != Some(h.head_hlc.as_str()) && !already {
                findings.push(
                    Finding::new(
                        FindingKind::HeadMismatch,
                        format!(
                            "the stored head HLC does not match the last entry ({})",
                            n - 1
                        ),
                    )
                    .at(None, None, Some(n - 1))
                    .values(last_hlc, Some(h.head_hlc.clone())),
                );
            }
        }
    } else if n > 0 {
        findings.push(
            Finding::new(
                FindingKind::TailTruncated,
                "the chain has entries but no stored head",
            )
            .at(None, None, Some(n - 1)),
        );
    }
    findings.sort_by_key(|f| (f.index.unwrap_or(u64::MAX), f.kind));
    let ok = findings.is_empty() && snap_checks.iter().all(|c| c.ok);
    if head.is_some() || n > 0 {
        crate::core::metrics::record_quietly(
            conn,
            &[crate::core::metrics::Event::ChainVerified { ok }],
        );
    }
    Ok(ChainReport {
        tenant_id: tenant.to_string(),
        ok,
        length: n,
        stored_length: head.as_ref().map(|h| h.length),
        head: head.map(|h| h.head_chain_link),
        findings,
        snapshots: snap_checks,
    })
}

fn check_snapshot(s: &Snapshot, b: &RootBuilder, problem: String) -> SnapshotCheck {
    let computed = hex::encode(b.finish());
    let mut message = (!problem.is_empty()).then_some(problem);
    if message.is_none() {
        if let Some(env) = &s.dsse_envelope {
            let signed = serde_json::from_value::<crate::core::trust::DsseEnvelope>(env.clone())
                .ok()
                .and_then(|e| e.statement().ok());
            if signed.as_deref() != Some(s.statement().as_str()) {
                message = Some("the DSSE envelope does not sign this snapshot's statement".into());
            }
        }
    }
    if message.is_none() && computed != s.merkle_root {
        message = Some(format!(
            "the Merkle root of entries {}..{} is {computed}, not the stored {}",
            s.from_seq,
            s.from_seq + s.entry_count,
            s.merkle_root
        ));
    }
    SnapshotCheck {
        id: s.id,
        from_seq: s.from_seq,
        entry_count: s.entry_count,
        ok: message.is_none(),
        expected_root: s.merkle_root.clone(),
        computed_root: computed,
        message,
    }
}
