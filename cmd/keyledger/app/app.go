// Package app is keyledger's command line: it parses arguments, wires the
// store, the Kubernetes client and the workflows together, prints one JSON
// line per run on stdout and structured, content-free logs on stderr, and
// maps every error to an exit code in one place (ExitCode).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
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

const usage = `keyledger: exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL

Usage:
  keyledger run COMMAND_FILE            run one command file (absolute path)
  keyledger plan COMMAND_FILE           show what run would do; writes nothing
  keyledger migrate up|down|version|recover
                                        manage the journal schema (recover: clear
                                        the dirty mark an earlier version left;
                                        down refuses to drop journal rows unless
                                        --destroy-journal-records)
  keyledger journal list                list journaled operations (those the role may see)
  keyledger journal show MUTATION_ID    show one operation and its records (a plan: its
                                        newest runs, --limit, at most 100)
  keyledger journal prune --older-than DURATION
                                        as the schema owner: remove finished plan runs
                                        older than DURATION (each plan keeps its newest)
  keyledger journal grant ROLE NAMESPACE...
                                        as the schema owner: let ROLE act on NAMESPACEs
  keyledger journal revoke ROLE NAMESPACE...
                                        as the schema owner: take NAMESPACEs from ROLE
  keyledger journal grants [--history]  list the namespace grants (or every change)
  keyledger keyring inspect NS/NAME     print a keyring's catalog (never material)
  keyledger history NS/NAME             list a Secret's retained versions (never values)
  keyledger history NS/NAME --version N --show-keys
                                        one version's key names and value digests
  keyledger render credentials --plan FILE [--image IMAGE]
                                        print a credential plan's Argo CD PreSync hook objects
  keyledger apply-hook DIR              apply rendered hook objects in order and wait for the Job
  keyledger preflight --canary IP:PORT  prove the API server reachable, the canary not
  keyledger version                     print the version

Flags common to commands that need them:
  --database-url URL   journal database (default $KEYLEDGER_DATABASE_URL)
  --kubeconfig PATH    cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  -o table|json        output format of journal, history and plan
  -h, --help           usage of the program or of one command (exit 0)

A failure prints one line on stderr saying what failed and what to do
(with -o json: a JSON object with error, reason and fix).
Exit codes: 0 done, 1 internal error, 2 refused, 64 usage or invalid
command file, 69 dependency unreachable, 75 outcome uncertain (rerun
settles it), 77 permission matrix mismatch.
`

// Run runs keyledger with args (without the program name). A failure is
// reported on streams.ErrOut as one line saying what failed and what to do
// (a JSON object with -o json) and returned; ExitCode maps it to the exit
// code. --help prints the usage on streams.Out and returns nil.
func Run(ctx context.Context, args []string, streams IOStreams) error {
	// client-go logs some failures on its own (klog, to stderr), with the
	// request's URL; keyledger's log lines are its own, redacted.
	klog.SetLogger(logr.Discard())
	if len(args) == 0 {
		err := usagef("no command given")
		report(streams.ErrOut, "", err, false)
		return err
	}
	cmd, rest := args[0], args[1:]
	if isHelp(cmd) || cmd == "help" {
		fmt.Fprint(streams.Out, usage)
		return nil
	}
	name := commandName(cmd, rest)
	if len(rest) > 0 && isHelp(rest[0]) {
		if text, ok := groupHelp(cmd); ok {
			fmt.Fprint(streams.Out, text)
			return nil
		}
	}
	err := dispatch(ctx, cmd, rest, streams)
	if errors.Is(err, errHelp) {
		return nil
	}
	report(streams.ErrOut, name, err, cmd == "preflight" || wantsJSON(rest), rest...)
	return err
}

func dispatch(ctx context.Context, cmd string, rest []string, streams IOStreams) error {
	switch cmd {
	case "run":
		return runCommand(ctx, rest, streams, newLogger(streams.ErrOut))
	case "plan":
		// Only warnings and errors: plan's output is for reading.
		return planCommand(ctx, rest, streams, slog.New(slog.NewJSONHandler(streams.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn})))
	case "migrate":
		return migrateCommand(ctx, rest, streams, newLogger(streams.ErrOut))
	case "journal":
		return journalCommand(ctx, rest, streams)
	case "keyring":
		return keyringCommand(ctx, rest, streams)
	case "history":
		return historyCommand(ctx, rest, streams)
	case "render":
		return renderCommand(ctx, rest, streams)
	case "apply-hook":
		return applyHookCommand(ctx, rest, streams)
	case "preflight":
		return preflightCommand(ctx, rest, streams, newLogger(streams.ErrOut))
	case "version":
		return versionCommand(rest, streams)
	default:
		return usagef("unknown command %q", cmd)
	}
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

