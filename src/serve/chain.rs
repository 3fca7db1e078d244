//! `GET /api/v1/scheduler/chain/verify?tenantId=T` (seed hlc-ordering): the object
//! `airlock chain verify --json` prints; 400 without tenantId, 404 for a tenant without a chain.

use super::error::ApiError;
use super::query::StrictQuery;
use super::state::ServeState;
use crate::core::chain::verify::{verify_existing_chain, ChainReport};
use crate::core::store::scheduler::SchedulerError;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;

pub fn routes() -> Router<Arc<ServeState>> {
    Router::new().route("/api/v1/scheduler/chain/verify", get(verify))
}

async fn verify(
    State(state): State<Arc<ServeState>>,
    StrictQuery(q): StrictQuery,
) -> Result<Json<ChainReport>, ApiError> {
    let tenant = q
        .get("tenantId")
        .filter(|t| !t.is_empty())
        .cloned()
        .ok_or_else(|| {
            ApiError::bad_request("the tenantId query parameter is required (?tenantId=T)")
        })?;
    let report = state
        .with_store(move |store| {
            verify_existing_chain(store, &tenant, None).map_err(|e| match e {
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
