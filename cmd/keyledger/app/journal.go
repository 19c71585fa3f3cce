package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

func newJournalCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	return group("journal", "read and administer the journal",
		`  keyledger journal list
  keyledger journal show mut-7 -o json
  keyledger journal grant keyledger_ai ai --database-url postgres://owner@db/journal
  keyledger journal onboard team-a --database-url postgres://owner@db/journal`,
		newJournalListCommand(ctx, streams, g),
		newJournalShowCommand(ctx, streams, g),
		newJournalPruneCommand(ctx, streams, g),
		newGrantCommand(ctx, store.GrantActionGrant, streams, g),
		newGrantCommand(ctx, store.GrantActionRevoke, streams, g),
		newGrantsCommand(ctx, streams, g),
		newTenantCommand(ctx, tenantActions[0], streams, g),
		newTenantCommand(ctx, tenantActions[1], streams, g),
		newTenantCommand(ctx, tenantActions[2], streams, g),
	)
}

func newJournalListCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list journaled operations (those the role may see)",
		Long: `List the journaled operations the connecting role may see (row-level security:
the namespaces it was granted; the schema owner sees all), newest first, the
runs of one credential plan together under the plan's mutation ID.`,
		Example: `  keyledger journal list
  keyledger journal list --limit 200 -o json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkJournalFlags(g, &out); err != nil {
				return err
			}
			switch {
			case len(args) != 0:
				return usagef("journal list takes no arguments")
			case limit < 1 || limit > maxListLimit:
				return usagef("journal list --limit must be from 1 to %d, not %d", maxListLimit, limit)
			}
			st, err := g.openJournal(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			ops, err := st.List(ctx, store.ListParams{Limit: limit})
			if err != nil {
				return err
			}
			return printOperations(streams, out.format, ops)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, fmt.Sprintf("how many operations, newest first (1 to %d)", maxListLimit))
	_ = cmd.RegisterFlagCompletionFunc("limit", noCompletion)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

func newJournalShowCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var limit int
	var before int64
	var namespace string
	cmd := &cobra.Command{
		Use:   "show MUTATION_ID",
		Short: "show one operation and its records (a plan: its newest runs, --limit, at most 100)",
		Long: `Show one operation and every record journaled for it, in order. A credential
