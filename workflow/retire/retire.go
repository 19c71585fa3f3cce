package retire

import (
	"context"
	"errors"

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
	return workflow.Plan{
		Prepare: preparation(cmd),
		Access:  AccessMatrix(cmd.Spec.Namespace, cmd.Spec.SecretName),
		Rights:  &kube.Rights{Namespace: cmd.Spec.Namespace, Rules: Rules(cmd.Spec.SecretName)},
		Family:  &family{cmd: cmd, secret: kube.NewSecretReplacer(client, cmd.Spec.Namespace, cmd.Spec.SecretName)},
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
}

// Decide reads the Secret and decides: already done, refuse, or replace.
func (f *family) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	s, err := f.secret.Get(ctx)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return refuse(ReasonSecretAbsent, nil, nil), nil
		}
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	m, err := readKeyring(s, f.cmd.Spec)
	if err != nil {
		return refuse(reasonOf(err), s, nil), nil
	}
	obs := observation(s, m)
	if r, ok := m.Receipt(f.cmd.Spec.KeyID); ok {
		if f.ours(r, m) {
			return workflow.Decision{Notes: []store.Record{obs}, Complete: &workflow.Completion{
				Outcome: workflow.OutcomeExisting, Summary: summary(s, m),
			}}, nil
		}
		return refuse(ReasonReceiptConflict, s, m, obs), nil
	}
	call, err := f.replace(run, s, m)
	if err != nil {
		return refuse(reasonOf(err), s, m, obs), nil
	}
	return workflow.Decision{Notes: []store.Record{obs}, Call: call}, nil
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
	intended := next.CatalogDigest()
	return &workflow.Call{
		Step: stepReplace, Verb: workflow.VerbUpdate, Target: store.SecretTarget(s.Namespace, s.Name), UID: string(s.UID), ResourceVersion: s.ResourceVersion, Digest: intended,
		Detail:  store.DetailOf(replaceDetail{Generation: next.Generation}),
		Final:   true,
		Summary: summary(desired, next),
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.secret.Replace(ctx, desired)
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			// Verify the returned object is what was intended; anything
			// else is settled by re-reading, never assumed.
			gm, err := readKeyring(got, spec)
			if err != nil || gm.CatalogDigest() != intended || got.ResourceVersion == s.ResourceVersion {
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
	m, err := readKeyring(s, f.cmd.Spec)
	if err != nil {
		return workflow.Verdict{Kind: workflow.Theirs, Reason: reasonOf(err), UID: string(s.UID),
			ResourceVersion: s.ResourceVersion, Summary: summary(s, nil)}, nil
	}
	found := workflow.Verdict{UID: string(s.UID), ResourceVersion: s.ResourceVersion, Digest: m.CatalogDigest(),
		Summary: summary(s, m)}
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

// refuse fails closed with what was observed: s and m when they were read
// and decoded (either may be nil).
func refuse(reason string, s *corev1.Secret, m *keyring.Manifest, records ...store.Record) workflow.Decision {
	return workflow.Decision{Notes: records, Refuse: &workflow.Refusal{Reason: reason, Summary: summary(s, m)}}
}

// observation records what the read showed: identity, version and catalog,
// never material.
func observation(s *corev1.Secret, m *keyring.Manifest) store.Record {
	return store.Record{
		Kind: store.RecordObservation, Step: "read-keyring", Target: store.SecretTarget(s.Namespace, s.Name).String(), UID: string(s.UID), ResourceVersion: s.ResourceVersion,
		Digest: m.CatalogDigest(), Detail: store.DetailOf(readDetail{Generation: m.Generation, Keys: len(m.Keys)}),
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
	m, err := readKeyring(s, Spec{ExpectedUID: string(s.UID), DataKey: dataKey})
	if err != nil {
		return nil, &workflow.Refused{Reason: reasonOf(err)}
	}
	return m.Catalog(), nil
}
