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
	// The digest's PBKDF2 (VerifierIterations) runs while the permission
	// check and the journal connect do: the engine resolves it just
	// before the preparation (workflow.Plan.Digest).
	cmd, err := decode(f, true)
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
