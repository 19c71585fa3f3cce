package versioned

import "fmt"

// HistoryLimitEnv is the environment variable holding the retention limit.
const HistoryLimitEnv = "KEYLEDGER_HISTORY_LIMIT"

// Retention bounds.
const (
	DefaultHistoryLimit = 20
	MaxHistoryLimit     = 100
)

// ParseHistoryLimit reads KEYLEDGER_HISTORY_LIMIT: set reports whether the
// variable is set at all. Unset means DefaultHistoryLimit. When set, it must
// be a decimal integer from 1 to 100 written plainly: empty, zero, negative,
// fractional, leading zeros, a sign, white space or out of range are
// refused. The error names the rule, not the value.
func ParseHistoryLimit(value string, set bool) (int, error) {
	if !set {
		return DefaultHistoryLimit, nil
	}
	n, err := parseCanonical(value, MaxHistoryLimit)
	if err != nil {
		return 0, fmt.Errorf("%s must be a decimal integer from 1 to %d without sign, leading zeros or white space (unset means %d)",
			HistoryLimitEnv, MaxHistoryLimit, DefaultHistoryLimit)
	}
	return int(n), nil
}
