package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSessionTimeoutsFromEnv(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	got, err := SessionTimeoutsFromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, SessionTimeouts{Statement: 30 * time.Second, Lock: 10 * time.Second, IdleInTransaction: 30 * time.Second}, got)

	got, err = SessionTimeoutsFromEnv(env(map[string]string{EnvStatementTimeout: "45s", EnvLockTimeout: "1500ms", EnvIdleInTransactionTimeout: "1m"}))
	require.NoError(t, err)
	require.Equal(t, SessionTimeouts{Statement: 45 * time.Second, Lock: 1500 * time.Millisecond, IdleInTransaction: time.Minute}, got)

	for name, v := range map[string]string{"not a duration": "soon", "zero switches it off": "0", "negative": "-1s",
		"too short": "50ms", "too long": "2h", "not whole milliseconds": "1.0005s", "no unit": "30"} {
		for _, variable := range []string{EnvStatementTimeout, EnvLockTimeout, EnvIdleInTransactionTimeout} {
			_, err := SessionTimeoutsFromEnv(env(map[string]string{variable: v}))
			var setting *SettingError
			require.ErrorAs(t, err, &setting, "%s: %s=%s", name, variable, v)
			require.Equal(t, variable, setting.Name)
			require.Contains(t, err.Error(), variable)
		}
	}
}

// Every connection of the pool starts by setting the three timeouts
// (milliseconds).
func TestSessionTimeoutsSetSQL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SET statement_timeout = 30000; SET lock_timeout = 1500; SET idle_in_transaction_session_timeout = 60000",
		SessionTimeouts{Statement: 30 * time.Second, Lock: 1500 * time.Millisecond, IdleInTransaction: time.Minute}.setSQL())
}

// A setting that is not valid fails Open before it connects anywhere.
func TestOpenRefusesABadTimeoutSetting(t *testing.T) {
	t.Setenv(EnvLockTimeout, "forever")
	_, err := Open(t.Context(), "postgres://keyledger@127.0.0.1:1/journal?connect_timeout=1")
	var setting *SettingError
	require.ErrorAs(t, err, &setting)
	require.Equal(t, EnvLockTimeout, setting.Name)
}
