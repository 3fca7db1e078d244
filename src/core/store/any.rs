//! Choosing a store from what the operator wrote in `--db` / `AIRLOCK_DB`: a file path is the
//! embedded SQLite store, a `postgres://` or `postgresql://` URL is PostgreSQL, and any other URL
//! scheme is refused (it is never taken as a file name).

use super::backend::{Backend, StoreTx, TxKind};
use super::postgres::{is_postgres_url, redact, PgStore};
use super::{Store, StoreError};
use std::path::{Path, PathBuf};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The embedded store: a SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (libpq URI).
    Postgres(String),
}

/// Why a `--db` value names no store airlock can open.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error("--db {0:?}: airlock does not support {1}:// stores; give a SQLite file path or a postgres:// (postgresql://) URL")]
    UnsupportedScheme(String, String),
    #[error("--db {0:?} is not a PostgreSQL URL (it needs {1}://); write {1}://USER@HOST/DB or {1}:///DB?host=/socket/dir; nothing was created")]
    MistypedPostgres(String, String),
}

impl StoreLocation {
    /// Reads a `--db` value. `scheme://...` with a scheme other than postgres / postgresql is an
    /// error; anything else is a file path.
    pub fn parse(raw: &Path) -> Result<StoreLocation, LocationError> {
        let Some(text) = raw.to_str() else {
            return Ok(StoreLocation::Sqlite(raw.to_path_buf()));
        };
        if is_postgres_url(text) {
            return Ok(StoreLocation::Postgres(text.to_string()));
        }
        // A scheme is case-insensitive (RFC 3986, 3.1), and the driver reads it in lower case
        // only: `POSTGRES://...` is that URL, not a mistyped one.
        for scheme in ["postgres://", "postgresql://"] {
            if let Some(rest) = text
                .get(..scheme.len())
                .filter(|s| s.eq_ignore_ascii_case(scheme))
                .map(|_| &text[scheme.len()..])
            {
                return Ok(StoreLocation::Postgres(format!("{scheme}{rest}")));
            }
        }
        // `postgres:/x`, `postgresql:db`: a PostgreSQL URL mistyped, never a file path (it would
        // make a SQLite store in a folder named `postgres:`).
        if let Some(scheme) = ["postgres:", "postgresql:"]
            .iter()
            .find(|p| text.len() > p.len() && text[..p.len()].eq_ignore_ascii_case(p))
        {
            // Whatever precedes an `@` may hold a password: not shown.
            let shown = match text.rsplit_once('@') {
                Some((_, host)) => format!("{}***@{host}", &text[..scheme.len()]),
                None => redact(text),
            };
            return Err(LocationError::MistypedPostgres(
                shown,
                scheme.trim_end_matches(':').to_string(),
            ));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            let is_scheme = !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if is_scheme {
                return Err(LocationError::UnsupportedScheme(
                    redact(text),
                    scheme.to_string(),
                ));
            }
        }
        Ok(StoreLocation::Sqlite(raw.to_path_buf()))
    }

    /// For messages: the file path, or the URL without its password.
    pub fn display(&self) -> String {
        match self {
            StoreLocation::Sqlite(p) => crate::core::text::visible_path(p),
            StoreLocation::Postgres(u) => crate::core::text::visible(&redact(u)).into_owned(),
        }
    }
}

/// A `--db` value for messages: the file path, or the URL without its password.
pub fn display_db(raw: &Path) -> String {
    match StoreLocation::parse(raw) {
        Ok(l) => l.display(),
        Err(_) => crate::core::text::visible(&redact(&raw.to_string_lossy())).into_owned(),
    }
}

/// An open store of either kind. Engine rules take it as `&dyn Backend`.
pub enum AnyStore {
    Sqlite(Store),
    Postgres(PgStore),
}

impl AnyStore {
    /// Opens the store a `--db` value names ([`StoreLocation::parse`]).
    pub fn open_db(raw: &Path) -> Result<AnyStore, StoreError> {
        AnyStore::open(&StoreLocation::parse(raw)?)
    }

    /// [`AnyStore::open`] that refuses a SQLite store file that does not exist yet (a PostgreSQL
    /// store is a server's: opened as configured).
    pub fn open_existing(at: &StoreLocation) -> Result<AnyStore, StoreError> {
        Ok(match at {
            StoreLocation::Sqlite(p) => AnyStore::Sqlite(Store::open_existing(p)?),
            StoreLocation::Postgres(u) => AnyStore::Postgres(PgStore::connect(u)?),
        })
    }

