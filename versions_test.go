package keyledger

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestImageIsTheVersionsTableRow(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("versions.env")
	require.NoError(t, err)
	require.Contains(t, string(b), "\nKEYLEDGER_IMAGE="+Image()+"\n")
	require.Regexp(t, `^keyledger:[0-9A-Za-z._-]+$`, Image())
	require.Equal(t, "", Version("NO_SUCH_ROW"))
}
