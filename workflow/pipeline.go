package workflow

import (
	"context"
	"slices"
	"sync"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// pipelineChunk is the most calls of a batch sent at once (one transaction
// journals them all, the answers another); a larger batch is journaled and
// sent in chunks (see pipeline), the first of this many.
const pipelineChunk = 8

// chunkEnd is where the chunk of batch (n calls) that starts at start ends:
// the first holds pipelineChunk calls and each next one twice as many as
// the one before (so that a large batch takes few transactions), and a
// chunk takes the rest of the batch when less than its own size would be
// left: 20 calls go as 8 and 12, 64 as 8, 16 and 40.
func chunkEnd(start, n int) int {
	size := pipelineChunk
	for covered := pipelineChunk; covered <= start; covered += size {
		size *= 2
	}
	if n-(start+size) < size {
		return n
	}
	return start + size
}

// pipeline journals and sends a batch of more than pipelineChunk calls in
// chunks, so that the journal's writes travel while the authority works:
// the first chunk's call records (after the decision's notes, the first
// notes of records) move the operation to calling; each next chunk's are
// committed, with the answers that arrived by then, by a transaction that
// keeps it in calling while the chunks before it are in flight, and once
// every call is journaled the answers are, pipelineChunk or more at a time
// while others are still in flight. A call is sent only once its record is
// committed. The batch stays one batch: every call carries its number, each
// is sent once, and the move that ends the batch (answered, resolving or
// refused, as for a batch sent at once) commits the answers not journaled
// yet. pipeline returns every answer, in the batch's order, and those
// result records.
//
// When a commit fails (another process moved the operation, the journal is
// gone), nothing more is sent: the calls in flight are waited for and
// their answers are not journaled, as when the last move of a batch sent at
// once fails. The journal then holds the calls committed so far in
// calling, with the answers journaled so far; resolution reads what
// happened to the others, and a call never committed was never sent.
func (m *machine) pipeline(ctx context.Context, batch []*Call, notes int, records []store.Record) ([]Answer, []store.Record, error) {
	f := &inFlight{batch: batch, answers: make([]Answer, len(batch)), arrived: make(chan int, len(batch)), sem: make(chan struct{}, sendConcurrency)}
	for start := 0; start < len(batch); {
		end := chunkEnd(start, len(batch))
		var err error
		if start == 0 {
			err = m.fire(ctx, store.EventCall, move{records: records[:notes+end]})
		} else {
			f.take(0)
			err = m.note(ctx, append(f.results(), records[notes+start:notes+end]...)...)
		}
		if err != nil {
			f.wg.Wait()
			return nil, nil, err
		}
		if start > 0 {
			failpoint.Hit("after-chunk")
		}
		for i := start; i < end; i++ {
			// Counted once its record is committed (as a batch sent at once).
			m.sent[callKey(batch[i].Step, batch[i].Target.String())]++
			f.send(ctx, i)
		}
		start = end
	}
	// Every call is journaled: the answers follow while others are in
	// flight; the last ones go with the batch's last move.
	for {
		outstanding := len(batch) - f.journaled - len(f.got)
		if outstanding == 0 {
			break
		}
		f.take(min(pipelineChunk-len(f.got), outstanding))
		if f.journaled+len(f.got) == len(batch) {
			break
		}
		if err := m.note(ctx, f.results()...); err != nil {
			f.wg.Wait()
			return nil, nil, err
		}
	}
	f.wg.Wait()
	rest := f.results()
	failpoint.Hit("after-send")
	return f.answers, rest, nil
}

// inFlight is a pipelined batch's calls on their way: the answers, in the
// batch's order, and those arrived and not journaled yet.
type inFlight struct {
	batch     []*Call
	answers   []Answer
	arrived   chan int
	sem       chan struct{}
	wg        sync.WaitGroup
	got       []int // answers arrived, not journaled
	journaled int
}

// send sends call i in the background, at most sendConcurrency at once.
func (f *inFlight) send(ctx context.Context, i int) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.sem <- struct{}{}
		f.answers[i] = f.batch[i].Send(ctx)
		<-f.sem
		f.arrived <- i
	}()
}

// take moves the answers arrived into got: at least least of them,
// waiting for them when fewer have arrived.
func (f *inFlight) take(least int) {
	for len(f.got) < least {
		f.got = append(f.got, <-f.arrived)
	}
	for {
		select {
		case i := <-f.arrived:
			f.got = append(f.got, i)
		default:
			return
		}
	}
}

// results turns got into result records, in the batch's order, and counts
// them journaled.
func (f *inFlight) results() []store.Record {
	slices.Sort(f.got)
	out := make([]store.Record, 0, len(f.got))
	for _, i := range f.got {
		out = append(out, resultRecord(f.batch[i], f.answers[i]))
	}
	f.journaled += len(f.got)
	f.got = nil
	return out
}
