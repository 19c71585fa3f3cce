package poll

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPoll(t *testing.T) {
	t.Parallel()
	calls := 0
	require.NoError(t, Poll(t.Context(), time.Millisecond, func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	}))
	require.Equal(t, 3, calls, "polls until done, and not once more")

	boom := errors.New("boom")
	calls = 0
	require.ErrorIs(t, Poll(t.Context(), time.Millisecond, func(context.Context) (bool, error) {
		calls++
		return false, boom
	}), boom)
	require.Equal(t, 1, calls, "a failure ends the wait")

	ctx, cancel := context.WithCancel(t.Context())
	calls = 0
	require.ErrorIs(t, Poll(ctx, time.Millisecond, func(context.Context) (bool, error) {
		calls++
		if calls == 2 {
			cancel()
		}
		return false, nil
	}), context.Canceled)
	require.Equal(t, 2, calls)
}
