//! One test body, two stores: [`both_stores!`] runs each body against the embedded SQLite store
//! and a fresh PostgreSQL database (`name::sqlite`, `name::postgres`); [`TestStore`] is an open
//! store of either kind with what a test needs from it (imports, raw SQL for tampering, a dump of
//! everything a chain holds); [`db_arg`] is the `--db` value of either kind for CLI tests;
//! [`webhook_receiver`] counts the notifications a store's queue delivers.
//! Binaries using it also declare `mod pg_support;` (one PostgreSQL cluster per test binary).
#![allow(dead_code)]

use airlock::core::import::{ImportOptions, ImportReport};
use airlock::core::store::any::AnyStore;
use airlock::core::store::backend::{Backend, TxKind};
use airlock::core::store::postgres::PgStore;
use airlock::core::store::rules::{chain_entries, snapshots, tenants};
use airlock::core::store::Store;
use std::path::{Path, PathBuf};

/// Which store a test body runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// The `--db` value of a new store of `kind`: `dir/name` (SQLite), or a fresh PostgreSQL
/// database's URL.
pub fn db_arg(kind: Kind, dir: &Path, name: &str) -> String {
    match kind {
        Kind::Sqlite => dir.join(name).display().to_string(),
        Kind::Postgres => crate::pg_support::fresh_db(),
    }
}

/// Test bodies run once per store kind: `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! both_stores {
    ($(fn $name:ident($s:ident: Kind) $body:block)*) => {$(
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn body($s: $crate::stores::Kind) $body
            #[test]
            fn sqlite() {
                body($crate::stores::Kind::Sqlite)
            }
            #[test]
            fn postgres() {
                body($crate::stores::Kind::Postgres)
            }
        }
    )*};
}

/// A store of one kind, with what keeps it alive.
pub struct TestStore {
    pub dir: Option<tempfile::TempDir>,
    pub store: AnyStore,
}

impl TestStore {
    pub fn new(kind: Kind) -> TestStore {
        match kind {
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let store = AnyStore::Sqlite(Store::open(&dir.path().join("airlock.db")).unwrap());
                TestStore {
                    dir: Some(dir),
                    store,
                }
            }
            Kind::Postgres => TestStore {
                dir: None,
                store: AnyStore::Postgres(
                    PgStore::connect(&crate::pg_support::fresh_db()).unwrap(),
                ),
            },
        }
    }
    pub fn b(&self) -> &dyn Backend {
        &self.store
    }
    pub fn is_pg(&self) -> bool {
        matches!(self.store, AnyStore::Postgres(_))
    }
    pub fn import(&mut self, files: &[PathBuf], o: &ImportOptions<'_>) -> ImportReport {
        self.store.import(files, o).unwrap()
    }
    /// Runs raw SQL on the store's own tables (tampering).
    pub fn exec(&self, sqlite: &str, pg: &str) {
        match &self.store {
            AnyStore::Sqlite(s) => s.conn().execute_batch(sqlite).unwrap(),
            AnyStore::Postgres(p) => p.client().batch_execute(pg).unwrap(),
        }
    }
    /// Tampering with one row of tenant `acme`'s chain in either store: `SET {set}` on the
    /// scheduler log row at chain position `seq` (columns named as in the scheduler log).
    pub fn edit_log_row(&self, seq: u64, set: &str) {
        self.exec(
            &format!("UPDATE scheduler_log SET {set} WHERE tenant_id = 'acme' AND seq = {seq}"),
            &format!(
                "UPDATE scheduler.scheduler_log SET {set} FROM airlock.chain_entry e
                 WHERE e.log_id = scheduler_log.id AND e.tenant_id = 'acme' AND e.seq = {seq}"
            ),
        );
    }
    /// Everything a chain holds, without wall-clock columns and random batch ids.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for t in tenants(self.b()).unwrap() {
            out.push_str(&format!(
                "{} {} {} {} {}\n",
                t.tenant, t.head, t.head_hlc, t.length, t.unsnapshotted
            ));
            for e in chain_entries(self.b(), &t.tenant, 0, u64::MAX).unwrap() {
                let p = e.provenance.as_ref().map(|p| {
                    (
                        &p.bundle_id,
                        &p.source_node,
                        &p.original_link,
                        &p.original_prev_link,
                        &p.partition_key,
                        &p.enqueued_at,
                    )
                });
                out.push_str(&format!(
                    "{} {} {} {} {:?} {} {} {p:?}\n",
                    e.seq, e.t_hlc, e.job_id, e.action, e.prev_chain_link, e.chain_link, e.payload
                ));
            }
            for s in snapshots(self.b(), &t.tenant).unwrap() {
                out.push_str(&format!(
                    "snapshot {} {} {} {} {} {} {}\n",
                    s.snapshot_hlc,
                    s.from_chain_link,
                    s.to_chain_link,
                    s.from_seq,
                    s.entry_count,
                    s.merkle_root,
                    s.dsse_envelope.is_some()
                ));
            }
        }
        // The rows the rules do not show: jobs and imports.
        let queries = match self.store {
            AnyStore::Sqlite(_) => [
                "SELECT tenant_id, lower(hex(job_id)), lower(hex(payload_hash)), enqueue_seq, state, last_seq FROM scheduler_jobs ORDER BY 1, 2",
                "SELECT tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer, entries, new_entries, duplicates, dropped, forced FROM imports ORDER BY id",
            ],
            AnyStore::Postgres(_) => [
                "SELECT tenant_id, encode(job_id, 'hex'), encode(payload_hash, 'hex'), enqueue_seq, state, last_seq FROM airlock.chain_jobs ORDER BY 1, 2",
                "SELECT tenant_id, bundle_id, manifest_digest, created_by_node_id, signed_by, signer, entries, new_entries, duplicates, dropped, forced FROM airlock.imports ORDER BY id",
            ],
        };
        let mut tx = self.b().begin(TxKind::Read).unwrap();
        for q in queries {
            for row in tx.sql_query(q, &[]).unwrap() {
                out.push_str(&format!("{row:?}\n"));
            }
        }
        out
    }
}

/// A webhook receiver on a free loopback port that answers every request 200 and counts them.
pub fn webhook_receiver() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = got.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, got)
}

/// A store of `kind` holding the three merge vectors, imported in snapshot batches of `batch`.
pub fn imported(kind: Kind, batch: u64) -> TestStore {
    let mut s = TestStore::new(kind);
    let mut o = crate::chain_support::opts();
    o.batch_size = batch;
    let r = s.import(&crate::chain_support::merge_inputs(), &o);
    assert_eq!(r.status, airlock::core::import::ImportStatus::Imported);
    s
}

/// Each finding of a chain report as (kind, chain position).
pub fn kinds_at(r: &airlock::core::chain::verify::ChainReport) -> Vec<(String, Option<u64>)> {
    r.findings
        .iter()
        .map(|f| (f.kind.as_str().to_string(), f.index))
        .collect()
}
