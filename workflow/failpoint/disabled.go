//go:build !failpoints

package failpoint

// Enabled reports whether failpoints are compiled in.
const Enabled = false

// Hit does nothing in a release build.
func Hit(string) {}
