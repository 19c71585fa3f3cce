package keyledger_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// signalsTTL is how long a finished Job, its pod and its logs are kept:
// seven days (deploy/README.md, "Reading a failed Job").
const signalsTTL = 7 * 24 * 3600

// The exit codes of the README's table, and a kill by SIGKILL (the
// deadline, the memory limit).
var (
	settledByRerun = []int32{69, 75}
	finalCodes     = []int32{1, 2, 64, 77, 137}
)

// failureAction is what a Job's podFailurePolicy does when container
// exits with code: the first rule that matches, as the Job controller
// reads them (no rule matches: Count).
func failureAction(p *batchv1.PodFailurePolicy, container string, code int32) batchv1.PodFailurePolicyAction {
	if p == nil {
		return batchv1.PodFailurePolicyActionCount
	}
	for _, r := range p.Rules {
		e := r.OnExitCodes
		if e == nil || (e.ContainerName != nil && *e.ContainerName != container) {
			continue
		}
		if in := slices.Contains(e.Values, code); (e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
			return r.Action
		}
	}
	return batchv1.PodFailurePolicyActionCount
}

// disruptionAction is what the policy does with a pod evicted or
// preempted (condition DisruptionTarget) before any exit code rule.
func disruptionAction(p *batchv1.PodFailurePolicy) batchv1.PodFailurePolicyAction {
	if p == nil {
		return batchv1.PodFailurePolicyActionCount
	}
	for _, r := range p.Rules {
		for _, c := range r.OnPodConditions {
			if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
				return r.Action
			}
		}
	}
	return batchv1.PodFailurePolicyActionCount
}

// signalFindings says what a Job lacks of the failure signals: the TTL,
// the podFailurePolicy for its retries, the termination message policy,
// and (for a Job that runs a command) the mutation ID label and annotation
// with the values wantHash and wantID.
func signalFindings(j batchv1.Job, wantHash, wantID string) []string {
	var f []string
	if j.Spec.TTLSecondsAfterFinished == nil || *j.Spec.TTLSecondsAfterFinished != signalsTTL {
		f = append(f, "ttlSecondsAfterFinished is not 7 days")
	}
	pod := j.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		f = append(f, "restartPolicy is not Never (podFailurePolicy needs it)")
	}
	p := j.Spec.PodFailurePolicy
	retries := j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit > 0
	all := append(slices.Clone(pod.InitContainers), pod.Containers...)
	runsCommand := false
	for _, c := range all {
		if c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
			f = append(f, "container "+c.Name+": terminationMessagePolicy is not File")
		}
		if len(c.Args) > 0 && c.Args[0] == "run" {
			runsCommand = true
		}
		for _, code := range finalCodes {
			if a := failureAction(p, c.Name, code); a != batchv1.PodFailurePolicyActionFailJob {
				f = append(f, "container "+c.Name+": exit "+itoa(code)+" is "+string(a)+", not FailJob")
			}
		}
		for _, code := range settledByRerun {
			want := batchv1.PodFailurePolicyActionFailJob // backoffLimit 0: nothing retries
			if retries {
				want = batchv1.PodFailurePolicyActionCount
			}
			if a := failureAction(p, c.Name, code); a != want {
				f = append(f, "container "+c.Name+": exit "+itoa(code)+" is "+string(a)+", not "+string(want))
			}
		}
	}
	if retries && disruptionAction(p) != batchv1.PodFailurePolicyActionIgnore {
		f = append(f, "an evicted pod counts against backoffLimit")
	}
	if !runsCommand {
		return f
	}
	for where, m := range map[string][2]map[string]string{
		"Job": {j.Labels, j.Annotations}, "pod template": {j.Spec.Template.Labels, j.Spec.Template.Annotations},
	} {
		hash := m[0][command.LabelMutationIDHash]
		if hash != wantHash || len(validation.IsValidLabelValue(hash)) != 0 {
			f = append(f, where+": label "+command.LabelMutationIDHash+" is "+hash+", not "+wantHash)
		}
		if id := m[1][command.AnnotationMutationID]; id != wantID {
			f = append(f, where+": annotation "+command.AnnotationMutationID+" is "+id+", not "+wantID)
		}
	}
	return f
}

func itoa(c int32) string { return strconv.Itoa(int(c)) }

