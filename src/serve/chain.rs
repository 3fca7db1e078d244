//! `GET /api/v1/scheduler/chain/verify?tenantId=T[&requireSignature=true]` (seed hlc-ordering):
//! the object `airlock chain verify --json` prints, each snapshot's signature judged under serve's
//! trust store (its `--trusted-key` files included) and signature policy; 400 without tenantId or
//! with any other parameter, 404 for a tenant without a chain.

use super::error::ApiError;
use super::query::StrictQuery;
use super::state::{ServeOptions, ServeState};
use crate::core::chain::verify::{verify_existing_chain_trusting, ChainReport, SnapshotTrust};
use crate::core::store::scheduler::SchedulerError;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;

pub fn routes() -> Router<Arc<ServeState>> {
    Router::new().route("/api/v1/scheduler/chain/verify", get(verify))
}

/// The parameters the endpoint reads; any other is refused, so that a mistyped
/// `requireSignature` is not a verification that silently requires nothing.
const PARAMETERS: &[&str] = &["tenantId", "requireSignature"];

/// How serve judges snapshot signatures (the API and the periodic verification alike): its trust
/// set, and a signature required when its policy says so (`--require-signature`,
/// `trust.requireSignature`, `$AIRLOCK_REQUIRE_SIGNATURE`, the trust store's policy) or the
/// request `asked` for it. A request can add the requirement, never waive it.
pub fn snapshot_trust(options: &ServeOptions, asked: bool) -> SnapshotTrust<'_> {
    SnapshotTrust {
        trust: &options.trust,
        require_signature: options.require_signature || asked,
    }
}

async fn verify(
    State(state): State<Arc<ServeState>>,
    q: StrictQuery,
) -> Result<Json<ChainReport>, ApiError> {
    let (tenant, asked) = parameters(&q)?;
    let st = state.clone();
    let report = state
        .with_store(move |store| {
            let policy = snapshot_trust(&st.options, asked);
            verify_existing_chain_trusting(store, &tenant, None, policy).map_err(|e| match e {
                SchedulerError::NoChain(_) => ApiError::not_found(format!(
                    "tenant {} has no scheduler chain",
                    crate::text::visible(&tenant)
                )),
                other => ApiError::store(other),
            })
        })
        .await?;
    Ok(Json(report))
}

/// The tenant and whether the request requires signed snapshots (`requireSignature`: true or
/// false, default false).
fn parameters(q: &StrictQuery) -> Result<(String, bool), ApiError> {
    q.only(PARAMETERS)?;
    let tenant = q.get("tenantId").filter(|t| !t.is_empty()).ok_or_else(|| {
        ApiError::bad_request("the tenantId query parameter is required (?tenantId=T)")
    })?;
    Ok((tenant.to_string(), q.flag("requireSignature")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_signature_is_true_or_false_and_other_parameters_are_refused() {
        let p = |pairs: &[(&str, &str)]| parameters(&StrictQuery::of(pairs));
        assert_eq!(p(&[("tenantId", "acme")]).unwrap(), ("acme".into(), false));
        let asked = p(&[("tenantId", "acme"), ("requireSignature", "true")]).unwrap();
        assert_eq!(asked, ("acme".into(), true));
        let not = p(&[("tenantId", "acme"), ("requireSignature", "false")]).unwrap();
        assert_eq!(not, ("acme".into(), false));
        for bad in [
            &[("tenantId", "acme"), ("requireSignature", "yes")][..],
            &[("tenantId", "acme"), ("require_signature", "true")][..],
            &[("requireSignature", "true")][..],
        ] {
            let e = p(bad).unwrap_err();
            assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST, "{bad:?}");
        }
        let e = p(&[("tenantId", "acme"), ("x\u{1b}[31m", "1")]).unwrap_err();
        assert_eq!(e.code, "unknown-parameter");
        assert!(!e.message.chars().any(crate::text::needs_escape), "{e:?}");
    }
}
