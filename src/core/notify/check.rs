//! The receiver's check (`airlock notify check EVENT.json --artifact FILE.tgz`): everything the event
//! claims about the artifact, verified against the file alone, with no network.

use super::archive::Limits;
use super::event::{artifact_uri, export_id, source_uri, ExportReadyEvent, EVENT_TYPE};
use super::portable::{open_portable, PortableError};
use serde::Serialize;
use std::path::Path;

/// One comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventCheck {
    pub field: String,
    pub ok: bool,
    pub expected: String,
    pub actual: String,
}

/// The whole check: `ok` when every comparison holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventCheckReport {
    pub ok: bool,
    pub export_id: String,
    pub checks: Vec<EventCheck>,
}

/// Why the check could not run.
#[derive(Debug, thiserror::Error)]
pub enum EventCheckError {
    #[error("the event is not an export.airgap.ready.v1 payload: {0}")]
    Event(String),
    #[error(transparent)]
    Artifact(#[from] PortableError),
}

impl EventCheckError {
    /// The artifact could not be read at all (missing, unreadable): unreadable input, not an
    /// artifact the check refuses.
    pub fn is_unreadable_input(&self) -> bool {
        matches!(self, EventCheckError::Artifact(PortableError::Io { .. }))
    }
}

/// The largest event text accepted.
pub const EVENT_LIMIT: usize = 1 << 20;

/// Checks an event body against the artifact file. An altered artifact (a checksum that does not
/// match its file) is an error from the archive itself, naming the file.
pub fn check_event(event_text: &str, artifact: &Path) -> Result<EventCheckReport, EventCheckError> {
    if event_text.len() > EVENT_LIMIT {
        return Err(EventCheckError::Event(format!(
            "larger than {EVENT_LIMIT} bytes"
        )));
    }
    // serde_json's message ends with the position ("... at line 1 column 680").
    let ev =
        ExportReadyEvent::parse(event_text).map_err(|e| EventCheckError::Event(e.to_string()))?;
    let mut contents = open_portable(artifact, Limits::default())?;
    let bundle = crate::core::bundle::read_bundle(
        &mut contents.bundle,
        &mut crate::core::bundle::reader::NoVisitor,
    )
    .map_err(|e| EventCheckError::Event(format!("the artifact's bundle.json: {e}")))?;
    let h = bundle.header;
    let mut checks = Vec::new();
    let mut cmp = |field: &str, expected: String, actual: String| {
        checks.push(EventCheck {
            field: field.to_string(),
            ok: expected == actual,
            expected,
            actual,
        })
    };
    cmp("type", EVENT_TYPE.into(), ev.event_type.clone());
    cmp(
        "artifact_sha256",
        contents.artifact_sha256.clone(),
        ev.artifact_sha256.clone(),
    );
    cmp(
        "root_hash",
        contents.root_hash.clone(),
        ev.root_hash.clone(),
    );
    cmp("bundle_id", h.bundle_id.clone(), ev.bundle_id.clone());
    cmp("tenant_id", h.tenant_id.clone(), ev.tenant_id.clone());
    let id = export_id(&h.bundle_id, &contents.artifact_sha256);
    cmp("export_id", id.clone(), ev.export_id.clone());
    cmp("artifact_uri", artifact_uri(&id), ev.artifact_uri.clone());
    cmp(
        "profile_id",
        super::event::PROFILE_ID.into(),
        ev.profile_id.clone(),
    );
    cmp(
        "portable_version",
        super::event::PORTABLE_VERSION.into(),
        ev.portable_version.clone(),
    );
    cmp(
        "metadata.source_uri",
        source_uri(&h.bundle_id),
        ev.metadata.source_uri.clone(),
    );
    cmp(
        "metadata.export_size_bytes",
        contents.export_size_bytes.to_string(),
        ev.metadata.export_size_bytes.to_string(),
    );
    cmp(
        "metadata.portable_size_bytes",
        contents.portable_size_bytes.to_string(),
        ev.metadata.portable_size_bytes.to_string(),
    );
    Ok(EventCheckReport {
        ok: checks.iter().all(|c| c.ok),
        export_id: ev.export_id,
        checks,
    })
}
