package credentials

import (
	"context"
	"net/http"

	"github.com/keyledger/keyledger/workflow"
)

// DryAnswer tells keyledger plan what a create would answer, from a read:
// a Secret that already exists answers 409 (the run then reads it and
// patches in only what it lacks). Every other call is taken as applied.
func (f *family) DryAnswer(ctx context.Context, c *workflow.Call) (workflow.Answer, bool, error) {
	if c.Step != stepCreateSecret {
		return workflow.Answer{}, false, nil
	}
	_, err := f.kube.GetSecret(ctx, c.Target.Name)
	switch {
	case isNotFound(err):
		return workflow.Answer{}, false, nil
	case err != nil:
		return workflow.Answer{}, false, kubeErr(err)
	}
	return workflow.Answer{Status: workflow.Unknown, Code: http.StatusConflict, Reason: reasonAlreadyExists}, true, nil
}
