package suite

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// NewConfigMap creates the toy operation's target.
func (e *Env) NewConfigMap(name string) *corev1.ConfigMap {
	e.T.Helper()
	cm, err := e.Kube.Client().CoreV1().ConfigMaps(e.NS).Create(e.T.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	return cm
}

// ToyAnnotation is what the toy family's one step writes on its ConfigMap.
const ToyAnnotation = "toy.keyledger.dev/mutation"

// ToyStep is the toy family's one step.
const ToyStep = "annotate-configmap"

// ToyFamily claims a ConfigMap by annotating it with the mutation: the
// smallest family the engine can run.
type ToyFamily struct {
	Cms      typedcorev1.ConfigMapInterface
	Name     string
	Mutation string
}

func (f *ToyFamily) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	cm, err := f.Cms.Get(ctx, f.Name, metav1.GetOptions{})
	if err != nil {
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	switch cm.Annotations[ToyAnnotation] {
	case f.Mutation:
		return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}, nil
	case "":
		return workflow.Decision{Call: f.Call(cm)}, nil
	default:
		return workflow.Decision{Refuse: &workflow.Refusal{Reason: "claimed-by-another"}}, nil
	}
}

func (f *ToyFamily) Call(cm *corev1.ConfigMap) *workflow.Call {
	desired := cm.DeepCopy()
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[ToyAnnotation] = f.Mutation
	return &workflow.Call{
		Step: ToyStep, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Final: true,
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.Cms.Update(ctx, desired, metav1.UpdateOptions{})
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
		},
	}
}

func (f *ToyFamily) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	cm, err := f.Cms.Get(ctx, f.Name, metav1.GetOptions{})
	if err != nil {
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	}
	v := workflow.Verdict{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	switch {
	case cm.Annotations[ToyAnnotation] == f.Mutation:
		v.Kind = workflow.Ours
	case cm.Annotations[ToyAnnotation] != "":
		v.Kind, v.Reason = workflow.Theirs, "claimed-by-another"
	case cm.ResourceVersion == call.ResourceVersion:
		v.Kind, v.Reason, v.Retry = workflow.NotApplied, "resource-version-unchanged", f.Call(cm)
	default:
		v.Kind, v.Reason = workflow.Theirs, "changed-concurrently"
	}
	return v, nil
}

// ConfirmReplay: a completed claim is a replay only while the ConfigMap
// carries this mutation's annotation.
func (f *ToyFamily) ConfirmReplay(ctx context.Context, _ *workflow.Run) (*workflow.Contradiction, error) {
	cm, err := f.Cms.Get(ctx, f.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if cm.Annotations[ToyAnnotation] != f.Mutation {
		return &workflow.Contradiction{Reason: "replay-claim-missing"}, nil
	}
	return nil, nil
}

// ToyPlan is the plan for claiming namespace/name for mutation.
func ToyPlan(client kube.Interface, namespace, name, mutation string) workflow.Plan {
	return workflow.Plan{
		Prepare: store.PrepareParams{
			Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
			CommandDigest: "sha256:" + fmt.Sprintf("%064x", len(mutation)), Namespace: namespace, Name: name,
		},
		Family: &ToyFamily{Cms: typedcorev1.New(client.CoreREST()).ConfigMaps(namespace), Name: name, Mutation: mutation},
	}
}

// RunToy runs one toy operation in this process.
func RunToy(ctx context.Context, client kube.Interface, databaseURL, namespace, name, mutation string) (*workflow.Result, error) {
	deps := workflow.Deps{
		Kube:      client,
		OpenStore: workflow.PostgresStore(databaseURL),
		Log:       slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	}
	return workflow.Execute(ctx, deps, ToyPlan(client, namespace, name, mutation))
}
