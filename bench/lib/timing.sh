# Shared by bench/verify.sh, bench/import.sh and bench/chain_verify.sh (source it after setting $bench_out, the folder results go to).

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
