package command

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A caller that reads without RequirePrivate (the kind is not known yet)
// and then checks File.RequirePrivate refuses exactly what Read with
// RequirePrivate refuses, judged on the mode of the descriptor it read.
func TestFileRequirePrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := []byte(doc(`{"keyId":"k1"}`))
	cases := []struct {
		name    string
		mode    os.FileMode
		private bool
	}{
		{"0600", 0o600, true},
		{"0400", 0o400, true},
		{"0700", 0o700, true},
		{"0640 group readable", 0o640, false},
		{"0604 world readable", 0o604, false},
		{"0620 group writable", 0o620, false},
		{"0601 world executable", 0o601, false},
		{"0644", 0o644, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, dir, tc.name+".json", valid, tc.mode)
			f, err := Read(path, ReadOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.mode, f.Mode, "the mode of the opened file is kept")
			_, strictErr := Read(path, ReadOptions{RequirePrivate: true})
			err = f.RequirePrivate()
			if tc.private {
				require.NoError(t, err)
				require.NoError(t, strictErr)
				return
			}
			require.ErrorIs(t, err, &FileError{Reason: ReasonNotPrivate})
			require.ErrorIs(t, strictErr, &FileError{Reason: ReasonNotPrivate})
			require.Equal(t, strictErr.Error(), err.Error(), "same refusal either way")
		})
	}
	// The mode is the one read, not the file's mode at check time.
	path := writeFile(t, dir, "later.json", valid, 0o600)
	f, err := Read(path, ReadOptions{})
	require.NoError(t, err)
	require.NoError(t, os.Chmod(path, 0o644))
	require.NoError(t, f.RequirePrivate())
}
