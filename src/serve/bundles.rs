//! `POST /api/v1/airgap/bundles` (the connected transport, seed job-sync-offline's router-based
//! transport): the body is one bundle. It is streamed to a spool file (a declared length over the
//! limit gets 413 before any byte is read; a stream that runs past it gets 413 too), then verified
//! and imported by the same engine call as `airlock jobs import`, with the same report JSON,
//! refusal rules and trust policy. The upload is never held whole in memory (one chunk at a time
//! goes to the spool file), so it takes no share of the JSON bodies' memory budget
//! (`--max-body-memory-mib`); imports run one at a time.
//!
//! Query: `file` (the name the report and the store give the bundle; default `upload.json`),
//! `force`, `dryRun`, `verifyOnly` (`true`/`false`, as the CLI flags). Answers: 200 with the report
//! (imported, nothing to do, planned, verified), 422 with the report when refused, 400 when the body
//! is not an importable bundle, 413 over the limit.

use super::body::{refuse_declared, BodyReader};
use super::error::ApiError;
use super::query::StrictQuery;
use super::spool::Spool;
use super::state::ServeState;
use crate::core::import::{self, ImportOptions, ImportReport, ImportStatus};
use crate::core::store::scheduler::SnapshotSigner;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

pub fn routes(state: &ServeState) -> Router<Arc<ServeState>> {
    let limit = usize::try_from(state.options.max_bundle_bytes).unwrap_or(usize::MAX);
    Router::new()
        .route("/api/v1/airgap/bundles", post(push))
        .layer(DefaultBodyLimit::max(limit))
}

/// How the import runs, from the query.
#[derive(Debug, Clone, Default)]
struct Mode {
    name: String,
    force: bool,
    dry_run: bool,
    verify_only: bool,
}

/// The parameters the upload reads; any other is refused (a mistyped `dryRun` must not import).
const PARAMETERS: &[&str] = &["file", "force", "dryRun", "verifyOnly"];

fn mode(q: &StrictQuery) -> Result<Mode, ApiError> {
    q.only(PARAMETERS)?;
    let name = q.get("file").unwrap_or("upload.json").to_string();
    if name.is_empty() || name.len() > 255 || name.chars().any(crate::text::needs_escape) {
        return Err(ApiError::bad_request(
            "query parameter file: 1 to 255 bytes without control or bidi/invisible formatting characters",
        ));
    }
    let m = Mode {
        name,
        force: q.flag("force")?,
        dry_run: q.flag("dryRun")?,
        verify_only: q.flag("verifyOnly")?,
    };
    if m.dry_run && m.verify_only {
        return Err(ApiError::bad_request(
            "dryRun and verifyOnly exclude each other",
        ));
    }
    Ok(m)
}

async fn push(
    State(state): State<Arc<ServeState>>,
    q: StrictQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    let mode = mode(&q)?;
    let limit = state.options.max_bundle_bytes;
    refuse_declared(&headers, limit, too_large)?;
    let spool = Spool::create(&state.options.spool_dir)
        .map_err(|e| ApiError::internal(format!("cannot create a spool directory: {e}")))?;
    let path = spool.bundle_path();
    spool_body(body, &path, limit, state.options.limits.body_timeout).await?;
    // The guard and the upload move into the blocking import: a client that disconnects drops
    // this future, not the import, which keeps both until it has finished (imports stay one at a
    // time and its input stays in place).
    let one_at_a_time = state.import_lock.clone().lock_owned().await;
    let st = state.clone();
    let report = state
        .with_store(move |store| {
            let report = run_import(&st, store, path, &mode);
            drop((spool, one_at_a_time));
            report
        })
        .await?;
    let status = match report.status {
        ImportStatus::Refused => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::OK,
    };
    Ok((status, Json(report)))
}

fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        format!("the bundle is larger than this serve accepts ({limit} bytes, serve.maxBundleBytes); import it with `airlock jobs import` on this machine or raise the limit"),
    )
}

/// Streams the body into `path` (see [`BodyReader`]: 413 past `limit`, 408 when it stalls).
async fn spool_body(
    body: Body,
    path: &std::path::Path,
    limit: u64,
    stall: std::time::Duration,
) -> Result<(), ApiError> {
    let io = |e: std::io::Error| ApiError::internal(format!("spooling the upload: {e}"));
    let mut file = tokio::fs::File::create(path).await.map_err(io)?;
    let mut reader = BodyReader::new(body, limit, stall, "the bundle", too_large);
    while let Some(chunk) = reader.next().await? {
        file.write_all(&chunk).await.map_err(io)?;
    }
    file.flush().await.map_err(io)?;
    Ok(())
}

/// The engine call of `jobs import`, with serve's configuration and trust policy.
fn run_import(
    state: &ServeState,
    store: &mut crate::core::store::any::AnyStore,
    path: PathBuf,
    mode: &Mode,
) -> Result<ImportReport, ApiError> {
    let o = &state.options;
    let names = [mode.name.clone()];
    let sign = |payload_type: &str, statement: &[u8]| state.sign_snapshot(payload_type, statement);
    let mut opts = ImportOptions::new(o.node_id.clone());
    opts.force = mode.force;
    opts.require_signature = o.require_signature;
    opts.trust = Some(&o.trust);
    opts.batch_size = o.batch_size;
    opts.max_clock_skew = o.max_clock_skew;
    opts.input_names = Some(&names);
    // The answer is the report's JSON: dropped entries past the memory budget are read back from
    // their temporary file while it is written, as `jobs import` does.
    opts.stream_dropped = true;
    if o.snapshot_key.is_some() {
        opts.snapshot_signer = Some(&sign as SnapshotSigner<'_>);
    }
    let paths = [path];
    let result = if mode.verify_only {
        import::verify_inputs(&paths, &opts)
    } else if mode.dry_run {
        import::plan_import(store, &paths, &opts)
    } else {
        store.import(&paths, &opts)
    };
    result.map_err(import_error)
}

/// An import's refusal as an answer: the store's errors are 503, this machine's faults 500 and
/// the rest (the bundles given) 400.
fn import_error(e: import::ImportError) -> ApiError {
    match e {
        import::ImportError::Store(e) => ApiError::store(e),
        import::ImportError::Scheduler(e) => ApiError::store(e),
        local if local.is_local_fault() => ApiError::internal(local.to_string()),
        other => ApiError::bad_request(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_errors_of_this_machine_are_server_errors() {
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let status = |e| import_error(e).status;
        assert_eq!(
            status(import::ImportError::JobOrder(full)),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            status(import::ImportError::InputChanged {
                file: "upload".into(),
                offset: 7
            }),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            status(import::ImportError::MixedTenants("a, b".into())),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(import::ImportError::NoInputs),
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn query_modes_are_strict() {
        let q = StrictQuery::of;
        let m = mode(&q(&[("force", "true"), ("file", "b.json")])).unwrap();
        assert!(m.force && !m.dry_run && m.name == "b.json");
        assert_eq!(mode(&q(&[])).unwrap().name, "upload.json");
        assert!(mode(&q(&[("force", "yes")])).is_err());
        assert!(mode(&q(&[("file", "a\nb")])).is_err());
        // A bidi override would show the name reversed wherever it is printed.
        assert!(mode(&q(&[("file", "a\u{202e}b.json")])).is_err());
        assert!(mode(&q(&[("dryRun", "true"), ("verifyOnly", "true")])).is_err());
        // A mistyped switch is refused, never an import that was meant to be a dry run.
        let e = mode(&q(&[("dryrun", "true")])).unwrap_err();
        assert_eq!(e.code, "unknown-parameter");
    }
}
