#!/usr/bin/env bash
# Coverage of the families' decision logic by the fast unit tests
# (go test -short: the in-memory journal of workflow/workflowtest, the one
# scripted API server of workflow/kubetest, and each family's _test files).
#
# For each family it prints the coverage of Decide and Resolve and of every
# function in the files that hold what they decide with (the DECISION_FILES
# below; spec decoding, rendering and the network probes have tests of their
# own), lists the functions below the bar, and fails when a family's total,
# or its Decide or Resolve, is below MIN (default 90). It also prints how
# long `go test -short ./workflow/...` takes (information, not a gate).
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${MIN:-90}
GO=${GO:-go}
module=$($GO list -m)

declare -A DECISION_FILES=(
  [retire]="retire.go secret.go replay.go"
  [credentials]="family.go ensure.go adopt.go repair.go secret.go authorship.go replay.go"
  [versioned]="versioned.go steps.go runreads.go resolve.go provenance.go calls.go snapshot.go retention.go counter.go replay.go"
)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Build the test binaries first, so that the time below is the tests' own.
$GO test -short -count=1 -run '^$' ./workflow/... >/dev/null
start=$(date +%s%N)
$GO test -short -count=1 ./workflow/... >"$out/test.log" 2>&1 || { cat "$out/test.log"; exit 1; }
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))

fail=0
for family in retire credentials versioned; do
  pkg="$module/workflow/$family"
  $GO test -short -count=1 -coverprofile="$out/$family.out" "./workflow/$family/" >/dev/null
  files=${DECISION_FILES[$family]}
  # Per function: go tool cover -func, kept to the decision files.
  $GO tool cover -func="$out/$family.out" | awk -v pkg="$pkg/" -v files="$files" '
    BEGIN { n = split(files, f, " "); for (i = 1; i <= n; i++) keep[pkg f[i]] = 1 }
    { split($1, loc, ":"); if (keep[loc[1]]) print }' >"$out/$family.func"
  # Totals over the decision files' statements, from the profile itself.
  total=$(awk -v pkg="$pkg/" -v files="$files" '
    BEGIN { n = split(files, f, " "); for (i = 1; i <= n; i++) keep[pkg f[i]] = 1 }
    NR > 1 { split($1, loc, ":"); if (!keep[loc[1]]) next
             if (!($1 in seen)) { seen[$1] = 1; all += $2; if ($3 > 0) hit += $2 } }
    END { printf "%.1f", all ? 100 * hit / all : 0 }' "$out/$family.out")
  printf '%-12s decision files %5s%%  (%s)\n' "$family" "$total" "$files"
  awk '$2 == "Decide" || $2 == "Resolve" { printf "  %-10s %s\n", $2, $3 }' "$out/$family.func"
  below=$(awk -v min="$MIN" '{ p = $3; sub("%", "", p); if (p + 0 < min) printf "    %s %s %s\n", $1, $2, $3 }' "$out/$family.func")
  if [ -n "$below" ]; then
    echo "  functions below ${MIN}%:"
    echo "$below"
  fi
  if awk -v t="$total" -v min="$MIN" 'BEGIN { exit !(t + 0 < min) }'; then
    echo "  FAIL: $family decision files below ${MIN}%"; fail=1
  fi
  if awk -v min="$MIN" '($2 == "Decide" || $2 == "Resolve") { p = $3; sub("%", "", p); if (p + 0 < min) bad = 1 } END { exit !bad }' "$out/$family.func"; then
    echo "  FAIL: $family Decide or Resolve below ${MIN}%"; fail=1
  fi
done
tests_s=$(awk '$1 == "ok" { sub("s$", "", $3); sum += $3 } END { printf "%.2f", sum }' "$out/test.log")
echo "go test -short ./workflow/...: the test binaries ran ${tests_s} s in all (sum over packages); ${elapsed_ms} ms wall with linking, on a machine with load $(cut -d' ' -f1 /proc/loadavg)"
exit $fail
