//! Event payloads: the JCS text of the seed's fields with `hlc` as HLC text (SPEC 11). The writer
//! assigns the HLC, so an [`EventBody`] is the canonical text split around the `hlc` member; the
//! writer thread only splices the timestamp in.

use super::error::WalError;
use super::frame::{FrameType, MAX_PAYLOAD_LEN};
use serde_json::{Map, Value};

/// An event's canonical payload, waiting for its HLC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBody {
    frame_type: FrameType,
    /// The canonical text without the HLC: up to and including `"hlc":"`, then from the HLC's
    /// closing quote on. One buffer: an append moves (and a writer frees) one allocation.
    text: Vec<u8>,
    /// Where the HLC goes in `text`.
    split: usize,
}

impl EventBody {
    /// Checks `fields` against the seed's fields of `frame_type` (every one present, no others,
    /// `hlc` left out: the log assigns it) and builds the canonical text around `hlc`.
    pub fn new(frame_type: FrameType, fields: &Map<String, Value>) -> Result<EventBody, WalError> {
        if frame_type == FrameType::Watermark {
            return Err(WalError::Payload(
                "a watermark is not an event; advance a state instead".into(),
            ));
        }
        let seed = frame_type.seed_fields();
        if fields.contains_key("hlc") {
            return Err(WalError::Payload(format!(
                "{frame_type}: leave out \"hlc\"; the log assigns each frame's HLC"
            )));
        }
        if let Some(k) = fields.keys().find(|k| !seed.contains(&k.as_str())) {
            return Err(WalError::Payload(format!(
                "{frame_type}: unknown field {:?}; its fields are {}",
                crate::core::text::visible(k),
                seed.join(", ")
            )));
        }
        if let Some(k) = seed
            .iter()
            .find(|k| **k != "hlc" && !fields.contains_key(**k))
        {
            return Err(WalError::Payload(format!(
                "{frame_type}: missing field {k:?}; its fields are {}",
                seed.join(", ")
            )));
        }
        // Seed field names are ASCII, so byte order is JCS (UTF-16) order.
        let mut keys: Vec<&str> = seed.to_vec();
        keys.sort_unstable();
        let mut before = b"{".to_vec();
        let mut after = b"\"".to_vec();
        let mut seen_hlc = false;
        for key in keys {
            if key == "hlc" {
                if before.len() > 1 {
                    before.push(b',');
                }
                before.extend_from_slice(b"\"hlc\":\"");
                seen_hlc = true;
                continue;
            }
            let value = crate::core::canonical::canonical_text(&fields[key])
                .map_err(|e| WalError::Payload(format!("{frame_type}.{key}: {e}")))?;
            let out = if seen_hlc { &mut after } else { &mut before };
            if seen_hlc || before_has_member(out) {
                out.push(b',');
            }
            out.extend_from_slice(format!("\"{key}\":").as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
        after.push(b'}');
        let split = before.len();
        before.extend_from_slice(&after);
        let body = EventBody {
            frame_type,
            text: before,
            split,
        };
        if body.payload_len(40) > MAX_PAYLOAD_LEN {
            return Err(WalError::Payload(format!(
                "{frame_type}: payload of about {} bytes exceeds the {MAX_PAYLOAD_LEN}-byte limit",
                body.payload_len(40)
            )));
        }
        Ok(body)
    }

    /// Parses JSON text (an object of the seed's fields, `hlc` left out) into an event body.
    pub fn from_json(frame_type: FrameType, text: &str) -> Result<EventBody, WalError> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            // serde_json's message ends with the line and column.
            WalError::Payload(format!("{frame_type}: not JSON: {e}"))
        })?;
        match value {
            Value::Object(map) => EventBody::new(frame_type, &map),
            _ => Err(WalError::Payload(format!(
                "{frame_type}: give a JSON object of its fields"
            ))),
        }
    }

    pub fn frame_type(&self) -> FrameType {
        self.frame_type
    }

    /// Payload length once an HLC text of `hlc_len` bytes is spliced in.
    pub fn payload_len(&self, hlc_len: usize) -> usize {
        self.text.len() + hlc_len
    }

    /// The payload pieces around an HLC text (for writing without a copy).
    pub fn pieces<'a>(&'a self, hlc_text: &'a [u8]) -> [&'a [u8]; 3] {
        let (before, after) = self.text.split_at(self.split);
        [before, hlc_text, after]
    }

    /// The full payload with `hlc_text` in place.
    pub fn payload(&self, hlc_text: &str) -> Vec<u8> {
        self.pieces(hlc_text.as_bytes()).concat()
    }
}

