package retire

import (
	"cmp"
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// The journal's words for a retirement's steps: the one authority call and
// the read that decides it.
const (
	stepReplace     = "replace-keyring"
	stepReadKeyring = "read-keyring"
)

// Plan builds the engine's plan for one retirement.
func Plan(cmd *Command, client kube.Interface) workflow.Plan {
	f := &family{cmd: cmd, secret: kube.NewSecretReplacer(client, cmd.Spec.Namespace, cmd.Spec.SecretName)}
	return workflow.Plan{
		Prepare:  preparation(cmd),
		Access:   AccessMatrix(cmd.Spec.Namespace, cmd.Spec.SecretName),
		Rights:   &kube.Rights{Namespace: cmd.Spec.Namespace, Rules: Rules(cmd.Spec.SecretName)},
		Prefetch: f.prefetch,
		Family:   f,
	}
}

// preparation is the operation a retirement journals.
func preparation(cmd *Command) store.PrepareParams {
	return store.PrepareParams{
		Kind:          command.KindKeyRetirement,
		MutationID:    cmd.Metadata.MutationID,
		RequestID:     cmd.Metadata.RequestID,
		CommandDigest: cmd.Digest,
		Namespace:     cmd.Spec.Namespace,
		Name:          cmd.Spec.SecretName,
		ExpectedUID:   cmd.Spec.ExpectedUID,
		Detail:        store.DetailOf(preparationDetail{KeyID: cmd.Spec.KeyID, RetirementID: cmd.Spec.RetirementID}),
	}
}

// AccessMatrix is what the identity running a retirement must and must not
// be allowed: get and update on exactly this Secret, nothing more. The
// plan's Rights add a rules review, which catches any right beyond Rules
// (another Secret name, another resource, a ClusterRole grant), not only
// the ones probed here.
func AccessMatrix(namespace, name string) []kube.AccessCheck {
	other := kube.OtherSecretName(name)
	secret := func(verb, n string, allowed bool) kube.AccessCheck {
		return kube.SecretCheck(verb, namespace, n, allowed)
	}
	return []kube.AccessCheck{
		secret("get", name, true),
		secret("update", name, true),
		secret("list", name, false),
		secret("watch", name, false),
		secret("create", name, false),
		secret("delete", name, false),
		secret("patch", name, false),
		secret("get", other, false),
		{Verb: "get", Resource: "configmaps", Namespace: namespace, Allowed: false},
		{Verb: "get", Resource: "pods", Namespace: namespace, Allowed: false},
	}
}

// secrets is everything a retirement asks of the API server: get and
// replace (compare-and-set on the resourceVersion) of the one Secret the
// adapter is bound to. *kube.SecretReplacer is the real one; the unit tests
// script a double.
type secrets interface {
	Get(ctx context.Context) (*corev1.Secret, error)
	Replace(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error)
}

var _ secrets = (*kube.SecretReplacer)(nil)

// family implements workflow.Family for one retirement.
type family struct {
	cmd    *Command
	secret secrets
	// early is the read of the Secret started while the journal connects
	// (prefetch), until the first decision takes it.
	early *earlyRead
}

// earlyRead is one read of the Secret in flight and its keyring, decoded
// (readCatalog) when the read succeeded; done is closed once they are set.
type earlyRead struct {
	done chan struct{}
	s    *corev1.Secret
	err  error
	ring keyringRead
}

// keyringRead is what readCatalog made of a Secret.
type keyringRead struct {
	m      *keyring.Manifest
	digest string
	err    error
}

// prefetch starts the read of the Secret the first decision makes (the
// plan's Prefetch), and the decoding of its keyring, so that they happen
// while the journal connects and the operation is prepared.
func (f *family) prefetch(ctx context.Context) {
	e := &earlyRead{done: make(chan struct{})}
	f.early = e
	go func() {
		defer close(e.done)
		if e.s, e.err = f.secret.Get(ctx); e.err == nil {
			e.ring.m, e.ring.digest, e.ring.err = readCatalog(e.s, f.cmd.Spec)
		}
	}()
}

// read is the decision's read of the Secret, its keyring decoded. The
// first decision of an operation that has sent nothing yet (prepared)
// takes the early read, as it would a read made now: the replace it may
// decide on is a compare-and-set on the resourceVersion that read showed,
// so a change made since is refused by the API server (a conflict), never
// written over, and the observation journals what was read. Any other
// decision (after a call, or the early read already taken) reads afresh.
func (f *family) read(ctx context.Context, run *workflow.Run) (*corev1.Secret, keyringRead, error) {
	e := f.early
	f.early = nil
	if e != nil {
		// Waited for even when it is not taken: none of its reads is still
		// in flight when the decision reads again.
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, keyringRead{}, ctx.Err()
		}
		if run.Op.State == store.StatePrepared {
			return e.s, e.ring, e.err
		}
	}
	s, err := f.secret.Get(ctx)
	if err != nil {
		return nil, keyringRead{}, err
	}
	var ring keyringRead
	ring.m, ring.digest, ring.err = readCatalog(s, f.cmd.Spec)
	return s, ring, nil
}

