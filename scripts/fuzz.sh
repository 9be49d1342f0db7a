#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan and UBSan) and runs each on its checked-in
# corpus (fuzz/corpus/<target>, read only: new inputs go to a temporary directory) for
# TESSEL_FUZZ_SECONDS in total (60 by default), split evenly. Fails on any finding; the crashing
# input is kept in build-fuzz/findings/. Skips, saying so, when clang++ is missing.
# Usage: scripts/fuzz.sh [BUILD_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build-fuzz}"
TOTAL="${TESSEL_FUZZ_SECONDS:-60}"
TARGETS=(request_fuzz key_fuzz kt_cache_fuzz)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: SKIPPED: clang++ is not installed (apt-get install clang)" >&2
  exit 0
fi
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1 CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$ROOT/fuzz" -B "$BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  >/dev/null
cmake --build "$BUILD_DIR" -j "${TESSEL_JOBS:-$(nproc)}"

per_target=$((TOTAL / ${#TARGETS[@]}))
mkdir -p "$BUILD_DIR/findings"
status=0
for target in "${TARGETS[@]}"; do
  scratch="$(mktemp -d)"
  echo "fuzz: $target for ${per_target} s"
  if ! "$BUILD_DIR/$target" -max_total_time="$per_target" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$BUILD_DIR/findings/$target-" \
      "$scratch" "$ROOT/fuzz/corpus/$target" >"$BUILD_DIR/$target.log" 2>&1; then
    echo "fuzz: $target FOUND A PROBLEM (log: $BUILD_DIR/$target.log):" >&2
    tail -40 "$BUILD_DIR/$target.log" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD_DIR/$target.log" |
      sed "s/^/fuzz: $target /"
  fi
  rm -rf "$scratch"
done
exit "$status"
