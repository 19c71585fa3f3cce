package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/keyledger/keyledger/store"
)

func migrateCommand(ctx context.Context, args []string, streams IOStreams, log *slog.Logger) error {
	var flags commonFlags
	var role string
	fs := newFlagSet("migrate", streams)
	flags.addDatabase(fs)
	fs.StringVar(&role, "operator-role", store.DefaultOperatorRole, "role granted journal rights (must exist)")
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
	url, err := flags.database()
	if err != nil {
		return err
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
