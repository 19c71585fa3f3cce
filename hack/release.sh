#!/usr/bin/env bash
# Builds the release binaries (`make release-binaries`): static
# (CGO_ENABLED=0) keyledger for linux/amd64 and linux/arm64, cross-compiled
# with GOARCH (no network beyond the module cache), stamped with VERSION and
# the commit (hack/stamp.sh), into $DIST (default dist/) as
# keyledger-linux-ARCH, with SHA256SUMS beside them (`sha256sum -c
# SHA256SUMS` in $DIST verifies them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dist=${DIST:-dist}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
ldflags="-s -w -X github.com/keyledger/keyledger/cmd/keyledger/app.Version=$version $(bash hack/stamp.sh)"
mkdir -p "$dist"
rm -f "$dist"/keyledger-linux-* "$dist/SHA256SUMS"
for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$dist/keyledger-linux-$arch" ./cmd/keyledger
done
(cd "$dist" && sha256sum keyledger-linux-amd64 keyledger-linux-arm64 >SHA256SUMS)
printf 'release: %s\n' "$dist"/keyledger-linux-amd64 "$dist"/keyledger-linux-arm64 "$dist/SHA256SUMS" >&2
