//! The checks of the bundle as a whole, made once the reader is done: schema problems the reader
//! found outside entries, the header fields, the order of the logs, the manifest digest and the
//! signature.

use super::finding::{clip, quoted, Check, Finding, FindingKind};
use super::options::VerifyOptions;
use super::report::{CheckState, Checks, SignatureState};
use crate::core::bundle::{BundleHeader, ReadSummary};
use crate::core::hlc::validate_node_id;
use crate::core::ids::parse_job_id;
use crate::core::trust::{check_bundle_signature, SignatureCheck, TrustSet};

/// Bundle-level findings in report order (reader problems, header, log order, manifest digest).
pub(super) fn bundle_findings(summary: &ReadSummary) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let outside_entries = summary.problems.iter().filter(|p| p.index.is_none());
    for p in outside_entries.clone().filter(|p| p.log.is_none()) {
        out.push(Finding::new(
            FindingKind::SchemaInvalid,
            format!("{}: {}", p.path, p.message),
        ));
    }
    for p in outside_entries.filter(|p| p.log.is_some()) {
        let node = p
            .log
            .and_then(|l| summary.logs.get(l))
            .and_then(|l| l.node_id.as_deref());
        out.push(
            Finding::new(
                FindingKind::SchemaInvalid,
                format!("{}: {}", p.path, p.message),
            )
            .at(p.log, node, None),
        );
    }
    header_findings(summary, &mut out);
    // jobLogs sorted by nodeId, no duplicates.
    for (i, pair) in summary.logs.windows(2).enumerate() {
        if let (Some(a), Some(b)) = (&pair[0].node_id, &pair[1].node_id) {
            if a >= b {
                out.push(
                    Finding::new(
                        FindingKind::SchemaInvalid,
                        format!(
                            "$.jobLogs[{}]: logs must be sorted by nodeId without repeats, but {} follows {}",
                            i + 1,
                            quoted(b),
                            quoted(a)
                        ),
                    )
                    .at(Some(i + 1), Some(b), None),
                );
            }
        }
    }
    let h = &summary.header;
    if !h.manifest_digest.is_empty() && h.manifest_digest != summary.computed_manifest_digest {
        out.push(
            Finding::new(
                FindingKind::ManifestMismatch,
                "the manifestDigest does not match the job logs: the logs or the digest were changed after export",
            )
            .values(Some(summary.computed_manifest_digest.clone()), Some(h.manifest_digest.clone())),
        );
    }
    out
}

/// The header's values (their presence and type are the reader's problems).
fn header_findings(summary: &ReadSummary, out: &mut Vec<Finding>) {
    let h = &summary.header;
    let mut require = |field: &str, value: &str, ok: bool, what: &str| {
        if !value.is_empty() && !ok {
            out.push(Finding::new(
                FindingKind::SchemaInvalid,
                format!("$.{field}: {} is not {what}", quoted(value)),
            ));
        }
    };
    require(
        "bundleId",
        &h.bundle_id,
        parse_job_id(&h.bundle_id).is_ok(),
        "a lowercase hyphenated UUID",
    );
    require(
        "createdAt",
        &h.created_at,
        crate::core::time::parse_rfc3339_ms(&h.created_at).is_some(),
        "an RFC 3339 timestamp",
    );
    require(
        "createdByNodeId",
        &h.created_by_node_id,
        validate_node_id(&h.created_by_node_id).is_ok(),
        "a node id (1 to 128 characters of [A-Za-z0-9._-])",
    );
    let digest_ok = h
        .manifest_digest
        .strip_prefix("sha256:")
        .map(|x| x.len() == 64 && x.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .unwrap_or(false);
    require(
        "manifestDigest",
        &h.manifest_digest,
        digest_ok,
        "sha256: followed by 64 lowercase hex digits",
    );
    if summary.problems.iter().all(|p| p.path != "$.tenantId") && h.tenant_id.is_empty() {
        out.push(Finding::new(
            FindingKind::SchemaInvalid,
            "$.tenantId: must not be empty",
        ));
    } else if let (false, Err(e)) = (
        h.tenant_id.is_empty(),
        crate::core::tenant::validate_tenant_id(&h.tenant_id),
    ) {
        out.push(Finding::new(
            FindingKind::SchemaInvalid,
            format!("$.tenantId: {e}"),
        ));
    }
}

/// The signature check: its state, its finding if any, and the check itself (for the signer).
pub(super) fn signature(
    h: &BundleHeader,
    opts: &VerifyOptions<'_>,
) -> (SignatureState, Option<Finding>, SignatureCheck) {
    let empty = TrustSet::empty();
    let sig = check_bundle_signature(h, opts.trust.unwrap_or(&empty));
    let (state, finding) = match &sig {
        SignatureCheck::Absent => (
            SignatureState::Absent,
            opts.require_signature.then(|| {
                Finding::new(
                    FindingKind::SignatureMissing,
                    "the bundle is not signed, and this verification requires a signature",
                )
            }),
        ),
        SignatureCheck::Valid { .. } => (SignatureState::Pass, None),
        SignatureCheck::Invalid { key_id, reason } => (
            SignatureState::Fail,
            Some(
                Finding::new(
                    FindingKind::SignatureInvalid,
                    format!("the signature does not verify for the bundle's statement: {reason}"),
                )
                .values(
                    Some(format!("a valid signature by {}", clip(key_id))),
                    h.signature.clone(),
                ),
            ),
        ),
        SignatureCheck::Untrusted { key_id } => (
            SignatureState::Untrusted,
            Some(
                Finding::new(
                    FindingKind::SignerUntrusted,
                    format!(
                        "the bundle is signed by key {}, which is not in the trust store",
                        clip(key_id)
                    ),
                )
                .values(Some("a trusted key id".into()), Some(key_id.clone())),
            ),
        ),
    };
    (state, finding, sig)
}

/// The report's checks: each content check fails when any finding fails it (`fails`).
pub(super) fn checks(fails: impl Fn(Check) -> bool, signature: SignatureState) -> Checks {
    let state = |c: Check| {
        if fails(c) {
            CheckState::Fail
        } else {
            CheckState::Pass
        }
    };
    Checks {
        schema: state(Check::Schema),
        manifest_digest: state(Check::ManifestDigest),
        chain: state(Check::Chain),
        links: state(Check::Links),
        chain_head: state(Check::ChainHead),
        signature,
    }
}
