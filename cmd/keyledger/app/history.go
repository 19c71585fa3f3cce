package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/keyledger/keyledger/workflow/versioned"
)

// historyCommand: `keyledger history NAMESPACE/NAME [--version N
// [--show-keys]] [-o table|json]` lists a Secret's retained versions
// (version, snapshot time, actor, source resourceVersion, key names and
// sizes) and, for one version with --show-keys, each value's digest. It
// never prints a value.
func historyCommand(ctx context.Context, args []string, streams IOStreams) error {
	var flags commonFlags
	var version string
	var showKeys bool
	fs := newFlagSet("history", streams)
	flags.addKube(fs)
	flags.addOutput(fs)
	fs.StringVar(&version, "version", "", "show only this retained version")
	fs.BoolVar(&showKeys, "show-keys", false, "with --version: print each key's value digest (sha256), never the value")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := flags.checkOutput(); err != nil {
		return err
	}
	ns, name, err := secretTarget("history", fs.Args())
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
	if showKeys && opts.Version == 0 {
		return usagef("--show-keys needs --version N")
	}
	_, client, release, err := flags.kubeClient(nil)
	if err != nil {
		return err
	}
	defer release()
	h, err := versioned.ReadHistory(ctx, client, ns, name, opts)
	if err != nil {
		return err
	}
	return printHistory(streams.Out, flags.output, h, showKeys)
}

func printHistory(w io.Writer, output string, h *versioned.History, showKeys bool) error {
	if output == "json" {
		return json.NewEncoder(w).Encode(h)
	}
	fmt.Fprintf(w, "secret %s/%s uid %s version %d\n\n", h.Namespace, h.Name, h.UID, h.Version)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if showKeys {
		fmt.Fprintln(tw, "VERSION\tKEY\tSIZE\tDIGEST")
		for _, v := range h.Versions {
			for _, k := range v.Keys {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", v.Version, k.Name, k.Size, k.Digest)
			}
		}
		return tw.Flush()
	}
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
	return tw.Flush()
}
