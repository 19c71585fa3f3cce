package workflow

import (
	"context"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// sender is how a run's calls reach the authority: a live run sends them
// (a large batch pipelined with its journal writes), a dry run holds them
// back (dryCalls). The engine decides, journals and resolves the same way
// behind it.
type sender interface {
	// admit is asked for a batch before anything of it is checked or
	// journaled; an error ends the run (a dry run stops at a call it
	// already planned).
	admit(ctx context.Context, batch []*Call) error
	// deliver commits the batch's call records (records, after the
	// decision's first notes of them) with the machine's call event and
	// sends the calls. It returns every answer, in the batch's order, and
	// the result records not journaled yet.
	deliver(ctx context.Context, m *machine, batch []*Call, notes int, records []store.Record) ([]Answer, []store.Record, error)
	// pipelines reports whether deliver pipelines batch with its journal
	// writes: its answers are then shown to the family's next decision
	// before they are committed (answerAhead).
	pipelines(batch []*Call) bool
	// moved is told each committed move (not a note).
	moved(event store.Event)
	// applied is told each call answered applied.
	applied(c *Call)
}

// liveSender sends every call; its moves run the failpoints named after
// them, and its applied answers are the run's writes (runOutcome).
type liveSender struct{ e *engine }

func (liveSender) admit(context.Context, []*Call) error { return nil }

func (s liveSender) deliver(ctx context.Context, m *machine, batch []*Call, notes int, records []store.Record) ([]Answer, []store.Record, error) {
	if s.pipelines(batch) {
		return m.pipeline(ctx, batch, notes, records)
	}
	return m.atOnce(ctx, batch, records, func() []Answer {
		answers := send(ctx, batch)
		failpoint.Hit("after-send")
		return answers
	})
}

func (liveSender) pipelines(batch []*Call) bool { return len(batch) > pipelineChunk }

func (liveSender) moved(event store.Event) { failpoint.Hit("after-" + string(event)) }

func (s liveSender) applied(c *Call) {
	s.e.wrote = true
	s.e.applied = s.e.applied || c.Final
}

// atOnce commits the call records of a batch in one move, then takes the
// answers from answer and returns them with their result records.
func (m *machine) atOnce(ctx context.Context, batch []*Call, records []store.Record, answer func() []Answer) ([]Answer, []store.Record, error) {
	if err := m.fire(ctx, store.EventCall, move{records: records}); err != nil {
		return nil, nil, err
	}
	// Counted once the call records are committed: a batch whose commit
	// lost to another process (the state moved) was never sent, and
	// deciding it again after the reload is not another send.
	for _, c := range batch {
		m.sent[callKey(c.Step, c.Target.String())]++
	}
	answers := answer()
	results := make([]store.Record, len(batch))
	for i, a := range answers {
		results[i] = resultRecord(batch[i], a)
	}
	return answers, results, nil
}
