//! PostgreSQL's part of the check before an append, the counterpart of the embedded store's
//! `quick_check` ([`crate::core::store::sqlite_check`]): every B-tree index of the tables an import
//! or append writes passes amcheck's `bt_index_check` (a damaged index is refused before anything
//! is written through it). The chain's own tail (head entry, last snapshot) is checked by the
//! shared rule [`crate::core::store::rules::check_tail`], as on SQLite.
//!
//! amcheck ships with Debian's `postgresql-15` (contrib); migration 5 creates the extension in
//! schema `airlock` where the connecting role may (a superuser, or the database owner once an
//! administrator allowed it). Without it the check cannot run: each process says so once.

use super::PgError;
use crate::core::store::StoreError;

/// The tables an import or append writes.
const TOUCHED: [&str; 8] = [
    "scheduler.scheduler_log",
    "scheduler.chain_heads",
    "scheduler.batch_snapshot",
    "airlock.chain_entry",
    "airlock.chain_jobs",
    "airlock.chain_state",
    "airlock.snapshot_range",
    "airlock.imports",
];

/// Migration 5: amcheck where the role may create it (never fails the migration).
pub const AMCHECK: &str = "
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA airlock;
EXCEPTION WHEN others THEN
    RAISE NOTICE 'amcheck is not available: %', SQLERRM;
END $$;
";

/// Refuses (with what to do) when an index of a table an append writes fails `bt_index_check`.
pub fn check_indexes(c: &mut postgres::Client) -> Result<(), StoreError> {
    // NULL without amcheck; false when this role may not run it (its functions are for
    // superusers unless granted). Neither is damage: each is said once and the check skipped.
    let runnable: Option<bool> = c
        .query_one(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'amcheck')
                    THEN has_function_privilege('airlock.bt_index_check(regclass)', 'EXECUTE') END",
            &[],
        )?
        .get(0);
    static NO_EXTENSION: std::sync::Once = std::sync::Once::new();
    static NO_GRANT: std::sync::Once = std::sync::Once::new();
    let unchecked = match runnable {
        Some(true) => None,
        None => Some((
            &NO_EXTENSION,
            "the PostgreSQL store has no amcheck extension: its indexes are not checked before appends; run `CREATE EXTENSION amcheck SCHEMA airlock` as a superuser in this database",
        )),
        Some(false) => Some((
            &NO_GRANT,
            "this PostgreSQL role may not run amcheck's bt_index_check: the store's indexes are not checked before appends; run `GRANT EXECUTE ON FUNCTION airlock.bt_index_check(regclass) TO <role>` as a superuser",
        )),
    };
    if let Some((once, why)) = unchecked {
        once.call_once(|| tracing::warn!("{why}"));
        return Ok(());
    }
    let tables: Vec<&str> = TOUCHED.to_vec();
    let indexes: Vec<String> = c
        .query(
            "SELECT i.indexrelid::regclass::text FROM pg_index i
             JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
             WHERE am.amname = 'btree' AND i.indrelid = ANY($1::text[]::regclass[])
             ORDER BY 1",
            &[&tables],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for index in indexes {
        if let Err(e) = c.execute(
            "SELECT airlock.bt_index_check($1::text::regclass)",
            &[&index],
        ) {
            // Only amcheck's corruption codes (XX001 data corrupted, XX002 index corrupted) are
            // damage; a timeout, a cancel or a lost connection is reported as what it is.
            let corrupted = [
                postgres::error::SqlState::DATA_CORRUPTED,
                postgres::error::SqlState::INDEX_CORRUPTED,
            ];
            let Some(db) = e.as_db_error().filter(|d| corrupted.contains(d.code())) else {
                return Err(e.into());
            };
            return Err(PgError::IndexDamaged {
                index,
                message: db.message().to_string(),
            }
            .into());
        }
    }
    Ok(())
}
