//! COMMIT with a deadline, and what its failures mean.
//!
//! A COMMIT whose answer never arrives is not a rollback: the server may have committed before the
//! connection died. And with `synchronous_commit` on and `synchronous_standby_names` naming a
//! standby that is down, PostgreSQL 15 commits locally (the commit record is flushed on the primary)
//! and then waits, forever, for the standby; `statement_timeout` does not apply to that wait. Only
//! a cancel request ends it (the server then warns "canceling wait for synchronous replication due
//! to user request", SQLSTATE 01000, "the transaction has already committed locally, but might not
//! have been replicated to the standby", and COMMIT returns success) or ending the backend (it
//! warns the same, with "terminating connection", and closes the connection). So:
//!
//! - [`commit`] sends COMMIT with a watchdog thread that, past the deadline, sends a cancel request
//!   through the driver's cancel token (again every few seconds until COMMIT returns);
//! - the server's warnings during COMMIT are collected ([`on_notice`] is every connection's notice
//!   callback; the synchronous client delivers notices on the thread that runs the statement);
//! - a COMMIT that returns after a cancel, or with the synchronous-replication warning, is
//!   [`PgError::CommitNotReplicated`] (committed and visible on the primary, not confirmed by a
//!   standby); a connection lost while COMMIT was in flight is [`PgError::CommitOutcomeUnknown`];
//!   an error the server answered (a deferred check, a serialization failure) is a rollback, as
//!   before;
//! - a cancel request travels on its own connection and is acted on asynchronously: one sent just
//!   as COMMIT returned can reach the server after it and cancel the next statement on the same
//!   connection. So a connection on which the watchdog sent one runs nothing more: [`commit`]
//!   counts those COMMITs per thread ([`cancelled_commits`]) and the store's connection lease
//!   (`PgConn`) compares the count when it is given back, and the store replaces the connection
//!   before its next use.

use super::PgError;
use postgres::error::{DbError, Severity, SqlState};
use std::cell::{Cell, RefCell};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How long a COMMIT may wait (for a synchronous standby, in practice) before airlock cancels the
/// wait, unless [`TIMEOUT_ENV`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variable that sets the COMMIT deadline in whole seconds (`0`: no deadline).
pub const TIMEOUT_ENV: &str = "AIRLOCK_PG_COMMIT_TIMEOUT";

/// How often the watchdog repeats its cancel request while COMMIT has not returned.
const CANCEL_AGAIN: Duration = Duration::from_secs(2);

/// The COMMIT deadline set by [`TIMEOUT_ENV`], else [`DEFAULT_TIMEOUT`]; `None`: wait forever.
pub fn timeout_from_env() -> Result<Option<Duration>, PgError> {
    parse_timeout(std::env::var(TIMEOUT_ENV).ok().as_deref())
}

fn parse_timeout(value: Option<&str>) -> Result<Option<Duration>, PgError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Some(DEFAULT_TIMEOUT));
    };
    match v.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(s) => Ok(Some(Duration::from_secs(s))),
        Err(_) => Err(PgError::Setting {
            name: TIMEOUT_ENV,
            value: v.to_string(),
            expected: "a whole number of seconds (0: no deadline; unset: 30)",
        }),
    }
}

thread_local! {
    /// The server's notices received on this thread while a [`commit`] runs (`None`: not collecting).
    static NOTICES: RefCell<Option<Vec<DbError>>> = const { RefCell::new(None) };
    /// How many COMMITs on this thread had a cancel request sent for them (see [`cancelled_commits`]).
    static CANCELLED: Cell<u64> = const { Cell::new(0) };
}

/// How many [`commit`]s on this thread had the watchdog send a cancel request (a count that only
/// grows): a connection used by a COMMIT that raised it may still receive that request, late, and
/// must run nothing more (a statement sent on it could be the one cancelled). A connection is used
/// on one thread, so comparing the count before and after a stretch of use tells whether it is
/// affected (a COMMIT of another connection on the same thread in between counts too: that only
/// costs a needless reconnect).
pub fn cancelled_commits() -> u64 {
    CANCELLED.with(Cell::get)
}

/// Every connection's notice callback: logs the notice and keeps it for a running [`commit`].
pub fn on_notice(notice: DbError) {
    match notice.parsed_severity() {
        Some(Severity::Warning) => tracing::warn!(
            code = notice.code().code(),
            "PostgreSQL: {}",
            notice.message()
        ),
        _ => tracing::info!(
            code = notice.code().code(),
            "PostgreSQL: {}",
            notice.message()
        ),
    }
    NOTICES.with(|n| {
        if let Some(list) = n.borrow_mut().as_mut() {
            list.push(notice);
        }
    });
}

/// Collects notices until [`Collecting::finish`] (or drop).
struct Collecting;

impl Collecting {
    fn start() -> Collecting {
        NOTICES.with(|n| *n.borrow_mut() = Some(Vec::new()));
        Collecting
    }

    fn finish(self) -> Vec<DbError> {
        NOTICES.with(|n| n.borrow_mut().take().unwrap_or_default())
    }
}

impl Drop for Collecting {
    fn drop(&mut self) {
        NOTICES.with(|n| *n.borrow_mut() = None);
    }
}

