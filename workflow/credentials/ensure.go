package credentials

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// createSecret reads every planned Secret this run has not settled since
// it was last resumed (GET by name: a planned Secret that exists is never
// POSTed, so no password travels for it), creates the absent ones in one
// batch (one call record each, committed together before any is sent;
// the POSTs go out concurrently), then, one at a time, patches in only
// what an existing Secret lacks. A Secret with nothing to change is not
// written; the Secrets found complete are journaled together, at most
// completeChunk to a read-secrets record, with the UID and authorship of
// each. A resumed run reads again what it settled before it was resumed:
// a Secret deleted meanwhile is created again.
func (f *family) createSecret(ctx context.Context, p *progress) (*workflow.Decision, error) {
	var creates []*workflow.Call
	found := newCompleteNotes(f.cmd.Spec.Namespace)
	// The reads first, concurrently (readUnsettled), and the journal's
	// answers about the Secrets found in place, in a few round trips
	// (prefetchAuthorship); then the decision, in plan order, as if each
	// Secret were read when it is reached.
	idx, reads := f.readUnsettled(ctx, p)
	fx := newRunFinds(f.journal)
	f.prefetchAuthorship(ctx, p, idx, reads, fx)
	for j, i := range idx {
		s, err := reads[j].s, reads[j].err
		if isNotFound(err) {
			call, err := f.createCall(p.run, f.cmd.Spec.Secrets[i])
			if err != nil {
				return nil, err
			}
			creates = append(creates, call)
			continue
		} else if err != nil {
			return nil, kubeErr(err)
		}
		// Existing Secrets are patched after the creates (and read again then).
		d, err := f.keepExisting(ctx, p, i, s, fx, found, len(creates) > 0)
		if d != nil || err != nil {
			return d, err
		}
	}
	found.noteTo(p)
	return createsDecision(creates), nil
}

// readUnsettled reads the planned Secrets this run has not settled since it
// was last resumed (progress.unsettled), or takes the reads
// readExternalSecrets made of them in this decision; it returns their
// indexes in the plan and the reads, in plan order.
func (f *family) readUnsettled(ctx context.Context, p *progress) ([]int, []secretRead) {
	idx, names := p.unsettled(f.cmd.Spec)
	reads := p.early // read by readExternalSecrets in this decision, when nothing came between
	if len(reads) != len(names) {
		reads = f.readSecrets(ctx, names)
	}
	p.early = nil
	return idx, reads
}

