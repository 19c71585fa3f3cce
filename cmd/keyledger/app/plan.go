package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

func newPlanCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var fsGroup int
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "plan COMMAND_FILE",
		Short: "show what run would do; writes nothing",
		Long: `Show what run would do with the same command file, and write nothing: plan
validates the file as run does, runs the same permission check and the same
reads, reads the journal (an operation that already ended is a replay), and
drives the family's decisions with every call held back. It prints the calls
in order with their verb, target and preconditions, the answer it expects,
and the ending (never a value). It sends no write and journals nothing.`,
		Example: `  keyledger plan /abs/path/retire.json
  keyledger plan -o json /abs/path/plan.json | jq .calls`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: fileCompletion("json"),
		RunE: func(_ *cobra.Command, args []string) error {
			return planCommand(ctx, args, fsGroup, &out, g, streams)
		},
	}
	addFSGroup(cmd, &fsGroup)
	addOutput(cmd, &out, formatTable, formatJSON, formatYAML)
	return cmd
}

// planCommand shows what `run FILE` would do, and writes nothing: it
// validates as run does, runs the permission check and the reads a run
// makes, reads the journal (a terminal operation is a replay), and drives
// the family's decisions with every call held back (workflow.DryRun).
func planCommand(ctx context.Context, args []string, fsGroup int, out *outputFlag, g *commonFlags, streams IOStreams) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("plan takes exactly one command file, got %d arguments", len(args))
	}
	pr, err := prepareRun(args[0], fsGroup, g)
	if err != nil {
		return err
	}
	// Only warnings and errors at -v 0: plan's output is for reading.
	log := g.logger(streams.ErrOut, slog.LevelWarn)
	deps, plan, release, err := pr.connect(g, log, nil)
	if err != nil {
		return err
	}
	defer release()
	res, err := workflow.DryRun(ctx, deps, plan)
	if err != nil {
		return err
	}
	p := toPlanJSON(pr, res)
	switch out.format {
	case formatJSON:
		return json.NewEncoder(streams.Out).Encode(p)
	case formatYAML:
		return writeYAML(streams.Out, p)
	}
	return printPlan(streams.Out, p)
}

// planJSON is `keyledger plan -o json`.
type planJSON struct {
	Kind       string `json:"kind"`
	MutationID string `json:"mutationId"`
	// Operation is the operation a run would drive (a credential plan's
	// run: "<mutationId>:run-<n>").
	Operation string `json:"operation,omitempty"`
	// Journal is the operation's state in the journal, "new" when absent.
	Journal string `json:"journal"`
	// Replay: the operation is terminal; a run would send nothing.
	Replay bool `json:"replay"`
	// Reads are what the run would journal as observed (and probes).
	Reads []plannedRecord `json:"reads"`
	// Calls are what the run would send, in order, batch by batch.
	Calls []plannedCall `json:"calls"`
	// Outcome, Reason and Summary: the ending if every call is applied as
	// intended (empty when Stopped).
	Outcome string          `json:"outcome,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Summary json.RawMessage `json:"summary,omitempty"`
	Stopped string          `json:"stopped,omitempty"`
	// Writes is always 0: plan writes nothing, not even to the journal.
	Writes int `json:"writes"`
}

type plannedCall struct {
	Batch           int             `json:"batch"`
	Verb            string          `json:"verb"`
	Step            string          `json:"step"`
	Target          string          `json:"target"`
	UID             string          `json:"uid,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Digest          string          `json:"digest,omitempty"`
	Final           bool            `json:"final,omitempty"`
	Detail          json.RawMessage `json:"detail,omitempty"`
	// Answer is what the dry run took as the call's answer: "applied", or
	// what a read showed it would answer (already-exists: a 409, no write).
	Answer string `json:"answer"`
}

type plannedRecord struct {
	Kind            string          `json:"kind"`
	Step            string          `json:"step"`
	Target          string          `json:"target,omitempty"`
	UID             string          `json:"uid,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Status          string          `json:"status,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Detail          json.RawMessage `json:"detail,omitempty"`
}

