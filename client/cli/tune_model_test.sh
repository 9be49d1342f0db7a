#!/usr/bin/env bash
# `tessel tune-model` (issue 21) on a small model: the --json fields scripts rely on, the budget
# spent, shares that add up, the gradient scheduler's rounds, two targets side by side; and bad
# model files, each refused naming the op, with a non-zero exit and no database written.
# Usage: tune_model_test.sh PATH/TO/tessel
set -euo pipefail
TESSEL="$(realpath "$1")"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

cat >model.json <<'JSON'
{"format": 1, "name": "tiny", "ops": [
  {"name": "proj", "kernel": "matmul", "dims": "M=256,N=512,K=256", "dtype": "bf16", "count": 3},
  {"name": "probs", "kernel": "softmax", "dims": "rows=256,cols=512", "dtype": "bf16", "count": 1},
  {"name": "proj_again", "kernel": "matmul", "dims": "K=256,M=256,N=512", "dtype": "bf16"}
]}
JSON
"$TESSEL" tune-model model.json --budget 48 --round-trials 8 --db t.db --json >out.json
/usr/bin/python3 - <<'PY'
import json
out = json.load(open("out.json"))
assert out["model"] == "tiny" and out["target"] == "snc2", out
assert out["trials"] == 48, out["trials"]
assert 0 < out["tuned_time_ns"] <= out["default_time_ns"], out
ops = {op["name"]: op for op in out["ops"]}
assert set(ops) == {"proj", "probs", "proj_again"}, ops
for op in out["ops"]:
    for field in ("name", "kernel", "dims", "count", "default_time_ns", "tuned_time_ns", "share",
                  "bound"):
        assert field in op, (field, op)
    assert 0 < op["tuned_time_ns"] <= op["default_time_ns"], op
# Identical workloads (the same dims in another order) are one task, tuned once.
assert ops["proj"]["dims"] == ops["proj_again"]["dims"] == "M=256,N=512,K=256", ops
assert ops["proj"]["jobs"] == ops["proj_again"]["jobs"], ops
assert abs(sum(op["share"] for op in out["ops"]) - 1) < 1e-9, out["ops"]
model = sum(op["count"] * op["tuned_time_ns"] for op in out["ops"])
assert abs(model - out["tuned_time_ns"]) <= 1e-6 * model, (model, out["tuned_time_ns"])
# Six rounds of 8: each task had one first, the matmul (4 of the model's 5 calls) most of the rest.
rounds = {op["kernel"]: op["rounds"] for op in out["ops"]}
assert rounds["softmax"] >= 1 and rounds["matmul"] >= 1 and sum(rounds.values()) == 6, rounds
print(f"tune-model: {out['trials']} trials, model {out['default_time_ns']:.0f} -> "
      f"{out['tuned_time_ns']:.0f} ns, rounds {rounds}")
PY

# The model job: every round's job carries one label, which `tessel jobs` shows.
"$TESSEL" jobs --db t.db --json >jobs.json
/usr/bin/python3 - <<'PY'
import json
jobs = json.load(open("jobs.json"))["jobs"]
out = json.load(open("out.json"))
assert len(jobs) == 6 and {j["model"] for j in jobs} == {out["model_job"]}, (jobs, out["model_job"])
assert out["model_job"].startswith("tiny on snc2 at "), out["model_job"]
print(f"tune-model: its {len(jobs)} jobs are labelled '{out['model_job']}'")
PY

# The model's configs exported as a header that compiles and as JSON for tessel.Model; each op's
# config is valid for the op's shape (it simulates).
"$TESSEL" export --model model.json --db t.db --format header --out model.h >/dev/null
"$TESSEL" export --model model.json --db t.db --format json --out configs.json >/dev/null
cat >use.cc <<'CC'
#include <cstdio>
#include "model.h"
static_assert(!tessel_model_tiny::ConfigOf("proj").empty());
static_assert(tessel_model_tiny::ConfigOf("no_such_op").empty());
int main() {
  for (const auto& op : tessel_model_tiny::kOps) {
    std::printf("%.*s %.*s %.*s %.*s\n", int(op.op.size()), op.op.data(), int(op.kernel.size()),
                op.kernel.data(), int(op.dims.size()), op.dims.data(), int(op.config.size()),
                op.config.data());
  }
}
CC
"${CXX:-c++}" -std=c++20 -Wall -Wextra -Werror use.cc -o use
./use >ops.txt
[ "$(wc -l <ops.txt)" -eq 3 ] || { cat ops.txt; exit 1; }
while read -r name kernel dims config; do
  "$TESSEL" simulate "$kernel" --shape "$dims" --config "$config" >/dev/null ||
    { echo "FAIL: $name's exported config does not simulate for $dims"; exit 1; }
