//! The seed's eight ledger events (AD-38 part 1) with their fields, validated on the way in.
//!
//! In a WAL frame the event type is the frame's type byte (SPEC 11: 1 to 8 in table order) and the
//! payload is the JCS text of the seed fields, `hlc` as HLC text. On the command line and in the
//! vectors an event is one JSON object with a `"type"` member naming it (`"JobCreated"`, ...).

use super::job_id::JobId;
use crate::core::hlc::{validate_node_id, Hlc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The largest integer JSON (and so JCS, whose numbers are IEEE doubles) carries exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An event type with its WAL type byte (defined with the frame layout, where the byte lives).
pub use crate::core::wal::EventType;

/// Why an event was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error("{kind} payload is not valid: {message}")]
    Fields { kind: &'static str, message: String },
    #[error("event JSON is not valid: {0}")]
    Json(String),
    #[error("the payload's hlc {text} does not agree with the frame header's HLC ({header})")]
    HlcMismatch { text: String, header: String },
}

/// A fence token: a positive integer no larger than 2^53 - 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FenceToken(pub u64);

impl Serialize for FenceToken {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for FenceToken {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bounded_integer(d, "fence_token", 1).map(FenceToken)
    }
}

/// An integer from `min` to 2^53 - 1; anything else (negative, fractional or too large, which
/// JSON parsers turn into a float) is refused naming `what` and the allowed range.
fn bounded_integer<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
    min: u64,
) -> Result<u64, D::Error> {
    struct Bounded {
        what: &'static str,
        min: u64,
    }
    impl Bounded {
        fn refuse<E: serde::de::Error>(&self, v: impl std::fmt::Display) -> E {
            E::custom(format!(
                "{} {v} must be an integer from {} to 2^53-1",
                self.what, self.min
            ))
        }
    }
    impl serde::de::Visitor<'_> for Bounded {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "{} as an integer from {} to 2^53-1", self.what, self.min)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            if v < self.min || v > MAX_SAFE_INTEGER {
                return Err(self.refuse(v));
            }
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(self.refuse(v)),
            }
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<u64, E> {
            // Debug keeps the fraction or exponent (`1.0`, `1.8446744073709552e19`) visible.
            Err(self.refuse(format_args!("{v:?}")))
        }
    }
    d.deserialize_u64(Bounded { what, min })
}

/// A count (workers, completed, failed, cancelled workflows): 0 to 2^53 - 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Count(pub u64);

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bounded_integer(d, "a count", 0).map(Count)
    }
}

/// A datacenter id: 1 to 128 characters of `[A-Za-z0-9._-]` (the node-id alphabet).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DcId(pub String);

impl DcId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for DcId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for DcId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        validate_node_id(&text).map_err(|_| {
            serde::de::Error::custom(format!(
                "datacenter id {text:?} must be 1 to 128 characters of [A-Za-z0-9._-]"
            ))
        })?;
        Ok(DcId(text.into_owned()))
    }
}

/// Serde for HLC text fields (strict parser of SPEC 2).
pub mod hlc_text {
    use crate::core::hlc::Hlc;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(hlc: &Hlc, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(hlc)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Hlc, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Hlc::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn object<'de, D: Deserializer<'de>>(d: D, field: &str) -> Result<Value, D::Error> {
    let v = Value::deserialize(d)?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(format!(
            "{field} must be a JSON object"
        )))
    }
}

fn spec_object<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    object(d, "spec")
}

fn metrics_object<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    object(d, "aggregate_metrics")
}

