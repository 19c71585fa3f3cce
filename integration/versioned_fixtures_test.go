package integration

import (
	"github.com/keyledger/keyledger/integration/suite"
)

func restoreCommand(ns, name, rv, mutation string, version int64) map[string]any {
	c := suite.VMeta("SecretRestore", mutation)
	c["spec"] = map[string]any{"namespace": ns, "name": name, "expectedResourceVersion": rv, "version": version}
	return c
}