// keepExisting decides about the i-th planned Secret, found in place as s
// (kept-existing): a Secret that cannot be kept (keptProblem) refuses; a
// complete one is collected in found with its authorship, to be journaled
// with the decision (read-secrets); one that lacks something is patched
// (patch-secret) after its read-secret record, unless patchLater (creates
// come first). A nil decision goes on to the next Secret.
func (f *family) keepExisting(ctx context.Context, p *progress, i int, s *corev1.Secret, fx *runFinds, found *completeNotes, patchLater bool) (*workflow.Decision, error) {
	plan := f.cmd.Spec.Secrets[i]
	adopted := f.adopted(plan.Name, p)
	c := diff(s, plan, adopted)
	if reason := keptProblem(s, c, adopted); reason != "" {
		found.noteTo(p)
		return &workflow.Decision{Notes: []store.Record{observation(s, c, nil)}, Refuse: &workflow.Refusal{Reason: reason,
			Summary: store.DetailOf(secretSummary{Namespace: s.Namespace, Secret: s.Name})}}, nil
	}
	authorship, by, err := f.authorshipOfRead(ctx, p, s, chunkTarget(f.cmd.Spec.Namespace, i), fx)
	if err != nil {
		return nil, &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	lookAlike := authorship == AuthorshipUnproven && looksLikeOurs(s)
	if c.empty() {
		found.add(i, plan.Name, string(s.UID), authorship, by, lookAlike)
		return nil, nil
	}
	if patchLater {
		return nil, nil
	}
	found.noteTo(p)
	call, err := f.patchCall(s, plan, c)
	if err != nil {
		return nil, err
	}
	obs := observation(s, c, &secretDetail{Authorship: authorship, LookAlike: &lookAlike, By: by})
	return &workflow.Decision{Notes: []store.Record{obs}, Call: call}, nil
}

// createsDecision is the decision that sends the creates: none, one call,
// or a batch.
func createsDecision(creates []*workflow.Call) *workflow.Decision {
	switch len(creates) {
	case 0:
		return nil
	case 1:
		return &workflow.Decision{Call: creates[0]}
	default:
		return &workflow.Decision{Calls: creates}
	}
}

// completeChunk is how many planned Secrets share one read-secrets record
// (by their index in the plan): 32 names of at most 253 characters with a
// UID and an authorship each stay well under the journal's 16 KiB detail.
const completeChunk = 32

// chunkTarget is the read-secrets record target of the i-th planned Secret.
func chunkTarget(namespace string, i int) store.Target {
	return store.Target{Kind: store.TargetSecrets, Namespace: namespace, Name: strconv.Itoa(1 + i/completeChunk)}
}

// completeNotes collects the Secrets one decision found complete, by chunk.
type completeNotes struct {
	namespace string
	chunks    map[store.Target]map[string]chunkEntry
	order     []store.Target
}

func newCompleteNotes(namespace string) *completeNotes {
	return &completeNotes{namespace: namespace, chunks: map[store.Target]map[string]chunkEntry{}}
}

func (n *completeNotes) add(i int, name, uid string, a Authorship, by string, lookAlike bool) {
	t := chunkTarget(n.namespace, i)
	if n.chunks[t] == nil {
		n.chunks[t] = map[string]chunkEntry{}
		n.order = append(n.order, t)
	}
	n.chunks[t][name] = chunkEntry{UID: uid, Authorship: a, By: by, LookAlike: lookAlike}
}

// noteTo journals the collected Secrets with the decision, once.
func (n *completeNotes) noteTo(p *progress) {
	for _, t := range n.order {
		p.note(store.Record{Kind: store.RecordObservation, Step: stepReadSecrets, Target: t, Status: statusComplete,
			Detail: store.DetailOf(chunkDetail{Complete: n.chunks[t]})})
	}
	n.chunks, n.order = map[store.Target]map[string]chunkEntry{}, nil
}

// authorshipOfRead is the authorship of s, found in place: what this run
// journaled for it, or what the newest read-secrets record of any run of
// the plan (the one of s's chunk) says of s's UID, or what the journal
// proves (authorship). fx answers the journal questions of one decision
// (a chunk's record is asked once for all its Secrets).
func (f *family) authorshipOfRead(ctx context.Context, p *progress, s *corev1.Secret, chunk store.Target, fx *runFinds) (Authorship, string, error) {
	if a, ok := p.authorship[s.Name]; ok && a != AuthorshipUnproven {
		return a, p.by[s.Name], nil
	}
	if f.journal != nil && s.UID != "" {
		found, err := fx.find(ctx, store.RunRecordParams{Namespace: f.cmd.Spec.Namespace, Command: f.cmd.Metadata.MutationID,
			Kind: store.RecordObservation, Step: stepReadSecrets, Target: chunk.String()})
		if err != nil {
			return "", "", err
		}
		var detail map[string]chunkEntry
		if found != nil {
			d, err := detailOf[chunkDetail](found.Record)
			if err != nil {
				return "", "", err
			}
			detail = d.Complete
		}
		if e, ok := detail[s.Name]; ok && e.UID == string(s.UID) {
			switch e.Authorship {
			case AuthorshipProven, AuthorshipAdopted:
				return e.Authorship, e.By, nil
			}
		}
	}
	return f.authorship(ctx, p, s, fx)
}

// adopted: the plan lists the Secret's ExternalSecret in adopt, or this
// run found (or orphaned) a generator-backed ExternalSecret of its name.
// An adopted Secret also loses ExternalSecret owner references and Argo
// CD's tracking metadata.
func (f *family) adopted(name string, p *progress) bool {
	return f.listed(name) || p.found[name] || p.orphanUID[name] != ""
}

// listed: the plan names the Secret's ExternalSecret in adopt.
func (f *family) listed(name string) bool {
	return slices.Contains(f.cmd.Spec.ExternalSecretNames(), name)
}

// observation records what a read of a Secret showed: its identity, version
// and what it lacks (names only), with the authorship when a patch follows
// (found, or nil).
func observation(s *corev1.Secret, c change, found *secretDetail) store.Record {
	d := secretDetail{}
	if found != nil {
		d = *found
	}
	complete := c.empty()
	d.changeDetail, d.Complete = c.detail(), &complete
	return store.Record{Kind: store.RecordObservation, Step: stepReadSecret, Target: store.SecretTarget(s.Namespace, s.Name),
		UID: string(s.UID), ResourceVersion: s.ResourceVersion, Detail: store.DetailOf(d)}
}

// createCall POSTs the planned Secret with fresh values and a fresh random
// nonce in its annotation keyledger.dev/create-nonce. The call record
// carries the nonce's digest (its Digest), committed before the POST is
// sent: after a lost answer, only a Secret carrying that nonce is this
// call's (see resolveCreate). 201 is applied; 409 AlreadyExists is settled
// by resolution (the Secret is kept, never replaced).
func (f *family) createCall(run string, plan Secret) (*workflow.Call, error) {
	nonce, err := newNonce(f.random)
	if err != nil {
		return nil, err
	}
	s, err := newSecret(f.random, f.cmd.Spec.Namespace, run, nonce, plan)
	if err != nil {
		return nil, err
	}
	return &workflow.Call{
		Step: stepCreateSecret, Verb: workflow.VerbCreate, Target: f.target(store.TargetSecret, plan.Name), Digest: nonceDigest(nonce),
		Detail:  store.DetailOf(createDetail{Keys: plannedKeys(plan)}),
		Summary: store.DetailOf(secretSummary{Namespace: f.cmd.Spec.Namespace, Secret: plan.Name, Run: run}),
		Foresee: f.foreseeCreate(plan.Name),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.kube.CreateSecret(ctx, s)
			for k := range s.Data {
				clear(s.Data[k])
			}
			if err != nil {
				// 409 already-exists is Unknown: resolution reads the
				// occupant and checks the nonce.
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: http.StatusCreated, Reason: reasonCreated,
				UID: string(got.UID), ResourceVersion: got.ResourceVersion, Detail: store.DetailOf(secretDetail{Authorship: AuthorshipProven})}
		},
	}, nil
}

