//! The checks of one entry, as the reader hands it over: field syntax, payload hash and canonical
//! text, node, clock skew, and its place in the log's chain (pushed to the log's
//! [`ChainDiagnosis`]). Every field is parsed once, with the verifier's strict rules; a fully valid
//! entry comes back parsed ([`ParsedEntry`]) so a collector needs no parse of its own.

use super::canonical_quick::plainly_canonical;
use super::diagnose::{ChainDiagnosis, ChainEntry, LinkText, Prev};
use super::finding::{clip, quoted, too_long, Finding, FindingKind};
use super::options::VerifyOptions;
use crate::core::bundle::{EntryRef, EntryView, SchemaProblemKind};
use crate::core::chain::{decode_digest, node_link, sha256, Digest32};
use crate::core::hlc::{validate_node_id, Hlc, HlcRef};
use crate::core::ids::parse_job_id;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;

/// Per-entry verdicts for displays (bit flags).
pub mod entry_flags {
    pub const PAYLOAD_MODIFIED: u8 = 1;
    pub const ENTRY_MODIFIED: u8 = 2;
    pub const SCHEMA: u8 = 4;
    pub const NODE: u8 = 8;
    pub const SKEW: u8 = 16;
}

/// An entry whose every field is present and valid by the verifier's rules, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEntry {
    pub hlc: Hlc,
    pub job_id: [u8; 16],
    pub payload_hash: Digest32,
    pub link: Digest32,
    /// `None` for the first entry of a log.
    pub prev_link: Option<Digest32>,
}

/// What checking one entry gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEntry {
    /// [`entry_flags`] bits.
    pub flags: u8,
    /// The decoded entry, when the reader parsed it without problems and every field is valid
    /// (findings about it, e.g. a modified payload, may still exist).
    pub parsed: Option<ParsedEntry>,
}

/// The state of the log being read.
pub(super) struct LogState {
    pub(super) log: usize,
    /// The log's nodeId, when it came before its entries.
    pub(super) node: Option<String>,
    pub(super) diag: ChainDiagnosis,
    pub(super) findings: Vec<Finding>,
    pub(super) first_entry_node: Option<String>,
    pub(super) node_mismatches: Vec<usize>,
    /// The previous entry's link as decoded and as written: a prevLink of the same text is that
    /// digest without decoding it again.
    last_link: Option<(Digest32, [u8; 44])>,
}

impl LogState {
    pub(super) fn new(log: usize) -> Self {
        LogState {
            log,
            node: None,
            diag: ChainDiagnosis::new(Some(log), None, LinkText::Base64),
            findings: Vec::new(),
            first_entry_node: None,
            node_mismatches: Vec::new(),
            last_link: None,
        }
    }
}

/// Where an entry sits, for its findings.
struct Place<'a> {
    log: usize,
    index: usize,
    node: Option<&'a str>,
}

impl Place<'_> {
    fn finding(&self, kind: FindingKind, message: String) -> Finding {
        Finding::new(kind, message).at(Some(self.log), self.node, Some(self.index as u64))
    }

    fn schema(&self, field: &str, message: String) -> Finding {
        self.finding(
            FindingKind::SchemaInvalid,
            format!("entry {}: {field}: {message}", self.index),
        )
    }
}

/// An entry's fields as the verifier decoded them (`None`: missing or invalid).
struct Fields<'a> {
    hlc: Option<HlcRef<'a>>,
    job: Option<uuid::Uuid>,
    stored_hash: Option<Digest32>,
    prev: Prev,
    link: Option<Digest32>,
}

