package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/phase"
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
	// (invalid command, unavailable dependency, permission mismatch), and
	// for an uncertain one, what is left to settle.
	Error   string       `json:"error,omitempty"`
	Summary store.Detail `json:"-"`
}

// outcomeKeys are the members of stdout's line that keyledger writes
// itself. A summary (a journaled ending's detail) never sets them: the
// journal is easier to write than the cluster, and the outcome word, the
// reason and the operation a consumer acts on must be this run's own.
var outcomeKeys = map[string]bool{"outcome": true, "kind": true, "mutationId": true, "reason": true, "error": true}

// summaryFields returns the members of a summary that may appear on stdout:
// every key but outcomeKeys. A colliding key is dropped, not renamed: no
// family writes one (their detail keys are content-free facts such as
// secret, generation, run), so one is forged or a bug, and a renamed copy
// would still put its words on stdout.
func summaryFields(summary store.Detail) (fields map[string]json.RawMessage, dropped int) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(summary.JSON(), &all); err != nil {
		return map[string]json.RawMessage{}, 0 // unreachable: a detail is a JSON object
	}
	fields = make(map[string]json.RawMessage, len(all))
	for k, v := range all {
		if outcomeKeys[k] {
			dropped++
			continue
		}
		fields[k] = v
	}
	return fields, dropped
}

func (l outcomeLine) MarshalJSON() ([]byte, error) {
	out, _ := summaryFields(l.Summary)
	set := func(k, v string) {
		if v != "" {
			out[k], _ = json.Marshal(v)
		}
	}
	out["outcome"], _ = json.Marshal(l.Outcome)
	set("kind", l.Kind)
	set("mutationId", l.MutationID)
	set("reason", l.Reason)
	set("error", l.Error)
	return json.Marshal(out)
}

func newRunCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var fsGroup int
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "run COMMAND_FILE",
		Short: "run one command file (absolute path)",
		Long: `Run one command file: validate it, check the identity's rights, journal the
operation in PostgreSQL, call the Kubernetes API and journal what came back.
The same file run again resumes or replays the operation (exit 0 when it is
already done); a CredentialPlan converges again on every run.

stdout carries exactly one outcome line: JSON by default (machines and Jobs
read it; -o yaml for people), whatever happens, also on a failure. Logs go
to stderr as JSON lines. The file must be given by its absolute path; a file
holding values (SecretUpdate) must not be group- or world-readable.`,
		Example: `  keyledger run /abs/path/retire.json
  keyledger run --database-url postgres://kl_ai@db/journal /abs/path/retire.json
  keyledger run --fs-group 10001 /etc/keyledger/command.json   # a Secret volume file
  keyledger run -o yaml /abs/path/update.json`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: fileCompletion("json"),
		RunE: func(_ *cobra.Command, args []string) error {
			return runCommand(ctx, args, fsGroup, &out, g, streams)
		},
	}
	addFSGroup(cmd, &fsGroup)
	addOutput(cmd, &out, formatJSON, formatYAML)
	// A flag run cannot parse still ends with its outcome line.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return finishRun(streams, g.logger(streams.ErrOut, slog.LevelInfo), out.format, &outcomeLine{}, usagef("%v", err))
	})
	return cmd
}

// addFSGroup is --fs-group, for a command file read from a Kubernetes
// Secret volume: the kubelet makes such files group-readable by the pod's
// fsGroup, so a file holding values may be group-readable by that group
// (held by this process) and no other.
func addFSGroup(cmd *cobra.Command, fsGroup *int) {
	cmd.Flags().IntVar(fsGroup, "fs-group", 0,
		"the pod's fsGroup when the command file is a Secret volume file: group read by this group (held by this process) is accepted for files holding values")
	_ = cmd.RegisterFlagCompletionFunc("fs-group", noCompletion)
}

// finishRun ends a run: its outcome line on stdout (line as far as the run
// got, completed from err when it failed) and, on a failure, its one JSON
// log line on stderr saying what happened and what to do.
func finishRun(streams IOStreams, log *slog.Logger, format string, line *outcomeLine, err error) error {
	if format != formatYAML {
		format = formatJSON
	}
	if err == nil || errors.Is(err, errHelp) {
		if line.Outcome != "" {
			_ = writeLine(streams.Out, format, *line)
		}
		return err
	}
	f := describe(err)
	switch {
	case line.Outcome == "":
		line.Outcome, line.Reason, line.Error = string(f.Outcome), f.Reason, f.Message
	case f.Outcome == workflow.OutcomeUncertain:
		// An open operation: what is left to settle (a cleanup's counts of
		// snapshots absent, pending and failed), as the stderr line says it.
		line.Error = f.Message
	}
	_ = writeLine(streams.Out, format, *line)
	attrs := []any{"outcome", line.Outcome, "reason", line.Reason, "exit_code", f.Code, "error", f.Message, "fix", f.Fix}
	log.Error("run ended", attrs...)
	return &reported{err: err}
}

