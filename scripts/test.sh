#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test with ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/install-deps.sh"
BUILD_DIR="${TESSEL_BUILD_DIR:-$ROOT/build}"
# The demo's configuration (no tests, no benchmarks) must configure too.
cmake -S "$ROOT" -B "$BUILD_DIR-notests" -G Ninja -DTESSEL_BUILD_TESTS=OFF \
  -DTESSEL_BUILD_BENCH=OFF >/dev/null
"$ROOT/scripts/build.sh" "$BUILD_DIR" RelWithDebInfo -DTESSEL_WERROR=ON
(cd "$BUILD_DIR" && ctest --output-on-failure -j "${TESSEL_TEST_JOBS:-2}" "$@")
# libFuzzer targets with ASan and UBSan, 60 s in total (issue 17).
"$ROOT/scripts/fuzz.sh" "$BUILD_DIR-fuzz"
