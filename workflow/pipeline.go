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
	answers := make([]Answer, len(batch))
	arrived := make(chan int, len(batch))
	sem := make(chan struct{}, sendConcurrency)
	var wg sync.WaitGroup
	var got []int // answers arrived, not journaled
	journaled := 0
	// take moves the answers arrived into got: at least least of them,
	// waiting for them when fewer have arrived.
	take := func(least int) {
		for len(got) < least {
			got = append(got, <-arrived)
		}
		for {
			select {
			case i := <-arrived:
				got = append(got, i)
			default:
				return
			}
		}
	}
	// results turns got into result records, in the batch's order.
	results := func() []store.Record {
		slices.Sort(got)
		out := make([]store.Record, 0, len(got))
		for _, i := range got {
			out = append(out, resultRecord(batch[i], answers[i]))
		}
		journaled += len(got)
		got = nil
		return out
	}
	for start := 0; start < len(batch); {
		end := chunkEnd(start, len(batch))
		var err error
		if start == 0 {
			err = m.fire(ctx, store.EventCall, move{records: records[:notes+end]})
		} else {
			take(0)
			err = m.note(ctx, append(results(), records[notes+start:notes+end]...)...)
		}
		if err != nil {
			wg.Wait()
			return nil, nil, err
		}
		if start > 0 {
			failpoint.Hit("after-chunk")
		}
		for i := start; i < end; i++ {
			c := batch[i]
			// Counted once its record is committed (as a batch sent at once).
			m.sent[callKey(c.Step, c.Target.String())]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				answers[i] = c.Send(ctx)
				<-sem
				arrived <- i
			}()
		}
		start = end
	}
	// Every call is journaled: the answers follow while others are in
	// flight; the last ones go with the batch's last move.
	for {
		outstanding := len(batch) - journaled - len(got)
		if outstanding == 0 {
			break
		}
		take(min(pipelineChunk-len(got), outstanding))
		if journaled+len(got) == len(batch) {
			break
		}
		if err := m.note(ctx, results()...); err != nil {
			wg.Wait()
			return nil, nil, err
		}
	}
	wg.Wait()
	rest := results()
	failpoint.Hit("after-send")
	return answers, rest, nil
}
