#!/usr/bin/env bash
# Import benchmark: 4 bundles x 250,000 entries into an empty store, then `chain verify` of the
# resulting 1,000,000-entry chain. Figures only; nothing is asserted.
#
#   bench/import.sh            # defaults
#   BUNDLES=4 ENTRIES=250000 RUNS=3 BENCH_DIR=/tmp/airlock-bench bench/import.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLES=${BUNDLES:-4}
ENTRIES=${ENTRIES:-250000}
RUNS=${RUNS:-3}
DIR=${BENCH_DIR:-$(mktemp -d -t airlock-bench.XXXXXX)}
cargo build --release --quiet
BIN=target/release/airlock
mkdir -p "$DIR/bundles"
echo "generating $BUNDLES bundles x $ENTRIES entries in $DIR/bundles"
for i in $(seq 0 $((BUNDLES - 1))); do
  # Different seeds: disjoint jobs on the same node ids and timestamps (HLC ties broken by jobId).
  "$BIN" dev gen-bundle --tenant bench --nodes 2 --entries "$ENTRIES" --seed "$i" \
    --output "$DIR/bundles/bundle-$i.json" 2>/dev/null
done
du -ch "$DIR"/bundles/bundle-*.json | tail -1
total=$((BUNDLES * ENTRIES))
TIMEFORMAT=%R
for run in $(seq 1 "$RUNS"); do
  rm -f "$DIR"/bench.db*
  secs=$( { time "$BIN" --db "$DIR/bench.db" jobs import "$DIR"/bundles/bundle-*.json \
              --node bench-importer --json >"$DIR/import.json"; } 2>&1 )
  rate=$(awk -v n="$total" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
  vsecs=$( { time "$BIN" --db "$DIR/bench.db" chain verify --tenant bench >/dev/null; } 2>&1 )
  echo "run $run: import $total entries in ${secs}s (${rate} entries/s); chain verify ${vsecs}s"
done
ls -l "$DIR/bench.db" | awk '{ printf "store size: %.0f MB\n", $5 / 1048576 }'
