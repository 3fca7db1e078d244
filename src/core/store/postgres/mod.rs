//! The PostgreSQL store (SPEC section 14), for sites with several importers, consoles and services
//! sharing one store. Same rules as the embedded store (they run over [`super::backend::StoreTx`]);
//! this module only connects, migrates, and reads and writes rows.
//!
//! Schema: `scheduler` holds the seed's three tables exactly as the seed writes them
//! (`scheduler_log`, `batch_snapshot`, `chain_heads`); `airlock` holds airlock's own tables beside
//! them: `chain_entry` (per scheduler_log row: the tenant chain position, the canonical payload
//! text every digest is computed from, and an imported entry's provenance), `chain_jobs`,
//! `chain_state` (chain length), `snapshot_range` (a snapshot's tenant and first position),
//! `imports`, `node_log`, `hlc_state`, `ledger_event` and `schema_migrations`, and the operations
//! tables of the embedded store with the same names and columns (`audit_log`, `metric_samples`,
//! `exports`, `notify_*`), which the engine reads and writes with one portable SQL text
//! (the store's `sql` module; the session's `search_path` is `airlock, public`).
//!
//! Layout: this file connects and holds [`PgStore`] (its connection lent out as [`PgConn`], and
//! replaced after a cancelled COMMIT) and [`PgError`]; `migrations` the versioned
//! schema, `tx` the [`StoreTx`](super::backend::StoreTx) implementation, `copy` the `COPY ... FROM
//! STDIN BINARY` row writer, `check` the index check before appends (amcheck), `commit` COMMIT with
//! a deadline and what its failures mean, `durability` the REGIONAL / GLOBAL confirmations of
//! ledger events.

mod check;
pub mod commit;
mod copy;
pub mod durability;
mod migrations;
mod tx;
mod value;

pub use migrations::latest as latest_schema_version;

use super::backend::{Backend, StoreTx, TxKind};
use super::StoreError;
use std::cell::{Cell, RefCell};
use std::str::FromStr;

/// A PostgreSQL failure, with the server's message and what to do where that is knowable.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("{0} is not a PostgreSQL URL: {1}; write postgres://USER@HOST/DB or postgresql://USER@%2Fsocket%2Fdir/DB")]
    Url(String, String),
    #[error("cannot connect to PostgreSQL at {target}: {message}; is the server running and the URL right?")]
    Connect { target: String, message: String },
    #[error("the PostgreSQL store has schema version {found}, newer than this airlock understands ({known}); upgrade airlock")]
    TooNew { found: u32, known: u32 },
    #[error("PostgreSQL: {0}")]
    Server(String),
    #[error("the PostgreSQL server went away ({0}); the transaction was rolled back, nothing it wrote was kept")]
    Lost(String),
    /// The connection ended while COMMIT was in flight: the server may have committed.
    #[error("the connection to PostgreSQL was lost while COMMIT was in flight ({why}){said}. The outcome is unknown: what this command wrote (an import, an append, ...) may or may not have been kept. Check before going on: run the import again (it is idempotent and says \"nothing to do\" if the first one landed), or look with `airlock chain verify --tenant T` and `airlock chain show --tenant T` (imported bundles are rows of airlock.imports); do not repeat an append before you have looked")]
    CommitOutcomeUnknown { why: String, said: String },
    /// COMMIT's wait for a synchronous standby was cancelled: committed on the primary only.
    #[error("{cause} (synchronous_standby_names = {standbys:?}: is the synchronous standby down or unreachable?){said}. The outcome is only half known: the transaction is committed and visible on this primary, but no synchronous standby confirmed it, so a failover now could lose it. Bring the standby back (or correct synchronous_standby_names) and it catches up; do not repeat the command expecting a retry: an import run again says \"nothing to do\", `airlock chain show` lists an append. If the standby is only slow, raise {env} (seconds, default 30; 0 waits forever)", env = commit::TIMEOUT_ENV)]
    CommitNotReplicated {
        cause: String,
        standbys: String,
        said: String,
    },
    #[error("{name}={value:?} is not {expected}")]
    Setting {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    /// The database holds tables in airlock's schemas that airlock did not make.
    #[error("database {database:?} ({target}) already holds {} that airlock did not create (it has no airlock.schema_migrations record); nothing was changed. airlock makes its tables in schemas scheduler and airlock: give it an empty database (CREATE DATABASE airlock), or move those tables out of schemas scheduler and airlock (ALTER TABLE ... SET SCHEMA) if they belong to something else", tables.join(", "))]
    Foreign {
        database: String,
        target: String,
        tables: Vec<String>,
    },
    /// A pending migration step would create objects that are already there.
    #[error("database {database:?} ({target}) is at airlock schema version {found}, and bringing it to version {upto} would create what is already there and airlock did not create: {}; nothing was changed. Something other than airlock made them in airlock's schemas: move them out of its way (ALTER TABLE ... SET SCHEMA or RENAME TO, ALTER TABLE ... RENAME COLUMN) or drop them if nothing needs them, then run airlock again", objects.join(", "))]
    Occupied {
        database: String,
        target: String,
        found: u32,
        upto: u32,
        objects: Vec<String>,
    },
    #[error("the stored row is damaged: {0}; run `airlock chain verify`")]
    Damaged(String),
    #[error("the PostgreSQL store is damaged: amcheck's bt_index_check of index {index} failed ({message}); nothing was written. Rebuild it with `REINDEX INDEX {index}` (or restore the database from a backup), then try again")]
    IndexDamaged { index: String, message: String },
}

