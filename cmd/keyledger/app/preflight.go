package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/kube/preflight"
	"github.com/keyledger/keyledger/workflow"
)

// EnvPreflightCanary is the default of `preflight --canary`.
const EnvPreflightCanary = "KEYLEDGER_PREFLIGHT_CANARY"

// preflightLine is the one JSON line `keyledger preflight` prints on stdout.
type preflightLine struct {
	Outcome string `json:"outcome"` // ready or not-ready
	preflight.Report
}

// newPreflightCommand proves the API server reachable (TCP and TLS) and
// the deny-canary unreachable (or, with --expect-canary reachable, the
// opposite, for the control Job). Exit 0 when both hold, 69 otherwise.
func newPreflightCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var o preflight.Options
	var expect string
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "preflight --canary IP:PORT",
		Short: "prove the API server reachable, the canary not",
		Long: `The network gate a Job's init container runs before keyledger does: prove the
API server reachable (TCP and a TLS handshake) and a deny-canary address
unreachable, so that the main container never starts before its
NetworkPolicy holds. Policies reach a new pod asynchronously: it keeps
checking for at most --wait, then fails closed (exit 69). It prints one JSON
line, ready or not-ready, and never uses a token.`,
		Example: `  keyledger preflight --canary 192.0.2.10:443
  keyledger preflight --canary 192.0.2.10:443 --expect-canary reachable   # the control Job`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("api-server") {
				o.APIServer = defaultAPIServer()
			}
			if !c.Flags().Changed("canary") {
				o.Canary = os.Getenv(EnvPreflightCanary)
			}
			return preflightCommand(ctx, args, o, expect, &out, g, streams)
		},
	}
	fs := cmd.Flags()
	// The defaults from the environment are read when the command runs, so
	// that the help (and docs/cli.md) is the same everywhere.
	fs.StringVar(&o.APIServer, "api-server", "",
		"API server host:port (default $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, as in-cluster config uses)")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA bundle to verify the API server against (default: handshake without verification)")
	fs.StringVar(&o.ServerName, "server-name", "", "name to verify the API server certificate for (default: the --api-server host)")
	fs.StringVar(&o.Canary, "canary", "", "deny-canary IP:port (default $"+EnvPreflightCanary+")")
	fs.StringVar(&expect, "expect-canary", string(preflight.CanaryUnreachable), "unreachable (the gate) or reachable (the control run)")
	fs.DurationVar(&o.APITimeout, "api-timeout", preflight.DefaultAPITimeout, "bound on the API server connect and handshake")
	fs.DurationVar(&o.CanaryTimeout, "canary-timeout", preflight.DefaultCanaryTimeout, "bound on the canary connect")
	fs.DurationVar(&o.Wait, "wait", preflight.DefaultWait,
		"keep checking until both checks hold, at most this long (policies reach new pods asynchronously); then fail closed")
	_ = cmd.RegisterFlagCompletionFunc("expect-canary", fixedCompletion(string(preflight.CanaryUnreachable), string(preflight.CanaryReachable)))
	for _, name := range []string{"api-server", "server-name", "canary", "api-timeout", "canary-timeout", "wait"} {
		_ = cmd.RegisterFlagCompletionFunc(name, noCompletion)
	}
	addOutput(cmd, &out, formatJSON, formatYAML)
	return cmd
}

func preflightCommand(ctx context.Context, args []string, o preflight.Options, expect string, out *outputFlag, g *commonFlags, streams IOStreams) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	log := g.logger(streams.ErrOut, slog.LevelInfo)
	if len(args) != 0 {
		return usagef("preflight takes no arguments")
	}
	o.Expect = preflight.Expectation(expect)
	if err := o.Validate(); err != nil {
		return usageErr("preflight", err)
	}
	report, err := preflight.Wait(ctx, o)
	if err != nil {
		return usageErr("preflight", err)
	}
	line := preflightLine{Outcome: "ready", Report: report}
	if !report.Ready {
		line.Outcome = "not-ready"
	}
	_ = writeLine(streams.Out, out.format, line)
	if report.Ready {
		log.Info("preflight ready", "api", report.API.Address, "canary", report.Canary.Address, "expect", string(report.Canary.Expect), "checks", report.Checks)
		return nil
	}
	err = &workflow.Unavailable{Dependency: "network", Err: errors.New(notReadyReason(report))}
	f := describe(err)
	log.Error("preflight not ready", "api_ok", report.API.OK, "api_failure", report.API.Failure,
		"canary_ok", report.Canary.OK, "canary_reachable", report.Canary.Reachable, "expect", string(report.Canary.Expect),
		"checks", report.Checks, "wait", o.Wait.String(),
		"error", f.Message, "reason", f.Reason, "fix", f.Fix)
	return &reported{err: err}
}

func defaultAPIServer() string {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
}

func notReadyReason(r preflight.Report) string {
	switch {
	case !r.API.OK && !r.Canary.OK:
		return "API server check and canary check failed"
	case !r.API.OK:
		return "API server check failed: " + r.API.Failure
	default:
		return "canary is " + map[bool]string{true: "reachable", false: "unreachable"}[r.Canary.Reachable] +
			", want " + string(r.Canary.Expect)
	}
}