plan's mutation ID shows its runs, newest first, a page at a time (--limit,
--before). Records hold names, UIDs, resourceVersions and digests, never a
value. A mutation ID is unique within its namespace: a role that reads more
than one namespace (the schema owner) names which with --namespace when two
hold the ID (mutation-id-ambiguous, exit 64, otherwise).`,
		Example: `  keyledger journal show mut-7
  keyledger journal show cred-1 --limit 3 -o yaml
  keyledger journal show cred-1 --before 40
  keyledger journal show mut-7 --namespace team-a`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkJournalFlags(g, &out); err != nil {
				return err
			}
			switch {
			case len(args) != 1:
				return usagef("journal show takes one MUTATION_ID")
			case limit < 1 || limit > store.MaxRunsPage:
				return usagef("journal show --limit must be from 1 to %d, not %d", store.MaxRunsPage, limit)
			case before < 0:
				return usagef("journal show --before must be a run number, not %d", before)
			}
			st, err := g.openJournal(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			// Mutation IDs are unique within a namespace: the owner, who
			// reads every namespace, names one when two hold the ID.
			op, err := st.Load(ctx, namespace, args[0])
			if errors.Is(err, store.ErrNotFound) {
				// A credential plan's mutation ID names its runs.
				return showRuns(ctx, st, streams, out.format, store.RunsPageParams{Command: args[0], Namespace: namespace, Limit: limit, Before: before})
			}
			if err != nil {
				return err
			}
			records, err := st.Records(ctx, op.ID)
			if err != nil {
				return err
			}
			return printOperation(streams, out.format, op, records)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace the operation targets (needed only when the mutation ID is journaled in more than one namespace you may read)")
	_ = cmd.RegisterFlagCompletionFunc("namespace", noCompletion)
	cmd.Flags().IntVar(&limit, "limit", store.DefaultRunsPage, fmt.Sprintf("a plan's runs: how many, newest first (1 to %d)", store.MaxRunsPage))
	cmd.Flags().Int64Var(&before, "before", 0, "a plan's runs: only those before run number RUN (the next page)")
	_ = cmd.RegisterFlagCompletionFunc("limit", noCompletion)
	_ = cmd.RegisterFlagCompletionFunc("before", noCompletion)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

// checkJournalFlags checks what every journal command checks first.
func checkJournalFlags(g *commonFlags, out *outputFlag) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	return out.check()
}

// maxListLimit bounds journal list --limit.
const maxListLimit = 1000

// showRuns prints one page of the runs of the desired-state command (a
// credential plan) p.Command, newest first; in a table, a last line says
// how to read the next page when older runs remain.
func showRuns(ctx context.Context, st *store.Store, streams IOStreams, output string, p store.RunsPageParams) error {
	runs, more, err := st.RunsPage(ctx, p)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return usagef("no operation with mutation ID %q", p.Command)
	}
	defer func() {
		if _, n, ok := store.SplitRunID(runs[len(runs)-1].MutationID); ok && more && output == formatTable {
			ns := ""
			if p.Namespace != "" {
				ns = " --namespace " + p.Namespace
			}
			fmt.Fprintf(streams.Out, "\nolder runs: keyledger journal show %s%s --before %d\n", p.Command, ns, n)
		}
	}()
	var list []operationJSON
	for i, op := range runs {
		records, err := st.Records(ctx, op.ID)
		if err != nil {
			return err
		}
		if output != formatTable {
			list = append(list, toJSON(op, records))
			continue
		}
		if i > 0 {
			fmt.Fprintln(streams.Out)
		}
		if err := printOperation(streams, output, op, records); err != nil {
			return err
		}
	}
	if output != formatTable {
		return writeStructured(streams.Out, output, list)
	}
	return nil
}

type operationJSON struct {
	Kind       string `json:"kind"`
	MutationID string `json:"mutationId"`
	// Plan and Run name the command and the run number of one run of a
	// desired-state command (a credential plan).
	Plan          string       `json:"plan,omitempty"`
	Run           int64        `json:"run,omitempty"`
	RequestID     string       `json:"requestId"`
	CommandDigest string       `json:"commandDigest"`
	Namespace     string       `json:"namespace"`
	Name          string       `json:"name"`
	ExpectedUID   string       `json:"expectedUID,omitempty"`
	State         string       `json:"state"`
	Outcome       string       `json:"outcome,omitempty"`
	Reason        string       `json:"reason,omitempty"`
	CreatedAt     time.Time    `json:"createdAt"`
	FinalizedAt   *time.Time   `json:"finalizedAt,omitempty"`
	Records       []recordJSON `json:"records,omitempty"`
}

type recordJSON struct {
	Kind            string          `json:"kind"`
	Step            string          `json:"step"`
	Target          string          `json:"target,omitempty"`
	Attempt         int             `json:"attempt,omitempty"`
	Batch           int             `json:"batch,omitempty"`
	Final           bool            `json:"final,omitempty"`
	UID             string          `json:"uid,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Digest          string          `json:"digest,omitempty"`
	Status          string          `json:"status,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Detail          json.RawMessage `json:"detail,omitempty"`
	CreatedAt       time.Time       `json:"createdAt"`
}

func toJSON(op *store.Operation, records []store.Record) operationJSON {
	out := operationJSON{
		Kind: op.Kind, MutationID: op.MutationID, RequestID: op.RequestID, CommandDigest: op.CommandDigest,
		Namespace: op.Namespace, Name: op.Name, ExpectedUID: op.ExpectedUID, State: string(op.State),
		Outcome: op.Outcome, Reason: op.Reason, CreatedAt: op.CreatedAt, FinalizedAt: op.FinalizedAt,
	}
	if id, n, ok := store.SplitRunID(op.MutationID); ok {
		out.Plan, out.Run = id, n
	}
	for _, r := range records {
		out.Records = append(out.Records, recordJSON{
			Kind: string(r.Kind), Step: r.Step, Target: r.Target.String(), Attempt: r.Attempt, Batch: r.Batch, Final: r.Final, UID: r.UID,
			ResourceVersion: r.ResourceVersion, Digest: r.Digest, Status: string(r.Status), Reason: string(r.Reason), Detail: detailJSON(r.Detail), CreatedAt: r.CreatedAt,
		})
	}
	return out
}

// groupRuns keeps the runs of one desired-state command (a credential
// plan: "<mutationId>:run-<n>") together, newest first, at the place of its
// newest run; other operations keep their place.
func groupRuns(ops []*store.Operation) []*store.Operation {
	key := func(op *store.Operation) string {
		if id, _, ok := store.SplitRunID(op.MutationID); ok {
			return id
		}
		return op.MutationID
	}
	groups := map[string][]*store.Operation{}
	var order []string
	for _, op := range ops {
		k := key(op)
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], op)
	}
	out := make([]*store.Operation, 0, len(ops))
	for _, k := range order {
		out = append(out, groups[k]...)
	}
	return out
}

func printOperations(streams IOStreams, output string, ops []*store.Operation) error {
	ops = groupRuns(ops)
	if output != formatTable {
		list := make([]operationJSON, 0, len(ops))
		for _, op := range ops {
			list = append(list, toJSON(op, nil))
		}
		return writeStructured(streams.Out, output, list)
	}
	tw := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTATION\tRUN\tKIND\tTARGET\tSTATE\tOUTCOME\tREASON\tCREATED")
	for _, op := range ops {
		mutation, run := op.MutationID, "-"
		if id, n, ok := store.SplitRunID(op.MutationID); ok {
			mutation, run = id, fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", mutation, run, op.Kind, op.Namespace, op.Name, op.State,
			dash(op.Outcome), dash(op.Reason), op.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

func printOperation(streams IOStreams, output string, op *store.Operation, records []store.Record) error {
	if output != formatTable {
		return writeStructured(streams.Out, output, toJSON(op, records))
	}
	fmt.Fprintf(streams.Out, "mutation %s (%s) request %s\ntarget   %s/%s uid %s\nstate    %s outcome %s reason %s\ncommand  %s\n\n",
		op.MutationID, op.Kind, op.RequestID, op.Namespace, op.Name, dash(op.ExpectedUID), op.State,
		dash(op.Outcome), dash(op.Reason), op.CommandDigest)
	tw := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tRECORD\tSTEP\tTARGET\tATTEMPT\tBATCH\tUID\tRV\tSTATUS\tREASON\tDETAIL")
	for i, r := range records {
		attempt, batch := "-", "-"
		if r.Attempt > 0 {
			attempt = fmt.Sprint(r.Attempt)
		}
		if r.Kind == store.RecordAuthorityCall {
			batch = fmt.Sprint(r.Batch)
			if r.Final {
				batch += " final"
			}
		}
		detail := detailText(detailJSON(r.Detail))
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, r.Kind, r.Step, dash(r.Target.String()), attempt, batch, dash(shortUID(r.UID)),
			dash(r.ResourceVersion), dash(string(r.Status)), dash(string(r.Reason)), detail)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortUID(uid string) string {
	if i := strings.IndexByte(uid, '-'); i > 0 {
		return uid[:i]
	}
	return uid
}

// newGrantCommand is journal grant and journal revoke: ROLE NAMESPACE...,
// as the schema owner. It prints one line per namespace, in argument order:
// "ACTION ROLE NAMESPACE changed|unchanged", or with -o json the
// store.GrantChange as a JSON object (with -o yaml, the list of them).
func newGrantCommand(ctx context.Context, action store.GrantAction, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   string(action) + " ROLE NAMESPACE...",
		Short: "as the schema owner: let ROLE act on NAMESPACEs",
		Long: `As the journal's schema owner, let a namespace's role (a LOGIN role the
deployment declares) read and append the operations of NAMESPACEs, and no
others (row-level security). Idempotent: a grant that exists is unchanged. A
role that would see past row-level security (a superuser, BYPASSRLS,
CREATEROLE, the owner) is refused with exit 77.`,
		Example: `  keyledger journal grant keyledger_ai ai
  keyledger journal grant keyledger_shop shop shop-staging -o json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			return grantCommand(ctx, action, args, &out, g, streams)
		},
	}
	if action == store.GrantActionRevoke {
		cmd.Short = "as the schema owner: take NAMESPACEs from ROLE"
		cmd.Long = `As the journal's schema owner, take NAMESPACEs from a role: it no longer sees
or appends their operations. Revoking a role's last namespace takes its
journal rights. Idempotent: a grant that does not exist is unchanged.`
		cmd.Example = `  keyledger journal revoke keyledger_ai ai`
	}
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

