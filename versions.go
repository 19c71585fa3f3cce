// Package keyledger holds what the binary must know of the repository
// itself: the versions table (versions.env), embedded at build time so that
// the image the rendered Jobs run is the one `make image` builds.
package keyledger

import (
	_ "embed"
	"strings"
)

//go:embed versions.env
var versionsEnv string

// Version returns one entry of versions.env (for example
// "KEYLEDGER_IMAGE"), or "" when the table has none.
func Version(key string) string {
	for _, line := range strings.Split(versionsEnv, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Image is the keyledger image of the versions table (KEYLEDGER_IMAGE).
func Image() string { return Version("KEYLEDGER_IMAGE") }
