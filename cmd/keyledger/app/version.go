package app

import (
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:               "version",
		Short:             "print the version",
		Long:              "Print keyledger's version and the Go release it was built with, as one JSON line (what keyledger --version prints).",
		Example:           "  keyledger version\n  keyledger version -o yaml",
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			if len(args) != 0 {
				return usagef("version takes no arguments")
			}
			if out.format == formatYAML {
				return writeYAML(streams.Out, versionInfo())
			}
			_, err := streams.Out.Write([]byte(versionLine() + "\n"))
			return err
		},
	}
	addOutput(cmd, &out, formatJSON, formatYAML)
	return cmd
}

func goVersion() string { return runtime.Version() }
