package app

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keyledger/keyledger/store"
)

// pruneCommand is journal prune --older-than DURATION, as the schema owner
// (store.Prune). It prints what it removed: "pruned N operations and M
// records (KIND n, ...) finalized before CUTOFF, event E", or with -o json
// the store.PruneResult.
func pruneCommand(ctx context.Context, args []string, streams IOStreams) error {
	var flags commonFlags
	fs := newFlagSet("journal prune", streams)
	flags.addDatabase(fs)
	flags.addOutput(fs)
	olderThan := fs.Duration("older-than", -1, "remove finished plan runs finalized more than this long ago (required; 0s: every removable run)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := flags.checkOutput(); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return usagef("journal prune takes no arguments")
	case *olderThan == -1:
		return usagef("journal prune needs --older-than DURATION (for example 720h)")
	case *olderThan < 0:
		return usagef("journal prune --older-than must not be negative")
	}
	st, err := flags.openJournal(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := st.Prune(ctx, *olderThan)
	if err != nil {
		return err
	}
	if flags.output == "json" {
		return json.NewEncoder(streams.Out).Encode(res)
	}
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
	return nil
}
