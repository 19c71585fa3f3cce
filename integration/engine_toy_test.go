package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// The toy operation proves the engine on its own: it claims a ConfigMap for
// one mutation by writing an annotation with get + update compare-and-set.
// It is the smallest family there is, so the engine's crash, resume and
// resolution behaviour is tested apart from any real workflow.
const (
	toyAnnotation = "toy.keyledger.dev/mutation"
	toyStep       = "annotate-configmap"
	// childEnv makes the test binary run one toy operation and exit, so a
	// failpoint can kill a real process.
	childEnv = "KEYLEDGER_TOY_CHILD"
)

type toyFamily struct {
	cms      typedcorev1.ConfigMapInterface
	name     string
	mutation string
}

func (f *toyFamily) Decide(ctx context.Context, run *workflow.Run) (workflow.Decision, error) {
	cm, err := f.cms.Get(ctx, f.name, metav1.GetOptions{})
	if err != nil {
		return workflow.Decision{}, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	switch cm.Annotations[toyAnnotation] {
	case f.mutation:
		return workflow.Decision{Complete: &workflow.Completion{Outcome: workflow.OutcomeExisting}}, nil
	case "":
		return workflow.Decision{Call: f.call(cm)}, nil
	default:
		return workflow.Decision{Refuse: &workflow.Refusal{Reason: "claimed-by-another"}}, nil
	}
}

func (f *toyFamily) call(cm *corev1.ConfigMap) *workflow.Call {
	desired := cm.DeepCopy()
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	desired.Annotations[toyAnnotation] = f.mutation
	return &workflow.Call{
		Step: toyStep, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Final: true,
		Send: func(ctx context.Context) workflow.Answer {
			got, err := f.cms.Update(ctx, desired, metav1.UpdateOptions{})
			if err != nil {
				return workflow.KubeAnswer(workflow.KubeWrite, err)
			}
			return workflow.Answer{Status: workflow.Applied, Code: 200, UID: string(got.UID), ResourceVersion: got.ResourceVersion}
		},
	}
}

func (f *toyFamily) Resolve(ctx context.Context, run *workflow.Run, call store.Record) (workflow.Verdict, error) {
	cm, err := f.cms.Get(ctx, f.name, metav1.GetOptions{})
	if err != nil {
		return workflow.Verdict{Kind: workflow.Undetermined, Reason: "read-failed", Err: err}, nil
	}
	v := workflow.Verdict{UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	switch {
	case cm.Annotations[toyAnnotation] == f.mutation:
		v.Kind = workflow.Ours
	case cm.Annotations[toyAnnotation] != "":
		v.Kind, v.Reason = workflow.Theirs, "claimed-by-another"
	case cm.ResourceVersion == call.ResourceVersion:
		v.Kind, v.Reason, v.Retry = workflow.NotApplied, "resource-version-unchanged", f.call(cm)
	default:
		v.Kind, v.Reason = workflow.Theirs, "changed-concurrently"
	}
	return v, nil
}

// ConfirmReplay: a completed claim is a replay only while the ConfigMap
// carries this mutation's annotation.
func (f *toyFamily) ConfirmReplay(ctx context.Context, _ *workflow.Run) (*workflow.Contradiction, error) {
	cm, err := f.cms.Get(ctx, f.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if cm.Annotations[toyAnnotation] != f.mutation {
		return &workflow.Contradiction{Reason: "replay-claim-missing"}, nil
	}
	return nil, nil
}

// toyPlan is the plan for claiming namespace/name for mutation.
func toyPlan(client kube.Interface, namespace, name, mutation string) workflow.Plan {
	return workflow.Plan{
		Prepare: store.PrepareParams{
			Kind: "ToyClaim", MutationID: mutation, RequestID: "req-" + mutation,
			CommandDigest: "sha256:" + fmt.Sprintf("%064x", len(mutation)), Namespace: namespace, Name: name,
		},
		Family: &toyFamily{cms: typedcorev1.New(client.CoreREST()).ConfigMaps(namespace), name: name, mutation: mutation},
	}
}

// runToy runs one toy operation in this process.
func runToy(ctx context.Context, client kube.Interface, databaseURL, namespace, name, mutation string) (*workflow.Result, error) {
	deps := workflow.Deps{
		Kube:      client,
		OpenStore: workflow.PostgresStore(databaseURL),
		Log:       slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	}
	return workflow.Execute(ctx, deps, toyPlan(client, namespace, name, mutation))
}

// runChild is the test binary's child mode: one toy operation, outcome on stdout.
func runChild() int {
	ctx := context.Background()
	cfg, err := kube.LoadConfig(kube.ConfigOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 69
	}
	client, err := kube.NewClient(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 69
	}
	res, err := runToy(ctx, client, os.Getenv("KEYLEDGER_DATABASE_URL"), os.Getenv("TOY_NAMESPACE"), os.Getenv("TOY_NAME"), os.Getenv("TOY_MUTATION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 75
	}
	b, _ := json.Marshal(map[string]string{"outcome": string(res.Outcome)})
	fmt.Println(string(b))
	return 0
}
