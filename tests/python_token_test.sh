#!/usr/bin/env bash
# The Python module's server lookups with a token: against a real tessel-server with a token file
# (and no --open-lookups), a lookup with the reader token (keyword or $TESSEL_TOKEN_FILE) is
# answered, one without a token or with an unknown one raises PermissionError with the server's
# message, the old positional arguments still work, and no token reaches the server's log.
# Usage: python_token_test.sh SERVER_BIN MODULE_DIR
set -euo pipefail
SERVER="$1"; MODULE_DIR="$2"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessel-python-token-XXXXXX")"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
unset TESSEL_TOKEN_FILE

READER="reader-py-0123456789-secret"
TUNER="tuner-py-0123456789-secret"
WORKER="worker-py-0123456789-secret"
printf 'reader %s\ntuner %s\nworker %s\n' "$READER" "$TUNER" "$WORKER" >"$WORK/tokens"
printf '%s\n' "$READER" >"$WORK/reader.token"
"$SERVER" --listen 127.0.0.1:0 --db "$WORK/t.db" --token-file "$WORK/tokens" \
  --port-file "$WORK/port" >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 1 400); do [ -s "$WORK/port" ] && break; sleep 0.05; done
[ -s "$WORK/port" ] || { echo "the server did not start:"; cat "$WORK/server.err"; exit 1; }
ADDRESS="127.0.0.1:$(cat "$WORK/port")"

PYTHONPATH="$MODULE_DIR" /usr/bin/python3 - "$ADDRESS" "$READER" "$WORKER" <<'PY'
import sys
import tessel

address, reader, worker = sys.argv[1:4]
shape = "M=256,N=256,K=256"

found = tessel.Lookup(server=address, token=reader, timeout_ms=5000).find("matmul", shape)
assert found["source"] == "server" and found["match"] == "default", found


def refused(lookup, expected):
    try:
        lookup.find("matmul", shape)
    except PermissionError as error:
        assert expected in str(error), error
        assert reader not in str(error) and worker not in str(error), error
        return
    raise AssertionError(f"expected PermissionError with {expected!r}")


refused(tessel.Lookup(server=address, timeout_ms=5000), "Lookup needs a token")
refused(tessel.Lookup(server=address, token="not-a-known-token", timeout_ms=5000), "unknown token")
refused(tessel.Lookup(server=address, token=worker, timeout_ms=5000), "needs reader")
# The arguments before the credentials are still positional: snapshot, server, cache, pin, timeout.
refused(tessel.Lookup("", address, "", 0, 5000), "Lookup needs a token")
assert tessel.Lookup("", address, "", 0, 5000, token=reader).find("matmul", shape)["source"] == "server"
# The credentials are keyword-only.
try:
    tessel.Lookup("", address, "", 0, 5000, reader)
    raise AssertionError("a positional token should be refused")
except TypeError:
    pass
try:
    tessel.Lookup(server=address, token="two words")
    raise AssertionError("a malformed token should be refused")
except ValueError as error:
    assert "two words" not in str(error), error
print("python token: reader answered; no token, an unknown token and a worker token refused")
PY

# With no token argument, the module reads the file named by $TESSEL_TOKEN_FILE, as the CLI does.
TESSEL_TOKEN_FILE="$WORK/reader.token" PYTHONPATH="$MODULE_DIR" /usr/bin/python3 - "$ADDRESS" <<'PY'
import sys
import tessel
found = tessel.Lookup(server=sys.argv[1], timeout_ms=5000).find("matmul", "M=256,N=256,K=256")
assert found["source"] == "server", found
print("python token: $TESSEL_TOKEN_FILE answered")
PY

kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
for token in "$READER" "$TUNER" "$WORKER"; do
  if grep -qF -- "$token" "$WORK/server.out" "$WORK/server.err"; then
    echo "a token reached the server's log"; exit 1
  fi
done
