#!/usr/bin/env bash
# Benchmark: `airlock chain verify` of a tenant chain (default 1,000,000 entries, imported from 4
# bundles x 250,000) against `openssl dgst -sha256` of the store file, interleaved in the same run:
# wall min/median/max of each, the ratio of the medians (and minima), peak RSS (/usr/bin/time -v).
# Figures only; nothing is asserted. Target (issue 12): ratio <= 2.0.
#   BUNDLES=4 ENTRIES=250000 RUNS=3 bash bench/chain_verify.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLES=${BUNDLES:-4}
ENTRIES=${ENTRIES:-250000}
RUNS=${RUNS:-3}
work=$(mktemp -d -t airlock-chainbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cargo build --release --quiet
bin=target/release/airlock
for i in $(seq 0 $((BUNDLES - 1))); do
  "$bin" dev gen-bundle --tenant bench --nodes 2 --entries "$ENTRIES" --seed "$i" \
    --output "$work/bundle-$i.json" 2>/dev/null
done
"$bin" --db "$work/bench.db" jobs import "$work"/bundle-*.json --node bench-importer --json >/dev/null
rm -f "$work"/bundle-*.json
total=$((BUNDLES * ENTRIES))
size=$(stat -c %s "$work/bench.db")
echo "store: $total entries, $size bytes; $RUNS interleaved runs"

bench_out="$work"
# measure and stats, shared by the benchmarks against openssl.
source bench/lib/timing.sh
for _ in $(seq "$RUNS"); do
  measure openssl openssl dgst -sha256 "$work/bench.db"
  measure verify "$bin" --db "$work/bench.db" chain verify --tenant bench
done
read -r omin omed omax orss <<<"$(stats openssl)"
read -r vmin vmed vmax vrss <<<"$(stats verify)"
printf "%-28s %8s %8s %8s %12s\n" "" min median max "peak RSS"
printf "%-28s %7.3fs %7.3fs %7.3fs %9d KiB\n" "openssl dgst -sha256 (store)" "$omin" "$omed" "$omax" "$orss"
printf "%-28s %7.3fs %7.3fs %7.3fs %9d KiB\n" "airlock chain verify" "$vmin" "$vmed" "$vmax" "$vrss"
awk -v a="$vmed" -v b="$omed" -v c="$vmin" -v d="$omin" -v n="$total" 'BEGIN {
  printf "ratio chain-verify/openssl: %.2fx (medians), %.2fx (minima); target <= 2.0x\n", a / b, c / d
  printf "chain verify: %.0f entries/s (median)\n", n / a }'
