package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
)

// newJournalPruneCommand is journal prune --older-than DURATION, as the
// schema owner (store.Prune). It prints what it removed: "pruned N
// operations and M records (KIND n, ...) finalized before CUTOFF, event E",
// or with -o json the store.PruneResult.
func newJournalPruneCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "prune --older-than DURATION",
		Short: "as the schema owner: remove finished plan runs older than DURATION (each plan keeps its newest)",
		Long: `As the journal's schema owner, remove the finished runs of credential plans
finalized more than DURATION ago, keeping each plan's newest finished and
newest completed run, every unfinished and every one-shot operation, and
print what was removed.`,
		Example: `  keyledger journal prune --older-than 720h
  keyledger journal prune --older-than 0s -o json   # every removable run`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkJournalFlags(g, &out); err != nil {
				return err
			}
			switch {
			case len(args) != 0:
				return usagef("journal prune takes no arguments")
			case !c.Flags().Changed("older-than"):
				return usagef("journal prune needs --older-than DURATION (for example 720h)")
			case olderThan < 0:
				return usagef("journal prune --older-than must not be negative")
			}
			st, err := g.openJournal(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Prune(ctx, olderThan)
			if err != nil {
				return err
			}
			if out.format != formatTable {
				return writeStructured(streams.Out, out.format, res)
			}
			printPrune(streams, res)
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove finished plan runs finalized more than this long ago (required; 0s: every removable run)")
	_ = cmd.RegisterFlagCompletionFunc("older-than", noCompletion)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

func printPrune(streams IOStreams, res *store.PruneResult) {
	kinds := make([]string, 0, len(res.RecordKinds))
	for _, k := range store.RecordKinds() {
		if n := res.RecordKinds[string(k)]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(kinds)
	by := ""
	if len(kinds) > 0 {
		by = " (" + strings.Join(kinds, ", ") + ")"
	}
	fmt.Fprintf(streams.Out, "pruned %d operations and %d records%s finalized before %s, prune event %d\n",
		res.Operations, res.Records, by, res.Cutoff.UTC().Format(time.RFC3339), res.Event)
}
