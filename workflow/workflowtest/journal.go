package workflowtest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// Journal is an in-memory journal with the semantics store.Store has on
// PostgreSQL for everything workflow.Operate, workflow.DryRun and the engine
// use: Prepare, PrepareRun, Transition (a compare-and-set on state and
// revision, only along store.Edges, terminal moves with an outcome and
// their ending record, nothing appended to a finished operation), Snapshot,
// StepRecords, Runs, Load and Transactions. A move the database would
// refuse is refused here with an error carrying the same SQLSTATE
// (SQLState() string) and worded as store.Store words it, and changes
// nothing: each call is one transaction.
//
// Record details are stored as JSON and decoded afresh on every read, as
// the jsonb column does: a number comes back as float64 whatever type was
// written (an int written as 3 reads back as float64(3)), a []string as
// []any, and no caller can alias the journal's state through a map or a
// slice it passed in or got back. A call's Batch and Final are kept as
// the typed columns keep them: a record of another kind reads back batch 0,
// and a negative batch, or final on another kind, is refused. A detail PostgreSQL would refuse (a NUL
// character in a string, more than 16384 bytes as jsonb text) is refused.
//
// It is safe for concurrent use. It proves no PostgreSQL claim:
// TestIntegrationJournalEquivalence (integration/) runs the same sequence
// of moves against PostgreSQL and this journal and requires the same
// answers.
type Journal struct {
	mu     sync.Mutex
	ops    []*entry // in ID order
	byID   map[int64]*entry
	byMID  map[key]*entry // mutation IDs are unique within a namespace
	nextOp int64
	nextRe int64
	txs    int64
	closed bool
	last   time.Time
}

// key names an operation as the journal's unique key does (migration 12):
// its namespace and mutation ID.
type key struct{ namespace, mutationID string }

// entry is one operation and its records.
type entry struct {
	op      store.Operation
	records []stored
}

// stored is a record as the journal holds it (its detail is a
// store.Detail, canonical JSON, as PostgreSQL's jsonb reads back).
type stored struct {
	r store.Record
}

var _ workflow.Store = (*Journal)(nil)

// NewJournal returns an empty journal.
func NewJournal() *Journal {
	return &Journal{byID: map[int64]*entry{}, byMID: map[key]*entry{}}
}

// Close marks the journal closed, as closing store.Store's pool does:
// every later call fails with *store.UnreachableError. It is idempotent.
func (j *Journal) Close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
}

// Transactions is the number of transactions the journal has committed,
// counted as store.Store counts them: every Prepare, PrepareRun and
// Transition that succeeded (a Prepare that found its operation included);
// reads are not transactions.
func (j *Journal) Transactions() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.txs
}

// begin checks what store.Store checks before a transaction starts.
func (j *Journal) begin(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if j.closed {
		return &store.UnreachableError{Err: fmt.Errorf("%s: connection failed", what)}
	}
	return nil
}

// now is the transaction's time, at PostgreSQL's precision; like now() in
// PostgreSQL it is one value for everything one transaction writes.
func (j *Journal) now() time.Time {
	t := time.Now().UTC().Truncate(time.Microsecond)
	if !t.After(j.last) {
		t = j.last.Add(time.Microsecond)
	}
	j.last = t
	return t
}

// Prepare journals a new operation with its preparation record (created =
// true), or returns the operation already journaled under p.MutationID
// (created = false) when its command digest and kind are p's, and
// store.ErrDigestMismatch when they are not. Like the INSERT it mirrors, it
// checks p's columns before it looks for the mutation ID.
func (j *Journal) Prepare(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "beginning transaction"); err != nil {
		return nil, false, err
	}
	t := j.now()
	commit, op, created, err := j.prepareIn(p, t)
	if err != nil {
		return nil, false, err
	}
	commit()
	j.txs++
	return op, created, nil
}

