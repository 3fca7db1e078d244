#!/usr/bin/env bash
# Benchmark: airlock serve. (1) POST /api/v1/airgap/bundles import throughput against `airlock jobs
# import` of the same bundle into a fresh store, same run; (2) GET chain verify requests/s with wrk
# against GET /healthz (the HTTP floor) and against one-shot `airlock chain verify` runs.
# Usage: bash bench/serve.sh [ENTRIES] [CHAIN_ENTRIES] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
entries=${1:-200000}
chain_entries=${2:-1000}
runs=${3:-3}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 2; }
work=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cargo build --release --quiet
bin=$PWD/target/release/airlock
export HOME=$work/home XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config AIRLOCK_NODE_ID=bench-hub
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
"$bin" dev gen-bundle --entries "$entries" -o "$work/big.json" >/dev/null
"$bin" dev gen-bundle --tenant small --entries "$chain_entries" -o "$work/small.json" >/dev/null
size=$(stat -c %s "$work/big.json")
echo "bundle: $entries entries, $size bytes; chain for verify: $chain_entries entries"

start_serve() { # db
  "$bin" --db "$1" serve --listen 127.0.0.1:0 --token-file "$work/token" >"$work/serve.out" 2>/dev/null &
  pid=$!
  for _ in $(seq 200); do grep -q http "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
  url=$(grep -o 'http://[0-9.:]*' "$work/serve.out")
  until curl -sf "$url/readyz" >/dev/null; do sleep 0.05; done
}
stop_serve() { kill -TERM "$pid"; wait "$pid" || true; pid=; }
secs() { python3 -c "import sys,time; print(f'{time.time():.3f}')"; }

for i in $(seq "$runs"); do
  rm -f "$work"/cli*.db* "$work"/srv*.db*
  t0=$(secs); "$bin" --db "$work/cli$i.db" jobs import "$work/big.json" >/dev/null; t1=$(secs)
  start_serve "$work/srv$i.db"
  t2=$(secs); "$bin" jobs push "$work/big.json" --to "$url" --token-file "$work/token" >/dev/null; t3=$(secs)
  stop_serve
  python3 - "$entries" "$t0" "$t1" "$t2" "$t3" <<'PY'
import sys
n, t0, t1, t2, t3 = int(sys.argv[1]), *map(float, sys.argv[2:])
cli, push = t1 - t0, t3 - t2
print(f"import run: jobs import {cli:.2f} s ({n/cli:,.0f} entries/s)  POST push {push:.2f} s ({n/push:,.0f} entries/s)  push/import time {push/cli:.2f}x")
PY
done

start_serve "$work/verify.db"
"$bin" jobs push "$work/small.json" --to "$url" --token-file "$work/token" >/dev/null
auth="Authorization: Bearer $(cat "$work/token")"
for i in $(seq "$runs"); do
  h=$(wrk -t2 -c16 -d5s -H "$auth" "$url/healthz" | awk '/Requests\/sec/ {print $2}')
  v=$(wrk -t2 -c16 -d5s -H "$auth" "$url/api/v1/scheduler/chain/verify?tenantId=small" | awk '/Requests\/sec/ {print $2}')
  t0=$(secs); for _ in 1 2 3 4 5 6 7 8 9 10; do "$bin" --db "$work/verify.db" chain verify -t small >/dev/null; done; t1=$(secs)
  python3 - "$h" "$v" "$t0" "$t1" <<'PY'
import sys
h, v, t0, t1 = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cli = 10 / (t1 - t0)
print(f"verify run: /healthz {h:,.0f} req/s  chain verify {v:,.0f} req/s ({v/h:.3f}x healthz)  one-shot CLI {cli:,.1f} runs/s (API {v/cli:.1f}x)")
PY
done
stop_serve
