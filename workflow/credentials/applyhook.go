package credentials

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
)

// HookFiles are the file names `render credentials --out-dir` writes and
// `apply-hook` applies, in the order of the objects Hook renders.
var HookFiles = []string{"1-serviceaccount.yaml", "2-role.yaml", "3-rolebinding.yaml", "4-configmap.yaml", "5-networkpolicy.yaml", "6-job.yaml"}

// Reasons apply-hook ends with.
const (
	ReasonHookJobFailed     = "hook-job-failed"
	ReasonHookJobUnfinished = "hook-job-unfinished"
)

// hookAPI is what ApplyHook needs of the cluster (kube.Hook).
type hookAPI interface {
	Delete(ctx context.Context, o metav1.Object) error
	WaitGone(ctx context.Context, o metav1.Object) error
	Create(ctx context.Context, o metav1.Object) error
	WaitJob(ctx context.Context, name string) (failed bool, why string, err error)
}

var _ hookAPI = (*kube.Hook)(nil)

// ApplyHook runs the rendered hook as Argo CD runs a PreSync hook with
// BeforeHookCreation: each object in order is deleted, awaited gone and
// created again, then the Job is awaited, all within timeout. A failed
// delete or create is *workflow.Unavailable, a Job that does not finish in
// time *workflow.Uncertain, a failed Job *workflow.Refused.
func ApplyHook(ctx context.Context, hook hookAPI, o *kube.HookObjects, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, obj := range o.InOrder() {
		ref := kube.HookRef(obj)
		if err := hook.Delete(ctx, obj); err != nil {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: fmt.Errorf("deleting %s: %w", ref, err)}
		}
		if err := hook.WaitGone(ctx, obj); err != nil {
			return fmt.Errorf("waiting for the old %s to go: %w", ref, err)
		}
		if err := hook.Create(ctx, obj); err != nil {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: fmt.Errorf("creating %s: %w", ref, err)}
		}
	}
	failed, why, err := hook.WaitJob(ctx, o.Job.Name)
	switch {
	case err != nil:
		return &workflow.Uncertain{Reason: ReasonHookJobUnfinished, Err: err}
	case failed:
		// why is the Job's Failed condition (with the podFailurePolicy: the
		// container and its exit code); the pods' termination messages hold
		// keyledger's outcome and reason.
		return &workflow.Refused{Reason: ReasonHookJobFailed, Detail: "job " + o.Job.Name + " failed (" + why +
			"); its pods' termination messages say why"}
	}
	return nil
}