// prepareIn checks a preparation and returns how to commit it (nothing to
// do when the operation exists) and the operation the caller gets.
func (j *Journal) prepareIn(p store.PrepareParams, t time.Time) (commit func(), op *store.Operation, created bool, err error) {
	if err := checkOperation(p); err != nil {
		return nil, nil, false, fmt.Errorf("inserting operation: %w", err)
	}
	prep := store.Record{Kind: store.RecordPreparation, Step: string(store.RecordPreparation), Digest: p.CommandDigest,
		UID: p.ExpectedUID, Detail: p.Detail}
	if e, ok := j.byMID[key{p.Namespace, p.MutationID}]; ok {
		if e.op.CommandDigest != p.CommandDigest || e.op.Kind != p.Kind {
			return nil, nil, false, store.ErrDigestMismatch
		}
		o := e.op
		return func() {}, &o, false, nil
	}
	e := &entry{op: store.Operation{
		ID: j.nextOp + 1, Kind: p.Kind, MutationID: p.MutationID, RequestID: p.RequestID, CommandDigest: p.CommandDigest,
		Namespace: p.Namespace, Name: p.Name, ExpectedUID: p.ExpectedUID, State: store.StatePrepared,
		CreatedAt: t, UpdatedAt: t,
	}}
	records, err := checkRecords(e, []store.Record{prep}, t)
	if err != nil {
		return nil, nil, false, err
	}
	o := e.op
	return func() {
		j.nextOp++
		e.records = records
		j.ops = append(j.ops, e)
		j.byID[e.op.ID], j.byMID[key{e.op.Namespace, e.op.MutationID}] = e, e
		j.stamp(e.records)
	}, &o, true, nil
}

// stamp gives the records appended last their IDs.
func (j *Journal) stamp(records []stored) {
	for i := range records {
		if records[i].r.ID == 0 {
			j.nextRe++
			records[i].r.ID = j.nextRe
		}
	}
}

// PrepareRun journals one run of a desired-state command as store.PrepareRun
// does: the command's newest run (or an operation journaled under its own
// mutation ID, run 0) is resumed while it is not terminal (created =
// false); after a terminal one, or none, run n+1 ("<mutationId>:run-<n+1>")
// is prepared with "command" and "run" added to its preparation detail. A
// newest run of another kind or command digest is store.ErrDigestMismatch.
func (j *Journal) PrepareRun(ctx context.Context, p store.PrepareParams) (*store.Operation, bool, error) {
	if len(p.MutationID)+len(store.RunSuffix)+store.MaxRunNumberDigits > 128 {
		return nil, false, fmt.Errorf("mutation ID of a command run as a series is longer than %d characters",
			128-len(store.RunSuffix)-store.MaxRunNumberDigits)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "beginning transaction"); err != nil {
		return nil, false, err
	}
	if err := checkText(p.MutationID); err != nil {
		return nil, false, fmt.Errorf("reading the command's runs: %w", err)
	}
	t := j.now()
	var lineage store.RunLineage
	var latestOp *store.Operation
	if latest := j.latestRun(p.Namespace, p.MutationID); latest != nil {
		if latest.op.Kind != p.Kind || latest.op.Namespace != p.Namespace || latest.op.Name != p.Name {
			return nil, false, store.ErrDigestMismatch
		}
		var resumed *store.Operation
		if resumed, lineage = j.settleLatest(latest, p, t); resumed != nil {
			j.txs++
			return resumed, false, nil
		}
		latestOp = &latest.op
	}
	commit, op, created, err := j.prepareIn(store.RunPreparation(p, store.NextRun(p.MutationID, latestOp), lineage), t)
	if err != nil {
		return nil, false, err
	}
	commit()
	j.txs++
	return op, created, nil
}

// settleLatest decides, as store.PrepareRun does, what becomes of latest,
// the command's newest run (of p's kind and target): resumed is set when
// it goes on (continueRun); otherwise it stays as it ended, or is closed
// (superseded by p's other digest, or past p.Bound: closeRun), and
// lineage is what the next run's preparation names.
func (j *Journal) settleLatest(latest *entry, p store.PrepareParams, t time.Time) (resumed *store.Operation, lineage store.RunLineage) {
	closing := ""
	switch {
	case latest.op.CommandDigest != p.CommandDigest:
		lineage.Supersedes = latest.op.CommandDigest
		if !latest.op.State.Terminal() {
			closing = store.ReasonPlanSuperseded
		}
	case latest.op.State.Terminal():
	default:
		if resumed, closing = j.continueRun(latest, p.Bound, t); resumed != nil {
			return resumed, lineage
		}
	}
	if closing != "" {
		j.closeRun(latest, t, closing)
		if closing != store.ReasonPlanSuperseded {
			lineage.Replaces, lineage.ReplacedBecause = latest.op.MutationID, closing
		}
	}
	return nil, lineage
}

