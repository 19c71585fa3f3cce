package platform

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// eventually is how long the tests wait for a controller or the RBAC cache.
const eventually = 60 * time.Second

var (
	sharedKubeOnce sync.Once
	sharedKubeVal  *Kube
	sharedKubeErr  error
)

// sharedKube returns the package's one control plane, starting it on first
// use; TestMain stops it after the last test. Skipped under -short. Set
// KEYLEDGER_KUBE_WORKDIR to keep the component logs after the run.
func sharedKube(t *testing.T) *Kube {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a Kubernetes control plane")
	}
	sharedKubeOnce.Do(func() {
		start := time.Now()
		var opts []KubeOption
		if dir := os.Getenv("KEYLEDGER_KUBE_WORKDIR"); dir != "" {
			opts = append(opts, WithWorkDir(dir)) // keep component logs
		}
		sharedKubeVal, sharedKubeErr = StartKube(context.Background(), opts...)
		if sharedKubeErr == nil {
			registerTeardown(sharedKubeVal.Stop)
			t.Logf("control plane started in %s at %s (logs in %s)", time.Since(start).Round(time.Millisecond), sharedKubeVal.Host(), sharedKubeVal.WorkDir())
		}
	})
	require.NoError(t, sharedKubeErr, "starting the shared control plane")
	return sharedKubeVal
}

func TestIntegrationKubeAdminKubeconfig(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	require.True(t, strings.HasPrefix(k.Host(), "https://127.0.0.1:"), "host %s", k.Host())
	c, err := clientFromKubeconfig(k.KubeconfigFile())
	require.NoError(t, err)
	got, err := c.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, ns, got.Name)
	require.Equal(t, "true", got.Labels["keyledger.test/test"])
}

func TestIntegrationKubeNamespaceCleanup(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	var ns string
	t.Run("uses", func(t *testing.T) {
		ns = k.Namespace(t)
		_, err := k.Client().CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "left-behind"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	})
	require.True(t, strings.HasPrefix(ns, "kl-kubenamespacecleanup-uses-"), "namespace %s", ns)
	// The namespace controller empties and removes it.
	require.Eventually(t, func() bool {
		_, err := k.Client().CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, eventually, 100*time.Millisecond, "namespace %s was never removed", ns)
}

func TestIntegrationKubeOptimisticConcurrency(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	ctx := t.Context()
	secrets := k.Client().CoreV1().Secrets(ns)

	created, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "signing-key"},
		Data:       map[string][]byte{"key": []byte("v1")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, created.UID)

	got, err := secrets.Get(ctx, "signing-key", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, created.UID, got.UID)
	require.Equal(t, []byte("v1"), got.Data["key"])

	// A first writer moves the resourceVersion on.
	got.Data["key"] = []byte("v2")
	updated, err := secrets.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	// A second writer holding the first read is refused.
	stale := created.DeepCopy()
	stale.Data["key"] = []byte("lost-update")
	_, err = secrets.Update(ctx, stale, metav1.UpdateOptions{})
	require.True(t, apierrors.IsConflict(err), "stale update: want 409 Conflict, got %v", err)

	// A delete guarded by another object's UID is refused too.
	wrongUID := types.UID("00000000-0000-0000-0000-000000000000")
	err = secrets.Delete(ctx, "signing-key", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	require.True(t, apierrors.IsConflict(err), "delete with wrong UID: want 409 Conflict, got %v", err)
	// ... and so is one guarded by a stale resourceVersion.
	err = secrets.Delete(ctx, "signing-key", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID, ResourceVersion: &created.ResourceVersion}})
	require.True(t, apierrors.IsConflict(err), "delete with stale resourceVersion: want 409 Conflict, got %v", err)

	still, err := secrets.Get(ctx, "signing-key", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), still.Data["key"], "refused writes must not have changed the Secret")

	err = secrets.Delete(ctx, "signing-key", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &updated.UID, ResourceVersion: &updated.ResourceVersion}})
	require.NoError(t, err)
	_, err = secrets.Get(ctx, "signing-key", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "after delete: want 404, got %v", err)
}

