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
	flag "github.com/spf13/pflag"
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
	err := root.Execute()
	if err == nil || errors.Is(err, errHelp) {
		return nil
	}
	var cmd string
	var rest []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, rest = args[0], args[1:]
	}
	report(streams.ErrOut, commandName(cmd, rest), err, cmd == "preflight" || wantsJSON(rest), rest...)
	return err
}

// commandName is how a failure line names the command: the command and,
// for the ones with subcommands, the subcommand.
func commandName(cmd string, rest []string) string {
	if len(rest) == 0 {
		return cmd
	}
	switch cmd + " " + rest[0] {
	case "journal list", "journal show", "journal grant", "journal revoke", "journal grants", "journal prune", "keyring inspect", "render credentials":
		return cmd + " " + rest[0]
	}
	return cmd
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// wantsJSON reports whether the arguments ask for -o json.
func wantsJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-o" || a == "--o":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		case a == "-o=json" || a == "--o=json":
			return true
		}
	}
	return false
}

func newLogger(w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if strings.EqualFold(os.Getenv("KEYLEDGER_LOG_LEVEL"), "debug") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// commonFlags are the connection flags shared by several commands.
type commonFlags struct {
	databaseURL string
	kubeconfig  string
	output      string
	fsGroup     int
}

// errHelp ends a command whose --help printed its usage: exit 0.
var errHelp = errors.New("help requested")

// helpSink is a flag set's output: pflag's own messages are dropped (the
// error comes back from parse and is reported once), --help goes to out.
type helpSink struct{ out io.Writer }

func (helpSink) Write(p []byte) (int, error) { return len(p), nil }

// newFlagSet is the flag set of the command named name ("journal show"):
// GNU-style flags (pflag), which may stand before, between or after the
// positional arguments; "--" ends them.
func newFlagSet(name string, streams IOStreams) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpSink{out: streams.Out})
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// printHelp writes the command's usage entries and its flags.
func printHelp(fs *flag.FlagSet) {
	sink, ok := fs.Output().(helpSink)
	if !ok || sink.out == nil {
		return
	}
	if !writeCommandUsage(sink.out, fs.Name()) {
		fmt.Fprintf(sink.out, "Usage:\n  keyledger %s\n", fs.Name())
	}
	fmt.Fprintf(sink.out, "\nFlags:\n%s", fs.FlagUsages())
}

func (c *commonFlags) addDatabase(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", "", "journal database URL (default $KEYLEDGER_DATABASE_URL)")
}

func (c *commonFlags) addKube(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
}

// addFSGroup is --fs-group, for a command file read from a Kubernetes
// Secret volume: the kubelet makes such files group-readable by the pod's
// fsGroup, so a file holding values may be group-readable by that group
// (held by this process) and no other.
func (c *commonFlags) addFSGroup(fs *flag.FlagSet) {
	fs.IntVar(&c.fsGroup, "fs-group", 0,
		"the pod's fsGroup when the command file is a Secret volume file: group read by this group (held by this process) is accepted for files holding values")
}

func (c *commonFlags) addOutput(fs *flag.FlagSet) {
	fs.StringVarP(&c.output, "output", "o", "table", "output format: table or json")
	// --o=json, as the standard library's flag package accepted it.
	fs.StringVar(&c.output, "o", "table", "")
	_ = fs.MarkHidden("o")
}

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

func (c *commonFlags) checkOutput() error {
	if c.output != "table" && c.output != "json" {
		return usagef("-o must be table or json, not %q", c.output)
	}
	return nil
}

// parse parses flags, which may stand before, between or after the
// positional arguments (`journal show ID -o json`); "--" ends the flags. The
// positional arguments are then fs.Args().
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(fs)
			return errHelp
		}
		return usagef("%v", err)
	}
	return nil
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
