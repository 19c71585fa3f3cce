package versioned

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// TestRunReadsFold: a run's reads are kept only while every record since
// is this run's own call and its applied answer, whose effect is folded in;
// anything else drops them.
func TestRunReadsFold(t *testing.T) {
	t.Parallel()
	meta := func(name string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}}
	}
	call := func(step, name string) store.Record {
		return store.Record{Kind: store.RecordAuthorityCall, Step: step, Target: store.SecretTarget(testNamespace, name)}
	}
	result := func(step, name string, detail any) store.Record {
		return store.Record{Kind: store.RecordAuthorityResult, Step: step, Target: store.SecretTarget(testNamespace, name), Status: workflow.Applied, UID: "uid-new", ResourceVersion: "7", Detail: store.DetailOf(detail)}
	}
	reads := func() *runReads {
		return &runReads{listed: "live", metas: []metav1.PartialObjectMetadata{meta("a"), meta("b")}, calls: map[string]*metav1.ObjectMeta{}}
	}

	m := reads()
	m.calling(&workflow.Call{Step: StepCreateSnapshot, Target: store.SecretTarget("", "c")}, &metav1.ObjectMeta{Name: "c"})
	m.calling(&workflow.Call{Step: StepPruneSnapshot, Target: store.SecretTarget("", "a")}, nil)
	m.calling(&workflow.Call{Step: StepPruneSnapshot, Target: store.SecretTarget("", "b")}, nil)
	records := []store.Record{
		{Kind: store.RecordObservation, Step: StepReadLive},
		call(StepCreateSnapshot, "c"), result(StepCreateSnapshot, "c", nil),
		call(StepPruneSnapshot, "a"), result(StepPruneSnapshot, "a", deletionDetail{Deletion: kube.Deleted}),
		call(StepPruneSnapshot, "b"), result(StepPruneSnapshot, "b", deletionDetail{Deletion: kube.DeletionPending}),
	}
	require.True(t, m.fold(records))
	require.Len(t, m.metas, 2)
	require.Equal(t, "b", m.metas[0].Name)
	require.NotNil(t, m.metas[0].DeletionTimestamp, "a pending delete leaves the snapshot terminating")
	require.Equal(t, "c", m.metas[1].Name)
	require.Equal(t, "uid-new", string(m.metas[1].UID), "no object came back: the answer's identity")
	require.Equal(t, len(records), m.asOf)

	for name, extra := range map[string]store.Record{
		"a resolution":                      {Kind: store.RecordResolution, Step: StepCreateSnapshot, Target: store.SecretTarget(testNamespace, "c"), Status: workflow.Ours},
		"a lost answer":                     {Kind: store.RecordAuthorityResult, Step: StepCreateSnapshot, Target: store.SecretTarget(testNamespace, "c"), Status: "lost"},
		"a call this run never made":        call(StepDeleteSnapshot, "z"),
		"an applied answer to another call": result(StepDeleteSnapshot, "z", nil),
	} {
		m := reads()
		m.calling(&workflow.Call{Step: StepCreateSnapshot, Target: store.SecretTarget("", "c")}, nil)
		require.False(t, m.fold([]store.Record{call(StepCreateSnapshot, "c"), extra}), name)
	}
	short := reads()
	short.asOf = 3
	require.False(t, short.fold(records[:2]), "records shorter than what the reads account for: another journal")
}
