package credentials

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/workflow/command"
)

// Argo CD hook annotations.
const (
	annotationHook       = "argocd.argoproj.io/hook"
	annotationSyncWave   = "argocd.argoproj.io/sync-wave"
	annotationHookDelete = "argocd.argoproj.io/hook-delete-policy"
	// planFile is the ConfigMap key; planPath is where the Job's container
	// reads it: a subPath mount of that one key, so the kubelet bind-mounts
	// the resolved file and the container sees a regular file (a ConfigMap
	// mounted as a directory holds plan.json as a symlink into ..data/,
	// which `run` refuses to open).
	planFile = "plan.json"
	planPath = "/etc/keyledger/plan.json"
	// hookUser is the non-root user the Job runs as: the image's UID 10001.
	hookUser = 10001
	// hookTTL is the Job's ttlSecondsAfterFinished: 7 days. A succeeded
	// hook Job is deleted at once (HookSucceeded) and a failed one at the
	// next sync (BeforeHookCreation); with no next sync, a failed Job, its
	// pod and its logs stay a week for someone to read them.
	hookTTL = 7 * 24 * 3600
	// journalCluster is the CloudNativePG Cluster holding the journal
	// (deploy/journal); its -rw Service routes to the primary.
	journalCluster = "keyledger-journal"
	// journalCADir is where the Job mounts the journal CA's certificate.
	journalCADir = "/etc/keyledger/journal-ca"
	// hookDeadline is the Job's activeDeadlineSeconds (ADR-0262's 300 s):
	// a sync never hangs with a run that cannot end; the journal's session
	// timeouts end each statement well before it.
	hookDeadline = 300
	// hookMemory is the container's memory limit (ADR-0262's 128 MiB).
	hookMemory = "128Mi"
	// hookTokenTTL is the projected ServiceAccount token's lifetime
	// (ADR-0262's 600 s), longer than the Job's 300 s deadline.
	hookTokenTTL = 600
	// serviceAccountDir is where client-go's in-cluster configuration reads
	// the token, the cluster CA and the namespace.
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// HookJournal is where the hook Job finds the journal (deploy/README.md):
// the one CloudNativePG Cluster keyledger-journal of the cluster, in a
// namespace of its own, reached as the plan's namespace's own role.
type HookJournal struct {
	// Namespace is the journal's namespace.
	Namespace string
	// Credentials is a basic-auth Secret of the plan's namespace holding
	// username and password of that namespace's journal role (read by the
	// kubelet, not by the Job's Role).
	Credentials string
	// CA is a ConfigMap of the plan's namespace whose key ca.crt is the
	// journal CA's public certificate; the server is verified against it
	// (verify-full).
	CA string
	// Pooler, when set, is the Service of a CloudNativePG Pooler in the
	// journal's namespace (deploy/journal/pooler) that the Job connects
	// through instead of the Cluster's -rw Service; its names are in the
	// same server certificate.
	Pooler string
}

// Host is the Service the Job connects to: the journal's -rw Service, or
// its Pooler's. Both names are in the server certificate (verify-full).
func (j HookJournal) Host() string {
	if j.Pooler != "" {
		return j.Pooler + "." + j.Namespace + ".svc"
	}
	return journalCluster + "-rw." + j.Namespace + ".svc"
}

// HookJobName is the hook Job's name: <owner[:42]>-credentials-<h8>, h8 the
// first 8 hex digits of sha256(plan.json bytes + version + image), so a new
// plan, version or image is a new Job.
func HookJobName(owner string, plan []byte, version, image string) string {
	h := sha256.New()
	h.Write(plan)
	h.Write([]byte(version))
	h.Write([]byte(image))
	if len(owner) > 42 {
		owner = owner[:42]
	}
	return owner + "-credentials-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// Hook returns the six Argo CD PreSync hook objects that run cmd in the
// cluster, as YAML documents in apply order: the ServiceAccount, its Role
// (exactly Rules of the plan), the RoleBinding, the ConfigMap holding plan
// (the command file's bytes, as read), the NetworkPolicy (HookPolicy), and
// the Job that runs `keyledger run`
// on it with image. version is keyledger's version (it names the Job);
// journal says where the Job's run reaches the journal and as whom.
func Hook(cmd *Command, plan []byte, image, version string, journal HookJournal) ([][]byte, error) {
	s := cmd.Spec
	name := s.Owner + "-credentials"
	meta := func() metav1.ObjectMeta { return hookMeta(s, name, "0", hookBeforeCreation) } // wave 0: before the Job
	no := false
	return toYAMLDocs([]any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(),
			AutomountServiceAccountToken: &no},
		&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta(),
			Rules: Rules(s)},
		&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta(),
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: s.Namespace}}},
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(),
			Data: map[string]string{planFile: string(plan)}},
		&networkingv1.NetworkPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: meta(), Spec: HookPolicy(s)},
		hookJob(cmd, plan, image, version, journal),
	})
}