// steps are a retirement's, in order (workflow.Step).
var steps = []workflow.Step[*retiring]{
	readKeyring,    // GET the Secret and decode its keyring (read-keyring)
	checkReceipt,   // this retirement's receipt there already: existing; another's: receipt-conflict
	replaceKeyring, // retire the key, compare-and-set on the resourceVersion (replace-keyring)
}

// retiring is what one decision of a retirement has found so far.
type retiring struct {
	f      *family
	run    *workflow.Run
	s      *corev1.Secret    // the Secret (readKeyring)
	m      *keyring.Manifest // its keyring
	digest string            // its catalog digest
	obs    store.Record      // what the read showed (read-keyring)
}

// Decide runs the steps in order: already done, refuse, or replace (the
// last step always decides).
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	d, err := workflow.RunSteps(ctx, &retiring{f: f, run: run}, steps)
	if d == nil {
		return workflow.Decision{}, cmp.Or(err, errNoStep)
	}
	return *d, err
}

// errNoStep: no step decided, which the last step (replaceKeyring) never
// lets happen.
var errNoStep = errors.New("retirement: no step decided")

func decided(d workflow.Decision) (*workflow.Decision, error) { return &d, nil }

// readKeyring reads the Secret and decodes its keyring: absent or
// undecodable refuses.
func readKeyring(ctx context.Context, r *retiring) (*workflow.Decision, error) {
	s, ring, err := r.f.read(ctx, r.run)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return decided(refuse(ReasonSecretAbsent, nil, nil, ""))
		}
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	if ring.err != nil {
		return decided(refuse(reasonOf(ring.err), s, nil, ""))
	}
	r.s, r.m, r.digest, r.obs = s, ring.m, ring.digest, observation(s, ring.m, ring.digest)
	return nil, nil
}

// checkReceipt completes a retirement whose exact receipt is there already
// (existing) and refuses one that finds another's (receipt-conflict).
func checkReceipt(_ context.Context, r *retiring) (*workflow.Decision, error) {
	rc, ok := r.m.Receipt(r.f.cmd.Spec.KeyID)
	switch {
	case !ok:
		return nil, nil
	case r.f.ours(rc, r.m):
		return decided(workflow.Decision{Complete: &workflow.Completion{
			Outcome: workflow.OutcomeExisting, Summary: summary(r.s, r.m, r.digest),
		}, Notes: []store.Record{r.obs}})
	}
	return decided(refuse(ReasonReceiptConflict, r.s, r.m, r.digest, r.obs))
}

// replaceKeyring retires the key: one compare-and-set, journaled with the
// read that led to it; a retirement the keyring refuses is refused.
func replaceKeyring(_ context.Context, r *retiring) (*workflow.Decision, error) {
	call, err := r.f.replace(r.run, r.s, r.m)
	if err != nil {
		return decided(refuse(reasonOf(err), r.s, r.m, r.digest, r.obs))
	}
	return decided(workflow.Decision{Notes: []store.Record{r.obs}, Call: call})
}

// replace prepares the compare-and-set that retires the key from m, read
// from s.
func (f *family) replace(run *workflow.Run, s *corev1.Secret, m *keyring.Manifest) (*workflow.Call, error) {
	spec, md := f.cmd.Spec, f.cmd.Metadata
	next, err := m.Retire(keyring.RetireParams{
		KeyID:                  spec.KeyID,
		ExpectedMaterialDigest: spec.ExpectedMaterialDigest,
		RetirementID:           spec.RetirementID,
		RequestID:              md.RequestID,
		MutationID:             md.MutationID,
		RetiredAt:              run.Op.CreatedAt,
	})
	if err != nil {
		return nil, err
	}
	desired := withManifest(s, spec.DataKey, next)
	intended := desired.Annotations[AnnotationCatalogDigest] // next's catalog digest
	return &workflow.Call{
		Step: stepReplace, Verb: workflow.VerbUpdate, Target: store.SecretTarget(s.Namespace, s.Name), UID: string(s.UID), ResourceVersion: s.ResourceVersion, Digest: intended,
		Detail:  store.DetailOf(replaceDetail{Generation: next.Generation}),
		Final:   true,
		Summary: summary(desired, next, intended),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.secret.Replace(ctx, desired)
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			// Verify the returned object is what was intended; anything
			// else is settled by re-reading, never assumed.
			gotDigest, err := writtenCatalog(got, desired, spec)
			if err != nil || gotDigest != intended || got.ResourceVersion == s.ResourceVersion {
				return workflow.Answer{Status: workflow.Unknown, Code: 200, Reason: ReasonResultMismatch,
					UID: string(got.UID), ResourceVersion: got.ResourceVersion}
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(got.UID),
				ResourceVersion: got.ResourceVersion, Digest: intended}
		},
	}, nil
}

