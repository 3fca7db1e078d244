#!/usr/bin/env bash
# Benchmark: draining a backlog of pending notification deliveries (after a long outage) with
# `airlock notify run --once` against a local webhook receiver that answers 200 at once.
# For each N: a store with one portable export and N emissions (N - 1 added with SQL, copies of
# the first one's event), one webhook; `notify run --once` enrols the N deliveries and sends them
# (at most 32 in flight). Wall time of each run, and the summary's delivered count.
# Figures only; nothing is asserted.
#   NS="20000 100000" RUNS=1 bash bench/notify_backlog.sh
# AIRLOCK_BIN / AIRLOCK_BENCH_NO_BUILD as in bench/verify.sh; AIRLOCK_BASELINE_BIN=path also
# measures that binary (e.g. a build of an earlier commit) on a copy of the same store, each run
# cut off after BASELINE_TIMEOUT seconds (default 900: the quadratic runner needs hours at 100,000).
# The receiver is a small Python HTTP/1.1 server (keep-alive, threads): python3 is required.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=${NS:-20000 100000}
RUNS=${RUNS:-1}
BASELINE_TIMEOUT=${BASELINE_TIMEOUT:-900}
work=$(mktemp -d -t airlock-notifybench.XXXXXX)
receiver_pid=
cleanup() {
  [ -z "$receiver_pid" ] || kill "$receiver_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
source bench/lib/timing.sh
bin=$(bench_binary)
base=${AIRLOCK_BASELINE_BIN:-}

# The receiver: 200 with an empty body to every POST, on a free loopback port (printed first).
cat >"$work/receiver.py" <<'EOF'
import http.server, socketserver, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
python3 "$work/receiver.py" >"$work/port" &
receiver_pid=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
hook="http://127.0.0.1:$(head -1 "$work/port")/hook"
echo "secret-for-the-benchmark-0123456789" >"$work/secret"

# template N: a store with N emissions at $work/template-N/store.db.
template() {
  local n=$1 dir=$work/template-$1
  mkdir -p "$dir"
  export AIRLOCK_DB=$dir/store.db XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config AIRLOCK_NODE_ID=edge-1
  "$bin" jobs enqueue -t acme '{"a":1}' >/dev/null
  "$bin" jobs enqueue -t acme '{"a":2}' >/dev/null
  "$bin" jobs export --tenant acme --portable -o "$dir/out" >/dev/null
  sqlite3 "$dir/store.db" "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < $((n - 1)))
    INSERT INTO notify_emissions (export_id, artifact_sha256, event_type, body, created_at)
    SELECT m.export_id, m.artifact_sha256 || '-' || k.i, m.event_type, m.body, m.created_at
    FROM notify_emissions m, k WHERE m.emission_id = 1;
    PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
}

# run LABEL BINARY N TIMEOUT: one `notify run --once` on a fresh copy of template N.
run() {
  local label=$1 b=$2 n=$3 limit=$4 dir=$work/run
  rm -rf "$dir"
  cp -r "$work/template-$n" "$dir"
  export AIRLOCK_DB=$dir/store.db XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config AIRLOCK_NODE_ID=edge-1
  local start end code=0
  start=$(date +%s.%N)
  timeout "$limit" "$b" notify run --once --webhook "$hook" --webhook-secret-file "$work/secret" \
    --json >"$work/summary.json" 2>/dev/null || code=$?
  end=$(date +%s.%N)
  local delivered
  delivered=$(sqlite3 "$dir/store.db" "SELECT COUNT(*) FROM notify_deliveries WHERE status = 'delivered'")
  if [ "$code" = 124 ]; then
    printf "%-9s N=%-7s cut off after %ss: %s of %s delivered by then\n" "$label" "$n" "$limit" "$delivered" "$n"
  else
    printf "%-9s N=%-7s %8.2fs  exit %s, %s of %s delivered\n" "$label" "$n" \
      "$(echo "$end - $start" | bc)" "$code" "$delivered" "$n"
  fi
}

echo "receiver $hook; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $NS; do
  template "$n"
  for _ in $(seq "$RUNS"); do
    run after "$bin" "$n" 3600
    [ -z "$base" ] || run before "$base" "$n" "$BASELINE_TIMEOUT"
  done
  rm -rf "$work/template-$n"
done
