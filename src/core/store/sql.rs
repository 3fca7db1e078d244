//! airlock's portable SQL: the statements of the operations tables (the audit log, persisted
//! metrics, the exports serve downloads, the notification queue) are written once, in the subset
//! both engines run the same way, and each backend only translates its dialect:
//!
//! * parameters are written `?1`, `?2`, ... (PostgreSQL receives `$1`, `$2`, ...);
//! * table names are unqualified (PostgreSQL finds them in schema `airlock`: the store's session
//!   `search_path` is `airlock, public`);
//! * upserts are `INSERT ... ON CONFLICT (...) DO NOTHING / DO UPDATE`, an `INSERT ... SELECT` with
//!   `ON CONFLICT` has a `WHERE` clause (SQLite's parser needs it), and a parameter whose type the
//!   statement does not fix is written `CAST(?N AS BIGINT)`;
//! * values are [`Val`]: integers (SQLite INTEGER, PostgreSQL BIGINT), reals and texts.
//!
//! The schema itself is written once too: [`pg_ddl`] turns the embedded store's `CREATE TABLE`
//! text into PostgreSQL's.

use super::backend::StoreTx;
pub use super::value::Val;
use super::StoreError;

/// One result row of a portable query, read by column with the table named in errors.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlRow {
    pub table: &'static str,
    pub values: Vec<Val>,
}

impl SqlRow {
    fn bad(&self, i: usize, want: &str) -> StoreError {
        StoreError::CorruptRow {
            table: self.table,
            position: format!("column {}", i + 1),
            detail: format!("expected {want}, found {:?}", self.values.get(i)),
        }
    }
    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.values.get(i) {
            Some(Val::Int(v)) => Ok(Some(*v)),
            Some(Val::Null) => Ok(None),
            _ => Err(self.bad(i, "an integer")),
        }
    }
    pub fn i64(&self, i: usize) -> Result<i64, StoreError> {
        self.opt_i64(i)?.ok_or_else(|| self.bad(i, "an integer"))
    }
    /// A non-negative integer.
    pub fn u64(&self, i: usize) -> Result<u64, StoreError> {
        u64::try_from(self.i64(i)?).map_err(|_| self.bad(i, "a non-negative integer"))
    }
    pub fn opt_u64(&self, i: usize) -> Result<Option<u64>, StoreError> {
        self.opt_i64(i)?
            .map(|v| u64::try_from(v).map_err(|_| self.bad(i, "a non-negative integer")))
            .transpose()
    }
    pub fn f64(&self, i: usize) -> Result<f64, StoreError> {
        match self.values.get(i) {
            Some(Val::Real(v)) => Ok(*v),
            Some(Val::Int(v)) => Ok(*v as f64),
            _ => Err(self.bad(i, "a number")),
        }
    }
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, StoreError> {
        match self.values.get(i) {
            Some(Val::Text(v)) => Ok(Some(v.clone())),
            Some(Val::Null) => Ok(None),
            _ => Err(self.bad(i, "a text")),
        }
    }
    pub fn text(&self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?.ok_or_else(|| self.bad(i, "a text"))
    }
}

/// Runs a portable statement; returns the rows it changed.
pub fn exec(tx: &mut dyn StoreTx, sql: &str, params: &[Val]) -> Result<u64, StoreError> {
    tx.sql_exec(sql, params)
}

/// Runs a portable query; `table` names the rows in errors.
pub fn query(
    tx: &mut dyn StoreTx,
    table: &'static str,
    sql: &str,
    params: &[Val],
) -> Result<Vec<SqlRow>, StoreError> {
    Ok(tx
        .sql_query(sql, params)?
        .into_iter()
        .map(|values| SqlRow { table, values })
        .collect())
}

/// [`query`] of at most one row.
pub fn query_opt(
    tx: &mut dyn StoreTx,
    table: &'static str,
    sql: &str,
    params: &[Val],
) -> Result<Option<SqlRow>, StoreError> {
    Ok(query(tx, table, sql, params)?.into_iter().next())
}

/// `?N` parameters as PostgreSQL's `$N` (portable statements hold no `?` elsewhere).
pub fn dollar_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// The embedded store's `CREATE TABLE` text as PostgreSQL's: `INTEGER PRIMARY KEY` (a rowid) is
/// `BIGSERIAL PRIMARY KEY`, other `INTEGER`s `BIGINT`, `REAL` `DOUBLE PRECISION`, and
/// `WITHOUT ROWID` goes. Table names stay unqualified: they are created in the first schema of
/// the session's `search_path` (`airlock`).
pub fn pg_ddl(sqlite: &str) -> String {
    sqlite
        .replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
        .replace("INTEGER", "BIGINT")
        .replace(" REAL ", " DOUBLE PRECISION ")
        .replace(") WITHOUT ROWID", ")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_and_schema_translate_to_postgres() {
        assert_eq!(
            dollar_params("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?'"
        );
        assert_eq!(
            pg_ddl("CREATE TABLE t (\n id INTEGER PRIMARY KEY,\n n INTEGER NOT NULL,\n v REAL NOT NULL\n) WITHOUT ROWID;"),
            "CREATE TABLE t (\n id BIGSERIAL PRIMARY KEY,\n n BIGINT NOT NULL,\n v DOUBLE PRECISION NOT NULL\n);"
        );
    }

    #[test]
    fn rows_name_the_table_and_column_of_a_wrong_value() {
        let r = SqlRow {
            table: "audit_log",
            values: vec![Val::Text("x".into()), Val::Int(-1), Val::Null],
        };
        assert_eq!(r.text(0).unwrap(), "x");
        let e = r.u64(1).unwrap_err().to_string();
        assert!(e.contains("audit_log") && e.contains("column 2"), "{e}");
        assert_eq!(r.opt_text(2).unwrap(), None);
        assert!(r.i64(0).is_err());
    }
}
