#!/usr/bin/env bash
# Issue 17, Throughput: what the service keeps of the simulator's rate. bench/throughput runs an
# embedded random tune of 4096^3 matmul (2,000 trials, 2 worker threads), then a server
# (127.0.0.1, port 0) with 2 worker processes of one thread each runs the same job, and after each
# the same configs are simulated bare on 2 threads. Passes when the embedded job reaches
# MIN_EMBEDDED (0.5) of the bare rate and the server MIN_SERVER (0.4). Each mode is tried up to
# three times and the best kept: the bare rate and the job share one noisy 2-core machine.
# Usage: throughput_test.sh SERVER_BIN WORKER_BIN THROUGHPUT_BIN [MIN_EMBEDDED] [MIN_SERVER]
set -euo pipefail
SERVER_BIN="$1" WORKER_BIN="$2" BENCH_BIN="$3"
MIN_EMBEDDED="${4:-0.5}" MIN_SERVER="${5:-0.4}"
source "$(dirname "$0")/server_helpers.sh" throughput

# Runs the bench up to three times with the given arguments; passes on the first run that meets
# the floor (every run's JSON line is printed).
attempts() {
  local floor="$1"
  shift
  for attempt in 1 2 3; do
    if "$BENCH_BIN" "$@" --min-ratio "$floor"; then return 0; fi
    echo "attempt $attempt below $floor" >&2
  done
  return 1
}

status=0
attempts "$MIN_EMBEDDED" --threads 2 || status=1

start_server "$SERVER_BIN"
for w in 1 2; do
  "$WORKER_BIN" --server "$ADDRESS" --threads 1 --name "throughput-$w" 2>"$WORK/worker$w.log" &
  PIDS+=($!)
done
attempts "$MIN_SERVER" --server "$ADDRESS" --threads 2 || status=1
exit "$status"