func toPlanJSON(pr *preparedRun, res *workflow.DryRunResult) planJSON {
	out := planJSON{Kind: pr.kind, MutationID: pr.mutationID, Operation: res.Operation, Journal: res.Journal, Replay: res.Replay,
		Outcome: string(res.Outcome), Reason: res.Reason, Summary: detailJSON(res.Summary), Stopped: res.Stopped,
		Reads: []plannedRecord{}, Calls: []plannedCall{}}
	for i, r := range res.Records {
		switch r.Kind {
		case store.RecordAuthorityCall:
			answer := "applied"
			for _, later := range res.Records[i+1:] {
				if later.Kind == store.RecordAuthorityResult && later.Step == r.Step && later.Target == r.Target {
					if later.Status != workflow.Applied {
						answer = string(later.Reason)
					}
					break
				}
			}
			out.Calls = append(out.Calls, plannedCall{Batch: r.Batch, Verb: string(res.Verb(r)), Step: r.Step, Target: r.Target.String(),
				UID: r.UID, ResourceVersion: r.ResourceVersion, Digest: r.Digest, Final: r.Final, Detail: detailJSON(r.Detail), Answer: answer})
		case store.RecordObservation, store.RecordProbe, store.RecordResolution:
			out.Reads = append(out.Reads, plannedRecord{Kind: string(r.Kind), Step: r.Step, Target: r.Target.String(), UID: r.UID,
				ResourceVersion: r.ResourceVersion, Status: string(r.Status), Reason: string(r.Reason), Detail: detailJSON(r.Detail)})
		}
	}
	return out
}

func printPlan(w io.Writer, p planJSON) error {
	op := p.MutationID
	if p.Operation != "" && p.Operation != p.MutationID {
		op += " as " + p.Operation
	}
	fmt.Fprintf(w, "plan %s %s (journal: %s)\n", p.Kind, op, p.Journal)
	if p.Replay {
		fmt.Fprintf(w, "already ended in the journal: a run would replay it (outcome %s%s) and send nothing\n",
			p.Outcome, map[bool]string{true: ", reason " + p.Reason, false: ""}[p.Reason != ""])
		return nil
	}
	if len(p.Reads) > 0 {
		fmt.Fprintln(w, "\nreads:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RECORD\tSTEP\tTARGET\tUID\tRV\tSTATUS\tDETAIL")
		for _, r := range p.Reads {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, r.Step, dash(r.Target), dash(shortUID(r.UID)),
				dash(r.ResourceVersion), dash(r.Status), detailText(r.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nwould send:")
	if len(p.Calls) == 0 {
		fmt.Fprintln(w, "  nothing")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BATCH\tVERB\tSTEP\tTARGET\tPRECONDITION\tANSWER\tDETAIL")
		for _, c := range p.Calls {
			pre := "-"
			if c.UID != "" || c.ResourceVersion != "" {
				pre = "uid " + dash(shortUID(c.UID)) + " rv " + dash(c.ResourceVersion)
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Batch, c.Verb, c.Step, c.Target, pre, c.Answer, detailText(c.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case p.Stopped != "":
		fmt.Fprintf(w, "\nthen: %s\n", p.Stopped)
	case p.Reason != "":
		fmt.Fprintf(w, "\nwould end: %s (%s) %s\n", p.Outcome, p.Reason, detailText(p.Summary))
	default:
		fmt.Fprintf(w, "\nwould end: %s %s\n", p.Outcome, detailText(p.Summary))
	}
	fmt.Fprintln(w, "nothing was written (plan sends no call and journals nothing)")
	return nil
}

// detailJSON is a record detail as printed (canonical JSON: keys sorted),
// nil (left out) when empty.
func detailJSON(d store.Detail) json.RawMessage {
	if d.IsZero() {
		return nil
	}
	return d.JSON()
}

// detailText prints a detail as JSON with sorted keys, "-" when empty.
func detailText(d json.RawMessage) string {
	if len(d) == 0 {
		return "-"
	}
	return string(d)
}
