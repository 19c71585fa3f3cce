package retire

import (
	"context"
	"errors"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
)

// stepReplace is the one authority call of a retirement.
const stepReplace = "replace-keyring"

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
		Detail:        map[string]any{"keyId": cmd.Spec.KeyID, "retirementId": cmd.Spec.RetirementID},
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

// read is the decision's read of the Secret. The first decision of an
// operation that has sent nothing yet (prepared) takes the early read, as
// it would a read made now: the replace it may decide on is a
// compare-and-set on the resourceVersion that read showed, so a change
// made since is refused by the API server (a conflict), never written
// over, and the observation journals what was read. Any other decision
// (after a call, or the early read already taken) reads afresh.
// The keyring comes decoded with the Secret (readCatalog's answer).
func (f *family) read(ctx context.Context, run *workflow.Run) (*corev1.Secret, keyringRead, error) {
	e := f.early
	f.early = nil
	if e != nil && run.Op.State == store.StatePrepared {
		select {
		case <-e.done:
			return e.s, e.ring, e.err
		case <-ctx.Done():
			return nil, keyringRead{}, ctx.Err()
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

// Decide reads the Secret and decides: already done, refuse, or replace.
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	s, ring, err := f.read(ctx, run)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return refuse(ReasonSecretAbsent, nil, nil, ""), nil
		}
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	m, digest, err := ring.m, ring.digest, ring.err
	if err != nil {
		return refuse(reasonOf(err), s, nil, ""), nil
	}
	obs := observation(s, m, digest)
	if r, ok := m.Receipt(f.cmd.Spec.KeyID); ok {
		if f.ours(r, m) {
			return workflow.Decision{Complete: &workflow.Completion{
				Outcome: workflow.OutcomeExisting, Records: []store.Record{obs}, Summary: summary(s, m, digest),
			}}, nil
		}
		return refuse(ReasonReceiptConflict, s, m, digest, obs), nil
	}
	call, err := f.replace(run, s, m)
	if err != nil {
		return refuse(reasonOf(err), s, m, digest, obs), nil
	}
	call.Observation = &obs
	return workflow.Decision{Call: call}, nil
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
		Step: stepReplace, Target: "secret/" + s.Name, UID: string(s.UID), ResourceVersion: s.ResourceVersion, Digest: intended,
		Detail:  map[string]any{"generation": next.Generation},
		Final:   true,
		Summary: summary(desired, next, intended),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.secret.Replace(ctx, desired)
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			// Verify the returned object is what was intended; anything
			// else is settled by re-reading, never assumed.
			_, gotDigest, err := readCatalog(got, spec)
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
		return workflow.Verdict{Kind: workflow.Theirs, Reason: reasonOf(err), UID: string(s.UID),
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
		found.Kind, found.Reason = workflow.Theirs, reasonOf(err)
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
	return workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Summary: summary(s, m, digest), Records: records}}
}

// observation records what the read showed: identity, version and catalog
// (digest is m's catalog digest), never material.
func observation(s *corev1.Secret, m *keyring.Manifest, digest string) store.Record {
	return store.Record{
		Kind: store.RecordObservation, Step: "read-keyring", Target: "secret/" + s.Name, UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Digest: digest, Detail: map[string]any{"generation": m.Generation, "keys": len(m.Keys)},
	}
}

// summary is the content-free description printed on stdout and stored in
// the completion or refusal record; digest is m's catalog digest.
func summary(s *corev1.Secret, m *keyring.Manifest, digest string) map[string]any {
	out := map[string]any{}
	if s == nil {
		return out
	}
	out["secret"] = map[string]any{"namespace": s.Namespace, "name": s.Name, "uid": string(s.UID)}
	if m != nil {
		out["generation"] = m.Generation
		out["catalogDigest"] = digest
	} else if g, err := strconv.ParseInt(s.Annotations[AnnotationGeneration], 10, 64); err == nil {
		out["generation"] = g
	}
	return out
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
	m, err := readKeyring(s, Spec{ExpectedUID: string(s.UID), DataKey: dataKey})
	if err != nil {
		return nil, &workflow.Refused{Reason: reasonOf(err)}
	}
	return m.Catalog(), nil
}
