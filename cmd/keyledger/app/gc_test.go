package app

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// The collector's percent is OneShotGCPercent unless GOGC is set; the
// environment's GOGC is left as the runtime read it.
func TestTuneCollector(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	TuneCollector(func(string) (string, bool) { return "", false })
	require.Equal(t, OneShotGCPercent, debug.SetGCPercent(100), "GOGC unset: the one-shot percent")

	TuneCollector(func(name string) (string, bool) { return "50", name == "GOGC" })
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: untouched")
}
