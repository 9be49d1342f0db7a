#!/usr/bin/env bash
# deploy/systemd: the units pass `systemd-analyze verify` with no complaint at all (it exits 0 on
# unknown keys and bad values, only printing them, so any output fails this test), and keep the
# hardening issue 19 asks for. The binaries' install path (/usr/local/bin) is pointed at the build
# tree, since verify checks that ExecStart is executable.
# Usage: systemd_verify_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC="$1"
BUILD="$2"
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze is not installed (apt-get install systemd)"
  exit 77
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail=0
rewrite() {
  sed -e "s|/usr/local/bin/tessel-server|$BUILD/server/tessel-server|" \
      -e "s|/usr/local/bin/tessel-worker|$BUILD/worker/tessel-worker|" "$1" >"$2"
}
verify() {
  local out
  out="$(systemd-analyze verify "$1" 2>&1)" || true
  if [[ -n "$out" ]]; then
    echo "FAIL: systemd-analyze verify $(basename "$1"):"
    echo "$out"
    fail=1
  else
    echo "ok: systemd-analyze verify $(basename "$1")"
  fi
}
rewrite "$SRC/deploy/systemd/tessel-server.service" "$TMP/tessel-server.service"
rewrite "$SRC/deploy/systemd/tessel-worker@.service" "$TMP/tessel-worker@.service"
cp "$TMP/tessel-worker@.service" "$TMP/tessel-worker@1.service"
verify "$TMP/tessel-server.service"
verify "$TMP/tessel-worker@.service"
verify "$TMP/tessel-worker@1.service"

# The check itself must be able to fail: a unit with an unknown key is reported.
printf '[Service]\nExecStart=/bin/true\nNoSuchKey=1\n' >"$TMP/broken.service"
if [[ -z "$(systemd-analyze verify "$TMP/broken.service" 2>&1)" ]]; then
  echo "FAIL: systemd-analyze verify did not report an unknown key; this test proves nothing"
  fail=1
fi

for unit in tessel-server.service tessel-worker@.service; do
  for directive in 'DynamicUser=yes' 'ProtectSystem=strict' 'NoNewPrivileges=yes' \
                   'CapabilityBoundingSet=$' 'KillSignal=SIGTERM'; do
    if ! grep -Eq "^$directive" "$SRC/deploy/systemd/$unit"; then
      echo "FAIL: $unit lacks $directive"
      fail=1
    fi
  done
done
grep -q '^StateDirectory=tessel' "$SRC/deploy/systemd/tessel-server.service" ||
  { echo "FAIL: tessel-server.service has no StateDirectory"; fail=1; }
exit $fail
