//! `GET /v1/exports/airgap/evidence/{exportId}/download` (SPEC section 10's `artifact_uri`): the
//! recorded portable export, after checking the file is still the recorded artifact; 404 until an
//! export with that id is recorded in the store ([`crate::core::exports`]).

use super::error::ApiError;
use super::state::ServeState;
use crate::core::exports::{self, ExportLookupError};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

pub fn routes() -> Router<Arc<ServeState>> {
    Router::new().route(
        "/v1/exports/airgap/evidence/{export_id}/download",
        get(download),
    )
}

async fn download(
    State(state): State<Arc<ServeState>>,
    Path(export_id): Path<String>,
) -> Result<Response, ApiError> {
    let (rec, file) = state
        .with_store(move |store| {
            exports::open_export(store, &export_id).map_err(|e| match e {
                ExportLookupError::BadId(_) => ApiError::bad_request(e.to_string()),
                ExportLookupError::NotFound(_) => ApiError::not_found(e.to_string()),
                ExportLookupError::Store(e) => ApiError::store(e),
                other => ApiError::new(StatusCode::CONFLICT, "artifact-changed", other.to_string()),
            })
        })
        .await?;
    let stream = tokio_stream_of(file);
    Ok((
        [
            (header::CONTENT_TYPE, "application/gzip".to_string()),
            (header::CONTENT_LENGTH, rec.size_bytes.to_string()),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"export-portable-bundle-v1.tgz\"".to_string(),
            ),
            (
                header::HeaderName::from_static("x-artifact-sha256"),
                rec.artifact_sha256.clone(),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// The file as a stream of chunks read on the blocking pool.
fn tokio_stream_of(
    file: std::fs::File,
) -> impl futures_util::Stream<Item = Result<axum::body::Bytes, std::io::Error>> {
    let file = tokio::fs::File::from_std(file);
    futures_util::stream::unfold(file, |mut f| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 64 * 1024];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(axum::body::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    })
}
