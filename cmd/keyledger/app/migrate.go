package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
)

func newMigrateCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var o migrateOptions
	cmd := &cobra.Command{
		Use:   "migrate up|down|version|recover",
		Short: "manage the journal schema (recover: clear the dirty mark an earlier version left; down refuses to drop journal rows unless --destroy-journal-records)",
		Long: `Manage the journal's schema (the keyledger schema in PostgreSQL), as its owner:
up applies every migration (a second up changes nothing), down undoes one,
version prints where the schema is, recover clears the dirty mark an earlier
keyledger left. Each migration runs in one transaction with its version row.
down refuses a step that would drop journal rows unless
--destroy-journal-records. It prints one JSON line: version, dirty, changed.`,
		Example: `  keyledger migrate up --database-url postgres://owner@db/journal
  keyledger migrate version -o yaml
  keyledger migrate up --wait 60s      # a Job started beside its database`,
		Args:      cobra.ArbitraryArgs,
		ValidArgs: []string{string(store.MigrateUp), string(store.MigrateDown), string(store.MigrateVersion), string(store.MigrateRecover)},
		RunE: func(c *cobra.Command, args []string) error {
			return migrateCommand(ctx, c, args, &o, g, streams)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.role, "operator-role", store.DefaultOperatorRole,
		"deprecated: the shared operator role of journals before migration 5 (granted by migrations 1-4 if it exists, revoked by 5); grant each namespace's role with keyledger journal grant")
	fs.BoolVar(&o.destroy, "destroy-journal-records", false,
		"let migrate down drop tables that hold journal rows (operations and records at version 1, namespace grants and their history at version 5); without it such a step is refused and nothing is dropped")
	fs.DurationVar(&o.wait, "wait", 0, "how long to keep trying to reach PostgreSQL before failing with 69 (0: one attempt); a Job started beside its database sets it")
	_ = cmd.RegisterFlagCompletionFunc("operator-role", noCompletion)
	_ = cmd.RegisterFlagCompletionFunc("wait", noCompletion)
	addOutput(cmd, &o.output, formatJSON, formatYAML)
	return cmd
}

type migrateOptions struct {
	role    string
	destroy bool
	wait    time.Duration
	output  outputFlag
}

func migrateCommand(ctx context.Context, c *cobra.Command, args []string, o *migrateOptions, g *commonFlags, streams IOStreams) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := o.output.check(); err != nil {
		return err
	}
	log := g.logger(streams.ErrOut, slog.LevelInfo)
	if len(args) != 1 {
		return usagef("migrate takes one of up, down, version, recover")
	}
	dir := store.MigrateDirection(args[0])
	switch dir {
	case store.MigrateUp, store.MigrateDown, store.MigrateVersion, store.MigrateRecover:
	default:
		return usagef("migrate takes one of up, down, version, recover, not %q", args[0])
	}
	if o.wait < 0 {
		return usagef("--wait must not be negative, got %s", o.wait)
	}
	url, err := g.database()
	if err != nil {
		return err
	}
	if o.wait > 0 {
		attempts, err := store.WaitReachable(ctx, url, o.wait, time.Second)
		log.Info("database wait", "attempts", attempts, "wait", o.wait.String(), "reachable", err == nil)
		if err != nil {
			return err
		}
	}
	if c.Flags().Changed("operator-role") {
		log.Warn("deprecated flag", "flag", "--operator-role",
			"detail", "since migration 5 no shared operator role holds journal rights; grant each namespace's role with keyledger journal grant")
	}
	if o.destroy && dir != store.MigrateDown {
		return usagef("--destroy-journal-records only goes with migrate down")
	}
	status, err := store.MigrateWith(ctx, url, dir, store.MigrateOptions{OperatorRole: o.role, DestroyJournalRecords: o.destroy})
	if err != nil {
		return err
	}
	log.Info("migrate", "direction", string(dir), "version", status.Version, "dirty", status.Dirty, "changed", status.Changed)
	return writeLine(streams.Out, o.output.format, status)
}
