package workflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/keyledger/keyledger/cause"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/phase"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// Plan is everything a family hands the engine for one run.
type Plan struct {
	// Prepare describes the operation to journal.
	Prepare store.PrepareParams
	// Access is the permission matrix that must hold exactly before the
	// journal is opened and any material is read.
	Access []kube.AccessCheck
	// Rights, when set, is the family's complete rule set: one rules review
	// must list exactly these rules in their namespace, beyond what every
	// authenticated user holds (kube.CheckRules), checked beside Access.
	Rights *kube.Rights
	// Precheck, when set, runs after the permission matrix held and before
	// the journal is opened: a read of the authority that can reject the
	// command before anything is journaled or written (for example a size
	// guard, exit 64). Its error ends the run unchanged.
	Precheck func(ctx context.Context) error
	// Prefetch, when set, is called once the permission matrix held and
	// the precheck passed, just before the journal is opened: it may start,
	// in the background, the read the family's first decision makes, so
	// that it travels while the journal connects. It only reads (the matrix
	// allowed it), returns at once and is called at most once.
	Prefetch func(ctx context.Context)
	// Digest, when set, resolves Prepare.CommandDigest just before the
	// operation is prepared (or, in a dry run, looked up): a digest that
	// is slow to compute on purpose (the versioned family's PBKDF2 verifier
	// of an update's values) is computed while the permission check and the
	// journal connect run. It may block until the digest is ready, and
	// times its wait itself (phase "command digest"). The journal is open
	// and bound (JournalBound) when it is called: a family may spend the
	// wait on journal reads its first decision makes (reads only).
	Digest func(ctx context.Context) (string, error)
	// Family decides and resolves.
	Family Family
	// MaxAttempts bounds the sends of one step (default 3).
	MaxAttempts int
	// Runs makes the command desired state: every run is an operation of
	// its own (store.PrepareRun), so running the command again converges
	// again instead of replaying, while an interrupted run is resumed.
	Runs bool
	// Unjournaled lets a desired-state run whose journal is down (an
	// outage that ends by itself) end without it when, decided from the
	// cluster alone, it has nothing to write, delete or restart
	// (unjournaled). The journal proves authorship and remembers restarts;
	// only writes and restarts need those.
	Unjournaled bool
}

// JournalReader reads records of other operations than the one being run.
type JournalReader interface {
	StepRecords(ctx context.Context, p store.StepRecordsParams) ([][]store.Record, error)
	// FindInRuns finds the newest record of a kind, step and target in any
	// run of a desired-state command (store.Store.FindInRuns).
	FindInRuns(ctx context.Context, p store.RunRecordParams) (*store.RunRecord, error)
}

// JournalBound is implemented by a family that decides from other
// operations' records too (the versioned family proves from them which
// snapshots it created): Operate and DryRun hand it the journal once it is
// open, before its first decision.
type JournalBound interface {
	BindJournal(j JournalReader)
}

// Store is the journal a run drives: what Execute, DryRun and the engine
// use of it. *store.Store (PostgreSQL) is the one a command runs with;
// workflowtest.Journal is an in-memory stand-in with the same semantics for
// unit tests of decision logic, which proves no PostgreSQL claim.
type Store interface {
	Journal
	JournalReader
	// Prepare journals a new operation (created=true) or returns the one
	// journaled under the mutation ID (store.ErrDigestMismatch when it is
	// another command's).
	Prepare(ctx context.Context, p store.PrepareParams) (op *store.Operation, created bool, err error)
	// PrepareRun journals or resumes one run of a desired-state command
	// (see store.PrepareRun).
	PrepareRun(ctx context.Context, p store.PrepareParams) (op *store.Operation, created bool, err error)
	// Runs returns every run of a desired-state command, oldest first.
	Runs(ctx context.Context, id string) ([]*store.Operation, error)
	// LatestRun returns the newest run of a desired-state command
	// (store.ErrNotFound when none): keyledger plan reads only that one.
	LatestRun(ctx context.Context, ns, id string) (*store.Operation, error)
	// Transactions is the number of transactions committed so far.
	Transactions() int64
	Close()
}

var _ Store = (*store.Store)(nil)

// PostgresStore returns a Deps.OpenStore that opens the PostgreSQL journal
// at databaseURL.
func PostgresStore(databaseURL string) func(ctx context.Context) (Store, error) {
	return func(ctx context.Context) (Store, error) {
		st, err := store.Open(ctx, databaseURL)
		if err != nil {
			return nil, err // never a typed nil in the interface
		}
		return st, nil
	}
}

