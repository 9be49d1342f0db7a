#!/usr/bin/env bash
# Installs the Debian 12 packages tessel builds and tests with: the one dependency list (the
# container image, deploy/Dockerfile, builds with it too). Idempotent: does nothing (and needs no
# network or root) when everything is already installed.
#   scripts/install-deps.sh               everything: build, tests, benchmarks, CI tools
#   scripts/install-deps.sh --build-only  what building the binaries needs (the image's build stage)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Building tessel-server, tessel-worker, the tessel CLI and the libraries.
BUILD_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libsqlite3-dev sqlite3 zlib1g-dev libssl-dev
  libboost-dev
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libxgboost-dev
  pybind11-dev python3-dev
)
# Tests, benchmarks and the tools they drive.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-grpcio python3-protobuf
  openssl
  clang
  prometheus chromium
  # deploy/ (issue 19): network namespaces, `systemd-analyze verify` and the Kubernetes models.
  iproute2 systemd python3-kubernetes python3-yaml
  # The model importers (issue 21): tessel.from_torch and tessel.from_onnx.
  python3-torch python3-onnx
)
PACKAGES=("${BUILD_PACKAGES[@]}")
BUILD_ONLY=0
if [[ "${1:-}" == "--build-only" ]]; then
  BUILD_ONLY=1
else
  PACKAGES+=("${TEST_PACKAGES[@]}")
  # Node.js and npm for the validators in tests/deploy: Debian's, unless the machine has its own
  # (a NodeSource nodejs package ships npm itself and conflicts with Debian's npm).
  command -v npm >/dev/null || PACKAGES+=(nodejs npm)
fi

# The npm validators of tests/deploy (kubernetes-models, dockerfilelint), pinned by its
# package-lock.json, installed beside it (node_modules is not committed).
install_npm_checks() {
  [[ $BUILD_ONLY -eq 1 ]] && return 0
  local dir="$ROOT/tests/deploy"
  [[ -d "$dir/node_modules/kubernetes-models" && -d "$dir/node_modules/dockerfilelint" ]] && return 0
  echo "install-deps: npm ci in tests/deploy"
  npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_npm_checks
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_npm_checks
