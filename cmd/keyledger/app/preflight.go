package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

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

// preflightCommand proves the API server reachable (TCP and TLS) and the
// deny-canary unreachable (or, with --expect-canary reachable, the
// opposite, for the control Job). Exit 0 when both hold, 69 otherwise.
func preflightCommand(ctx context.Context, args []string, streams IOStreams, log *slog.Logger) error {
	var o preflight.Options
	var expect string
	fs := newFlagSet("preflight", streams)
	fs.StringVar(&o.APIServer, "api-server", defaultAPIServer(),
		"API server host:port (default $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, as in-cluster config uses)")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA bundle to verify the API server against (default: handshake without verification)")
	fs.StringVar(&o.ServerName, "server-name", "", "name to verify the API server certificate for (default: the --api-server host)")
	fs.StringVar(&o.Canary, "canary", os.Getenv(EnvPreflightCanary), "deny-canary IP:port (default $"+EnvPreflightCanary+")")
	fs.StringVar(&expect, "expect-canary", string(preflight.CanaryUnreachable), "unreachable (the gate) or reachable (the control run)")
	fs.DurationVar(&o.APITimeout, "api-timeout", preflight.DefaultAPITimeout, "bound on the API server connect and handshake")
	fs.DurationVar(&o.CanaryTimeout, "canary-timeout", preflight.DefaultCanaryTimeout, "bound on the canary connect")
	fs.DurationVar(&o.Wait, "wait", preflight.DefaultWait,
		"keep checking until both checks hold, at most this long (policies reach new pods asynchronously); then fail closed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
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
	b, _ := json.Marshal(line)
	fmt.Fprintln(streams.Out, string(b))
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
