#!/usr/bin/env bash
# Builds the image the node tests run credential servers from: Debian's
# redis-server (the Valkey-compatible server the probes speak to) and
# nats-server, from Debian packages (no image registry), at
# POSTGRES_DEBIAN_SUITE from versions.env (the one Debian suite the test
# images use). The tag names its content:
#   keyledger-servers:<suite>-<first 12 hex of sha256 of this script and
#   hack/lib/debian-image.sh>
# Prints the tag on stdout; progress goes to stderr. A cached image is reused
# at once. Needs root (or user namespaces for mmdebstrap) and a Docker engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'servers-image: %s\n' "$*" >&2; }
# shellcheck source=lib/debian-image.sh
source "$root/hack/lib/debian-image.sh"

suite=$POSTGRES_DEBIAN_SUITE
tag=keyledger-servers:$suite-$(debian_image_hash "${BASH_SOURCE[0]}")

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }

debian_mirrors "$suite"
start=$(date +%s)
log "building $tag from Debian $suite packages with mmdebstrap (first run only, a few minutes)"
rootfs_tar() { debian_rootfs "$suite" "redis-server,nats-server"; }
debian_build "$tag" rootfs_tar \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'USER 65534:65534' \
  --change 'WORKDIR /tmp' \
  --message "keyledger test servers (redis-server, nats-server) from Debian $suite"
log "built $tag in $(($(date +%s) - start)) s"
echo "$tag"
