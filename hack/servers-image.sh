#!/usr/bin/env bash
# Builds the image the node tests run credential servers from: Debian's
# redis-server (the Valkey-compatible server the probes speak to) and
# nats-server, from Debian packages (no image registry), at
# POSTGRES_DEBIAN_SUITE from versions.env (the one Debian suite the test
# images use). The tag names its content:
#   keyledger-servers:<suite>-<first 12 hex of sha256 of this script>
# Prints the tag on stdout; progress goes to stderr. A cached image is reused
# at once. Needs root (or user namespaces for mmdebstrap) and a Docker engine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'servers-image: %s\n' "$*" >&2; }

suite=$POSTGRES_DEBIAN_SUITE
hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
tag=keyledger-servers:$suite-$hash

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }

mirrors=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f $f ]] || continue
  if grep -v '^[[:space:]]*#' "$f" | grep -qw -- "$suite"; then
    mirrors+=("$f")
  fi
done

start=$(date +%s)
log "building $tag from Debian $suite packages with mmdebstrap (first run only, a few minutes)"
rootfs_tar() {
  mmdebstrap --variant=minbase --format=tar \
    --include="redis-server,nats-server" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/cache/debconf/*-old "$1"/var/log/*.log "$1"/var/log/apt/*' \
    "$suite" - "${mirrors[@]}"
}
# Imported untagged first, so a half-written tarball never gets the cached tag.
if ! id=$(rootfs_tar | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'USER 65534:65534' \
  --change 'WORKDIR /tmp' \
  --message "keyledger test servers (redis-server, nats-server) from Debian $suite" \
  -); then
  if [[ -n ${id:-} ]]; then docker image rm "$id" >/dev/null 2>&1 || true; fi
  log "building $tag failed"
  exit 1
fi
docker tag "$id" "$tag"
log "built $tag in $(($(date +%s) - start)) s"
echo "$tag"
