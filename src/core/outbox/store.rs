//! The outbox file: SQLite in WAL mode with `synchronous=FULL` and a versioned schema. Holds the
//! envelopes; operator transitions (retry, cancel) and replay results are written here.

use super::envelope::{EnvelopeStatus, NewEnvelope, Receipt, SourceMeta};
use super::lock::ReplayLock;
use super::routes::RouteClass;
use super::{Envelope, OutboxError};
use crate::core::time::rfc3339_millis;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// (version, description, SQL). Append new steps; never edit a released one.
const MIGRATIONS: &[(u32, &str, &str)] = &[(
    1,
    "envelopes",
    "CREATE TABLE envelopes (
        seq              INTEGER PRIMARY KEY AUTOINCREMENT,
        id               TEXT NOT NULL UNIQUE,
        idempotency_key  TEXT NOT NULL UNIQUE,
        method           TEXT NOT NULL,
        path             TEXT NOT NULL,
        resource_path    TEXT NOT NULL,
        route_class      TEXT NOT NULL,
        route_pattern    TEXT NOT NULL,
        body             TEXT,
        headers          TEXT NOT NULL,
        request_hash     TEXT NOT NULL,
        source           TEXT NOT NULL,
        status           TEXT NOT NULL
                         CHECK (status IN ('queued','delivered','conflict','failed','cancelled')),
        attempt_count    INTEGER NOT NULL DEFAULT 0,
        next_retry_at    TEXT NOT NULL,
        last_error       TEXT,
        response_status  INTEGER,
        response_summary TEXT,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        acked_at         TEXT
    );
    CREATE INDEX idx_envelopes_status ON envelopes (status, seq);",
)];

/// The newest outbox schema version this build knows.
pub fn latest_schema() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

const COLUMNS: &str = "seq, id, idempotency_key, method, path, resource_path, route_class, \
    route_pattern, body, headers, request_hash, source, status, attempt_count, next_retry_at, \
    last_error, response_status, response_summary, created_at, updated_at, acked_at";

/// Envelope counts by status, plus when queued work is due.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCounts {
    pub queued: u64,
    pub delivered: u64,
    pub conflict: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Queued envelopes whose `next_retry_at` has passed.
    pub due: u64,
    /// Creation time of the oldest queued envelope.
    pub oldest_queued_at: Option<String>,
    /// The earliest `next_retry_at` among queued envelopes.
    pub next_retry_at: Option<String>,
}

impl StatusCounts {
    /// Every envelope.
    pub fn total(&self) -> u64 {
        self.queued + self.delivered + self.conflict + self.failed + self.cancelled
    }

    /// The count for one status.
    pub fn get(&self, s: EnvelopeStatus) -> u64 {
        match s {
            EnvelopeStatus::Queued => self.queued,
            EnvelopeStatus::Delivered => self.delivered,
            EnvelopeStatus::Conflict => self.conflict,
            EnvelopeStatus::Failed => self.failed,
            EnvelopeStatus::Cancelled => self.cancelled,
        }
    }
}

/// What happened to one write handed to [`Outbox::enqueue_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// Stored as a new envelope.
    Queued(Receipt),
    /// The same request with the same Idempotency-Key was already stored: its receipt (with the
    /// envelope's current status). Nothing new was stored.
    Duplicate(Receipt),
    /// The Idempotency-Key is already used by a different request. Nothing was stored.
    KeyReused { envelope_id: String },
}

/// What `export` wrote.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportSummary {
    pub output: PathBuf,
    pub envelopes: usize,
    pub counts: StatusCounts,
}

/// Whether a replay (or an operator transition) holds an outbox's replay lock, as `outbox status`
/// reports it ([`Outbox::replay_lock_state`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state", content = "detail")]
pub enum ReplayLockState {
    /// Nobody holds it (or there is no lock file: no replay has run, none is running).
    Free,
    /// Held; what the holder wrote (pid and since when).
    Held(String),
    /// The lock file cannot be opened (e.g. it belongs to another user): why.
    Unknown(String),
}