// deployJobs decodes every Job manifest under deploy/, by file.
func deployJobs(t *testing.T) map[string]batchv1.Job {
	t.Helper()
	jobs := map[string]batchv1.Job{}
	err := filepath.WalkDir("deploy", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var head struct{ Kind string }
			if err := yaml.Unmarshal(doc, &head); err != nil || head.Kind != "Job" {
				continue
			}
			var j batchv1.Job
			require.NoError(t, yaml.UnmarshalStrict(doc, &j), path)
			jobs[path] = j
		}
		return nil
	})
	require.NoError(t, err)
	return jobs
}

// Every Job deploy/ ships carries the failure signals: kept a week, any
// failed container fails the Job at once (backoffLimit 0, ADR-0262), the
// termination message read from keyledger's file, and the Jobs that run a
// command carry the placeholders the private overlay fills with its
// mutation ID.
func TestDeployJobsCarryFailureSignals(t *testing.T) {
	t.Parallel()
	jobs := deployJobs(t)
	require.Len(t, jobs, 6, "the retirement, versioned, control, migration, grant and inspect Jobs: %v", jobs)
	for path, j := range jobs {
		require.NotNil(t, j.Spec.BackoffLimit, path)
		require.Zero(t, *j.Spec.BackoffLimit, "%s: ADR-0262 keeps backoffLimit 0", path)
		require.Empty(t, signalFindings(j, "MUTATION-ID-HASH", "MUTATION-ID"), path)
	}
}

// The rendered credentials hook retries only what a rerun settles (69,
// 75), fails at once on every other code, does not count an evicted pod,
// is kept a week, and carries the plan's mutation ID.
func TestRenderedHookJobCarriesFailureSignals(t *testing.T) {
	t.Parallel()
	const id = "shop:orders-cache:credentials" // no label value: ':'
	plan := []byte(`{"apiVersion":"keyledger.dev/v1","kind":"CredentialPlan","metadata":{"requestId":"r1","mutationId":"` + id + `"},
 "spec":{"owner":"shop-orders-cache","namespace":"shop","secrets":[{"name":"shop-orders-cache-app",
   "keys":[{"name":"password","generate":{"length":32,"alphabet":"alphanumeric"}}]}]}}`)
	path := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(path, plan, 0o600))
	f, err := command.Read(path, command.ReadOptions{})
	require.NoError(t, err)
	cmd, err := credentials.Decode(f)
	require.NoError(t, err)
	docs, err := credentials.Hook(cmd, f.Bytes, "keyledger:test", "v1", credentials.HookJournal{Namespace: "keyledger-journal",
		Credentials: "keyledger-journal-credentials", CA: "keyledger-journal-ca"})
	require.NoError(t, err)
	var j batchv1.Job
	require.NoError(t, yaml.UnmarshalStrict(docs[len(docs)-1], &j))
	require.NotEmpty(t, validation.IsValidLabelValue(id), "the test's ID is no label value")
	require.Positive(t, *j.Spec.BackoffLimit, "the hook retries")
	require.Empty(t, signalFindings(j, command.MutationIDHash(id), id))

	// The checks can fail: each signal removed is a finding.
	for name, mutate := range map[string]func(j *batchv1.Job){
		"no-policy":     func(j *batchv1.Job) { j.Spec.PodFailurePolicy = nil },
		"no-ttl":        func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = nil },
		"hour-ttl":      func(j *batchv1.Job) { hour := int32(3600); j.Spec.TTLSecondsAfterFinished = &hour },
		"no-disruption": func(j *batchv1.Job) { j.Spec.PodFailurePolicy.Rules = j.Spec.PodFailurePolicy.Rules[1:] },
		"retries-64":    func(j *batchv1.Job) { j.Spec.PodFailurePolicy.Rules[1].OnExitCodes.Values = []int32{64, 69, 75} },
		"no-label":      func(j *batchv1.Job) { delete(j.Spec.Template.Labels, command.LabelMutationIDHash) },
		"no-annotation": func(j *batchv1.Job) { delete(j.Annotations, command.AnnotationMutationID) },
		"logs-as-messages": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].TerminationMessagePolicy = "FallbackToLogsOnError"
		},
	} {
		c := j.DeepCopy()
		mutate(c)
		require.NotEmpty(t, signalFindings(*c, command.MutationIDHash(id), id), name)
	}
}
