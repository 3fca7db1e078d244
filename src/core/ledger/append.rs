//! Appending to a ledger through its WAL (LOCAL durability: an append returns once its frame is
//! fdatasynced by the WAL's group-commit writer), with the caller's fence token checked against the
//! job's, and checkpoints of the fold state.
//!
//! REGIONAL and GLOBAL durability are confirmations from a replicated engine (SPEC 14,
//! PostgreSQL), recorded as WAL watermarks by the `durability` module; this module acknowledges LOCAL
//! and keeps the log's record of those confirmations ([`super::confirmations`]), which checkpoints
//! carry.

use super::checkpoint::FoldState;
use super::confirmations::{self, Confirmations, ConfirmedMark};
use super::event::{Event, EventError, EventType};
use super::fold::{Fold, LedgerRecord};
use super::source::{decode_frame, fold_with_checkpoint};
use super::{LedgerError, Occurrence};
use crate::core::bundle::dupkeys::first_repeated_key;
use crate::core::hlc::Hlc;
use crate::core::text::ShowPath;
use crate::core::wal::{self, EventBody, FrameType, WalOptions, WalReader, WalWriter};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// An event to append: its type and seed fields (no `hlc`: the log assigns it), and the fence
/// token the caller holds.
#[derive(Debug, Clone)]
pub struct AppendRequest {
    pub event_type: EventType,
    pub fields: Map<String, Value>,
    pub fence: Option<u64>,
    /// What the caller calls the event and the fence (its errors name them so).
    pub names: InputNames,
}

/// How the caller gave an append's event and fence token, for the errors about them: the CLI's
/// flags, or the fields of serve's JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputNames {
    pub event: &'static str,
    pub fence: &'static str,
}

impl InputNames {
    /// `ledger append --event JSON --fence N`.
    pub const CLI: InputNames = InputNames {
        event: "--event",
        fence: "--fence",
    };
    /// `POST /api/v1/ledger/{node}/events` `{"event": {...}, "fence": N}`.
    pub const HTTP: InputNames = InputNames {
        event: "the body's \"event\"",
        fence: "the body's \"fence\"",
    };
}

impl AppendRequest {
    /// Parses `{"type": "JobCreated", ...fields}`; `fence` is the caller's `--fence`. A key given
    /// twice in one object (at any depth) is refused: a last-wins parse would silently store one.
    pub fn from_json(text: &str, fence: Option<u64>) -> Result<AppendRequest, LedgerError> {
        Self::from_json_as(text, fence, InputNames::CLI)
    }

    /// [`Self::from_json`], its errors naming the event and the fence as `names` says.
    pub fn from_json_as(
        text: &str,
        fence: Option<u64>,
        names: InputNames,
    ) -> Result<AppendRequest, LedgerError> {
        let Value::Object(mut fields) = event_json(text, names.event)? else {
            return Err(LedgerError::Usage(format!(
                "{} must be a JSON object with a \"type\" member",
                names.event
            )));
        };
        let ty = match fields.remove("type") {
            Some(Value::String(t)) => EventType::ALL.into_iter().find(|e| e.name() == t),
            _ => None,
        };
        let Some(event_type) = ty else {
            let types: Vec<&str> = EventType::ALL.iter().map(|t| t.name()).collect();
            return Err(LedgerError::Usage(format!(
                "{} needs \"type\": one of {}",
                names.event,
                types.join(", ")
            )));
        };
        Ok(AppendRequest {
            event_type,
            fields,
            fence,
            names,
        })
    }

    /// Parses the seed fields of an event of `event_type` (a JSON object without `type` and `hlc`,
    /// as `airlock wal append --json` takes them), refusing repeated keys like [`Self::from_json`].
    pub fn from_fields_json(
        event_type: EventType,
        text: &str,
    ) -> Result<AppendRequest, LedgerError> {
        let what = format!("the {} event", event_type.name());
        let Value::Object(fields) = event_json(text, &what)? else {
            return Err(LedgerError::Usage(format!(
                "{what} must be a JSON object of its seed fields (without \"hlc\")"
            )));
        };
        Ok(AppendRequest {
            event_type,
            fields,
            fence: None,
            names: InputNames::CLI,
        })
    }

    /// The WAL body of this event once it passes the ledger's validation (the rules `ledger fold`
    /// applies, checked with a placeholder HLC of `node`): whatever is written from it folds.
    pub fn event_body(&self, node: &str) -> Result<EventBody, LedgerError> {
        // A bad node id is the log's problem, not the event's: say so before probing with it.
        crate::core::hlc::validate_node_id(node).map_err(|e| LedgerError::Usage(e.to_string()))?;
        self.check(node)?;
        Ok(EventBody::new(
            FrameType::Event(self.event_type),
            &self.fields,
        )?)
    }

