#!/usr/bin/env bash
# Builds the operators of the node's operator suites from the Go module proxy
# at the versions in versions.env, each in a throwaway module of its own
# (never in keyledger's go.mod), and caches them per version under the user
# cache directory with the manifests read from the same module:
#   cloudnativepg-v<version>/manager           CloudNativePG's one binary
#   cloudnativepg-v<version>/cnpg.yaml         its release manifest
#   external-secrets-v<version>/external-secrets
#   external-secrets-v<version>/crds.yaml      the CRD bundle
# `operators.sh cloudnativepg` or `operators.sh external-secrets` builds only
# that one. Prints the cache root on stdout; progress goes to stderr. A
# cached set is reused in milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../versions.env
source "$root/versions.env"

log() { printf 'operators: %s\n' "$*" >&2; }
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/keyledger/operators
cnpg=$cache_root/cloudnativepg-v$CLOUDNATIVEPG_VERSION
eso=$cache_root/external-secrets-v$EXTERNAL_SECRETS_VERSION
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# CloudNativePG: the proxy refuses the module's version list, so `go install
# ...@v` fails; the module itself is served. Build it as the main module (no
# deprecation lookup) from a writable copy.
only=${1:-}
case $only in ""|cloudnativepg|external-secrets) ;; *) log "unknown operator $only (cloudnativepg or external-secrets)"; exit 64 ;; esac

if [[ $only != external-secrets && ( ! -x $cnpg/manager || ! -s $cnpg/cnpg.yaml ) ]]; then
  start=$(date +%s)
  log "building CloudNativePG v$CLOUDNATIVEPG_VERSION from the Go module proxy (first run only, about 3 minutes on 2 cores)"
  mod=github.com/cloudnative-pg/cloudnative-pg
  src=$(go mod download -json "$mod@v$CLOUDNATIVEPG_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [[ -d $src ]] || { log "cannot download $mod@v$CLOUDNATIVEPG_VERSION"; exit 1; }
  cp -r "$src" "$work/cnpg" && chmod -R u+w "$work/cnpg"
  (cd "$work/cnpg" && go mod download >&2 &&
    go build -trimpath -ldflags "-s -w -X $mod/pkg/versions.buildVersion=$CLOUDNATIVEPG_VERSION" \
      -o "$work/manager" ./cmd/manager >&2)
  manifest=$work/cnpg/releases/cnpg-$CLOUDNATIVEPG_VERSION.yaml
  [[ -s $manifest ]] || { log "the module has no releases/cnpg-$CLOUDNATIVEPG_VERSION.yaml"; exit 1; }
  mkdir -p "$cnpg"
  install -m 0644 "$manifest" "$cnpg/cnpg.yaml"
  mv "$work/manager" "$cnpg/manager"
  log "CloudNativePG built in $(($(date +%s) - start)) s"
fi

# External Secrets: its go.mod replaces sprig, so `go install` refuses it;
# a helper module carries the same replacement. Every provider is linked.
if [[ $only != cloudnativepg && ( ! -x $eso/external-secrets || ! -s $eso/crds.yaml ) ]]; then
  start=$(date +%s)
  log "building External Secrets v$EXTERNAL_SECRETS_VERSION from the Go module proxy (first run only, about 8 minutes on 2 cores)"
  mod=github.com/external-secrets/external-secrets
  mkdir -p "$work/eso" && cd "$work/eso"
  go mod init keyledger.local/external-secrets >/dev/null 2>&1
  go mod edit -replace=github.com/Masterminds/sprig/v3=github.com/external-secrets/sprig/v3@v3.3.0
  go get "$mod@v$EXTERNAL_SECRETS_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$work/external-secrets" "$mod" >&2
  src=$(go list -m -f '{{.Dir}}' "$mod")
  [[ -s $src/deploy/crds/bundle.yaml ]] || { log "the module has no deploy/crds/bundle.yaml"; exit 1; }
  mkdir -p "$eso"
  install -m 0644 "$src/deploy/crds/bundle.yaml" "$eso/crds.yaml"
  mv "$work/external-secrets" "$eso/external-secrets"
  cd "$root"
  log "External Secrets built in $(($(date +%s) - start)) s"
fi
echo "$cache_root"