// hookBeforeCreation is the hook delete policy of every hook object: Argo
// CD deletes the one of the previous sync before it creates it again.
const hookBeforeCreation = "BeforeHookCreation"

// hookMeta is the metadata of the hook object n: in the plan's namespace,
// labelled as keyledger's credentials hook of the plan's owner, a PreSync
// hook of the sync wave wave with the delete policy policy.
func hookMeta(s Spec, n, wave, policy string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: n, Namespace: s.Namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "keyledger", "app.kubernetes.io/component": "credentials",
			"keyledger.dev/owner": s.Owner},
		Annotations: map[string]string{annotationHook: "PreSync", annotationSyncWave: wave, annotationHookDelete: policy},
	}
}

// hookJob is the Job that runs `keyledger run` on the plan, named by
// HookJobName (wave 1, after the objects it uses; deleted once it
// succeeded), labelled with the plan's mutation ID: a retried pod is
// bounded (backoffLimit 2, HookPodFailurePolicy), the Job by its deadline
// and its time to live.
func hookJob(cmd *Command, plan []byte, image, version string, journal HookJournal) *batchv1.Job {
	s := cmd.Spec
	ttl, backoff, deadline := int32(hookTTL), int32(2), int64(hookDeadline)
	meta := hookMeta(s, HookJobName(s.Owner, plan, version, image), "1", hookBeforeCreation+",HookSucceeded")
	meta.Labels[command.LabelMutationIDHash] = command.MutationIDHash(cmd.Metadata.MutationID)
	meta.Annotations[command.AnnotationMutationID] = cmd.Metadata.MutationID
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff, TTLSecondsAfterFinished: &ttl, ActiveDeadlineSeconds: &deadline,
			PodFailurePolicy: HookPodFailurePolicy(),
			Template:         hookPod(cmd, image, journal),
		},
	}
}

// hookPod is the hook Job's pod: as the hook's ServiceAccount, with no
// automounted token, never restarted in place, non-root under the runtime's
// seccomp profile, one container (hookRunContainer) and its volumes
// (hookVolumes).
func hookPod(cmd *Command, image string, journal HookJournal) corev1.PodTemplateSpec {
	s := cmd.Spec
	name := s.Owner + "-credentials"
	yes, no := true, false
	user := int64(hookUser)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "keyledger",
			"app.kubernetes.io/component": "credentials", "keyledger.dev/owner": s.Owner,
			command.LabelMutationIDHash: command.MutationIDHash(cmd.Metadata.MutationID)},
			Annotations: map[string]string{command.AnnotationMutationID: cmd.Metadata.MutationID}},
		Spec: corev1.PodSpec{
			ServiceAccountName: name,
			// ADR-0262: no automounted token; the pod's only
			// token is the projected one (hookVolumes), valid 600 s.
			AutomountServiceAccountToken: &no,
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user, FSGroup: &user,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{hookRunContainer(image, journal)},
			Volumes:    hookVolumes(name, journal.CA),
		},
	}
}

// hookRunContainer runs `keyledger run` on the mounted plan, reaching the
// journal as journalEnv says: a read-only root, no privilege, no
// capability, memory bounded.
func hookRunContainer(image string, journal HookJournal) corev1.Container {
	yes, no := true, false
	return corev1.Container{
		Name: HookContainer, Image: image, Args: []string{"run", planPath},
		Env: journalEnv(journal),
		// keyledger writes its one-line outcome to the
		// default /dev/termination-log; never the logs
		// (FallbackToLogsOnError): the pod's status is
		// readable by whoever may get pods, a wider
		// circle than pods/log.
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "plan", MountPath: planPath, SubPath: planFile, ReadOnly: true},
			{Name: "journal-ca", MountPath: journalCADir, ReadOnly: true},
			{Name: "kube-api-access", MountPath: serviceAccountDir, ReadOnly: true},
		},
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(hookMemory)}},
	}
}

// hookVolumes are the pod's volumes: the plan (the one key of the
// ConfigMap name), the journal CA's certificate (the key ca.crt of the
// ConfigMap journalCA), and the ServiceAccount token projected for
// hookTokenTTL with the cluster CA and the namespace, where client-go
// looks for them.
func hookVolumes(name, journalCA string) []corev1.Volume {
	tokenTTL, tokenMode := int64(hookTokenTTL), int32(0o440)
	return []corev1.Volume{
		{Name: "plan", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items:                []corev1.KeyToPath{{Key: planFile, Path: planFile}},
		}}},
		{Name: "journal-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: journalCA},
			Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}}},
		{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: &tokenMode,
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &tokenTTL}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
					FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			},
		}}},
	}
}

// toYAMLDocs encodes each object (toYAML), in order.
func toYAMLDocs(objects []any) ([][]byte, error) {
	docs := make([][]byte, len(objects))
	for i, o := range objects {
		d, err := toYAML(o)
		if err != nil {
			return nil, err
		}
		docs[i] = d
	}
	return docs, nil
}

