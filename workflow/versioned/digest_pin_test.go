package versioned

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/workflow/command"
)

// TestUpdateDigestIsPinned: the command digest of a SecretUpdate, as the
// journal holds it, is the same bytes from one release to the next (a
// changed digest would make a rerun of a journaled command look like
// another command and be refused). The digests were computed by the code
// that journaled them; the commands cover a short value, a value longer
// than a SHA-256 block (PBKDF2 hashes such a password first), several keys
// and a creation with removeKeys absent.
func TestUpdateDigestIsPinned(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct{ name, spec, digest string }{
		{
			name:   "one short value",
			spec:   `{"namespace":"shop","name":"db","expectedResourceVersion":"7","data":{"password":"` + b64("hunter2") + `"}}`,
			digest: "sha256:805bb91e4d9a4adca88fb419c09dae69a763613a90e52acf8859e775e211c915",
		},
		{
			name: "several keys, one longer than a block, and a removal",
			spec: `{"namespace":"shop","name":"db","expectedResourceVersion":"42","data":{"user":"` + b64("app") +
				`","tls.key":"` + b64(strings.Repeat("k", 300)) + `","empty":""},"removeKeys":["old"]}`,
			digest: "sha256:a34bda4c7c2d20b0930f048315e1d6f02c8c1c63ec1ffbe1940f2bf190a2685f",
		},
		{
			name:   "a creation",
			spec:   `{"namespace":"shop","name":"db","expectedResourceVersion":"","data":{"token":"` + b64("s3cr3t-t0ken") + `"}}`,
			digest: "sha256:999756f48398eb2e1251c51dd6cad4f0cbb940d06a69a88fe4ba36f431bca6dd",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd, err := Decode(writeCommand(t, envelope(command.KindSecretUpdate, tc.spec), 0o600))
			require.NoError(t, err)
			require.Equal(t, tc.digest, cmd.Digest)
		})
	}
}

// TestValuesVerifierIsPinned: the PBKDF2 verifier that stands for an
// update's values in its digest, pinned the same way.
func TestValuesVerifierIsPinned(t *testing.T) {
	t.Parallel()
	got, err := valuesVerifier("m-1", map[string][]byte{"password": []byte("hunter2"), "tls.key": []byte(strings.Repeat("k", 300))})
	require.NoError(t, err)
	require.Equal(t, "pbkdf2-sha256:6a095ba49ba20d1e734f1036eed631d8d583c9f79332449b2979804488187907:password,tls.key", got)
}
