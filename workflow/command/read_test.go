package command

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeFile writes data to name in dir with exactly mode, whatever the umask.
func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// sized pads a valid command document with white space to n bytes.
func sized(t *testing.T, n int) []byte {
	t.Helper()
	d := doc(`{"keyId":"k1"}`)
	require.LessOrEqual(t, len(d), n)
	return []byte(d + strings.Repeat(" ", n-len(d)))
}

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	valid := []byte(doc(`{"keyId":"k1"}`))
	private := writeFile(t, dir, "private.json", valid, 0o600)

	cases := []struct {
		name   string
		path   func(t *testing.T) string
		opts   ReadOptions
		reason string // "" means the read succeeds
	}{
		{name: "0600 private", path: func(*testing.T) string { return private }, opts: ReadOptions{RequirePrivate: true}},
		{name: "0400 private", path: func(t *testing.T) string { return writeFile(t, dir, "ro.json", valid, 0o400) }, opts: ReadOptions{RequirePrivate: true}},
		{name: "0644 without RequirePrivate", path: func(t *testing.T) string { return writeFile(t, dir, "public.json", valid, 0o644) }},
		{name: "exactly 64 KiB", path: func(t *testing.T) string { return writeFile(t, dir, "max.json", sized(t, MaxSize), 0o600) }},

		{name: "relative path", path: func(*testing.T) string { return "private.json" }, reason: ReasonRelativePath},
		{name: "empty path", path: func(*testing.T) string { return "" }, reason: ReasonRelativePath},
		{name: "dot dot", path: func(*testing.T) string { return dir + "/../" + filepath.Base(dir) + "/private.json" }, reason: ReasonParentReference},
		{name: "unclean", path: func(*testing.T) string { return dir + "//private.json" }, reason: ReasonUncleanPath},
		{name: "trailing slash", path: func(*testing.T) string { return dir + "/" }, reason: ReasonUncleanPath},
		{name: "symlink", path: func(t *testing.T) string {
			link := filepath.Join(dir, "link.json")
			require.NoError(t, os.Symlink(private, link))
			return link
		}, reason: ReasonSymlink},
		{name: "dangling symlink", path: func(t *testing.T) string {
			link := filepath.Join(dir, "dangling.json")
			require.NoError(t, os.Symlink(filepath.Join(dir, "nowhere"), link))
			return link
		}, reason: ReasonSymlink},
		{name: "symlink in a parent directory", path: func(t *testing.T) string {
			real := filepath.Join(dir, "real")
			require.NoError(t, os.Mkdir(real, 0o700))
			writeFile(t, real, "cmd.json", valid, 0o600)
			require.NoError(t, os.Symlink(real, filepath.Join(dir, "linked")))
			return filepath.Join(dir, "linked", "cmd.json")
		}, reason: ReasonSymlink},
		{name: "directory", path: func(*testing.T) string { return dir }, reason: ReasonNotRegular},
		{name: "fifo", path: func(t *testing.T) string {
			fifo := filepath.Join(dir, "fifo.json")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			return fifo
		}, reason: ReasonNotRegular},
		{name: "missing", path: func(*testing.T) string { return filepath.Join(dir, "missing.json") }, reason: ReasonUnreadable},
		{name: "oversize", path: func(t *testing.T) string { return writeFile(t, dir, "big.json", sized(t, MaxSize+1), 0o600) }, reason: ReasonTooLarge},
		{name: "world readable", path: func(t *testing.T) string { return writeFile(t, dir, "world.json", valid, 0o604) }, opts: ReadOptions{RequirePrivate: true}, reason: ReasonNotPrivate},
		{name: "group readable", path: func(t *testing.T) string { return writeFile(t, dir, "group.json", valid, 0o640) }, opts: ReadOptions{RequirePrivate: true}, reason: ReasonNotPrivate},
		{name: "group executable", path: func(t *testing.T) string { return writeFile(t, dir, "gx.json", valid, 0o610) }, opts: ReadOptions{RequirePrivate: true}, reason: ReasonNotPrivate},
		{name: "0644 private", path: func(t *testing.T) string { return writeFile(t, dir, "p644.json", valid, 0o644) }, opts: ReadOptions{RequirePrivate: true}, reason: ReasonNotPrivate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := tc.path(t)
			type result struct {
				f   *File
				err error
			}
			done := make(chan result, 1)
			go func() {
				f, err := Read(path, tc.opts)
				done <- result{f, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Read hung")
			}
			if tc.reason == "" {
				require.NoError(t, r.err)
				sum := sha256.Sum256(r.f.Bytes)
				require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), r.f.Digest)
				require.Equal(t, path, r.f.Path)
				require.Equal(t, KindKeyRetirement, r.f.Envelope.Kind)
				return
			}
			require.Error(t, r.err)
			require.Nil(t, r.f)
			var fe *FileError
			require.ErrorAs(t, r.err, &fe, "error %q", r.err)
			require.Equal(t, tc.reason, fe.Reason, "error %q", r.err)
			require.ErrorIs(t, r.err, &FileError{Reason: tc.reason})
			require.Contains(t, r.err.Error(), tc.reason)
			if path != "" {
				require.NotContains(t, r.err.Error(), path, "the message never holds the path")
			}
		})
	}
}

