package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	flag "github.com/spf13/pflag"

	"github.com/keyledger/keyledger/store"
)

func migrateCommand(ctx context.Context, args []string, streams IOStreams, log *slog.Logger) error {
	var flags commonFlags
	var role string
	var destroy bool
	var wait time.Duration
	fs := newFlagSet("migrate", streams)
	flags.addDatabase(fs)
	fs.StringVar(&role, "operator-role", store.DefaultOperatorRole,
		"deprecated: the shared operator role of journals before migration 5 (granted by migrations 1-4 if it exists, revoked by 5); grant each namespace's role with keyledger journal grant")
	fs.BoolVar(&destroy, "destroy-journal-records", false,
		"let migrate down drop tables that hold journal rows (operations and records at version 1, namespace grants and their history at version 5); without it such a step is refused and nothing is dropped")
	fs.DurationVar(&wait, "wait", 0, "how long to keep trying to reach PostgreSQL before failing with 69 (0: one attempt); a Job started beside its database sets it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("migrate takes one of up, down, version, recover")
	}
	dir := store.MigrateDirection(fs.Arg(0))
	switch dir {
	case store.MigrateUp, store.MigrateDown, store.MigrateVersion, store.MigrateRecover:
	default:
		return usagef("migrate takes one of up, down, version, recover, not %q", fs.Arg(0))
	}
	if wait < 0 {
		return usagef("--wait must not be negative, got %s", wait)
	}
	url, err := flags.database()
	if err != nil {
		return err
	}
	if wait > 0 {
		attempts, err := store.WaitReachable(ctx, url, wait, time.Second)
		log.Info("database wait", "attempts", attempts, "wait", wait.String(), "reachable", err == nil)
		if err != nil {
			return err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "operator-role" {
			log.Warn("deprecated flag", "flag", "--operator-role",
				"detail", "since migration 5 no shared operator role holds journal rights; grant each namespace's role with keyledger journal grant")
		}
	})
	if destroy && dir != store.MigrateDown {
		return usagef("--destroy-journal-records only goes with migrate down")
	}
	status, err := store.MigrateWith(ctx, url, dir, store.MigrateOptions{OperatorRole: role, DestroyJournalRecords: destroy})
	if err != nil {
		return err
	}
	log.Info("migrate", "direction", string(dir), "version", status.Version, "dirty", status.Dirty, "changed", status.Changed)
	b, _ := json.Marshal(status)
	fmt.Fprintln(streams.Out, string(b))
	return nil
}