    /// Checks the event as the fold will read it, before any log is opened (so a refused event
    /// leaves no new, preallocated log behind); `node` is the log's node when known.
    pub fn validate(&self, node: Option<&str>) -> Result<(), LedgerError> {
        self.event_body(node.unwrap_or("node")).map(drop)
    }

    /// Validates the fields as the fold would (with a placeholder HLC) and returns the caller's
    /// fence token (from `--fence`, the body's `fence`, or the event's own `fence_token`).
    fn check(&self, node: &str) -> Result<(Event, Option<u64>), LedgerError> {
        if self.fields.contains_key("hlc") {
            return Err(LedgerError::Usage(
                "leave \"hlc\" out of the event: the log assigns each event's HLC".into(),
            ));
        }
        let mut probe = self.fields.clone();
        probe.insert("hlc".into(), Value::String(format!("0:0:{node}")));
        let text = Value::Object(probe).to_string();
        // The probe's line and column would point into this rebuilt text, not the caller's.
        let event = Event::from_payload(self.event_type, text.as_bytes()).map_err(|e| match e {
            EventError::Fields { kind, message } => EventError::Fields {
                kind,
                message: match message.rfind(" at line ") {
                    Some(i) => message[..i].to_string(),
                    None => message,
                },
            },
            other => other,
        })?;
        let own = event.fence_token().map(|f| f.0);
        let fence = match (self.fence, own) {
            (Some(a), Some(b)) if a != b => {
                return Err(LedgerError::Usage(format!(
                    "{} {a} disagrees with the event's fence_token {b}",
                    self.names.fence
                )))
            }
            (a, b) => a.or(b),
        };
        Ok((event, fence))
    }
}

/// Parses `text` (named `what` in errors) as JSON, refusing a key repeated in any
/// object inside it (SPEC 6 counts a repeated key as schema-invalid; RFC 8785 has no canonical form
/// for one), with the key and its JSON path.
fn event_json(text: &str, what: &str) -> Result<Value, LedgerError> {
    let not_json = |e: serde_json::Error| {
        // serde_json's message ends with the line and column.
        LedgerError::Usage(format!("{what} is not JSON: {e}"))
    };
    let value: Value = serde_json::from_str(text).map_err(not_json)?;
    if let Some(repeat) = first_repeated_key(text.as_bytes(), "$").map_err(not_json)? {
        return Err(LedgerError::Usage(format!(
            "{what}: {repeat}; nothing was appended"
        )));
    }
    Ok(value)
}

/// What an append acknowledged (durable: LOCAL).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendedEvent {
    pub lsn: u64,
    pub hlc: String,
    pub job_id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub durability: &'static str,
}

/// An open ledger: its WAL writer and its fold (checkpoint + frames + appends).
pub struct LedgerLog {
    wal: WalWriter,
    /// The log's path as text: the source of every occurrence read or appended here.
    label: std::sync::Arc<str>,
    fold: Fold,
    /// PostgreSQL's confirmations (checkpoint + `<log>.confirmations.json`).
    confirmations: Confirmations,
    /// The log's events must reach PostgreSQL before a checkpoint may let compaction drop them
    /// (REGIONAL/GLOBAL durability was asked for once: `<log>.confirmations.json` exists).
    replicated: bool,
}

impl LedgerLog {
    /// Opens (creating if missing) and recovers the ledger at `path`. Without `node`, the node id
    /// is taken from the log's last event.
    pub fn open(
        path: &Path,
        node: Option<&str>,
        opts: WalOptions,
    ) -> Result<LedgerLog, LedgerError> {
        let node = match node {
            Some(n) => n.to_string(),
            None => infer_node(path)?,
        };
        let wal = WalWriter::open(path, &node, opts)?;
        let label = crate::core::text::visible_path(path);
        let (fold, summary) = fold_with_checkpoint(path, &label)?;
        let label = label.into();
        let mut marks = summary.confirmations;
        confirmations::merge(&mut marks, confirmations::load(path)?);
        let replicated = !marks.is_empty() || confirmations::confirmations_path(path).exists();
        Ok(LedgerLog {
            wal,
            label,
            fold,
            confirmations: marks,
            replicated,
        })
    }

