package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/keyledger/keyledger/store"
)

func migrateCommand(ctx context.Context, args []string, streams IOStreams, log *slog.Logger) error {
	var flags commonFlags
	var role string
	var wait time.Duration
	fs := newFlagSet("migrate", streams)
	flags.addDatabase(fs)
	fs.StringVar(&role, "operator-role", store.DefaultOperatorRole, "role granted journal rights (must exist)")
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
	status, err := store.Migrate(ctx, url, dir, role)
	if err != nil {
		return err
	}
	log.Info("migrate", "direction", string(dir), "version", status.Version, "dirty", status.Dirty, "changed", status.Changed)
	b, _ := json.Marshal(status)
	fmt.Fprintln(streams.Out, string(b))
	return nil
}
