package credentials

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

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

// Reasons, stable kebab-case words.
const (
	ReasonNotGeneratorBacked   = "external-secret-not-generator-backed"
	ReasonTargetMismatch       = "external-secret-target-mismatch"
	ReasonExternalReplaced     = "external-secret-replaced"
	ReasonExternalNotGone      = "external-secret-not-gone"
	ReasonSecretTerminating    = "secret-terminating"
	ReasonSecretWrongType      = "secret-wrong-type"
	ReasonSecretImmutable      = "secret-immutable"
	ReasonSecretDeleted        = "secret-deleted-concurrently"
	ReasonServerStillRefuses   = "server-still-refuses"
	ReasonReplacementNotReady  = "replacement-not-ready"
	ReasonProbeUnknown         = "probe-unknown"
	reasonCreated              = "created"
	reasonAlreadyExists        = "already-exists"
	reasonCreatedByThis        = "created-by-this-mutation"
	reasonKeptExisting         = "kept-existing"
	reasonTestFailed           = "test-failed"
	reasonAbsent               = "absent"
	reasonSecretComplete       = "complete"
	reasonResourceVersionMoved = "resource-version-changed"
	reasonPreconditionFailed   = "precondition-failed"
	reasonReplacedNotDeleted   = "replaced-not-deleted"
)

// waitBound bounds each wait (an ExternalSecret gone, a replacement pod
// ready); waitPoll is how often it looks.
var (
	waitBound = 2 * time.Minute
	waitPoll  = 100 * time.Millisecond
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
}

var _ authority = (*kube.Credentials)(nil)

// prober checks a server's credentials at addr: Probe in a run, a script
// in unit tests.
type prober func(ctx context.Context, protocol, addr string, user, password []byte) ProbeResult

// waiter polls cond until it is done, fails, or the wait's bound passes
// (done false, no error): poll in a run; unit tests poll a fixed number of
// times without sleeping.
type waiter func(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error)

// family implements workflow.Family for one credential plan.
type family struct {
	cmd   *Command
	kube  authority
	probe prober
	poll  waiter

	// What this process learned from the authority that no record says
	// (a read needs no record); rebuilt by reading again after a restart.
	adoptChecked    bool
	external        map[string]*unstructured.Unstructured // nil value: absent
	externalGone    map[string]bool
	generatorAbsent map[string]bool
	complete        map[string]bool           // Secrets read and found complete
	read            map[string]*corev1.Secret // a Secret Resolve just read, for Decide
	probed          map[string]ProbeResult    // server pods probed in this process
	notes           []store.Record            // records to append with the next decision
	ending          error                     // ends the run once the notes are journaled
	run             string                    // the run's operation (mutation ID in the journal)
}

func newFamily(cmd *Command, client authority) *family {
	return &family{
		cmd: cmd, kube: client, probe: Probe, poll: poll,
		external: map[string]*unstructured.Unstructured{}, externalGone: map[string]bool{}, generatorAbsent: map[string]bool{},
		complete: map[string]bool{}, read: map[string]*corev1.Secret{}, probed: map[string]ProbeResult{},
	}
}

// step is one phase of a plan. It returns a decision when something is left
// to do in it, nil when the phase is done.
type step func(ctx context.Context, run *workflow.Run, p *progress) (*workflow.Decision, error)

// Decide walks the phases in order and returns the first thing left to do.
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	if err := f.ending; err != nil {
		f.ending = nil
		return workflow.Decision{}, err
	}
	p := fold(run.Records)
	f.run = run.Op.MutationID
	steps := []step{
		f.checkAdoption,         // read the ExternalSecret of every planned Secret; one not generator-backed refuses before any write
		f.orphanExternalSecrets, // delete each with propagationPolicy Orphan, wait until it is gone
		f.deleteGenerators,      // delete the retired Password generators
		f.ensureSecrets,         // create each Secret, or patch in only what an existing one lacks
		f.repairServers,         // probe each server; delete a refusing pod once, wait, probe again
	}
	for _, s := range steps {
		d, err := s(ctx, run, p)
		if err != nil {
			return workflow.Decision{}, err
		}
		if d != nil {
			if d.Refuse != nil {
				d.Refuse.Summary = f.withRun(d.Refuse.Summary)
			}
			return f.withNotes(*d), nil
		}
	}
	return f.withNotes(workflow.Decision{Complete: &workflow.Completion{Outcome: p.outcome(), Summary: f.summary(p)}}), nil
}

// withRun adds the run's operation (its journal mutation ID) to a summary.
func (f *family) withRun(summary map[string]any) map[string]any {
	out := map[string]any{"run": f.run}
	for k, v := range summary {
		out[k] = v
	}
	return out
}

// withNotes attaches the records gathered since the last decision.
func (f *family) withNotes(d workflow.Decision) workflow.Decision {
	d.Notes = append(f.notes, d.Notes...)
	f.notes = nil
	return d
}

func (f *family) note(r store.Record) { f.notes = append(f.notes, r) }

// endWith ends the run with err (uncertain, unavailable) after journaling
// the records gathered so far: they go out alone first, and the next Decide
// returns err.
func (f *family) endWith(err error) (*workflow.Decision, error) {
	if len(f.notes) == 0 {
		return nil, err
	}
	f.ending = err
	return &workflow.Decision{}, nil
}

// Resolve re-reads the durable facts after a call whose outcome is unknown.
func (f *family) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	f.run = run.Op.MutationID
	v, err := f.resolve(ctx, run, call)
	if v.Kind == workflow.Theirs {
		v.Summary = f.withRun(v.Summary)
	}
	return v, err
}