    /// [`LedgerLog::open`] for a log that must be there already (`ledger checkpoint`): a mistyped
    /// path is an error naming it, not a new empty log with a checkpoint written beside it.
    pub fn open_existing(
        path: &Path,
        node: Option<&str>,
        opts: WalOptions,
    ) -> Result<LedgerLog, LedgerError> {
        match path.try_exists() {
            Ok(true) => LedgerLog::open(path, node, opts),
            Ok(false) => Err(LedgerError::Usage(format!(
                "no ledger WAL at {}: check the path (a checkpoint is taken of an existing log; `airlock ledger append` starts a new one)",
                path.shown()
            ))),
            Err(e) => Err(LedgerError::io("open", path, e)),
        }
    }

    pub fn path(&self) -> &Path {
        self.wal.path()
    }

    pub fn node(&self) -> &str {
        self.wal.node()
    }

    /// The log's WAL writer (watermarks, metrics, recovery outcome).
    pub fn wal(&self) -> &WalWriter {
        &self.wal
    }

    pub fn fold(&self) -> &Fold {
        &self.fold
    }

    /// What PostgreSQL confirmed of this log, per level.
    pub fn confirmations(&self) -> &Confirmations {
        &self.confirmations
    }

    /// Marks the log as replicated (REGIONAL/GLOBAL durability), durably, before its first
    /// replicated append: from then on a checkpoint covers only what PostgreSQL confirmed, so
    /// compaction never drops an event PostgreSQL does not have, in this process or a later one.
    pub fn require_confirmation(&mut self) -> Result<(), LedgerError> {
        if !self.replicated {
            confirmations::store(self.path(), &self.confirmations)?;
            self.replicated = true;
        }
        Ok(())
    }

    /// Whether the log's events must be confirmed by PostgreSQL before compaction.
    pub fn is_replicated(&self) -> bool {
        self.replicated
    }

    /// Records a confirmation at `level` (`REGIONAL`/`GLOBAL`) beside the log, atomically; the next
    /// checkpoint carries it. A confirmation covering less than the recorded one changes nothing.
    pub fn record_confirmation(
        &mut self,
        level: &str,
        mark: ConfirmedMark,
    ) -> Result<(), LedgerError> {
        if self
            .confirmations
            .get(level)
            .is_some_and(|have| have.wal_lsn >= mark.wal_lsn)
        {
            return Ok(());
        }
        let mut next = self.confirmations.clone();
        next.insert(level.to_string(), mark);
        confirmations::store(self.path(), &next)?;
        self.confirmations = next;
        Ok(())
    }

    /// The job's fence token as this ledger knows it (its winning creation's).
    pub fn job_fence(&self, job_id: &str) -> Option<u64> {
        let job = self.fold.job(job_id)?;
        job.created.winner()?.fence_token().map(|f| f.0)
    }

    /// Appends one event once it passes validation and the fence check; returns when durable.
    pub fn append(&mut self, req: &AppendRequest) -> Result<AppendedEvent, LedgerError> {
        let (probe, fence) = req.check(self.node())?;
        let job_id = probe.job_id().as_str().to_string();
        if let (Some(given), Some(current)) = (fence, self.job_fence(&job_id)) {
            if given < current {
                return Err(LedgerError::StaleFence {
                    job_id,
                    given,
                    current,
                });
            }
        }
        let body = EventBody::new(FrameType::Event(req.event_type), &req.fields)?;
        let ack = self.wal.append(body.clone())?;
        let hlc = Hlc::new(ack.hlc.physical, u32::from(ack.hlc.logical), self.node());
        let hlc_text = hlc.to_string();
        let payload = body.payload(&hlc_text);
        let event = Event::from_payload(req.event_type, &payload)?;
        let at = Occurrence {
            source: self.label.clone(),
            lsn: ack.lsn,
        };
        let payload = String::from_utf8_lossy(&payload).into();
        self.fold.apply(LedgerRecord { event, payload, at });
        Ok(AppendedEvent {
            lsn: ack.lsn,
            hlc: hlc_text,
            job_id,
            kind: req.event_type.name(),
            durability: "LOCAL",
        })
    }

