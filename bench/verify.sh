#!/usr/bin/env bash
# Benchmark: `airlock jobs verify` of a bundle (default 1,000,000 entries over 4 nodes) against
# `openssl dgst -sha256` of the same file, interleaved in the same run: wall time min/median/max of
# each, the ratio of the medians (and of the minima), and peak RSS (/usr/bin/time -v). Figures only;
# nothing is asserted. Targets (issue 12): ratio <= 2.0, RSS < 64 MiB.
# Usage: bash bench/verify.sh [ENTRIES] [RUNS]
# AIRLOCK_BIN=path measures that binary; AIRLOCK_BENCH_NO_BUILD=1 skips the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
entries=${1:-1000000}
runs=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source bench/lib/timing.sh
bin=$(bench_binary)
"$bin" dev gen-bundle --nodes 4 --entries "$entries" -o "$work/bundle.json" 2>/dev/null
size=$(stat -c %s "$work/bundle.json")
echo "file: $entries entries over 4 nodes, $size bytes; $runs interleaved runs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"

bench_out="$work"
for _ in $(seq "$runs"); do
  measure openssl openssl dgst -sha256 "$work/bundle.json"
  measure verify "$bin" jobs verify "$work/bundle.json"
done
table_head 24
table_row 24 "openssl dgst -sha256" openssl rss
table_row 24 "airlock jobs verify" verify rss
ratio_line verify/openssl verify openssl
read -r _ vmed _ vrss <<<"$(stats verify)"
awk -v a="$vmed" -v n="$entries" -v r="$vrss" 'BEGIN {
  printf "verify: %.0f entries/s (median); peak RSS %.1f MiB (target < 64 MiB)\n", n / a, r / 1024 }'
