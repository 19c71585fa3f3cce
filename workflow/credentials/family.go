package credentials

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// Step names: the journal's words for each call (and the prefix of each target).
const (
	stepOrphanExternalSecret = "orphan-external-secret"
	stepDeleteGenerator      = "delete-generator"
	stepCreateSecret         = "create-secret"
	stepPatchSecret          = "patch-secret"
	stepDeletePod            = "delete-pod"
	stepProbe                = "probe-server"
	stepReadGenerator        = "read-generator"
)

// Observation steps: the journal's words for reads that decide.
const (
	stepReadExternalSecrets = "read-external-secrets"
	stepReadExternalSecret  = "read-external-secret"
	stepWaitExternalGone    = "wait-external-secret-gone"
	stepReadSecret          = "read-secret"
	stepReadSecrets         = "read-secrets"
)

// Observation statuses: what a read found, the status of its record.
const (
	statusPresent  store.Status = "present"
	statusAbsent   store.Status = "absent"
	statusChecked  store.Status = "checked"
	statusGone     store.Status = "gone"
	statusReady    store.Status = "ready"
	statusNotReady store.Status = "not-ready"
	statusComplete store.Status = "complete"
)

// Reasons, stable kebab-case words.
const (
	ReasonNotGeneratorBacked  = "external-secret-not-generator-backed"
	ReasonTargetMismatch      = "external-secret-target-mismatch"
	ReasonExternalReplaced    = "external-secret-replaced"
	ReasonExternalNotGone     = "external-secret-not-gone"
	ReasonSecretTerminating   = "secret-terminating"
	ReasonSecretWrongType     = "secret-wrong-type"
	ReasonSecretImmutable     = "secret-immutable"
	ReasonSecretDeleted       = "secret-deleted-concurrently"
	ReasonServerStillRefuses  = "server-still-refuses"
	ReasonReplacementNotReady = "replacement-not-ready"
	ReasonProbeUnknown        = "probe-unknown"
	ReasonServerNotOwned      = "server-not-owned"
	ReasonSecretUnproven      = "secret-unproven"
)

// Record reasons: why an answer, resolution or probe came out as it did,
// the reason of its record.
const (
	reasonCreated              store.Reason = "created"
	reasonAlreadyExists        store.Reason = "already-exists"
	reasonCreatedByThis        store.Reason = "created-by-this-mutation"
	reasonKeptExisting         store.Reason = "kept-existing"
	reasonTestFailed           store.Reason = "test-failed"
	reasonAbsent               store.Reason = "absent"
	reasonSecretComplete       store.Reason = "complete"
	reasonResourceVersionMoved store.Reason = "resource-version-changed"
	reasonPreconditionFailed   store.Reason = "precondition-failed"
	reasonReplacedNotDeleted   store.Reason = "replaced-not-deleted"
)

// waitBound bounds each wait (an ExternalSecret gone, a replacement pod
// ready); waitPoll is how often it looks.
const (
	waitBound = 2 * time.Minute
	waitPoll  = 100 * time.Millisecond
)

// reprobeBound bounds how long a probe whose server could not be reached
// (refused connection, timeout, reset: ProbeResult.unreachable) is sent
// again; reprobePoll is how often. A server is often Ready before the
// network lets the hook reach it: a restarted server's new address is
// allowed by the hook's NetworkPolicy only once the node's policy agent
// has seen the new pod. The bound keeps a server that is never reachable
// from holding every sync for longer than this.
const (
	reprobeBound = 20 * time.Second
	reprobePoll  = 250 * time.Millisecond
)

