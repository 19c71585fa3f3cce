package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
)

// reachableAttempt bounds one connection attempt of WaitReachable: a
// dropped packet must not use up the whole wait.
const reachableAttempt = 5 * time.Second

// WaitReachable connects to databaseURL every interval until PostgreSQL
// answers, for at most limit, and returns how many attempts it made. A
// server that answers refuses nothing here: a wrong password or a missing
// database is the caller's next error, not a reason to wait. When the
// deadline passes it returns the last *UnreachableError (the URL never
// appears in it). A migration Job started beside its database meets a
// database that is not reachable yet (its Service, or a NetworkPolicy
// implementation that admits the Job's new pod IP a moment later): it waits
// instead of failing on the first look.
func WaitReachable(ctx context.Context, databaseURL string, limit, interval time.Duration) (int, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return 0, ErrInvalidURL
	}
	within, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	attempts := 0
	var last error
	err = wait.PollUntilContextCancel(within, interval, true, func(ctx context.Context) (bool, error) {
		attempts++
		last = ping(ctx, cfg)
		var unreachable *UnreachableError
		if errors.As(last, &unreachable) {
			return false, nil // not yet: look again
		}
		return true, last
	})
	if err != nil && within.Err() != nil {
		return attempts, last // the wait ran out (or ctx ended): the last attempt's failure
	}
	return attempts, err
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
