//! The embedded store (SPEC section 8): one SQLite file in WAL mode with `synchronous=FULL` and
//! versioned migrations. Holds the node job logs, HLC state, and the scheduler chain tables.

pub mod any;
pub mod backend;
pub mod busy;
pub mod copy_floor;
mod migrations;
pub mod nodelog;
pub mod postgres;
pub mod rules;
pub mod scheduler;
pub mod sql;
mod sqlite_borrowed;
mod sqlite_check;
mod sqlite_tx;
pub mod value;
pub mod writeback;

use crate::core::hlc::{HlcClock, HlcParseError, WallClock};
use crate::core::text::ShowPath;
use rusqlite::{Connection, OptionalExtension};
use std::path::{Path, PathBuf};

/// A store failure, with what to do about it where that is knowable.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("cannot open the store at {path}: this user cannot write the store or its directory ({detail}); commands that write need write access to the file and to its directory (SQLite keeps -wal and -shm files beside it): fix the permissions, or copy the store somewhere writable. Commands that only read it (`chain show`, `chain verify`, `jobs import --dry-run`, `audit list`, `console --read-only`, ...) open it read-only")]
    NotWritable { path: PathBuf, detail: String },
    #[error("the store at {path} has schema version {found}, older than this airlock's ({known}), and this user cannot write it, so it cannot be brought up to date: copy it somewhere writable (or run any airlock command where it is writable) and read the copy")]
    OldReadOnly {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("the store at {path} has schema version {found}, newer than this airlock understands ({known}); upgrade airlock")]
    TooNew {
        path: PathBuf,
        found: u32,
        known: u32,
    },
    #[error("{}", busy_message(path, *cut_short))]
    Busy {
        path: PathBuf,
        /// The wait was ended early by a [`busy::BusyCutoff`] (e.g. serve stopping), not by
        /// [`BUSY_TIMEOUT`].
        cut_short: bool,
    },
    #[error("the store at {path} is not in WAL journal mode (SQLite answered {mode:?}): another process may hold it in another mode, or the file system lacks shared-memory support; close other airlock processes and retry, or move the store to a local disk")]
    NotWal { path: PathBuf, mode: String },
    #[error("the store at {path} is damaged ({detail}); nothing was written. Restore it from a backup, or copy what still reads with `sqlite3 {path} .recover`, before importing into it")]
    Damaged { path: PathBuf, detail: String },
    #[error("the store is damaged: {table} row {position}: {detail}; run `airlock chain verify` and restore the store from a backup")]
    CorruptRow {
        table: &'static str,
        position: String,
        detail: String,
    },
    /// A `batch_snapshot` row a command needs does not read ([`scheduler::DamagedSnapshot`]).
    #[error("the store is damaged: {detail}. Run `airlock chain verify --tenant {tenant:?}` to see every finding, then restore the store from a backup or repair that row")]
    SnapshotDamaged { tenant: String, detail: String },
    #[error("{path} is not a SQLite database (it does not start with the SQLite header), so it is not an airlock store: nothing was changed. Give the store's path with --db (or AIRLOCK_DB, store.path); if it was an airlock store, its first bytes were overwritten: restore it from a backup")]
    NotSqlite { path: PathBuf },
    #[error("{path} is a SQLite database but not an airlock store (its tables: {}); nothing was changed. Give the store's path with --db (or AIRLOCK_DB, store.path)", tables.join(", "))]
    Foreign { path: PathBuf, tables: Vec<String> },
    #[error("no store at {path}: nothing was created. A store is made by the first `airlock jobs enqueue` or `airlock jobs import`; check --db (or AIRLOCK_DB, store.path)")]
    Missing { path: PathBuf },
    #[error("the store at {path} is an empty file (0 bytes), not an airlock store: nothing was changed. If it held chains, restore it from a backup; else check --db (or AIRLOCK_DB, store.path); the first `airlock jobs enqueue` or `airlock jobs import` makes a new store in it")]
    Empty { path: PathBuf },
    #[error("{}", sql_message(.0))]
    Sql(#[from] rusqlite::Error),
    #[error(transparent)]
    NodeId(#[from] HlcParseError),
    #[error(transparent)]
    Postgres(self::postgres::PgError),
    #[error(transparent)]
    Location(#[from] any::LocationError),
}

/// How long every writer waits for another one's lock before giving up (one busy policy for all,
/// [`busy`]; work under a [`busy::BusyCutoff`] may give up sooner).
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `path` is a regular file of 0 bytes.
fn is_empty_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)
}

/// A SQLite failure for the operator: a full file system says so, and what to do (the failed
/// change was rolled back; what the store held before is intact).
fn sql_message(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => format!(
            "the file system holding the store is full ({e}): the change was rolled back and \
             nothing of it was stored (what the store held before is intact); free space there, \
             or move the store (--db), and retry"
        ),
        _ => format!("store error: {e}"),
    }
}