// authority is the family's whole view of the API server: exactly the
// methods of kube.Credentials it calls. Unit tests put a scripted double
// behind it; a run always has the real adapter (Plan).
type authority interface {
	GetSecret(ctx context.Context, name string) (*corev1.Secret, error)
	CreateSecret(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
	PatchSecret(ctx context.Context, name string, patch []byte) (*corev1.Secret, error)
	GetExternalSecret(ctx context.Context, name string) (*unstructured.Unstructured, error)
	OrphanExternalSecret(ctx context.Context, name string, uid types.UID, resourceVersion string) error
	GetPasswordGenerator(ctx context.Context, name string) (*unstructured.Unstructured, error)
	DeletePasswordGenerator(ctx context.Context, name string, uid types.UID, resourceVersion string) error
	GetPod(ctx context.Context, name string) (*corev1.Pod, error)
	DeletePod(ctx context.Context, name string, uid types.UID) error
	GetStatefulSet(ctx context.Context, name string) (*appsv1.StatefulSet, error)
}

var _ authority = (*kube.Credentials)(nil)

// prober checks a server's credentials at addr: Probe in a run, a script
// in unit tests.
type prober func(ctx context.Context, protocol, addr string, user, password []byte) ProbeResult

// waiter polls cond until it is done, fails, or the wait's bound passes
// (done false, no error): poll in a run; unit tests poll a fixed number of
// times without sleeping.
type waiter func(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error)

// family implements workflow.Family for one credential plan. It holds no
// memory between decisions: each Decide and each Resolve folds what it
// knows from the journal (progress) and reads the authority again for the
// rest.
type family struct {
	cmd   *Command
	kube  authority
	probe prober
	poll  waiter
	// reprobe is the waiter of a probe sent again (reprobeBound).
	reprobe waiter
	// random is where values and nonces come from: crypto/rand.
	random io.Reader
	// journal reads the records of the plan's other runs (authorship); it
	// is bound before the first decision (BindJournal).
	journal workflow.JournalReader
	// prefetched is the first decision's round of reads, when prefetch
	// started it (a run; unit tests call Operate and read in Decide).
	prefetched *prefetched
}

func newFamily(cmd *Command, client authority) *family {
	return &family{cmd: cmd, kube: client, probe: Probe, poll: bounded(waitBound, waitPoll),
		reprobe: bounded(reprobeBound, reprobePoll), random: rand.Reader}
}

// steps are a plan's phases, in order (workflow.Step), each named with the
// journal's word for the first thing it reads or writes.
func (f *family) steps() []workflow.Step[*progress] {
	return []workflow.Step[*progress]{
		noted(f.readExternalSecrets),  // read the ExternalSecret of every planned Secret; one not generator-backed refuses before any write
		noted(f.orphanExternalSecret), // delete each with propagationPolicy Orphan, wait until it is gone
		noted(f.deleteGenerator),      // delete the retired Password generators
		noted(f.createSecret),         // create each Secret, or patch in only what an existing one lacks
		noted(f.probeServer),          // probe each server; delete a refusing pod once, wait, probe again
	}
}

// noted stops the steps at the first record a step noted that does not
// fold (progress.err), as at an error of the step's own.
func noted(s workflow.Step[*progress]) workflow.Step[*progress] {
	return func(ctx context.Context, p *progress) (*workflow.Decision, error) {
		d, err := s(ctx, p)
		if err == nil {
			err = p.err
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

// Decide walks the phases in order and returns the first thing left to do,
// with the records the phases noted on the way (reads, probes).
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	p, err := fold(run)
	if err != nil {
		return workflow.Decision{}, err
	}
	d, err := workflow.RunSteps(ctx, p, f.steps())
	switch {
	case err != nil:
		return workflow.Decision{}, err
	case d == nil:
		return workflow.Decision{Notes: p.notes, Complete: &workflow.Completion{Outcome: p.outcome(), Summary: f.summary(p)}}, nil
	}
	return p.withNotes(d), nil
}

// withNotes is a step's decision d as the run journals it: after the
// records the steps noted on the way, a refusal's summary naming the run.
func (p *progress) withNotes(d *workflow.Decision) workflow.Decision {
	if d.Refuse != nil {
		d.Refuse.Summary = withRun(p.run, d.Refuse.Summary)
	}
	d.Notes = append(p.notes, d.Notes...)
	return *d
}

// note keeps r to journal with this decision, and folds it in: the rest of
// the decision knows it as the next decisions will, from the journal.
func (p *progress) note(r store.Record) {
	p.notes = append(p.notes, r)
	if err := p.observe(r); err != nil && p.err == nil {
		p.err = err
	}
}

// end ends the run with err (uncertain, unavailable) once the records
// noted so far are journaled (workflow.Decision.End).
func end(err error) (*workflow.Decision, error) { return &workflow.Decision{End: err}, nil }

// Resolve re-reads the durable facts after a call whose outcome is unknown.
func (f *family) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	p, err := fold(run)
	if err != nil {
		return workflow.Verdict{}, err
	}
	v, err := f.resolve(ctx, p, call)
	if v.Kind == workflow.Theirs {
		v.Summary = withRun(p.run, v.Summary)
	}
	return v, err
}

func (f *family) resolve(ctx context.Context, p *progress, call store.Record) (workflow.Verdict, error) {
	name := call.Target.Name
	switch call.Step {
	case stepCreateSecret:
		return f.resolveCreate(ctx, p, name, call)
	case stepPatchSecret:
		return f.resolvePatch(ctx, p, name, call)
	case stepOrphanExternalSecret:
		return f.resolveOrphan(ctx, name, call)
	case stepDeleteGenerator:
		return f.resolveDeleteGenerator(ctx, name, call)
	case stepDeletePod:
		return f.resolveDeletePod(ctx, name, call)
	}
	return workflow.Verdict{}, errors.New("resolving an unknown step " + call.Step)
}

// progress is what the journal says, folded from every record of the
// operation on every Decide and Resolve, so a resumed, reloaded or
// concurrent run knows it; a decision's own notes are folded in as it
// makes them. It lives for one decision.
type progress struct {
	run       string         // the operation's mutation ID
	namespace string         // the operation's namespace
	records   []store.Record // the operation's records
	notes     []store.Record // this decision's records, journaled with it
	err       error          // the first noted record whose detail did not decode

	// Calls settled as done (workflow.Run.Settled), by object name.
	created, exists, patched map[string]bool // Secrets
	externalDeleted          map[string]bool
	generatorsDeleted        map[string]store.Reason // name -> reason (deleted or absent)
	podDeleted               map[string]bool
	// Calls sent, settled or not: the UID each newest one named.
	orphanUID     map[string]string // ExternalSecret -> UID its orphan delete named
	podDeletedUID map[string]string // pod -> UID whose delete was called

	// Observations.
	adoptChecked bool            // the ExternalSecrets were read before any write
	found        map[string]bool // ExternalSecrets that read found (generator-backed)
	externalGone map[string]bool // ExternalSecrets seen gone
	complete     map[string]bool // Secrets whose newest read found nothing lacking
	// fresh: Secrets settled (created, patched, found complete) since the
	// run was last resumed (store.StepResumeRun); the others are read again.
	fresh  map[string]bool
	probes map[string]ProbeResult
	// notOwned: the check each server pod failed whose newest probe
	// record says server-not-owned.
	notOwned map[string]string
	// early: the reads of the unsettled planned Secrets (progress.unsettled)
	// that readExternalSecrets made in this decision alongside the ExternalSecret
	// reads, kept only when it found no ExternalSecret; createSecret
	// decides from them instead of reading again.
	early []secretRead
	// authorship of each planned Secret, as this run journaled it (the
	// create's applied answer, or the resolution of its 409).
	authorship map[string]Authorship
	by         map[string]string // the run that proved it, when known
	// restarts: each pod whose delete this run called, with the Secret
	// and the authorship its call record names.
	restarts map[string]restart
}

// restart is what a delete-pod call record says the restart followed.
type restart struct {
	Secret     string
	Authorship Authorship
}

// fold reads the run's records: settlement through workflow.Run.Settled,
// observations and probes in journal order (the newest wins).
func fold(run *workflow.Run) (*progress, error) {
	p := &progress{
		run: run.Op.MutationID, namespace: run.Op.Namespace, records: run.Records,
		created: map[string]bool{}, exists: map[string]bool{}, patched: map[string]bool{},
		externalDeleted: map[string]bool{}, generatorsDeleted: map[string]store.Reason{}, podDeleted: map[string]bool{},
		orphanUID: map[string]string{}, podDeletedUID: map[string]string{},
		found: map[string]bool{}, externalGone: map[string]bool{}, complete: map[string]bool{}, probes: map[string]ProbeResult{},
		notOwned:   map[string]string{},
		authorship: map[string]Authorship{}, by: map[string]string{}, restarts: map[string]restart{}, fresh: map[string]bool{},
	}
	resumed := -1
	for i, r := range run.Records {
		if r.Kind == store.RecordObservation && r.Step == store.StepResumeRun {
			resumed = i
		}
	}
	called := map[[2]string]bool{}
	for i, r := range run.Records {
		if err := p.observe(r); err != nil {
			return nil, err
		}
		if i > resumed {
			if err := p.freshen(r); err != nil {
				return nil, err
			}
		}
		if r.Kind != store.RecordAuthorityCall || called[[2]string{r.Step, r.Target.String()}] {
			continue
		}
		called[[2]string{r.Step, r.Target.String()}] = true
		if s, ok := run.Settled(r.Step, r.Target); ok {
			if err := p.settled(s); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// nameOf is the name of the object r's target names ("" for none). It no
// longer fails (the journal reads back only targets that parse); the
// error stays so that its callers stay as they are.
func (p *progress) nameOf(r store.Record) (string, error) {
	return r.Target.Name, nil
}

// settled records a call settled as done.
func (p *progress) settled(s workflow.Settlement) error {
	name, err := p.nameOf(s.Call)
	if err != nil {
		return err
	}
	switch s.Call.Step {
	case stepCreateSecret:
		if s.By.Reason == reasonKeptExisting {
			p.exists[name] = true
		} else {
			p.created[name] = true
		}
	case stepPatchSecret:
		p.patched[name] = true
	case stepOrphanExternalSecret:
		p.externalDeleted[name] = true
	case stepDeleteGenerator:
		p.generatorsDeleted[name] = s.By.Reason
		if s.By.Reason == reasonReplacedNotDeleted {
			p.generatorsDeleted[name] = "deleted"
		}
	case stepDeletePod:
		p.podDeleted[name] = true
	}
	return nil
}

// freshen marks what r settles as settled since the run was last resumed.
func (p *progress) freshen(r store.Record) error {
	name, err := p.nameOf(r)
	if err != nil {
		return err
	}
	settles := workflow.Settles(r)
	switch {
	case settles && r.Step == stepCreateSecret && r.Reason == reasonKeptExisting:
		d, err := detailOf[secretDetail](r)
		p.fresh[name] = d.complete() // kept: settled once nothing is lacking
		return err
	case settles && (r.Step == stepCreateSecret || r.Step == stepPatchSecret):
		p.fresh[name] = true
	case r.Kind == store.RecordObservation && r.Step == stepReadSecret:
		d, err := detailOf[secretDetail](r)
		if d.complete() {
			p.fresh[name] = true
		}
		return err
	case r.Kind == store.RecordObservation && r.Step == stepReadSecrets:
		d, err := detailOf[chunkDetail](r)
		for n := range d.Complete {
			p.fresh[n] = true
		}
		return err
	}
	return nil
}

// observe folds one record's facts other than settlement.
func (p *progress) observe(r store.Record) error {
	name, err := p.nameOf(r)
	if err != nil {
		return err
	}
	switch r.Kind {
	case store.RecordAuthorityCall:
		err = p.observeCall(name, r)
	case store.RecordObservation:
		err = p.observeRead(name, r)
	case store.RecordResolution:
		if r.Step == stepCreateSecret && r.Reason == reasonKeptExisting {
			err = p.observeSecret(name, r)
		}
	case store.RecordProbe:
		if r.Step == stepProbe {
			err = p.observeProbe(name, r)
		}
	}
	if err != nil {
		return err
	}
	if r.Step == stepCreateSecret && (r.Kind == store.RecordAuthorityResult || r.Kind == store.RecordResolution) {
		return p.observeCreate(name, r)
	}
	return nil
}

// observeCall folds a call sent: the UID a pod's delete named and what its
// restart followed, the UID an ExternalSecret's orphan delete named.
func (p *progress) observeCall(name string, r store.Record) error {
	switch r.Step {
	case stepDeletePod:
		d, err := detailOf[deletePodDetail](r)
		if err != nil {
			return err
		}
		p.podDeletedUID[name] = r.UID
		p.restarts[name] = restart{Secret: d.Secret, Authorship: d.Authorship}
	case stepOrphanExternalSecret:
		p.orphanUID[name] = r.UID
	}
	return nil
}

// observeRead folds a read that decides: a generator found absent, the
// ExternalSecrets read (present, absent, gone), a planned Secret read
// alone or with others (read-secrets).
func (p *progress) observeRead(name string, r store.Record) error {
	switch {
	case r.Step == stepReadGenerator && r.Status == statusAbsent:
		p.generatorsDeleted[name] = reasonAbsent
	case r.Step == stepReadExternalSecrets:
		p.adoptChecked = true
	case r.Step == stepReadExternalSecret && r.Status == statusPresent:
		p.found[name] = true
	case r.Step == stepReadExternalSecret && r.Status == statusAbsent, r.Step == stepWaitExternalGone:
		p.externalGone[name] = true
	case r.Step == stepReadSecret:
		return p.observeSecret(name, r)
	case r.Step == stepReadSecrets:
		return p.observeSecrets(r)
	}
	return nil
}

// observeSecret folds what a read of one Secret showed, or the resolution
// that kept it as found: it exists, whether it lacks anything, and its
// authorship when the record carries one.
func (p *progress) observeSecret(name string, r store.Record) error {
	d, err := detailOf[secretDetail](r)
	if err != nil {
		return err
	}
	p.complete[name] = d.complete()
	p.exists[name] = true
	if d.Authorship != "" {
		p.authorship[name] = d.Authorship
	}
	return nil
}

// observeSecrets folds a read-secrets record: the Secrets of its chunk
// found complete, each with its authorship.
func (p *progress) observeSecrets(r store.Record) error {
	d, err := detailOf[chunkDetail](r)
	if err != nil {
		return err
	}
	for n, e := range d.Complete {
		p.complete[n], p.exists[n] = true, true
		if e.Authorship != "" {
			p.authorship[n], p.by[n] = e.Authorship, e.By
		}
	}
	return nil
}

// observeProbe folds a server's probe: its newest answer, and the check
// its pod failed when it was not tied to its controller.
func (p *progress) observeProbe(name string, r store.Record) error {
	p.probes[name] = ProbeResult{Status: r.Status, Reason: r.Reason}
	delete(p.notOwned, name)
	if r.Reason == ReasonServerNotOwned {
		d, err := detailOf[probeDetail](r)
		if err != nil {
			return err
		}
		p.notOwned[name] = d.NotOwned
	}
	return nil
}

// observeCreate folds the authorship a create's answer or resolution
// carries, and which run proved it.
func (p *progress) observeCreate(name string, r store.Record) error {
	d, err := detailOf[secretDetail](r)
	if err != nil {
		return err
	}
	if d.Authorship == "" && workflow.AppliedResult(r) {
		// An applied create is this run's: proven, whatever its answer
		// carries (Send's says so; a create held back and taken as
		// applied, as keyledger plan takes it, carries nothing).
		d.Authorship = AuthorshipProven
	}
	if d.Authorship != "" {
		p.authorship[name], p.by[name] = d.Authorship, d.By
		if r.Kind == store.RecordAuthorityResult {
			p.by[name] = p.run
		}
	}
	return nil
}

// outcome is existing when this operation wrote nothing at all.
func (p *progress) outcome() workflow.Outcome {
	writes := len(p.created) + len(p.patched) + len(p.externalDeleted) + len(p.podDeleted)
	for _, reason := range p.generatorsDeleted {
		if reason != reasonAbsent {
			writes++
		}
	}
	if writes == 0 {
		return workflow.OutcomeExisting
	}
	return workflow.OutcomeCompleted
}

// summary is the content-free completion summary: counts and names, all
// from the journal (the servers from each pod's newest probe record).
func (f *family) summary(p *progress) store.Detail {
	s := f.cmd.Spec
	generators := 0
	for _, reason := range p.generatorsDeleted {
		if reason != reasonAbsent {
			generators++
		}
	}
	servers := map[ProbeStatus]int{}
	repaired := 0
	restarts := []restartSummary{}
	for _, srv := range s.Servers {
		r := p.probes[srv.Pod]
		servers[r.Status]++
		if p.podDeleted[srv.Pod] && r.Status == ProbeAccepted {
			repaired++
		}
		if rs, ok := p.restarts[srv.Pod]; ok {
			restarts = append(restarts, restartSummary{Pod: srv.Pod, Secret: rs.Secret, Authorship: rs.Authorship})
		}
	}
	authorship, unproven := p.authorshipOf(s)
	existing := 0
	for name := range p.exists {
		if !p.created[name] {
			existing++
		}
	}
	out := completionSummary{
		Namespace: s.Namespace, Owner: s.Owner, Run: p.run,
		Secrets: secretCounts{
			Planned: len(s.Secrets), Created: len(p.created), Patched: len(p.patched), Existing: existing,
			Unchanged: len(s.Secrets) - len(p.created) - len(p.patched), Unproven: unproven,
		},
		Authored:               authorship,
		ExternalSecretsDeleted: len(p.externalDeleted), GeneratorsDeleted: generators,
	}
	if len(s.Servers) > 0 {
		out.ServerSummary = &ServerSummary{
			Servers:  serverCounts{Accepted: servers[ProbeAccepted], Skipped: servers[probeSkipped], Repaired: repaired},
			Restarts: restarts,
		}
	}
	return store.DetailOf(out)
}

// authorshipOf is each planned Secret's authorship as this run journaled
// it (unproven when nothing proves more), and how many are unproven.
func (p *progress) authorshipOf(s Spec) (map[string]string, int) {
	out := make(map[string]string, len(s.Secrets))
	unproven := 0
	for _, plan := range s.Secrets {
		a, ok := p.authorship[plan.Name]
		if !ok {
			a = AuthorshipUnproven
		}
		if a == AuthorshipUnproven {
			unproven++
		}
		out[plan.Name] = string(a)
	}
	return out, unproven
}

// kubeErr turns a failed read into the run's error: the API server could not
// be asked. After calls were sent the engine reports it as uncertain.
func kubeErr(err error) error { return &workflow.Unavailable{Dependency: "kubernetes", Err: err} }

func isNotFound(err error) bool { return errors.Is(err, kube.ReasonNotFound) }

// deleteAnswer is the answer to a delete of the object with uid, sent with
// preconditions: done (reason ok) when err is nil, else workflow.KubeAnswer's
// reading of the failure (a 404 is gone: applied to this UID).
func deleteAnswer(uid types.UID, ok store.Reason, err error) workflow.Answer {
	a := workflow.Answer{Status: workflow.Applied, Code: http.StatusOK, Reason: ok}
	if err != nil {
		a = workflow.KubeAnswer(workflow.KubeDelete, err)
	}
	if a.Status == workflow.Applied {
		a.UID = string(uid)
	}
	return a
}

// wait polls cond with the family's waiter: it waits for the effect of a
// call (workflow.Verify).
func (f *family) wait(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
	// A wait for the effect of a call: done is what it intends.
	return workflow.Verify(ctx, true, func(ctx context.Context) (bool, error) { return f.poll(ctx, cond) })
}

// lookGrace is how much longer than the bound a look in flight when the
// bound passes may take: a look is not cut at the bound (a request cut short
// there, or given up by a client or server that works to the look's
// deadline a moment before it, would read as a failure of the look), only
// after this.
const lookGrace = 5 * time.Second

// bounded is the run's waiter: wait.PollUntilContextCancel looks at cond every interval
// until it is done or fails; when bound passes first, the wait ends not done
// and without an error. A look that fails once the bound has passed is the
// bound passing, not a failure.
func bounded(bound, interval time.Duration) waiter {
	return func(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
		deadline := time.Now().Add(bound)
		within, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		look, cancelLook := context.WithDeadline(ctx, deadline.Add(lookGrace))
		defer cancelLook()
		done := false
		var lookErr error
		err := wait.PollUntilContextCancel(within, interval, true, func(context.Context) (bool, error) {
			done, lookErr = cond(look)
			return done, lookErr
		})
		switch {
		case done || ctx.Err() != nil:
			return done, err
		case lookErr != nil && time.Now().Before(deadline):
			return false, lookErr
		}
		return false, nil // the bound passed
	}
}
