package platform

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultPodIP is the address PlayKubelet and KubeletLoop report for a pod
// (and its host) when given none.
const DefaultPodIP = "127.0.0.1"

// kubeletPoll is how often the kubelet helpers look at their pod.
const kubeletPoll = 100 * time.Millisecond

// PlayKubelet stands in for the kubelet, which this control plane does not
// have: it waits until namespace/podName exists and is not terminating, then
// reports it through the status subresource as running and ready at ip
// (DefaultPodIP if empty): phase Running, conditions PodScheduled,
// Initialized, ContainersReady and Ready true, every container running.
// A terminating incarnation met on the way is deleted for good (grace period
// 0), as a kubelet would once its containers stopped. The pod needs no node.
func (k *Kube) PlayKubelet(ctx context.Context, namespace, podName, ip string) (*corev1.Pod, error) {
	if ip == "" {
		ip = DefaultPodIP
	}
	if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("play kubelet: %q is not an IP address", ip)
	}
	var ready *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, kubeletPoll, true, func(ctx context.Context) (bool, error) {
		pod, err := k.playOnce(ctx, namespace, podName, ip)
		if err != nil {
			return false, err
		}
		ready = pod
		return pod != nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("playing kubelet for pod %s/%s: %w", namespace, podName, err)
	}
	return ready, nil
}

// KubeletLoop plays the kubelet for namespace/podName until stop is called
// or ctx ends: every incarnation of the pod (a StatefulSet replaces a deleted
// pod with one of the same name and a new UID) is marked ready at ip, and
// every terminating one is deleted for good. stop waits for the loop to end.
func (k *Kube) KubeletLoop(ctx context.Context, namespace, podName, ip string) (stop func()) {
	if ip == "" {
		ip = DefaultPodIP
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Errors are transient here (conflicts, a pod deleted under us):
		// the next tick retries.
		_ = wait.PollUntilContextCancel(ctx, kubeletPoll, true, func(ctx context.Context) (bool, error) {
			_, _ = k.playOnce(ctx, namespace, podName, ip)
			return false, nil
		})
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// playOnce looks at the pod once. It returns the pod when it is (now)
// reported ready, nil when there is nothing to play yet.
func (k *Kube) playOnce(ctx context.Context, namespace, podName, ip string) (*corev1.Pod, error) {
	pods := k.client.CoreV1().Pods(namespace)
	pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if pod.DeletionTimestamp != nil {
		uid := pod.UID
		err := pods.Delete(ctx, podName, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("finishing deletion of pod %s/%s: %w", namespace, podName, err)
		}
		return nil, nil
	}
	if playedReady(pod, ip) {
		return pod, nil
	}
	markRunningReady(pod, ip)
	updated, err := pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil, nil // changed or replaced under us: look again
	case err != nil:
		return nil, fmt.Errorf("updating status of pod %s/%s: %w", namespace, podName, err)
	}
	return updated, nil
}

// playedReady says whether the pod already shows what markRunningReady sets.
func playedReady(pod *corev1.Pod, ip string) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != ip {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// markRunningReady sets the status a kubelet reports for a pod whose
// containers all started and pass their readiness checks.
func markRunningReady(pod *corev1.Pod, ip string) {
	now := metav1.Now()
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = ip, []corev1.HostIP{{IP: ip}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     c.Image,
			ContainerID: fmt.Sprintf("keyledger://%s/%s", pod.UID, c.Name),
			Ready:       true,
			Started:     new(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}