// SyncFile is the file `render credentials --out-dir` writes SyncMarker
// to, after HookFiles.
const SyncFile = "7-sync.yaml"

// SyncMarker is the one object render credentials writes beside the hook
// that is not a hook: a ConfigMap <owner>-credentials-sync, holding no
// secret, whose key job names the hook Job (HookJobName: a hash of the plan,
// keyledger's version and the image). Argo CD compares only non-hook objects
// with the cluster, so without it a commit that changes only the hook (a new
// plan, version or image) leaves the Application Synced and automated sync
// never runs the new Job; with it, the Application is OutOfSync until a sync
// ran the hook and then applied the marker (ordinary objects are applied
// after the PreSync phase succeeded).
func SyncMarker(cmd *Command, plan []byte, image, version string) ([]byte, error) {
	s := cmd.Spec
	return toYAML(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Owner + "-credentials-sync", Namespace: s.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "keyledger", "app.kubernetes.io/component": "credentials",
				"keyledger.dev/owner": s.Owner}},
		Data: map[string]string{"job": HookJobName(s.Owner, plan, version, image)},
	})
}

// HookContainer is the name of the hook Job's one container.
const HookContainer = "keyledger"

// HookPodFailurePolicy maps the hook container's exit codes (the README's
// table) to what the Job does: only the codes a rerun can settle are
// retried (counted against backoffLimit): 75, uncertain, which the next
// pod resumes, and 69, a dependency not reachable before any call (a
// journal failover, a policy not yet converged), which a later pod may
// find again. Every other code fails the Job at once, its condition naming
// the container and the code: 1 (a bug: a rerun repeats it), 2 (a
// journaled refusal), 64 (bad input), 77 (wrong rights), and a kill by a
// signal (137: out of memory, the deadline). A pod evicted or preempted
// (condition DisruptionTarget) is replaced without counting.
func HookPodFailurePolicy() *batchv1.PodFailurePolicy {
	name := HookContainer
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &name, Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{69, 75}}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: &name, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{69, 75}}},
	}}
}

// HookPolicy is the hook's own NetworkPolicy: it selects this plan's hook
// pods, admits nothing in and lets them reach each server pod of the plan
// on its port and nothing else. NetworkPolicies add up: the namespace's
// deploy/credentials policy (the same pods) adds cluster DNS, the journal's
// primary and, through the api-egress component, the API server. A server
// pod is selected by the label its StatefulSet gives it
// (statefulset.kubernetes.io/pod-name); a server whose expected controller
// is not a StatefulSet gets no rule (deploy/README.md: add one in your
// overlay).
func HookPolicy(s Spec) networkingv1.NetworkPolicySpec {
	tcp := corev1.ProtocolTCP
	var egress []networkingv1.NetworkPolicyEgressRule // none listed: no egress of its own
	for _, srv := range s.Servers {
		if srv.ExpectedController().Kind != "StatefulSet" {
			continue
		}
		port := intstr.FromInt32(int32(srv.Port)) //nolint:gosec // Validate bounds Port to 1..65535 (spec.go)
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"statefulset.kubernetes.io/pod-name": srv.Pod}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		})
	}
	return networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/managed-by": "keyledger",
			"app.kubernetes.io/component": "credentials", "keyledger.dev/owner": s.Owner}},
		// Ingress listed with no rule: nothing comes in.
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Egress:      egress,
	}
}

// journalEnv is the Job's journal connection, as deploy/'s
// components/cloudnativepg gives the retirement and versioned Jobs: the -rw
// Service in the journal's namespace, the database keyledger, the role's
// login from the credentials Secret (libpq-style PGUSER and PGPASSWORD, so
// the URL holds no secret), verify-full against the CA's certificate.
func journalEnv(j HookJournal) []corev1.EnvVar {
	fromSecret := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: j.Credentials}, Key: key}}
	}
	return []corev1.EnvVar{
		{Name: "PGHOST", Value: j.Host()},
		{Name: "PGPORT", Value: "5432"},
		{Name: "PGDATABASE", Value: "keyledger"},
		{Name: "PGUSER", ValueFrom: fromSecret("username")},
		{Name: "PGPASSWORD", ValueFrom: fromSecret("password")},
		{Name: "KEYLEDGER_DATABASE_URL", Value: "postgresql://$(PGHOST):$(PGPORT)/$(PGDATABASE)?sslmode=verify-full&sslrootcert=" + journalCADir + "/ca.crt"},
	}
}

// toYAML encodes an object without the empty status and creation
// timestamps the Go types carry.
func toYAML(o any) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	prune(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return bytes.TrimLeft(out, "\n"), nil
}

// prune drops creationTimestamp: null and empty objects left by the types.
func prune(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			if k == "creationTimestamp" {
				delete(m, k)
			}
		case map[string]any:
			prune(x)
			if len(x) == 0 && (k == "resources" || k == "status" || k == "strategy") {
				delete(m, k)
			}
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
		}
	}
}
