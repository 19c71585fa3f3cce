package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// outcomeLine is the one JSON line `keyledger run` prints on stdout.
type outcomeLine struct {
	Kind       string `json:"kind,omitempty"`
	MutationID string `json:"mutationId,omitempty"`
	Outcome    string `json:"outcome"`
	Reason     string `json:"reason,omitempty"`
	// Error is a content-free message for outcomes without a journal entry
	// (invalid command, unavailable dependency, permission mismatch).
	Error   string         `json:"error,omitempty"`
	Summary map[string]any `json:"-"`
}

func (l outcomeLine) MarshalJSON() ([]byte, error) {
	out := map[string]any{"outcome": l.Outcome}
	for k, v := range l.Summary {
		out[k] = v
	}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("kind", l.Kind)
	set("mutationId", l.MutationID)
	set("reason", l.Reason)
	set("error", l.Error)
	return json.Marshal(out)
}

func runCommand(ctx context.Context, args []string, streams IOStreams, log *slog.Logger) (err error) {
	var flags commonFlags
	fs := newFlagSet("run", streams)
	flags.addDatabase(fs)
	flags.addKube(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("run takes exactly one command file, got %d arguments", fs.NArg())
	}
	line := outcomeLine{}
	start := time.Now()
	defer func() {
		if line.Outcome == "" {
			line.Outcome, line.Reason, line.Error = outcomeForError(err)
		}
		b, _ := json.Marshal(line)
		fmt.Fprintln(streams.Out, string(b))
		if err != nil {
			attrs := []any{"outcome", line.Outcome, "reason", line.Reason, "exit_code", ExitCode(err)}
			switch _, _, msg := outcomeForError(err); {
			case line.Error != "":
				attrs = append(attrs, "error", line.Error)
			case ExitCode(err) != ExitRefused:
				// Uncertain and internal ends: say what happened (the
				// stdout line stays terse; the journal says where it stopped).
				attrs = append(attrs, "error", msg)
			}
			log.Error("run ended", attrs...)
		}
	}()

	f, err := command.Read(fs.Arg(0), command.ReadOptions{})
	if err != nil {
		return err
	}
	line.Kind, line.MutationID = f.Envelope.Kind, f.Envelope.Metadata.MutationID
	databaseURL, err := flags.database()
	if err != nil {
		return err
	}
	if err := store.CheckURL(databaseURL); err != nil {
		return err
	}

	var counter kube.Counter
	cfg, client, release, err := flags.kubeClient(func(rt http.RoundTripper) http.RoundTripper {
		return counter.Wrap(faultWrap(rt))
	})
	if err != nil {
		return err
	}
	defer release()

	var plan workflow.Plan
	switch f.Envelope.Kind {
	case command.KindKeyRetirement:
		cmd, err := retire.Decode(f)
		if err != nil {
			return err
		}
		plan = retire.Plan(cmd, client)
	case command.KindSecretUpdate, command.KindSecretRestore, command.KindSecretDelete:
		cmd, err := versioned.Decode(f)
		if err != nil {
			return err
		}
		value, set := os.LookupEnv(versioned.HistoryLimitEnv)
		limit, err := versioned.ParseHistoryLimit(value, set)
		if err != nil {
			return usagef("%v", err)
		}
		plan = versioned.Plan(cmd, client, limit)
	case command.KindCredentialPlan:
		// Read without RequirePrivate: a plan holds no secret values. Its
		// literal values are not secret (user names) and render ships it in
		// a ConfigMap; generated values never leave the run.
		cmd, err := credentials.Decode(f)
		if err != nil {
			return err
		}
		if plan, err = credentials.Plan(cmd, cfg); err != nil {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: err}
		}
	default:
		return command.Invalid("kind", f.Envelope.Kind+" is not supported by this version of keyledger")
	}

	deps := workflow.Deps{
		Kube:      client,
		OpenStore: func(ctx context.Context) (*store.Store, error) { return store.Open(ctx, databaseURL) },
		Log:       log,
	}
	res, err := workflow.Execute(ctx, deps, plan)
	transactions := int64(0)
	if res != nil {
		transactions = res.Transactions
		if res.Run != nil {
			line.Summary = res.Run.Ending()
			line.Outcome = string(res.Outcome)
			line.Reason = res.Run.Op.Reason
		}
	}
	if line.Outcome == "" && err != nil {
		line.Outcome, line.Reason, line.Error = outcomeForError(err)
	}
	var uncertain *workflow.Uncertain
	if errors.As(err, &uncertain) {
		line.Reason = uncertain.Reason
	}
	mem := memoryKiB()
	log.Info("run finished",
		"kind", line.Kind, "mutation_id", line.MutationID, "outcome", line.Outcome,
		"api_requests", counter.Total(), "api_requests_by_verb", counter.String(),
		"pg_transactions", transactions, "duration_ms", time.Since(start).Milliseconds(),
		"peak_rss_kib", mem["VmHWM"], "rss_anon_kib", mem["RssAnon"], "rss_file_kib", mem["RssFile"])
	return err
}

// outcomeForError describes an error that ended a run before (or without) a
// journaled ending.
func outcomeForError(err error) (outcome, reason, msg string) {
	var (
		refused    *workflow.Refused
		uncertain  *workflow.Uncertain
		permission *workflow.PermissionMismatch
	)
	var fileErr *command.FileError
	if errors.As(err, &fileErr) {
		// The outcome line never carries a file path.
		return "invalid", "invalid-command", "command file: " + fileErr.Reason + ": " + fileErr.Detail
	}
	switch code := ExitCode(err); {
	case errors.As(err, &permission):
		return string(workflow.OutcomeRefused), "permission-mismatch", err.Error()
	case errors.As(err, &refused):
		return string(workflow.OutcomeRefused), refused.Reason, err.Error()
	case errors.As(err, &uncertain):
		return string(workflow.OutcomeUncertain), uncertain.Reason, err.Error()
	case code == ExitUsage:
		return "invalid", "invalid-command", err.Error()
	case code == ExitUnavailable:
		return "unavailable", "dependency-unavailable", err.Error()
	default:
		return "error", "internal-error", err.Error()
	}
}
