package integration

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/workflow/command"
)

// The private overlay of deploy/README.md fills the retirement Job's
// mutation ID placeholders, on the Job and on its pod, with the hash
// label and the ID itself (one that is no label value); the failure
// signals of the base (podFailurePolicy, TTL) survive the overlay.
func TestIntegrationDeployMutationIDFilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	const id = "team-a:retire:2026-07"
	o := validPrivateOverlay()
	o.MutationID = id
	var job batchv1.Job
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(suite.Find(t, suite.RenderPrivate(t, o), "Job", "keyledger-retire").Object, &job))
	for where, meta := range map[string][2]map[string]string{
		"Job": {job.Labels, job.Annotations}, "pod": {job.Spec.Template.Labels, job.Spec.Template.Annotations},
	} {
		require.Equal(t, command.MutationIDHash(id), meta[0][command.LabelMutationIDHash], where)
		require.Equal(t, id, meta[1][command.AnnotationMutationID], where)
	}
	require.NotNil(t, job.Spec.PodFailurePolicy)
	require.EqualValues(t, 7*24*3600, *job.Spec.TTLSecondsAfterFinished)

	// Without the fill, the placeholders stay: a reader sees none was set.
	job = batchv1.Job{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(suite.Find(t, suite.RenderPrivate(t, validPrivateOverlay()), "Job", "keyledger-retire").Object, &job))
	require.Equal(t, "MUTATION-ID-HASH", job.Spec.Template.Labels[command.LabelMutationIDHash])
	require.Equal(t, "MUTATION-ID", job.Spec.Template.Annotations[command.AnnotationMutationID])
}
