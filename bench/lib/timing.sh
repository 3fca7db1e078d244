# Shared by bench/verify.sh, bench/import.sh and bench/chain_verify.sh (source it early; set $bench_out, the folder results go to, before measuring): measuring runs, their statistics, the comparison table and its ratio line.

# bench_binary: the airlock binary to measure: $AIRLOCK_BIN, else the release build (built now
# unless $AIRLOCK_BENCH_NO_BUILD is set).
bench_binary() {
  [ -n "${AIRLOCK_BENCH_NO_BUILD:-}" ] || cargo build --release --quiet >&2
  echo "${AIRLOCK_BIN:-$PWD/target/release/airlock}"
}

# measure NAME COMMAND...: appends "wall_seconds peak_rss_kib" to $bench_out/NAME.
measure() {
  local name=$1; shift
  /usr/bin/time -v "$@" >/dev/null 2>"$bench_out/time.txt" || true
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i] }
    /Maximum resident set size/ { rss = $2 }
    END { printf "%.3f %d\n", s, rss }' "$bench_out/time.txt" >>"$bench_out/$name"
}

# stats NAME: "min median max max_rss"
stats() {
  sort -n "$bench_out/$1" | awk '{ w[NR] = $1; if ($2 > r) r = $2 }
    END { printf "%.3f %.3f %.3f %d\n", w[1], w[int((NR + 1) / 2)], w[NR], r }'
}

# table_head WIDTH: the header of a min/median/max/peak-RSS table whose labels are WIDTH wide.
table_head() {
  printf "%-${1}s %8s %8s %8s %12s\n" "" min median max "peak RSS"
}

# table_row WIDTH LABEL NAME [rss]: NAME's min/median/max under LABEL (and its peak RSS with "rss").
table_row() {
  local width=$1 label=$2 name=$3 min med max rss
  read -r min med max rss <<<"$(stats "$name")"
  if [ "${4:-}" = rss ]; then
    printf "%-${width}s %7.3fs %7.3fs %7.3fs %9d KiB\n" "$label" "$min" "$med" "$max" "$rss"
  else
    printf "%-${width}s %7.3fs %7.3fs %7.3fs\n" "$label" "$min" "$med" "$max"
  fi
}

# ratio_line WHAT NAME REF: "ratio WHAT: ...x (medians), ...x (minima); target <= 2.0x" of NAME over REF.
ratio_line() {
  local a b c d
  read -r c a _ _ <<<"$(stats "$2")"
  read -r d b _ _ <<<"$(stats "$3")"
  awk -v what="$1" -v a="$a" -v b="$b" -v c="$c" -v d="$d" 'BEGIN {
    printf "ratio %s: %.2fx (medians), %.2fx (minima); target <= 2.0x\n", what, a / b, c / d }'
}
