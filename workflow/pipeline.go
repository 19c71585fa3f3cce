package workflow

import (
	"context"
	"slices"
	"sync"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/failpoint"
)

// pipelineChunk is the most calls of a batch whose records one transaction
// commits, when the batch holds more: the batch is journaled and sent in
// chunks of this many (see pipeline).
const pipelineChunk = 8

// pipeline journals and sends a batch of more than pipelineChunk calls in
// chunks, so that the journal's writes travel while the authority works:
// the first chunk's call records (after the decision's notes, the first
// len(notes) of records) move the operation to calling; each next chunk's
// are committed, with the answers that arrived by then, by a transaction
// that keeps it in calling while the chunks before it are in flight. A call
// is sent only once its record is committed. The batch stays one batch:
// every call carries its number, each is sent once, and the move that ends
// the batch (answered, resolving or refused, as for a batch sent at once)
// commits the answers not journaled yet. pipeline returns every answer, in
// the batch's order, and those result records.
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
	// results turns the answers arrived (all of them, when wait is set) into
	// their result records, in the batch's order.
	results := func(wait bool) []store.Record {
		var got []int
		if wait {
			wg.Wait()
			close(arrived)
			for i := range arrived {
				got = append(got, i)
			}
		} else {
		drain:
			for {
				select {
				case i := <-arrived:
					got = append(got, i)
				default:
					break drain
				}
			}
		}
		slices.Sort(got)
		out := make([]store.Record, 0, len(got))
		for _, i := range got {
			out = append(out, resultRecord(batch[i], answers[i]))
		}
		return out
	}
	for start := 0; start < len(batch); start += pipelineChunk {
		end := min(start+pipelineChunk, len(batch))
		var err error
		if start == 0 {
			err = m.fire(ctx, eventCall, move{records: records[:notes+end]})
		} else {
			err = m.note(ctx, append(results(false), records[notes+start:notes+end]...)...)
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
	}
	rest := results(true)
	failpoint.Hit("after-send")
	return answers, rest, nil
}
