//! The `export.airgap.ready.v1` event (SPEC section 10): `export_id`, the payload object of the seed
//! and its body text (JCS), and the dead-letter message.

use crate::core::canonical::canonical_text;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Event type, NATS subject and `X-Stella-Event-Type` value.
pub const EVENT_TYPE: &str = "export.airgap.ready.v1";
/// Subject of dead-lettered deliveries.
pub const DLQ_SUBJECT: &str = "export.airgap.ready.dlq";
/// `profile_id` of every portable evidence export.
pub const PROFILE_ID: &str = "airgap-evidence";
/// `portable_version`.
pub const PORTABLE_VERSION: &str = "v1";
/// uuid5(URL, "urn:airlock:export").
pub const EXPORT_NAMESPACE: Uuid = Uuid::from_u128(0x02bc0d97_4d80_57bc_bb08_876c54ad9d35);

/// `export_id` = UUIDv5(EXPORT_NAMESPACE, bundleId + ":" + artifact_sha256), lowercase hyphenated.
pub fn export_id(bundle_id: &str, artifact_sha256: &str) -> String {
    let name = format!("{bundle_id}:{artifact_sha256}");
    Uuid::new_v5(&EXPORT_NAMESPACE, name.as_bytes()).to_string()
}

/// `artifact_uri` of an export.
pub fn artifact_uri(export_id: &str) -> String {
    format!("/v1/exports/airgap/evidence/{export_id}/download")
}

/// `metadata.source_uri` of a bundle.
pub fn source_uri(bundle_id: &str) -> String {
    format!("/evidence/{bundle_id}/portable")
}

/// The event's `metadata` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventMetadata {
    pub source_uri: String,
    pub portable_size_bytes: u64,
    pub export_size_bytes: u64,
}

/// The payload object of `export.airgap.ready.v1` (seed field names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportReadyEvent {
    #[serde(rename = "type")]
    pub event_type: String,
    pub export_id: String,
    pub bundle_id: String,
    pub tenant_id: String,
    pub profile_id: String,
    pub portable_version: String,
    pub root_hash: String,
    pub artifact_uri: String,
    pub artifact_sha256: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<String>,
    pub metadata: EventMetadata,
}

/// What a finished portable export contributes to its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFacts {
    pub bundle_id: String,
    pub tenant_id: String,
    pub root_hash: String,
    pub artifact_sha256: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub portable_size_bytes: u64,
    pub export_size_bytes: u64,
}

impl ExportReadyEvent {
    /// The event of an export, every derived field filled in.
    pub fn new(f: &ExportFacts) -> Self {
        let id = export_id(&f.bundle_id, &f.artifact_sha256);
        ExportReadyEvent {
            event_type: EVENT_TYPE.to_string(),
            artifact_uri: artifact_uri(&id),
            export_id: id,
            bundle_id: f.bundle_id.clone(),
            tenant_id: f.tenant_id.clone(),
            profile_id: PROFILE_ID.to_string(),
            portable_version: PORTABLE_VERSION.to_string(),
            root_hash: f.root_hash.clone(),
            artifact_sha256: f.artifact_sha256.clone(),
            created_at: f.created_at.clone(),
            expires_at: f.expires_at.clone(),
            metadata: EventMetadata {
                source_uri: source_uri(&f.bundle_id),
                portable_size_bytes: f.portable_size_bytes,
                export_size_bytes: f.export_size_bytes,
            },
        }
    }

    /// The body: the JCS text of the payload object (keys sorted, no whitespace).
    pub fn body(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        canonical_text(&value).unwrap_or_default()
    }

    /// Parses an event body (any JSON formatting); unknown or missing fields are errors.
    pub fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The `Nats-Msg-Id` of a dead letter: `<export_id>:dlq:<delivery id>:<failed attempts>`, where
/// the failed attempts are counted over the delivery's whole history (6 at its first
/// dead-lettering, 12 at the next after a retry): a re-publish of the same dead letter after a
/// crash is de-duplicated by JetStream, a later dead-lettering of the same delivery is not.
pub fn dlq_msg_id(export_id: &str, delivery_id: i64, failed_attempts: u64) -> String {
    format!("{export_id}:dlq:{delivery_id}:{failed_attempts}")
}

/// A stored event body as a JSON value, for the dead-letter message and the JSON the CLI prints:
/// the body parsed, or, when the stored text is not JSON (a damaged or altered row), that text as a
/// JSON string: it is shown and kept, never dropped.
pub fn event_value(event_body: &str) -> serde_json::Value {
    serde_json::from_str(event_body)
        .unwrap_or_else(|_| serde_json::Value::String(event_body.into()))
}

/// The JSON published on [`DLQ_SUBJECT`] after a delivery's last failure (JCS text):
/// `{"event": <event>, "reason", "lastStatus", "attempts"}`.
pub fn dlq_message(
    event_body: &str,
    reason: &str,
    last_status: Option<u16>,
    attempts: u32,
) -> String {
    let event = event_value(event_body);
    let v = serde_json::json!({
        "event": event,
        "reason": reason,
        "lastStatus": last_status,
        "attempts": attempts,
    });
    canonical_text(&v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vectors() -> serde_json::Value {
        let text = std::fs::read_to_string("../shared/vectors/notify/expected.json").unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn namespace_is_uuid5_of_the_url_namespace() {
        assert_eq!(
            Uuid::new_v5(&Uuid::NAMESPACE_URL, b"urn:airlock:export"),
            EXPORT_NAMESPACE
        );
    }

    #[test]
    fn export_id_matches_the_vector() {
        let v = &vectors()["exportId"];
        assert_eq!(
            export_id(
                v["bundleId"].as_str().unwrap(),
                v["artifactSha256"].as_str().unwrap()
            ),
            v["exportId"].as_str().unwrap()
        );
    }

    #[test]
    fn event_and_body_match_the_vector() {
        let v = vectors();
        let fields = &v["event"]["fields"];
        let facts = ExportFacts {
            bundle_id: fields["bundle_id"].as_str().unwrap().into(),
            tenant_id: fields["tenant_id"].as_str().unwrap().into(),
            root_hash: fields["root_hash"].as_str().unwrap().into(),
            artifact_sha256: fields["artifact_sha256"].as_str().unwrap().into(),
            created_at: fields["created_at"].as_str().unwrap().into(),
            expires_at: None,
            portable_size_bytes: 2048,
            export_size_bytes: 4096,
        };
        let event = ExportReadyEvent::new(&facts);
        assert_eq!(serde_json::to_value(&event).unwrap(), *fields);
        let body = event.body();
        assert_eq!(body, v["event"]["body"].as_str().unwrap());
        assert_eq!(ExportReadyEvent::parse(&body).unwrap(), event);
        assert!(ExportReadyEvent::parse(&body.replace("\"type\"", "\"kind\"")).is_err());
    }

    #[test]
    fn dlq_message_carries_the_event_reason_status_and_attempts() {
        let m = dlq_message("{\"a\":1}", "HTTP 503", Some(503), 6);
        assert_eq!(
            m,
            "{\"attempts\":6,\"event\":{\"a\":1},\"lastStatus\":503,\"reason\":\"HTTP 503\"}"
        );
        let m = dlq_message("{\"a\":1}", "connection refused", None, 6);
        assert!(m.contains("\"lastStatus\":null"));
    }
}
