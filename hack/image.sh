#!/usr/bin/env bash
# Builds keyledger's container image FROM scratch with `docker build`.
# Expects bin/keyledger from `make build` (static, version stamped), or the
# binary named by $BINARY (the node tests build their own). Stages the build
# context in bin/image (or $CONTEXT): the binary, the build host's CA bundle
# (/etc/ssl/certs/ca-certificates.crt) and passwd/group entries for
# UID/GID 10001. Tags the image $IMAGE (default KEYLEDGER_IMAGE of
# versions.env, the default of `keyledger render credentials --image`) and
# prints its tag and size. Needs a Docker engine (bash hack/docker.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"
version=${VERSION:-dev}
image=${IMAGE:-$KEYLEDGER_IMAGE}
binary=${BINARY:-$root/bin/keyledger}
cabundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
context=${CONTEXT:-$root/bin/image}

log() { printf 'image: %s\n' "$*" >&2; }

[[ -x $binary ]] || { log "$binary is missing: run 'make build' first"; exit 1; }
# A scratch image has no libc: the binary must be static.
if ! go version -m "$binary" | grep -q 'CGO_ENABLED=0'; then
  log "$binary was not built with CGO_ENABLED=0"; exit 1
fi
[[ -s $cabundle ]] || { log "no CA bundle at $cabundle (Debian: apt-get install ca-certificates)"; exit 1; }
command -v docker >/dev/null && docker info >/dev/null 2>&1 || { log "no Docker engine answers: run 'bash hack/docker.sh'"; exit 1; }

rm -rf "$context"
mkdir -p "$context"
cp "$binary" "$context/keyledger"
cp "$cabundle" "$context/ca-certificates.crt"
printf 'keyledger:x:10001:10001:keyledger:/nonexistent:/sbin/nologin\n' >"$context/passwd"
printf 'keyledger:x:10001:\n' >"$context/group"
chmod 0555 "$context/keyledger"
chmod 0444 "$context/ca-certificates.crt" "$context/passwd" "$context/group"

docker build --quiet --build-arg VERSION="$version" -t "$image" -f "$root/Dockerfile" "$context" >&2
size=$(docker image inspect -f '{{.Size}}' "$image")
log "built $image: $size bytes ($(( (size + 524287) / 1048576 )) MiB)"
echo "$image"