/// Why the connection is gone, when `e` says it is: closed, an I/O error, or the server ended the
/// session (FATAL, e.g. `pg_terminate_backend`, shutdown, crash).
fn lost_reason(e: &postgres::Error) -> Option<String> {
    use postgres::error::Severity;
    let fatal = e.as_db_error().is_some_and(|d| {
        matches!(d.parsed_severity(), Some(Severity::Fatal | Severity::Panic))
            || matches!(d.severity(), "FATAL" | "PANIC")
    });
    if e.is_closed() || fatal || e.as_db_error().is_none() && is_io(e) {
        return Some(match e.as_db_error() {
            Some(d) => d.message().to_string(),
            None => e.to_string(),
        });
    }
    None
}

impl From<postgres::Error> for PgError {
    fn from(e: postgres::Error) -> Self {
        // The connection is gone before COMMIT was sent (see `commit` for a COMMIT in flight):
        // the server rolls back what was open.
        if let Some(why) = lost_reason(&e) {
            return PgError::Lost(why);
        }
        match e.as_db_error() {
            Some(db) => PgError::Server(match db.detail() {
                Some(d) => format!("{} ({d})", db.message()),
                None => db.message().to_string(),
            }),
            None => PgError::Server(e.to_string()),
        }
    }
}

fn is_io(e: &postgres::Error) -> bool {
    use std::error::Error as _;
    let mut src = e.source();
    while let Some(s) = src {
        if s.is::<std::io::Error>() {
            return true;
        }
        src = s.source();
    }
    false
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> Self {
        StoreError::Postgres(e.into())
    }
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        StoreError::Postgres(e)
    }
}

