#!/usr/bin/env bash
# Runs examples/python/pick_tiles.py with Debian's python3 against the built module and a snapshot
# made by the tessel CLI; checks exact and nearest answers and a clear error for a missing file.
# Usage: python_test.sh SOURCE_DIR TESSEL_BIN MODULE_DIR
set -euo pipefail
SRC="$1"; TESSEL="$2"; MODULE_DIR="$3"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-python-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"$TESSEL" tune matmul --shape M=512,N=512,K=512 --budget 6 --db "$WORK/t.db" -q --json \
  >"$WORK/tune.json"
"$TESSEL" export --db "$WORK/t.db" --format snapshot --out "$WORK/t.snapshot" >/dev/null
PYTHONPATH="$MODULE_DIR" /usr/bin/python3 "$SRC/examples/python/pick_tiles.py" \
  --snapshot "$WORK/t.snapshot" >"$WORK/out.json"
/usr/bin/python3 - "$WORK/tune.json" "$WORK/out.json" <<'PY'
import json, sys
tune = json.load(open(sys.argv[1]))
out = json.load(open(sys.argv[2]))["answers"]
assert out[0]["match"] == "exact", out[0]
assert out[0]["config"] == tune["best"]["config"], (out[0], tune["best"])
assert out[1]["match"] == "nearest", out[1]
assert isinstance(out[0]["tile_m"], int) and 0 < out[0]["tile_m"] <= 128
print("python example: exact and nearest answers match the tuned snapshot")
PY
if PYTHONPATH="$MODULE_DIR" /usr/bin/python3 "$SRC/examples/python/pick_tiles.py" \
     --snapshot "$WORK/missing.snapshot" 2>"$WORK/err.txt"; then
  echo "a missing snapshot should fail"; exit 1
fi
grep -q "does not exist" "$WORK/err.txt"
