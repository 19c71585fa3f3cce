package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/phase"
	"github.com/keyledger/keyledger/store"
)

// journalReplay is the journal's part of one completed retirement, taken
// from a run's own journal: its preparation and the records of its two
// moves (what it read with the call; the call's answer with the
// completion). Replayed through
// package store by this process, as a run makes them, it costs what a
// run's journal phases cost at the least on the session it is given: no
// keyledger process starts, no API request is sent, no decision is made.
type journalReplay struct {
	prepare store.PrepareParams
	call    []store.Record
	ending  []store.Record
	outcome string
}

// retirementReplay reads the journal of the completed retirement mutation
// and returns its replay. The journal's shape is required, so that a
// change to it (another move, another record) fails here instead of
// measuring something else.
func retirementReplay(e *suite.Env, t *testing.T, mutation string) journalReplay {
	t.Helper()
	op, records := e.JournalOf(mutation)
	require.Equal(t, store.StateCompleted, op.State)
	require.Equal(t, []store.RecordKind{store.RecordPreparation, store.RecordObservation, store.RecordAuthorityCall,
		store.RecordAuthorityResult, store.RecordCompletion}, suite.Kinds(records),
		"a retirement's journal: preparation, what it read with the call, then the answer with the completion")
	again := func(rs []store.Record) []store.Record {
		out := make([]store.Record, len(rs))
		for i, r := range rs {
			r.ID, r.CreatedAt = 0, time.Time{}
			out[i] = r
		}
		return out
	}
	return journalReplay{
		prepare: store.PrepareParams{Kind: op.Kind, RequestID: op.RequestID, CommandDigest: op.CommandDigest,
			Namespace: op.Namespace, Name: op.Name, ExpectedUID: op.ExpectedUID, Detail: records[0].Detail},
		call:    again(records[1:3]),
		ending:  again(records[3:]),
		outcome: op.Outcome,
	}
}

// run replays r as operation mutation on the journal at url and returns
// its wall time: open (connect and session start), prepare, the two
// moves, close.
func (r journalReplay) run(t *testing.T, url, mutation string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p := r.prepare
	p.MutationID = mutation
	start := time.Now()
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	op, created, err := st.Prepare(ctx, p)
	require.NoError(t, err)
	require.True(t, created)
	op, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StatePrepared, To: store.StateCalling,
		Revision: op.Revision, Records: r.call})
	require.NoError(t, err)
	op, err = st.Transition(ctx, store.TransitionParams{OperationID: op.ID, From: store.StateCalling, To: store.StateCompleted,
		Revision: op.Revision, Records: r.ending, Outcome: r.outcome})
	require.NoError(t, err)
	st.Close()
	closed = true
	took := time.Since(start)
	require.Equal(t, store.StateCompleted, op.State)
	return took
}

// journalPhases is the time of a run's journal phases (the connect, each
// transaction, the close) in its phase line.
func journalPhases(l *phase.Line) time.Duration {
	var journal time.Duration
	for _, p := range l.Phases {
		if strings.HasPrefix(p.Name, "journal ") || strings.HasPrefix(p.Name, "tx ") {
			journal += time.Duration(p.US) * time.Microsecond
		}
	}
	return journal
}

// benchJournalBudget prints the floor of the retirement's journal work on
// a new session and through the pooler (replays interleaved with the
// runs), and the budget it leaves: the median run's phases other than the
// journal's, plus each floor, against target (the goal's share of the
// kubectl pair). A direct run cannot meet the target while the rest plus
// the new session's floor exceeds it, however it drives the journal: only
// a cheaper rest, or statements the server runs for less (the schema, its
// triggers and policies), would.
func benchJournalBudget(t *testing.T, row string, samples []suite.Sample, direct, pooled []time.Duration, target time.Duration) {
	t.Helper()
	if len(direct) == 0 {
		return
	}
	line := "floor journal work of one retirement in this process (open, prepare, two moves, close; no keyledger process, no API): new session=" + ms(median(direct))
	if len(pooled) > 0 {
		line += ", through the session pooler=" + ms(median(pooled))
	}
	suite.BenchLine("%s %s", row, line)
	s := medianSample(samples)
	if s.Phases == nil || target <= 0 {
		return
	}
	// The rest: the process's start, configuration, the permission check,
	// the API calls, the decisions, and its exit (after the phase line).
	journal := journalPhases(s.Phases)
	rest := s.Wall - journal
	budget := "%s budget of the median run (wall %s): journal phases=%s, the rest=%s; the rest plus the journal floor on a new session=%s"
	args := []any{row, ms(s.Wall), ms(journal), ms(rest), ms(rest + median(direct))}
	if len(pooled) > 0 {
		budget += ", through the session pooler=%s"
		args = append(args, ms(rest+median(pooled)))
	}
	budget += "; target=%s"
	args = append(args, ms(target))
	suite.BenchLine(budget, args...)
}
