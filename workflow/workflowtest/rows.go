package workflowtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Ran is one run's end as a family's test env reports it: its ending in
// Ending's spelling and the operation's journal in short (each family
// names its records its own way).
type Ran interface {
	Ending() string
	Trail() []string
}

// Env is a family's unit-test world for one row: it holds the command the
// row's Setup made, runs it once, and checks what the family requires
// after every row.
type Env[R Ran] interface {
	// Run runs the env's command once.
	Run() R
	// Finish checks the family-wide invariants after a row's Check.
	Finish(t *testing.T)
}

// Row is one scenario of a family's table, the one row type of every
// family: Setup builds the world (and may run earlier commands), Want is
// the run's ending, Trail the operation's journal in short (not checked
// when nil), Check what must hold afterwards.
type Row[E Env[R], R Ran] struct {
	Name  string
	Setup func(E)
	Want  string
	Trail []string
	Check func(t *testing.T, e E, r R)
}

// RunRows runs each row as a parallel subtest in a fresh env from newEnv:
// Setup (when set), one Run, then the ending (when Want is set), the
// trail (when Trail is set), Check and the env's Finish. Every row must
// check something: a Want or a Check.
func RunRows[E Env[R], R Ran](t *testing.T, newEnv func(*testing.T) E, rows []Row[E, R]) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.Name, func(t *testing.T) {
			t.Parallel()
			require.True(t, r.Want != "" || r.Check != nil, "row %q checks nothing", r.Name)
			e := newEnv(t)
			if r.Setup != nil {
				r.Setup(e)
			}
			got := e.Run()
			if r.Want != "" {
				require.Equal(t, r.Want, got.Ending(), "ending")
			}
			if r.Trail != nil {
				require.Equal(t, r.Trail, got.Trail(), "journal")
			}
			if r.Check != nil {
				r.Check(t, e, got)
			}
			e.Finish(t)
		})
	}
}