impl std::fmt::Display for ReplayLockState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayLockState::Free => f.write_str("free"),
            ReplayLockState::Held(h) => write!(f, "held: a replay is running ({h})"),
            ReplayLockState::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}

/// A replay result for one envelope, applied by [`Outbox::record_attempts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub seq: i64,
    pub status: EnvelopeStatus,
    pub next_retry_at: String,
    pub last_error: Option<String>,
    pub response_status: Option<u16>,
    pub response_summary: Option<String>,
    pub at: String,
}

/// An open outbox.
pub struct Outbox {
    conn: Connection,
    path: PathBuf,
}

fn now_text() -> String {
    rfc3339_millis(crate::core::hlc::unix_ms_now())
}

impl Outbox {
    /// Opens the outbox at `path`, creating the file (mode 0600) and its parent directories if
    /// needed, and brings the schema up to date. Used by the relay.
    pub fn open(path: &Path) -> Result<Outbox, OutboxError> {
        let open_err = |message: String| OutboxError::Open {
            path: path.to_path_buf(),
            message,
        };
        // `:memory:` or a `file:` URI: the relay would answer 202 for writes lost at exit.
        if let Some(why) = crate::core::sqlite_file::not_a_file_name(path) {
            return Err(open_err(why));
        }
        // Everything that opens an outbox this way writes it (the relay queues, replay records):
        // a file this user cannot write is refused now, not at the first write (SQLite accepts
        // one already in WAL mode, and the relay would say it is healthy).
        if let Some(why) = crate::core::sqlite_file::not_writable(path) {
            return Err(open_err(format!(
                "{why}, and it must be writable (the relay stores queued writes there; replay, retry and cancel record in it; SQLite keeps -wal and -shm files beside it): fix the permissions, or give another --outbox. Commands that only read it (`outbox status`, `list`, `show`) open it read-only"
            )));
        }
        crate::core::file_output::prepare_private_file(path, "--outbox").map_err(open_err)?;
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        Self::init(conn, path.to_path_buf())
    }

    /// Opens an outbox that must already exist (operator commands: a typo in `--outbox` should not
    /// silently create an empty outbox).
    pub fn open_existing(path: &Path) -> Result<Outbox, OutboxError> {
        if !path.exists() {
            return Err(OutboxError::Missing {
                path: path.to_path_buf(),
            });
        }
        Self::open(path)
    }

