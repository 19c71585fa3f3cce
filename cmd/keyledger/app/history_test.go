package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// Wrong history invocations exit 64 before any cluster is contacted.
func TestHistoryUsageErrors(t *testing.T) {
	t.Parallel()
	cases := [][]string{
		{"history"},
		{"history", "no-slash"},
		{"history", "Bad_NS/name"},
		{"history", "ns/Bad_Name"},
		{"history", "ns/a", "ns/b"},
		{"history", "ns/a", "--version", "0"},
		{"history", "ns/a", "--version", "-1"},
		{"history", "ns/a", "--version", "01"},
		{"history", "ns/a", "--version", "x"},
		{"history", "ns/a", "-o", "xml"},
	}
	for _, args := range cases {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), append(args, "--kubeconfig", "/nonexistent/kubeconfig"), IOStreams{Out: &out, ErrOut: &errOut})
		require.Equal(t, ExitUsage, ExitCode(err), "%v: %v", args, err)
		require.Empty(t, out.String(), "%v", args)
	}
}

func TestPrintHistory(t *testing.T) {
	t.Parallel()
	h := &versioned.History{Namespace: "shop", Name: "db", UID: "u-1", Version: 3, Versions: []versioned.HistoryEntry{
		{Version: 1, Snapshot: "keyledger-h-x-v1", SnapshotTime: "2026-01-01T00:00:00Z", Actor: "req/mut", SourceResourceVersion: "10",
			Size: 5, Keys: []versioned.KeyInfo{{Name: "password", Size: 5}}},
		{Version: 2, Snapshot: "keyledger-h-x-v2", SnapshotTime: "2026-01-02T00:00:00Z", Actor: "req/mut2", SourceResourceVersion: "12",
			Size: 0, Keys: []versioned.KeyInfo{}, Terminating: true},
	}}
	var table bytes.Buffer
	require.NoError(t, printHistory(&table, "table", h, false))
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	require.Equal(t, "secret shop/db uid u-1 version 3", lines[0])
	require.Len(t, lines, 5)
	require.Regexp(t, `^1\s+2026-01-01T00:00:00Z\s+req/mut\s+10\s+password\(5\)\s+5$`, lines[3])
	require.Regexp(t, `^2 \(deleting\)\s+.*\s+-\s+0$`, lines[4])

	var js bytes.Buffer
	require.NoError(t, printHistory(&js, "json", h, false))
	var back versioned.History
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Equal(t, *h, back)

	h.Versions = h.Versions[:1]
	h.Versions[0].Keys[0].Digest = "hmac-sha256:00aa"
	h.Live = []versioned.KeyInfo{{Name: "password", Size: 6, Digest: "hmac-sha256:11bb"}}
	h.Foreign = []versioned.Foreign{{Name: "keyledger-h-x-v7", Version: 7, Reason: versioned.ForeignNotJournaled}}
	var keys bytes.Buffer
	require.NoError(t, printHistory(&keys, "table", h, true))
	require.Contains(t, keys.String(), "3 (live)  password  6     hmac-sha256:11bb")
	require.Contains(t, keys.String(), "1         password  5     hmac-sha256:00aa")
	require.Regexp(t, `keyledger-h-x-v7\s+7\s+not-journaled`, keys.String())
}
