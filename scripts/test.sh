#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
BUILD_DIR="${TESSEL_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" "$BUILD_DIR" RelWithDebInfo -DTESSEL_WERROR=ON
cd "$BUILD_DIR"
ctest --output-on-failure -j "${TESSEL_TEST_JOBS:-2}" "$@"