/// Sends cancel requests once the deadline has passed, until disarmed.
struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Watchdog {
    fn arm(client: &postgres::Client, timeout: Option<Duration>) -> Watchdog {
        let Some(timeout) = timeout else {
            return Watchdog {
                done: None,
                thread: None,
            };
        };
        let token = client.cancel_token();
        let (done, rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("airlock-pg-commit-deadline".into())
            .spawn(move || {
                let mut wait = timeout;
                let mut cancelled = false;
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(wait) {
                    if let Err(e) = token.cancel_query(postgres::NoTls) {
                        tracing::warn!("cannot send PostgreSQL a cancel request for a COMMIT past its deadline: {e}");
                    }
                    cancelled = true;
                    wait = CANCEL_AGAIN;
                }
                cancelled
            });
        match thread {
            Ok(t) => Watchdog {
                done: Some(done),
                thread: Some(t),
            },
            Err(e) => {
                tracing::warn!(
                    "no deadline for this COMMIT: cannot start its watchdog thread: {e}"
                );
                Watchdog {
                    done: None,
                    thread: None,
                }
            }
        }
    }

    /// Stops the watchdog; whether it sent a cancel request.
    fn disarm(mut self) -> bool {
        drop(self.done.take());
        self.thread
            .take()
            .is_some_and(|t| t.join().unwrap_or(false))
    }
}

/// Commits the open transaction on `client`, cancelling the wait after `timeout`; see the module
/// documentation for what each failure means.
pub fn commit(client: &mut postgres::Client, timeout: Option<Duration>) -> Result<(), PgError> {
    if client.is_closed() {
        // COMMIT was never sent: the server rolled the transaction back when the connection ended.
        return Err(PgError::Lost("the connection closed before COMMIT".into()));
    }
    let collecting = Collecting::start();
    let watchdog = Watchdog::arm(client, timeout);
    let result = client.batch_execute("COMMIT");
    let cancelled = watchdog.disarm();
    if cancelled {
        CANCELLED.with(|n| n.set(n.get() + 1));
    }
    let notices = collecting.finish();
    let secs = timeout.map(|t| t.as_secs()).unwrap_or(0);
    let said = server_said(&notices);
    match result {
        Ok(()) if !cancelled && !sync_rep_cancelled(&notices) => Ok(()),
        // Returned after our cancel request (or with the server's warning that the wait was
        // cancelled): committed on the primary, replication not confirmed. A COMMIT that finished by
        // itself just as the deadline passed is reported the same way: nothing proves otherwise.
        Ok(()) => Err(PgError::CommitNotReplicated {
            cause: if cancelled {
                format!("COMMIT was still waiting after {secs} s (for a synchronous standby to confirm it) and airlock cancelled the wait")
            } else {
                "COMMIT's wait for a synchronous standby was cancelled on the server (pg_cancel_backend?)".into()
            },
            standbys: standby_names(client),
            said,
        }),
        Err(e) => match (cancelled, super::lost_reason(&e)) {
            (false, None) => Err(e.into()),
            (false, Some(why)) => Err(PgError::CommitOutcomeUnknown { why, said }),
            (true, why) => Err(PgError::CommitOutcomeUnknown {
                why: format!(
                    "COMMIT did not return within {secs} s, airlock cancelled it and it then failed: {}",
                    why.unwrap_or_else(|| PgError::from(e).to_string())
                ),
                said,
            }),
        },
    }
}

/// Whether the server warned that COMMIT's wait for synchronous replication was cancelled (its
/// warnings then carry the plain WARNING code 01000; the text may be translated).
fn sync_rep_cancelled(notices: &[DbError]) -> bool {
    notices
        .iter()
        .any(|n| n.parsed_severity() == Some(Severity::Warning) && *n.code() == SqlState::WARNING)
}

/// The server's warnings during COMMIT, for the message ("" when there were none).
fn server_said(notices: &[DbError]) -> String {
    let said: Vec<String> = notices
        .iter()
        .filter(|n| n.parsed_severity() != Some(Severity::Notice))
        .map(|n| match n.detail() {
            Some(d) => format!("{} ({d})", n.message()),
            None => n.message().to_string(),
        })
        .collect();
    match said.is_empty() {
        true => String::new(),
        false => format!("; the server said: \"{}\"", said.join("\"; \"")),
    }
}

/// `synchronous_standby_names`, for the message.
fn standby_names(client: &mut postgres::Client) -> String {
    client
        .query_one("SHOW synchronous_standby_names", &[])
        .map(|r| r.get::<_, String>(0))
        .unwrap_or_else(|_| "?".into())
}

/// Rolls back after a failed statement, where the connection still allows it.
pub fn rollback_quietly(client: &mut postgres::Client) {
    if !client.is_closed() {
        let _ = client.batch_execute("ROLLBACK");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_whole_seconds_zero_is_none_and_unset_is_thirty() {
        assert_eq!(parse_timeout(None).unwrap(), Some(DEFAULT_TIMEOUT));
        assert_eq!(parse_timeout(Some(" ")).unwrap(), Some(DEFAULT_TIMEOUT));
        assert_eq!(
            parse_timeout(Some("5")).unwrap(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(parse_timeout(Some("0")).unwrap(), None);
        let e = parse_timeout(Some("2s")).unwrap_err().to_string();
        assert!(e.contains(TIMEOUT_ENV) && e.contains("whole number"), "{e}");
    }
}
