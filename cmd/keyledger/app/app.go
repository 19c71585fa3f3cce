// Package app is keyledger's command line: it parses arguments, wires the
// store, the Kubernetes client and the workflows together, prints one JSON
// line per run on stdout and structured, content-free logs on stderr, and
// maps every error to an exit code in one place (ExitCode).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/keyledger/keyledger/workflow/command"
)

// Version is stamped at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

// IOStreams are the standard streams a command uses, so every command can be
// tested without a shell.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// StdStreams returns the process's streams.
func StdStreams() IOStreams { return IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// UsageError is a wrong invocation: exit 64. Err, when set, is the
// error the message was made from.
type UsageError struct {
	Msg string
	Err error
}

func (e *UsageError) Error() string { return e.Msg }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErr makes err a usage error, its message prefixed.
func usageErr(prefix string, err error) error {
	return &UsageError{Msg: prefix + ": " + err.Error(), Err: err}
}

func usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// Run runs keyledger with args (without the program name). A failure is
// reported on streams.ErrOut as one line saying what failed and what to do
// (a JSON object with -o json) and returned; ExitCode maps it to the exit
// code. --help prints the usage on streams.Out and returns nil.
func Run(ctx context.Context, args []string, streams IOStreams) error {
	// client-go logs some failures on its own (klog, to stderr), with the
	// request's URL; keyledger's log lines are its own, redacted.
	klog.SetLogger(logr.Discard())
	root := NewCommand(ctx, streams)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil || errors.Is(err, errHelp) {
		return nil
	}
	name := ""
	if cmd != nil {
		name = strings.TrimSpace(strings.TrimPrefix(cmd.CommandPath(), root.Name()))
	}
	report(streams.ErrOut, name, err, name == "preflight" || wantsJSON(cmd, args), args...)
	return err
}

// wantsJSON reports whether the invocation asks for -o json: the parsed
// flag of the command that ran, or, when its flags could not be parsed,
// the arguments as given.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("output"); f != nil && f.Changed {
			return f.Value.String() == formatJSON
		}
	}
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-o" || a == "--o" || a == "--output":
			if i+1 < len(args) && args[i+1] == formatJSON {
				return true
			}
		case a == "-o=json" || a == "--o=json" || a == "--output=json" || a == "-ojson":
			return true
		}
	}
	return false
}

// commonFlags are the persistent flags of the root: they may stand
// anywhere on the line, before or after the command's name, and every
// command takes them (a command that does not need one ignores it).
type commonFlags struct {
	databaseURL string
	kubeconfig  string
	kubeContext string
	verbosity   int
	quiet       bool
}

// addPersistent declares the common flags on the root.
func (c *commonFlags) addPersistent(root *cobra.Command) {
	fs := root.PersistentFlags()
	fs.StringVar(&c.databaseURL, "database-url", "", "journal database URL (default $KEYLEDGER_DATABASE_URL)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	fs.StringVar(&c.kubeContext, "context", "", "the kubeconfig context to use (default: the kubeconfig's current context)")
	fs.IntVarP(&c.verbosity, "verbosity", "v", 0, "log level on stderr: 0 info (plan: warnings), 1 info for every command, 2 debug")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "log only errors on stderr (a failure's line is still printed; stdout is unchanged)")
	_ = root.RegisterFlagCompletionFunc("database-url", noCompletion)
	_ = root.RegisterFlagCompletionFunc("context", noCompletion)
	_ = root.RegisterFlagCompletionFunc("verbosity", fixedCompletion("0", "1", "2"))
}

// checkLogFlags validates -v and --quiet.
func (c *commonFlags) checkLogFlags() error {
	switch {
	case c.verbosity < 0:
		return usagef("-v must be 0 or more, not %d", c.verbosity)
	case c.quiet && c.verbosity > 0:
		return usagef("--quiet and -v %d contradict each other: give one", c.verbosity)
	}
	return nil
}

// logger is a command's JSON logger on w at level least (info; plan
// passes warn: its output is for reading): --quiet logs errors only, -v 1
// info, -v 2 debug, and KEYLEDGER_LOG_LEVEL=debug debug where least is info.
func (c *commonFlags) logger(w io.Writer, least slog.Level) *slog.Logger {
	level := least
	switch {
	case c.quiet:
		level = slog.LevelError
	case c.verbosity >= 2:
		level = slog.LevelDebug
	case c.verbosity == 1:
		level = slog.LevelInfo
	case least <= slog.LevelInfo && strings.EqualFold(os.Getenv("KEYLEDGER_LOG_LEVEL"), "debug"):
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// errHelp ends a command whose --help printed its usage: exit 0.
var errHelp = errors.New("help requested")

// database returns the database URL from the flag or the environment.
func (c *commonFlags) database() (string, error) {
	if c.databaseURL != "" {
		return c.databaseURL, nil
	}
	if v := os.Getenv("KEYLEDGER_DATABASE_URL"); v != "" {
		return v, nil
	}
	return "", usagef("no database: set --database-url or KEYLEDGER_DATABASE_URL")
}

// secretTarget reads the one NAMESPACE/NAME argument of cmd.
func secretTarget(cmd string, args []string) (ns, name string, err error) {
	if len(args) != 1 {
		return "", "", usagef("%s takes one NAMESPACE/NAME", cmd)
	}
	ns, name, ok := strings.Cut(args[0], "/")
	if !ok {
		return "", "", usagef("want NAMESPACE/NAME, got %q", args[0])
	}
	if err := command.ValidNamespace(ns); err != nil {
		return "", "", usagef("namespace: %v", err)
	}
	if err := command.ValidName(name); err != nil {
		return "", "", usagef("name: %v", err)
	}
	return ns, name, nil
}