fn busy_message(path: &Path, cut_short: bool) -> String {
    let holder = "another writer (an import, enqueue, snapshot or lifecycle action of another \
                  airlock process, or the console)";
    if cut_short {
        format!(
            "the store at {} is busy: locked by {holder}; airlock is stopping and gave up \
             waiting for the lock before the store's {} s busy timeout",
            path.shown(),
            BUSY_TIMEOUT.as_secs()
        )
    } else {
        format!(
            "the store at {} is locked by {holder} and stayed locked for {} s; wait for it to \
             finish or stop it, then retry",
            path.shown(),
            BUSY_TIMEOUT.as_secs()
        )
    }
}

/// Maps SQLite's busy and locked answers to [`StoreError::Busy`] and its corruption answers to
/// [`StoreError::Damaged`], both naming the store.
pub fn busy_or_sql(e: rusqlite::Error, path: &Path) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => {
            StoreError::Busy {
                path: path.to_path_buf(),
                cut_short: busy::cut_off(),
            }
        }
        Some(rusqlite::ErrorCode::NotADatabase) if lacks_sqlite_header(path) => {
            StoreError::NotSqlite {
                path: path.to_path_buf(),
            }
        }
        Some(rusqlite::ErrorCode::DatabaseCorrupt) | Some(rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Damaged {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }
        }
        _ => StoreError::Sql(e),
    }
}

/// Whether the file at `path` has bytes but does not start with SQLite's 16-byte header
/// (`SQLite format 3\0`): another kind of file named as the store (a bundle, a key), not a
/// damaged store. A file that cannot be read is not judged here.
fn lacks_sqlite_header(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 16];
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(n) = f.take(16).read(&mut head) else {
        return false;
    };
    n > 0 && head[..n] != b"SQLite format 3\0"[..n]
}

/// Stored text quoted for a message: escaped, and cut after 80 characters (a corrupt row may hold
/// anything).
pub fn quoted(text: &str) -> String {
    let short: String = text.chars().take(80).collect();
    let more = if short.len() < text.len() { "..." } else { "" };
    format!("{short:?}{more}")
}

/// Why a read-only open failed: with commits still in the `-wal` file beside the store, that the
/// store cannot be read without them (see [`crate::core::sqlite_file::read_only_connection`]).
fn read_only_message(e: &rusqlite::Error, path: &Path) -> String {
    if crate::core::sqlite_file::wal_has_frames(path) {
        format!(
            "{e} (read-only): its -wal file holds commits not yet in the main file, and this \
             user cannot create the -shm index needed to read them; open it once where it is \
             writable (any airlock command checkpoints it when it closes), or copy the store \
             with its -wal file somewhere writable"
        )
    } else {
        format!("{e} (read-only)")
    }
}

/// Page size of new stores, in bytes.
pub const PAGE_SIZE: u32 = 16 * 1024;

/// An open store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// Why SQLite could not switch a file to the store's journal mode, for the operator: a file (or
/// directory) this user may not write is not a damaged database.
fn unusable(e: rusqlite::Error, path: &Path) -> StoreError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ReadOnly) | Some(rusqlite::ErrorCode::CannotOpen) => {
            StoreError::NotWritable {
                path: path.to_path_buf(),
                detail: e.to_string(),
            }
        }
        _ => StoreError::Open {
            path: path.to_path_buf(),
            message: format!("not a usable SQLite database ({e})"),
        },
    }
}

