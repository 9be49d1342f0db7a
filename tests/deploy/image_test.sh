#!/usr/bin/env bash
# The container image (issue 19): builds deploy/Dockerfile with podman, then runs `tessel
# --version` and a tiny embedded tune inside it, as the non-root user, with a read-only root.
#
# Opt-in (TESSEL_IMAGE_TEST=1): the image's build stage compiles tessel from scratch, which takes
# about half an hour on a 2-core machine, beyond what CI can spend beside the test suite. Skipped
# (77) with the reason when not asked for or when podman is missing.
#
# Where no registry is reachable, the base image debian:12 is made with debootstrap from the
# Debian mirror and imported (tagged debian:12 and debian:12-slim). Where crun cannot run
# (cgroups in hybrid mode) set PODMAN_OPTS="--runtime runc --cgroup-manager cgroupfs".
# Usage: image_test.sh SOURCE_DIR
set -euo pipefail
SRC="$1"
if [[ "${TESSEL_IMAGE_TEST:-0}" != 1 ]]; then
  echo "SKIPPED: the image test builds tessel inside a container from scratch (~30 min on 2 cores);"
  echo "         run it with TESSEL_IMAGE_TEST=1 ctest -R image_test (needs podman, runc, debootstrap)"
  exit 77
fi
command -v podman >/dev/null || { echo "SKIPPED: podman is not installed (apt-get install podman runc debootstrap)"; exit 77; }
# shellcheck disable=SC2206
P=(podman ${PODMAN_OPTS:-})
if ! "${P[@]}" image exists docker.io/library/debian:12; then
  if ! "${P[@]}" pull -q docker.io/library/debian:12 2>/dev/null; then
    command -v debootstrap >/dev/null || { echo "SKIPPED: no registry and no debootstrap"; exit 77; }
    echo "image_test: no registry reachable; making debian:12 with debootstrap"
    root="$(mktemp -d)"
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
    tar -C "$root" -c . | "${P[@]}" import - docker.io/library/debian:12 >/dev/null
    rm -rf "$root"
  fi
  "${P[@]}" tag docker.io/library/debian:12 docker.io/library/debian:12-slim
fi
start=$(date +%s)
"${P[@]}" build --isolation chroot -f "$SRC/deploy/Dockerfile" -t tessel:test "$SRC"
echo "image_test: built in $(( $(date +%s) - start )) s; $("${P[@]}" image inspect tessel:test --format '{{.Size}}') bytes"
user="$("${P[@]}" run --rm tessel:test id -u)"
[[ "$user" != 0 ]] || { echo "FAIL: the image runs as root"; exit 1; }
"${P[@]}" run --rm tessel:test tessel --version
out="$("${P[@]}" run --rm --read-only --tmpfs /tmp tessel:test \
        tessel tune matmul --shape M=256,N=256,K=256 --budget 10 --db /tmp/t.db --json -q)"
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("tune in the image:", j["state"], j["trials"]["total"], "trials"); sys.exit(0 if j["state"] == "completed" else 1)'
echo "PASS: image built; runs as uid $user; tessel --version and an embedded tune work"
