#!/usr/bin/env bash
# Builds the PostgreSQL image the integration tests run, from Debian packages
# (no image registry), at POSTGRES_MAJOR / POSTGRES_DEBIAN_SUITE from
# versions.env. The tag names its content:
#   keyledger-postgres:<major>-<suite>-<first 12 hex of sha256 of this script
#   and hack/lib/debian-image.sh>
# (the entrypoint is part of this script). Prints the tag on stdout; progress
# goes to stderr. A cached image is reused at once. Needs root (or working
# user namespaces for mmdebstrap) and a Docker engine (see hack/docker.sh).
#
# Packages come from the machine's configured apt sources: every file under
# /etc/apt that names the suite is handed to mmdebstrap as a MIRROR argument.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'postgres-image: %s\n' "$*" >&2; }
# shellcheck source=lib/debian-image.sh
source "$root/hack/lib/debian-image.sh"

major=$POSTGRES_MAJOR
suite=$POSTGRES_DEBIAN_SUITE
hash=$(debian_image_hash "${BASH_SOURCE[0]}")
tag=keyledger-postgres:$major-$suite-$hash

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi

command -v mmdebstrap >/dev/null 2>&1 || { log "mmdebstrap is missing (apt-get install mmdebstrap)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The container's entrypoint, run as user postgres. A fresh data directory is
# initialised without a temporary server, so postgres logs "database system
# is ready to accept connections" exactly once, when it accepts connections.
# Arguments are passed to postgres (e.g. -c ssl=on for a TLS test server).
cat >"$work/entrypoint" <<'ENTRYPOINT'
#!/bin/sh
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
if [ -z "${POSTGRES_PASSWORD:-}" ]; then
  echo "keyledger-postgres: POSTGRES_PASSWORD must be set" >&2
  exit 1
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username=postgres --pwfile="$pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 --no-sync >/dev/null
  rm -f "$pwfile"
  cat >>"$PGDATA/pg_hba.conf" <<'HBA'
host all all 0.0.0.0/0 scram-sha-256
host all all ::/0 scram-sha-256
HBA
  # A throwaway test server: durability off for speed.
  cat >>"$PGDATA/postgresql.conf" <<'CONF'
listen_addresses = '*'
password_encryption = scram-sha-256
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
jit = off
unix_socket_directories = '/tmp'
CONF
fi
unset POSTGRES_PASSWORD
exec postgres -D "$PGDATA" "$@"
ENTRYPOINT

debian_mirrors "$suite"

bindir=/usr/lib/postgresql/$major/bin
start=$(date +%s)
log "building $tag from Debian $suite packages with mmdebstrap (first run only, a few minutes)"
# Hooks: drop the cluster postgresql-common creates at install time (the
# entrypoint makes its own), drop LLVM and its libz3 (JIT is off) to save ~150 MB, and add
# the entrypoint and an empty data directory owned by postgres.
rootfs_tar() {
  debian_rootfs "$suite" "postgresql-$major" \
    --customize-hook="rm -rf \"\$1/var/lib/postgresql/$major\" \"\$1/etc/postgresql/$major\"" \
    --customize-hook="rm -rf \"\$1/usr/lib/postgresql/$major/lib/bitcode\" \"\$1/usr/lib/postgresql/$major/lib/llvmjit.so\" \"\$1/usr/lib/postgresql/$major/lib/llvmjit_types.bc\"" \
    --customize-hook='for p in $(chroot "$1" dpkg-query -W -f="\${Package}\n" "libllvm*" "libz3-*" 2>/dev/null); do chroot "$1" dpkg --purge --force-depends "$p" >&2; done' \
    --customize-hook="upload \"$work/entrypoint\" /usr/local/bin/keyledger-postgres-entrypoint" \
    --customize-hook='chmod 0755 "$1/usr/local/bin/keyledger-postgres-entrypoint"' \
    --customize-hook='chroot "$1" install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data'
}

debian_build "$tag" rootfs_tar \
  --change "ENV PATH=$bindir:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'ENV PGDATA=/var/lib/postgresql/data' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'USER postgres' \
  --change 'WORKDIR /var/lib/postgresql' \
  --change 'EXPOSE 5432/tcp' \
  --change 'ENTRYPOINT ["/usr/local/bin/keyledger-postgres-entrypoint"]' \
  --message "keyledger PostgreSQL $major from Debian $suite"

log "built $tag in $(($(date +%s) - start)) s"
echo "$tag"
