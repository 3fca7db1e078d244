#!/usr/bin/env bash
# PostgreSQL store benchmark (docs/benchmarks/postgres.md). In one run, on one throwaway cluster
# (initdb as the postgres user in a temp dir, Unix socket only, default durability settings):
#   1. `airlock jobs import` of BUNDLES x ENTRIES entries (1,000,000 by default) into an empty
#      database, timed;
#   2. the reference: the same rows (dumped by the benchmark as CSV from the three tables the import
#      wrote) loaded with `psql \copy` into the same tables of another empty database, in one
#      transaction, timed; the ratio import / \copy is printed (target <= 1.5);
#   3. `airlock chain verify` of the 1,000,000-row chain;
#   4. two and four concurrent importers (one process per bundle) into one tenant: total entries/s.
# Figures only; nothing is asserted.
#
#   bench/postgres.sh
#   BUNDLES=4 ENTRIES=250000 BENCH_DIR=/tmp/airlock-pg-bench bench/postgres.sh
#   PROFILE=debug BUNDLES=4 ENTRIES=25000 bench/postgres.sh   # no release build at hand (slower)
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLES=${BUNDLES:-4}
ENTRIES=${ENTRIES:-250000}
PGBIN=${AIRLOCK_PG_BIN:-/usr/lib/postgresql/15/bin}
DIR=${BENCH_DIR:-$(mktemp -d -t airlock-pg-bench.XXXXXX)}
[ -x "$PGBIN/initdb" ] || { echo "install postgresql (scripts/setup.sh): $PGBIN/initdb not found" >&2; exit 2; }
PSQL=$(command -v psql || echo "$PGBIN/psql")
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

PROFILE=${PROFILE:-release}
case "$PROFILE" in
  release) [ -n "${AIRLOCK_BENCH_NO_BUILD:-}" ] || cargo build --release --quiet; BIN=${AIRLOCK_BIN:-$PWD/target/release/airlock} ;;
  debug) cargo build --quiet; BIN=$PWD/target/debug/airlock ;;
  *) echo "PROFILE is release or debug, not $PROFILE" >&2; exit 2 ;;
esac
echo "airlock $PROFILE build, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p "$DIR/bundles" "$DIR/csv"
[ "$(id -u)" = 0 ] && chown postgres "$DIR" "$DIR/csv"

as_pg "$PGBIN/initdb" -U postgres --auth=trust -E UTF8 --locale=C -D "$DIR/data" >/dev/null
mkdir -p "$DIR/sock"; [ "$(id -u)" = 0 ] && chown postgres "$DIR/sock"
as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
  -o "-c listen_addresses='' -c unix_socket_directories='$DIR/sock' -c max_wal_size=4GB -c shared_buffers=256MB" start >/dev/null
trap 'as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null 2>&1 || true' EXIT
SOCK=$(printf '%s' "$DIR/sock" | sed 's|/|%2F|g')
url() { echo "postgresql://postgres@$SOCK/$1"; }
sql() { "$PSQL" -X -q -h "$DIR/sock" -U postgres -d "$1" -v ON_ERROR_STOP=1 "${@:2}"; }
newdb() { sql postgres -c "CREATE DATABASE $1" >/dev/null; "$BIN" --db "$(url "$1")" chain tenants >/dev/null; }

echo "generating $BUNDLES bundles x $ENTRIES entries in $DIR/bundles"
for i in $(seq 0 $((BUNDLES - 1))); do
  "$BIN" dev gen-bundle --tenant bench --nodes 2 --entries "$ENTRIES" --seed "$i" \
    --output "$DIR/bundles/bundle-$i.json" 2>/dev/null
done
total=$((BUNDLES * ENTRIES))
TIMEFORMAT=%R

# 1. airlock import
newdb imported
isecs=$( { time "$BIN" --db "$(url imported)" jobs import "$DIR"/bundles/bundle-*.json \
            --node bench-importer --json >"$DIR/import.json"; } 2>&1 )
echo "airlock import: $total entries in ${isecs}s ($(awk -v n=$total -v s="$isecs" 'BEGIN{printf "%.0f", n/s}') entries/s)"

# 2. the same rows as CSV, loaded with \copy into the same tables of an empty database
TABLES="scheduler.scheduler_log airlock.chain_entry airlock.chain_jobs"
for t in $TABLES; do
  sql imported -c "\\copy $t TO '$DIR/csv/$t.csv' CSV"
done
newdb copied
{
  for t in $TABLES; do echo "\\copy $t FROM '$DIR/csv/$t.csv' CSV"; done
} >"$DIR/copy.sql"
csecs=$( { time sql copied -1 -f "$DIR/copy.sql" >/dev/null; } 2>&1 )
echo "psql \\copy of the same rows (CSV, one transaction): ${csecs}s"
awk -v a="$isecs" -v c="$csecs" 'BEGIN { printf "ratio import / \\copy: %.2fx (target <= 1.5x)\n", a / c }'

# 3. chain verify of the imported chain
vsecs=$( { time "$BIN" --db "$(url imported)" chain verify --tenant bench >/dev/null; } 2>&1 )
echo "chain verify of $total rows: ${vsecs}s"

# 4. concurrent importers, one process per bundle, one tenant
for n in 2 4; do
  [ "$n" -le "$BUNDLES" ] || continue
  db=conc$n; newdb $db
  files=("$DIR"/bundles/bundle-*.json); files=("${files[@]:0:$n}")
  start=$(date +%s.%N)
  for f in "${files[@]}"; do
    "$BIN" --db "$(url $db)" jobs import "$f" --node "bench-$n" --json >/dev/null &
  done
  wait
  end=$(date +%s.%N)
  "$BIN" --db "$(url $db)" chain verify --tenant bench >/dev/null && verdict=ok || verdict=FAILED
  awk -v n="$n" -v e=$((n * ENTRIES)) -v s="$start" -v t="$end" -v v="$verdict" \
    'BEGIN { printf "%d concurrent importers: %d entries in %.2fs (%.0f entries/s in all), chain verify %s\n", n, e, t - s, e / (t - s), v }'
done
echo "(work dir: $DIR)"
