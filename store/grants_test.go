package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckGrantArgs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		role       string
		namespaces []string
		reason     string
		want       []string
	}{
		{"one", "kl_ai", []string{"ai"}, "", []string{"ai"}},
		{"repeats count once, in order", "keyledger-shop", []string{"shop", "ai", "shop"}, "", []string{"shop", "ai"}},
		{"63 characters", strings.Repeat("r", 63), []string{strings.Repeat("n", 63)}, "", []string{strings.Repeat("n", 63)}},
		{"upper case role", "KL_ai", []string{"ai"}, ReasonInvalidRole, nil},
		{"role with a space", "kl ai", []string{"ai"}, ReasonInvalidRole, nil},
		{"role with a quote", `kl"ai`, []string{"ai"}, ReasonInvalidRole, nil},
		{"reserved role", "pg_read_all_data", []string{"ai"}, ReasonInvalidRole, nil},
		{"empty role", "", []string{"ai"}, ReasonInvalidRole, nil},
		{"64-character role", strings.Repeat("r", 64), []string{"ai"}, ReasonInvalidRole, nil},
		{"no namespace", "kl_ai", nil, ReasonInvalidNamespace, nil},
		{"namespace with upper case", "kl_ai", []string{"Ai"}, ReasonInvalidNamespace, nil},
		{"namespace ending in -", "kl_ai", []string{"ai-"}, ReasonInvalidNamespace, nil},
		{"namespace with a dot", "kl_ai", []string{"a.i"}, ReasonInvalidNamespace, nil},
		{"64-character namespace", "kl_ai", []string{strings.Repeat("n", 64)}, ReasonInvalidNamespace, nil},
	} {
		got, err := CheckGrantArgs(c.role, c.namespaces)
		if c.reason == "" {
			require.NoError(t, err, c.name)
			require.Equal(t, c.want, got, c.name)
			continue
		}
		var pre *PreconditionError
		require.True(t, errors.As(err, &pre), "%s: %v", c.name, err)
		require.Equal(t, c.reason, pre.Reason, c.name)
		require.False(t, pre.Permission, c.name)
	}
}
