package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/migrations"
	"github.com/keyledger/keyledger/store"
)

// Commit, CommitTime and Modified are stamped at build time by `make
// build` and `make release` (-ldflags "-X ...app.Commit=..."), from git:
// they stand in for the build information's vcs.* settings, which the go
// command leaves out where it cannot read the checkout (a git worktree,
// GOFLAGS=-buildvcs=false).
var (
	Commit     = ""
	CommitTime = ""
	Modified   = ""
)

// versionInfo is what `keyledger version` prints: what was built, from
// the Go build information, and the journal schema this binary migrates
// to. Commit, CommitTime and Modified come from the build's vcs.* settings
// (absent when the binary was built outside a git checkout): the time is
// the commit's, not the build's, so one commit always builds the same
// binary (dist/SHA256SUMS of `make release` can be reproduced).
type versionInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commitTime,omitempty"`
	Modified   *bool  `json:"modified,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	Schema     schema `json:"schema"`
}

// schema is the journal schema version this binary expects (the highest
// migration it embeds) and, given a journal, the one found there.
type schema struct {
	Expected uint  `json:"expected"`
	Found    *uint `json:"found,omitempty"`
	Dirty    *bool `json:"dirty,omitempty"`
}

func newVersionCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the version, commit and journal schema",
		Long: `Print keyledger's version, the commit and commit time it was built from,
whether the tree was modified, the Go release and platform, and the journal
schema version it migrates to. Given --database-url, it also reads the schema
version the journal holds (and nothing else). One JSON line by default (what
keyledger --version prints).`,
		Example:           "  keyledger version\n  keyledger version -o table --database-url \"$OWNER_URL\"",
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			if len(args) != 0 {
				return usagef("version takes no arguments")
			}
			v := buildVersion()
			// Only a journal named on the command line is read: `keyledger
			// version` alone contacts nothing, whatever
			// KEYLEDGER_DATABASE_URL holds.
			if g.databaseURL != "" {
				status, err := store.MigrateWith(ctx, g.databaseURL, store.MigrateVersion, store.MigrateOptions{})
				if err != nil {
					return err
				}
				v.Schema.Found, v.Schema.Dirty = &status.Version, &status.Dirty
			}
			return printVersion(streams, v, out.format)
		},
	}
	addOutput(cmd, &out, formatJSON, formatYAML, formatTable)
	return cmd
}

func printVersion(streams IOStreams, v versionInfo, output string) error {
	switch output {
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = streams.Out.Write(b)
		return err
	case "table":
		rows := [][2]string{{"VERSION", v.Version}, {"COMMIT", v.Commit}, {"COMMIT TIME", v.CommitTime}}
		if v.Modified != nil {
			rows = append(rows, [2]string{"MODIFIED", strconv.FormatBool(*v.Modified)})
		}
		rows = append(rows, [2]string{"GO", v.Go}, [2]string{"PLATFORM", v.Platform},
			[2]string{"SCHEMA EXPECTED", strconv.FormatUint(uint64(v.Schema.Expected), 10)})
		if v.Schema.Found != nil {
			rows = append(rows, [2]string{"SCHEMA FOUND", strconv.FormatUint(uint64(*v.Schema.Found), 10)},
				[2]string{"SCHEMA DIRTY", strconv.FormatBool(*v.Schema.Dirty)})
		}
		for _, r := range rows {
			if r[1] != "" {
				fmt.Fprintf(streams.Out, "%-16s %s\n", r[0], r[1])
			}
		}
		return nil
	default:
		b, _ := json.Marshal(v)
		fmt.Fprintln(streams.Out, string(b))
		return nil
	}
}

// buildVersion is this binary's versionInfo, without the journal.
func buildVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(bi, Version, ExpectedSchemaVersion())
}

// versionFrom reads bi (nil: no build information) over the stamped
// Commit, CommitTime and Modified. version is the stamped -ldflags
// Version; when it is the default "dev", a module version (`go install
// ...@v1.2.3`) stands in.
func versionFrom(bi *debug.BuildInfo, version string, expected uint) versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Schema: schema{Expected: expected}, Commit: Commit, CommitTime: CommitTime}
	if m, err := strconv.ParseBool(Modified); err == nil {
		v.Modified = &m
	}
	if bi == nil {
		return v
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		v.Platform = goos + "/" + goarch
	}
	return v
}

// ExpectedSchemaVersion is the highest journal schema version this binary
// migrates to: the number of its newest embedded migration.
func ExpectedSchemaVersion() uint {
	entries, _ := fs.ReadDir(migrations.FS, ".")
	var highest uint
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".up.sql") {
			continue
		}
		if n, err := strconv.ParseUint(num, 10, 32); err == nil && uint(n) > highest {
			highest = uint(n)
		}
	}
	return highest
}