func TestReadMissingIsNotExist(t *testing.T) {
	t.Parallel()
	_, err := Read(filepath.Join(t.TempDir(), "missing.json"), ReadOptions{})
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestReadInvalidContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFile(t, dir, "bad.json", []byte(doc(`{"keyId":"k1"}`)+"x"), 0o600)
	_, err := Read(path, ReadOptions{RequirePrivate: true})
	requireInvalid(t, err, "", "data after the top-level object")

	path = writeFile(t, dir, "kind.json", []byte(strings.Replace(doc(`{}`), "KeyRetirement", "Nope", 1)), 0o600)
	_, err = Read(path, ReadOptions{})
	requireInvalid(t, err, "kind", "")
}

func TestReadLimited(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		size int
		err  error
	}{
		{name: "empty", size: 0},
		{name: "at limit", size: 10},
		{name: "over limit", size: 11, err: errTooLarge},
		{name: "far over limit", size: 1 << 20, err: errTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &countingReader{r: strings.NewReader(strings.Repeat("a", tc.size))}
			data, err := readLimited(r, 10)
			if tc.err != nil {
				require.True(t, errors.Is(err, tc.err))
				require.LessOrEqual(t, r.n, 11, "reads at most limit+1 bytes")
				return
			}
			require.NoError(t, err)
			require.Len(t, data, tc.size)
		})
	}
}

type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestDecodeReusesReadsScan: decoding a file Read returned reuses Read's
// check of its envelope, and only while they are those bytes: changed in
// place after Read, the document is scanned and checked again.
func TestDecodeReusesReadsScan(t *testing.T) {
	t.Parallel()
	good := doc(`{"keyId":"k1","note":"abc"}`)
	f, err := Read(writeFile(t, t.TempDir(), "cmd.json", []byte(good), 0o600), ReadOptions{})
	require.NoError(t, err)
	require.True(t, f.checked, "Read keeps its check")
	d, err := Decode[testSpec](f)
	require.NoError(t, err)
	require.Equal(t, "k1", d.Spec.KeyID)

	// The same length, now with a duplicate member (Decode's own scan sees
	// it) and another apiVersion (only a check of the envelope sees it).
	bad := doc(`{"keyId":"k1","keyId":"k2"}`)
	require.Len(t, bad, len(good))
	copy(f.Bytes, bad)
	_, err = Decode[testSpec](f)
	requireInvalid(t, err, "spec.keyId", "")
	copy(f.Bytes, strings.Replace(good, APIVersion, "keyledger.dev/v2", 1))
	_, err = Decode[testSpec](f)
	requireInvalid(t, err, "apiVersion", "")
	var spec testSpec
	requireInvalid(t, f.DecodeSpec(&spec), "apiVersion", "")
}
