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

// UsageError is a wrong invocation: exit 64.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

const usage = `keyledger: exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL

Usage:
  keyledger run COMMAND_FILE            run one command file (absolute path)
  keyledger migrate up|down|version     manage the journal schema
  keyledger journal list                list journaled operations
  keyledger journal show MUTATION_ID    show one operation and its records
  keyledger keyring inspect NS/NAME     print a keyring's catalog (never material)
  keyledger history NS/NAME             list a Secret's retained versions (never values)
  keyledger history NS/NAME --version N --show-keys
                                        one version's key names and value digests
  keyledger render credentials --plan FILE --image IMAGE
                                        print a credential plan's Argo CD PreSync hook objects
  keyledger apply-hook DIR              apply rendered hook objects in order and wait for the Job
  keyledger preflight --canary IP:PORT  prove the API server reachable, the canary not
  keyledger version                     print the version

Flags common to commands that need them:
  --database-url URL   journal database (default $KEYLEDGER_DATABASE_URL)
  --kubeconfig PATH    cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  -o table|json        output format of journal, keyring and history commands

Exit codes: 0 done, 2 refused, 64 usage or invalid command file,
69 dependency unreachable, 75 outcome uncertain (rerun settles it),
77 permission matrix mismatch.
`

// Run runs keyledger with args (without the program name).
func Run(ctx context.Context, args []string, streams IOStreams) error {
	if len(args) == 0 {
		fmt.Fprint(streams.ErrOut, usage)
		return usagef("no command given")
	}
	log := newLogger(streams.ErrOut)
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCommand(ctx, rest, streams, log)
	case "migrate":
		return migrateCommand(ctx, rest, streams, log)
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
		return preflightCommand(ctx, rest, streams, log)
	case "version":
		return versionCommand(rest, streams)
	case "help", "-h", "--help":
		fmt.Fprint(streams.Out, usage)
		return nil
	default:
		fmt.Fprint(streams.ErrOut, usage)
		return usagef("unknown command %q", cmd)
	}
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
}

func newFlagSet(name string, streams IOStreams) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(streams.ErrOut)
	return fs
}

func (c *commonFlags) addDatabase(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", "", "journal database URL (default $KEYLEDGER_DATABASE_URL)")
}

func (c *commonFlags) addKube(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
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
				return usagef("help requested")
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
