#!/usr/bin/env bash
# Prints the -ldflags -X settings that tell `keyledger version` what was
# built: the commit, its time (UTC, RFC 3339) and whether the work tree
# differs from it (git status --porcelain, untracked files included, as the
# go command's own vcs.modified). Outside a git checkout it prints nothing.
# The time is the commit's, not the build's: one commit builds the same
# binary, so a release's SHA256SUMS can be reproduced.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse HEAD 2>/dev/null) || exit 0
time=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)
modified=false
[[ -z $(git status --porcelain 2>/dev/null) ]] || modified=true
app=github.com/keyledger/keyledger/cmd/keyledger/app
printf -- '-X %s.Commit=%s -X %s.CommitTime=%s -X %s.Modified=%s\n' "$app" "$commit" "$app" "$time" "$app" "$modified"
