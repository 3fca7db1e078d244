//! SQLite's own share of an import, for the import benchmark (`airlock dev store-copy-floor`, used
//! by `bench/import.sh` with `SQLITE_FLOOR=1`).
//!
//! Every `scheduler_log` and `scheduler_jobs` row of an imported store is copied into a new store
//! by `INSERT ... SELECT`, in one transaction under the journal an import uses
//! (`Store::with_bulk_journal`). The `WHERE` clauses keep SQLite from its transfer optimisation (a
//! page copy that skips record building), so each row goes through the record building and b-tree
//! inserts an imported row goes through, with no binding, no hashing, no parsing and no other work.
//! The source is read once beforehand, so its pages come from the page cache.

use super::{Store, StoreError};
use crate::core::text::visible_path;
use std::path::{Path, PathBuf};

/// What copying the rows took.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CopyFloor {
    pub log_rows: u64,
    pub job_rows: u64,
    /// Wall time of the copying transaction, commit included.
    pub seconds: f64,
    /// CPU time of the process during it (one thread does the work).
    pub cpu_seconds: f64,
    /// Whether the rollback journal was used, as an import into a store nobody else has open does.
    pub bulk_journal: bool,
}

/// Why the copy did not run.
#[derive(Debug, thiserror::Error)]
pub enum CopyFloorError {
    #[error("{} already exists; give a path for a new store (the copy never writes into an existing file)", visible_path(.0))]
    TargetExists(PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("copying the rows of {}: {error}", visible_path(source_path))]
    Sql {
        source_path: PathBuf,
        error: rusqlite::Error,
    },
}

/// Copies the chain and job rows of the store at `source` into a new store at `target`.
pub fn copy_floor(source: &Path, target: &Path) -> Result<CopyFloor, CopyFloorError> {
    // Checked first: the source must be a store, and nothing may be written over.
    drop(Store::open_read_only(source)?);
    if target.exists() {
        return Err(CopyFloorError::TargetExists(target.to_path_buf()));
    }
    let mut store = Store::open(target)?;
    let sql = |error| CopyFloorError::Sql {
        source_path: source.to_path_buf(),
        error,
    };
    let source_text = source
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| sql(rusqlite::Error::InvalidPath(source.to_path_buf())))?;
    store
        .conn()
        .execute("ATTACH DATABASE ?1 AS src", [&source_text])
        .map_err(sql)?;
    let (log_rows, job_rows): (u64, u64) = store
        .conn()
        .query_row(
            "SELECT (SELECT COUNT(*) FROM src.scheduler_log WHERE LENGTH(payload) >= 0),
                    (SELECT COUNT(*) FROM src.scheduler_jobs)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    let (copied, bulk_journal) = store.with_bulk_journal(|s| {
        let (wall, cpu) = (
            std::time::Instant::now(),
            crate::core::cpu_time::process_cpu_seconds(),
        );
        s.conn().execute_batch(
            "BEGIN IMMEDIATE;
             INSERT INTO main.scheduler_log SELECT * FROM src.scheduler_log WHERE seq >= 0;
             INSERT INTO main.scheduler_jobs SELECT * FROM src.scheduler_jobs WHERE last_seq >= 0;
             COMMIT;",
        )?;
        Ok::<_, rusqlite::Error>((
            wall.elapsed().as_secs_f64(),
            crate::core::cpu_time::process_cpu_seconds() - cpu,
        ))
    });
    let (seconds, cpu_seconds) = copied.map_err(sql)?;
    Ok(CopyFloor {
        log_rows,
        job_rows,
        seconds,
        cpu_seconds,
        bulk_journal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(store: &Store, table: &str) -> u64 {
        store
            .conn()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .expect("count")
    }

    #[test]
    fn the_copy_holds_every_row_and_refuses_to_write_over_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (source, target) = (dir.path().join("src.db"), dir.path().join("copy.db"));
        let store = Store::open(&source).expect("source");
        for seq in 1..=3i64 {
            store
                .conn()
                .execute(
                    "INSERT INTO scheduler_log (tenant_id, seq, t_hlc, job_id, action, chain_link,
                     payload, created_at) VALUES ('t', ?1, 'h', ?2, 'ENQUEUE', 'l', '{}', 'now')",
                    rusqlite::params![seq, format!("job-{seq}")],
                )
                .expect("log row");
            store
                .conn()
                .execute(
                    "INSERT INTO scheduler_jobs VALUES ('t', ?1, x'00', ?2, 'ENQUEUED', ?2)",
                    rusqlite::params![vec![seq as u8], seq],
                )
                .expect("job row");
        }
        drop(store);
        let floor = copy_floor(&source, &target).expect("copy");
        assert_eq!((floor.log_rows, floor.job_rows), (3, 3));
        assert!(floor.bulk_journal);
        let copy = Store::open(&target).expect("copy opens");
        assert_eq!(count(&copy, "scheduler_log"), 3);
        assert_eq!(count(&copy, "scheduler_jobs"), 3);
        let rows: Vec<(i64, String)> = copy
            .conn()
            .prepare("SELECT seq, job_id FROM scheduler_log ORDER BY seq")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(rows[2], (3, "job-3".to_string()));
        drop(copy);
        let again = copy_floor(&source, &target).expect_err("target exists");
        assert!(matches!(again, CopyFloorError::TargetExists(_)), "{again}");
        let missing = copy_floor(&dir.path().join("none.db"), &dir.path().join("x.db"))
            .expect_err("no source");
        assert!(!dir.path().join("x.db").exists(), "{missing}");
    }
}
