#!/usr/bin/env bash
# A tessel server and N workers on this machine, with ports, database, logs and PIDs in one folder.
#
#   deploy/local-cluster.sh N [--dir DIR] [--port P] [--threads T] [--detach]
#   deploy/local-cluster.sh stop [--dir DIR]
#   deploy/local-cluster.sh status [--dir DIR]
#
# Without --detach it stays in the foreground until Ctrl-C (or SIGTERM), then stops everything it
# started. With --detach it returns once the cluster serves; `stop` ends it. Processes are stopped
# by their recorded PIDs (DIR/pids), workers first so that they report the trials they hold, then
# the server. DIR defaults to ./local-cluster under the repository (ignored by git); the database
# (DIR/tessel.db) survives a stop, so the next start resumes unfinished jobs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${TESSEL_BUILD_DIR:-$ROOT/build}"
DIR="$ROOT/local-cluster"
PORT=0
THREADS=1
DETACH=0
ACTION=""

usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit "${1:-0}"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    stop | status) ACTION="$1" ;;
    --dir) DIR="$2"; shift ;;
    --port) PORT="$2"; shift ;;
    --threads) THREADS="$2"; shift ;;
    --detach) DETACH=1 ;;
    -h | --help) usage 0 ;;
    [0-9]*) ACTION=start; WORKERS="$1" ;;
    *) echo "local-cluster: unknown argument '$1'" >&2; usage 2 ;;
  esac
  shift
done
[[ -n "$ACTION" ]] || usage 2
PIDS="$DIR/pids"

# True when PID is alive and is one of ours (guards against a PID reused by something else).
ours() {
  local pid="$1"
  [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'tessel-'
}

stop_cluster() {
  [[ -f "$PIDS" ]] || { echo "local-cluster: nothing recorded in $PIDS"; return 0; }
  # Workers first (they finish and report what they hold), then the server (it drains).
  local role pid
  for pass in worker server; do
    local waiting=()
    while read -r role pid; do
      [[ "$role" == "$pass" ]] || continue
      if ours "$pid"; then kill -TERM "$pid" 2>/dev/null && waiting+=("$pid"); fi
    done <"$PIDS"
    for _ in $(seq 1 300); do  # up to 30 s
      local alive=0
      for pid in "${waiting[@]}"; do ours "$pid" && alive=1; done
      [[ $alive -eq 0 ]] && break
      sleep 0.1
    done
    for pid in "${waiting[@]}"; do
      if ours "$pid"; then
        echo "local-cluster: $pass $pid did not stop in 30 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
  rm -f "$PIDS"
  echo "local-cluster: stopped (database and logs kept in $DIR)"
}

case "$ACTION" in
  stop) stop_cluster; exit 0 ;;
  status)
    [[ -f "$PIDS" ]] || { echo "local-cluster: not running ($PIDS absent)"; exit 1; }
    while read -r role pid; do
      if ours "$pid"; then state=running; else state=gone; fi
      echo "$role $pid $state"
    done <"$PIDS"
    exit 0
    ;;
esac

[[ "$WORKERS" =~ ^[0-9]+$ && "$WORKERS" -ge 1 && "$WORKERS" -le 64 ]] ||
  { echo "local-cluster: N must be 1 to 64 workers" >&2; exit 2; }
if [[ -f "$PIDS" ]]; then
  while read -r _ pid; do
    if ours "$pid"; then
      echo "local-cluster: already running from $DIR (pid $pid); '$0 stop --dir $DIR' first" >&2
      exit 1
    fi
  done <"$PIDS"
fi
SERVER_BIN="$BUILD_DIR/server/tessel-server"
WORKER_BIN="$BUILD_DIR/worker/tessel-worker"
CLI_BIN="$BUILD_DIR/client/cli/tessel"
if [[ ! -x "$SERVER_BIN" || ! -x "$WORKER_BIN" || ! -x "$CLI_BIN" ]]; then
  echo "local-cluster: tessel is not built in $BUILD_DIR; building it (scripts/build.sh)" >&2
  "$ROOT/scripts/build.sh" "$BUILD_DIR" RelWithDebInfo >&2
fi

mkdir -p "$DIR"
rm -f "$DIR/server.port" "$DIR/http.port"
: >"$PIDS"
"$SERVER_BIN" --listen "127.0.0.1:$PORT" --db "$DIR/tessel.db" --http 127.0.0.1:0 \
  --port-file "$DIR/server.port" --http-port-file "$DIR/http.port" --drain-s 10 \
  >>"$DIR/server.log" 2>&1 &
echo "server $!" >>"$PIDS"
SERVER_PID=$!
for _ in $(seq 1 200); do  # up to 20 s
  [[ -s "$DIR/server.port" && -s "$DIR/http.port" ]] && break
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "local-cluster: the server exited; its log:" >&2
    tail -n 20 "$DIR/server.log" >&2
    rm -f "$PIDS"
    exit 1
  fi
  sleep 0.1
done
[[ -s "$DIR/server.port" ]] || { echo "local-cluster: the server did not listen in 20 s" >&2; stop_cluster; exit 1; }
ADDRESS="127.0.0.1:$(cat "$DIR/server.port")"
HTTP="127.0.0.1:$(cat "$DIR/http.port")"
for i in $(seq 1 "$WORKERS"); do
  "$WORKER_BIN" --server "$ADDRESS" --threads "$THREADS" --name "local-$i" \
    >>"$DIR/worker-$i.log" 2>&1 &
  echo "worker $!" >>"$PIDS"
done
printf 'export TESSEL_SERVER=%s\n' "$ADDRESS" >"$DIR/env"

cat <<EOF
tessel local cluster: 1 server and $WORKERS worker(s), files in $DIR
  gRPC       $ADDRESS
  dashboard  http://$HTTP/   (metrics: http://$HTTP/metrics)
  database   $DIR/tessel.db
  logs       $DIR/server.log, $DIR/worker-*.log
Use it:
  $CLI_BIN tune matmul --shape M=1024,N=1024,K=1024 --budget 100 --server $ADDRESS
  $CLI_BIN workers --server $ADDRESS
  $CLI_BIN admin backup --out backup.db --server $ADDRESS
EOF
if [[ $DETACH -eq 1 ]]; then
  echo "Stop it: $0 stop --dir $DIR"
  exit 0
fi
echo "Ctrl-C stops it."
trap 'trap - INT TERM; echo; stop_cluster; exit 0' INT TERM
while true; do
  sleep 1 &
  wait $! || true
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "local-cluster: the server exited; stopping the workers (see $DIR/server.log)" >&2
    stop_cluster
    exit 1
  fi
done
