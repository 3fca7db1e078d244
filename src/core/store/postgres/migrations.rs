//! Versioned migrations of the PostgreSQL store (its own list, independent of SQLite's). Each step
//! runs once, in order, in one transaction holding an advisory lock, so processes starting together
//! on a new database migrate it once.

use super::PgError;

/// Advisory lock key of migrations ("airlock" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6972_6c6f_636b;

/// The seed's tables (seed hlc-ordering), exactly as it writes them.
const SEED_SCHEDULER_SCHEMA: &str = "
CREATE SCHEMA IF NOT EXISTS scheduler;

CREATE TABLE scheduler.scheduler_log (
    id                  BIGSERIAL PRIMARY KEY,
    t_hlc               TEXT NOT NULL,           -- HLC timestamp
    job_id              TEXT NOT NULL,           -- Job identifier
    action              TEXT NOT NULL,           -- ENQUEUE, DEQUEUE, EXECUTE, COMPLETE, FAIL
    prev_chain_link     TEXT,                    -- Hash of previous entry
    chain_link          TEXT NOT NULL,           -- Hash of this entry
    payload             JSONB NOT NULL,          -- Job metadata
    tenant_id           TEXT NOT NULL,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE INDEX idx_scheduler_log_hlc ON scheduler.scheduler_log (t_hlc);
CREATE INDEX idx_scheduler_log_tenant_hlc ON scheduler.scheduler_log (tenant_id, t_hlc);
CREATE INDEX idx_scheduler_log_job ON scheduler.scheduler_log (job_id);

CREATE TABLE scheduler.batch_snapshot (
    id                  BIGSERIAL PRIMARY KEY,
    snapshot_hlc        TEXT NOT NULL,           -- HLC at snapshot time
    from_chain_link     TEXT NOT NULL,           -- First entry in batch
    to_chain_link       TEXT NOT NULL,           -- Last entry in batch
    entry_count         INTEGER NOT NULL,
    merkle_root         TEXT NOT NULL,           -- Merkle root of entries
    dsse_envelope       JSONB,                   -- DSSE-signed attestation
    created_at          TIMESTAMPTZ NOT NULL DEFAULT NOW()
);

CREATE TABLE scheduler.chain_heads (
    tenant_id           TEXT PRIMARY KEY,
    head_chain_link     TEXT NOT NULL,           -- Current chain head
    head_hlc            TEXT NOT NULL,           -- HLC of chain head
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
";

/// airlock's own tables beside the seed's.
const AIRLOCK_TABLES: &str = "
CREATE SCHEMA IF NOT EXISTS airlock;

-- One row per scheduler_log row: its tenant chain position, the canonical payload text (JSONB
-- rewrites keys and numbers; every digest is computed from this text) and, for imported entries,
-- their provenance (the imports row, source node log, original link and prevLink as 32 bytes,
-- partitionKey, enqueuedAt; the original tHlc is the row's own t_hlc).
CREATE TABLE airlock.chain_entry (
    tenant_id       TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    log_id          BIGINT NOT NULL,
    payload_text    TEXT NOT NULL,
    import_id       BIGINT,
    source_node     TEXT,
    orig_link       BYTEA,
    orig_prev_link  BYTEA,
    partition_key   TEXT,
    enqueued_at     TEXT,
    PRIMARY KEY (tenant_id, seq)
);

-- One row per job of a tenant chain: payloadHash at ENQUEUE, its positions and lifecycle state.
CREATE TABLE airlock.chain_jobs (
    tenant_id    TEXT NOT NULL,
    job_id       BYTEA NOT NULL,
    payload_hash BYTEA NOT NULL,
    enqueue_seq  BIGINT NOT NULL,
    state        TEXT NOT NULL,
    last_seq     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, job_id)
);

-- The length of each tenant chain (the seed's chain_heads has no column for it).
CREATE TABLE airlock.chain_state (
    tenant_id TEXT PRIMARY KEY,
    length    BIGINT NOT NULL
);

-- The tenant and first chain position of each batch_snapshot row (the seed's table has neither).
CREATE TABLE airlock.snapshot_range (
    snapshot_id BIGINT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    from_seq    BIGINT NOT NULL,
    UNIQUE (tenant_id, from_seq)
);

CREATE TABLE airlock.imports (
    id                 BIGSERIAL PRIMARY KEY,
    import_batch       TEXT NOT NULL,
    tenant_id          TEXT NOT NULL,
    bundle_id          TEXT NOT NULL,
    manifest_digest    TEXT NOT NULL,
    created_by_node_id TEXT NOT NULL,
    signed_by          TEXT,
    signer             TEXT,
    file_name          TEXT NOT NULL,
    entries            BIGINT NOT NULL,
    new_entries        BIGINT NOT NULL,
    duplicates         BIGINT NOT NULL,
    dropped            BIGINT NOT NULL,
    forced             BOOLEAN NOT NULL,
    imported_at        TEXT NOT NULL
);
CREATE INDEX idx_imports_bundle ON airlock.imports (tenant_id, bundle_id);

CREATE TABLE airlock.node_log (
    tenant_id     TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    t_hlc         TEXT NOT NULL,
    job_id        TEXT NOT NULL,
    partition_key TEXT,
    payload       TEXT NOT NULL,
    payload_hash  BYTEA NOT NULL,
    prev_link     BYTEA,
    link          BYTEA NOT NULL,
    enqueued_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, node_id, seq)
);
CREATE INDEX idx_node_log_job ON airlock.node_log (tenant_id, node_id, job_id);

CREATE TABLE airlock.hlc_state (
    node_id  TEXT PRIMARY KEY,
    physical BIGINT NOT NULL,
    logical  BIGINT NOT NULL
);

-- Whether the stored JSONB still holds the value of the canonical text (false, not an error, when
-- the text is not JSON at all: verification reports it instead of failing).
CREATE FUNCTION airlock.payload_agrees(stored JSONB, canonical TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN stored = canonical::jsonb;
EXCEPTION WHEN others THEN
    RETURN false;
END $$;
";

/// Ledger events confirmed REGIONAL / GLOBAL (see `durability`).
const LEDGER_EVENTS: &str = "
CREATE TABLE airlock.ledger_event (
    digest       BYTEA PRIMARY KEY,
    frame        BYTEA NOT NULL,
    level        SMALLINT NOT NULL,
    confirmed_at TIMESTAMPTZ NOT NULL DEFAULT NOW()
);
";

/// (version, description, SQL). Append new steps; never edit a released one.
const MIGRATIONS: &[(u32, &str, &str)] = &[
    (1, "seed scheduler tables", SEED_SCHEDULER_SCHEMA),
    (
        2,
        "airlock chain entries, jobs, snapshots ranges, imports, node log, HLC state",
        AIRLOCK_TABLES,
    ),
    (
        3,
        "ledger events confirmed REGIONAL or GLOBAL",
        LEDGER_EVENTS,
    ),
    (
        4,
        "audit log, persisted metrics, exports, notification queue (the embedded store's tables)",
        "",
    ),
    (
        5,
        "amcheck for the index check before appends, where the role may create it",
        super::check::AMCHECK,
    ),
    (
        6,
        "notification queue: who holds a delivery's claim, and the claim's token",
        "",
    ),
];

/// A step's SQL: the operations tables of step 4 are the embedded store's own `CREATE TABLE`
/// texts (its migrations 3, 4 and 5) in PostgreSQL's dialect, created in schema `airlock`; step 6
/// is the embedded store's migration 6 (`ALTER TABLE notify_deliveries ADD COLUMN ...`) there.
fn step_sql(version: u32, sql: &'static str) -> std::borrow::Cow<'static, str> {
    use crate::core::store::sql::pg_ddl;
    match version {
        4 => std::borrow::Cow::Owned(format!(
            "SET LOCAL search_path TO airlock;\n{}\n{}\n{}",
            pg_ddl(crate::core::audit::MIGRATION_3),
            pg_ddl(crate::core::metrics::MIGRATION_4),
            pg_ddl(crate::core::notify::store::MIGRATION_5)
        )),
        // The embedded store's migration 6, on the table step 4 created in schema `airlock`.
        6 => std::borrow::Cow::Owned(format!(
            "SET LOCAL search_path TO airlock;\n{}",
            pg_ddl(crate::core::notify::store::MIGRATION_6)
        )),
        _ => std::borrow::Cow::Borrowed(sql),
    }
}

/// The newest schema version this build knows.
pub fn latest() -> u32 {
    MIGRATIONS.last().map(|m| m.0).unwrap_or(0)
}

const VERSIONS_TABLE: &str = "CREATE SCHEMA IF NOT EXISTS airlock;
CREATE TABLE IF NOT EXISTS airlock.schema_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT NOW()
);";

/// The version the database is at (0 when airlock never migrated it).
pub fn current(client: &mut postgres::Client) -> Result<u32, PgError> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('airlock.schema_migrations') IS NOT NULL",
            &[],
        )?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: i32 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM airlock.schema_migrations",
            &[],
        )?
        .get(0);
    Ok(v.max(0) as u32)
}

/// Brings the schema up to date: the pending steps in one transaction under the advisory lock,
/// committed with the store's COMMIT deadline. A database whose schemas `scheduler` or `airlock`
/// already hold tables airlock did not record is refused naming them ([`PgError::Foreign`]), and
/// so is one where a pending step would create an object that is already there
/// ([`PgError::Occupied`]).
pub fn migrate(
    client: &mut postgres::Client,
    target: &str,
    commit_timeout: Option<std::time::Duration>,
) -> Result<(), PgError> {
    migrate_to(client, target, commit_timeout, latest())
}

/// [`migrate`], up to version `upto` only (tests make an older airlock's database with it).
pub fn migrate_to(
    client: &mut postgres::Client,
    target: &str,
    commit_timeout: Option<std::time::Duration>,
    upto: u32,
) -> Result<(), PgError> {
    // Fast path: already current (no lock, no DDL).
    let found = current(client)?;
    if found > latest() {
        return Err(PgError::TooNew {
            found,
            known: latest(),
        });
    }
    if found >= upto {
        return Ok(());
    }
    client.batch_execute("BEGIN")?;
    match apply_pending(client, target, upto) {
        Ok(()) => super::commit::commit(client, commit_timeout),
        Err(e) => {
            super::commit::rollback_quietly(client);
            Err(e)
        }
    }
}

/// The pending steps up to `upto`, inside the open transaction.
fn apply_pending(client: &mut postgres::Client, target: &str, upto: u32) -> Result<(), PgError> {
    client.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    client.batch_execute(VERSIONS_TABLE)?;
    let found: i32 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM airlock.schema_migrations",
            &[],
        )?
        .get(0);
    if found == 0 {
        refuse_foreign(client, target)?;
    }
    let pending: Vec<_> = MIGRATIONS
        .iter()
        .filter(|m| m.0 as i32 > found && m.0 <= upto)
        .map(|&(version, description, sql)| (version, description, step_sql(version, sql)))
        .collect();
    refuse_occupied(client, target, found.max(0) as u32, upto, &pending)?;
    for (version, description, sql) in &pending {
        client.batch_execute(sql)?;
        client.execute(
            "INSERT INTO airlock.schema_migrations (version, description) VALUES ($1, $2)",
            &[&(*version as i32), description],
        )?;
    }
    Ok(())
}

