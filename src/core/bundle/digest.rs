//! manifestDigest (SPEC section 5): SHA-256 over the JCS serialisation of the `jobLogs` array,
//! computed incrementally so a bundle never has to be held in memory.

use super::model::{EntryRef, JobLog};
use crate::core::canonical::write_json_string;
use sha2::{Digest, Sha256};

/// Appends the JCS text of an entry (keys in sorted order) to `out`.
pub fn write_entry_canonical(out: &mut Vec<u8>, e: &EntryRef<'_>) {
    // Writing to a Vec cannot fail.
    let field = |out: &mut Vec<u8>, key: &str, value: &str| {
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        let _ = write_json_string(out, value);
    };
    out.push(b'{');
    field(out, "enqueuedAt", &e.enqueued_at);
    out.push(b',');
    field(out, "jobId", &e.job_id);
    out.push(b',');
    field(out, "link", &e.link);
    out.push(b',');
    field(out, "nodeId", &e.node_id);
    if let Some(pk) = &e.partition_key {
        out.push(b',');
        field(out, "partitionKey", pk);
    }
    out.push(b',');
    field(out, "payload", &e.payload);
    out.push(b',');
    field(out, "payloadHash", &e.payload_hash);
    out.push(b',');
    match &e.prev_link {
        Some(p) => field(out, "prevLink", p),
        None => out.extend_from_slice(b"\"prevLink\":null"),
    }
    out.push(b',');
    field(out, "tHlc", &e.t_hlc);
    out.push(b'}');
}

/// Canonical JSON text of a string value.
pub fn canonical_string(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    let _ = write_json_string(&mut v, s);
    v
}

/// SHA-256 on a helper thread: large bundles hash their canonical text beside the parser.
struct HashWorker {
    tx: std::sync::mpsc::SyncSender<Vec<u8>>,
    recycled: std::sync::mpsc::Receiver<Vec<u8>>,
    handle: std::thread::JoinHandle<Sha256>,
}

impl HashWorker {
    fn start(hasher: Sha256) -> Option<HashWorker> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
        let (back_tx, recycled) = std::sync::mpsc::channel::<Vec<u8>>();
        let handle = std::thread::Builder::new()
            .name("manifest-sha256".into())
            .spawn(move || {
                let mut hasher = hasher;
                for mut chunk in rx {
                    hasher.update(&chunk);
                    chunk.clear();
                    let _ = back_tx.send(chunk);
                }
                hasher
            })
            .ok()?;
        Some(HashWorker {
            tx,
            recycled,
            handle,
        })
    }
}

const FLUSH_AT: usize = 1 << 18;

/// Incremental hasher of the canonical `jobLogs` array.
pub struct ManifestHasher {
    hasher: Sha256,
    worker: Option<HashWorker>,
    flushes: usize,
    buf: Vec<u8>,
    logs: usize,
    entries_in_log: usize,
    /// Members of the current log object that sort after "entries", written at its end.
    trailing: Vec<(String, Vec<u8>)>,
    /// When a log's members arrive in an order that cannot be streamed, its entries are kept here.
    buffered_entries: Option<Vec<u8>>,
    leading: Vec<(String, Vec<u8>)>,
    scratch: Vec<u8>,
}

