#!/usr/bin/env bash
# The tessel CLI as people meet it (issue 18): --version and an example in every command's --help;
# `tune` draws a live progress bar in a terminal (a pseudo-terminal from script(1)), prints plain
# lines in a pipe and nothing on stderr with --json; tables and times read well; `simulate` of an
# invalid config exits 1; `explain`, `trials --top` and the bottleneck line.
# Usage: cli_terminal_test.sh PATH/TO/tessel
set -u
TESSEL="$(realpath "$1")"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
if ! command -v script >/dev/null; then
  echo "SKIP: script(1) (bsdutils) is missing: no pseudo-terminal for the progress bar check"
  exit 77
fi

"$TESSEL" --version | grep -qE '^tessel [0-9]+\.[0-9]+\.[0-9]+$' || fail "--version"
for command in $("$TESSEL" --help | awk '/^Subcommands:/{on=1;next} on&&!NF{exit} on{print $1}'); do
  "$TESSEL" "$command" --help >help.txt 2>&1 || fail "$command --help exits non-zero"
  grep -qA1 '^Example:' help.txt || fail "$command --help has no example"
  example="$(grep -A1 '^Example:' help.txt | tail -1 | sed 's/^ *//')"
  [[ "$example" == "tessel $command"* ]] || fail "$command's example does not run $command: $example"
done
"$TESSEL" simulate --help | grep -q 'fp8,bf16' || fail "--dtype does not list its values"
"$TESSEL" tune --help | grep -q 'random' || fail "--strategy does not list its values"

# The progress bar in a pseudo-terminal: redrawn in place (\r), with trials/budget and the best.
script -qec "$TESSEL tune matmul --shape M=1024,N=1024,K=512 --budget 24 --db pty.db" pty.txt \
  >/dev/null || fail "tune in a terminal exited non-zero"
grep -q $'\r''job 1 \[#*-*\] [0-9]*/24 trials' pty.txt || fail "no progress bar in a terminal"
grep -q '24/24 trials  best .* completed' pty.txt || fail "the bar does not end completed"
grep -q '  bottleneck: [a-z]*-bound' pty.txt || fail "tune does not name the bottleneck"
# In a pipe: plain lines, no carriage returns or escapes.
"$TESSEL" tune matmul --shape M=1024,N=512,K=512 --budget 24 --db pipe.db 2>pipe.err >pipe.out ||
  fail "tune in a pipe exited non-zero"
grep -q '^job 1 completed: 24/24 trials' pipe.err || fail "no plain progress line in a pipe"
if grep -q $'[\r\x1b]' pipe.err pipe.out; then fail "control characters in a pipe"; fi
# --json: one JSON object on stdout, nothing on stderr.
"$TESSEL" tune matmul --shape M=512,N=512,K=512 --budget 16 --db json.db --json >json.out \
  2>json.err || fail "tune --json exited non-zero"
[[ -s json.err ]] && fail "tune --json wrote on stderr: $(head -2 json.err)"
python3 -c 'import json,sys; d=json.load(open("json.out")); assert d["bottleneck"]["bound"]' ||
  fail "tune --json has no bottleneck"

# Times in adaptive units, aligned tables.
"$TESSEL" jobs --db pipe.db >jobs.txt
awk 'NR==1{h=index($0,"STATE")} NR==2{if (substr($0,h,9)!="completed") exit 1}' jobs.txt ||
  fail "jobs columns misaligned: $(cat jobs.txt)"
"$TESSEL" simulate attention --shape batch=1,heads=16,seq_q=4096,seq_k=4096,head_dim=128,causal=1 \
  --target snc3 >sim.txt
grep -qE 'time: +[0-9.]+ (us|ms|s) ' sim.txt || fail "simulate time not in adaptive units"
"$TESSEL" trials 1 --top 3 --db pipe.db >top.txt
[[ $(grep -c ' OK ' top.txt) -eq 3 ]] || fail "trials --top 3: $(cat top.txt)"
"$TESSEL" trials 1 --status ok --db pipe.db --json |
  python3 -c 'import json,sys; t=json.load(sys.stdin)["trials"]; assert t and all(x["status"]=="OK" for x in t)' ||
  fail "trials --status ok"

# simulate: an invalid config is reported and exits 1; a partial one is merged and says so.
"$TESSEL" simulate matmul --shape M=512,N=512,K=512 --config tile_m=999 >invalid.txt
[[ $? -eq 1 ]] || fail "simulate of an invalid config did not exit 1"
"$TESSEL" simulate matmul --shape M=512,N=512,K=512 --config tile_m=128,tile_n=512 |
  grep -q 'tile_m, tile_n from --config; the rest the kernel' || fail "merged config not named"
"$TESSEL" explain matmul --shape M=4096,N=4096,K=4096 --config block_k=4 >explain.txt ||
  fail "explain exited non-zero"
for want in 'ENGINE' 'roofline:' 'bottleneck: dma-bound' 'sbuf' 'psum'; do
  grep -q "$want" explain.txt || fail "explain lacks '$want'"
done
NO_COLOR=1 script -qec "$TESSEL jobs --db pipe.db" color.txt >/dev/null
if grep -q $'\x1b\[[0-9;]*m' color.txt; then fail "colour escapes with NO_COLOR"; fi

if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all terminal checks passed"