/// Refuses, before any step runs, when the `pending` steps would create a table, index, view,
/// function or column that is already there (made by someone else after an older airlock migrated
/// the database): named, instead of the server's bare "relation ... already exists" halfway
/// through (or, for a `CREATE ... IF NOT EXISTS`, someone else's table silently taken as airlock's).
fn refuse_occupied(
    client: &mut postgres::Client,
    target: &str,
    found: u32,
    upto: u32,
    pending: &[(u32, &str, std::borrow::Cow<'static, str>)],
) -> Result<(), PgError> {
    let mut objects = Vec::new();
    for (_, _, sql) in pending {
        for made in created_objects(sql).0 {
            if let Some(there) = existing(client, &made)? {
                objects.push(there);
            }
        }
    }
    if objects.is_empty() {
        return Ok(());
    }
    let database: String = client.query_one("SELECT current_database()", &[])?.get(0);
    Err(PgError::Occupied {
        database,
        target: target.to_string(),
        found,
        upto,
        objects,
    })
}

/// What is already where `made` would go, described for the message ("view airlock.exports"),
/// or `None`.
fn existing(client: &mut postgres::Client, made: &Made) -> Result<Option<String>, PgError> {
    let row = match made {
        Made::Relation(schema, name) => client.query_opt(
            "SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                 WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'I' THEN 'index'
                 WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' ELSE 'type' END
                 || ' ' || n.nspname || '.' || c.relname
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2
             UNION ALL
             SELECT 'type ' || n.nspname || '.' || t.typname
             FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
             WHERE n.nspname = $1 AND t.typname = $2 AND t.typrelid = 0 AND t.typelem = 0
             LIMIT 1",
            &[schema, name],
        )?,
        Made::Function(schema, name) => client.query_opt(
            "SELECT 'function ' || n.nspname || '.' || p.proname || '()'
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = $1 AND p.proname = $2 LIMIT 1",
            &[schema, name],
        )?,
        Made::Column(schema, table, column) => client.query_opt(
            "SELECT 'column ' || $1 || '.' || $2 || '.' || a.attname FROM pg_attribute a
             WHERE a.attrelid = to_regclass(quote_ident($1) || '.' || quote_ident($2))
               AND a.attname = $3 AND a.attnum > 0 AND NOT a.attisdropped",
            &[schema, table, column],
        )?,
    };
    Ok(row.map(|r| r.get(0)))
}

/// Something a migration step creates under a name that may already be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Made {
    /// A table, index, view, sequence: `(schema, name)`.
    Relation(String, String),
    /// `(schema, name)`.
    Function(String, String),
    /// `(schema, table, column)`.
    Column(String, String, String),
}

/// The objects `sql` (a step's text) creates, and the `CREATE` / `ALTER` statements it does not
/// know how to read (none in airlock's steps: a unit test holds every step to that). Unqualified
/// names are in schema `airlock` (the session's `search_path`) or the one a `SET [LOCAL]
/// search_path` names; schemas and extensions are not counted (`IF NOT EXISTS`, and where they
/// are there they are the same thing), nor what a `DO` block does.
fn created_objects(sql: &str) -> (Vec<Made>, Vec<String>) {
    let tokens = tokens(sql);
    let mut schema = "airlock".to_string();
    let (mut made, mut unknown) = (Vec::new(), Vec::new());
    for stmt in tokens.split(|t| t == ";").filter(|s| !s.is_empty()) {
        let up: Vec<String> = stmt.iter().map(|t| t.to_ascii_uppercase()).collect();
        let word = |i: usize| up.get(i).map(String::as_str).unwrap_or("");
        match (word(0), word(1)) {
            ("SET", _) => {
                if let Some(i) = up.iter().position(|w| w == "SEARCH_PATH") {
                    if let Some(s) = stmt.get(i + 2) {
                        schema = ident(s);
                    }
                }
            }
            ("CREATE", _) => match created_by(stmt, &up, &schema) {
                Some(Some(m)) => made.push(m),
                Some(None) => {}
                None => unknown.push(stmt.join(" ")),
            },
            ("ALTER", "TABLE") => match added_columns(stmt, &up, &schema) {
                Some(cols) => made.extend(cols),
                None => unknown.push(stmt.join(" ")),
            },
            ("ALTER", _) => unknown.push(stmt.join(" ")),
            _ => {}
        }
    }
    (made, unknown)
}

/// What one `CREATE` statement makes: `Some(None)` for a schema or an extension, `None` when
/// not understood.
fn created_by(stmt: &[String], up: &[String], schema: &str) -> Option<Option<Made>> {
    let mut i = 1;
    while matches!(
        up.get(i).map(String::as_str),
        Some("OR" | "REPLACE" | "UNIQUE" | "MATERIALIZED")
    ) {
        i += 1;
    }
    let kind = up.get(i)?.as_str();
    i += 1;
    if up.get(i).is_some_and(|w| w == "CONCURRENTLY") {
        i += 1;
    }
    if up
        .get(i..i + 3)
        .is_some_and(|w| w == ["IF", "NOT", "EXISTS"])
    {
        i += 3;
    }
    let name = stmt.get(i)?;
    match kind {
        "SCHEMA" | "EXTENSION" => Some(None),
        "TABLE" | "VIEW" | "SEQUENCE" => {
            let (s, n) = qualified(name, schema);
            Some(Some(Made::Relation(s, n)))
        }
        "FUNCTION" => {
            let (s, n) = qualified(name, schema);
            Some(Some(Made::Function(s, n)))
        }
        // An index is in its table's schema; an unnamed one (`CREATE INDEX ON t`) gets a free name.
        "INDEX" if up[i] == "ON" => Some(None),
        "INDEX" => {
            let on = up.iter().position(|w| w == "ON")?;
            let mut t = on + 1;
            if up.get(t).is_some_and(|w| w == "ONLY") {
                t += 1;
            }
            let (s, _) = qualified(stmt.get(t)?, schema);
            Some(Some(Made::Relation(s, ident(name))))
        }
        _ => None,
    }
}

/// The columns an `ALTER TABLE` adds (`ADD [COLUMN] [IF NOT EXISTS] name ...`, each action);
/// `None` when it does something else (renames, drops, constraints: not understood).
fn added_columns(stmt: &[String], up: &[String], schema: &str) -> Option<Vec<Made>> {
    let mut i = 2;
    while matches!(
        up.get(i).map(String::as_str),
        Some("IF" | "EXISTS" | "ONLY")
    ) {
        i += 1;
    }
    let (s, table) = qualified(stmt.get(i)?, schema);
    let mut cols = Vec::new();
    // Actions are separated by commas outside parentheses.
    let mut depth = 0;
    let mut action_start = i + 1;
    for j in i + 1..=up.len() {
        let t = up.get(j).map(String::as_str);
        match t {
            Some("(") => depth += 1,
            Some(")") => depth -= 1,
            Some(",") | None if depth == 0 => {
                let a = &up[action_start..j];
                let mut k = match a.first().map(String::as_str) {
                    Some("ADD") => 1,
                    _ => return None,
                };
                if a.get(k).is_some_and(|w| w == "COLUMN") {
                    k += 1;
                }
                if a.get(k..k + 3)
                    .is_some_and(|w| w == ["IF", "NOT", "EXISTS"])
                {
                    k += 3;
                }
                let name = a.get(k)?;
                let constraint = [
                    "CONSTRAINT",
                    "PRIMARY",
                    "UNIQUE",
                    "CHECK",
                    "FOREIGN",
                    "EXCLUDE",
                ];
                if constraint.contains(&name.as_str()) {
                    return None;
                }
                cols.push(Made::Column(
                    s.clone(),
                    table.clone(),
                    ident(&stmt[action_start + k]),
                ));
                action_start = j + 1;
            }
            _ => {}
        }
    }
    Some(cols)
}

/// `schema.name` split, or `name` in `schema`; identifiers as PostgreSQL reads them.
fn qualified(name: &str, schema: &str) -> (String, String) {
    match name.split_once('.') {
        Some((s, n)) => (ident(s), ident(n)),
        None => (schema.to_string(), ident(name)),
    }
}

/// An identifier as PostgreSQL reads it: a quoted one as written, any other in lower case.
fn ident(s: &str) -> String {
    match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(q) => q.to_string(),
        None => s.to_ascii_lowercase(),
    }
}

