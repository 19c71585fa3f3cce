package integration

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
)

// `keyledger version --database-url URL` says which schema version the
// journal holds beside the one the binary expects: equal after migrate
// up, 0 on a database never migrated; never the URL.
func TestIntegrationVersionSchema(t *testing.T) {
	t.Parallel()
	e := setup(t)
	latest := suite.LatestVersion(t)
	for _, tc := range []struct {
		name, url string
		found     uint
	}{
		{"migrated", e.Journal.OwnerURL, latest},
		{"never-migrated", suite.FreshDatabase(t), 0},
	} {
		r := e.Keyledger([]string{"version", "--database-url", tc.url})
		require.Equal(t, 0, r.Code, "%s: %s %s", tc.name, r.Stdout, r.Stderr)
		var v struct {
			Schema struct {
				Expected uint  `json:"expected"`
				Found    *uint `json:"found"`
				Dirty    *bool `json:"dirty"`
			} `json:"schema"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &v), r.Stdout)
		require.Equal(t, latest, v.Schema.Expected, tc.name)
		require.NotNil(t, v.Schema.Found, tc.name)
		require.Equal(t, tc.found, *v.Schema.Found, tc.name)
		require.False(t, *v.Schema.Dirty, tc.name)
		require.NotContains(t, r.Stdout+r.Stderr, tc.url, tc.name)
	}
}
