// Package poll holds keyledger's one polling loop: every wait (an object
// gone, a Job finished, a replacement pod ready, the journal database
// reachable) is poll.Poll under a context that bounds it.
package poll

import (
	"context"
	"time"
)

// Poll calls cond at once and then every interval until it reports done,
// fails, or ctx ends (then ctx's error).
func Poll(ctx context.Context, interval time.Duration, cond func(ctx context.Context) (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := cond(ctx)
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
