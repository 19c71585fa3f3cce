// Package kubefake turns a client-go clientset (in unit tests, the fake
// one of k8s.io/client-go/kubernetes/fake, with its tracker and reactors)
// into a kube.Interface. Only tests import it (TestOnlyTestsImportIt): the
// keyledger binary links no clientset (kube.NewClient is its client).
package kubefake

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/keyledger/keyledger/kube"
)

// New is c seen through kube.Interface: each view is c's typed client of
// that resource, so requests, reactors and errors are c's.
func New(c kubernetes.Interface) kube.Interface { return clientset{c} }

// NewClientset is a fake clientset holding objects, and it as a
// kube.Interface (the fake, to add reactors and read its actions).
func NewClientset(objects ...runtime.Object) (*fake.Clientset, kube.Interface) {
	c := fake.NewClientset(objects...)
	return c, New(c)
}

type clientset struct{ c kubernetes.Interface }

func (f clientset) Secrets(namespace string) kube.Secrets { return f.c.CoreV1().Secrets(namespace) }
func (f clientset) Pods(namespace string) kube.Pods       { return f.c.CoreV1().Pods(namespace) }
func (f clientset) ServiceAccounts(namespace string) kube.HookResource[*corev1.ServiceAccount] {
	return f.c.CoreV1().ServiceAccounts(namespace)
}
func (f clientset) ConfigMaps(namespace string) kube.HookResource[*corev1.ConfigMap] {
	return f.c.CoreV1().ConfigMaps(namespace)
}
func (f clientset) Roles(namespace string) kube.HookResource[*rbacv1.Role] {
	return f.c.RbacV1().Roles(namespace)
}
func (f clientset) RoleBindings(namespace string) kube.HookResource[*rbacv1.RoleBinding] {
	return f.c.RbacV1().RoleBindings(namespace)
}
func (f clientset) NetworkPolicies(namespace string) kube.HookResource[*networkingv1.NetworkPolicy] {
	return f.c.NetworkingV1().NetworkPolicies(namespace)
}
func (f clientset) Jobs(namespace string) kube.HookResource[*batchv1.Job] {
	return f.c.BatchV1().Jobs(namespace)
}
func (f clientset) SelfSubjectAccessReviews() kube.Creator[*authorizationv1.SelfSubjectAccessReview] {
	return f.c.AuthorizationV1().SelfSubjectAccessReviews()
}
func (f clientset) SelfSubjectRulesReviews() kube.Creator[*authorizationv1.SelfSubjectRulesReview] {
	return f.c.AuthorizationV1().SelfSubjectRulesReviews()
}
func (f clientset) CoreREST() rest.Interface { return f.c.CoreV1().RESTClient() }
