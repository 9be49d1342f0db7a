#!/usr/bin/env bash
# Configures and builds tessel. Usage: scripts/build.sh BUILD_DIR BUILD_TYPE [extra cmake args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
BUILD_TYPE="${2:-RelWithDebInfo}"
shift $(( $# > 2 ? 2 : $# ))

# ccache survives a fresh clone in another folder when paths are made relative to the source.
export CCACHE_BASEDIR="$ROOT"
export CCACHE_NOHASHDIR=1
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@" >/dev/null
JOBS="${TESSEL_JOBS:-$(nproc)}"
cmake --build "$BUILD_DIR" -j "$JOBS"