func TestIntegrationKubeServiceAccountRBAC(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	ctx := t.Context()
	admin := k.Client()

	for _, name := range []string{"granted", "other"} {
		_, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	cfg, err := k.ServiceAccountConfig(ctx, ns, "rotator", 600)
	require.NoError(t, err)
	require.NotEmpty(t, cfg.BearerToken)
	require.Empty(t, cfg.CertData, "the ServiceAccount config must not carry a client certificate")
	require.Empty(t, cfg.KeyData)
	sa, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	// The API server knows who we are.
	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:"+ns+":rotator", review.Status.UserInfo.Username)

	_, err = sa.CoreV1().Secrets(ns).Get(ctx, "granted", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "before the grant: want 403 Forbidden, got %v", err)
	require.False(t, canGetSecret(ctx, t, sa, ns, "granted"), "SelfSubjectAccessReview before the grant")

	_, err = admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "get-granted"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"granted"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rotator-get-granted"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "get-granted"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "rotator", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The authorizer reads RBAC objects through an informer: allow a moment.
	require.Eventually(t, func() bool {
		_, err := sa.CoreV1().Secrets(ns).Get(ctx, "granted", metav1.GetOptions{})
		return err == nil
	}, eventually, 100*time.Millisecond, "get on the granted Secret never became allowed")
	require.True(t, canGetSecret(ctx, t, sa, ns, "granted"), "SelfSubjectAccessReview after the grant")

	// The grant is for that one name and that one verb.
	_, err = sa.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "another Secret: want 403 Forbidden, got %v", err)
	require.False(t, canGetSecret(ctx, t, sa, ns, "other"))
	_, err = sa.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "list: want 403 Forbidden, got %v", err)

	// A subprocess given the kubeconfig acts as the ServiceAccount.
	path, err := k.KubeconfigForConfig(cfg, t.TempDir())
	require.NoError(t, err)
	fromFile, err := clientFromKubeconfig(path)
	require.NoError(t, err)
	_, err = fromFile.CoreV1().Secrets(ns).Get(ctx, "granted", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = fromFile.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "kubeconfig client on another Secret: want 403, got %v", err)
}

func clientFromKubeconfig(path string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func canGetSecret(ctx context.Context, t *testing.T, c kubernetes.Interface, ns, name string) bool {
	t.Helper()
	review, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Resource: "secrets", Name: name,
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.Allowed
}

func TestIntegrationKubeOrphanDeletion(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	ctx := t.Context()
	// Owner and dependent are the same resource, so the garbage collector
	// sees them through one informer, in order: it knows the dependent
	// before it sees the owner's deletion. (With an owner of another kind
	// its informer may deliver the deletion first; the collector then
	// orphans the dependents it knows, none, and the dependent keeps its
	// ownerReference: seen once in 12 runs.)
	cms := k.Client().CoreV1().ConfigMaps(ns)

	// A second finalizer keeps the owner visible after the garbage collector
	// has done its part, so the test sees the orphan finalizer go.
	const hold = "keyledger.test/hold"
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Finalizers: []string{hold}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	orphan := metav1.DeletePropagationOrphan
	require.NoError(t, cms.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: &orphan}))

	require.Eventually(t, func() bool {
		cur, err := cms.Get(ctx, "owner", metav1.GetOptions{})
		return err == nil && cur.DeletionTimestamp != nil && len(cur.Finalizers) == 1 && cur.Finalizers[0] == hold
	}, eventually, 100*time.Millisecond, "the garbage collector never cleared the orphan finalizer")

	dep, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
	require.NoError(t, err, "the dependent must survive an Orphan deletion")
	require.Empty(t, dep.OwnerReferences, "the garbage collector must remove the ownerReference")

	// Releasing our finalizer lets the owner go; the dependent stays.
	cur, err := cms.Get(ctx, "owner", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Finalizers = nil
	_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cms.Get(ctx, "owner", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, eventually, 100*time.Millisecond)
	dep, err = cms.Get(ctx, "dependent", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, dep.OwnerReferences)
}

