package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/migrations"
)

// The version says what was built from the build information's vcs.*
// settings, over what -ldflags stamped; a module version stands in for an
// unstamped "dev".
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-03T11:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
		{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
	}}
	v := versionFrom(bi, "v1.2.3", 11)
	require.Equal(t, "v1.2.3", v.Version)
	require.Equal(t, "0123456789abcdef0123456789abcdef01234567", v.Commit)
	require.Equal(t, "2026-12-03T11:00:00Z", v.CommitTime)
	require.NotNil(t, v.Modified)
	require.True(t, *v.Modified)
	require.Equal(t, "linux/arm64", v.Platform)
	require.Equal(t, "go1.26.8", v.Go)
	require.Equal(t, uint(11), v.Schema.Expected)

	installed := &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}
	require.Equal(t, "v0.1.0", versionFrom(installed, "dev", 11).Version, "go install ...@v0.1.0")
	require.Equal(t, "v0.2.0", versionFrom(installed, "v0.2.0", 11).Version, "-ldflags wins")

	// No vcs.* (a worktree, -buildvcs=false): the stamped values, none here.
	v = versionFrom(&debug.BuildInfo{}, "dev", 11)
	require.Empty(t, v.Commit)
	require.Nil(t, v.Modified)
}

// The schema version a binary expects is its newest embedded migration:
// the migrations are numbered 1, 2, ... without a gap, so it is their count.
func TestExpectedSchemaVersion(t *testing.T) {
	t.Parallel()
	ups, err := fs.Glob(migrations.FS, "*.up.sql")
	require.NoError(t, err)
	require.NotEmpty(t, ups)
	require.Equal(t, uint(len(ups)), ExpectedSchemaVersion())
}

// keyledger version prints json (the default), yaml or a table; without
// --database-url it contacts nothing, whatever KEYLEDGER_DATABASE_URL
// holds; with one it reads the journal (here unreachable: 69).
func TestVersionCommand(t *testing.T) {
	t.Setenv("KEYLEDGER_DATABASE_URL", unreachableDB)
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), args, IOStreams{Out: &out, ErrOut: &errOut})
		return out.String(), err
	}
	out, err := run("version")
	require.NoError(t, err)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	require.Equal(t, ExpectedSchemaVersion(), v.Schema.Expected)
	require.Nil(t, v.Schema.Found, "no journal was read")

	out, err = run("version", "-o", "yaml")
	require.NoError(t, err)
	var y versionInfo
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &y), out)
	require.Equal(t, v, y)

	out, err = run("version", "-o", "table")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "VERSION "), out)
	require.Contains(t, out, "SCHEMA EXPECTED")

	_, err = run("version", "-o", "xml")
	require.Equal(t, ExitUsage, ExitCode(err))
	_, err = run("version", "--database-url", unreachableDB)
	require.Equal(t, ExitUnavailable, ExitCode(err))
}