    /// [`AnyStore::open_existing`] for a command that only reads: a SQLite store this user cannot
    /// write is read read-only ([`Store::open_for_reading`]).
    pub fn open_for_reading(at: &StoreLocation) -> Result<AnyStore, StoreError> {
        Ok(match at {
            StoreLocation::Sqlite(p) => AnyStore::Sqlite(Store::open_for_reading(p)?),
            StoreLocation::Postgres(u) => AnyStore::Postgres(PgStore::connect(u)?),
        })
    }

    /// [`AnyStore::open_for_reading`] (a dry run writes nothing: a store this user cannot write
    /// is read read-only), but a SQLite store that is not there is an empty one in memory (a dry
    /// run plans against it; no file is created).
    pub fn open_or_empty(at: &StoreLocation) -> Result<AnyStore, StoreError> {
        match at {
            StoreLocation::Sqlite(p) if !p.exists() => {
                Ok(AnyStore::Sqlite(Store::open_in_memory()?))
            }
            _ => AnyStore::open_for_reading(at),
        }
    }

    pub fn open(at: &StoreLocation) -> Result<AnyStore, StoreError> {
        Ok(match at {
            StoreLocation::Sqlite(p) => AnyStore::Sqlite(Store::open(p)?),
            StoreLocation::Postgres(u) => AnyStore::Postgres(PgStore::connect(u)?),
        })
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyStore::Sqlite(_) => "sqlite",
            AnyStore::Postgres(_) => "postgres",
        }
    }

    /// Imports bundles (SPEC section 7): on SQLite with its bulk-write tuning
    /// ([`crate::core::import::import`]), on PostgreSQL with `COPY` under the tenant's chain lock.
    pub fn import(
        &mut self,
        paths: &[PathBuf],
        opts: &crate::core::import::ImportOptions<'_>,
    ) -> Result<crate::core::import::ImportResult, crate::core::import::ImportError> {
        match self {
            AnyStore::Sqlite(s) => crate::core::import::import(s, paths, opts),
            AnyStore::Postgres(p) => crate::core::import::import_into(p, paths, opts),
        }
    }
}

impl Backend for AnyStore {
    fn begin(&self, kind: TxKind) -> Result<Box<dyn StoreTx + '_>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.begin(kind),
            AnyStore::Postgres(p) => p.begin(kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_select_postgres_and_other_schemes_are_refused() {
        let p = |s: &str| StoreLocation::parse(Path::new(s));
        assert_eq!(
            p("postgres://u@h/db").unwrap(),
            StoreLocation::Postgres("postgres://u@h/db".into())
        );
        assert!(matches!(
            p("postgresql://u@%2Ftmp/db").unwrap(),
            StoreLocation::Postgres(_)
        ));
        // Any case of the scheme; the driver is given it in lower case.
        assert_eq!(
            p("POSTGRES://u@h/db").unwrap(),
            StoreLocation::Postgres("postgres://u@h/db".into())
        );
        assert_eq!(
            p("PostgreSQL://u@%2Ftmp/DB").unwrap(),
            StoreLocation::Postgres("postgresql://u@%2Ftmp/DB".into())
        );
        assert_eq!(
            p("data/airlock.db").unwrap(),
            StoreLocation::Sqlite("data/airlock.db".into())
        );
        assert_eq!(
            p("odd:name.db").unwrap(),
            StoreLocation::Sqlite("odd:name.db".into())
        );
        for bad in [
            "mysql://root@h/db",
            "sqlite:///tmp/x.db",
            "http://x",
            "postgre://x",
        ] {
            let e = p(bad).unwrap_err().to_string();
            assert!(e.contains("does not support"), "{bad}: {e}");
        }
        let e = p("mysql://root:hunter2@h/db").unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        // A PostgreSQL URL missing a slash is refused, not taken for a path under `postgres:`.
        for typo in [
            "postgres:/x",
            "postgresql:db",
            "POSTGRES:/x",
            "postgres:/u:pw@h/db",
        ] {
            let e = p(typo).unwrap_err().to_string();
            assert!(
                e.contains("is not a PostgreSQL URL") && !e.contains(":pw@"),
                "{typo}: {e}"
            );
        }
    }
}