// groupHelp is the usage of a command that has subcommands (or no flags).
func groupHelp(cmd string) (string, bool) {
	switch cmd {
	case "journal", "keyring", "render", "version":
	default:
		return "", false
	}
	var b strings.Builder
	b.WriteString("Usage:\n")
	lines := strings.Split(usage, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  keyledger "+cmd+" ") || l == "  keyledger "+cmd {
			b.WriteString(l + "\n")
			// continuation lines of this entry
			for _, c := range lines[i+1:] {
				if !strings.HasPrefix(c, "     ") {
					break
				}
				b.WriteString(c + "\n")
			}
		}
	}
	return b.String(), true
}

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

// helpSink is a flag set's output: flag's own messages are dropped (the
// error comes back from parse and is reported once), --help goes to out.
type helpSink struct{ out io.Writer }

func (helpSink) Write(p []byte) (int, error) { return len(p), nil }

func newFlagSet(name string, streams IOStreams) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpSink{out: streams.Out})
	fs.Usage = func() {}
	return fs
}

// printHelp writes the command's synopsis and its flags.
func printHelp(fs *flag.FlagSet) {
	sink, ok := fs.Output().(helpSink)
	if !ok || sink.out == nil {
		return
	}
	fmt.Fprintf(sink.out, "Usage:\n")
	if text, ok := synopses[fs.Name()]; ok {
		fmt.Fprint(sink.out, text)
	} else {
		fmt.Fprintf(sink.out, "  keyledger %s\n", fs.Name())
	}
	fmt.Fprintf(sink.out, "\nFlags:\n")
	fs.SetOutput(sink.out)
	fs.PrintDefaults()
	fs.SetOutput(sink)
}

// synopses are the usage lines of commands with flags, by flag set name.
var synopses = map[string]string{
	"run":                "  keyledger run [--database-url URL] [--kubeconfig PATH] COMMAND_FILE\n      run one command file (absolute path); stdout: one JSON line\n",
	"plan":               "  keyledger plan [--database-url URL] [--kubeconfig PATH] [-o table|json] COMMAND_FILE\n      show what run would do with COMMAND_FILE, writing nothing\n",
	"migrate":            "  keyledger migrate [--database-url URL] [--destroy-journal-records] up|down|version|recover\n      manage the journal schema (as its owner)\n",
	"journal list":       "  keyledger journal list [--limit N] [-o table|json]\n      the newest operations first (--limit 1 to 1000, default 50)\n",
	"journal show":       "  keyledger journal show MUTATION_ID [--limit N] [--before RUN] [-o table|json]\n      one operation and its records; a plan's runs newest first, N at a time (1 to 100, default 10)\n",
	"journal prune":      "  keyledger journal prune --older-than DURATION [-o table|json]\n      as the schema owner: remove the finished runs of plans finalized more than DURATION ago,\n      keeping each plan's newest finished and newest completed run, every unfinished and every one-shot operation\n",
	"journal grant":      "  keyledger journal grant [-o table|json] ROLE NAMESPACE...\n      as the schema owner: let ROLE act on the operations of each NAMESPACE; one line per namespace\n",
	"journal revoke":     "  keyledger journal revoke [-o table|json] ROLE NAMESPACE...\n      as the schema owner: take each NAMESPACE from ROLE (its last also takes its journal rights)\n",
	"journal grants":     "  keyledger journal grants [--history] [-o table|json]\n      the namespace grants the connecting role may see (--history: every grant and revoke, owner only)\n",
	"keyring inspect":    "  keyledger keyring inspect NS/NAME [--data-key KEY]\n",
	"history":            "  keyledger history NS/NAME [-o table|json]\n  keyledger history NS/NAME --version N --show-keys\n",
	"render credentials": "  keyledger render credentials --plan FILE --image IMAGE [--out-dir DIR] [--journal-namespace NS] [--journal-credentials SECRET] [--journal-ca CONFIGMAP]\n",
	"apply-hook":         "  keyledger apply-hook DIR\n",
	"preflight":          "  keyledger preflight --canary IP:PORT\n",
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
	fs.StringVar(&c.output, "o", "table", "output format: table or json")
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
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(fs)
				return errHelp
			}
			return usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parse the collected positional arguments as the FlagSet's arguments.
	return fs.Parse(append([]string{"--"}, positional...))
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
