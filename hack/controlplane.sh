#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module
# proxy at the versions in versions.env, and caches them per version under the
# user cache directory. Prints the cache directory on stdout; progress goes to
# stderr. A cached set is reused in milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/keyledger/controlplane
dir=$cache_root/k8s-v$KUBERNETES_VERSION-etcd-v$ETCD_VERSION
if [[ -x $dir/kube-apiserver && -x $dir/kube-controller-manager && -x $dir/etcd ]]; then
  echo "$dir"
  exit 0
fi

log() { printf 'controlplane: %s\n' "$*" >&2; }
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

start=$(date +%s)
log "building Kubernetes v$KUBERNETES_VERSION control plane from the Go module proxy (first run only, about 6-13 minutes on 2 cores)"
# shellcheck source=lib/k8s-module.sh
# etcd's modules download while Kubernetes compiles (network beside CPU).
(
  mkdir -p "$work/etcd" && cd "$work/etcd"
  go mod init keyledger.local/etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
) &
etcd_modules=$!
source "$root/hack/lib/k8s-module.sh"
k8s_module "$work/k8s"
ldflags=$(k8s_ldflags)
log "compiling kube-apiserver and kube-controller-manager"
go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >&2

log "building etcd v$ETCD_VERSION"
wait "$etcd_modules" || { log "cannot download etcd v$ETCD_VERSION's modules"; exit 1; }
cd "$work/etcd"
go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3 >&2

mv "$work/bin/kube-apiserver" "$work/bin/kube-controller-manager" "$work/bin/etcd" "$dir/"
log "done in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