// Deps are the run's connections. OpenStore is called only after the
// permission matrix held, so a refused run never contacts PostgreSQL.
type Deps struct {
	Kube      kube.Interface
	OpenStore func(ctx context.Context) (Store, error)
	Log       *slog.Logger
}

// Result is what a run ends with.
type Result struct {
	// Run is the operation as the journal holds it. It is nil when a
	// replay was contradicted by the cluster (Family.ConfirmReplay): the
	// journaled ending is not what happened, and is not reported.
	Run *Run
	// Outcome is the word printed on stdout.
	Outcome Outcome
	// Replayed is true when the operation was already terminal in the journal.
	Replayed bool
	// Transactions is the number of journal transactions committed while
	// this run was operating (by this run alone, unless the Store is shared).
	Transactions int64
	// Journal is JournalNotConsulted when the run ended without its
	// journal (Plan.Unjournaled), empty otherwise.
	Journal string
}

// begin is what Execute and DryRun do before the journal is read: the
// permission matrix, the family's precheck, then the journal opened. The
// caller closes the store.
func begin(ctx context.Context, deps Deps, plan Plan) (Store, *slog.Logger, error) {
	log := orDiscard(deps.Log)
	endPhase := phase.Begin("permission check")
	err := checkAccess(ctx, deps, plan, log)
	endPhase()
	if err != nil {
		return nil, nil, err
	}
	if plan.Precheck != nil {
		endPhase = phase.Begin("precheck")
		err := plan.Precheck(ctx)
		endPhase()
		if err != nil {
			return nil, nil, err
		}
	}
	if plan.Prefetch != nil {
		plan.Prefetch(ctx)
	}
	endPhase = phase.Begin("journal connect")
	st, err := deps.OpenStore(ctx)
	endPhase()
	if err != nil {
		return nil, log, &journalConnectError{&Unavailable{Dependency: "postgresql", Err: err}}
	}
	return st, log, nil
}

// checkAccess runs the permission matrix and, when the plan sets Rights,
// the rules review of the family's complete rule set: every real run and
// every dry run checks it before the journal is opened.
func checkAccess(ctx context.Context, deps Deps, plan Plan, log *slog.Logger) error {
	if len(plan.Access) == 0 && plan.Rights == nil {
		return nil
	}
	// The matrix and the rules review go out as one fan-out on one
	// connection (kube.CheckAccessAndRules).
	mismatches, err := kube.CheckAccessAndRules(ctx, deps.Kube, plan.Access, plan.Rights)
	if err != nil {
		return &Unavailable{Dependency: "kubernetes", Err: err}
	}
	if len(mismatches) > 0 {
		// A server still starting may deny what it will allow once warm:
		// that is the server's state (69, a rerun settles it), not the
		// identity's rights.
		if err := kube.NotReady(ctx, deps.Kube); err != nil {
			return &Unavailable{Dependency: "kubernetes", Err: err}
		}
		return &PermissionMismatch{Mismatches: mismatches}
	}
	log.Info("permission matrix holds", "checks", len(plan.Access))
	return nil
}

// bindJournal hands the open journal to a family that reads other
// operations' records (JournalBound), before its first decision.
func bindJournal(st Store, f Family) {
	if jb, ok := f.(JournalBound); ok {
		jb.BindJournal(st)
	}
}

func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// Execute runs one operation: permission matrix, precheck, the journal
// opened, then Operate: preparation, then the state machine until the
// operation is terminal or its outcome is uncertain.
func Execute(ctx context.Context, deps Deps, plan Plan) (*Result, error) {
	res, err := execute(ctx, deps, plan)
	return res, startingForbidden(ctx, deps, err)
}