func TestIntegrationKubeStatefulSetPodReplacement(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	ctx := t.Context()
	labels := map[string]string{"app": "signer"}
	_, err := k.Client().AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "signer"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(1)),
			ServiceName: "signer",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// A pod bound to a node is deleted gracefully: it lingers,
					// terminating, until its (played) kubelet finishes it.
					NodeName:   "played-node",
					Containers: []corev1.Container{{Name: "signer", Image: "keyledger.test/signer:1"}},
				},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	waitCtx, cancel := context.WithTimeout(ctx, eventually)
	defer cancel()
	first, err := k.PlayKubelet(waitCtx, ns, "signer-0", "")
	require.NoError(t, err)
	require.Equal(t, corev1.PodRunning, first.Status.Phase)
	require.Equal(t, "127.0.0.1", first.Status.PodIP)
	require.True(t, podReady(first))
	require.NotEmpty(t, first.OwnerReferences, "signer-0 must be the StatefulSet controller's pod")
	require.Equal(t, "StatefulSet", first.OwnerReferences[0].Kind)
	waitReadyReplicas(t, k, ns, "signer", 1)

	stop := k.KubeletLoop(ctx, ns, "signer-0", "127.0.0.2")
	defer stop()
	require.Equal(t, "played-node", first.Spec.NodeName)
	w, err := k.Client().CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=signer-0",
		ResourceVersion: first.ResourceVersion,
	})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, k.Client().CoreV1().Pods(ns).Delete(ctx, "signer-0", metav1.DeleteOptions{}))
	require.True(t, sawTerminatingThenDeleted(t, w, first.UID), "signer-0 should linger terminating until the played kubelet finishes it")

	var second *corev1.Pod
	require.Eventually(t, func() bool {
		p, err := k.Client().CoreV1().Pods(ns).Get(ctx, "signer-0", metav1.GetOptions{})
		if err != nil || p.UID == first.UID || !podReady(p) {
			return false
		}
		second = p
		return true
	}, eventually, 100*time.Millisecond, "the StatefulSet controller never recreated a ready signer-0")
	require.NotEqual(t, first.UID, second.UID)
	require.Equal(t, "127.0.0.2", second.Status.PodIP)
	waitReadyReplicas(t, k, ns, "signer", 1)
}

// sawTerminatingThenDeleted follows a pod watch until the incarnation uid is
// deleted, and says whether it was first seen terminating.
func sawTerminatingThenDeleted(t *testing.T, w watch.Interface, uid types.UID) bool {
	t.Helper()
	terminating := false
	timeout := time.After(eventually)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed early")
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || p.UID != uid {
				continue
			}
			switch ev.Type {
			case watch.Modified:
				terminating = terminating || p.DeletionTimestamp != nil
			case watch.Deleted:
				return terminating
			}
		case <-timeout:
			require.FailNow(t, "the pod was never deleted")
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitReadyReplicas(t *testing.T, k *Kube, ns, name string, want int32) {
	t.Helper()
	require.Eventually(t, func() bool {
		sts, err := k.Client().AppsV1().StatefulSets(ns).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && sts.Status.ReadyReplicas == want && sts.Status.ObservedGeneration == sts.Generation
	}, eventually, 100*time.Millisecond, "StatefulSet %s never reported %d ready replicas", name, want)
}

func TestIntegrationKubeJob(t *testing.T) {
	t.Parallel()
	k := sharedKube(t)
	ns := k.Namespace(t)
	ctx := t.Context()
	job, err := k.Client().BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "rotate"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32(0)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "rotate", Image: "keyledger.test/rotate:1"}},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The Job controller creates the pod ...
	var pod corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := k.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=rotate"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = pods.Items[0]
		return true
	}, eventually, 100*time.Millisecond, "the Job controller never created a pod")
	require.Equal(t, job.UID, metav1.GetControllerOf(&pod).UID)
	require.Eventually(t, func() bool {
		j, err := k.Client().BatchV1().Jobs(ns).Get(ctx, "rotate", metav1.GetOptions{})
		return err == nil && j.Status.Active == 1
	}, eventually, 100*time.Millisecond, "the Job never counted its pod as active")

	// ... and, once its pod succeeds, marks the Job complete.
	p, err := k.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	p.Status.StartTime = &now
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "rotate", Image: "keyledger.test/rotate:1", ImageID: "keyledger.test/rotate:1",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
	}}
	_, err = k.Client().CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j, err := k.Client().BatchV1().Jobs(ns).Get(ctx, "rotate", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return j.Status.Succeeded == 1
			}
		}
		return false
	}, eventually, 100*time.Millisecond, "the Job controller never marked the Job complete")
}
