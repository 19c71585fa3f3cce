package command

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// MaxSize is the largest command file Read accepts, in bytes.
const MaxSize = 64 << 10

// ReadOptions tunes Read.
type ReadOptions struct {
	// RequirePrivate refuses a file whose mode grants any group or world
	// permission (mode&0o077 != 0). Set it when the file holds secret values.
	RequirePrivate bool
	// FSGroup, when at least 0, is the group of a Kubernetes volume file
	// (the pod's fsGroup): the kubelet adds group read to every file of a
	// Secret volume it chowns to that group, so such a file can never be
	// 0600. A private file may then be group-readable, but only when its
	// group is FSGroup and this process holds FSGroup; world bits and group
	// write are refused all the same. Zero (the default) turns it off: root's
	// group is never trusted.
	FSGroup int
}

// File is a command file read from disk with a valid envelope.
type File struct {
	// Path is the absolute path the file was read from.
	Path string
	// Bytes is the raw content.
	Bytes []byte
	// Digest is "sha256:<hex>" of Bytes. It identifies these exact bytes (for
	// logs); idempotency uses the canonical Digest of the decoded document.
	Digest string
	// Envelope is the validated envelope; Spec is still raw.
	Envelope Envelope
	// Mode is the permission bits of the opened file (fstat on the
	// descriptor that was read), for RequirePrivate checks made once the
	// kind is known.
	Mode fs.FileMode
	// Gid is the file's group (fstat on the same descriptor).
	Gid uint32
	// fsGroup is ReadOptions.FSGroup.
	fsGroup int
	// checked: Read checked the envelope of Bytes, which decoding the
	// document need not check again while Bytes are unchanged (File.parsed).
	checked bool
}

// RequirePrivate refuses f, as Read with ReadOptions.RequirePrivate would,
// when its mode grants any group or world permission. Callers that learn
// only from the envelope's kind that the file holds values check it here.
func (f *File) RequirePrivate() error {
	return private(f.Path, f.Mode.Perm(), f.Gid, f.fsGroup)
}

// private refuses a mode with any world bit or group write or execute, and
// group read unless the file's group is fsGroup and this process holds it.
func private(path string, perm fs.FileMode, gid uint32, fsGroup int) error {
	switch {
	case perm&0o077 == 0:
		return nil
	case perm&0o037 != 0 || fsGroup <= 0:
		return notPrivate(path, perm)
	case gid != uint32(fsGroup) || !holdsGroup(fsGroup): //nolint:gosec // G115: fsGroup > 0 here (the case above), and a GID fits 32 bits
		return &FileError{Path: path, Reason: ReasonNotPrivate, Detail: fmt.Sprintf(
			"mode %#o grants group read to a group other than --fs-group %d held by this process", perm, fsGroup)}
	}
	return nil
}

// holdsGroup reports whether this process's effective or supplementary
// groups include gid.
func holdsGroup(gid int) bool {
	egid, groups := processGroups()
	return egid == gid || slices.Contains(groups, gid)
}

// processGroups is this process's effective and supplementary groups (a
// variable for tests).
var processGroups = func() (int, []int) {
	groups, _ := os.Getgroups()
	return os.Getegid(), groups
}

func notPrivate(path string, perm fs.FileMode) error {
	return &FileError{Path: path, Reason: ReasonNotPrivate,
		Detail: fmt.Sprintf("mode %#o grants group or world permissions; want no bits in 0o077, e.g. 0600", perm)}
}

// Read reads and validates the command file at path.
//
// The path must be absolute and clean with no ".." component. It is opened
// with openat2 and RESOLVE_NO_SYMLINKS: a symbolic link anywhere in the path,
// in a parent directory as well as the final component, is refused; a kernel
// without openat2 (before Linux 5.6) is refused too, rather than resolving
// the path some weaker way. O_NONBLOCK keeps a FIFO from blocking the open;
// type, size and mode are checked on the opened descriptor, so a swap
// between check and read is not possible. At most MaxSize bytes are
// accepted, counted while reading rather than trusted from fstat.
//
// Refusals before the content is looked at are *FileError; content problems
// are *InvalidError.
func Read(path string, opts ReadOptions) (*File, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	data, mode, gid, err := readFile(path, opts)
	if err != nil {
		return nil, err
	}
	env, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return &File{Path: path, Bytes: data, Digest: digestBytes(data), Envelope: *env, Mode: mode, Gid: gid, fsGroup: opts.FSGroup, checked: true}, nil
}

func checkPath(path string) error {
	refuse := func(reason, detail string) error {
		return &FileError{Path: path, Reason: reason, Detail: detail}
	}
	if !filepath.IsAbs(path) {
		return refuse(ReasonRelativePath, "want an absolute path")
	}
	if slices.Contains(strings.Split(path, "/"), "..") {
		return refuse(ReasonParentReference, `path has a ".." component`)
	}
	if filepath.Clean(path) != path {
		return refuse(ReasonUncleanPath, "want the path in clean form, without //, /./ or a trailing /")
	}
	return nil
}

func readFile(path string, opts ReadOptions) ([]byte, fs.FileMode, uint32, error) {
	refuse := func(reason, detail string, err error) error {
		return &FileError{Path: path, Reason: reason, Detail: detail, Err: err}
	}
	fd, err := openNoSymlinks(path)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, 0, 0, refuse(ReasonSymlink, "refusing to follow a symbolic link in the path", nil)
	case errors.Is(err, errNoOpenat2):
		return nil, 0, 0, refuse(ReasonNoSafeOpen, "this kernel has no openat2 (Linux 5.6 or later is needed) to open the path without following symbolic links", nil)
	case err != nil:
		return nil, 0, 0, refuse(ReasonUnreadable, "", &fs.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()

	info, err := f.Stat() // fstat on the opened descriptor
	if err != nil {
		return nil, 0, 0, refuse(ReasonUnreadable, "", err)
	}
	if !info.Mode().IsRegular() {
		return nil, 0, 0, refuse(ReasonNotRegular, "want a regular file, got "+fileType(info.Mode()), nil)
	}
	var gid uint32
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		gid = st.Gid
	}
	if opts.RequirePrivate {
		if err := private(path, info.Mode().Perm(), gid, opts.FSGroup); err != nil {
			return nil, 0, 0, err
		}
	}
	if info.Size() > MaxSize {
		return nil, 0, 0, refuse(ReasonTooLarge, fmt.Sprintf("want at most %d bytes", MaxSize), nil)
	}
	data, err := readLimited(f, MaxSize)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, 0, 0, refuse(ReasonTooLarge, fmt.Sprintf("want at most %d bytes", MaxSize), nil)
	case err != nil:
		return nil, 0, 0, refuse(ReasonUnreadable, "", err)
	}
	return data, info.Mode().Perm(), gid, nil
}

var (
	errTooLarge  = errors.New("too large")
	errNoOpenat2 = errors.New("openat2 is not available")
)

// readLimited reads r to the end, reading at most limit+1 bytes, and returns
// errTooLarge when there are more than limit.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	default:
		return "irregular file"
	}
}

func digestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
