package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// newHistoryCommand: `keyledger history NAMESPACE/NAME [--version N]
// [--show-keys] [-o table|json|yaml]` lists a Secret's retained versions
// (version, snapshot time, actor, source resourceVersion, key names and
// sizes) and the look-alikes that are not history (foreign). With
// --show-keys it adds, for the live Secret and each listed version, a
// digest of each value keyed for this one invocation: equal digests mean
// equal values, and nothing printed can be tested offline. It never prints
// a value. It reads the journal (which proves which snapshots keyledger
// created), so it needs the database URL, as run does.
func newHistoryCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var version string
	var showKeys bool
	cmd := &cobra.Command{
		Use:   "history NS/NAME",
		Short: "list a Secret's retained versions (never values)",
		Long: `List a Secret's retained versions (the snapshots SecretUpdate and
SecretRestore archived: version, snapshot time, actor, source resourceVersion,
key names and sizes) and the look-alikes keyledger did not create (foreign).
History is only what the journal proves keyledger created, so it needs the
database URL, as run does. --show-keys (optionally with --version N) adds each
value's HMAC digest under a key drawn for this one invocation: equal digests
mean equal values. It never prints a value.`,
		Example: `  keyledger history shop/db
  keyledger history shop/db --version 3 --show-keys
  keyledger history shop/db -o json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			return historyCommand(ctx, args, version, showKeys, &out, g, streams)
		},
	}
	cmd.Flags().StringVar(&version, "version", "", "show only this retained version")
	cmd.Flags().BoolVar(&showKeys, "show-keys", false, "print each value's digest, keyed for this invocation only (equal digests: equal values), never the value")
	_ = cmd.RegisterFlagCompletionFunc("version", noCompletion)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

func historyCommand(ctx context.Context, args []string, version string, showKeys bool, out *outputFlag, g *commonFlags, streams IOStreams) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	ns, name, err := secretTarget("history", args)
	if err != nil {
		return err
	}
	opts := versioned.HistoryOptions{ShowKeys: showKeys}
	if version != "" {
		n, err := strconv.ParseInt(version, 10, 64)
		if err != nil || n < 1 || n > versioned.MaxVersion || strconv.FormatInt(n, 10) != version {
			return usagef("--version must be a version number from 1 to %d", versioned.MaxVersion)
		}
		opts.Version = n
	}
	databaseURL, err := g.database()
	if err != nil {
		return err
	}
	if err := store.CheckURL(databaseURL); err != nil {
		return err
	}
	if _, err := store.SessionTimeoutsFromEnv(os.LookupEnv); err != nil {
		return err
	}
	_, client, release, err := g.kubeClient(nil)
	if err != nil {
		return err
	}
	defer release()
	journal, err := store.Open(ctx, databaseURL)
	if err != nil {
		return &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	defer journal.Close()
	h, err := versioned.ReadHistory(ctx, client, journal, ns, name, opts)
	if err != nil {
		return err
	}
	return printHistory(streams.Out, out.format, h, showKeys)
}

func printHistory(w io.Writer, output string, h *versioned.History, showKeys bool) error {
	if output != formatTable {
		return writeStructured(w, output, h)
	}
	fmt.Fprintf(w, "secret %s/%s uid %s version %d\n\n", h.Namespace, h.Name, h.UID, h.Version)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if showKeys {
		fmt.Fprintln(tw, "VERSION\tKEY\tSIZE\tDIGEST")
		for _, k := range h.Live {
			fmt.Fprintf(tw, "%d (live)\t%s\t%d\t%s\n", h.Version, k.Name, k.Size, k.Digest)
		}
		for _, v := range h.Versions {
			for _, k := range v.Keys {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", v.Version, k.Name, k.Size, k.Digest)
			}
		}
	} else {
		fmt.Fprintln(tw, "VERSION\tSNAPSHOT-TIME\tACTOR\tSOURCE-RV\tKEYS\tSIZE")
		for _, v := range h.Versions {
			keys := make([]string, len(v.Keys))
			for i, k := range v.Keys {
				keys[i] = fmt.Sprintf("%s(%d)", k.Name, k.Size)
			}
			version := strconv.FormatInt(v.Version, 10)
			if v.Terminating {
				version += " (deleting)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", version, v.SnapshotTime, v.Actor, v.SourceResourceVersion,
				dash(strings.Join(keys, ",")), v.Size)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(h.Foreign) > 0 {
		fmt.Fprintf(w, "\nforeign: %d object(s) claim to be this Secret's history but keyledger did not create them; never pruned or restored\n", len(h.Foreign))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSLOT\tREASON")
		for _, o := range h.Foreign {
			slot := "-"
			if o.Version > 0 {
				slot = strconv.FormatInt(o.Version, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Name, slot, o.Reason)
		}
		return tw.Flush()
	}
	return nil
}