/// Whether `db` names a PostgreSQL store (`postgres://` or `postgresql://`).
pub fn is_postgres_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// `url` without its password, for messages: the one in the user part (`user:***@`) and a
/// `password=` query parameter (`password=***`), wherever they are.
///
/// The driver ends the user part at the first `@` of the URL, even past a `?` (a password holding
/// a `?`: `u:se?cret@h` sends the password `se?cret`); such a user part is masked as the driver
/// reads it, where cutting the query off first showed the whole password.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let first_q = rest.find('?').unwrap_or(rest.len());
    if let Some(at) = rest.find('@').filter(|&at| at > first_q) {
        if let Some((user, _)) = rest[..at].split_once(':') {
            // A "user" holding the `?` may hold a query's password: not shown either.
            let user = if user.contains('?') { "***" } else { user };
            let tail = redact(&format!("{scheme}://{}", &rest[at + 1..]));
            let tail = tail.strip_prefix(&format!("{scheme}://")).unwrap_or(&tail);
            return format!("{scheme}://{user}:***@{tail}");
        }
    }
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let mut out = match rest.rsplit_once('@') {
        Some((auth, host)) => {
            let user = auth.split(':').next().unwrap_or("");
            let masked = if auth.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{masked}@{host}")
        }
        None => format!("{scheme}://{rest}"),
    };
    if let Some(q) = query {
        let params: Vec<String> = q
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

/// How long an unanswered TCP connection to the server may stay open: keepalive probes start after
/// [`KEEPALIVE_IDLE`] of silence and go every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_RETRIES`] times;
/// data the server never acknowledges is given up on after [`TCP_USER_TIMEOUT`]. libpq's defaults
/// (probes after two hours, no user timeout) would leave a COMMIT to a partitioned server waiting
/// for the operating system, about 15 minutes, beyond the reach of the COMMIT deadline's cancel.
pub const KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(15);
/// See [`KEEPALIVE_IDLE`].
pub const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);
/// See [`KEEPALIVE_IDLE`].
pub const KEEPALIVE_RETRIES: u32 = 3;
/// See [`KEEPALIVE_IDLE`].
pub const TCP_USER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The driver configuration for `url`: the URL's own settings win; what it leaves out gets
/// airlock's defaults (application name, a 10 s connect timeout, and the keepalive and TCP user
/// timeout above, so a server that vanishes from the network is noticed within about 30 s).
/// Unix-socket connections ignore the TCP settings.
fn connection_config(url: &str, target: &str) -> Result<postgres::Config, PgError> {
    let mut config = postgres::Config::from_str(url)
        .map_err(|e| PgError::Url(target.to_string(), e.to_string()))?;
    if config.get_application_name().is_none() {
        config.application_name("airlock");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    // `Config` has no "was it set" for these, so look for the parameter names in the URL.
    let given = |name: &str| url.contains(name);
    if config.get_keepalives() {
        if !given("keepalives_idle") {
            config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if !given("keepalives_interval") {
            config.keepalives_interval(KEEPALIVE_INTERVAL);
        }
        if !given("keepalives_retries") {
            config.keepalives_retries(KEEPALIVE_RETRIES);
        }
    }
    if !given("tcp_user_timeout") {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    Ok(config)
}

/// An open PostgreSQL store: one connection, schema up to date. The connection is replaced (the
/// same settings, a new session) before its next use when a COMMIT on it had a cancel request sent
/// (see [`commit`]: the request may still arrive and cancel whatever runs next) or when it closed.
pub struct PgStore {
    /// Boxed: a client is large, and `AnyStore` holds a store by value.
    client: RefCell<Box<postgres::Client>>,
    /// Whether `client` must be replaced before it runs another statement.
    replace: Cell<bool>,
    /// The settings `client` was opened with, to open its replacement (boxed, as `client`).
    config: Box<postgres::Config>,
    target: String,
    /// How long a COMMIT may wait before airlock cancels the wait (`None`: forever).
    commit_timeout: Option<std::time::Duration>,
}

/// Opens a session with airlock's settings.
fn open(config: &postgres::Config, target: &str) -> Result<postgres::Client, PgError> {
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|e| PgError::Connect {
            target: target.to_string(),
            // The server's own words ("password authentication failed for user ...",
            // "database ... does not exist"), not the client's bare "db error".
            message: e
                .as_db_error()
                .map(|d| d.message().to_string())
                .unwrap_or_else(|| crate::core::text::error_chain(&e)),
        })?;
    // airlock's portable statements name its tables unqualified (see `store::sql`).
    client.batch_execute("SET search_path TO airlock, public")?;
    Ok(client)
}

/// The store's connection while one user (a transaction, a durability confirmation) holds it.
/// When given back after a COMMIT on it had a cancel request sent, the store is told to replace it.
pub struct PgConn<'a> {
    client: std::cell::RefMut<'a, Box<postgres::Client>>,
    replace: &'a Cell<bool>,
    /// [`commit::cancelled_commits`] when the lease began.
    cancels_before: u64,
}

impl std::ops::Deref for PgConn<'_> {
    type Target = postgres::Client;
    fn deref(&self) -> &postgres::Client {
        &self.client
    }
}

