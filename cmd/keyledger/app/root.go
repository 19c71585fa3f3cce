package app

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	// The usage lists commands in the order the tree adds them (the order
	// of a session: run, plan, validate, then the journal...), not sorted.
	cobra.EnableCommandSorting = false
}

// NewCommand is keyledger's command tree (cobra), as kubectl uses it:
// persistent flags on the root (--database-url, --kubeconfig, --context,
// -v, --quiet) that may stand anywhere on the line; nested commands
// (journal list, keyring inspect, render credentials); each command's own
// flags, -o where its output is structured, an Example in every help,
// suggestions for a mistyped command, and completion of commands, flags
// and flag values (completion bash|zsh|fish|powershell).
func NewCommand(ctx context.Context, streams IOStreams) *cobra.Command {
	g := &commonFlags{}
	root := &cobra.Command{
		Use:           "keyledger",
		Short:         "exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL",
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// The root takes no arguments of its own: an unknown command reaches
		// RunE, which suggests the nearest commands, and is a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no command given")
			}
			return usagef("unknown command %q%s", args[0], didYouMean(c, args[0]))
		},
		ValidArgsFunction:          noCompletion,
		SuggestionsMinimumDistance: 2,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })
	g.addPersistent(root)

	root.AddCommand(
		newRunCommand(ctx, streams, g),
		newPlanCommand(ctx, streams, g),
		newValidateCommand(streams, g),
		newSchemaCommand(streams, g),
		newExplainCommand(streams, g),
		newMigrateCommand(ctx, streams, g),
		newJournalCommand(ctx, streams, g),
		newKeyringCommand(ctx, streams, g),
		newHistoryCommand(ctx, streams, g),
		newRenderCommand(streams, g),
		newApplyHookCommand(ctx, streams, g),
		newPreflightCommand(ctx, streams, g),
		newVersionCommand(ctx, streams, g),
	)
	root.InitDefaultCompletionCmd()
	if completion, _, err := root.Find([]string{"completion"}); err == nil && completion != root {
		completion.Short = "print a shell completion script"
		completion.Use = "completion bash|zsh|fish|powershell"
		completion.Args = cobra.ArbitraryArgs
		completion.Example = "  source <(keyledger completion bash)\n  keyledger completion zsh > \"${fpath[1]}/_keyledger\""
		completion.RunE = func(*cobra.Command, []string) error {
			return usagef("completion takes bash, zsh, fish or powershell")
		}
		for _, shell := range completion.Commands() {
			shell.Example = "  keyledger completion " + shell.Name()
		}
	}
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Short = "print the usage of the program or of one command"
			c.Example = "  keyledger help\n  keyledger help journal show"
		}
	}
	setHelp(root, streams)
	return root
}

// didYouMean is ", did you mean X?" naming c's subcommands nearest to
// typed, or "".
func didYouMean(c *cobra.Command, typed string) string {
	s := c.SuggestionsFor(typed)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + orList(s) + "?"
}

// group makes a command that only holds subcommands: without one, or with
// an unknown one, it is a usage error naming the subcommands.
func group(use, short, example string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                        use,
		Short:                      short,
		Long:                       strings.ToUpper(short[:1]) + short[1:] + ": run one of the commands below.",
		Example:                    example,
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		ValidArgsFunction:          noCompletion,
	}
	c.AddCommand(subs...)
	c.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, s := range c.Commands() {
			names = append(names, strings.TrimPrefix(synopsis(s), "keyledger "+c.Name()+" "))
		}
		if len(args) == 0 {
			return usagef("%s takes %s", c.Name(), orList(names))
		}
		return usagef("%s takes %s, not %q%s", c.Name(), orList(names), args[0], didYouMean(c, args[0]))
	}
	return c
}

// versionLine is what `keyledger version` and `keyledger --version` print.
func versionLine() string {
	b, _ := json.Marshal(buildVersion())
	return string(b)
}
