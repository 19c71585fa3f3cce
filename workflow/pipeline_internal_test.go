package workflow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A batch is cut into chunks of 8, then twice as many each time, the last
// one taking what would be left over.
func TestChunkEnd(t *testing.T) {
	t.Parallel()
	chunks := func(n int) []int {
		var sizes []int
		for start := 0; start < n; {
			end := chunkEnd(start, n)
			sizes = append(sizes, end-start)
			start = end
		}
		return sizes
	}
	require.Equal(t, []int{9}, chunks(9), "less than two chunks: one")
	require.Equal(t, []int{8, 8}, chunks(16))
	require.Equal(t, []int{8, 12}, chunks(20))
	require.Equal(t, []int{8, 16}, chunks(24))
	require.Equal(t, []int{8, 16, 32}, chunks(56))
	require.Equal(t, []int{8, 16, 40}, chunks(64))
}