    /// Checkpoint: raises APPLIED to the last durable frame (on a replicated log, to the last
    /// frame PostgreSQL confirmed), writes the fold state with the watermarks atomically beside the
    /// log, and raises COMPACTED (so compaction may drop them). The fold state may hold events
    /// past APPLIED: folding them again after a restart changes nothing (the fold is a join).
    /// The applied LSN recorded is that one, whatever a watermark raised without a checkpoint
    /// covers (`wal advance`, `ledger sync`): see
    /// [`wal::checkpoint::Checkpoint::unheld_compacted`].
    pub fn checkpoint(&mut self) -> Result<wal::checkpoint::Checkpoint, LedgerError> {
        let applied = self.applicable_lsn();
        let mut state = FoldState::of(&self.fold, &self.label);
        state.confirmations = self.confirmations.clone();
        let state = serde_json::to_value(state)
            .map_err(|e| LedgerError::Usage(format!("fold state cannot be serialised: {e}")))?;
        Ok(self.wal.checkpoint(applied, state)?)
    }

    /// The LSN a checkpoint may mark APPLIED: every durable frame, or on a replicated log only
    /// those PostgreSQL confirmed (at any level: REGIONAL already means PostgreSQL has them).
    fn applicable_lsn(&self) -> u64 {
        let durable = self.wal.durable_lsn();
        if !self.replicated {
            return durable;
        }
        let confirmed =
            confirmations::confirmed_up_to(&self.confirmations, "REGIONAL").unwrap_or(0);
        durable.min(confirmed)
    }

    /// Writes what is queued and closes the log.
    pub fn close(self) -> Result<(), LedgerError> {
        Ok(self.wal.close()?)
    }
}

/// Compacts a ledger's WAL (no writer may hold it): drops the frames its checkpoint covers, and
/// refuses (nothing changed) to drop any frame the checkpoint's fold state does not hold: none
/// without a checkpoint, or with one that has no ledger fold state (the fold would then read the
/// log from its first frame), and none above its applied LSN.
pub fn compact(path: &Path) -> Result<wal::checkpoint::CompactReport, LedgerError> {
    Ok(wal::checkpoint::compact_with(path, |cp| {
        match cp.state.get("format").and_then(|f| f.as_str()) {
            Some(super::checkpoint::STATE_FORMAT) => Ok(()),
            _ if cp.state.is_null() => Err("it holds no ledger fold state".into()),
            _ => Err(format!(
                "its state is not a ledger fold state ({})",
                super::checkpoint::STATE_FORMAT
            )),
        }
    })?)
}

/// The node id of a log, from its last event (whose HLC text names it).
pub fn infer_node(path: &Path) -> Result<String, LedgerError> {
    let missing = || {
        LedgerError::Usage(format!(
            "{} has no events to take the node id from; give --node",
            path.shown()
        ))
    };
    let mut reader = match WalReader::open(path) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
        Err(e) => return Err(LedgerError::io("open", path, e)),
    };
    let mut node = None;
    while let Some(f) = reader
        .next_frame()
        .map_err(|e| LedgerError::io("read", path, e))?
    {
        if let Ok(Some(e)) = decode_frame(&f) {
            node = Some(e.hlc().node.clone());
        }
    }
    node.ok_or_else(missing)
}

/// The checkpoint file of a ledger.
pub fn checkpoint_path(path: &Path) -> PathBuf {
    wal::checkpoint::checkpoint_path(path)
}

/// The `i`-th event of a crash drill: a job's life in six events (created, accepted, progress,
/// cancellation requested, completed, acknowledged), one job per six events.
pub fn drill_event(i: u64) -> AppendRequest {
    use serde_json::json;
    let job = format!("use1-1700000000000-drill-{:05}", i / 6 % 100_000);
    let (event_type, fields) = match i % 6 {
        0 => (
            EventType::JobCreated,
            json!({"job_id": job, "spec": {"i": i}, "assigned_dcs": ["use1"], "fence_token": 1}),
        ),
        1 => (
            EventType::JobAccepted,
            json!({"job_id": job, "dc_id": "use1", "worker_count": 4, "fence_token": 1}),
        ),
        2 => (
            EventType::JobProgressReported,
            json!({"job_id": job, "dc_id": "use1", "completed": i, "failed": 0}),
        ),
        3 => (
            EventType::JobCancellationRequested,
            json!({"job_id": job, "reason": "drill", "requestor": "ops", "fence_token": 1}),
        ),
        4 => (
            EventType::JobCompleted,
            json!({"job_id": job, "final_status": "passed", "aggregate_metrics": {}}),
        ),
        _ => (
            EventType::JobCancellationAcked,
            json!({"job_id": job, "dc_id": "use1", "workflows_cancelled": 1}),
        ),
    };
    AppendRequest {
        event_type,
        fields: match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        fence: None,
        names: InputNames::CLI,
    }
}
