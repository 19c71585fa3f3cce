package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/workflow/retire"
)

func newKeyringCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	return group("keyring", "read keyring Secrets (never material)",
		"  keyledger keyring inspect ai/prompt-output-keyring",
		newKeyringInspectCommand(ctx, streams, g))
}

// newKeyringInspectCommand: `keyledger keyring inspect NAMESPACE/NAME`
// prints the keyring's catalog (material replaced by its digest), never
// material.
func newKeyringInspectCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var dataKey string
	cmd := &cobra.Command{
		Use:   "inspect NS/NAME",
		Short: "print a keyring's catalog (never material)",
		Long: `Print a keyring Secret's catalog: its manifest (examples/keyring-secret.yaml
documents the format) with each key's material replaced by its digest, the
value a KeyRetirement names as expectedMaterialDigest. Never material.`,
		Example: `  keyledger keyring inspect ai/prompt-output-keyring
  keyledger keyring inspect ai/prompt-output-keyring --data-key keyring.json -o yaml`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			ns, name, err := secretTarget("keyring inspect", args)
			if err != nil {
				return err
			}
			_, client, release, err := g.kubeClient(nil)
			if err != nil {
				return err
			}
			defer release()
			catalog, err := retire.Inspect(ctx, client, ns, name, dataKey)
			if err != nil {
				return err
			}
			if out.format == formatYAML {
				return writeJSONAsYAML(streams.Out, json.RawMessage(catalog))
			}
			fmt.Fprintln(streams.Out, string(catalog))
			return nil
		},
	}
	cmd.Flags().StringVar(&dataKey, "data-key", "", "the data entry holding the manifest (default: the Secret's only entry)")
	_ = cmd.RegisterFlagCompletionFunc("data-key", noCompletion)
	addOutput(cmd, &out, formatJSON, formatYAML)
	return cmd
}
