package credentials

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// secretRead is one planned Secret as a decision read it (GET by name): the
// Secret, trimmed to what the decision looks at (keptFields), or the error.
type secretRead struct {
	s   *corev1.Secret
	err error
}

// readSecrets reads the named planned Secrets by name, at most
// readConcurrency at once, and returns the reads in the order of names.
// The decision is still made in plan order, from these reads (a read is
// made for every name, also past the Secret a decision stops at: reads
// change nothing). Memory stays bounded by the plan: at most
// readConcurrency answers are decoded at once, and what is kept of each
// (keptFields) holds no value and no metadata other writers may grow.
func (f *family) readSecrets(ctx context.Context, names []string) []secretRead {
	reads := make([]secretRead, len(names))
	workflow.Each(len(names), readConcurrency, func(i int) { reads[i] = f.readSecret(ctx, names[i]) })
	return reads
}

// readSecret reads one planned Secret and trims it (keptFields).
func (f *family) readSecret(ctx context.Context, name string) secretRead {
	s, err := f.kube.GetSecret(ctx, name)
	if err == nil {
		keptFields(s)
	}
	return secretRead{s: s, err: err}
}

// unsettled lists, in plan order, the planned Secrets not settled since
// the run was last resumed (progress.fresh): those createSecret reads.
func (p *progress) unsettled(s Spec) (idx []int, names []string) {
	for i, plan := range s.Secrets {
		if !p.fresh[plan.Name] {
			idx, names = append(idx, i), append(names, plan.Name)
		}
	}
	return idx, names
}

// keptFields trims a Secret read by createSecret to what the decision
// reads: its identity, version, type, immutability, deletion, labels, owner
// references, the names of its keys (each value is zeroed and dropped: no
// secret value outlives the read) and the annotations keyledger decides on
// (its nonce and created-by, Argo CD's tracking id). managedFields and every
// other annotation, which other writers may make large, are dropped.
func keptFields(s *corev1.Secret) {
	s.ManagedFields = nil
	for k, v := range s.Data {
		clear(v)
		s.Data[k] = nil
	}
	s.StringData = nil
	if len(s.Annotations) == 0 {
		return
	}
	kept := map[string]string{}
	for _, k := range []string{AnnotationNonce, AnnotationCreatedBy, AnnotationArgoTracking} {
		if v, ok := s.Annotations[k]; ok {
			kept[k] = v
		}
	}
	s.Annotations = kept
}

// runFinds answers the journal questions (FindInRuns) of one decision,
// each asked of the journal once. Questions may first be gathered
// (gather): each one a decision would ask is noted and answered "not yet"
// (errGathered); askGathered then asks them all in one round trip when the
// journal can (eachFinder), and the decision, made again, finds every
// answer here. Gathering changes which round trip asks a question, never
// its answer or what is decided from it.
type runFinds struct {
	journal   workflow.JournalReader
	answers   map[store.RunRecordParams]*store.RunRecord
	gathering bool
	gathered  []store.RunRecordParams
}

// eachFinder is a journal that answers many FindInRuns questions in one
// round trip (store.Store.FindEachInRuns).
type eachFinder interface {
	FindEachInRuns(ctx context.Context, ps []store.RunRecordParams) ([]*store.RunRecord, error)
}

// errGathered: the question was noted to be asked with others (runFinds).
var errGathered = errors.New("journal question gathered")

func newRunFinds(j workflow.JournalReader) *runFinds {
	return &runFinds{journal: j, answers: map[store.RunRecordParams]*store.RunRecord{}}
}

// find answers q: from an earlier answer, else gathered (errGathered)
// while gathering, else from the journal.
func (r *runFinds) find(ctx context.Context, q store.RunRecordParams) (*store.RunRecord, error) {
	if a, ok := r.answers[q]; ok {
		return a, nil
	}
	if r.gathering {
		r.gathered = append(r.gathered, q)
		return nil, errGathered
	}
	a, err := r.journal.FindInRuns(ctx, q)
	if err != nil {
		return nil, err
	}
	r.answers[q] = a
	return a, nil
}

// askGathered asks every gathered question (once each) and keeps the
// answers; it says whether any was asked.
func (r *runFinds) askGathered(ctx context.Context) (bool, error) {
	seen := map[store.RunRecordParams]bool{}
	var qs []store.RunRecordParams
	for _, q := range r.gathered {
		if _, ok := r.answers[q]; !ok && !seen[q] {
			seen[q] = true
			qs = append(qs, q)
		}
	}
	r.gathered = nil
	if len(qs) == 0 {
		return false, nil
	}
	var got []*store.RunRecord
	if each, ok := r.journal.(eachFinder); ok {
		var err error
		if got, err = each.FindEachInRuns(ctx, qs); err != nil {
			return false, err
		}
	} else {
		for _, q := range qs {
			a, err := r.journal.FindInRuns(ctx, q)
			if err != nil {
				return false, err
			}
			got = append(got, a)
		}
	}
	for i, q := range qs {
		r.answers[q] = got[i]
	}
	return true, nil
}

// maxGatherRounds bounds the rounds of prefetchAuthorship: a Secret's
// authorship asks at most four questions, each after the one before found
// nothing (its chunk's read-secrets record, its nonce's create, a verdict
// naming its UID, a read naming its UID).
const maxGatherRounds = 4

// prefetchAuthorship asks the journal, round by round, every question
// authorshipOfRead will ask of the Secrets in reads that are kept in place:
// one round trip per round (at most maxGatherRounds) instead of one per
// question and Secret. A failure is not reported here: the decision asks
// the unanswered questions again one at a time, in plan order, and fails
// where it failed before.
func (f *family) prefetchAuthorship(ctx context.Context, p *progress, idx []int, reads []secretRead, fx *runFinds) {
	if f.journal == nil {
		return
	}
	for range maxGatherRounds {
		fx.gathering = true
		for j, r := range reads {
			if r.err != nil {
				continue
			}
			plan := f.cmd.Spec.Secrets[idx[j]]
			adopted := f.adopted(plan.Name, p)
			if keptProblem(r.s, diff(r.s, plan, adopted), adopted) != "" {
				continue
			}
			_, _, _ = f.authorshipOfRead(ctx, p, r.s, chunkTarget(f.cmd.Spec.Namespace, idx[j]), fx)
		}
		fx.gathering = false
		if asked, err := fx.askGathered(ctx); err != nil || !asked {
			return
		}
	}
}
