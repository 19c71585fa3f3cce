#!/usr/bin/env bash
# Builds Argo CD (ARGOCD_VERSION of versions.env) from the Go module proxy in
# a throwaway module of its own (never in keyledger's go.mod) and caches it
# per version under the user cache directory, with what the node's Argo CD
# suite installs from the same module:
#   argocd-v<version>/argocd                 the one binary of every component
#   argocd-v<version>/bin/git-verify-wrapper.sh  on the repo-server's PATH
#   argocd-v<version>/crds.yaml              Application and AppProject CRDs
#   argocd-v<version>/config.yaml            argocd-cm, argocd-rbac-cm,
#                                            argocd-secret, argocd-cmd-params-cm
# Argo CD v3.6 needs Go 1.27: the go command fetches GOTOOLCHAIN (only for
# this build). Prints the version's directory on stdout; progress goes to
# stderr. A cached build is reused in milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'argocd: %s\n' "$*" >&2; }
home=${XDG_CACHE_HOME:-$HOME/.cache}/keyledger/argocd/argocd-v$ARGOCD_VERSION
if [[ -x $home/argocd && -x $home/bin/git-verify-wrapper.sh && -s $home/crds.yaml && -s $home/config.yaml ]]; then
  echo "$home"
  exit 0
fi
export GOTOOLCHAIN=$ARGOCD_GO_TOOLCHAIN GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
start=$(date +%s)
log "building Argo CD v$ARGOCD_VERSION with $GOTOOLCHAIN from the Go module proxy (first run only: about 8 minutes on 2 idle cores, 20 on busy ones)"
dir_of() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p'; }
mod=github.com/argoproj/argo-cd/v3
src=$(dir_of "$mod@v$ARGOCD_VERSION")
[[ -d $src ]] || { log "cannot download $mod@v$ARGOCD_VERSION"; exit 1; }
# Its go.mod replaces the gitops-engine module with ./gitops-engine, which
# the module zip leaves out: the same version's module goes there.
engine=$(dir_of "github.com/argoproj/argo-cd/gitops-engine/v3@v$ARGOCD_VERSION")
[[ -d $engine ]] || { log "cannot download the gitops-engine module v$ARGOCD_VERSION"; exit 1; }
cp -r "$src" "$work/argocd" && chmod -R u+w "$work/argocd"
cp -r "$engine" "$work/argocd/gitops-engine" && chmod -R u+w "$work/argocd/gitops-engine"
(cd "$work/argocd" && go mod download >&2 && go build -trimpath -ldflags "-s -w" -o "$work/argocd.bin" ./cmd >&2)
m=$work/argocd/manifests
for f in crds/application-crd.yaml crds/appproject-crd.yaml base/config/argocd-cm.yaml base/config/argocd-rbac-cm.yaml \
  base/config/argocd-secret.yaml base/config/argocd-cmd-params-cm.yaml hack/git-verify-wrapper.sh; do
  [[ -s $m/$f || -s $work/argocd/$f ]] || { log "the module has no $f"; exit 1; }
done
mkdir -p "$home/bin"
{ cat "$m/crds/application-crd.yaml"; echo "---"; cat "$m/crds/appproject-crd.yaml"; } > "$work/crds.yaml"
{ for f in argocd-cm argocd-rbac-cm argocd-secret argocd-cmd-params-cm; do echo "---"; cat "$m/base/config/$f.yaml"; done; } > "$work/config.yaml"
install -m 0644 "$work/crds.yaml" "$home/crds.yaml"
install -m 0644 "$work/config.yaml" "$home/config.yaml"
# Module zips keep no modes: without 0755 every Application fails with
# "permission denied" in the repo-server.
install -m 0755 "$work/argocd/hack/git-verify-wrapper.sh" "$home/bin/git-verify-wrapper.sh"
mv "$work/argocd.bin" "$home/argocd"
log "Argo CD built in $(($(date +%s) - start)) s"
echo "$home"