// continueRun resumes latest, unfinished, with its next resume record
// (store.StepResumeRun), unless bound says it has been resumed or has
// lived long enough: then closing is the reason to close it.
func (j *Journal) continueRun(latest *entry, bound store.RunBound, t time.Time) (resumed *store.Operation, closing string) {
	resumes := 0
	for _, r := range latest.records {
		if r.r.Kind == store.RecordObservation && r.r.Step == store.StepResumeRun {
			resumes++
		}
	}
	if closing = exceeded(bound, resumes, t.Sub(latest.op.CreatedAt)); closing != "" {
		return nil, closing
	}
	j.append(latest, t, store.Record{Kind: store.RecordObservation, Step: store.StepResumeRun,
		Detail: store.DetailOf(store.ResumeDetail{Resume: resumes + 1})})
	o := latest.op
	return &o, ""
}

// closeRun ends the unfinished run e, refused with reason, with its
// refusal record (store.StepCloseRun).
func (j *Journal) closeRun(e *entry, t time.Time, reason string) {
	e.op.State, e.op.Outcome, e.op.Reason = store.StateRefused, "refused", reason
	final := t
	e.op.FinalizedAt = &final
	j.append(e, t, store.Record{Kind: store.RecordRefusal, Step: store.StepCloseRun, Reason: store.Reason(reason),
		Detail: store.DetailOf(store.CloseRunDetail{Outcome: "refused", Reason: reason})})
}

// latestRun is the newest run of command id as store.PrepareRun finds it:
// the highest run number; the operation under id itself only when there
// is no run.
func (j *Journal) latestRun(ns, id string) *entry {
	var latest *entry
	var best int64
	for _, e := range j.runs(ns, id) {
		if _, n, ok := store.SplitRunID(e.op.MutationID); ok && e.op.MutationID != id && n > best {
			latest, best = e, n
		}
	}
	if latest == nil {
		latest = j.byMID[key{ns, id}]
	}
	return latest
}

// append adds r to e as one move in its state (the revision moves on).
func (j *Journal) append(e *entry, t time.Time, r store.Record) {
	r.CreatedAt = t
	e.records = append(e.records, stored{r: r})
	e.op.Revision++
	e.op.UpdatedAt = t
	j.stamp(e.records)
}

// exceeded mirrors store.RunBound's check.
func exceeded(b store.RunBound, resumes int, age time.Duration) string {
	switch {
	case b.MaxResumes > 0 && resumes >= b.MaxResumes:
		return store.ReasonRunResumeLimit
	case b.MaxAge > 0 && age > b.MaxAge:
		return store.ReasonRunAgeLimit
	}
	return ""
}

// runs are the operations of command id in namespace ns (any namespace
// when ns is empty: store.Runs' filter), oldest first.
func (j *Journal) runs(ns, id string) []*entry {
	pattern := regexp.MustCompile("^" + regexp.QuoteMeta(id) + regexp.QuoteMeta(store.RunSuffix) + "[1-9][0-9]{0,9}$")
	var out []*entry
	for _, e := range j.ops {
		if ns != "" && e.op.Namespace != ns {
			continue
		}
		if e.op.MutationID == id || pattern.MatchString(e.op.MutationID) {
			out = append(out, e)
		}
	}
	return out
}

// Runs returns every run of the command whose mutation ID is id (and an
// operation journaled under id itself), oldest first.
func (j *Journal) Runs(ctx context.Context, id string) ([]*store.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "listing runs"); err != nil {
		return nil, err
	}
	if err := checkText(id); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	out := []*store.Operation{}
	for _, e := range j.runs("", id) {
		o := e.op
		out = append(out, &o)
	}
	return out, nil
}

// LatestRun returns the newest run of the command whose mutation ID is id
// in namespace ns (or an operation journaled under id itself), as
// store.Store.LatestRun: store.ErrNotFound when there is none.
func (j *Journal) LatestRun(ctx context.Context, ns, id string) (*store.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "reading the command's newest run"); err != nil {
		return nil, err
	}
	if err := firstErr(checkText(ns), checkText(id)); err != nil {
		return nil, fmt.Errorf("reading the command's newest run: %w", err)
	}
	e := j.latestRun(ns, id)
	if e == nil {
		return nil, store.ErrNotFound
	}
	o := e.op
	return &o, nil
}

