package workflow

import "context"

// Step is one phase of a family's decision, named with the journal's word
// for what it reads or writes (or check..., need..., expect..., bind...,
// confirm... for a phase that only judges what the steps before it found).
// It returns a decision when something is left to do in it (a call, a
// refusal, a completion, an end), or nil when its part is done and the next
// step decides. S is what the decision has found so far; each step reads
// what the steps before it found from it.
type Step[S any] func(ctx context.Context, found S) (*Decision, error)

// RunSteps runs steps in order and returns the first decision one makes
// (with its error, if any) or the first error; nil, nil when every step
// passed. It is the one step runner of the three families.
func RunSteps[S any](ctx context.Context, found S, steps []Step[S]) (*Decision, error) {
	for _, step := range steps {
		if d, err := step(ctx, found); err != nil || d != nil {
			return d, err
		}
	}
	return nil, nil
}
