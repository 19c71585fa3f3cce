#!/usr/bin/env bash
# Builds the test node's binaries from the Go module proxy at the versions in
# versions.env and caches them per version under the user cache directory:
# kubelet, kube-proxy and kube-scheduler (same helper module and ldflags as
# hack/controlplane.sh, so its build cache is reused) and kube-router (the
# NetworkPolicy enforcer). Prints the cache directory on stdout; progress goes
# to stderr. A cached set is reused in milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/keyledger/node
dir=$cache_root/k8s-v$KUBERNETES_VERSION-kube-router-v$KUBE_ROUTER_VERSION
bins=(kubelet kube-proxy kube-scheduler kube-router)
have=1
for b in "${bins[@]}"; do [[ -x $dir/$b ]] || have=0; done
if [[ $have -eq 1 ]]; then
  echo "$dir"
  exit 0
fi

log() { printf 'node: %s\n' "$*" >&2; }
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

start=$(date +%s)
log "building kubelet, kube-proxy and kube-scheduler v$KUBERNETES_VERSION from the Go module proxy (first run only, about 1 minute after the control plane, 5 minutes cold)"
# shellcheck source=lib/k8s-module.sh
source "$root/hack/lib/k8s-module.sh"
k8s_module "$work/k8s"
go build -trimpath -ldflags "$(k8s_ldflags)" -o "$work/bin/" \
  k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler >&2

log "building kube-router v$KUBE_ROUTER_VERSION (about 3 minutes the first time)"
GOBIN="$work/bin" go install -trimpath -ldflags "-s -w" \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v$KUBE_ROUTER_VERSION" >&2

for b in "${bins[@]}"; do mv "$work/bin/$b" "$dir/"; done
log "done in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