    /// Opens an existing outbox for reading only (`--read-only`): never creates or changes the
    /// file and works on a file the user can only read; writes through it fail.
    pub fn open_read_only(path: &Path) -> Result<Outbox, OutboxError> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => {}
            // Something is there, but not an outbox file: say what, not "no outbox".
            Ok(m) => {
                return Err(OutboxError::Open {
                    path: path.to_path_buf(),
                    message: format!(
                    "it is {}, not an outbox file; give the relay's outbox file (--outbox PATH)",
                    if m.is_dir() {
                        "a directory"
                    } else {
                        "not a regular file (a FIFO, socket or device)"
                    }
                ),
                })
            }
            Err(_) => {
                return Err(OutboxError::Missing {
                    path: path.to_path_buf(),
                })
            }
        }
        let open_err = |message: String| OutboxError::Open {
            path: path.to_path_buf(),
            message,
        };
        let conn = crate::core::sqlite_file::read_only_connection(path)
            .map_err(|e| open_err(format!("{e} (read-only)")))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        Self::refuse_foreign(&conn, path)?;
        let outbox = Outbox {
            conn,
            path: path.to_path_buf(),
        };
        let found = outbox
            .schema_version()
            .map_err(|e| open_err(format!("not a usable outbox ({e}) (read-only)")))?;
        if found > latest_schema() {
            return Err(OutboxError::TooNew {
                path: path.to_path_buf(),
                found,
                known: latest_schema(),
            });
        }
        Ok(outbox)
    }

    /// Someone else's SQLite database (a store given as the outbox, say) is refused by its tables,
    /// before anything in it is read as an outbox or changed.
    fn refuse_foreign(conn: &Connection, path: &Path) -> Result<(), OutboxError> {
        let tables = crate::core::sqlite_file::foreign_tables(conn, "outbox_schema");
        if tables.is_empty() {
            return Ok(());
        }
        Err(OutboxError::Open {
            path: path.to_path_buf(),
            message: format!(
                "it is a SQLite database but not an outbox (its tables: {}); nothing was changed. Give the outbox's path with --outbox (or STATEHUB_OUTBOX_PATH)",
                tables.join(", ")
            ),
        })
    }

    fn init(conn: Connection, path: PathBuf) -> Result<Outbox, OutboxError> {
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        Self::refuse_foreign(&conn, &path)?;
        conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .map_err(|e| OutboxError::Open {
                path: path.clone(),
                message: format!("not a usable SQLite database ({e})"),
            })?;
        conn.execute_batch("PRAGMA synchronous=FULL;")?;
        let mut outbox = Outbox { conn, path };
        outbox.migrate()?;
        Ok(outbox)
    }

    fn migrate(&mut self) -> Result<(), OutboxError> {
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS outbox_schema (
                version     INTEGER PRIMARY KEY,
                description TEXT NOT NULL,
                applied_at  TEXT NOT NULL
            );",
        )?;
        let current: u32 = self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM outbox_schema",
            [],
            |r| r.get(0),
        )?;
        if current > latest_schema() {
            return Err(OutboxError::TooNew {
                path: self.path.clone(),
                found: current,
                known: latest_schema(),
            });
        }
        for (version, description, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            // Another process may have migrated while we waited for the write lock.
            let done: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM outbox_schema WHERE version = ?1)",
                [version],
                |r| r.get(0),
            )?;
            if !done {
                tx.execute_batch(sql)?;
                tx.execute(
                    "INSERT INTO outbox_schema (version, description, applied_at) VALUES (?1, ?2, ?3)",
                    params![version, description, now_text()],
                )?;
            }
            tx.commit()?;
        }
        Ok(())
    }

    /// Whether a replay holds the replay lock now. Looks without creating or writing the lock file
    /// (it opens an existing one read-only and tries a shared lock, letting go at once), so it
    /// works on an outbox the user can only read; a lock file it cannot open is `Unknown`, not an
    /// error. A replay starting during the look waits it out ([`ReplayLock::acquire`]), so a
    /// status never makes one refused.
    pub fn replay_lock_state(&self) -> ReplayLockState {
        let lock = super::lock::lock_path(&self.path);
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Never through a planted link; a FIFO in its place must not hang the status.
            opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        let shown = crate::core::text::visible_path(&lock);
        let mut file = match opts.open(&lock) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ReplayLockState::Free,
            Err(e) => {
                return ReplayLockState::Unknown(format!("cannot open the lock file {shown}: {e}"))
            }
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return ReplayLockState::Unknown(format!(
                "the lock file {shown} is not a regular file"
            ));
        }
        match crate::core::file_lock::held_exclusively(&file) {
            Ok(false) => ReplayLockState::Free,
            Ok(true) => ReplayLockState::Held(super::lock::read_holder(&mut file)),
            Err(e) => ReplayLockState::Unknown(format!("cannot lock the lock file {shown}: {e}")),
        }
    }

    /// The outbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<u32, OutboxError> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM outbox_schema",
            [],
            |r| r.get(0),
        )?)
    }

    /// Stores a batch of scrubbed writes in ONE transaction (one fsync): the relay's group commit.
    /// Each write is checked against existing Idempotency-Keys (including earlier ones of the same
    /// batch). When this returns `Ok`, every `Queued` outcome is durable.
    pub fn enqueue_batch(
        &mut self,
        items: &[NewEnvelope],
    ) -> Result<Vec<EnqueueOutcome>, OutboxError> {
        let now = now_text();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut out = Vec::with_capacity(items.len());
        {
            let mut find = tx.prepare_cached(
                "SELECT id, request_hash, route_class, status FROM envelopes WHERE idempotency_key = ?1",
            )?;
            let mut insert = tx.prepare_cached(
                "INSERT INTO envelopes (id, idempotency_key, method, path, resource_path, route_class,
                    route_pattern, body, headers, request_hash, source, status, attempt_count,
                    next_retry_at, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 'queued', 0, ?12, ?12, ?12)",
            )?;
            for e in items {
                let existing = find
                    .query_row([&e.idempotency_key], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    })
                    .optional()?;
                if let Some((id, hash, class, status)) = existing {
                    if hash == e.request_hash {
                        out.push(EnqueueOutcome::Duplicate(Receipt {
                            queued: true,
                            envelope_id: id,
                            idempotency_key: e.idempotency_key.clone(),
                            route_class: class,
                            status,
                        }));
                    } else {
                        out.push(EnqueueOutcome::KeyReused { envelope_id: id });
                    }
                    continue;
                }
                insert.execute(params![
                    e.id,
                    e.idempotency_key,
                    e.method,
                    e.path,
                    e.resource_path,
                    e.route_class.as_str(),
                    e.route_pattern,
                    e.body,
                    serde_json::to_string(&e.headers).unwrap_or_else(|_| "{}".into()),
                    e.request_hash,
                    serde_json::to_string(&e.source).unwrap_or_else(|_| "{}".into()),
                    now,
                ])?;
                out.push(EnqueueOutcome::Queued(Receipt::queued(
                    &e.id,
                    &e.idempotency_key,
                    e.route_class,
                )));
            }
        }
        tx.commit()?;
        Ok(out)
    }

    /// Envelope counts by status (and how many queued ones are due now).
    pub fn counts(&self) -> Result<StatusCounts, OutboxError> {
        let mut c = StatusCounts::default();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT status, COUNT(*) FROM envelopes GROUP BY status")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u64>(1)?)))?;
        for row in rows {
            let (s, n) = row?;
            match EnvelopeStatus::parse(&s) {
                Some(EnvelopeStatus::Queued) => c.queued = n,
                Some(EnvelopeStatus::Delivered) => c.delivered = n,
                Some(EnvelopeStatus::Conflict) => c.conflict = n,
                Some(EnvelopeStatus::Failed) => c.failed = n,
                Some(EnvelopeStatus::Cancelled) => c.cancelled = n,
                None => {}
            }
        }
        let (due, oldest, next): (u64, Option<String>, Option<String>) = self.conn.query_row(
            "SELECT COUNT(*) FILTER (WHERE next_retry_at <= ?1), MIN(created_at), MIN(next_retry_at)
               FROM envelopes WHERE status = 'queued'",
            [now_text()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        c.due = due;
        c.oldest_queued_at = oldest;
        c.next_retry_at = next;
        Ok(c)
    }

    /// Envelopes in creation order, optionally only those with `status`, at most `limit`.
    pub fn list(
        &self,
        status: Option<EnvelopeStatus>,
        limit: Option<usize>,
    ) -> Result<Vec<Envelope>, OutboxError> {
        let limit = limit.map(|l| l as i64).unwrap_or(-1);
        let sql = format!(
            "SELECT {COLUMNS} FROM envelopes WHERE (?1 IS NULL OR status = ?1) ORDER BY seq LIMIT ?2"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![status.map(|s| s.as_str()), limit], row_to_envelope)?;
        let mut out = Vec::new();
        for r in rows {
            out.push(r??);
        }
        Ok(out)
    }

    /// Queued envelopes with `seq > after` and `seq <= up_to`, in creation order, at most `limit`.
    pub fn queued_page(
        &self,
        after: i64,
        up_to: i64,
        limit: usize,
    ) -> Result<Vec<Envelope>, OutboxError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM envelopes WHERE status = 'queued' AND seq > ?1 AND seq <= ?2
             ORDER BY seq LIMIT ?3"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![after, up_to, limit as i64], row_to_envelope)?;
        let mut out = Vec::new();
        for r in rows {
            out.push(r??);
        }
        Ok(out)
    }

    /// The highest envelope sequence number (0 when empty).
    pub fn max_seq(&self) -> Result<i64, OutboxError> {
        Ok(self
            .conn
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM envelopes", [], |r| {
                r.get(0)
            })?)
    }

    /// One envelope by its full id or a unique id prefix (at least 4 characters).
    pub fn get(&self, id: &str) -> Result<Envelope, OutboxError> {
        let sql = format!("SELECT {COLUMNS} FROM envelopes WHERE id = ?1");
        if let Some(e) = self
            .conn
            .query_row(&sql, [id], row_to_envelope)
            .optional()?
        {
            return e;
        }
        let not_found = || OutboxError::NotFound { id: id.to_string() };
        if id.len() < 4 || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(not_found());
        }
        let sql = format!("SELECT {COLUMNS} FROM envelopes WHERE id LIKE ?1 || '%' LIMIT 2");
        let mut stmt = self.conn.prepare(&sql)?;
        let mut found = Vec::new();
        for r in stmt.query_map([id], row_to_envelope)? {
            found.push(r??);
        }
        match found.len() {
            0 => Err(not_found()),
            1 => Ok(found.remove(0)),
            _ => Err(OutboxError::Ambiguous {
                prefix: id.to_string(),
            }),
        }
    }

    /// Puts an envelope back in the queue, due now (`failed` or `cancelled` -> `queued`; a queued
    /// one becomes due immediately). Refused for `delivered` and `conflict` envelopes, a cancelled
    /// one whose last answer was a conflict, and while a replay is running. Returns the updated
    /// envelope.
    pub fn retry(&mut self, id: &str) -> Result<Envelope, OutboxError> {
        self.transition(id, "retry", Envelope::check_retry, EnvelopeStatus::Queued)
    }

    /// Cancels an envelope (`queued`, `failed` or `conflict` -> `cancelled`; the response summary is
    /// kept). Refused for `delivered` and `cancelled` envelopes, and while a replay is running.
    pub fn cancel(&mut self, id: &str) -> Result<Envelope, OutboxError> {
        self.transition(
            id,
            "cancel",
            Envelope::check_cancel,
            EnvelopeStatus::Cancelled,
        )
    }

    fn transition(
        &mut self,
        id: &str,
        action: &'static str,
        check: fn(&Envelope) -> Result<(), &'static str>,
        to: EnvelopeStatus,
    ) -> Result<Envelope, OutboxError> {
        let _lock = ReplayLock::acquire(&self.path)?;
        let env = self.get(id)?;
        check(&env).map_err(|reason| OutboxError::Transition {
            action,
            id: env.request.id.clone(),
            status: env.status,
            reason,
        })?;
        let now = now_text();
        let next = if to == EnvelopeStatus::Queued {
            now.clone()
        } else {
            env.next_retry_at.clone()
        };
        let n = self.conn.execute(
            "UPDATE envelopes SET status = ?1, next_retry_at = ?2, updated_at = ?3
              WHERE seq = ?4 AND status = ?5",
            params![to.as_str(), next, now, env.seq, env.status.as_str()],
        )?;
        if n != 1 {
            return Err(OutboxError::Changed { id: env.request.id });
        }
        self.get(&env.request.id)
    }

    /// Writes replay results in one transaction. Only envelopes still `queued` are updated, so a
    /// recorded conflict (or an operator's cancel) is never overwritten. Returns how many changed.
    pub fn record_attempts(&mut self, records: &[AttemptRecord]) -> Result<usize, OutboxError> {
        if records.is_empty() {
            return Ok(0);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut changed = 0;
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE envelopes SET status = ?1, attempt_count = attempt_count + 1,
                    next_retry_at = ?2, last_error = ?3,
                    response_status = COALESCE(?4, response_status),
                    response_summary = COALESCE(?5, response_summary),
                    updated_at = ?6,
                    acked_at = CASE WHEN ?1 = 'delivered' THEN ?6 ELSE acked_at END
                  WHERE seq = ?7 AND status = 'queued'",
            )?;
            for r in records {
                changed += stmt.execute(params![
                    r.status.as_str(),
                    r.next_retry_at,
                    r.last_error,
                    r.response_status,
                    r.response_summary,
                    r.at,
                    r.seq
                ])?;
            }
        }
        tx.commit()?;
        Ok(changed)
    }

    /// Writes every envelope (optionally only those with `status`) as non-secret JSON to `output`,
    /// atomically (a temporary file renamed into place).
    pub fn export(
        &self,
        output: &Path,
        status: Option<EnvelopeStatus>,
    ) -> Result<ExportSummary, OutboxError> {
        let envelopes = self.list(status, None)?;
        let counts = self.counts()?;
        let doc = serde_json::json!({
            "format": "airlock-outbox-export/1",
            "exportedAt": now_text(),
            "outbox": crate::core::text::visible_path(&self.path),
            "schemaVersion": self.schema_version()?,
            "statusFilter": status.map(|s| s.as_str()),
            "counts": counts,
            "envelopes": envelopes,
        });
        let mut text = serde_json::to_string_pretty(&doc).map_err(|e| OutboxError::Corrupt {
            id: "-".into(),
            reason: e.to_string(),
        })?;
        text.push('\n');
        crate::core::file_output::write_atomic_private(output, text.as_bytes())?;
        Ok(ExportSummary {
            output: output.to_path_buf(),
            envelopes: envelopes.len(),
            counts,
        })
    }
}

