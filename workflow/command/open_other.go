//go:build !linux

package command

// openNoSymlinks refuses: only Linux's openat2 resolves a path without
// following symbolic links in its parent directories.
func openNoSymlinks(string) (int, error) { return -1, errNoOpenat2 }