// lookup is the operation under id in namespace ns (any namespace when ns
// is empty), as store's loadIn finds it: store.ErrNotFound, or a
// store.PreconditionError (store.ReasonMutationIDAmbiguous) when ns is
// empty and two namespaces hold id.
func (j *Journal) lookup(ns, id string) (*entry, error) {
	if ns != "" {
		if e, ok := j.byMID[key{ns, id}]; ok {
			return e, nil
		}
		return nil, store.ErrNotFound
	}
	var found *entry
	for _, e := range j.ops {
		if e.op.MutationID != id {
			continue
		}
		if found != nil {
			return nil, &store.PreconditionError{Reason: store.ReasonMutationIDAmbiguous,
				Msg: fmt.Sprintf("mutation ID %q is journaled in more than one namespace", id), Fix: "name the namespace (--namespace)"}
		}
		found = e
	}
	if found == nil {
		return nil, store.ErrNotFound
	}
	return found, nil
}

// Transition commits a move and its records, as store.Store.Transition:
// store.ErrStateMoved unless the operation is in p.From at p.Revision
// (also when no operation has p.OperationID); then, as the journal's
// triggers and constraints would, it refuses any move from a terminal
// state, a move that is not one of store.Edges (From == To appends without
// moving, on a non-terminal state), a terminal move without an outcome or
// without its ending record (completion for completed, refusal for
// refused), an outcome on a non-terminal move, an ending record without
// that move, and any record the records table would refuse. Every commit
// bumps the revision, a From == To one included.
func (j *Journal) Transition(ctx context.Context, p store.TransitionParams) (*store.Operation, error) {
	if p.To.Terminal() && p.Outcome == "" {
		return nil, fmt.Errorf("transition to %s needs an outcome", p.To)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "beginning transaction"); err != nil {
		return nil, err
	}
	moving := fmt.Sprintf("moving operation %s -> %s", p.From, p.To)
	if err := firstErr(checkState(p.From), checkState(p.To), checkText(p.Outcome), checkText(p.Reason)); err != nil {
		return nil, fmt.Errorf("%s: %w", moving, err)
	}
	e, ok := j.byID[p.OperationID]
	if !ok || e.op.State != p.From || e.op.Revision != p.Revision {
		return nil, store.ErrStateMoved
	}
	if e.op.State.Terminal() {
		return nil, fmt.Errorf("%s: %w", moving, raised(sqlInsufficientPrivilege))
	}
	if p.From != p.To && !slices.Contains(store.Edges(), store.Edge{From: p.From, To: p.To}) {
		return nil, fmt.Errorf("%s: %w", moving, raised(sqlCheckViolation))
	}
	if err := checkMove(p); err != nil {
		return nil, fmt.Errorf("%s: %w", moving, err)
	}
	t := j.now()
	records, err := checkRecords(e, p.Records, t)
	if err != nil {
		return nil, err
	}
	// The deferred checks, at commit: the move to a terminal state needs
	// its ending record, and an ending record needs that move.
	if p.To.Terminal() && !slices.ContainsFunc(records, func(s stored) bool { return s.r.Kind == ending(p.To) }) {
		return nil, fmt.Errorf("committing transaction: %w", raised(sqlIntegrityConstraintViolation))
	}
	for _, s := range records[len(e.records):] {
		if (s.r.Kind == store.RecordCompletion || s.r.Kind == store.RecordRefusal) && ending(p.To) != s.r.Kind {
			return nil, fmt.Errorf("committing transaction: %w", raised(sqlIntegrityConstraintViolation))
		}
	}
	e.op.State, e.op.Outcome, e.op.Reason = p.To, p.Outcome, p.Reason
	e.op.Revision++
	e.op.UpdatedAt = t
	e.op.FinalizedAt = nil
	if p.To.Terminal() {
		final := t
		e.op.FinalizedAt = &final
	}
	e.records = records
	j.stamp(e.records)
	j.txs++
	o := e.op
	return &o, nil
}

// ending is the record kind a terminal state needs.
func ending(s store.State) store.RecordKind {
	switch s {
	case store.StateCompleted:
		return store.RecordCompletion
	case store.StateRefused:
		return store.RecordRefusal
	}
	return ""
}

// Load returns the operation with the given mutation ID in namespace ns
// (any when empty), or store.ErrNotFound.
func (j *Journal) Load(ctx context.Context, ns, mutationID string) (*store.Operation, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "loading operation"); err != nil {
		return nil, err
	}
	if err := checkText(mutationID); err != nil {
		return nil, fmt.Errorf("loading operation: %w", err)
	}
	e, err := j.lookup(ns, mutationID)
	if err != nil {
		return nil, err
	}
	o := e.op
	return &o, nil
}

