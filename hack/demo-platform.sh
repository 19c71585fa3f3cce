#!/usr/bin/env bash
# Builds and starts only what `make demo` uses: the packages it needs and the
# Docker engine (hack/deps.sh with KEYLEDGER_DEPS=demo), then, at the same
# time, the control-plane binaries (compiling: CPU), the PostgreSQL image
# (Debian packages: network and disk), and keyledger's own Go modules and
# packages (downloaded, then compiled into the build cache with the flags the
# demo builds them with, nothing linked: go list -export), which the demo would
# otherwise download and compile after the other two, while the control plane
# links or downloads. Each part is cached and reused at once on later runs.
# Fails when any part fails, after all of them have ended.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

KEYLEDGER_DEPS=demo bash "$root/hack/deps.sh"

bash "$root/hack/controlplane.sh" >/dev/null &
controlplane=$!
bash "$root/hack/postgres-image.sh" >/dev/null &
postgres=$!
(cd "$root" && go mod download && go list -export -deps ./integration/demo ./cmd/keyledger >/dev/null) &
modules=$!

failed=()
wait "$controlplane" || failed+=("control plane (hack/controlplane.sh)")
wait "$postgres" || failed+=("PostgreSQL image (hack/postgres-image.sh)")
wait "$modules" || failed+=("keyledger's Go modules and packages (go mod download, go list -export)")
if [[ ${#failed[@]} -gt 0 ]]; then
  printf 'demo-platform: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
