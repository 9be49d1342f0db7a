# Sourced by the shell tests that run a tessel-server (server_load_test.sh, throughput_test.sh):
# a work directory and the processes started (PIDS) are cleaned up on exit, and start_server runs
# a server on 127.0.0.1, port 0, and sets ADDRESS. Usage: source server_helpers.sh NAME
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-$1-XXXXXX")"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_server SERVER_BIN [EXTRA_ARGS...]: its database and log are in $WORK.
start_server() {
  local bin="$1"
  shift
  "$bin" --listen 127.0.0.1:0 --db "$WORK/t.db" --port-file "$WORK/port" "$@" \
    2>"$WORK/server.log" &
  PIDS+=($!)
  for _ in $(seq 1 200); do [ -s "$WORK/port" ] && break; sleep 0.05; done
  [ -s "$WORK/port" ] || { echo "server did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
  ADDRESS="127.0.0.1:$(cat "$WORK/port")"
}
