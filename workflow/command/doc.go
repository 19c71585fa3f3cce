// Package command reads keyledger command files, the JSON documents given to
// `keyledger run /abs/path/file.json`:
//
//	{"apiVersion":"keyledger.dev/v1","kind":"KeyRetirement",
//	 "metadata":{"requestId":"req-7","mutationId":"mut-7"},"spec":{...}}
//
// Read opens the file without following a symbolic link in any component of
// its path (openat2, RESOLVE_NO_SYMLINKS) or blocking on a
// FIFO, checks it on the opened descriptor (regular, at most MaxSize bytes,
// private when it holds secrets) and validates the envelope with Parse. Each
// family then decodes its own spec type with Decode; this package knows no
// spec type.
//
// Decoding is strict (see DecodeStrict): unknown or duplicate members, wrong
// types, trailing data and invalid UTF-8 are refused, because a command that
// means something other than what the operator reviewed must not run.
// Content errors are *InvalidError and read as
// "command file: spec.secrets[2].name: duplicate member". They name the
// member, never its value: values may be secrets.
//
// # Digests
//
// A mutationId makes a command idempotent: running a command whose
// mutationId has been seen before resumes that mutation. Resuming is only
// safe if the command is the same one, so each mutation is recorded with the
// canonical Digest of its decoded Document: sha256 of json.Marshal of the
// typed document. Reusing a mutationId with a different digest is refused;
// the same digest resumes. Because the digest is taken after decoding,
// re-indenting the file or reordering its members keeps the digest, while
// changing any value, requestId included, changes it. The digest depends on
// the spec type, so a field added to a spec type later carries omitempty.
// File.Digest, over the raw bytes, is for logs only.
package command
