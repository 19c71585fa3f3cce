package command

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// InvalidError reports a command file whose content breaks a rule. Field is
// a JSON path into the document ("spec.secrets[2].keys[0].name"), empty for
// the document as a whole. Problem says what is wrong. Neither ever contains
// a value from the file: values may be secrets. Member names may appear in
// Field.
type InvalidError struct {
	Field   string
	Problem string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "command file: " + e.Problem
	}
	return "command file: " + e.Field + ": " + e.Problem
}

// Is reports whether target is an *InvalidError with the same Field and, when
// the target sets one, the same Problem.
func (e *InvalidError) Is(target error) bool {
	t, ok := target.(*InvalidError)
	if !ok {
		return false
	}
	return t.Field == e.Field && (t.Problem == "" || t.Problem == e.Problem)
}

// Invalid returns an *InvalidError for field. Families use it for their own
// rules: command.Invalid("spec.name", err.Error()). The problem must not
// contain the offending value.
func Invalid(field, problem string) *InvalidError {
	return &InvalidError{Field: field, Problem: problem}
}

// Required returns the *InvalidError for a missing member:
// "command file: spec.keyId: required".
func Required(field string) *InvalidError {
	return Invalid(field, "required")
}

// Reasons carried by [FileError]. They are stable: tests and operators match
// them.
const (
	// ReasonRelativePath: the path is not absolute.
	ReasonRelativePath = "relative-path"
	// ReasonParentReference: the path has a ".." component.
	ReasonParentReference = "parent-reference"
	// ReasonUncleanPath: the path is not in filepath.Clean form.
	ReasonUncleanPath = "unclean-path"
	// ReasonSymlink: the final path component is a symbolic link.
	ReasonSymlink = "symlink"
	// ReasonNotRegular: the path names a directory, FIFO, device or socket.
	ReasonNotRegular = "not-regular"
	// ReasonTooLarge: the file is larger than MaxSize.
	ReasonTooLarge = "too-large"
	// ReasonNotPrivate: ReadOptions.RequirePrivate is set and the file grants
	// group or world permissions.
	ReasonNotPrivate = "not-private"
	// ReasonUnreadable: opening, inspecting or reading the file failed; Err
	// holds the cause.
	ReasonUnreadable = "unreadable"
	// ReasonNoSafeOpen: the kernel cannot open a path without following
	// symbolic links in its parent directories (no openat2).
	ReasonNoSafeOpen = "no-safe-open"
)

// Reasons lists every reason a [FileError] may carry.
func Reasons() []string {
	return []string{
		ReasonRelativePath, ReasonParentReference, ReasonUncleanPath, ReasonSymlink,
		ReasonNotRegular, ReasonTooLarge, ReasonNotPrivate, ReasonUnreadable, ReasonNoSafeOpen,
	}
}

// FileError is a refusal to read a command file, before its content is
// looked at. Reason is one of the Reason* constants, Detail explains it, Err
// is the operating-system error when there is one. Its message never holds
// the path (file paths stay out of every output): Path is for the caller.
type FileError struct {
	Path   string
	Reason string
	Detail string
	Err    error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("command file: " + e.Reason)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	if e.Err != nil {
		cause := e.Err
		var pathErr *fs.PathError
		if errors.As(cause, &pathErr) {
			cause = fmt.Errorf("%s: %w", pathErr.Op, pathErr.Err)
		}
		b.WriteString(": " + cause.Error())
	}
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// Is reports whether target is a *FileError with the same Reason, so that
// errors.Is(err, &command.FileError{Reason: command.ReasonSymlink}) works.
func (e *FileError) Is(target error) bool {
	t, ok := target.(*FileError)
	return ok && t.Reason == e.Reason
}
