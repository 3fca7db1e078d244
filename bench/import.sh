#!/usr/bin/env bash
# Benchmark: `airlock jobs import` of 4 bundles x 250,000 entries into an empty store against its
# floor measured in the same run, interleaved: floor = `openssl dgst -sha256` of the inputs +
# writing the store's final size with `dd ... conv=fdatasync`. Prints wall min/median/max of each,
# the ratio of the medians (and minima), each run's ratio to its own floor (min/median/max) with the
# import's user+sys CPU, entries/s and peak RSS (/usr/bin/time -v). Figures only;
# nothing is asserted. Targets (issue 12): ratio <= 2.0, peak RSS <= 256 MiB at 1 M entries.
#   BUNDLES=4 ENTRIES=250000 RUNS=3 BENCH_DIR=/tmp/airlock-bench bash bench/import.sh
# REF_BIN=/path/to/other/airlock also measures that binary's import in each run (interleaved), e.g.
# main's build against a branch's. 10 M entries: BUNDLES=4 ENTRIES=2500000 (about 5.7 GB of inputs).
# AIRLOCK_IMPORT_TIMINGS=1 on the import prints the time of each engine phase (tracing spans).
# SQLITE_FLOOR=1 also measures, in each run, SQLite's own cost of the rows the import wrote: the
# imported store's rows copied into a new store by INSERT ... SELECT (`airlock dev store-copy-floor`).
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLES=${BUNDLES:-4}
ENTRIES=${ENTRIES:-250000}
RUNS=${RUNS:-3}
DIR=${BENCH_DIR:-$(mktemp -d -t airlock-bench.XXXXXX)}
[ -n "${BENCH_DIR:-}" ] || trap 'rm -rf "$DIR"' EXIT
source bench/lib/timing.sh
BIN=$(bench_binary)
mkdir -p "$DIR/bundles"
for i in $(seq 0 $((BUNDLES - 1))); do
  # Different seeds: disjoint jobs on the same node ids and timestamps (HLC ties broken by jobId).
  [ -s "$DIR/bundles/bundle-$i.json" ] ||
    "$BIN" dev gen-bundle --tenant bench --nodes 2 --entries "$ENTRIES" --seed "$i" \
      --output "$DIR/bundles/bundle-$i.json" 2>/dev/null
done
total=$((BUNDLES * ENTRIES))
inputs=$(du -cb "$DIR"/bundles/bundle-*.json | tail -1 | cut -f1)
echo "inputs: $BUNDLES bundles, $total entries, $inputs bytes; $RUNS interleaved runs"

bench_out="$DIR"
rm -f "$DIR"/openssl "$DIR"/import "$DIR"/dd "$DIR"/floor "$DIR"/ref "$DIR"/sqlite "$DIR"/*.cpu
# cpu_of_last NAME: appends the user + system CPU seconds of the run just measured to NAME.cpu
# (the machine is shared: CPU time is steadier than wall time).
cpu_of_last() {
  awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { printf "%.2f 0\n", u + s }' \
    "$DIR/time.txt" >>"$DIR/$1.cpu"
}
# per_run_ratios NAME: min/median/max over the runs of NAME's wall / that run's floor.
per_run_ratios() {
  paste -d' ' "$DIR/$1" "$DIR/floor" | awk '{ printf "%.3f 0\n", $1 / $3 }' >"$DIR/$1.ratio"
  read -r a b c _ <<<"$(stats "$1.ratio")"
  read -r d e f _ <<<"$(stats "$1.cpu")"
  printf "%s per run: wall/floor min %.2fx median %.2fx max %.2fx; user+sys CPU min %.2fs median %.2fs max %.2fs\n" \
    "$1" "$a" "$b" "$c" "$d" "$e" "$f"
}
for _ in $(seq "$RUNS"); do
  rm -f "$DIR"/bench.db*
  measure openssl openssl dgst -sha256 "$DIR"/bundles/bundle-*.json
  measure import "$BIN" --db "$DIR/bench.db" jobs import "$DIR"/bundles/bundle-*.json \
    --node bench-importer --json
  cpu_of_last import
  store=$(stat -c %s "$DIR/bench.db")
  if [ -n "${SQLITE_FLOOR:-}" ]; then
    # SQLite's own share: the same rows copied into an empty store by INSERT ... SELECT.
    rm -f "$DIR"/copy.db*
    "$BIN" dev store-copy-floor "$DIR/bench.db" "$DIR/copy.db" --json |
      python3 -c 'import json, sys; r = json.load(sys.stdin); print("%.3f 0" % r["seconds"])
print("%.2f 0" % r["cpuSeconds"], file=sys.stderr)' \
        >>"$DIR/sqlite" 2>>"$DIR/sqlite.cpu"
    rm -f "$DIR"/copy.db*
  fi
  # Only one store or dd file on disk at a time (10 M entries make each about 5.7 GB).
  rm -f "$DIR"/bench.db*
  if [ -n "${REF_BIN:-}" ]; then
    measure ref "$REF_BIN" --db "$DIR/bench.db" jobs import "$DIR"/bundles/bundle-*.json \
      --node bench-importer --json
    cpu_of_last ref
    rm -f "$DIR"/bench.db*
  fi
  measure dd dd if=/dev/zero of="$DIR/dd.out" bs=1M count=$(((store + 1048575) / 1048576)) conv=fdatasync
  rm -f "$DIR/dd.out"
  # This run's floor: its openssl + its dd.
  paste -d' ' <(tail -1 "$DIR/openssl") <(tail -1 "$DIR/dd") |
    awk '{ printf "%.3f 0\n", $1 + $3 }' >>"$DIR/floor"
done
table_head 34
table_row 34 "openssl dgst -sha256 (inputs)" openssl
table_row 34 "dd conv=fdatasync (store size)" dd
table_row 34 "floor (openssl + dd, per run)" floor
table_row 34 "airlock jobs import" import rss
[ -z "${REF_BIN:-}" ] || table_row 34 "reference (REF_BIN) jobs import" ref rss
[ -z "${SQLITE_FLOOR:-}" ] || table_row 34 "SQLite INSERT..SELECT of the rows" sqlite
ratio_line import/floor import floor
[ -z "${REF_BIN:-}" ] || ratio_line reference/floor ref floor
per_run_ratios import
if [ -n "${SQLITE_FLOOR:-}" ]; then
  ratio_line "SQLite's row inserts alone/floor" sqlite floor
  read -r a b c _ <<<"$(stats sqlite.cpu)"
  printf "SQLite's row inserts alone: CPU min %.2fs median %.2fs max %.2fs (one thread)\n" "$a" "$b" "$c"
fi
[ -z "${REF_BIN:-}" ] || per_run_ratios ref
read -r _ imed _ irss <<<"$(stats import)"
awk -v a="$imed" -v n="$total" -v r="$irss" 'BEGIN {
  printf "import: %.0f entries/s (median); peak RSS %.1f MiB (target <= 256 MiB at 1 M)\n", n / a, r / 1024 }'
awk -v n="$total" -v r="$irss" 'BEGIN {
  printf "peak RSS per entry: %.0f bytes (all of it; the target allows 256 MiB + 64 bytes an entry past 1 M)\n", r * 1024 / n }'
awk -v n="$total" -v r="$irss" 'BEGIN { allowed = 256 * 1048576 + (n > 1e6 ? (n - 1e6) * 64 : 0);
  printf "RSS target at %d entries: %.0f MiB, measured %.0f MiB\n", n, allowed / 1048576, r / 1024 }'
echo "store size: $store bytes; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
