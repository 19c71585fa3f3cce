#!/usr/bin/env bash
# Installs what keyledger's tests need on a Debian machine (as root) and
# starts a Docker engine. Elsewhere it says what is missing.
# KEYLEDGER_DEPS=demo installs only what `make demo` uses (mmdebstrap for
# the PostgreSQL image, and the Docker engine): the host's redis-server and
# nats-server (the credentials repair tests), pgbouncer (the journal through
# a session pooler) and the node's packages are
# installed by `make platform`, which runs this script again in full.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
need=()
command -v go >/dev/null || { echo "deps: Go 1.26 is required (https://go.dev/doc/install)" >&2; exit 1; }
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
demo=false
[[ ${KEYLEDGER_DEPS:-} == demo ]] && demo=true
$demo || command -v redis-server >/dev/null || need+=(redis-server)
$demo || command -v nats-server >/dev/null || need+=(nats-server)
# The session pooler the journal tests and the retirement bench put in
# front of the journal (Debian's pgbouncer; /usr/sbin is not always on PATH).
$demo || command -v pgbouncer >/dev/null || [[ -x /usr/sbin/pgbouncer ]] || need+=(pgbouncer)
command -v dockerd >/dev/null || need+=(docker.io)
# The real node (integration tests; KEYLEDGER_NODE=off skips them): Debian's
# CNI plugins, and what kube-proxy and kube-router call. containerd and runc
# come with docker.io.
if [[ ${KEYLEDGER_NODE:-} != off ]] && ! $demo; then
  [[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
  command -v conntrack >/dev/null || need+=(conntrack)
  command -v ipset >/dev/null || need+=(ipset)
  command -v iptables >/dev/null || need+=(iptables)
  command -v ip >/dev/null || need+=(iproute2)
fi
if [[ ${#need[@]} -gt 0 ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "deps: installing ${need[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "deps: missing ${need[*]}; install them (Debian: apt-get install ${need[*]})," >&2
    echo "      or set KEYLEDGER_TEST_DATABASE_URL to a PostgreSQL you provide." >&2
    [[ -n ${KEYLEDGER_TEST_DATABASE_URL:-} ]] || exit 1
  fi
fi
if [[ -z ${KEYLEDGER_TEST_DATABASE_URL:-} ]]; then
  bash "$root/hack/docker.sh"
fi
