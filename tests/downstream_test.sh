#!/usr/bin/env bash
# Installs tessel from this build into a temporary prefix, tunes and exports a snapshot, then
# configures, builds and runs examples/downstream against the installed package; with PYTHON=1
# also imports the installed Python module.
# Usage: downstream_test.sh SOURCE_DIR BUILD_DIR [PYTHON]
set -euo pipefail
SRC="$1"
BUILD="$2"
PYTHON="${3:-0}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-downstream-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
"$WORK/prefix/bin/tessel" tune matmul --shape M=512,N=512,K=512 --budget 8 --db "$WORK/t.db" -q \
  --json >"$WORK/tune.json"
"$WORK/prefix/bin/tessel" export --db "$WORK/t.db" --format snapshot --out "$WORK/t.snapshot" \
  >/dev/null
cmake -S "$SRC/examples/downstream" -B "$WORK/example" -G Ninja \
  -DCMAKE_PREFIX_PATH="$WORK/prefix" -DTESSEL_SNAPSHOT="$WORK/t.snapshot" >"$WORK/configure.log" \
  || { cat "$WORK/configure.log"; exit 1; }
cmake --build "$WORK/example" >"$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
"$WORK/example/downstream"
grep -q "tessel_tuned" "$WORK/example/tuned_configs.h"
echo "downstream example: configured, generated its header, built and ran"

[ "$PYTHON" = 1 ] || exit 0
# The Python module is installed under the prefix and imports with Debian's python3.
shopt -s nullglob
modules=("$WORK"/prefix/lib/python3.*/dist-packages/tessel/_tessel*.so)
[ "${#modules[@]}" -eq 1 ] || { echo "expected one installed tessel module, found ${#modules[@]}"; exit 1; }
PYTHONPATH="$(dirname "$(dirname "${modules[0]}")")" /usr/bin/python3 -c \
  "import tessel._tessel, tessel.model_desc, sys; sys.exit(0 if hasattr(tessel._tessel, 'Lookup') else 1)" \
  || { echo "the installed tessel module does not import"; exit 1; }
echo "python module: installed under the prefix and imports"
