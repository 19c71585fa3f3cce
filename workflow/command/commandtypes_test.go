package command_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// specTypes are the spec types the families decode each kind into
// (command.Decode and DecodeKind in their spec.go).
var specTypes = map[string]func() any{
	command.KindKeyRetirement:  func() any { return new(command.Document[retire.Spec]) },
	command.KindCredentialPlan: func() any { return new(command.Document[credentials.Spec]) },
	command.KindSecretUpdate:   func() any { return new(command.Document[versioned.UpdateSpec]) },
	command.KindSecretRestore:  func() any { return new(command.Document[versioned.RestoreSpec]) },
	command.KindSecretDelete:   func() any { return new(command.Document[versioned.DeleteSpec]) },
}

// Every type the package decodes command files into (the envelope, and the
// document of each kind) holds only kinds DecodeStrict supports: a field
// of another kind fails here, where DecodeStrict would refuse every
// document with a programming error. The examples decode into them.
func TestCommandTypesAreSupported(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, command.Kinds, slices.Collect(maps.Keys(specTypes)), "a spec type for every kind")
	require.NoError(t, command.DecodeStrict([]byte(`{}`), new(command.Envelope)))
	for kind, target := range specTypes {
		require.NoError(t, command.DecodeStrict([]byte(`{}`), target()), kind)
	}
	examples, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, examples)
	for _, path := range examples {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var env struct{ Kind string }
		require.NoError(t, json.Unmarshal(data, &env), path)
		require.Contains(t, specTypes, env.Kind, path)
		require.NoError(t, command.DecodeStrict(data, new(command.Envelope)), path)
		require.NoError(t, command.DecodeStrict(data, specTypes[env.Kind]()), path)
	}
}
