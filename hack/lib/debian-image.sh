# Sourced by hack/postgres-image.sh and hack/servers-image.sh: test images
# built from Debian packages with mmdebstrap and `docker import` (no image
# registry). The caller defines log() and runs with set -euo pipefail.

# debian_image_hash SCRIPT: the first 12 hex digits of sha256 over the
# calling script and this library, so a change to either gives a new tag.
debian_image_hash() {
  cat "$1" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12
}

# debian_mirrors SUITE: sets the array `mirrors` to every apt source file
# under /etc/apt that names SUITE (mmdebstrap's MIRROR arguments: packages
# come from the machine's configured sources).
debian_mirrors() {
  mirrors=()
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    if grep -v '^[[:space:]]*#' "$f" | grep -qw -- "$1"; then
      mirrors+=("$f")
    fi
  done
  if [[ ${#mirrors[@]} -eq 0 ]]; then
    log "no apt source under /etc/apt names $1; using mmdebstrap's default mirror"
  fi
}

# debian_rootfs SUITE PACKAGES [MMDEBSTRAP-ARGS...]: a minbase root file
# system with PACKAGES (comma-separated), as a tar on stdout: no man pages,
# info or locales, no docs but copyrights; the extra arguments (hooks) run
# before the final clean-up of debconf backups and logs. Call debian_mirrors
# first.
debian_rootfs() {
  local suite=$1 include=$2
  shift 2
  mmdebstrap --variant=minbase --format=tar \
    --include="$include" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$@" \
    --customize-hook='rm -rf "$1"/var/cache/debconf/*-old "$1"/var/log/*.log "$1"/var/log/apt/*' \
    "$suite" - "${mirrors[@]}"
}

# debian_build TAG ROOTFS-FUNCTION [DOCKER-IMPORT-ARGS...]: imports the tar
# ROOTFS-FUNCTION writes, untagged first, and tags it TAG only when the whole
# pipeline succeeded, so a half-written tarball never gets the cached tag.
debian_build() {
  local tag=$1 rootfs=$2 id
  shift 2
  if ! id=$("$rootfs" | docker import "$@" -); then
    if [[ -n ${id:-} ]]; then docker image rm "$id" >/dev/null 2>&1 || true; fi
    log "building $tag failed"
    return 1
  fi
  docker tag "$id" "$tag"
}