impl Store {
    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        // `:memory:` or a `file:` URI: every write would be acknowledged and lost at exit.
        if let Some(why) = crate::core::sqlite_file::not_a_file_name(path) {
            return Err(open_err(why));
        }
        crate::core::file_output::prepare_private_file(path, "--db").map_err(open_err)?;
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        Self::init(conn, path.to_path_buf())
    }

    /// Opens an existing store for reading only (`--read-only`): never creates the file, never
    /// changes it (no journal-mode switch, no migration), and works on a file the user can only
    /// read. Every write through it fails with SQLite's "attempt to write a readonly database".
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let open_err = |message: String| StoreError::Open {
            path: path.to_path_buf(),
            message,
        };
        if !path.is_file() {
            return Err(open_err(
                "no store file there (read-only: it is not created)".into(),
            ));
        }
        let conn = crate::core::sqlite_file::read_only_connection(path)
            .map_err(|e| open_err(read_only_message(&e, path)))?;
        busy::install(&conn)?;
        let found = migrations::schema_version(&conn)
            .map_err(|e| open_err(format!("not a usable SQLite database ({e}) (read-only)")))?;
        if found > migrations::latest() {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                known: migrations::latest(),
            });
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Opens the existing store for a command that only reads it: [`Store::open_existing`] (the
    /// schema brought up to date), except that a store this user cannot write (on a read-only
    /// medium, in a folder they may not write: a copy brought in for review) is opened read-only
    /// instead of refused, when its schema is current (an older one cannot be migrated there).
    pub fn open_for_reading(path: &Path) -> Result<Store, StoreError> {
        match Self::open_existing(path) {
            Err(StoreError::NotWritable { .. }) => {
                let store = Self::open_read_only(path)?;
                let found = migrations::schema_version(&store.conn).map_err(StoreError::Sql)?;
                if found < migrations::latest() {
                    return Err(StoreError::OldReadOnly {
                        path: path.to_path_buf(),
                        found,
                        known: migrations::latest(),
                    });
                }
                Ok(store)
            }
            other => other,
        }
    }

    /// Whether the store at `path` is there but this user cannot write it or its folder (SQLite
    /// keeps `-wal` and `-shm` files beside it): a copy on a read-only medium, or in a folder they
    /// may not write. It can then only be opened read-only ([`Store::open_read_only`]). Asked of
    /// the file system (`access(2)`, which also answers for a read-only mount), without opening the
    /// store: no wait for another process's lock, nothing changed.
    pub fn only_readable(path: &Path) -> bool {
        crate::core::sqlite_file::not_writable(path).is_some()
    }

    /// Refuses ([`StoreError::NotWritable`]) a store at `path` that is there but that this user
    /// cannot write, for a command that will write it (serve): SQLite accepts a read-only file
    /// already in WAL mode and fails only at the first write.
    pub fn refuse_read_only(path: &Path) -> Result<(), StoreError> {
        match crate::core::sqlite_file::not_writable(path) {
            Some(detail) => Err(StoreError::NotWritable {
                path: path.to_path_buf(),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// A private in-memory store (tests, dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        Self::init(conn, PathBuf::from(":memory:"))
    }

    /// Opens the store at `path` like [`Store::open`], but only when the file is already there:
    /// commands that read (or change what is stored) must not make a new store at a mistyped path.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_path_buf(),
            });
        }
        // SQLite takes a 0-byte file for a new database and `open` would write the schema into
        // it: a command that reads the store must not make one there (a truncated store or a
        // `touch`ed typo would read as "no chains yet"). A store in WAL mode always has its
        // header in the main file, unless its pages still sit in the `-wal` file beside it.
        if is_empty_file(path) && !crate::core::sqlite_file::wal_has_frames(path) {
            return Err(StoreError::Empty {
                path: path.to_path_buf(),
            });
        }
        Self::open(path)
    }

    fn init(conn: Connection, path: PathBuf) -> Result<Store, StoreError> {
        busy::install(&conn)?;
        // Before anything is changed (the journal mode is a property of the file): someone
        // else's database is refused, not given our tables.
        let tables = crate::core::sqlite_file::foreign_tables(&conn, "schema_migrations");
        if !tables.is_empty() {
            return Err(StoreError::Foreign { path, tables });
        }
        // New stores get 16 KiB pages (effective only before the file's first write): a chain
        // entry is ~350 bytes, so bulk imports touch, split and write a quarter as many pages.
        conn.execute_batch(&format!("PRAGMA page_size={PAGE_SIZE}"))?;
        // Opening a WAL store while the last connection of another process closes it (that close
        // checkpoints and removes the -wal file under an exclusive lock) answers SQLITE_BUSY at once,
        // without SQLite's busy wait; try again within the store's one busy timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = std::time::Duration::from_millis(2);
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)) {
                Ok(mode) => break mode,
                Err(e) => match busy_or_sql(e, &path) {
                    StoreError::Busy {
                        cut_short: false, ..
                    } if std::time::Instant::now() + pause < deadline => {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(std::time::Duration::from_millis(100));
                    }
                    StoreError::Sql(e) => return Err(unusable(e, &path)),
                    other => return Err(other),
                },
            }
        };
        let in_memory = path == Path::new(":memory:");
        if !in_memory && !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::NotWal { path, mode });
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")?;
        let mut store = Store { conn, path };
        migrations::migrate(&mut store.conn, &store.path)?;
        Ok(store)
    }

    /// Runs `f` (one large write transaction) with the store switched from WAL to a rollback journal
    /// (`journal_mode=TRUNCATE`) when this is the only connection to it, and back to WAL afterwards.
    ///
    /// Why: in WAL mode every page of a large transaction is written twice, into the WAL at commit
    /// and into the database by the checkpoint. With a rollback journal, new pages go straight into
    /// the database file and only the pages that existed before are copied to the journal.
    /// Atomicity and durability are unchanged: `synchronous=FULL` syncs the journal before the
    /// database is written and the database before the journal is truncated (the commit point), and
    /// an interrupted transaction is rolled back from the hot journal by the next opener.
    ///
    /// If another connection has the store open, the switch is refused at once (no busy wait) and
    /// `f` runs in WAL mode as usual. If switching back fails (another process opened the store in
    /// between), the next [`Store::open`] puts WAL mode back. Returns `f`'s result and whether the
    /// rollback journal was used.
    pub fn with_bulk_journal<T>(&mut self, f: impl FnOnce(&mut Store) -> T) -> (T, bool) {
        let file_backed = self.path != Path::new(":memory:");
        let switched = file_backed
            && self.conn.busy_timeout(std::time::Duration::ZERO).is_ok()
            && self
                .conn
                .query_row("PRAGMA journal_mode=TRUNCATE", [], |r| {
                    r.get::<_, String>(0)
                })
                .is_ok_and(|m| m.eq_ignore_ascii_case("truncate"));
        let _ = busy::install(&self.conn);
        let out = f(self);
        if switched {
            let _ = self
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0));
        }
        (out, switched)
    }

    /// Starts a write transaction (`BEGIN IMMEDIATE`): the write lock is taken first, under the
    /// one busy policy ([`busy`]), so whatever the transaction reads (the clock, the head) cannot
    /// change before it writes. A lock held longer than [`BUSY_TIMEOUT`] is [`StoreError::Busy`].
    pub fn begin_write(&mut self) -> Result<rusqlite::Transaction<'_>, StoreError> {
        let path = self.path.clone();
        self.conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| busy_or_sql(e, &path))
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version this store is at.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT MAX(version) FROM schema_migrations", [], |r| {
                r.get::<_, Option<u32>>(0)
            })?
            .unwrap_or(0))
    }

    /// A clock for `node` that resumes from the persisted state of every clock in this store, so it
    /// never issues a timestamp at or below one issued or witnessed before.
    pub fn clock<W: WallClock>(&self, node: &str, wall: W) -> Result<HlcClock<W>, StoreError> {
        let mut clock = HlcClock::with_wall(node, wall)?;
        if let Some(last) = load_clock_state(&self.conn)? {
            clock.resume(last);
        }
        Ok(clock)
    }
}