impl std::ops::DerefMut for PgConn<'_> {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        &mut self.client
    }
}

impl Drop for PgConn<'_> {
    fn drop(&mut self) {
        if commit::cancelled_commits() != self.cancels_before {
            self.replace.set(true);
        }
    }
}

impl PgStore {
    /// Connects to `url` (libpq URI syntax; a Unix socket directory may be the host, percent-encoded
    /// or as `?host=/dir`) and brings the schema up to date. COMMITs wait at most
    /// [`commit::TIMEOUT_ENV`] seconds (default [`commit::DEFAULT_TIMEOUT`]).
    pub fn connect(url: &str) -> Result<PgStore, PgError> {
        let commit_timeout = commit::timeout_from_env()?;
        let target = redact(url);
        let mut config = connection_config(url, &target)?;
        // The server's warnings during COMMIT tell whether a synchronous-replication wait was cut.
        config.notice_callback(commit::on_notice);
        let mut client = open(&config, &target)?;
        migrations::migrate(&mut client, &target, commit_timeout)?;
        Ok(PgStore {
            client: RefCell::new(Box::new(client)),
            replace: Cell::new(false),
            config: Box::new(config),
            target,
            commit_timeout,
        })
    }

    /// Sets how long a COMMIT may wait (for a synchronous standby) before airlock cancels the wait
    /// and reports [`PgError::CommitNotReplicated`]; `None` waits forever.
    pub fn set_commit_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.commit_timeout = timeout;
    }

    /// The URL connected to, without its password.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The schema version this store is at.
    pub fn schema_version(&self) -> Result<u32, PgError> {
        migrations::current(&mut *self.connection()?)
    }

    /// The connection, replaced first where it must be; an error when it is in use (a
    /// transaction is open) or its replacement cannot be opened.
    pub fn connection(&self) -> Result<PgConn<'_>, PgError> {
        let mut client = self.client.try_borrow_mut().map_err(|_| {
            PgError::Server("a transaction is already open on this connection".into())
        })?;
        self.renew(&mut client)?;
        Ok(PgConn {
            client,
            replace: &self.replace,
            cancels_before: commit::cancelled_commits(),
        })
    }

    /// The connection, for tests and tools that cannot handle an error here: [`PgStore::connection`],
    /// except that when the replacement the connection needs cannot be opened, this says so in the
    /// log and gives the old one (its next statement may then be cancelled by a late cancel
    /// request, or fail with the connection). Panics when the connection is in use. The engine's
    /// callers (ledger confirmations in `ledger append` and serve) use [`PgStore::connection`] and
    /// report the error.
    pub fn client(&self) -> PgConn<'_> {
        let mut client = self.client.borrow_mut();
        if let Err(e) = self.renew(&mut client) {
            tracing::warn!("{e}; going on with the old connection");
        }
        PgConn {
            client,
            replace: &self.replace,
            cancels_before: commit::cancelled_commits(),
        }
    }

    /// Replaces `client` (a new session, the same settings) when a COMMIT on it had a cancel
    /// request sent or it closed.
    fn renew(&self, client: &mut Box<postgres::Client>) -> Result<(), PgError> {
        if !self.replace.get() && !client.is_closed() {
            return Ok(());
        }
        let why = match self.replace.get() {
            true => "a COMMIT on it was cancelled and a late cancel request could hit the next statement",
            false => "it closed",
        };
        **client = open(&self.config, &self.target)?;
        self.replace.set(false);
        tracing::info!(
            "opened a new connection to PostgreSQL at {}: {why}",
            self.target
        );
        Ok(())
    }
}

