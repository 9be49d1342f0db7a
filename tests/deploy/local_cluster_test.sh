#!/usr/bin/env bash
# deploy/local-cluster.sh: `3 --detach` starts a server and three workers, a tune through --server
# completes on them, and `stop` leaves none of the recorded processes behind. Then the foreground
# form: SIGINT (Ctrl-C) stops everything it started.
# Usage: local_cluster_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC="$1"
export TESSEL_BUILD_DIR="$2"
CLI="$2/client/cli/tessel"
DIR="$(mktemp -d)"
cleanup() {
  "$SRC/deploy/local-cluster.sh" stop --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

alive_of() {  # the recorded PIDs still running (an exited one may linger as a zombie of init)
  local alive=()
  while read -r _ pid; do
    local state
    state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
    [[ -n "$state" && "$state" != "Z" ]] && alive+=("$pid")
  done <"$1"
  echo "${alive[@]:-}"
}

"$SRC/deploy/local-cluster.sh" 3 --detach --dir "$DIR" >"$DIR/start.out"
cat "$DIR/start.out"
cp "$DIR/pids" "$DIR/pids.recorded"
[[ "$(grep -c '^worker ' "$DIR/pids.recorded")" -eq 3 ]] || fail "3 workers were not recorded"
ADDRESS="$(sed -n 's/^export TESSEL_SERVER=//p' "$DIR/env")"
for _ in $(seq 1 100); do
  n="$("$CLI" workers --server "$ADDRESS" --json | python3 -c \
        'import json,sys; print(sum(w["state"] == "alive" for w in json.load(sys.stdin)["workers"]))')"
  [[ "$n" -eq 3 ]] && break
  sleep 0.1
done
[[ "$n" -eq 3 ]] || fail "$n of 3 workers registered"
"$CLI" tune matmul --shape M=512,N=512,K=512 --budget 60 --server "$ADDRESS" --json -q \
  >"$DIR/tune.json"
state="$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["state"], j["trials"]["total"])' "$DIR/tune.json")"
echo "tune through the local cluster: $state"
[[ "$state" == "completed 60" ]] || fail "the tune ended '$state', expected 'completed 60'"
workers_used="$("$CLI" trials "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$DIR/tune.json")" \
  --server "$ADDRESS" --json | python3 -c 'import json,sys; print(len({t["worker_id"] for t in json.load(sys.stdin)["trials"]}))')"
echo "workers that measured: $workers_used"
"$SRC/deploy/local-cluster.sh" stop --dir "$DIR"
left="$(alive_of "$DIR/pids.recorded")"
[[ -z "$left" ]] || fail "processes left after stop: $left"
echo "ok: stop left no process behind"

# Foreground, stopped by SIGINT as Ctrl-C would. Job control on, so that the background script
# does not start with SIGINT ignored (bash ignores it in background jobs of a script otherwise).
set -m
"$SRC/deploy/local-cluster.sh" 2 --dir "$DIR" >"$DIR/fg.out" 2>&1 &
runner=$!
set +m
for _ in $(seq 1 200); do
  [[ -s "$DIR/pids" && "$(grep -c '^worker ' "$DIR/pids" || true)" -eq 2 ]] && grep -q 'Ctrl-C' "$DIR/fg.out" && break
  sleep 0.1
done
grep -q 'Ctrl-C' "$DIR/fg.out" || fail "the foreground cluster did not start: $(cat "$DIR/fg.out")"
cp "$DIR/pids" "$DIR/pids.recorded"
kill -INT "$runner"
wait "$runner" || fail "local-cluster.sh exited non-zero after SIGINT"
left="$(alive_of "$DIR/pids.recorded")"
[[ -z "$left" ]] || fail "processes left after Ctrl-C: $left"
echo "ok: Ctrl-C stopped all $(wc -l <"$DIR/pids.recorded") processes"
echo "PASS"