/// Checks one entry of `st`'s log; the decoded entry is built only when `want_parsed`.
pub(super) fn check_entry(
    st: &mut LogState,
    opts: &VerifyOptions<'_>,
    index: usize,
    view: &EntryView<'_>,
    want_parsed: bool,
) -> CheckedEntry {
    let e = view.entry();
    let LogState {
        log,
        node,
        diag,
        findings,
        first_entry_node,
        node_mismatches,
        last_link,
    } = st;
    let present = |name: &str| field_read(view, name);
    let node_read = present("nodeId");
    let place = Place {
        log: *log,
        index,
        node: node.as_deref().or(node_read.then_some(&*e.node_id)),
    };
    let mut flags = 0u8;
    let mut problems: Vec<Finding> = Vec::new();
    if let EntryView::Invalid { problems: p, .. } = view {
        for pr in p.iter() {
            problems.push(place.finding(
                FindingKind::SchemaInvalid,
                format!("{}: {}", pr.path, pr.message),
            ));
        }
    }
    let fields = parse_fields(e, &present, last_link.as_ref(), &mut problems, &place);
    let pred_link = last_link.map(|(d, _)| d);
    *last_link = fields
        .link
        .zip(<[u8; 44]>::try_from(e.link.as_bytes()).ok());
    if present("payload") {
        flags |= check_payload(e, &fields, &place, &mut problems, findings);
    }
    let recomputed = match (&fields.job, &fields.hlc, &fields.stored_hash, fields.prev) {
        (Some(j), Some(_), Some(h), Prev::Genesis) => Some(node_link(None, j, &e.t_hlc, h)),
        (Some(j), Some(_), Some(h), Prev::Link(p)) => Some(node_link(Some(&p), j, &e.t_hlc, h)),
        _ => None,
    };
    // Node: the entry's nodeId and its tHlc's node must be the log's. A missing or ill-typed
    // nodeId claims no node (its schema-invalid finding says what is wrong).
    if first_entry_node.is_none() && node_read {
        *first_entry_node = Some(e.node_id.to_string());
    }
    let expected_node = node
        .as_deref()
        .or(first_entry_node.as_deref())
        .unwrap_or_default();
    let modified = matches!((fields.link, recomputed), (Some(l), Some(r)) if l != r);
    let hlc_node_bad = fields.hlc.as_ref().is_some_and(|h| h.node != expected_node) && !modified;
    let node_bad = node_read && e.node_id != expected_node;
    if node_bad || hlc_node_bad {
        flags |= entry_flags::NODE;
        node_mismatches.push(index);
        let claimed: &str = if node_bad {
            &e.node_id
        } else {
            fields.hlc.as_ref().map(|h| h.node).unwrap_or_default()
        };
        findings.push(
            Finding::new(
                FindingKind::NodeMismatch,
                format!(
                    "entry {index} claims node {} but sits in the log of node {}",
                    quoted(claimed),
                    quoted(expected_node)
                ),
            )
            .at(Some(*log), Some(expected_node), Some(index as u64))
            .job(fields.job.map(|u| u.to_string()))
            .values(
                Some(clip(expected_node).into_owned()),
                Some(clip(claimed).into_owned()),
            ),
        );
    }
    if let Some(f) = skew_finding(opts, &fields, index, &place, expected_node) {
        flags |= entry_flags::SKEW;
        findings.push(f);
    }
    if !problems.is_empty() {
        flags |= entry_flags::SCHEMA;
        findings.extend(problems);
    }
    let chain_entry = ChainEntry {
        link: fields.link,
        prev: fields.prev,
        recomputed,
        hlc: fields.hlc.as_ref().map(|h| (h.physical, h.logical)),
        job_id: fields.job.map(|u| *u.as_bytes()),
    };
    let prev_edited = modified && only_prev_link_edited(index, pred_link, &fields, &e.t_hlc);
    if let Some(f) = diag.push_entry(chain_entry, Some(&e.t_hlc), prev_edited) {
        flags |= entry_flags::ENTRY_MODIFIED;
        findings.push(f.on_node(Some(expected_node)));
    }
    CheckedEntry {
        flags,
        parsed: if want_parsed {
            parsed(view, fields)
        } else {
            None
        },
    }
}

/// Whether the reader read field `name` of the entry with its type: every field of a cleanly
/// parsed entry; none of an entry that is not an object (it has no fields: its one finding says
/// so); the others of an entry whose `name` is missing or ill-typed.
fn field_read(view: &EntryView<'_>, name: &str) -> bool {
    let EntryView::Invalid { problems, .. } = view else {
        return true;
    };
    !problems.iter().any(|p| {
        p.kind == SchemaProblemKind::NotAnObject
            || p.path
                .strip_suffix(name)
                .is_some_and(|rest| rest.ends_with('.'))
    })
}

/// Whether a modified entry's one edit is its prevLink: its stored link recomputes with its
/// predecessor's stored link (`pred`; null for the first entry) in place of the stored prevLink.
fn only_prev_link_edited(
    index: usize,
    pred: Option<Digest32>,
    fields: &Fields<'_>,
    t_hlc: &str,
) -> bool {
    let (Some(job), Some(_), Some(hash), Some(link)) =
        (fields.job, fields.hlc, fields.stored_hash, fields.link)
    else {
        return false;
    };
    let pred = match (index, pred) {
        (0, _) => None,
        (_, Some(p)) => Some(p),
        (_, None) => return false,
    };
    let same_prev = match fields.prev {
        Prev::Genesis => pred.is_none(),
        Prev::Link(p) => pred == Some(p),
        Prev::Unknown => return false,
    };
    !same_prev && node_link(pred.as_ref(), &job, t_hlc, &hash) == link
}

