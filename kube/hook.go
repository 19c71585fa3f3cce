package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// HookObjects are the six objects of a credentials hook (what `keyledger
// render credentials` writes), all in one namespace.
type HookObjects struct {
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	RoleBinding    *rbacv1.RoleBinding
	ConfigMap      *corev1.ConfigMap
	// NetworkPolicy fences the hook's pods to the plan's servers on their
	// ports (beside deploy/credentials' DNS, journal and API server).
	NetworkPolicy *networkingv1.NetworkPolicy
	Job           *batchv1.Job
}

// InOrder returns the six objects in apply order.
func (o *HookObjects) InOrder() []metav1.Object {
	return []metav1.Object{o.ServiceAccount, o.Role, o.RoleBinding, o.ConfigMap, o.NetworkPolicy, o.Job}
}

// HookRef names a hook object for messages: "serviceaccount/NAME",
// "role/NAME", "rolebinding/NAME", "configmap/NAME" or "job/NAME".
func HookRef(o metav1.Object) string {
	switch o.(type) {
	case *corev1.ServiceAccount:
		return "serviceaccount/" + o.GetName()
	case *rbacv1.Role:
		return "role/" + o.GetName()
	case *rbacv1.RoleBinding:
		return "rolebinding/" + o.GetName()
	case *corev1.ConfigMap:
		return "configmap/" + o.GetName()
	case *networkingv1.NetworkPolicy:
		return "networkpolicy/" + o.GetName()
	case *batchv1.Job:
		return "job/" + o.GetName()
	}
	return fmt.Sprintf("%T/%s", o, o.GetName())
}

// hookPoll is how often WaitGone and WaitJob read.
const hookPoll = 250 * time.Millisecond

// Hook is `keyledger apply-hook`'s whole view of the API server, in one
// namespace: get, delete (background propagation) and create of
// ServiceAccounts, Roles, RoleBindings, ConfigMaps, NetworkPolicies and Jobs, as Argo CD runs
// PreSync hooks with the BeforeHookCreation policy. No update, patch, list or
// watch exists here; an object of another kind or namespace is refused before
// any request.
type Hook struct {
	namespace       string
	serviceAccounts HookResource[*corev1.ServiceAccount]
	roles           HookResource[*rbacv1.Role]
	roleBindings    HookResource[*rbacv1.RoleBinding]
	configMaps      HookResource[*corev1.ConfigMap]
	policies        HookResource[*networkingv1.NetworkPolicy]
	jobs            HookResource[*batchv1.Job]
}

// NewHook binds the adapter to one namespace.
func NewHook(client Interface, namespace string) *Hook {
	return &Hook{
		namespace:       namespace,
		serviceAccounts: client.ServiceAccounts(namespace),
		roles:           client.Roles(namespace),
		roleBindings:    client.RoleBindings(namespace),
		configMaps:      client.ConfigMaps(namespace),
		policies:        client.NetworkPolicies(namespace),
		jobs:            client.Jobs(namespace),
	}
}

// Delete deletes the object named like o, with background propagation. An
// object that is already absent (404) counts as deleted.
func (h *Hook) Delete(ctx context.Context, o metav1.Object) error {
	if err := h.bound(o); err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	var err error
	switch o.(type) {
	case *corev1.ServiceAccount:
		err = h.serviceAccounts.Delete(ctx, o.GetName(), opts)
	case *rbacv1.Role:
		err = h.roles.Delete(ctx, o.GetName(), opts)
	case *rbacv1.RoleBinding:
		err = h.roleBindings.Delete(ctx, o.GetName(), opts)
	case *corev1.ConfigMap:
		err = h.configMaps.Delete(ctx, o.GetName(), opts)
	case *networkingv1.NetworkPolicy:
		err = h.policies.Delete(ctx, o.GetName(), opts)
	case *batchv1.Job:
		err = h.jobs.Delete(ctx, o.GetName(), opts)
	}
	err = wrap(err)
	if errors.Is(err, ReasonNotFound) {
		return nil
	}
	return err
}

// WaitGone reads the object named like o until the API server answers 404,
// a read fails, or ctx ends (its error is returned).
func (h *Hook) WaitGone(ctx context.Context, o metav1.Object) error {
	if err := h.bound(o); err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, hookPoll, true, func(ctx context.Context) (bool, error) {
		err := h.get(ctx, o)
		if errors.Is(err, ReasonNotFound) {
			return true, nil
		}
		return false, err
	})
}

// Create creates o.
func (h *Hook) Create(ctx context.Context, o metav1.Object) error {
	if err := h.bound(o); err != nil {
		return err
	}
	var err error
	switch x := o.(type) {
	case *corev1.ServiceAccount:
		_, err = h.serviceAccounts.Create(ctx, x, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = h.roles.Create(ctx, x, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = h.roleBindings.Create(ctx, x, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = h.configMaps.Create(ctx, x, metav1.CreateOptions{})
	case *networkingv1.NetworkPolicy:
		_, err = h.policies.Create(ctx, x, metav1.CreateOptions{})
	case *batchv1.Job:
		_, err = h.jobs.Create(ctx, x, metav1.CreateOptions{})
	}
	return wrap(err)
}

// WaitJob reads the Job until it has a true Complete condition (failed is
// false) or a true Failed condition (failed is true, why its reason and
// message: with a podFailurePolicy, the container and its exit code); an
// error when a read fails or ctx ends first.
func (h *Hook) WaitJob(ctx context.Context, name string) (failed bool, why string, err error) {
	err = wait.PollUntilContextCancel(ctx, hookPoll, true, func(ctx context.Context) (bool, error) {
		j, err := wrapped(h.jobs.Get(ctx, name, metav1.GetOptions{}))
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				failed, why = true, strings.TrimSpace(c.Reason+": "+c.Message)
				return true, nil
			}
		}
		return false, nil
	})
	return failed, why, err
}

// bound refuses an object of another namespace or of a kind Hook does not
// handle.
func (h *Hook) bound(o metav1.Object) error {
	switch o.(type) {
	case *corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding, *corev1.ConfigMap, *networkingv1.NetworkPolicy, *batchv1.Job:
	default:
		return fmt.Errorf("%T refused: not a hook object", o)
	}
	if o.GetNamespace() != h.namespace {
		return fmt.Errorf("%s in namespace %q refused: adapter is bound to namespace %q", HookRef(o), o.GetNamespace(), h.namespace)
	}
	return nil
}

// get reads the object named like o.
func (h *Hook) get(ctx context.Context, o metav1.Object) error {
	var err error
	switch o.(type) {
	case *corev1.ServiceAccount:
		_, err = h.serviceAccounts.Get(ctx, o.GetName(), metav1.GetOptions{})
	case *rbacv1.Role:
		_, err = h.roles.Get(ctx, o.GetName(), metav1.GetOptions{})
	case *rbacv1.RoleBinding:
		_, err = h.roleBindings.Get(ctx, o.GetName(), metav1.GetOptions{})
	case *corev1.ConfigMap:
		_, err = h.configMaps.Get(ctx, o.GetName(), metav1.GetOptions{})
	case *networkingv1.NetworkPolicy:
		_, err = h.policies.Get(ctx, o.GetName(), metav1.GetOptions{})
	case *batchv1.Job:
		_, err = h.jobs.Get(ctx, o.GetName(), metav1.GetOptions{})
	}
	return wrap(err)
}