/// Column `i` of a row, or why it does not read as a `T` (a value of another type stored there:
/// damage to report naming the row, not a database error); a database error is passed on.
fn field<T: rusqlite::types::FromSql>(
    r: &Row<'_>,
    i: usize,
) -> rusqlite::Result<Result<T, String>> {
    use rusqlite::Error as E;
    match r.get::<_, T>(i) {
        Ok(v) => Ok(Ok(v)),
        Err(E::InvalidColumnType(_, name, t)) => {
            Ok(Err(format!("{name} holds a value of type {t}")))
        }
        Err(E::IntegralValueOutOfRange(_, v)) => {
            let name = r.as_ref().column_name(i).unwrap_or("?").to_string();
            Ok(Err(format!("{name} holds {v}, out of range")))
        }
        Err(E::FromSqlConversionFailure(_, t, e)) => {
            let name = r.as_ref().column_name(i).unwrap_or("?").to_string();
            Ok(Err(format!("{name} ({t}) does not read: {e}")))
        }
        Err(e) => Err(e),
    }
}

fn row_to_envelope(r: &Row<'_>) -> rusqlite::Result<Result<Envelope, OutboxError>> {
    let id: String = r.get(1)?;
    let corrupt = |reason: String| OutboxError::Corrupt {
        id: id.clone(),
        reason,
    };
    // A column holding a value of another type is this envelope's damage, named as such.
    macro_rules! get {
        ($i:expr) => {
            match field(r, $i)? {
                Ok(v) => v,
                Err(reason) => return Ok(Err(corrupt(reason))),
            }
        };
    }
    let class: String = get!(6);
    let status: String = get!(12);
    let headers: String = get!(9);
    let source: String = get!(11);
    let Some(route_class) = RouteClass::parse(&class) else {
        return Ok(Err(corrupt(format!("unknown route class {class:?}"))));
    };
    let Some(status) = EnvelopeStatus::parse(&status) else {
        return Ok(Err(corrupt(format!("unknown status {status:?}"))));
    };
    let headers: BTreeMap<String, String> = match serde_json::from_str(&headers) {
        Ok(h) => h,
        Err(e) => return Ok(Err(corrupt(format!("headers: {e}")))),
    };
    let source: SourceMeta = match serde_json::from_str(&source) {
        Ok(s) => s,
        Err(e) => return Ok(Err(corrupt(format!("source: {e}")))),
    };
    Ok(Ok(Envelope {
        seq: get!(0),
        request: NewEnvelope {
            id: id.clone(),
            idempotency_key: get!(2),
            method: get!(3),
            path: get!(4),
            resource_path: get!(5),
            route_class,
            route_pattern: get!(7),
            body: get!(8),
            headers,
            request_hash: get!(10),
            source,
        },
        status,
        attempt_count: get!(13),
        next_retry_at: get!(14),
        last_error: get!(15),
        response_status: get!(16),
        response_summary: get!(17),
        created_at: get!(18),
        updated_at: get!(19),
        acked_at: get!(20),
    }))
}
