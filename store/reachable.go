package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// reachableAttempt bounds one connection attempt of WaitReachable: a
// dropped packet must not use up the whole wait.
const reachableAttempt = 5 * time.Second

// WaitReachable connects to databaseURL every interval until PostgreSQL
// answers, for at most wait, and returns how many attempts it made. A
// server that answers refuses nothing here: a wrong password or a missing
// database is the caller's next error, not a reason to wait. When the
// deadline passes it returns the last *UnreachableError (the URL never
// appears in it). A migration Job started beside its database meets a
// database that is not reachable yet (its Service, or a NetworkPolicy
// implementation that admits the Job's new pod IP a moment later): it waits
// instead of failing on the first look.
func WaitReachable(ctx context.Context, databaseURL string, wait, interval time.Duration) (int, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, ErrInvalidURL
	}
	deadline := time.Now().Add(wait)
	for attempt := 1; ; attempt++ {
		err := ping(ctx, cfg)
		var unreachable *UnreachableError
		if !errors.As(err, &unreachable) || time.Now().Add(interval).After(deadline) {
			return attempt, err
		}
		select {
		case <-ctx.Done():
			return attempt, err
		case <-time.After(interval):
		}
	}
}

// ping connects once: nil when the server answered (even with an error of
// its own, such as a failed authentication), else *UnreachableError.
func ping(ctx context.Context, cfg *pgx.ConnConfig) error {
	ctx, cancel := context.WithTimeout(ctx, reachableAttempt)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		_ = conn.Close(ctx) // reachable is all this asks
		return nil
	}
	var server *serverError
	if errors.As(redact(err), &server) {
		return nil // it answered: reachable
	}
	return &UnreachableError{Err: redact(err)}
}
