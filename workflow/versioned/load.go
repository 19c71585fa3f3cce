package versioned

import (
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow"
	"github.com/keyledger/keyledger/workflow/command"
)

// Load is the versioned writes' workflow.Loader: it reads the retention
// limit from HistoryLimitEnv.
func Load(f *command.File, lookup func(string) (string, bool)) (workflow.Builder, error) {
	cmd, err := Decode(f)
	if err != nil {
		return nil, err
	}
	limit, err := ParseHistoryLimit(lookup(HistoryLimitEnv))
	if err != nil {
		return nil, &workflow.SettingError{Name: HistoryLimitEnv, Err: err}
	}
	return func(_ *rest.Config, client kube.Interface) (workflow.Plan, error) {
		return Plan(cmd, client, limit), nil
	}, nil
}
