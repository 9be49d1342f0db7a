#!/usr/bin/env bash
# The cost of trust (issue 15): trials/s of one tuning job through a real tessel-server and two
# tessel-worker processes on 127.0.0.1, with and without tokens and TLS, and the share of the
# job that the winner's re-measurement (the "verify" trials, always on) takes.
#
# Usage: bench/trust_cost.sh BUILD_DIR [ROUNDS] [BUDGET]
#   ROUNDS (default 3): each round runs every variant once, in the order embedded, plaintext,
#   tokens, tls+tokens, so slow phases of a shared machine fall on all variants alike.
#   BUDGET (default 2000): trials charged to the job.
# Environment: KERNEL (softmax), SHAPE (rows=1024,cols=1024), TARGET (snc2), SEED (1),
#   WORKER_THREADS (1 per worker; two workers), VARIANTS (all four, space-separated),
#   KEEP=1 keeps the scratch directory (databases and logs).
# Needs openssl and the sqlite3 shell.
#
# Variants:
#   embedded    `tessel tune --db` with 2 worker threads in the CLI's process (no network; the
#               reference for what the server round trips cost).
#   plaintext   server on 127.0.0.1 without a token file (allowed on loopback), plaintext.
#   tokens      server --token-file; workers and CLI send their tokens (--token-file).
#   tls+tokens  as tokens, plus --tls-cert/--tls-key (a self-signed certificate made here with
#               openssl for localhost and 127.0.0.1) and --tls-ca on the workers and the CLI.
# Each run has its own scratch directory and fresh database (no warm start from earlier jobs).
#
# trials/s = the job's charged trials (not is_verify, status not WORKER_LOST or CANCELLED) /
# (finished_ms - created_ms) of the job row: from the server accepting the submission to the job's
# completion, the winner's verification included. The verify phase is finished_ms minus the
# created_ms of the job's first verify trial. Prints one line per run and a markdown summary.
set -euo pipefail
BUILD="$(cd "${1:?usage: trust_cost.sh BUILD_DIR [ROUNDS] [BUDGET]}" && pwd)"
ROUNDS="${2:-3}"
BUDGET="${3:-2000}"
KERNEL="${KERNEL:-softmax}"
SHAPE="${SHAPE:-rows=1024,cols=1024}"
TARGET="${TARGET:-snc2}"
SEED="${SEED:-1}"
WORKER_THREADS="${WORKER_THREADS:-1}"
VARIANTS="${VARIANTS:-embedded plaintext tokens tls+tokens}"
SERVER_BIN="$BUILD/server/tessel-server"
WORKER_BIN="$BUILD/worker/tessel-worker"
CLI_BIN="$BUILD/client/cli/tessel"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-trust-XXXXXX")"
PIDS=()
stop_all() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
cleanup() {
  stop_all
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Credentials, made once: random tokens (never printed) and a self-signed certificate.
printf 'worker %s\ntuner %s\nreader %s\n' "$(openssl rand -hex 16)" "$(openssl rand -hex 16)" \
  "$(openssl rand -hex 16)" >"$WORK/tokens"
awk '$1 == "worker" { print $2 }' "$WORK/tokens" >"$WORK/worker.token"
awk '$1 == "tuner" { print $2 }' "$WORK/tokens" >"$WORK/tuner.token"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" \
  -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null

now_ms() { date +%s%3N; }

# Runs variant $1 of round $2; appends a tab-separated line to $WORK/runs.tsv.
run_variant() {
  local variant="$1" round="$2"
  local dir="$WORK/$variant-$round"
  mkdir -p "$dir"
  local server_flags=() client_flags=()
  case "$variant" in
    embedded|plaintext) ;;
    tokens) server_flags=(--token-file "$WORK/tokens") ;;
    tls+tokens)
      server_flags=(--token-file "$WORK/tokens" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")
      client_flags=(--tls-ca "$WORK/cert.pem") ;;
    *) echo "unknown variant $variant" >&2; exit 2 ;;
  esac
  local worker_flags=("${client_flags[@]}") cli_flags=("${client_flags[@]}")
  if [ "${#server_flags[@]}" -gt 0 ]; then
    worker_flags+=(--token-file "$WORK/worker.token")
    cli_flags+=(--token-file "$WORK/tuner.token")
  fi
  local tune=("$CLI_BIN" tune "$KERNEL" --shape "$SHAPE" --target "$TARGET" --budget "$BUDGET"
              --seed "$SEED" --json --quiet)
  local start end
  if [ "$variant" = embedded ]; then
    start=$(now_ms)
    "${tune[@]}" --db "$dir/t.db" --workers $((2 * WORKER_THREADS)) >"$dir/tune.json" 2>"$dir/tune.err"
    end=$(now_ms)
  else
    "$SERVER_BIN" --listen 127.0.0.1:0 --db "$dir/t.db" --port-file "$dir/port" \
      "${server_flags[@]}" >"$dir/server.out" 2>"$dir/server.err" &
    PIDS+=($!)
    local _
    for _ in $(seq 1 400); do [ -s "$dir/port" ] && break; sleep 0.05; done
    [ -s "$dir/port" ] || { echo "server did not start:" >&2; cat "$dir/server.err" >&2; exit 1; }
    local address="127.0.0.1:$(cat "$dir/port")" w
    for w in 1 2; do
      "$WORKER_BIN" --server "$address" --threads "$WORKER_THREADS" --name "w$w" \
        "${worker_flags[@]}" >"$dir/worker$w.out" 2>"$dir/worker$w.err" &
      PIDS+=($!)
    done
    # Submit once both workers are registered, so the job's time is not their start-up.
    local registered=0
    for _ in $(seq 1 200); do
      registered=$("$CLI_BIN" workers --server "$address" "${cli_flags[@]}" --json 2>/dev/null |
        grep -o '"name": *"w[12]"' | sort -u | wc -l)
      [ "$registered" = 2 ] && break
      sleep 0.05
    done
    [ "$registered" = 2 ] || { echo "$variant round $round: the workers did not register" >&2; exit 1; }
    start=$(now_ms)
    "${tune[@]}" --server "$address" "${cli_flags[@]}" >"$dir/tune.json" 2>"$dir/tune.err"
    end=$(now_ms)
    stop_all
  fi
  grep -q '"state": *"completed"' "$dir/tune.json" ||
    { echo "$variant round $round did not complete:" >&2; cat "$dir/tune.err" >&2; exit 1; }
  sqlite3 -readonly -separator $'\t' "$dir/t.db" "
    SELECT '$variant', $round,
           (SELECT COUNT(*) FROM trials WHERE job_id = j.id AND is_verify = 0
              AND status NOT IN ('WORKER_LOST', 'CANCELLED')),
           (SELECT COUNT(*) FROM trials WHERE job_id = j.id AND is_verify = 1),
           j.finished_ms - j.created_ms,
           COALESCE(j.finished_ms - (SELECT MIN(created_ms) FROM trials
                                     WHERE job_id = j.id AND is_verify = 1), 0),
           $((end - start))
    FROM jobs j ORDER BY j.id LIMIT 1" >>"$WORK/runs.tsv"
  tail -n 1 "$WORK/runs.tsv" | awk -F'\t' '{
    printf "%-10s round %d: %d charged + %d verify trials in %.1f s (CLI %.1f s), %.1f trials/s, verify phase %.0f ms\n",
           $1, $2, $3, $4, $5 / 1000, $7 / 1000, $3 * 1000 / $5, $6 }'
}