done <ops.txt
echo "tune-model: the exported header compiles and its 3 configs simulate for their ops' shapes"
PYTHONPATH="$(dirname "$(dirname "$TESSEL")")/python" /usr/bin/python3 - <<'PY'
import json
import tessel
model = tessel.Model("configs.json")
assert model.ops == ["proj", "probs", "proj_again"], model.ops
exported = {op["name"]: op for op in json.load(open("configs.json"))["ops"]}
for name in model.ops:
    config = model.config(name)
    assert config and all(isinstance(k, str) for k in config), config
    text = ",".join(f"{k}={v}" for k, v in config.items())
    assert text == exported[name]["config"], (text, exported[name])
assert exported["proj"]["match"] == "exact", exported["proj"]
try:
    model.config("nope")
    raise SystemExit("tessel.Model gave a config for an op it lacks")
except KeyError as e:
    assert "no op 'nope'" in str(e), e
print("tune-model: tessel.Model reads every op's config")
PY
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  PYTHONPATH="$(dirname "$(dirname "$TESSEL")")/python" /usr/bin/python3 \
    "$SRC/examples/python/model_tiles.py" configs.json proj 256 512 256
else
  echo "tune-model: skipped the PyTorch example (Debian's python3-torch is not installed)"
fi

"$TESSEL" tune-model model.json --target snc2,snc3 --budget 16 --round-trials 8 --db t2.db --json \
  >two.json
/usr/bin/python3 - <<'PY'
import json
out = json.load(open("two.json"))
assert [t["target"] for t in out["targets"]] == ["snc2", "snc3"], out
assert all(t["trials"] == 16 and t["tuned_time_ns"] > 0 for t in out["targets"]), out
print("tune-model: two targets side by side")
PY
"$TESSEL" tune-model model.json --target snc2,snc3 --budget 16 --round-trials 8 --db t3.db -q \
  >two.txt
grep -q "snc2 vs snc3 (tuned):" two.txt || { cat two.txt; exit 1; }

# Bad model files: one "tessel: error:" line naming the problem, exit 1, no database.
failures=0
bad() {  # EXPECTED JSON
  printf '%s' "$2" >bad.json
  rm -f bad.db
  if "$TESSEL" tune-model bad.json --budget 8 --db bad.db >bad.out 2>bad.err; then
    echo "FAIL: accepted $2"; failures=$((failures + 1)); return
  fi
  if ! grep -q "^tessel: error: .*$1" bad.err; then
    echo "FAIL: $2: stderr lacks '$1':"; cat bad.err; failures=$((failures + 1))
  fi
  if [ -e bad.db ]; then echo "FAIL: $2 wrote a database"; failures=$((failures + 1)); fi
}
op='"name": "x", "kernel": "matmul", "dtype": "bf16"'
bad "not JSON" '{"format": 1, "ops": [}'
bad "'format' must be 1" '{"format": 7, "ops": []}'
bad "the model has no ops" '{"format": 1, "ops": []}'
bad "op 'x': unknown kernel 'convolution'" \
  '{"format": 1, "ops": [{"name": "x", "kernel": "convolution", "dims": "M=1", "dtype": "bf16"}]}'
bad "op 'x': bad --shape" "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=abc\"}]}"
bad "op 'x': " "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=512,N=512\"}]}"
bad "op 'x': 'count' must be" "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=512,N=512,K=512\", \"count\": 0}]}"
bad "op 1: 'name' must be" "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=512,N=512,K=512\"}, {\"kernel\": \"matmul\"}]}"
bad "op 'x': a second op of this name" \
  "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=512,N=512,K=512\"}, {$op, \"dims\": \"M=64,N=64,K=64\"}]}"
bad "op 'x': " "{\"format\": 1, \"ops\": [{$op, \"dims\": \"M=1099511627776,N=512,K=512\"}]}"
rm -f bad.db
if "$TESSEL" tune-model model.json --scheduler ansor --db bad.db 2>bad.err; then
  echo "FAIL: --scheduler ansor accepted"; failures=$((failures + 1))
fi
grep -q "unknown task scheduler 'ansor'" bad.err || { echo "FAIL: scheduler message"; failures=$((failures + 1)); }
[ ! -e bad.db ] || { echo "FAIL: a bad --scheduler wrote a database"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] || exit 1
echo "tune-model: bad model files refused, naming the op, nothing written"
