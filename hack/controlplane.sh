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
mkdir -p "$work/k8s" && cd "$work/k8s"
go mod init keyledger.local/controlplane >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[[ -f $gomod ]] || { log "cannot download k8s.io/kubernetes@v$KUBERNETES_VERSION"; exit 1; }
# k8s.io/kubernetes replaces its staging modules with ./staging/...; replace
# each with the published k8s.io/<name> at the matching v0.<minor>.<patch>.
staging_version=v0.${KUBERNETES_VERSION#*.}
edits=()
while read -r mod; do
  edits+=("-replace=$mod=$mod@$staging_version")
done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$gomod")
[[ ${#edits[@]} -gt 0 ]] || { log "no staging replacements found in $gomod"; exit 1; }
go mod edit "${edits[@]}"
go get "k8s.io/kubernetes@v$KUBERNETES_VERSION" >&2
minor=${KUBERNETES_VERSION#*.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
 -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z -X $pkg.gitCommit=keyledger-module-build"
log "compiling kube-apiserver and kube-controller-manager"
go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >&2

log "building etcd v$ETCD_VERSION"
mkdir -p "$work/etcd" && cd "$work/etcd"
go mod init keyledger.local/etcd >/dev/null 2>&1
go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2
go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3 >&2

mv "$work/bin/kube-apiserver" "$work/bin/kube-controller-manager" "$work/bin/etcd" "$dir/"
log "done in $(( $(date +%s) - start ))s: $dir"
echo "$dir"
