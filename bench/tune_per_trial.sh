#!/usr/bin/env bash
# Per-trial cost of an embedded random tune on snc3 for every kernel at its large example shape
# (issue 20's first point): the wall time of `tessel tune ... --strategy random --workers 1` at
# budgets N and 2N, each with a fresh database. Prints T(N)/N (process start, the best config's
# verification and the store included) and the marginal (T(2N) - T(N)) / N.
# Usage: [TESSEL_TRIALS=N] bench/tune_per_trial.sh [path to tessel]   (default build/client/cli/tessel)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
T="${1:-$ROOT/build/client/cli/tessel}"
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
DB="$DIR/pt.db"
wall() {
  rm -f "$DB"*
  local s
  s=$(date +%s%N)
  "$T" tune "$1" --shape "$2" --target snc3 --strategy random --budget "$3" --workers 1 \
    --db "$DB" -q >/dev/null
  echo $(( ($(date +%s%N) - s) / 1000 ))
}
row() {
  local a b
  a=$(wall "$1" "$2" "$3")
  b=$(wall "$1" "$2" $((2 * $3)))
  awk -v k="$1" -v n="$3" -v a="$a" -v b="$b" 'BEGIN {
    printf "%-10s N=%-4d T(N)=%6.0f ms  T(2N)=%6.0f ms  per trial %7.3f ms  marginal %7.3f ms\n",
      k, n, a / 1000, b / 1000, a / n / 1000, (b - a) / n / 1000 }'
}
# One budget for every kernel, so the fixed costs (process start, the best config's verification,
# the store) are spread over as many trials for each (TESSEL_TRIALS, default 300).
N="${TESSEL_TRIALS:-300}"
row matmul M=4096,N=4096,K=4096 "$N"
row attention batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1 "$N"
row bmm B=8,M=2048,N=2048,K=1024 "$N"
row conv2d N=8,C=256,H=56,W=56,K=256,R=3,S=3,stride=1,padding=1 "$N"
row softmax rows=8192,cols=8192 "$N"
row layernorm rows=8192,cols=8192 "$N"
row rmsnorm rows=8192,cols=8192 "$N"