// Resolve re-reads the Secret after a replace whose outcome is unknown.
func (f *family) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	s, err := f.secret.Get(ctx)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return workflow.Verdict{Kind: workflow.Theirs, Reason: ReasonSecretAbsent}, nil
		}
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	}
	m, digest, err := readCatalog(s, f.cmd.Spec)
	if err != nil {
		return workflow.Verdict{Kind: workflow.Theirs, Reason: store.Reason(reasonOf(err)), UID: string(s.UID),
			ResourceVersion: s.ResourceVersion, Summary: summary(s, nil, "")}, nil
	}
	found := workflow.Verdict{UID: string(s.UID), ResourceVersion: s.ResourceVersion, Digest: digest,
		Summary: summary(s, m, digest)}
	if r, ok := m.Receipt(f.cmd.Spec.KeyID); ok {
		if f.ours(r, m) {
			found.Kind = workflow.Ours
			return found, nil
		}
		found.Kind, found.Reason = workflow.Theirs, ReasonReceiptConflict
		return found, nil
	}
	if s.ResourceVersion != call.ResourceVersion {
		found.Kind, found.Reason = workflow.Theirs, ReasonChangedConcurrent
		return found, nil
	}
	// Unchanged resourceVersion: the write did not happen. The same
	// compare-and-set, with the same precondition, may be sent again.
	retry, err := f.replace(run, s, m)
	if err != nil {
		found.Kind, found.Reason = workflow.Theirs, store.Reason(reasonOf(err))
		return found, nil
	}
	found.Kind, found.Reason, found.Retry = workflow.NotApplied, "resource-version-unchanged", retry
	return found, nil
}

// ours reports whether r is this operation's exact receipt and the key is gone.
func (f *family) ours(r keyring.Retirement, m *keyring.Manifest) bool {
	spec, md := f.cmd.Spec, f.cmd.Metadata
	_, keyPresent := m.Key(spec.KeyID)
	return !keyPresent && r.RetirementID == spec.RetirementID && r.MutationID == md.MutationID &&
		r.RequestID == md.RequestID && r.MaterialDigest == spec.ExpectedMaterialDigest
}

// reasonOf is the stable reason of a refusal: a *refusal of the Secret, or a
// *keyring.Error of its manifest or of the retirement. Any other error is
// invalid-keyring: its text never becomes a reason.
func reasonOf(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	var kerr *keyring.Error
	if errors.As(err, &kerr) {
		return kerr.Reason
	}
	return "invalid-keyring"
}

// refuse fails closed with what was observed: s and m (with its catalog
// digest) when they were read and decoded (either may be nil).
func refuse(reason string, s *corev1.Secret, m *keyring.Manifest, digest string, records ...store.Record) workflow.Decision {
	return workflow.Decision{Notes: records, Refuse: &workflow.Refusal{Reason: reason, Summary: summary(s, m, digest)}}
}

// observation records what the read showed: identity, version and catalog
// (digest, m's catalog digest), never material.
func observation(s *corev1.Secret, m *keyring.Manifest, digest string) store.Record {
	return store.Record{
		Kind: store.RecordObservation, Step: stepReadKeyring, Target: store.SecretTarget(s.Namespace, s.Name), UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Digest: digest, Detail: store.DetailOf(readDetail{Generation: m.Generation, Keys: len(m.Keys)}),
	}
}

// Inspect reads a keyring Secret and returns its canonical catalog: the
// manifest with every key's material replaced by its digest. dataKey may be
// empty when the Secret has exactly one data entry.
func Inspect(ctx context.Context, client kube.Interface, namespace, name, dataKey string) ([]byte, error) {
	return inspect(ctx, kube.NewSecretReplacer(client, namespace, name), dataKey)
}

// inspect is Inspect through the seam.
func inspect(ctx context.Context, secret secrets, dataKey string) ([]byte, error) {
	s, err := secret.Get(ctx)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return nil, &workflow.Refused{Reason: ReasonSecretAbsent}
		}
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	if dataKey == "" && len(s.Data) == 1 {
		for k := range s.Data {
			dataKey = k
		}
	}
	m, err := decodeKeyring(s, Spec{ExpectedUID: string(s.UID), DataKey: dataKey})
	if err != nil {
		return nil, &workflow.Refused{Reason: reasonOf(err)}
	}
	return m.Catalog(), nil
}