echo "$KERNEL $SHAPE on $TARGET, budget $BUDGET, seed $SEED, 2 workers x $WORKER_THREADS thread(s), $ROUNDS rounds"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for variant in $VARIANTS; do run_variant "$variant" "$round"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$WORK/runs.tsv" "$VARIANTS" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
order = sys.argv[2].split()
runs = {v: [] for v in order}
for v, _round, charged, verify, job_ms, verify_ms, cli_ms in rows:
    runs[v].append({"rate": int(charged) * 1000 / int(job_ms), "charged": int(charged),
                    "verify": int(verify), "verify_ms": int(verify_ms), "job_ms": int(job_ms)})
base = statistics.median(r["rate"] for r in runs["plaintext"]) if runs.get("plaintext") else None
print("\n| variant | trials/s (median) | worst run | vs plaintext | job time (median) "
      "| verify trials / charged | verify phase (median, share of the job) |")
print("|---|---|---|---|---|---|---|")
for v in order:
    rates = [r["rate"] for r in runs[v]]
    median = statistics.median(rates)
    ratio = f"{median / base:.2f}x" if base else "-"
    job_ms = statistics.median(r["job_ms"] for r in runs[v])
    verify = ", ".join(sorted({f'{r["verify"]} / {r["charged"]}' for r in runs[v]}))
    verify_ms = statistics.median(r["verify_ms"] for r in runs[v])
    print(f"| {v} | {median:.1f} | {min(rates):.1f} | {ratio} | {job_ms / 1000:.2f} s | {verify} "
          f"| {verify_ms:.0f} ms ({100 * verify_ms / job_ms:.2f}%) |")
PY
