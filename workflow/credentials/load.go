package credentials

import (
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Load is the credential plan's workflow.Loader: it takes the run bound
// (RunBoundFromEnv; a bad value is a setting error, exit 64). The
// plan file is read without RequirePrivate: a plan holds no secret values
// (its literal values are user names, and render ships it in a
// ConfigMap); generated values never leave the run.
func Load(f *command.File, lookup func(string) (string, bool)) (workflow.Builder, error) {
	cmd, err := Decode(f)
	if err != nil {
		return nil, err
	}
	bound, err := RunBoundFromEnv(lookup)
	if err != nil {
		return nil, err
	}
	return func(cfg *rest.Config, _ kube.Interface) (workflow.Plan, error) {
		plan, err := Plan(cmd, cfg)
		if err != nil {
			return plan, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
		}
		plan.Prepare.Bound = bound
		return plan, nil
	}, nil
}