func grantCommand(ctx context.Context, action store.GrantAction, args []string, out *outputFlag, g *commonFlags, streams IOStreams) error {
	if err := checkJournalFlags(g, out); err != nil {
		return err
	}
	if len(args) < 2 {
		return usagef("journal %s takes ROLE NAMESPACE...", action)
	}
	role, namespaces := args[0], args[1:]
	if _, err := store.CheckGrantArgs(role, namespaces); err != nil {
		return err
	}
	st, err := g.openJournal(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	change := st.Grant
	if action == store.GrantActionRevoke {
		change = st.Revoke
	}
	changes, err := change(ctx, role, namespaces...)
	if err != nil {
		return err
	}
	if out.format == formatYAML {
		return writeYAML(streams.Out, changes)
	}
	for _, c := range changes {
		if out.format == formatJSON {
			b, _ := json.Marshal(c)
			fmt.Fprintln(streams.Out, string(b))
			continue
		}
		word := "unchanged"
		if c.Changed {
			word = "changed"
		}
		fmt.Fprintf(streams.Out, "%s %s %s %s\n", c.Action, c.Role, c.Namespace, word)
	}
	return nil
}

// newGrantsCommand is journal grants: the grants the connecting role may
// see (all for the owner), or with --history every grant and revoke (owner
// only).
func newGrantsCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var history bool
	cmd := &cobra.Command{
		Use:   "grants [--history]",
		Short: "list the namespace grants (or every change)",
		Long: `List the namespace grants: all of them for the schema owner, its own for a
namespace's role. With --history (the owner only), every grant and revoke,
oldest first, with the session role that made it.`,
		Example: `  keyledger journal grants
  keyledger journal grants --history -o json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := checkJournalFlags(g, &out); err != nil {
				return err
			}
			if len(args) != 0 {
				return usagef("journal grants takes no arguments")
			}
			st, err := g.openJournal(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if history {
				events, err := st.GrantHistory(ctx)
				if err != nil {
					return err
				}
				return printRows(streams, out.format, events, "AT\tACTION\tROLE\tNAMESPACE\tBY\tAS", func(e store.GrantEvent) []any {
					return []any{e.At.UTC().Format(time.RFC3339), e.Action, e.Role, e.Namespace, e.SessionRole, e.ActingRole}
				})
			}
			grants, err := st.Grants(ctx)
			if err != nil {
				return err
			}
			return printRows(streams, out.format, grants, "ROLE\tNAMESPACE\tGRANTED", func(g store.NamespaceGrant) []any {
				return []any{g.Role, g.Namespace, g.GrantedAt.UTC().Format(time.RFC3339)}
			})
		},
	}
	cmd.Flags().BoolVar(&history, "history", false, "every grant and revoke, oldest first (schema owner only)")
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

// openJournal opens the journal a journal subcommand reads or changes; a
// failure to reach it is an unavailable dependency (exit 69).
func (c *commonFlags) openJournal(ctx context.Context) (*store.Store, error) {
	url, err := c.database()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	return st, nil
}

// printRows prints rows as JSON or YAML (an empty list for none) or as a
// table under header (tab-separated column names), one line of cells a row.
func printRows[T any](streams IOStreams, output string, rows []T, header string, cells func(T) []any) error {
	if output != formatTable {
		if rows == nil {
			rows = []T{}
		}
		return writeStructured(streams.Out, output, rows)
	}
	tw := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line := cells(r)
		text := make([]string, len(line))
		for i, c := range line {
			text[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(text, "\t"))
	}
	return tw.Flush()
}
