#!/usr/bin/env bash
# Builds the three images CloudNativePG runs on the test node, with no image
# registry, and prints their tags on stdout (operator, operand, pooler);
# progress goes to stderr. Cached images are reused at once.
#   keyledger.local/cloudnativepg:<version>-<hash>
#     FROM scratch: /operator/manager_amd64 (the binary hack/operators.sh
#     built) and /manager, a symlink to it, working directory /. The operator
#     runs /manager controller; every PostgreSQL pod's init container copies
#     ./manager from this image into /controller (architecture discovery
#     globs /operator/manager_*, so both paths must exist).
#   keyledger.local/cloudnativepg-postgres:<major>-<suite>-<hash>
#     PostgreSQL POSTGRES_MAJOR from Debian POSTGRES_DEBIAN_SUITE packages
#     (mmdebstrap | docker import): its programs on PATH (CloudNativePG sets
#     none), the user postgres renumbered to uid/gid 26 (the pods run as
#     26:26), LANG=C.UTF-8, no entrypoint (the instance manager runs
#     postgres). The tag begins with the major: CloudNativePG reads the
#     version from it.
#   keyledger.local/cloudnativepg-pgbouncer:<suite>-<hash>
#     PgBouncer from Debian PGBOUNCER_DEBIAN_SUITE packages for a Pooler's
#     pods: /usr/bin/pgbouncer (the pooler's instance manager, copied into
#     /controller by the pod's init container, execs that path; Debian
#     installs it in /usr/sbin), the user pgbouncer as uid 998 and group
#     996 (the pods run as 998:996, and the admin console's peer
#     authentication looks the name up), no entrypoint.
# <hash> is the first 12 hex of sha256 over this script, hack/lib/debian-image.sh
# and (for the operator) the binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'operators-images: %s\n' "$*" >&2; }
# shellcheck source=lib/debian-image.sh
source "$root/hack/lib/debian-image.sh"

ops=$(bash "$root/hack/operators.sh" cloudnativepg)
manager=$ops/cloudnativepg-v$CLOUDNATIVEPG_VERSION/manager
arch=$(go env GOARCH)

op_hash=$(cat "${BASH_SOURCE[0]}" "$root/hack/lib/debian-image.sh" "$manager" | sha256sum | cut -c1-12)
operator=keyledger.local/cloudnativepg:$CLOUDNATIVEPG_VERSION-$op_hash
if ! docker image inspect "$operator" >/dev/null 2>&1; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/root/operator"
  install -m 0755 "$manager" "$work/root/operator/manager_$arch"
  ln -s "operator/manager_$arch" "$work/root/manager"
  operator_tar() { tar -C "$work/root" --owner=0 --group=0 -cf - operator manager; }
  debian_build "$operator" operator_tar \
    --change 'WORKDIR /' \
    --change 'USER 10001:10001' \
    --change 'ENTRYPOINT ["/manager"]' \
    --message "CloudNativePG $CLOUDNATIVEPG_VERSION manager built from the Go module proxy"
  log "built $operator"
fi

major=$POSTGRES_MAJOR
suite=$POSTGRES_DEBIAN_SUITE
operand=keyledger.local/cloudnativepg-postgres:$major-$suite-$(debian_image_hash "${BASH_SOURCE[0]}")
if ! docker image inspect "$operand" >/dev/null 2>&1; then
  command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }
  debian_mirrors "$suite"
  start=$(date +%s)
  log "building $operand from Debian $suite packages with mmdebstrap (first run only, a few minutes)"
  # Hooks: drop the cluster postgresql-common creates at install time (the
  # instance manager runs initdb), drop LLVM (JIT off saves ~150 MB), and
  # renumber postgres to 26:26 with its files (Debian's gid 26, tape, goes).
  operand_tar() {
    debian_rootfs "$suite" "postgresql-$major" \
      --customize-hook="rm -rf \"\$1/var/lib/postgresql/$major\" \"\$1/etc/postgresql/$major\"" \
      --customize-hook="rm -rf \"\$1/usr/lib/postgresql/$major/lib/bitcode\" \"\$1/usr/lib/postgresql/$major/lib/llvmjit.so\" \"\$1/usr/lib/postgresql/$major/lib/llvmjit_types.bc\"" \
      --customize-hook='for p in $(chroot "$1" dpkg-query -W -f="\${Package}\n" "libllvm*" "libz3-*" 2>/dev/null); do chroot "$1" dpkg --purge --force-depends "$p" >&2; done' \
      --customize-hook='chroot "$1" sh -ec "old=\$(id -u postgres); oldg=\$(id -g postgres); g=\$(getent group 26 | cut -d: -f1); if [ -n \"\$g\" ]; then groupdel \"\$g\"; fi; groupmod -g 26 postgres; usermod -u 26 -g 26 postgres; find / -xdev \\( -uid \$old -o -gid \$oldg \\) -exec chown -h 26:26 {} +"'
  }
  debian_build "$operand" operand_tar \
    --change "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change 'ENV LANG=C.UTF-8' \
    --change 'USER 26:26' \
    --change 'WORKDIR /var/lib/postgresql' \
    --message "PostgreSQL $major from Debian $suite for CloudNativePG"
  log "built $operand in $(($(date +%s) - start)) s"
fi
suite=$PGBOUNCER_DEBIAN_SUITE
pooler=keyledger.local/cloudnativepg-pgbouncer:$suite-$(debian_image_hash "${BASH_SOURCE[0]}")
if ! docker image inspect "$pooler" >/dev/null 2>&1; then
  command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }
  debian_mirrors "$suite"
  start=$(date +%s)
  log "building $pooler from Debian $suite packages with mmdebstrap (first run only, under a minute)"
  pooler_tar() {
    debian_rootfs "$suite" pgbouncer \
      --customize-hook='ln -s ../sbin/pgbouncer "$1/usr/bin/pgbouncer"' \
      --customize-hook='chroot "$1" sh -ec "groupadd -g 996 pgbouncer; useradd -u 998 -g 996 -d /controller -M -s /usr/sbin/nologin pgbouncer"'
  }
  debian_build "$pooler" pooler_tar \
    --change 'ENV LANG=C.UTF-8' \
    --change 'USER 998:996' \
    --change 'WORKDIR /' \
    --message "PgBouncer from Debian $suite for CloudNativePG's Pooler"
  log "built $pooler in $(($(date +%s) - start)) s"
fi
echo "$operator"
echo "$operand"
echo "$pooler"
