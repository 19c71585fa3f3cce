package retire

import (
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Load is the retirement's workflow.Loader: it takes no setting.
func Load(f *command.File, _ func(string) (string, bool)) (workflow.Builder, error) {
	cmd, err := Decode(f)
	if err != nil {
		return nil, err
	}
	return func(_ *rest.Config, client kube.Interface) (workflow.Plan, error) {
		return Plan(cmd, client), nil
	}, nil
}
