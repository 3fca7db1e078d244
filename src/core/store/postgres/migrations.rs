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
/// already hold tables airlock did not record is refused naming them ([`PgError::Foreign`]).
pub fn migrate(
    client: &mut postgres::Client,
    target: &str,
    commit_timeout: Option<std::time::Duration>,
) -> Result<(), PgError> {
    // Fast path: already current (no lock, no DDL).
    let found = current(client)?;
    if found > latest() {
        return Err(PgError::TooNew {
            found,
            known: latest(),
        });
    }
    if found == latest() {
        return Ok(());
    }
    client.batch_execute("BEGIN")?;
    match apply_pending(client, target) {
        Ok(()) => super::commit::commit(client, commit_timeout),
        Err(e) => {
            super::commit::rollback_quietly(client);
            Err(e)
        }
    }
}

/// The pending steps, inside the open transaction.
fn apply_pending(client: &mut postgres::Client, target: &str) -> Result<(), PgError> {
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
    for (version, description, sql) in MIGRATIONS.iter().filter(|m| m.0 as i32 > found) {
        client.batch_execute(&step_sql(*version, sql))?;
        client.execute(
            "INSERT INTO airlock.schema_migrations (version, description) VALUES ($1, $2)",
            &[&(*version as i32), description],
        )?;
    }
    Ok(())
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