/// For tests: brings the schema of the database at `url` to `version` and no further, as an
/// older airlock would have left it.
#[doc(hidden)]
pub fn migrate_database_to(url: &str, version: u32) -> Result<(), PgError> {
    let target = redact(url);
    let mut config = connection_config(url, &target)?;
    config.notice_callback(commit::on_notice);
    let mut client = open(&config, &target)?;
    migrations::migrate_to(&mut client, &target, commit::timeout_from_env()?, version)
}

impl Backend for PgStore {
    fn begin(&self, kind: TxKind) -> Result<Box<dyn StoreTx + '_>, StoreError> {
        Ok(Box::new(tx::PgTx::begin(
            self.connection()?,
            kind,
            self.commit_timeout,
        )?))
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_partitioned_server_is_given_up_on_within_about_30_s() {
        let c = connection_config("postgres://u@db.example/ops", "t").unwrap();
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        assert_eq!(c.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(10)));
        assert_eq!(c.get_application_name(), Some("airlock"));
        let probes = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_RETRIES;
        assert!(probes <= Duration::from_secs(30) && TCP_USER_TIMEOUT <= Duration::from_secs(30));
    }

    #[test]
    fn the_url_settings_win() {
        let url = "postgres://u@db/ops?keepalives_idle=600&keepalives_interval=60\
                   &keepalives_retries=9&tcp_user_timeout=120&application_name=me\
                   &connect_timeout=3";
        let c = connection_config(url, "t").unwrap();
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(600));
        assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(60)));
        assert_eq!(c.get_keepalives_retries(), Some(9));
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(120)));
        assert_eq!(c.get_application_name(), Some("me"));
        assert_eq!(c.get_connect_timeout(), Some(&Duration::from_secs(3)));
        let off = connection_config("postgres://u@db/ops?keepalives=0", "t").unwrap();
        assert!(!off.get_keepalives());
        assert_eq!(off.get_keepalives_interval(), None);
        assert_eq!(off.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
    }
}

#[cfg(test)]
mod redact_tests {
    #[test]
    fn passwords_are_masked_in_the_user_part_and_the_query() {
        let r = super::redact;
        assert_eq!(r("postgres://u:pw@h:5/db"), "postgres://u:***@h:5/db");
        assert_eq!(
            r("postgresql:///db?host=/s&password=QueryPW9&port=5"),
            "postgresql:///db?host=/s&password=***&port=5"
        );
        assert_eq!(
            r("postgres://u:pw@h/db?password=pw"),
            "postgres://u:***@h/db?password=***"
        );
        assert_eq!(r("postgres://u@h/db"), "postgres://u@h/db");
        // A reserved character in the password, as the driver reads it and as a URL does.
        assert_eq!(r("postgres://u:se?cret@h/db"), "postgres://u:***@h/db");
        assert_eq!(r("postgres://u:s@cr@t@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            r("postgres://u:se#c/r?e&t@h/db?x=1"),
            "postgres://u:***@h/db?x=1"
        );
        assert_eq!(
            r("postgres://u@h/db?application_name=a&password=p@w"),
            "postgres://u@h/db?application_name=a&password=***"
        );
        assert_eq!(
            r("postgres://h/db?password=p@w"),
            "postgres://h/db?password=***"
        );
        assert_eq!(r("postgres://h/db?password=p:q@w"), "postgres://***:***@w");
        assert_eq!(
            r("postgres://u:se?cret@h/db?password=x"),
            "postgres://u:***@h/db?password=***"
        );
        assert_eq!(r("/var/lib/airlock/store.db"), "/var/lib/airlock/store.db");
    }
}