impl Default for ManifestHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl ManifestHasher {
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(1 << 16);
        buf.push(b'[');
        ManifestHasher {
            hasher: Sha256::new(),
            worker: None,
            flushes: 0,
            buf,
            logs: 0,
            entries_in_log: 0,
            trailing: Vec::new(),
            buffered_entries: None,
            leading: Vec::new(),
            scratch: Vec::with_capacity(1024),
        }
    }

    fn flush_if_full(&mut self) {
        if self.buf.len() < FLUSH_AT {
            return;
        }
        self.flushes += 1;
        // Small documents hash inline; from the fourth chunk on, a helper thread takes over.
        if self.worker.is_none() && self.flushes > 3 {
            self.worker = HashWorker::start(std::mem::take(&mut self.hasher));
        }
        match &self.worker {
            Some(w) => {
                let next = w
                    .recycled
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(FLUSH_AT + 4096));
                let full = std::mem::replace(&mut self.buf, next);
                // The worker only stops when `tx` is dropped in `finish`.
                w.tx.send(full)
                    .expect("the hashing thread outlives the hasher");
            }
            None => {
                self.hasher.update(&self.buf);
                self.buf.clear();
            }
        }
    }

    fn write_member(out: &mut Vec<u8>, key: &str, canonical_value: &[u8]) {
        let _ = write_json_string(out, key);
        out.push(b':');
        out.extend_from_slice(canonical_value);
    }

    /// Starts a log's `entries` array. `seen` holds the members of the log object read so far
    /// (key, canonical value text); `streamable` says every member sorting before "entries" is among
    /// them, so entries can be hashed as they come.
    pub fn begin_entries(&mut self, mut seen: Vec<(String, Vec<u8>)>, streamable: bool) {
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        let (leading, trailing): (Vec<_>, Vec<_>) =
            seen.into_iter().partition(|(k, _)| k.as_str() < "entries");
        self.trailing = trailing;
        self.entries_in_log = 0;
        if streamable {
            self.open_log_object(&leading);
            self.buf.extend_from_slice(b"\"entries\":[");
            self.buffered_entries = None;
        } else {
            self.leading = leading;
            self.buffered_entries = Some(Vec::new());
        }
    }

    fn open_log_object(&mut self, leading: &[(String, Vec<u8>)]) {
        if self.logs > 0 {
            self.buf.push(b',');
        }
        self.buf.push(b'{');
        for (k, v) in leading {
            Self::write_member(&mut self.buf, k, v);
            self.buf.push(b',');
        }
    }

    /// Adds one entry's canonical text.
    pub fn entry(&mut self, canonical_entry: &[u8]) {
        self.entry_with(|target| target.extend_from_slice(canonical_entry));
    }

    /// Adds one entry's canonical text, which `write` appends to the buffer it is given.
    pub fn entry_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let target = match self.buffered_entries.as_mut() {
            Some(b) => b,
            None => &mut self.buf,
        };
        if self.entries_in_log > 0 {
            target.push(b',');
        }
        write(target);
        self.entries_in_log += 1;
        if self.buffered_entries.is_none() {
            self.flush_if_full();
        }
    }

    /// Ends a log object. `late` holds members read after the entries array (key, canonical value);
    /// `had_entries` is false when the object had no `entries` member at all.
    pub fn end_log(&mut self, late: Vec<(String, Vec<u8>)>, had_entries: bool) {
        if !had_entries {
            let mut all = late;
            all.sort_by(|a, b| a.0.cmp(&b.0));
            if self.logs > 0 {
                self.buf.push(b',');
            }
            self.buf.push(b'{');
            for (i, (k, v)) in all.iter().enumerate() {
                if i > 0 {
                    self.buf.push(b',');
                }
                Self::write_member(&mut self.buf, k, v);
            }
            self.buf.push(b'}');
        } else {
            let mut trailing = std::mem::take(&mut self.trailing);
            if let Some(entries) = self.buffered_entries.take() {
                let mut leading = std::mem::take(&mut self.leading);
                for (k, v) in late {
                    if k.as_str() < "entries" {
                        leading.push((k, v));
                    } else {
                        trailing.push((k, v));
                    }
                }
                leading.sort_by(|a, b| a.0.cmp(&b.0));
                self.open_log_object(&leading);
                self.buf.extend_from_slice(b"\"entries\":[");
                self.buf.extend_from_slice(&entries);
            } else {
                trailing.extend(late);
            }
            trailing.sort_by(|a, b| a.0.cmp(&b.0));
            self.buf.push(b']');
            for (k, v) in &trailing {
                self.buf.push(b',');
                Self::write_member(&mut self.buf, k, v);
            }
            self.buf.push(b'}');
        }
        self.logs += 1;
        self.flush_if_full();
    }

    /// Starts a well-formed log. Give the chain head when it is known now (the entries then stream
    /// straight into the hash); otherwise pass it to [`ManifestHasher::end_well_formed_log`].
    pub fn begin_well_formed_log(&mut self, chain_head: Option<&str>) {
        let seen = chain_head
            .map(|h| ("chainHead".to_string(), canonical_string(h)))
            .into_iter()
            .collect();
        self.begin_entries(seen, chain_head.is_some());
    }

    /// Adds one entry of a well-formed log.
    pub fn add_entry(&mut self, e: &EntryRef<'_>) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        write_entry_canonical(&mut scratch, e);
        self.entry(&scratch);
        self.scratch = scratch;
    }

    /// Ends a well-formed log; `late_chain_head` is the head when it was not known at the start.
    pub fn end_well_formed_log(
        &mut self,
        late_chain_head: Option<&str>,
        last_hlc: &str,
        node_id: &str,
    ) {
        let mut late: Vec<(String, Vec<u8>)> = late_chain_head
            .map(|h| ("chainHead".to_string(), canonical_string(h)))
            .into_iter()
            .collect();
        late.push(("lastHlc".into(), canonical_string(last_hlc)));
        late.push(("nodeId".into(), canonical_string(node_id)));
        self.end_log(late, true);
    }

    /// `sha256:` + lowercase hex of the digest.
    pub fn finish(mut self) -> String {
        self.buf.push(b']');
        if let Some(w) = self.worker.take() {
            let _ = w.tx.send(std::mem::take(&mut self.buf));
            drop(w.tx);
            self.hasher = w.handle.join().expect("the hashing thread does not panic");
        }
        self.hasher.update(&self.buf);
        format!("sha256:{}", hex::encode(self.hasher.finalize()))
    }
}

/// Hashes a well-formed in-memory log list (export and tests).
pub fn manifest_digest(logs: &[JobLog]) -> String {
    let mut h = ManifestHasher::new();
    for log in logs {
        h.begin_well_formed_log(Some(&log.chain_head));
        for e in &log.entries {
            h.add_entry(&EntryRef::from(e));
        }
        h.end_well_formed_log(None, &log.last_hlc, &log.node_id);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::canonical::canonical_text;

    #[test]
    fn incremental_digest_equals_jcs_of_the_parsed_array() {
        let text = std::fs::read_to_string("../shared/vectors/bundles/two-nodes.json").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let jcs = canonical_text(&v["jobLogs"]).unwrap();
        let want = format!(
            "sha256:{}",
            hex::encode(crate::core::chain::sha256(jcs.as_bytes()))
        );
        let logs: Vec<JobLog> = serde_json::from_value(v["jobLogs"].clone()).unwrap();
        assert_eq!(manifest_digest(&logs), want);
        assert_eq!(want, v["manifestDigest"].as_str().unwrap());
    }
}
