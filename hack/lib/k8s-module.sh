# Sourced by hack/controlplane.sh and hack/node.sh: a throwaway Go module that
# builds commands of k8s.io/kubernetes at $KUBERNETES_VERSION from the Go module
# proxy. k8s.io/kubernetes replaces its staging modules with ./staging/...;
# the helper module replaces each with the published k8s.io/<name> at the
# matching v0.<minor>.<patch>. Both scripts use the same module and ldflags,
# so the second one to build reuses the first one's build cache.

# k8s_module DIR: creates the helper module in DIR (cwd is left there).
k8s_module() {
  mkdir -p "$1" && cd "$1"
  go mod init keyledger.local/controlplane >/dev/null 2>&1
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [[ -f $gomod ]] || { log "cannot download k8s.io/kubernetes@v$KUBERNETES_VERSION"; return 1; }
  local staging_version=v0.${KUBERNETES_VERSION#*.} edits=() mod
  while read -r mod; do
    edits+=("-replace=$mod=$mod@$staging_version")
  done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/.*#\1#p' "$gomod")
  [[ ${#edits[@]} -gt 0 ]] || { log "no staging replacements found in $gomod"; return 1; }
  go mod edit "${edits[@]}"
  go get "k8s.io/kubernetes@v$KUBERNETES_VERSION" >&2
}

# k8s_ldflags: the version stamp every component reports.
k8s_ldflags() {
  local minor=${KUBERNETES_VERSION#*.} pkg=k8s.io/component-base/version
  minor=${minor%%.*}
  echo "-s -w -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
 -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z -X $pkg.gitCommit=keyledger-module-build"
}
