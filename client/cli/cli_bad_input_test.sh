#!/usr/bin/env bash
# Bad input to the tessel CLI: each case must exit non-zero, print nothing on stdout, and print one
# "tessel: error: ..." line on stderr containing the expected words. Never a crash.
# Usage: cli_bad_input_test.sh PATH/TO/tessel
set -u
TESSEL="$(realpath "$1")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
failures=0

# expect_error "expected stderr substring" args...
expect_error() {
  local expected="$1"
  shift
  local start=$SECONDS
  "$TESSEL" "$@" >"$WORK/out" 2>"$WORK/err"
  local code=$?
  local elapsed=$((SECONDS - start))
  local why=""
  if [[ $code -eq 0 ]]; then why="exit code 0"; fi
  if [[ $code -ge 128 ]]; then why="crashed with exit code $code"; fi
  if ! grep -q "^tessel: error: " "$WORK/err"; then why="$why; no 'tessel: error:' line"; fi
  if ! grep -qF -- "$expected" "$WORK/err"; then why="$why; stderr lacks '$expected'"; fi
  if [[ -s "$WORK/out" ]]; then why="$why; stdout not empty"; fi
  if [[ $elapsed -gt 10 ]]; then why="$why; took ${elapsed}s"; fi
  if [[ -n "$why" ]]; then
    echo "FAIL: tessel $*: ${why#; }"
    sed 's/^/  stderr: /' "$WORK/err"
    failures=$((failures + 1))
  else
    echo "ok:   tessel $* -> $(head -1 "$WORK/err")"
  fi
}

expect_error "unknown kernel 'nosuch'" tune nosuch --shape M=1,N=1,K=1 --json
expect_error "matmul" tune nosuch --shape M=1,N=1,K=1
expect_error "unknown target 'nowhere'" tune matmul --shape M=512,N=512,K=512 --target nowhere
expect_error "K" tune matmul --shape M=512,N=512 --json
expect_error "--shape" tune matmul --json
expect_error "--lockstep" tune matmul --shape M=512,N=512,K=512 --lockstep 65
expect_error "M=0" tune matmul --shape M=0,N=512,K=512
expect_error "M=-4" tune matmul --shape M=-4,N=512,K=512
expect_error "bad --shape" tune matmul --shape "M512,N=512,K=512"
expect_error "bad --shape" tune matmul --shape "M=abc,N=512,K=512"
expect_error "budget" tune matmul --shape M=512,N=512,K=512 --budget 0
expect_error "unknown strategy" tune matmul --shape M=512,N=512,K=512 --strategy nope
expect_error "unknown --effort 'fastest' (presets: quick, default, full)" \
  tune matmul --shape M=512,N=512,K=512 --effort fastest --json
for bad in abc -5 1.5s 10d 2ms s 30S 99999999999; do
  expect_error "bad --time-limit '$bad': expected whole seconds (e.g. 90) or a duration like" \
    tune matmul --shape M=512,N=512,K=512 --time-limit="$bad" --json
done
expect_error "--time-limit '600000h' is more than 2147483647 seconds" \
  tune matmul --shape M=512,N=512,K=512 --time-limit 600000h
expect_error "--budget must be positive, got 0" \
  tune matmul --shape M=512,N=512,K=512 --effort full --budget 0
expect_error "cannot reach tessel server at 127.0.0.1:9" \
  tune matmul --shape M=512,N=512,K=512 --server 127.0.0.1:9 --json
expect_error "cannot reach tessel server at 127.0.0.1:9" jobs --server 127.0.0.1:9
expect_error "cannot reach tessel server at 127.0.0.1:9" \
  lookup matmul --shape M=512,N=512,K=512 --server 127.0.0.1:9 --json
expect_error "no tessel database" lookup matmul --shape M=512,N=512,K=512 --db missing.db
expect_error "unknown kernel" simulate nosuch --shape M=1 --json
expect_error "bad --config" simulate matmul --shape M=512,N=512,K=512 --config "tile_m" --json
expect_error "matmul has no parameter 'tile_q'" \
  simulate matmul --shape M=512,N=512,K=512 --config tile_q=128 --json
# A partial config takes the default's other values (not an error).
if ! "$TESSEL" simulate matmul --shape M=512,N=512,K=512 --config block_m=2 --json |
  grep -q '"config": "tile_m=128,tile_n=512,tile_k=128,block_m=2,'; then
  echo "FAIL: a partial --config did not complete from the default"
  failures=$((failures + 1))
fi
# Issue 18's commands.
expect_error "--dtype: int7 not in" simulate matmul --shape M=512,N=512,K=512 --dtype int7
expect_error "matmul has no parameter 'tile_q'" \
  explain matmul --shape M=512,N=512,K=512 --config tile_q=128
expect_error "unknown kernel" explain nosuch --shape M=1 --json
expect_error "job: must be a positive integer, got '0'" trials 0 --db missing.db
expect_error "job: must be a positive integer, got 'abc'" watch abc --db missing.db
expect_error "no tessel database" trials 3 --db missing.db
expect_error "--top: must be a positive integer, got '-2'" trials 3 --top -2 --db missing.db
expect_error "--noise: must be a non-negative number, got 'nan'" \
  tune matmul --shape M=64,N=64,K=64 --noise nan --db missing.db
expect_error "--trace-limit: Value -1 not in range 0 to 2147483648" \
  simulate matmul --shape M=512,N=512,K=512 --trace t.json --trace-limit -1
expect_error "unknown command 'frobnicate'" frobnicate
expect_error "tessel --help" tune matmul --shape M=1,N=1,K=1 --budget notanumber
expect_error "tessel --help" tune
# `admin check`: a missing file is named, an unknown action refused, and a damaged file fails.
expect_error "no database at missing.db" admin check --db missing.db
expect_error "fix not in {check,backup,restore,vacuum}" admin fix --db missing.db
printf 'SQLite format 3\0%01000d' 0 >"$WORK/damaged.db"
expect_error "damaged.db" admin check --db "$WORK/damaged.db"
if [[ -e tessel.db || -e missing.db ]]; then
  echo "FAIL: bad input created a database"
  failures=$((failures + 1))
fi

if [[ $failures -gt 0 ]]; then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all bad-input cases passed"
