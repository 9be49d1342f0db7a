#!/usr/bin/env bash
# Runs one of the npm-based checks of deploy/ (tests/deploy/package.json), skipping (exit 77) with
# the reason when the validators are not installed (scripts/install-deps.sh installs them).
# Usage: npm_check.sh SOURCE_DIR k8s|dockerfile
set -euo pipefail
SRC="$1"
HERE="$SRC/tests/deploy"
if [[ ! -d "$HERE/node_modules/kubernetes-models" || ! -d "$HERE/node_modules/dockerfilelint" ]]; then
  echo "SKIPPED: the npm validators are not installed (scripts/install-deps.sh runs npm ci in tests/deploy)"
  exit 77
fi
case "$2" in
  k8s) exec node "$HERE/k8s_validate.mjs" "$SRC/deploy/k8s" ;;
  dockerfile)
    # dockerfilelint exits non-zero when it finds an issue; the control below shows it can.
    bad="$(mktemp)"
    trap 'rm -f "$bad"' EXIT
    printf 'FROM debian:12\nRUN apt-get update\nHEALTHCHECK --bogus=1 CMD true\n' >"$bad"
    if "$HERE/node_modules/.bin/dockerfilelint" "$bad" >/dev/null; then
      echo "FAIL: dockerfilelint passed a broken Dockerfile; this check proves nothing"
      exit 1
    fi
    exec "$HERE/node_modules/.bin/dockerfilelint" "$SRC/deploy/Dockerfile"
    ;;
  *) echo "usage: npm_check.sh SOURCE_DIR k8s|dockerfile" >&2; exit 2 ;;
esac