func (f *family) resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	_, name, _ := strings.Cut(call.Target, "/")
	switch call.Step {
	case stepCreateSecret:
		return f.resolveCreate(ctx, run, name, call)
	case stepPatchSecret:
		return f.resolvePatch(ctx, name, call, fold(run.Records))
	case stepOrphanExternalSecret:
		return f.resolveOrphan(ctx, name, call)
	case stepDeleteGenerator:
		return f.resolveDeleteGenerator(ctx, name, call)
	case stepDeletePod:
		return f.resolveDeletePod(ctx, name, call)
	}
	return workflow.Verdict{}, errors.New("resolving an unknown step " + call.Step)
}

// progress is what the journal says was done: folded from every record of
// the operation, on every Decide, so a resumed or reloaded run knows it.
type progress struct {
	created, exists, patched map[string]bool // Secrets by name
	externalDeleted          map[string]bool
	orphanUID                map[string]string // ExternalSecret -> UID its orphan delete named
	generatorsDeleted        map[string]string // name -> reason (deleted or absent)
	podDeletedUID            map[string]string // pod -> UID whose delete was called
	podDeleted               map[string]bool
}

func fold(records []store.Record) *progress {
	p := &progress{
		created: map[string]bool{}, exists: map[string]bool{}, patched: map[string]bool{},
		externalDeleted: map[string]bool{}, orphanUID: map[string]string{}, generatorsDeleted: map[string]string{},
		podDeletedUID: map[string]string{}, podDeleted: map[string]bool{},
	}
	for _, r := range records {
		_, name, _ := strings.Cut(r.Target, "/")
		done := r.Kind == store.RecordAuthorityResult && r.Status == string(workflow.Applied) ||
			r.Kind == store.RecordResolution && r.Status == string(workflow.Ours)
		if r.Kind == store.RecordAuthorityCall && r.Step == stepDeletePod {
			p.podDeletedUID[name] = r.UID
		}
		if r.Kind == store.RecordAuthorityCall && r.Step == stepOrphanExternalSecret {
			p.orphanUID[name] = r.UID
		}
		if r.Kind == store.RecordObservation && r.Step == stepReadGenerator && r.Status == reasonAbsent {
			p.generatorsDeleted[name] = reasonAbsent
		}
		if !done {
			continue
		}
		switch r.Step {
		case stepCreateSecret:
			if r.Reason == reasonKeptExisting {
				p.exists[name] = true
			} else {
				p.created[name] = true
			}
		case stepPatchSecret:
			p.patched[name] = true
		case stepOrphanExternalSecret:
			p.externalDeleted[name] = true
		case stepDeleteGenerator:
			p.generatorsDeleted[name] = r.Reason
			if r.Reason == reasonReplacedNotDeleted {
				p.generatorsDeleted[name] = "deleted"
			}
		case stepDeletePod:
			p.podDeleted[name] = true
		}
	}
	return p
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

// summary is the content-free completion summary: counts and names.
func (f *family) summary(p *progress) map[string]any {
	s := f.cmd.Spec
	generators := 0
	for _, reason := range p.generatorsDeleted {
		if reason != reasonAbsent {
			generators++
		}
	}
	servers := map[string]int{}
	for _, r := range f.probed {
		servers[string(r.Status)]++
	}
	repaired := 0
	for pod := range p.podDeleted {
		if f.probed[pod].Status == ProbeAccepted {
			repaired++
		}
	}
	out := map[string]any{
		"namespace": s.Namespace, "owner": s.Owner, "run": f.run,
		// existing: found in place and not created by this run (whatever
		// its annotations say); unchanged: not written by this run.
		"secrets": map[string]int{
			"planned": len(s.Secrets), "created": len(p.created), "patched": len(p.patched), "existing": len(p.exists),
			"unchanged": len(s.Secrets) - len(p.created) - len(p.patched),
		},
		"externalSecretsDeleted": len(p.externalDeleted), "generatorsDeleted": generators,
	}
	if len(s.Servers) > 0 {
		out["servers"] = map[string]int{"accepted": servers[string(ProbeAccepted)], "skipped": servers["skipped"], "repaired": repaired}
	}
	return out
}

// kubeErr turns a failed read into the run's error: the API server could not
// be asked. After calls were sent the engine reports it as uncertain.
func kubeErr(err error) error { return &workflow.Unavailable{Dependency: "kubernetes", Err: err} }

func isNotFound(err error) bool { return errors.Is(err, kube.ReasonNotFound) }

// deleteAnswer is the answer to a delete of the object with uid, sent with
// preconditions: done (reason ok) when err is nil, else workflow.KubeAnswer's
// reading of the failure (a 404 is gone: applied to this UID).
func deleteAnswer(uid types.UID, ok string, err error) workflow.Answer {
	a := workflow.Answer{Status: workflow.Applied, Code: http.StatusOK, Reason: ok}
	if err != nil {
		a = workflow.KubeAnswer(workflow.KubeDelete, err)
	}
	if a.Status == workflow.Applied {
		a.UID = string(uid)
	}
	return a
}

// wait polls cond with the family's waiter; a dry run does not wait.
func (f *family) wait(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
	if workflow.IsDryRun(ctx) {
		return true, nil // keyledger plan: the call was not sent; take its effect as in place
	}
	return f.poll(ctx, cond)
}

// poll looks at cond every waitPoll until it is done, fails, or waitBound
// passes.
func poll(ctx context.Context, cond func(ctx context.Context) (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, waitBound)
	defer cancel()
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		done, err := cond(ctx)
		if err != nil || done {
			return done, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-t.C:
		}
	}
}