func runCommand(ctx context.Context, args []string, fsGroup int, out *outputFlag, g *commonFlags, streams IOStreams) (err error) {
	line := outcomeLine{}
	defer noteRunOutcome(&line) // runs last: the line as printed
	start := time.Now()
	log := g.logger(streams.ErrOut, slog.LevelInfo)
	defer func() { err = finishRun(streams, log, out.format, &line, err) }()

	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := out.check(); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("run takes exactly one command file, got %d arguments", len(args))
	}
	// Everything is validated before the kubeconfig is loaded or any
	// connection is made: the file, its family's fields, the environment.
	endPhase := phase.Begin("configuration: command file")
	pr, err := prepareRun(args[0], fsGroup, g)
	endPhase()
	if pr != nil {
		line.Kind, line.MutationID = pr.kind, pr.mutationID
	}
	if err != nil {
		return err
	}

	var counter kube.Counter
	endPhase = phase.Begin("configuration: cluster client")
	deps, plan, release, err := pr.connect(g, log, func(rt http.RoundTripper) http.RoundTripper {
		return phase.Wrap(counter.Wrap(faultWrap(rt)), kube.RequestName)
	})
	endPhase()
	if err != nil {
		return err
	}
	defer release()
	res, err := workflow.Execute(ctx, deps, plan)
	transactions := int64(0)
	if res != nil {
		transactions = res.Transactions
		if res.Run != nil {
			line.Summary = res.Run.Ending()
			if _, dropped := summaryFields(line.Summary); dropped > 0 {
				log.Warn("ending detail carries keys that only keyledger writes; left off stdout", "dropped_keys", dropped)
			}
			line.Outcome = string(res.Outcome)
			line.Reason = res.Run.Op.Reason
		}
	}
	var uncertain *workflow.Uncertain
	if errors.As(err, &uncertain) {
		line.Reason = describe(err).Reason // the cause of an interruption (exit.go)
	}
	mem := memoryKiB()
	outcome := line.Outcome
	if outcome == "" && err != nil {
		outcome = string(describe(err).Outcome)
	}
	log.Info("run finished",
		"kind", line.Kind, "mutation_id", line.MutationID, "outcome", outcome,
		"api_requests", counter.Total(), "api_requests_by_verb", counter.String(),
		"pg_transactions", transactions, "duration_ms", time.Since(start).Milliseconds(),
		"peak_rss_kib", mem["VmHWM"], "rss_anon_kib", mem["RssAnon"], "rss_file_kib", mem["RssFile"])
	return err
}

// families chooses the family by the command's kind: the only thing cmd
// knows of them.
var families = map[string]workflow.Loader{
	command.KindKeyRetirement:  retire.Load,
	command.KindSecretUpdate:   versioned.Load,
	command.KindSecretRestore:  versioned.Load,
	command.KindSecretDelete:   versioned.Load,
	command.KindCredentialPlan: credentials.Load,
}

// preparedRun is a command file read and validated with everything a run
// needs before it touches the cluster or the journal.
type preparedRun struct {
	kind, mutationID string
	databaseURL      string
	// build makes the family's plan once the cluster configuration is loaded.
	build workflow.Builder
}

// connect loads the cluster configuration (wrap, when set, wraps the
// transport), builds the family's plan and the engine's dependencies: what
// run and plan share once the command is validated.
func (pr *preparedRun) connect(flags *commonFlags, log *slog.Logger, wrap func(http.RoundTripper) http.RoundTripper) (workflow.Deps, workflow.Plan, func(), error) {
	cfg, client, release, err := flags.kubeClient(wrap)
	if err != nil {
		return workflow.Deps{}, workflow.Plan{}, nil, err
	}
	plan, err := pr.build(cfg, client)
	if err != nil {
		release()
		return workflow.Deps{}, workflow.Plan{}, nil, err
	}
	deps := workflow.Deps{
		Kube:      client,
		OpenStore: workflow.PostgresStore(pr.databaseURL),
		Log:       log,
	}
	return deps, plan, release, nil
}

// prepareRun reads and validates the command file, its family's fields,
// the environment settings and the database URL, in that order, and
// contacts nothing. The result carries kind and mutation ID as soon as the
// envelope is read, even when a later check fails.
func prepareRun(path string, fsGroup int, g *commonFlags) (*preparedRun, error) {
	pr, _, err := loadCommand(path, fsGroup)
	if err != nil {
		return pr, err
	}
	if pr.databaseURL, err = g.database(); err != nil {
		return pr, err
	}
	if err := store.CheckURL(pr.databaseURL); err != nil {
		return pr, err
	}
	return pr, nil
}

// loadCommand reads the command file and runs its family's decoder and
// checks and the environment's, as run does, contacting nothing (what
// validate runs). The file is returned once read, even when a later check
// fails.
func loadCommand(path string, fsGroup int) (*preparedRun, *command.File, error) {
	if fsGroup < 0 {
		return nil, nil, usagef("--fs-group must be a group ID above 0, got %d", fsGroup)
	}
	f, err := command.Read(path, command.ReadOptions{FSGroup: fsGroup})
	if err != nil {
		return nil, nil, err
	}
	pr, err := loadFile(f)
	return pr, f, err
}

// loadFile is loadCommand once the file is read.
func loadFile(f *command.File) (*preparedRun, error) {
	pr := &preparedRun{kind: f.Envelope.Kind, mutationID: f.Envelope.Metadata.MutationID}
	load, ok := families[f.Envelope.Kind]
	if !ok {
		return pr, command.Invalid("kind", f.Envelope.Kind+" is not supported by this version of keyledger")
	}
	var err error
	if pr.build, err = load(f, os.LookupEnv); err != nil {
		return pr, err
	}
	if err := checkEnvironment(); err != nil {
		return pr, err
	}
	return pr, nil
}

// checkEnvironment validates the environment settings every run reads.
func checkEnvironment() error {
	switch v := os.Getenv("KEYLEDGER_LOG_LEVEL"); strings.ToLower(v) {
	case "", "info", "debug":
	default:
		return usagef("KEYLEDGER_LOG_LEVEL must be info or debug, not %q", v)
	}
	if _, err := store.SessionTimeoutsFromEnv(os.LookupEnv); err != nil {
		return err
	}
	return checkFault()
}
