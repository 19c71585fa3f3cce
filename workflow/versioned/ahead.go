package versioned

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/phase"
	"github.com/keyledger/keyledger/workflow/command"
)

// listAhead is the history listing an update starts once the permission
// matrix held and the precheck passed (the plan's Prefetch), so that it
// travels while the journal connects.
type listAhead struct {
	done  chan struct{}
	uid   types.UID // the live UID it lists the history of
	metas []metav1.PartialObjectMetadata
	err   error
}

// prefetch is the plan's workflow.Plan.Prefetch: when the precheck read
// the live Secret at the command's expectedResourceVersion (an update the
// first decision archives), it starts the listing of its history, which
// that decision would make first. It only reads (the permission matrix
// allowed it) and returns at once.
func (f *family) prefetch(ctx context.Context) {
	m := f.seen
	if f.cmd.Kind != command.KindSecretUpdate || f.cmd.Create() || m == nil || m.run != nil || !m.liveRead ||
		m.live == nil || m.live.UID == "" || m.live.ResourceVersion != f.cmd.ExpectedResourceVersion {
		return
	}
	live := m.live
	a := &listAhead{done: make(chan struct{}), uid: live.UID}
	f.ahead = a
	go func() {
		defer close(a.done)
		a.metas, a.err = listClaims(ctx, f, live)
	}()
}

// digest is the plan's workflow.Plan.Digest: it waits for the command's
// digest (an update's PBKDF2 verifier, computed since Load). The journal
// is open then, and the operation not yet prepared: the reads the first
// decision makes first are made now, in the order it makes them, while the
// digest may still be computed: the prefetched listing is waited for, then
// the journal's provenance of the listed history is read (the list before
// the journal, as readInventory). The first decision takes both (runReads)
// when the operation has journaled nothing but its preparation, exactly as
// it takes the precheck's read of the live Secret: every write it sends
// carries the precondition that catches a change since (see runReads). A
// listing or a journal read that failed is dropped: the decision reads
// again, and ends the run as that read tells it.
func (f *family) digest(ctx context.Context) (string, error) {
	if a := f.ahead; a != nil {
		f.ahead = nil
		// Waited for even when it is not taken: none of its reads is
		// still in flight when the run goes on.
		select {
		case <-a.done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if m := f.seen; a.err == nil && m != nil && m.run == nil {
			if journal, err := f.journalProvenance(ctx, a.uid, listedNames(a.metas)); err == nil {
				m.listed, m.metas, m.journal = a.uid, a.metas, journal
			}
		}
	}
	defer phase.Begin("command digest")()
	return f.cmd.resolveDigest()
}