fn before_has_member(out: &[u8]) -> bool {
    out.len() > 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::wal::frame::EventType;

    #[test]
    fn spliced_payload_is_the_jcs_text_with_hlc() {
        let fields = serde_json::json!({
            "job_id": "use1-1767614400000-gate42-00001",
            "spec": {"workflow": "load-test", "vus": 200},
            "assigned_dcs": ["euw1", "use1"],
            "fence_token": 1
        });
        let body = EventBody::new(
            FrameType::Event(EventType::JobCreated),
            fields.as_object().expect("obj"),
        )
        .expect("body");
        let hlc = "1767614400000:0:gate-a";
        let mut whole = fields.clone();
        whole["hlc"] = hlc.into();
        let want = crate::core::canonical::canonical_text(&whole).expect("jcs");
        assert_eq!(String::from_utf8(body.payload(hlc)).expect("utf8"), want);
        assert_eq!(body.payload_len(hlc.len()), want.len());
    }

    #[test]
    fn hlc_first_and_last_positions_splice_correctly() {
        // JobCompleted: aggregate_metrics, final_status, hlc, job_id (hlc in the middle);
        // JobTimedOut: hlc, job_id, last_progress_hlc, timeout_type.
        for (t, v) in [
            (
                FrameType::Event(EventType::JobCompleted),
                serde_json::json!({"job_id":"j","final_status":"passed","aggregate_metrics":{}}),
            ),
            (
                FrameType::Event(EventType::JobTimedOut),
                serde_json::json!({"job_id":"j","timeout_type":"x","last_progress_hlc":"1:0:a"}),
            ),
        ] {
            let body = EventBody::new(t, v.as_object().expect("obj")).expect("body");
            let mut whole = v.clone();
            whole["hlc"] = "5:1:n".into();
            let want = crate::core::canonical::canonical_text(&whole).expect("jcs");
            assert_eq!(
                String::from_utf8(body.payload("5:1:n")).expect("utf8"),
                want
            );
        }
    }

    #[test]
    fn fields_must_be_exactly_the_seed_fields_without_hlc() {
        let t = FrameType::Event(EventType::JobAccepted);
        let ok = serde_json::json!({"job_id":"j","dc_id":"d","worker_count":1,"fence_token":1});
        assert!(EventBody::new(t, ok.as_object().expect("o")).is_ok());
        let mut extra = ok.clone();
        extra["x"] = 1.into();
        let e = EventBody::new(t, extra.as_object().expect("o")).expect_err("extra");
        assert!(e.to_string().contains("unknown field \"x\""), "{e}");
        let mut with_hlc = ok.clone();
        with_hlc["hlc"] = "1:0:a".into();
        assert!(EventBody::new(t, with_hlc.as_object().expect("o")).is_err());
        let missing = serde_json::json!({"job_id":"j","dc_id":"d","worker_count":1});
        let e = EventBody::new(t, missing.as_object().expect("o")).expect_err("missing");
        assert!(
            e.to_string().contains("missing field \"fence_token\""),
            "{e}"
        );
        assert!(EventBody::from_json(t, "[1]").is_err());
        assert!(EventBody::from_json(t, "{").is_err());
    }
}
