package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/tenant"
)

// tenantAction is journal onboard, rotate or offboard: what it does to a
// namespace, given an Admin.
type tenantAction struct {
	use, short, long, example string
	run                       func(a *tenant.Admin, ctx context.Context, ns string) ([]tenant.Change, error)
}

var tenantActions = []tenantAction{
	{use: "onboard", short: "as a platform administrator: make NAMESPACE a tenant of the journal",
		long: `Make NAMESPACE a tenant of the journal, in one step, as a platform administrator
(a kubeconfig that may write Secrets of keyledger-journal and NAMESPACE, the
Cluster keyledger-journal, ConfigMaps and NetworkPolicies of NAMESPACE) with the
schema owner's connection (--database-url, as journal grant): the role's password,
generated in this process and written to exactly two Secrets (keyledger-role-NS
in keyledger-journal, keyledger-journal-credentials in NAMESPACE), never printed;
the role in the Cluster's managed roles, waited for until CloudNativePG applied
it; the grant; the CA's certificate (ConfigMap keyledger-journal-ca); the
credentials hooks' NetworkPolicy with the API server's endpoints. One line per
object: created, updated or unchanged. Idempotent: a second run changes
nothing and says so, and refreshes the CA copy after CloudNativePG rotated its CA.`,
		example: `  keyledger journal onboard team-a --dry-run
  keyledger journal onboard team-a --database-url "$OWNER_URL"`,
		run: (*tenant.Admin).Onboard},
	{use: "rotate", short: "as a platform administrator: give NAMESPACE's role a new password",
		long: `Give NAMESPACE's journal role a new password, generated in this process: into
keyledger-role-NS of keyledger-journal first, then, once CloudNativePG reports it
applied, into keyledger-journal-credentials of NAMESPACE. A Job that starts
between the two fails with journal-login-failed (exit 69): create it again
(docs/tenancy.md, Rotating).`,
		example: `  keyledger journal rotate team-a`,
		run:     (*tenant.Admin).Rotate},
	{use: "offboard", short: "as a platform administrator: remove NAMESPACE from the journal",
		long: `Remove NAMESPACE from the journal: revoke its role's grant, have CloudNativePG
drop the role (ensure: absent), wait until it is gone, and delete both password
Secrets, the CA ConfigMap and the credentials NetworkPolicy. The journal's
records of NAMESPACE stay. One line per object: deleted or absent.`,
		example: `  keyledger journal offboard team-a --dry-run
  keyledger journal offboard team-a`,
		run: (*tenant.Admin).Offboard},
}

// tenantResult is the structured output of onboard, rotate and offboard.
type tenantResult struct {
	Namespace string          `json:"namespace"`
	DryRun    bool            `json:"dryRun"`
	Changed   bool            `json:"changed"`
	Changes   []tenant.Change `json:"changes"`
}

func newTenantCommand(ctx context.Context, act tenantAction, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var dryRun bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use: act.use + " NAMESPACE", Short: act.short, Long: act.long, Example: act.example,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkJournalFlags(g, &out); err != nil {
				return err
			}
			switch {
			case len(args) != 1:
				return usagef("journal %s takes one NAMESPACE", act.use)
			case wait <= 0 || wait > time.Hour:
				return usagef("journal %s --wait must be more than 0 and at most 1h, not %s", act.use, wait)
			}
			if _, err := tenant.For(args[0]); err != nil {
				return err
			}
			a := &tenant.Admin{Wait: wait, DryRun: dryRun}
			changes, err := g.withAdmin(ctx, a, func() ([]tenant.Change, error) { return act.run(a, ctx, args[0]) })
			if perr := printTenant(streams, out.format, tenantResult{Namespace: args[0], DryRun: dryRun,
				Changed: tenant.Changed(changes), Changes: changes}, err == nil); perr != nil && err == nil {
				err = perr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "read everything, write nothing: print what a run would do")
	cmd.Flags().DurationVar(&wait, "wait", 3*time.Minute, "how long to wait for CloudNativePG to apply the role (at most 1h)")
	_ = cmd.RegisterFlagCompletionFunc("wait", noCompletion)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

// withAdmin gives a the administrator's API access and the schema owner's
// journal for the length of run.
func (c *commonFlags) withAdmin(ctx context.Context, a *tenant.Admin, run func() ([]tenant.Change, error)) ([]tenant.Change, error) {
	cfg, err := kube.LoadConfig(kube.ConfigOptions{Kubeconfig: c.kubeconfig, Context: c.kubeContext})
	if err != nil {
		return nil, configError(err)
	}
	defer kube.Scrub(cfg)
	dyn, err := kube.NewDynamic(cfg)
	if err != nil {
		return nil, configError(err)
	}
	st, err := c.openJournal(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	a.Dynamic, a.Journal = dyn, st
	return run()
}

// printTenant prints one line per object (created, updated, unchanged,
// deleted, absent; "would ..." in a dry run) and, when done, a last line
// saying whether anything changed; or the tenantResult as JSON or YAML.
func printTenant(streams IOStreams, format string, r tenantResult, done bool) error {
	if format != formatTable {
		if !done {
			return nil
		}
		if r.Changes == nil {
			r.Changes = []tenant.Change{}
		}
		return writeStructured(streams.Out, format, r)
	}
	for _, c := range r.Changes {
		fmt.Fprintln(streams.Out, c.String())
	}
	if !done {
		return nil
	}
	switch {
	case r.DryRun && r.Changed:
		fmt.Fprintf(streams.Out, "namespace %s: dry run, nothing written\n", r.Namespace)
	case r.DryRun:
		fmt.Fprintf(streams.Out, "namespace %s: dry run, nothing would change\n", r.Namespace)
	case r.Changed:
		fmt.Fprintf(streams.Out, "namespace %s: changed\n", r.Namespace)
	default:
		fmt.Fprintf(streams.Out, "namespace %s: nothing changed\n", r.Namespace)
	}
	return nil
}
