#!/usr/bin/env python3
"""SQLite's own cost of writing an imported store's rows (bench/import.sh with SQLITE_FLOOR=1).

Usage: sqlite_copy.py SOURCE_STORE TARGET

Creates TARGET as a new store the way airlock makes one for a bulk import (16 KiB pages, rollback
journal, synchronous=FULL), then copies every `scheduler_log` and `scheduler_jobs` row of
SOURCE_STORE into it in one transaction with INSERT ... SELECT. The `WHERE` clauses keep SQLite
from its transfer optimisation (a page copy that skips record building), so each row goes through
the same VDBE record building and b-tree inserts as an import's, with no binding, no Rust code and
no other work. Prints "wall_s cpu_s" of the transaction (the source is read once beforehand, so its
pages come from the page cache). Python's sqlite3 links Debian's libsqlite3, not the bundled one.
"""
import os
import sqlite3
import sys
import time

source, target = sys.argv[1], sys.argv[2]
for path in (target, target + "-journal", target + "-wal", target + "-shm"):
    if os.path.exists(path):
        os.remove(path)
src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
tables = ("scheduler_log", "scheduler_jobs")
schema = [
    sql
    for (name, sql) in src.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)", tables
    )
]
assert len(schema) == 2, f"{source} has no scheduler tables"
for table in tables:
    src.execute(f"SELECT COUNT(*), SUM(LENGTH(CAST(payload_hash AS BLOB))) FROM {table}"
                if table == "scheduler_jobs" else
                f"SELECT COUNT(*), SUM(LENGTH(payload)) FROM {table}").fetchall()
src.close()

db = sqlite3.connect(target, isolation_level=None)
db.execute("PRAGMA page_size=16384")
db.execute("PRAGMA journal_mode=TRUNCATE")
db.execute("PRAGMA synchronous=FULL")
for sql in schema:
    db.execute(sql)
db.execute("ATTACH ? AS src", (source,))
wall, cpu = time.monotonic(), time.process_time()
db.execute("BEGIN")
db.execute("INSERT INTO main.scheduler_log SELECT * FROM src.scheduler_log WHERE seq >= 0")
db.execute("INSERT INTO main.scheduler_jobs SELECT * FROM src.scheduler_jobs WHERE last_seq >= 0")
db.execute("COMMIT")
print(f"{time.monotonic() - wall:.3f} {time.process_time() - cpu:.3f}")
db.close()
for path in (target, target + "-journal"):
    if os.path.exists(path):
        os.remove(path)