/// `sql`'s words (identifiers, possibly qualified or quoted) and punctuation, without comments,
/// string literals and dollar-quoted bodies (a function's or a `DO` block's).
fn tokens(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if sql[i..].starts_with("--") {
            i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if c == b'\'' {
            i = sql[i + 1..].find('\'').map_or(b.len(), |n| i + n + 2);
        } else if c == b'$' {
            // `$tag$ ... $tag$`.
            let tag_len = sql[i + 1..].find('$').map_or(0, |n| n + 2);
            let tag = &sql[i..(i + tag_len).min(b.len())];
            i = match tag_len > 0
                && tag[1..tag.len() - 1]
                    .bytes()
                    .all(|t| t.is_ascii_alphanumeric() || t == b'_')
            {
                true => sql[i + tag_len..]
                    .find(tag)
                    .map_or(b.len(), |n| i + tag_len + n + tag_len),
                false => i + 1,
            };
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'"' {
            let start = i;
            let mut quoted = false;
            while i < b.len() {
                let d = b[i];
                if d == b'"' {
                    quoted = !quoted;
                } else if !(quoted || d.is_ascii_alphanumeric() || d == b'_' || d == b'.') {
                    break;
                }
                i += 1;
            }
            out.push(sql[start..i].to_string());
        } else {
            if matches!(c, b';' | b'(' | b')' | b',' | b'=') {
                out.push((c as char).to_string());
            }
            i += 1;
        }
    }
    out
}

/// Refuses a database airlock never migrated whose schemas `scheduler` or `airlock` already hold
/// relations (tables, views, sequences, ...) or functions: someone else's, which the first step
/// would collide with ("relation already exists") or, worse, write beside.
fn refuse_foreign(client: &mut postgres::Client, target: &str) -> Result<(), PgError> {
    let rows = client.query(
        "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname IN ('scheduler', 'airlock') AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
           AND NOT (n.nspname = 'airlock' AND c.relname = 'schema_migrations')
           AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i')))
         UNION ALL
         SELECT n.nspname || '.' || p.proname || '()' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('scheduler', 'airlock')
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
         ORDER BY 1",
        &[],
    )?;
    if rows.is_empty() {
        return Ok(());
    }
    let database: String = client.query_one("SELECT current_database()", &[])?.get(0);
    Err(PgError::Foreign {
        database,
        target: target.to_string(),
        tables: rows.iter().map(|r| r.get(0)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made_by(version: u32) -> Vec<String> {
        let (_, _, sql) = MIGRATIONS.iter().find(|m| m.0 == version).unwrap();
        created_objects(&step_sql(version, sql))
            .0
            .iter()
            .map(|m| match m {
                Made::Relation(s, n) => format!("{s}.{n}"),
                Made::Function(s, n) => format!("{s}.{n}()"),
                Made::Column(s, t, c) => format!("{s}.{t}.{c}"),
            })
            .collect()
    }

    #[test]
    fn every_step_is_read_whole_and_names_what_it_creates() {
        for (version, _, sql) in MIGRATIONS {
            let (_, unknown) = created_objects(&step_sql(*version, sql));
            assert!(unknown.is_empty(), "step {version}: {unknown:?}");
        }
        assert_eq!(
            made_by(1),
            [
                "scheduler.scheduler_log",
                "scheduler.idx_scheduler_log_hlc",
                "scheduler.idx_scheduler_log_tenant_hlc",
                "scheduler.idx_scheduler_log_job",
                "scheduler.batch_snapshot",
                "scheduler.chain_heads"
            ]
        );
        let two = made_by(2);
        for m in [
            "airlock.chain_entry",
            "airlock.imports",
            "airlock.idx_imports_bundle",
            "airlock.idx_node_log_job",
            "airlock.hlc_state",
            "airlock.payload_agrees()",
        ] {
            assert!(two.contains(&m.to_string()), "{m} missing: {two:?}");
        }
        assert_eq!(two.len(), 10, "{two:?}");
        assert_eq!(made_by(3), ["airlock.ledger_event"]);
        let four = made_by(4);
        for m in [
            "airlock.audit_log",
            "airlock.metric_samples",
            "airlock.exports",
            "airlock.notify_exports",
            "airlock.idx_notify_exports_logs",
            "airlock.notify_deliveries",
            "airlock.notify_attempts",
        ] {
            assert!(four.contains(&m.to_string()), "{m} missing: {four:?}");
        }
        assert!(made_by(5).is_empty());
        assert_eq!(
            made_by(6),
            [
                "airlock.notify_deliveries.claim_holder",
                "airlock.notify_deliveries.claim_token"
            ]
        );
    }

    #[test]
    fn names_are_read_as_postgresql_reads_them() {
        let (made, unknown) = created_objects(
            "-- CREATE TABLE in_a_comment (x INT);
             SET LOCAL search_path TO ops;
             CREATE TABLE IF NOT EXISTS Plain (note TEXT DEFAULT 'CREATE TABLE no');
             CREATE UNIQUE INDEX \"Quoted\" ON other.t (a);
             CREATE INDEX ON plain (note);
             CREATE OR REPLACE FUNCTION f(x INT) RETURNS INT LANGUAGE sql AS $body$ CREATE TABLE no $body$;
             DO $$ BEGIN CREATE TABLE no (x INT); END $$;
             ALTER TABLE ONLY plain ADD COLUMN IF NOT EXISTS a INT, ADD b NUMERIC(3, 1);
             ALTER TABLE plain RENAME TO other;",
        );
        assert_eq!(
            made,
            [
                Made::Relation("ops".into(), "plain".into()),
                Made::Relation("other".into(), "Quoted".into()),
                Made::Function("ops".into(), "f".into()),
                Made::Column("ops".into(), "plain".into(), "a".into()),
                Made::Column("ops".into(), "plain".into(), "b".into()),
            ]
        );
        assert_eq!(unknown, ["ALTER TABLE plain RENAME TO other"]);
    }
}
