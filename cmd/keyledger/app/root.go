package app

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/spf13/cobra"
)

// NewCommand is keyledger's command tree (cobra): one subcommand per
// command of the usage, `completion bash|zsh|fish` and `--version`. Each
// subcommand parses its own flags (pflag, see newFlagSet), so that its
// --help, its errors and its exit codes are the command's own; cobra routes
// to it and completes command names.
func NewCommand(ctx context.Context, streams IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:           "keyledger",
		Short:         "exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL",
		Version:       Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// The root takes no arguments of its own: an unknown command reaches
		// RunE (rather than cobra's suggestion text) and is a usage error.
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("no command given")
			}
			return usagef("unknown command %q", args[0])
		},
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })
	cobraHelp := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		switch {
		case c == root:
			writeUsage(streams.Out)
		case c.DisableFlagParsing:
			// `keyledger help CMD`: the command's own --help.
			_ = c.RunE(c, []string{"--help"})
		default:
			cobraHelp(c, args) // completion and its shells
		}
	})
	for _, sub := range []struct {
		name string
		run  func(args []string) error
	}{
		{"run", func(args []string) error { return runCommand(ctx, args, streams, newLogger(streams.ErrOut)) }},
		// Only warnings and errors: plan's output is for reading.
		{"plan", func(args []string) error {
			return planCommand(ctx, args, streams, slog.New(slog.NewJSONHandler(streams.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})))
		}},
		{"migrate", func(args []string) error { return migrateCommand(ctx, args, streams, newLogger(streams.ErrOut)) }},
		{"journal", group("journal", streams, func(args []string) error { return journalCommand(ctx, args, streams) })},
		{"keyring", group("keyring", streams, func(args []string) error { return keyringCommand(ctx, args, streams) })},
		{"history", func(args []string) error { return historyCommand(ctx, args, streams) }},
		{"render", group("render", streams, func(args []string) error { return renderCommand(ctx, args, streams) })},
		{"apply-hook", func(args []string) error { return applyHookCommand(ctx, args, streams) }},
		{"preflight", func(args []string) error { return preflightCommand(ctx, args, streams, newLogger(streams.ErrOut)) }},
		{"version", group("version", streams, func(args []string) error { return versionCommand(ctx, args, streams) })},
	} {
		root.AddCommand(&cobra.Command{
			Use:   sub.name,
			Short: shortDoc(sub.name),
			// The command parses its own flags and prints its own --help.
			DisableFlagParsing: true,
			SilenceErrors:      true,
			SilenceUsage:       true,
			RunE:               func(_ *cobra.Command, args []string) error { return sub.run(args) },
		})
	}
	root.InitDefaultCompletionCmd()
	if completion, _, err := root.Find([]string{"completion"}); err == nil && completion != root {
		completion.Short = shortDoc("completion")
		completion.Args = cobra.ArbitraryArgs
		completion.RunE = func(*cobra.Command, []string) error {
			return usagef("completion takes bash, zsh, fish or powershell")
		}
	}
	return root
}

// group wraps a command with subcommands (or without flags): its --help,
// as its first argument, prints the usage of every command in it.
func group(name string, streams IOStreams, run func(args []string) error) func(args []string) error {
	return func(args []string) error {
		if len(args) > 0 && isHelp(args[0]) {
			writeCommandUsage(streams.Out, name)
			return errHelp
		}
		return run(args)
	}
}

// versionLine is what `keyledger version` and `keyledger --version` print.
func versionLine() string {
	b, _ := json.Marshal(buildVersion())
	return string(b)
}
