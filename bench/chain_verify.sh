#!/usr/bin/env bash
# Benchmark: `airlock chain verify` of a tenant chain (default 1,000,000 entries, imported from 4
# bundles x 250,000) against `openssl dgst -sha256` of the store file, interleaved in the same run:
# wall min/median/max of each, the ratio of the medians (and minima), peak RSS (/usr/bin/time -v).
# Figures only; nothing is asserted. Target (issue 12): ratio <= 2.0.
#   BUNDLES=4 ENTRIES=250000 RUNS=3 bash bench/chain_verify.sh
# AIRLOCK_BIN / AIRLOCK_BENCH_NO_BUILD as in bench/verify.sh; AIRLOCK_BASELINE_BIN=path also
# measures that binary (e.g. main's), interleaved. Prints each run's CPU time (user+sys) as well.
# STORE=path keeps the imported store there (and reuses it when it exists: no generation, no
# import), e.g. to import 10 M entries once and measure several binaries on it; delete it after.
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLES=${BUNDLES:-4}
ENTRIES=${ENTRIES:-250000}
RUNS=${RUNS:-3}
work=$(mktemp -d -t airlock-chainbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
source bench/lib/timing.sh
bin=$(bench_binary)
db=${STORE:-$work/bench.db}
if [ ! -e "$db" ]; then
  for i in $(seq 0 $((BUNDLES - 1))); do
    "$bin" dev gen-bundle --tenant bench --nodes 2 --entries "$ENTRIES" --seed "$i" \
      --output "$work/bundle-$i.json" 2>/dev/null
  done
  "$bin" --db "$db" jobs import "$work"/bundle-*.json --node bench-importer --json >/dev/null
  rm -f "$work"/bundle-*.json
fi
total=$((BUNDLES * ENTRIES))
size=$(stat -c %s "$db")
echo "store: $total entries, $size bytes; $RUNS interleaved runs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

bench_out="$work"
base=${AIRLOCK_BASELINE_BIN:-}
# cpu NAME: appends the user+sys seconds of the run just measured to $work/NAME.cpu.
cpu() { awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f\n", s }' "$work/time.txt" >>"$work/$1.cpu"; }
for _ in $(seq "$RUNS"); do
  measure openssl openssl dgst -sha256 "$db"; cpu openssl
  measure verify "$bin" --db "$db" chain verify --tenant bench; cpu verify
  if [ -n "$base" ]; then
    measure baseline "$base" --db "$db" chain verify --tenant bench; cpu baseline
  fi
done
table_head 28
table_row 28 "openssl dgst -sha256 (store)" openssl rss
table_row 28 "airlock chain verify" verify rss
[ -z "$base" ] || table_row 28 "baseline chain verify" baseline rss
ratio_line chain-verify/openssl verify openssl
[ -z "$base" ] || ratio_line baseline/openssl baseline openssl
for n in openssl verify ${base:+baseline}; do echo "CPU user+sys per run, $n: $(paste -sd' ' "$work/$n.cpu") s"; done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r _ vmed _ _ <<<"$(stats verify)"
awk -v a="$vmed" -v n="$total" 'BEGIN { printf "chain verify: %.0f entries/s (median)\n", n / a }'
