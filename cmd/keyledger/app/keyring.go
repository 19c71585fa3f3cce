package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire"
)

// keyringCommand: `keyledger keyring inspect NAMESPACE/NAME` prints the
// keyring's catalog (material replaced by its digest), never material.
func keyringCommand(ctx context.Context, args []string, streams IOStreams) error {
	if len(args) == 0 || args[0] != "inspect" {
		return usagef("keyring takes inspect NAMESPACE/NAME")
	}
	var flags commonFlags
	var dataKey string
	fs := newFlagSet("keyring inspect", streams)
	flags.addKube(fs)
	fs.StringVar(&dataKey, "data-key", "", "the data entry holding the manifest (default: the Secret's only entry)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("keyring inspect takes one NAMESPACE/NAME")
	}
	ns, name, ok := strings.Cut(fs.Arg(0), "/")
	if !ok {
		return usagef("want NAMESPACE/NAME, got %q", fs.Arg(0))
	}
	if err := command.ValidNamespace(ns); err != nil {
		return usagef("namespace: %v", err)
	}
	if err := command.ValidName(name); err != nil {
		return usagef("name: %v", err)
	}
	_, client, release, err := flags.kubeClient(nil)
	if err != nil {
		return err
	}
	defer release()
	catalog, err := retire.Inspect(ctx, client, ns, name, dataKey)
	if err != nil {
		return err
	}
	fmt.Fprintln(streams.Out, string(catalog))
	return nil
}
