//! Operations endpoints: `/metrics` (Prometheus text format from the store's persisted counters),
//! `/healthz` (the process answers) and `/readyz` (the store opens and the start-up chain
//! verification has finished; failing tenants are listed).

use super::error::ApiError;
use super::state::ServeState;
use crate::core::metrics::exposition::CONTENT_TYPE;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;

pub fn routes() -> Router<Arc<ServeState>> {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn metrics(State(state): State<Arc<ServeState>>) -> Result<impl IntoResponse, ApiError> {
    let skew = state.options.max_clock_skew;
    // Known once the start-up verification ran (before that the gauge is left out).
    let failing = state.is_ready().then(|| {
        state
            .failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    });
    let text = state
        .with_store(move |store| {
            crate::core::service::metrics_text(store, Some(skew), failing).map_err(ApiError::store)
        })
        .await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn readyz(State(state): State<Arc<ServeState>>) -> Result<impl IntoResponse, ApiError> {
    if !state.is_ready() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting",
            "the start-up chain verification is still running",
        ));
    }
    state.with_store(|_| Ok(())).await?;
    let failing = state
        .failing
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Json(serde_json::json!({
        "status": "ready",
        "failingTenants": failing,
    })))
}