fn dc_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<DcId>, D::Error> {
    let dcs = Vec::<DcId>::deserialize(d)?;
    if dcs.is_empty() {
        return Err(serde::de::Error::custom(
            "assigned_dcs must name at least one datacenter",
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(dcs.len());
    for dc in &dcs {
        if !seen.insert(dc.as_str()) {
            return Err(serde::de::Error::custom(format!(
                "assigned_dcs names {:?} twice",
                dc.as_str()
            )));
        }
    }
    Ok(dcs)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobCreated {
    pub job_id: JobId,
    #[serde(deserialize_with = "spec_object")]
    pub spec: Value,
    #[serde(deserialize_with = "dc_list")]
    pub assigned_dcs: Vec<DcId>,
    pub fence_token: FenceToken,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobAccepted {
    pub job_id: JobId,
    pub dc_id: DcId,
    pub worker_count: Count,
    pub fence_token: FenceToken,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobProgressReported {
    pub job_id: JobId,
    pub dc_id: DcId,
    pub completed: Count,
    pub failed: Count,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobCancellationRequested {
    pub job_id: JobId,
    pub reason: String,
    pub requestor: String,
    pub fence_token: FenceToken,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobCancellationAcked {
    pub job_id: JobId,
    pub dc_id: DcId,
    pub workflows_cancelled: Count,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobCompleted {
    pub job_id: JobId,
    pub final_status: String,
    #[serde(deserialize_with = "metrics_object")]
    pub aggregate_metrics: Value,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFailed {
    pub job_id: JobId,
    pub error: String,
    pub failed_dc: DcId,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

/// `last_progress_hlc` is an HLC text, or null when the job never reported progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobTimedOut {
    pub job_id: JobId,
    pub timeout_type: String,
    #[serde(with = "optional_hlc_text")]
    pub last_progress_hlc: Option<Hlc>,
    #[serde(with = "hlc_text")]
    pub hlc: Hlc,
}

mod optional_hlc_text {
    use crate::core::hlc::Hlc;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(hlc: &Option<Hlc>, s: S) -> Result<S::Ok, S::Error> {
        match hlc {
            Some(h) => s.collect_str(h),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Hlc>, D::Error> {
        let text = Option::<std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.map(|t| Hlc::parse(&t).map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// One ledger event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    JobCreated(JobCreated),
    JobAccepted(JobAccepted),
    JobProgressReported(JobProgressReported),
    JobCancellationRequested(JobCancellationRequested),
    JobCancellationAcked(JobCancellationAcked),
    JobCompleted(JobCompleted),
    JobFailed(JobFailed),
    JobTimedOut(JobTimedOut),
}

macro_rules! each_event {
    ($ev:expr, $e:ident => $body:expr) => {
        match $ev {
            Event::JobCreated($e) => $body,
            Event::JobAccepted($e) => $body,
            Event::JobProgressReported($e) => $body,
            Event::JobCancellationRequested($e) => $body,
            Event::JobCancellationAcked($e) => $body,
            Event::JobCompleted($e) => $body,
            Event::JobFailed($e) => $body,
            Event::JobTimedOut($e) => $body,
        }
    };
}

impl Event {
    pub fn event_type(&self) -> EventType {
        match self {
            Event::JobCreated(_) => EventType::JobCreated,
            Event::JobAccepted(_) => EventType::JobAccepted,
            Event::JobProgressReported(_) => EventType::JobProgressReported,
            Event::JobCancellationRequested(_) => EventType::JobCancellationRequested,
            Event::JobCancellationAcked(_) => EventType::JobCancellationAcked,
            Event::JobCompleted(_) => EventType::JobCompleted,
            Event::JobFailed(_) => EventType::JobFailed,
            Event::JobTimedOut(_) => EventType::JobTimedOut,
        }
    }

    pub fn job_id(&self) -> &JobId {
        each_event!(self, e => &e.job_id)
    }

    pub fn hlc(&self) -> &Hlc {
        each_event!(self, e => &e.hlc)
    }

    /// The fence token the event carries (creations, acceptances, cancellation requests).
    pub fn fence_token(&self) -> Option<FenceToken> {
        match self {
            Event::JobCreated(e) => Some(e.fence_token),
            Event::JobAccepted(e) => Some(e.fence_token),
            Event::JobCancellationRequested(e) => Some(e.fence_token),
            _ => None,
        }
    }

    /// The WAL frame payload: JCS text of the seed fields (no `type` member).
    pub fn payload_text(&self) -> String {
        let text = each_event!(self, e => serde_json_canonicalizer::to_string(e));
        // Every field serializes to plain JSON (strings, safe integers, JSON values), so JCS
        // cannot fail; fall back to serde_json's text if it ever did.
        text.unwrap_or_else(
            |_| each_event!(self, e => serde_json::to_string(e).unwrap_or_default()),
        )
    }

    /// Decodes a frame payload of the given type.
    pub fn from_payload(ty: EventType, payload: &[u8]) -> Result<Event, EventError> {
        fn de<'a, T: Deserialize<'a>>(
            ty: EventType,
            payload: &'a [u8],
            wrap: fn(T) -> Event,
        ) -> Result<Event, EventError> {
            serde_json::from_slice::<T>(payload)
                .map(wrap)
                .map_err(|e| EventError::Fields {
                    kind: ty.name(),
                    message: e.to_string(),
                })
        }
        match ty {
            EventType::JobCreated => de(ty, payload, Event::JobCreated),
            EventType::JobAccepted => de(ty, payload, Event::JobAccepted),
            EventType::JobProgressReported => de(ty, payload, Event::JobProgressReported),
            EventType::JobCancellationRequested => de(ty, payload, Event::JobCancellationRequested),
            EventType::JobCancellationAcked => de(ty, payload, Event::JobCancellationAcked),
            EventType::JobCompleted => de(ty, payload, Event::JobCompleted),
            EventType::JobFailed => de(ty, payload, Event::JobFailed),
            EventType::JobTimedOut => de(ty, payload, Event::JobTimedOut),
        }
    }

    /// Parses the command-line / vector form: one JSON object with a `"type"` member.
    pub fn from_json(text: &str) -> Result<Event, EventError> {
        serde_json::from_str(text).map_err(|e| EventError::Json(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATED: &str = r#"{"assigned_dcs":["euw1","use1"],"fence_token":1,"hlc":"1767614400000:0:gate-a","job_id":"use1-1767614400000-gate42-00001","spec":{"vus":200,"workflow":"load-test"}}"#;

    #[test]
    fn payload_round_trips_as_jcs() {
        let e = Event::from_payload(EventType::JobCreated, CREATED.as_bytes()).unwrap();
        assert_eq!(e.payload_text(), CREATED);
        assert_eq!(e.event_type().code(), 1);
        assert_eq!(e.fence_token(), Some(FenceToken(1)));
        let tagged = serde_json::to_string(&e).unwrap();
        assert!(tagged.contains(r#""type":"JobCreated""#));
        assert_eq!(Event::from_json(&tagged).unwrap(), e);
    }

    #[test]
    fn type_codes_follow_the_seed_table() {
        for (i, t) in EventType::ALL.iter().enumerate() {
            assert_eq!(usize::from(t.code()), i + 1);
            assert_eq!(EventType::from_code(t.code()), Some(*t));
        }
        assert_eq!(EventType::from_code(0), None);
        assert_eq!(EventType::from_code(9), None);
    }

    #[test]
    fn bad_fields_are_refused_with_a_reason() {
        let cases = [
            (
                CREATED.replace("\"fence_token\":1", "\"fence_token\":0"),
                "fence_token 0",
            ),
            (
                CREATED.replace("\"fence_token\":1", "\"fence_token\":9007199254740992"),
                "2^53-1",
            ),
            (
                CREATED.replace("\"fence_token\":1", "\"fence_token\":-1"),
                "fence_token -1 must be an integer from 1",
            ),
            (
                CREATED.replace("\"fence_token\":1", "\"fence_token\":18446744073709551616"),
                "fence_token 1.8446744073709552e19 must be",
            ),
            (
                CREATED.replace("\"fence_token\":1", "\"fence_token\":\"1\""),
                "invalid type: string",
            ),
            (CREATED.replace("gate42-00001", "gate42-1"), "sequence"),
            (
                CREATED.replace("1767614400000:0:gate-a", "1767614400000:00:gate-a"),
                "leading zeros",
            ),
            (CREATED.replace("[\"euw1\",\"use1\"]", "[]"), "at least one"),
            (
                CREATED.replace("[\"euw1\",\"use1\"]", "[\"use1\",\"use1\"]"),
                "twice",
            ),
            (
                CREATED.replace("{\"vus\":200,\"workflow\":\"load-test\"}", "[1]"),
                "spec must be a JSON object",
            ),
            (
                CREATED.replace("\"fence_token\":1,", "\"fence_token\":1,\"x\":1,"),
                "unknown field",
            ),
            (CREATED.replace("\"fence_token\":1,", ""), "missing field"),
        ];
        for (payload, want) in cases {
            let e = Event::from_payload(EventType::JobCreated, payload.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(want), "{payload}: {e}");
        }
        let e = Event::from_json(r#"{"type":"JobExploded","job_id":"a-1-g-00001"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
    }

    #[test]
    fn timed_out_accepts_a_null_last_progress_hlc() {
        let p = r#"{"hlc":"5:0:g","job_id":"r-1-g-00001","last_progress_hlc":null,"timeout_type":"global"}"#;
        let e = Event::from_payload(EventType::JobTimedOut, p.as_bytes()).unwrap();
        assert_eq!(e.payload_text(), p);
    }
}