// foreseeCreate tells, from a read, what a create of name would answer
// when it would not be applied: a Secret that already exists answers 409
// (the run then reads it and patches in only what it lacks).
func (f *family) foreseeCreate(name string) func(ctx context.Context) (workflow.Answer, bool, error) {
	return func(ctx context.Context) (workflow.Answer, bool, error) {
		_, err := f.kube.GetSecret(ctx, name)
		switch {
		case isNotFound(err):
			return workflow.Answer{}, false, nil
		case err != nil:
			return workflow.Answer{}, false, kubeErr(err)
		}
		return workflow.Answer{Status: workflow.Unknown, Code: http.StatusConflict, Reason: reasonAlreadyExists}, true, nil
	}
}

func plannedKeys(plan Secret) []string {
	keys := make([]string, len(plan.Keys))
	for i, k := range plan.Keys {
		keys[i] = k.Name
	}
	return keys
}

// resolveCreate re-reads after a create whose outcome is unknown (a lost
// answer, or 409). Absent: not applied (create again, with a new nonce).
// This operation's Secret: the nonce of one of its create calls for this
// Secret (each journaled before its send: with concurrent runs of one
// operation, an earlier attempt may land after a later one was decided),
// type Opaque, exactly the planned keys, not being deleted: ours. Anything
// else is a Secret this run did not create. It is kept ("kept-existing")
// once it passes the checks every kept Secret gets (keptProblem: a
// terminating one, one of another type, an immutable one lacking
// something are refused), with its authorship: proven when an earlier run
// of the plan created it, adopted, or unproven ("lookAlike" when an
// unproven one carries keyledger's annotations). The next decision patches
// in only what it lacks.
func (f *family) resolveCreate(ctx context.Context, p *progress, name string, call store.Record) (workflow.Verdict, error) {
	s, err := f.kube.GetSecret(ctx, name)
	if isNotFound(err) {
		plan := f.plan(name)
		retry, err := f.createCall(p.run, plan)
		if err != nil {
			return workflow.Verdict{}, err
		}
		return workflow.Verdict{Kind: workflow.NotApplied, Reason: reasonAbsent, Retry: retry}, nil
	}
	if err != nil {
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	}
	v := workflow.Verdict{Kind: workflow.Ours, UID: string(s.UID), ResourceVersion: s.ResourceVersion}
	if digest, ok := createdBy(s, f.plan(name), createDigests(p.records, call.Target)...); ok {
		v.Reason, v.Digest = reasonCreatedByThis, digest
		v.Detail = store.DetailOf(secretDetail{Authorship: AuthorshipProven})
		return v, nil
	}
	adopted := f.adopted(name, p)
	c := diff(s, f.plan(name), adopted)
	detail := keptDetail(s, c)
	if reason := keptProblem(s, c, adopted); reason != "" {
		v.Kind, v.Reason, v.Detail = workflow.Theirs, store.Reason(reason), store.DetailOf(detail)
		v.Summary = store.DetailOf(secretSummary{Namespace: f.cmd.Spec.Namespace, Secret: name})
		return v, nil
	}
	authorship, by, err := f.authorship(ctx, p, s, newRunFinds(f.journal))
	if err != nil {
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "journal-read-failed",
			Err: &workflow.Unavailable{Dependency: "postgresql", Err: err}}, nil
	}
	// Kept: what it lacks is journaled with the verdict, so that the next
	// decision skips a complete Secret without reading it again (and
	// reads one that lacks something, to build its patch from that read).
	lookAlike := *detail.LookAlike && authorship == AuthorshipUnproven
	detail.Authorship, detail.By, detail.LookAlike = authorship, by, &lookAlike
	v.Reason, v.Detail, v.Kept = reasonKeptExisting, store.DetailOf(detail), true
	return v, nil
}

