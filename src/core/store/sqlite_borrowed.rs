//! A SQLite statement whose parameters borrow the caller's bytes (`SQLITE_STATIC`) instead of
//! copying them: bulk inserts bind about a dozen values per row, and rusqlite's binding copies
//! every text and blob into a freshly allocated value first (`SQLITE_TRANSIENT`), which cost the
//! import's writer thread about a sixth of its time.
//!
//! Safety by construction: every bound value is borrowed for `'a`, and the statement cannot
//! outlive `'a`, so SQLite never reads a value after it was freed. The statement is finalized
//! when dropped.

use rusqlite::{ffi, Connection};
use std::ffi::c_int;
use std::marker::PhantomData;

/// One prepared statement on `conn`, its bound values borrowed for `'a`.
pub(super) struct BorrowedStmt<'a> {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
    _values: PhantomData<&'a [u8]>,
}

/// The error SQLite reports for `rc` on `db` (the same form rusqlite gives).
fn error(db: *mut ffi::sqlite3, rc: c_int) -> rusqlite::Error {
    // SAFETY: `db` is a live connection handle; the message is copied before any other call.
    let message = unsafe {
        let m = ffi::sqlite3_errmsg(db);
        (!m.is_null()).then(|| std::ffi::CStr::from_ptr(m).to_string_lossy().into_owned())
    };
    // SAFETY: as above.
    let code = match unsafe { ffi::sqlite3_extended_errcode(db) } {
        0 => rc,
        c => c,
    };
    rusqlite::Error::SqliteFailure(ffi::Error::new(code), message)
}

fn len_of(n: usize) -> rusqlite::Result<c_int> {
    c_int::try_from(n).map_err(|_| rusqlite::Error::ToSqlConversionFailure("value too long".into()))
}

impl<'a> BorrowedStmt<'a> {
    /// Prepares `sql` (one statement) on `conn`.
    pub(super) fn prepare(conn: &'a Connection, sql: &str) -> rusqlite::Result<Self> {
        // SAFETY: the handle stays valid while `conn` is borrowed (for 'a); this module only
        // prepares, binds, steps, resets and finalizes its own statement on it.
        let db = unsafe { conn.handle() };
        let mut stmt = std::ptr::null_mut();
        // SAFETY: `sql` is valid for its length; `stmt` receives the new statement.
        let rc = unsafe {
            ffi::sqlite3_prepare_v2(
                db,
                sql.as_ptr().cast(),
                len_of(sql.len())?,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        if rc != ffi::SQLITE_OK || stmt.is_null() {
            return Err(error(db, rc));
        }
        Ok(BorrowedStmt {
            db,
            stmt,
            _values: PhantomData,
        })
    }

    fn check(&self, rc: c_int) -> rusqlite::Result<()> {
        match rc {
            ffi::SQLITE_OK => Ok(()),
            rc => Err(error(self.db, rc)),
        }
    }

    /// Binds parameter `i` (1-based) to a text, or NULL.
    pub(super) fn text(&mut self, i: usize, v: Option<&'a str>) -> rusqlite::Result<()> {
        self.bytes(i, v.map(str::as_bytes), true)
    }

    /// Binds parameter `i` to a blob, or NULL.
    pub(super) fn blob(&mut self, i: usize, v: Option<&'a [u8]>) -> rusqlite::Result<()> {
        self.bytes(i, v, false)
    }

    /// Binds parameter `i` to `v` as a text (UTF-8: it came from a `&str`) or a blob, or NULL.
    fn bytes(&mut self, i: usize, v: Option<&'a [u8]>, text: bool) -> rusqlite::Result<()> {
        let Some(b) = v else {
            return self.null(i);
        };
        let (ptr, len) = (b.as_ptr(), len_of(b.len())?);
        // SAFETY: `b` lives for 'a, longer than the statement (SQLITE_STATIC: not copied); a text
        // is UTF-8, being a `&str`'s bytes.
        let rc = unsafe {
            if text {
                ffi::sqlite3_bind_text(self.stmt, i as c_int, ptr.cast(), len, ffi::SQLITE_STATIC())
            } else {
                ffi::sqlite3_bind_blob(self.stmt, i as c_int, ptr.cast(), len, ffi::SQLITE_STATIC())
            }
        };
        self.check(rc)
    }

    /// Binds parameter `i` to an integer, or NULL.
    pub(super) fn int(&mut self, i: usize, v: Option<i64>) -> rusqlite::Result<()> {
        match v {
            None => self.null(i),
            // SAFETY: a live statement.
            Some(v) => self.check(unsafe { ffi::sqlite3_bind_int64(self.stmt, i as c_int, v) }),
        }
    }

    fn null(&mut self, i: usize) -> rusqlite::Result<()> {
        // SAFETY: a live statement.
        self.check(unsafe { ffi::sqlite3_bind_null(self.stmt, i as c_int) })
    }

    /// Runs the statement (one that returns no rows) with the values bound now, and resets it
    /// (the bindings stay).
    pub(super) fn execute(&mut self) -> rusqlite::Result<()> {
        // SAFETY: a live statement whose bound values are all alive ('a).
        let rc = unsafe { ffi::sqlite3_step(self.stmt) };
        // SAFETY: as above; reset returns the step's error again, which is reported below.
        unsafe { ffi::sqlite3_reset(self.stmt) };
        match rc {
            ffi::SQLITE_DONE => Ok(()),
            ffi::SQLITE_ROW => Err(rusqlite::Error::ExecuteReturnedResults),
            rc => Err(error(self.db, rc)),
        }
    }
}

impl Drop for BorrowedStmt<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement was prepared by `prepare` and is finalized once, here.
        unsafe { ffi::sqlite3_finalize(self.stmt) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values bound without copying are stored as given; errors carry SQLite's message.
    #[test]
    fn binds_borrowed_values_and_reports_errors() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT, b BLOB, c INTEGER, d TEXT PRIMARY KEY)")
            .unwrap();
        let (text, blob) = (String::from("héllo"), vec![0u8, 1, 2]);
        {
            let mut s =
                BorrowedStmt::prepare(&conn, "INSERT INTO t VALUES (?1, ?2, ?3, ?4)").unwrap();
            s.text(1, Some(&text)).unwrap();
            s.blob(2, Some(&blob)).unwrap();
            s.int(3, Some(-7)).unwrap();
            s.text(4, Some("k")).unwrap();
            s.execute().unwrap();
            s.text(1, None).unwrap();
            s.blob(2, None).unwrap();
            s.int(3, None).unwrap();
            let e = s.execute().unwrap_err().to_string();
            assert!(e.contains("UNIQUE constraint failed: t.d"), "{e}");
        }
        let row: (String, Vec<u8>, i64) = conn
            .query_row("SELECT a, b, c FROM t", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!(row, (text, blob, -7));
        let e = BorrowedStmt::prepare(&conn, "INSERT INTO nope VALUES (1)")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no such table: nope"), "{e}");
    }
}