/// [`checked`] for a field no valid value of which is longer than `CLIP_CHARS` characters: a
/// longer one is not parsed, and its problem quotes only its start.
fn checked_short<T>(
    present: bool,
    field: &'static str,
    text: &str,
    bad: &mut Vec<(&'static str, String)>,
    parse: impl FnOnce() -> Result<T, String>,
) -> Option<T> {
    if present && too_long(text) {
        bad.push((
            field,
            format!("{} is longer than any valid {field}", quoted(text)),
        ));
        return None;
    }
    checked(present, field, bad, parse)
}

/// Parses a present field, recording why it is invalid.
fn checked<T>(
    present: bool,
    field: &'static str,
    bad: &mut Vec<(&'static str, String)>,
    parse: impl FnOnce() -> Result<T, String>,
) -> Option<T> {
    if !present {
        return None;
    }
    parse().map_err(|m| bad.push((field, m))).ok()
}

/// Decodes every field with the verifier's rules, listing why each invalid one is.
fn parse_fields<'a>(
    e: &'a EntryRef<'_>,
    present: &dyn Fn(&str) -> bool,
    last_link: Option<&(Digest32, [u8; 44])>,
    problems: &mut Vec<Finding>,
    place: &Place<'_>,
) -> Fields<'a> {
    let mut bad: Vec<(&'static str, String)> = Vec::new();
    let hlc = checked_short(present("tHlc"), "tHlc", &e.t_hlc, &mut bad, || {
        HlcRef::parse(&e.t_hlc).map_err(|err| err.to_string())
    });
    let job = checked_short(present("jobId"), "jobId", &e.job_id, &mut bad, || {
        parse_job_id(&e.job_id)
    });
    let stored_hash = checked_short(
        present("payloadHash"),
        "payloadHash",
        &e.payload_hash,
        &mut bad,
        || decode_digest(&e.payload_hash),
    );
    let prev = match &e.prev_link {
        None if present("prevLink") => Prev::Genesis,
        None => Prev::Unknown,
        Some(p) => match last_link {
            Some((digest, text)) if p.as_bytes() == text => Prev::Link(*digest),
            _ => checked_short(true, "prevLink", p, &mut bad, || decode_digest(p))
                .map_or(Prev::Unknown, Prev::Link),
        },
    };
    let link = checked_short(present("link"), "link", &e.link, &mut bad, || {
        decode_digest(&e.link)
    });
    checked_short(present("nodeId"), "nodeId", &e.node_id, &mut bad, || {
        validate_node_id(&e.node_id).map_err(|err| err.to_string())
    });
    checked(present("enqueuedAt"), "enqueuedAt", &mut bad, || {
        crate::core::time::is_rfc3339(&e.enqueued_at)
            .then_some(())
            .ok_or_else(|| format!("{} is not an RFC 3339 timestamp", quoted(&e.enqueued_at)))
    });
    for (field, message) in bad {
        problems.push(place.schema(field, message));
    }
    Fields {
        hlc,
        job,
        stored_hash,
        prev,
        link,
    }
}

/// Payload hash; a payload that still matches its hash must be canonical text (an edited one is
/// `payload-modified` alone: one tampering, one finding).
fn check_payload(
    e: &EntryRef<'_>,
    fields: &Fields<'_>,
    place: &Place<'_>,
    problems: &mut Vec<Finding>,
    findings: &mut Vec<Finding>,
) -> u8 {
    let Some(stored) = fields.stored_hash else {
        return 0;
    };
    let actual = sha256(e.payload.as_bytes());
    if actual == stored {
        if plainly_canonical(&e.payload) {
            return 0;
        }
        if let Err(m) = crate::core::canonical::check_canonical(&e.payload) {
            problems.push(place.schema("payload", m));
        }
        return 0;
    }
    let index = place.index;
    findings.push(
        place
            .finding(
                FindingKind::PayloadModified,
                format!(
                    "entry {index}'s payload was changed after it was written: its SHA-256 no longer matches the stored payloadHash"
                ),
            )
            .job(fields.job.map(|u| u.to_string()))
            .values(Some(B64.encode(stored)), Some(B64.encode(actual))),
    );
    entry_flags::PAYLOAD_MODIFIED
}

/// `clock-skew` when the entry's physical time is further ahead of this machine's than allowed.
fn skew_finding(
    opts: &VerifyOptions<'_>,
    fields: &Fields<'_>,
    index: usize,
    place: &Place<'_>,
    expected_node: &str,
) -> Option<Finding> {
    let (max, h) = (opts.max_clock_skew?, fields.hlc?);
    let now = opts.now_ms;
    if !crate::core::hlc::skew_exceeded(h.physical, now, max) {
        return None;
    }
    Some(
        Finding::new(
            FindingKind::ClockSkew,
            format!(
                "entry {index}'s physical time is {} ms ahead of this machine's clock (more than the {} ms tolerated)",
                h.physical - now,
                max.as_millis()
            ),
        )
        .at(Some(place.log), Some(expected_node), Some(index as u64))
        .job(fields.job.map(|u| u.to_string()))
        .values(Some(format!("at most {}", now + max.as_millis() as u64)), Some(h.physical.to_string())),
    )
}

/// The decoded entry of a cleanly read view whose every field is valid.
fn parsed(view: &EntryView<'_>, fields: Fields<'_>) -> Option<ParsedEntry> {
    if !matches!(view, EntryView::Parsed(_)) {
        return None;
    }
    let prev_link = match fields.prev {
        Prev::Genesis => None,
        Prev::Link(d) => Some(d),
        Prev::Unknown => return None,
    };
    Some(ParsedEntry {
        hlc: fields.hlc?.to_hlc(),
        job_id: *fields.job?.as_bytes(),
        payload_hash: fields.stored_hash?,
        link: fields.link?,
        prev_link,
    })
}
