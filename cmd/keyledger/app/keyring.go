package app

import (
	"context"
	"fmt"

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
	ns, name, err := secretTarget("keyring inspect", fs.Args())
	if err != nil {
		return err
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