/// The largest persisted `(physical, logical)` of any clock in the store.
pub fn load_clock_state(conn: &Connection) -> Result<Option<(u64, u32)>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT physical, logical FROM hlc_state ORDER BY physical DESC, logical DESC LIMIT 1",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u32)),
        )
        .optional()?)
}

/// Persists a clock's last timestamp (inside the caller's transaction).
pub fn save_clock_state(conn: &Connection, node: &str, last: (u64, u32)) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO hlc_state (node_id, physical, logical) VALUES (?1, ?2, ?3)
         ON CONFLICT(node_id) DO UPDATE SET physical = excluded.physical, logical = excluded.logical
         WHERE (excluded.physical, excluded.logical) > (hlc_state.physical, hlc_state.logical)",
        rusqlite::params![node, last.0 as i64, last.1 as i64],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A store this user may not write is said to be that, not "not a usable SQLite database"
    /// (as root permissions never refuse, so the code SQLite answers with is given directly).
    #[test]
    fn a_store_this_user_cannot_write_is_not_called_damaged() {
        let code = |c| {
            rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(c), Some("attempt".into()))
        };
        let path = std::path::Path::new("s.db");
        let ro = super::unusable(code(rusqlite::ffi::SQLITE_READONLY), path).to_string();
        assert!(ro.contains("cannot write the store"), "{ro}");
        assert!(!ro.contains("not a usable"), "{ro}");
        let damaged = super::unusable(code(rusqlite::ffi::SQLITE_NOTADB), path).to_string();
        assert!(
            damaged.contains("not a usable SQLite database"),
            "{damaged}"
        );
    }

    /// A full file system is said to be that, with what to do, not only SQLite's own words.
    #[test]
    fn a_full_file_system_is_named_with_what_to_do() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        );
        let t = super::StoreError::Sql(full).to_string();
        assert!(
            t.starts_with("the file system holding the store is full"),
            "{t}"
        );
        assert!(t.contains("rolled back") && t.contains("free space"), "{t}");
        let other = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
            None,
        );
        let t = super::StoreError::Sql(other).to_string();
        assert!(t.starts_with("store error:"), "{t}");
    }

    /// A store in a folder this user may write is not "only readable"; a missing one neither (the
    /// read-only case itself runs as `nobody` in `tests/tui_pty.rs`).
    #[test]
    fn a_writable_or_missing_store_is_not_only_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        assert!(!super::Store::only_readable(&path));
        drop(super::Store::open(&path).unwrap());
        assert!(!super::Store::only_readable(&path));
    }
}
