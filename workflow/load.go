package workflow

import (
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/command"
)

// Builder makes a family's plan once the cluster configuration is loaded.
type Builder func(cfg *rest.Config, client kube.Interface) (Plan, error)

// Loader decodes and validates one command file of a family, reading the
// environment settings the family takes through lookup (os.LookupEnv), and
// contacts nothing: every error is the command's or a setting's (exit 64).
type Loader func(f *command.File, lookup func(name string) (string, bool)) (Builder, error)