func execute(ctx context.Context, deps Deps, plan Plan) (*Result, error) {
	st, log, err := begin(ctx, deps, plan)
	var connect *journalConnectError
	if errors.As(err, &connect) {
		return unjournaled(ctx, plan, log, connect.err)
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return Operate(ctx, st, plan, log)
}

// startingForbidden reads a request the API server forbade (403) while it
// says it is not ready as the server error it is: a server just restarted
// denies what its authorizer allows once its caches are synced, and a rerun
// settles it (69 or 75 by where the run stopped, never 77). The error is
// changed in place, so where the run stopped is kept.
func startingForbidden(ctx context.Context, deps Deps, err error) error {
	var forbidden *kube.Error
	if !errors.As(err, &forbidden) || forbidden.Failure.Reason != kube.ReasonForbidden || deps.Kube == nil {
		return err
	}
	var starting *kube.Error
	if errors.As(kube.NotReady(ctx, deps.Kube), &starting) {
		forbidden.Failure, forbidden.Err = starting.Failure, starting.Err
	}
	return err
}

// maxRunJoins bounds how often Operate prepares the next run of a
// desired-state command because the run it was handed ended before it was
// read (other processes finishing runs as fast as this one joins them).
const maxRunJoins = 3

// Operate is Execute once the permission matrix held and the journal is
// open: it binds st to a JournalBound family, prepares the operation (or
// the next run, plan.Runs) or resumes it, drives it until it is terminal or
// its outcome is uncertain, and says how it ended. plan.Access, Rights
// and Precheck are not looked at. It does not close st.
// Unit tests call it with an in-memory journal (workflowtest.NewJournal).
func Operate(ctx context.Context, st Store, plan Plan, log *slog.Logger) (*Result, error) {
	log = orDiscard(log)
	bindJournal(st, plan.Family)
	res := &Result{}
	start := st.Transactions()
	defer func() { res.Transactions = st.Transactions() - start }()

	if err := plan.resolveDigest(ctx); err != nil {
		return res, journalFailed(err, false)
	}
	run, err := prepare(ctx, st, plan, log)
	if err != nil {
		if errors.As(err, new(*Uncertain)) {
			res.Outcome = OutcomeUncertain
		}
		return res, err
	}
	res.Run = run
	if run.Op.State.Terminal() {
		res.Replayed = true
		// A completed operation is reported existing only once a read of
		// the cluster made now shows its effect.
		if err := confirmReplay(ctx, plan.Family, run); err != nil {
			return contradicted(res, err)
		}
		return res, finish(res)
	}
	eng := newEngine(st, plan, log)
	return drove(ctx, plan, eng, res, eng.drive(ctx, run))
}

// prepare journals the operation (or the next run, plan.Runs) or finds the
// one journaled, and returns it with its records.
func prepare(ctx context.Context, st Store, plan Plan, log *slog.Logger) (*Run, error) {
	prepare := st.Prepare
	if plan.Runs {
		prepare = st.PrepareRun
	}
	for joined := 0; ; joined++ {
		op, created, err := prepare(ctx, plan.Prepare)
		if errors.Is(err, store.ErrDigestMismatch) {
			return nil, &Refused{Reason: "mutation-id-reused", Detail: "this mutationId is journaled for a different command"}
		}
		if err != nil {
			// The preparation is not durable (or, when its commit's answer
			// was lost, nothing was sent after it): any failure of the
			// journal here is an unavailable dependency, whatever the
			// session met (cause.Of).
			return nil, journalFailed(fmt.Errorf("preparing operation: %w", err), false)
		}
		run := &Run{Op: op}
		if created {
			run.Records = []store.Record{{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: op.CommandDigest}}
			log.Info("prepared", "mutation_id", op.MutationID, "kind", op.Kind)
			failpoint.Hit("after-prepare")
			return run, nil
		}
		// The operation and its records as one view: another run of the
		// same command may be moving it right now.
		if run.Op, run.Records, err = st.Snapshot(ctx, op.Namespace, op.MutationID); err != nil {
			// The operation is durable and unsettled: a rerun resumes it.
			return nil, journalFailed(fmt.Errorf("reading journal: %w", err), true)
		}
		if plan.Runs && !op.State.Terminal() && run.Op.State.Terminal() && joined < maxRunJoins {
			// The unfinished run PrepareRun handed back was ended by the
			// process driving it before this one read it: nothing of it
			// is this process's to replay, so the next run is prepared. (A
			// run PrepareRun hands back already ended is not this case: it
			// stays a replay, which a desired-state family refuses.)
			log.Info("run ended before it was joined", "mutation_id", op.MutationID)
			continue
		}
		log.Info("resuming", "mutation_id", run.Op.MutationID, "state", string(run.Op.State))
		return run, nil
	}
}

// drove says how a run the engine drove ended (err is drive's).
func drove(ctx context.Context, plan Plan, eng *engine, res *Result, err error) (*Result, error) {
	run := res.Run
	var (
		refused     *Refused
		uncertain   *Uncertain
		unavailable *Unavailable
	)
	switch {
	case err == nil && !eng.ended && run.Op.State == store.StateCompleted && !plan.Runs:
		// Another process completed the operation while this run drove it
		// (found on a reload): believed, as a replay is, only with the
		// cluster's agreement. (A desired-state run is not asked: the next
		// run reads the cluster afresh whatever this one reports.)
		if err := confirmReplay(ctx, plan.Family, run); err != nil {
			return contradicted(res, err)
		}
		err = finish(res)
		res.Outcome = runOutcome(res.Outcome, eng, run)
		return res, err
	case err == nil, errors.As(err, &refused):
		err = finish(res)
		res.Outcome = runOutcome(res.Outcome, eng, run)
		return res, err
	case errors.As(err, &uncertain):
	case errors.As(err, &unavailable) && !run.Op.State.Terminal() && !hasCall(run):
		// Nothing was sent to the authority yet: a plain dependency failure.
		return res, err
	default:
		// The journal says where the operation stopped; a rerun resumes it
		// from there and settles it from the durable facts.
		err = &Uncertain{Reason: ReasonInterrupted, Err: err}
	}
	res.Outcome = OutcomeUncertain
	return res, err
}

// runOutcome is this run's word for an operation that ended completed
// (journaled outcome op), as docs/outcomes.md defines the words:
//   - completed when the operation's final call, sent by this run, was
//     answered applied: the write that makes the change is this run's (of
//     the concurrent runs of one command at most one sees it, the final
//     call being a compare-and-set or a create);
//   - else, when this run ended the operation or wrote part of it: the
//     journaled outcome, except that an operation whose final call this
//     run did not see applied is converged (its change was made by a call
//     of another run, or by one whose answer this run lost). An operation
//     with no final call (a credential plan) keeps its word: completed
//     when it wrote something;
//   - else existing: another run ended the operation while this one ran,
//     and this one wrote nothing.
//
// An operation that needed no write (existing) is existing for every run;
// any other ending (refused) keeps its word.
func runOutcome(op Outcome, e *engine, run *Run) Outcome {
	switch {
	case op != OutcomeCompleted && op != OutcomeConverged:
		return op
	case e.applied:
		return OutcomeCompleted
	case !e.ended && !e.wrote:
		return OutcomeExisting
	case hasFinalCall(run):
		return OutcomeConverged
	default:
		return op
	}
}

// hasFinalCall reports whether the operation journaled a final call.
func hasFinalCall(run *Run) bool {
	for _, r := range run.Records {
		if r.Kind == store.RecordAuthorityCall && r.Final {
			return true
		}
	}
	return false
}

// contradicted ends a run whose completed operation the cluster does not
// bear out (err is *Refused), or could not be read (*Unavailable). Nothing
// is appended (the operation is final) and nothing written; the journaled
// ending is not believed, so the run's Result carries no Run.
func contradicted(res *Result, err error) (*Result, error) {
	res.Run, res.Outcome = nil, ""
	var refused *Refused
	if errors.As(err, &refused) {
		res.Outcome = OutcomeRefused
	}
	return res, err
}

// finish sets the outcome of a terminal operation. A replay of a completed
// operation reports "existing": nothing was done this time.
func finish(res *Result) error {
	op := res.Run.Op
	switch op.State {
	case store.StateCompleted:
		res.Outcome = Outcome(op.Outcome)
		if res.Replayed {
			res.Outcome = OutcomeExisting
		}
		return nil
	case store.StateRefused:
		res.Outcome = OutcomeRefused
		return &Refused{Reason: op.Reason}
	default:
		return fmt.Errorf("operation ended in non-terminal state %s", op.State)
	}
}

// Ending returns the detail of the completion or refusal record, if any.
func (r *Run) Ending() store.Detail {
	for i := len(r.Records) - 1; i >= 0; i-- {
		if k := r.Records[i].Kind; k == store.RecordCompletion || k == store.RecordRefusal {
			return r.Records[i].Detail
		}
	}
	return store.Detail{}
}

func hasCall(run *Run) bool {
	_, ok := run.LastCall()
	return ok
}

// resolveDigest sets Prepare.CommandDigest from Digest, when set.
func (p *Plan) resolveDigest(ctx context.Context) error {
	if p.Digest == nil {
		return nil
	}
	d, err := p.Digest(ctx)
	if err != nil {
		return fmt.Errorf("computing the command digest: %w", err)
	}
	p.Prepare.CommandDigest = d
	return nil
}

// journalFailed types err, a failure met while the journal was read or
// written outside the engine's moves: a dependency's failure (cause.Of) is
// *Unavailable while nothing durable happened, *Uncertain (interrupted)
// once the operation is durable. Anything else (a broken invariant of
// keyledger's own, exit 1, or an error already typed) is returned as it is.
func journalFailed(err error, durable bool) error {
	if errors.As(err, new(*Refused)) || errors.As(err, new(*Uncertain)) || errors.As(err, new(*Unavailable)) {
		return err
	}
	c, ok := cause.Of(err)
	switch {
	case !ok:
		return err
	case durable:
		return &Uncertain{Reason: ReasonInterrupted, Err: err}
	default:
		return &Unavailable{Dependency: c.Dependency, Err: err}
	}
}
