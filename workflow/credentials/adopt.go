package credentials

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// checkAdoption reads every ExternalSecret the plan adopts, before anything
// is written. One that is not generator-backed (its data comes from a
// remote store) or produces another Secret is not ours to replace: refuse.
func (f *family) checkAdoption(ctx context.Context, _ *workflow.Run, _ *progress) (*workflow.Decision, error) {
	if f.adoptChecked {
		return nil, nil
	}
	for _, a := range f.cmd.Spec.Adopt {
		name := a.ExternalSecret
		es, err := f.kube.GetExternalSecret(ctx, name)
		if isNotFound(err) {
			f.external[name] = nil
			f.externalGone[name] = true
			f.note(store.Record{Kind: store.RecordObservation, Step: "read-external-secret", Target: "externalsecret/" + name,
				Status: reasonAbsent})
			continue
		}
		if err != nil {
			return nil, kubeErr(err)
		}
		backed, targetOK := generatorBacked(es), targetName(es) == name
		obs := store.Record{Kind: store.RecordObservation, Step: "read-external-secret", Target: "externalsecret/" + name,
			UID: string(es.GetUID()), ResourceVersion: es.GetResourceVersion(),
			Detail: map[string]any{"generatorBacked": backed, "terminating": es.GetDeletionTimestamp() != nil}}
		reason := ""
		switch {
		case !backed:
			reason = ReasonNotGeneratorBacked
		case !targetOK:
			reason = ReasonTargetMismatch
		}
		if reason != "" {
			return &workflow.Decision{Refuse: &workflow.Refusal{Reason: reason, Records: []store.Record{obs},
				Summary: map[string]any{"namespace": f.cmd.Spec.Namespace, "externalSecret": name}}}, nil
		}
		f.note(obs)
		f.external[name] = es
	}
	f.adoptChecked = true
	return nil, nil
}

// generatorBacked: every spec.dataFrom entry has sourceRef.generatorRef and
// there are no spec.data entries (those name remote keys).
func generatorBacked(es *unstructured.Unstructured) bool {
	data, _, _ := unstructured.NestedSlice(es.Object, "spec", "data")
	from, _, _ := unstructured.NestedSlice(es.Object, "spec", "dataFrom")
	if len(data) > 0 || len(from) == 0 {
		return false
	}
	for _, item := range from {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		if _, ok, _ := unstructured.NestedMap(m, "sourceRef", "generatorRef"); !ok {
			return false
		}
		for _, remote := range []string{"extract", "find"} {
			if _, ok := m[remote]; ok {
				return false
			}
		}
	}
	return true
}

// targetName is the Secret an ExternalSecret writes: spec.target.name, or
// its own name.
func targetName(es *unstructured.Unstructured) string {
	if name, ok, _ := unstructured.NestedString(es.Object, "spec", "target", "name"); ok && name != "" {
		return name
	}
	return es.GetName()
}

// orphanExternalSecrets deletes each adopted ExternalSecret with
// propagationPolicy Orphan (so its Secret stays) and waits until the garbage
// collector has released the Secret and removed the ExternalSecret.
func (f *family) orphanExternalSecrets(ctx context.Context, _ *workflow.Run, p *progress) (*workflow.Decision, error) {
	for _, a := range f.cmd.Spec.Adopt {
		name := a.ExternalSecret
		if f.externalGone[name] {
			continue
		}
		es := f.external[name]
		if !p.externalDeleted[name] && es != nil && es.GetDeletionTimestamp() == nil {
			return &workflow.Decision{Call: f.orphanCall(name, es.GetUID())}, nil
		}
		var uid types.UID
		if es != nil {
			uid = es.GetUID()
		}
		gone, err := wait(ctx, func(ctx context.Context) (bool, error) {
			cur, err := f.kube.GetExternalSecret(ctx, name)
			switch {
			case isNotFound(err):
				return true, nil
			case err != nil:
				return false, err
			case uid != "" && cur.GetUID() != uid:
				return false, errReplaced
			}
			return false, nil
		})
		if err == errReplaced {
			return &workflow.Decision{Refuse: &workflow.Refusal{Reason: ReasonExternalReplaced,
				Summary: map[string]any{"namespace": f.cmd.Spec.Namespace, "externalSecret": name}}}, nil
		}
		if err != nil && ctx.Err() == nil {
			return nil, kubeErr(err)
		}
		if !gone {
			return f.endWith(&workflow.Uncertain{Reason: ReasonExternalNotGone})
		}
		f.externalGone[name] = true
		f.note(store.Record{Kind: store.RecordObservation, Step: "wait-external-secret-gone", Target: "externalsecret/" + name,
			UID: string(uid), Status: "gone"})
	}
	return nil, nil
}

type replacedError struct{}

func (replacedError) Error() string { return "replaced by another object of the same name" }

var errReplaced error = replacedError{}

func (f *family) orphanCall(name string, uid types.UID) *workflow.Call {
	return &workflow.Call{
		Step: stepOrphanExternalSecret, Target: "externalsecret/" + name, UID: string(uid),
		Detail: map[string]any{"propagationPolicy": "Orphan"},
		Send: func(ctx context.Context) workflow.Answer {
			err := f.kube.OrphanExternalSecret(ctx, name, uid)
			switch {
			case err == nil:
				return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(uid), Reason: "deleting"}
			case isNotFound(err):
				return workflow.Answer{Status: workflow.Applied, Code: 404, UID: string(uid), Reason: reasonAbsent}
			}
			return answerFor(err)
		},
	}
}

func (f *family) resolveOrphan(ctx context.Context, name string, call store.Record) (workflow.Verdict, error) {
	es, err := f.kube.GetExternalSecret(ctx, name)
	switch {
	case isNotFound(err):
		return workflow.Verdict{Kind: workflow.Ours, Reason: "gone", UID: call.UID}, nil
	case err != nil:
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	case string(es.GetUID()) != call.UID:
		return workflow.Verdict{Kind: workflow.Theirs, Reason: ReasonExternalReplaced, UID: string(es.GetUID()),
			Summary: map[string]any{"namespace": f.cmd.Spec.Namespace, "externalSecret": name}}, nil
	case es.GetDeletionTimestamp() != nil:
		return workflow.Verdict{Kind: workflow.Ours, Reason: "deleting", UID: call.UID}, nil
	}
	return workflow.Verdict{Kind: workflow.NotApplied, Reason: "still-present", UID: call.UID, Retry: f.orphanCall(name, es.GetUID())}, nil
}

// deleteGenerators deletes each retired Password generator once all adopted
// ExternalSecrets are gone (nothing regenerates a value after that).
func (f *family) deleteGenerators(_ context.Context, _ *workflow.Run, p *progress) (*workflow.Decision, error) {
	for _, g := range f.cmd.Spec.GeneratorNames() {
		if _, done := p.generatorsDeleted[g]; !done {
			return &workflow.Decision{Call: f.deleteGeneratorCall(g)}, nil
		}
	}
	return nil, nil
}

func (f *family) deleteGeneratorCall(name string) *workflow.Call {
	return &workflow.Call{
		Step: stepDeleteGenerator, Target: "password/" + name,
		Send: func(ctx context.Context) workflow.Answer {
			err := f.kube.DeletePasswordGenerator(ctx, name)
			switch {
			case err == nil:
				return workflow.Answer{Status: workflow.Applied, Code: 200, Reason: "deleted"}
			case isNotFound(err):
				return workflow.Answer{Status: workflow.Applied, Code: 404, Reason: reasonAbsent}
			}
			return answerFor(err)
		},
	}
}
