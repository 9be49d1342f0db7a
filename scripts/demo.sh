#!/usr/bin/env bash
# Installs what is missing, builds (Release), and tunes a 4096x4096x4096 bf16 matmul on snc2 with
# an embedded server and workers, then prints the best config against the default.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
BUILD_DIR="${TESSEL_BUILD_DIR:-$ROOT/build-release}"
"$ROOT/scripts/build.sh" "$BUILD_DIR" Release -DTESSEL_BUILD_TESTS=OFF -DTESSEL_BUILD_BENCH=OFF

DB="$(mktemp -d)/demo.db"
echo
echo "Tuning matmul M=4096,N=4096,K=4096 bf16 on snc2 (embedded server and workers, db $DB)"
"$BUILD_DIR/client/cli/tessel" tune matmul --shape M=4096,N=4096,K=4096 --dtype bf16 \
  --target snc2 --budget "${TESSEL_DEMO_BUDGET:-200}" --seed 1 --db "$DB"
