//! Checks on a SQLite file before airlock takes it as one of its own databases (the store, the
//! relay's outbox): someone else's database is refused, not given our tables.

use rusqlite::Connection;

/// Whether the `-wal` file beside the database at `path` holds frames (commits not yet
/// checkpointed into the main file): a database in WAL mode is then more than its main file.
pub fn wal_has_frames(path: &std::path::Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::symlink_metadata(std::path::PathBuf::from(wal)).is_ok_and(|m| m.len() > 0)
}

/// Whether this user may write `path` (`access(2)` with `W_OK`: permissions and read-only mounts;
/// root may write anything not on a read-only mount).
pub fn may_write(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Why the database file at `path`, which is there, cannot be written by this user, if it cannot:
/// the file, or its folder (SQLite keeps `-wal`, `-shm` and journal files beside it), is not
/// writable. Asked of the file system without opening the database. SQLite itself does not say so
/// when the file is already in WAL mode: switching it to WAL succeeds and only the first write
/// fails ("attempt to write a readonly database"), long after a service said it was ready.
pub fn not_writable(path: &std::path::Path) -> Option<String> {
    if !path.is_file() {
        return None;
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !may_write(path) {
        Some("the file is read-only for this user".to_string())
    } else if !may_write(folder) {
        Some(format!(
            "its directory {} is read-only for this user",
            crate::core::text::visible_path(folder)
        ))
    } else {
        None
    }
}

/// Opens the SQLite database at `path` for reading only, never creating or changing a file.
///
/// A database in WAL mode needs its `-shm` index to be read, and a reader who cannot write the
/// folder (a store or outbox on a read-only medium, or in someone else's directory) cannot create
/// it: SQLite then refuses at the first read. When the `-wal` beside the file holds no frames, no
/// connection is writing the database (the last to close checkpoints and removes both), so the
/// main file is the whole database and it is read as `immutable` (no `-shm`, no locks). With
/// frames in the `-wal` the error stands: those commits are not in the main file, and reading it
/// alone would show an older database.
pub fn read_only_connection(path: &std::path::Path) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // SQLite opens lazily: the first read is what needs the `-shm`.
    let probe = |c: Connection| {
        c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map(|()| c)
    };
    match Connection::open_with_flags(path, flags).and_then(probe) {
        // CANTOPEN, or READONLY_CANTINIT ("attempt to write a readonly database"): no `-shm`.
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
            ) && !wal_has_frames(path) =>
        {
            let uri = format!("file:{}?immutable=1", uri_path(path));
            Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI).and_then(probe)
        }
        other => other,
    }
}

/// `path` as the path of a `file:` URI: every byte but unreserved ones and `/` percent-encoded.
fn uri_path(path: &std::path::Path) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'/');
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    percent_encoding::percent_encode(&bytes, KEEP).to_string()
}

/// Why SQLite would not keep airlock's database in a file named `path`, or `None` for an ordinary
/// file path: `:memory:` names a private in-memory database and a `file:` name is a URI (rusqlite
/// opens with URI names on: `file::memory:`, `file:x?mode=memory`). An in-memory store or outbox
/// acknowledges every write and loses it when the process exits, so such a name is refused
/// before anything is made; a file of that name is reachable as `./NAME`.
pub fn not_a_file_name(path: &std::path::Path) -> Option<String> {
    let text = path.to_str()?;
    (text == ":memory:" || text.starts_with("file:")).then(|| {
        format!(
            "SQLite takes {:?} for an in-memory database or a URI, not a file name: nothing \
             written there would be kept. Give a file path (./{} for a file of that name)",
            text,
            crate::core::text::visible(text)
        )
    })
}

/// The tables of a database that is not ours: when the file has tables but not `marker` (the
/// schema table every airlock database of that kind has: `schema_migrations` for the store,
/// `outbox_schema` for the relay's outbox), their names (at most five, control characters made
/// visible), so opening it refuses
/// instead of adding our tables (and WAL mode) to someone else's database. Empty for a new file,
/// one of ours, or a file SQLite cannot read (its own open error says more).
pub fn foreign_tables(conn: &Connection, marker: &str) -> Vec<String> {
    let names = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    );
    let Ok(mut stmt) = names else {
        return Vec::new();
    };
    let Ok(rows) = stmt.query_map([], |r| r.get::<_, String>(0)) else {
        return Vec::new();
    };
    let tables: Vec<String> = rows.map_while(Result::ok).collect();
    if tables.iter().any(|t| t == marker) {
        return Vec::new();
    }
    // The names are someone else's text on their way into a message: made visible here.
    tables
        .iter()
        .take(5)
        .map(|t| crate::core::text::visible(t).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::foreign_tables;

    #[test]
    fn a_database_without_our_schema_table_is_foreign() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        assert!(foreign_tables(&c, "schema_migrations").is_empty());
        c.execute_batch("CREATE TABLE customers (id INT); CREATE TABLE orders (id INT);")
            .unwrap();
        assert_eq!(
            foreign_tables(&c, "schema_migrations"),
            ["customers", "orders"]
        );
        c.execute_batch("CREATE TABLE schema_migrations (version INT);")
            .unwrap();
        assert!(foreign_tables(&c, "schema_migrations").is_empty());
        assert_eq!(foreign_tables(&c, "outbox_schema").len(), 3);
        let d = rusqlite::Connection::open_in_memory().unwrap();
        d.execute_batch("CREATE TABLE \"x\x1b[2Jy\" (id INT);")
            .unwrap();
        assert_eq!(foreign_tables(&d, "schema_migrations"), ["x\\x1b[2Jy"]);
    }
}
