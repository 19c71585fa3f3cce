package app

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/store"
)

// TestPrintRows: journal grants prints a table with one line a grant under
// its header, or JSON, where no grant is an empty list (never null).
func TestPrintRows(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	grants := []store.NamespaceGrant{{Role: "keyledger_ai", Namespace: "ai", GrantedAt: at}, {Role: "keyledger_shop", Namespace: "shop", GrantedAt: at}}
	cells := func(g store.NamespaceGrant) []any {
		return []any{g.Role, g.Namespace, g.GrantedAt.Format(time.RFC3339)}
	}

	var out bytes.Buffer
	require.NoError(t, printRows(IOStreams{Out: &out}, "table", grants, "ROLE\tNAMESPACE\tGRANTED", cells))
	require.Equal(t, "ROLE            NAMESPACE  GRANTED\n"+
		"keyledger_ai    ai         2026-12-01T12:00:00Z\n"+
		"keyledger_shop  shop       2026-12-01T12:00:00Z\n", out.String())

	out.Reset()
	require.NoError(t, printRows(IOStreams{Out: &out}, "json", []store.NamespaceGrant(nil), "ROLE", cells))
	require.Equal(t, "[]\n", out.String())
}