// Snapshot returns a copy of an operation of namespace ns (any when
// empty) and of its records in append order, or store.ErrNotFound.
func (j *Journal) Snapshot(ctx context.Context, ns, mutationID string) (*store.Operation, []store.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.begin(ctx, "beginning snapshot"); err != nil {
		return nil, nil, err
	}
	if err := checkText(mutationID); err != nil {
		return nil, nil, fmt.Errorf("loading operation: %w", err)
	}
	e, err := j.lookup(ns, mutationID)
	if err != nil {
		return nil, nil, err
	}
	o := e.op
	records := make([]store.Record, 0, len(e.records))
	for _, s := range e.records {
		records = append(records, s.record())
	}
	return &o, records, nil
}

// StepRecords returns, as store.Store.StepRecords, the records of p.Step on
// each of p.Targets of every operation on p.Namespace/p.Name holding an
// authority_call of p.Step on that target whose UID is p.CallUID, grouped
// by operation (oldest first), each group in append order; nil when there
// is none (and when p.Targets is empty, before anything is checked, as the
// store sends nothing then).
func (j *Journal) StepRecords(ctx context.Context, p store.StepRecordsParams) ([][]store.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	what := "reading " + p.Step + " records"
	if len(p.Targets) > store.MaxStepTargets {
		return nil, fmt.Errorf("%s: %d targets, at most %d", what, len(p.Targets), store.MaxStepTargets)
	}
	if len(p.Targets) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if j.closed {
		return nil, fmt.Errorf("%s: connection failed", what)
	}
	errs := []error{checkText(p.Namespace), checkText(p.Name), checkText(p.Step), checkText(p.CallUID)}
	for _, t := range p.Targets {
		errs = append(errs, checkText(t))
	}
	if err := firstErr(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out [][]store.Record
	for _, e := range j.ops {
		if e.op.Namespace != p.Namespace || e.op.Name != p.Name {
			continue
		}
		bound := map[string]bool{}
		for _, s := range e.records {
			if s.r.Kind == store.RecordAuthorityCall && s.r.Step == p.Step && s.r.UID == p.CallUID && slices.Contains(p.Targets, s.r.Target.String()) {
				bound[s.r.Target.String()] = true
			}
		}
		var group []store.Record
		for _, s := range e.records {
			if s.r.Step == p.Step && bound[s.r.Target.String()] {
				group = append(group, s.record())
			}
		}
		if group != nil {
			out = append(out, group)
		}
	}
	return out, nil
}

// record returns a copy of s (a store.Detail is immutable).
func (s stored) record() store.Record { return s.r }

// firstErr returns the first error that is not nil: PostgreSQL reports
// the first parameter or constraint that fails.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// FindInRuns returns, as store.Store.FindInRuns, the newest record of
// p.Kind, p.Step and p.Target (carrying p.UID and p.Digest when they are
// not empty) in any run of command p.Command, with that run's mutation ID;
// nil when there is none.
func (j *Journal) FindInRuns(ctx context.Context, p store.RunRecordParams) (*store.RunRecord, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	what := "reading the command's runs for " + p.Step + " records"
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if j.closed {
		return nil, fmt.Errorf("%s: connection failed", what)
	}
	if err := firstErr(checkText(p.Command), checkText(p.Step), checkText(p.Target), checkText(p.UID), checkText(p.Digest), checkText(p.Except)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var found *store.RunRecord
	for _, e := range j.runs(p.Namespace, p.Command) {
		if p.Except != "" && e.op.MutationID == p.Except {
			continue
		}
		for _, s := range e.records {
			r := s.r
			if r.Kind != p.Kind || r.Step != p.Step || r.Target.String() != p.Target ||
				p.UID != "" && r.UID != p.UID || p.Digest != "" && r.Digest != p.Digest {
				continue
			}
			if found == nil || r.ID > found.Record.ID {
				found = &store.RunRecord{Run: e.op.MutationID, Record: s.record()}
			}
		}
	}
	return found, nil
}

// FindEachInRuns answers FindInRuns for each of ps, in order, as
// store.Store.FindEachInRuns (one batch there); the first failing question
// fails the batch.
func (j *Journal) FindEachInRuns(ctx context.Context, ps []store.RunRecordParams) ([]*store.RunRecord, error) {
	out := make([]*store.RunRecord, len(ps))
	for i, p := range ps {
		found, err := j.FindInRuns(ctx, p)
		if err != nil {
			return nil, err
		}
		out[i] = found
	}
	return out, nil
}
