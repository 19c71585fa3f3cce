package versioned

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPBKDF2MatchesTheStandardLibrary: pbkdf2SHA256 gives crypto/pbkdf2's
// bytes for passwords shorter and longer than a block (hashed first),
// empty ones, salts of any length and iteration counts from 1, and for the
// verifier's own count.
func TestPBKDF2MatchesTheStandardLibrary(t *testing.T) {
	t.Parallel()
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	for _, pwLen := range []int{0, 1, 31, 32, 55, 63, 64, 65, 200, 4096} {
		for _, saltLen := range []int{0, 1, 40, 64, 119} {
			for _, iter := range []int{1, 2, 3, 17} {
				pw, salt := string(random(pwLen)), random(saltLen)
				want, err := pbkdf2.Key(sha256.New, pw, salt, iter, 32)
				require.NoError(t, err)
				got, err := pbkdf2SHA256(pw, salt, iter)
				require.NoError(t, err)
				require.Equal(t, want, got, "password %d bytes, salt %d bytes, %d iterations", pwLen, saltLen, iter)
			}
		}
	}
	pw, salt := string(random(300)), []byte("keyledger.dev/secret-update/v2\x00mut-1")
	want, err := pbkdf2.Key(sha256.New, pw, salt, VerifierIterations, 32)
	require.NoError(t, err)
	got, err := pbkdf2SHA256(pw, salt, VerifierIterations)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// BenchmarkVerifier compares one verifier derivation with crypto/pbkdf2's.
func BenchmarkVerifier(b *testing.B) {
	pw, salt := "password\x00value", []byte("keyledger.dev/secret-update/v2\x00mut-1")
	b.Run("pbkdf2SHA256", func(b *testing.B) {
		for b.Loop() {
			_, _ = pbkdf2SHA256(pw, salt, VerifierIterations)
		}
	})
	b.Run("crypto/pbkdf2", func(b *testing.B) {
		for b.Loop() {
			_, _ = pbkdf2.Key(sha256.New, pw, salt, VerifierIterations, 32)
		}
	})
}