// keptDetail is the verdict detail of a Secret kept as found: what it
// lacks (names only), whether that is nothing, and whether it carries
// keyledger's annotations (a look-alike, unless its authorship is proven).
func keptDetail(s *corev1.Secret, c change) secretDetail {
	lookAlike, complete := looksLikeOurs(s), c.empty()
	return secretDetail{changeDetail: c.detail(), LookAlike: &lookAlike, Complete: &complete}
}

// looksLikeOurs: s carries keyledger's annotations (a nonce, a creator).
func looksLikeOurs(s *corev1.Secret) bool {
	_, nonce := s.Annotations[AnnotationNonce]
	_, by := s.Annotations[AnnotationCreatedBy]
	return nonce || by
}

// createdBy reports whether s is the Secret one of the create calls whose
// nonce digests are given made, and which: it carries that call's nonce, is
// Opaque, holds exactly the planned keys and is not being deleted. The
// annotation alone proves nothing (anyone who may create Secrets can write
// it); the nonce was random, and its digest journaled before the create was
// sent.
func createdBy(s *corev1.Secret, plan Secret, digests ...string) (string, bool) {
	nonce, ok := s.Annotations[AnnotationNonce]
	if !ok || !shapedAsCreated(s, plan) {
		return "", false
	}
	have := nonceDigest(nonce)
	for _, d := range digests {
		if d != "" && d == have {
			return d, true
		}
	}
	return "", false
}

// createDigests lists the nonce digests of every create call this operation
// journaled for target.
func createDigests(records []store.Record, target store.Target) []string {
	var digests []string
	for _, r := range records {
		if r.Kind == store.RecordAuthorityCall && r.Step == stepCreateSecret && r.Target == target {
			digests = append(digests, r.Digest)
		}
	}
	return digests
}

// patchCall sends the one JSON patch that adds what s lacks.
func (f *family) patchCall(s *corev1.Secret, plan Secret, c change) (*workflow.Call, error) {
	patch, err := patchFor(f.random, s, plan, c)
	if err != nil {
		return nil, err
	}
	name := s.Name
	return &workflow.Call{
		Step: stepPatchSecret, Verb: workflow.VerbPatch, Target: f.target(store.TargetSecret, name), UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Detail: store.DetailOf(c.detail()),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.kube.PatchSecret(ctx, name, patch)
			clear(patch)
			if err != nil {
				// A failed resourceVersion test (kube.ReasonTestFailed,
				// 422) is Unknown: the Secret changed since read.
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: http.StatusOK, Reason: "patched",
				UID: string(got.UID), ResourceVersion: got.ResourceVersion}
		},
	}, nil
}

// resolvePatch re-reads after a patch whose outcome is unknown (a failed
// resourceVersion test, a lost answer): complete means ours; otherwise the
// patch is recomputed against what is there now and sent again (bounded by
// the engine's attempts per step and target).
func (f *family) resolvePatch(ctx context.Context, p *progress, name string, call store.Record) (workflow.Verdict, error) {
	s, err := f.kube.GetSecret(ctx, name)
	if isNotFound(err) {
		return workflow.Verdict{Kind: workflow.Theirs, Reason: ReasonSecretDeleted,
			Summary: store.DetailOf(secretSummary{Namespace: f.cmd.Spec.Namespace, Secret: name})}, nil
	}
	if err != nil {
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	}
	plan := f.plan(name)
	adopted := f.adopted(name, p)
	c := diff(s, plan, adopted)
	v := workflow.Verdict{UID: string(s.UID), ResourceVersion: s.ResourceVersion, Detail: store.DetailOf(c.detail())}
	// The checks the decision made before the patch run again before it is
	// sent again: the Secret may have changed in between.
	if reason := keptProblem(s, c, adopted); reason != "" {
		v.Kind, v.Reason, v.Summary = workflow.Theirs, store.Reason(reason), store.DetailOf(secretSummary{Namespace: s.Namespace, Secret: name})
		return v, nil
	}
	if c.empty() {
		v.Kind, v.Reason = workflow.Ours, reasonSecretComplete
		return v, nil
	}
	retry, err := f.patchCall(s, plan, c)
	if err != nil {
		return workflow.Verdict{}, err
	}
	v.Kind, v.Retry, v.Reason = workflow.NotApplied, retry, "resource-version-unchanged"
	if s.ResourceVersion != call.ResourceVersion {
		v.Reason = reasonResourceVersionMoved
	}
	return v, nil
}

func (f *family) plan(name string) Secret {
	i := slices.IndexFunc(f.cmd.Spec.Secrets, func(s Secret) bool { return s.Name == name })
	return f.cmd.Spec.Secrets[i]
}
