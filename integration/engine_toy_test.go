package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube"
)

// The toy operation proves the engine on its own: it claims a ConfigMap for
// one mutation by writing an annotation with get + update compare-and-set.
// It is the smallest family there is, so the engine's crash, resume and
// resolution behaviour is tested apart from any real workflow.
const (
	// childEnv makes the test binary run one toy operation and exit, so a
	// failpoint can kill a real process.
	childEnv = "KEYLEDGER_TOY_CHILD"
)

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
	res, err := suite.RunToy(ctx, client, os.Getenv("KEYLEDGER_DATABASE_URL"), os.Getenv("TOY_NAMESPACE"), os.Getenv("TOY_NAME"), os.Getenv("TOY_MUTATION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 75
	}
	b, _ := json.Marshal(map[string]string{"outcome": string(res.Outcome)})
	fmt.Println(string(b))
	return 0
}
