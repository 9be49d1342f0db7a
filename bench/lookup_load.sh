#!/usr/bin/env bash
# gRPC Lookup throughput and latency on loopback, load generator in a separate process.
# Usage: bench/lookup_load.sh BUILD_DIR [THREADS] [SECONDS]
# Starts tessel-server on 127.0.0.1 (port 0) with 64 published matmul configs (M=64..4096,
# N=K=1024), runs bench/lookup_load against it, prints its JSON line, stops the server.
set -euo pipefail
BUILD="${1:?usage: lookup_load.sh BUILD_DIR [THREADS] [SECONDS]}"
THREADS="${2:-4}"
SECONDS_="${3:-10}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-load-XXXXXX")"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

/usr/bin/python3 - "$WORK/tuned.json" <<'PY'
import json, sys
best = [{"kernel": "matmul", "dims": f"K=1024,M={64 * i},N=1024", "dtype": "bf16",
         "target": "snc2", "kernel_version": 1, "target_version": 1,
         "config": "tile_m=128,tile_n=512,tile_k=128,block_m=4,block_n=2,block_k=4,loop_order=mnk,bufs=2,hoist=1,stationary=a,evict=vector,shards=1",
         "time_ns": 1000.0 + i} for i in range(1, 65)]
json.dump({"format": "tessel-export", "format_version": 1, "key_version": 1, "snapshot_id": 0,
           "kernels": {}, "targets": {}, "best": best, "defaults": []}, open(sys.argv[1], "w"))
PY
"$BUILD/client/cli/tessel" import "$WORK/tuned.json" --db "$WORK/t.db" >/dev/null
"$BUILD/server/tessel-server" --listen 127.0.0.1:0 --db "$WORK/t.db" --port-file "$WORK/port" \
  2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
PORT="$(cat "$WORK/port")"
"$BUILD/bench/lookup_load" --server "127.0.0.1:$PORT" --threads "$THREADS" --seconds "$SECONDS_" \
  --shapes 64
