package retire

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/workflow/kubetest"
)

// keyringAPI is the family's secrets seam over the test kit's API server,
// bound to one Secret as *kube.SecretReplacer is: Get, and Replace, which
// refuses another Secret and a missing resourceVersion precondition before
// sending (so neither reaches the server).
type keyringAPI struct {
	api  *kubetest.Server
	name string
}

var _ secrets = keyringAPI{}

func (a keyringAPI) Get(context.Context) (*corev1.Secret, error) {
	return kubetest.As[*corev1.Secret](a.api.Get(kubetest.Secrets, a.name))
}

func (a keyringAPI) Replace(_ context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	if s.Namespace != a.api.Namespace() || s.Name != a.name {
		return nil, fmt.Errorf("replace of %s/%s refused: adapter is bound to %s/%s", s.Namespace, s.Name, a.api.Namespace(), a.name)
	}
	if s.ResourceVersion == "" {
		return nil, fmt.Errorf("replace of %s/%s refused: no resourceVersion precondition", s.Namespace, s.Name)
	}
	return kubetest.As[*corev1.Secret](a.api.Update(kubetest.Secrets, s))
}

// newAPI is the kit's server holding s (created now: a UID and a
// resourceVersion).
func newAPI(s *corev1.Secret) *kubetest.Server {
	d := kubetest.New(s.Namespace)
	d.Seed(kubetest.Secrets, s)
	return d
}

// onGet and onReplace script the next reads and replaces of the keyring.
func onGet(d *kubetest.Server, faults ...kubetest.Fault) {
	d.On(kubetest.Get, kubetest.Secrets, fxSecret, faults...)
}

func onReplace(d *kubetest.Server, faults ...kubetest.Fault) {
	d.On(kubetest.Update, kubetest.Secrets, fxSecret, faults...)
}

// gets and replaces count the reads and replaces the keyring received.
func gets(d *kubetest.Server) int { return d.Count(kubetest.Get, kubetest.Secrets, fxSecret) }

func replaces(d *kubetest.Server) int { return d.Count(kubetest.Update, kubetest.Secrets, fxSecret) }

// replaced lists each Secret a replace of this operation stored.
func replaced(d *kubetest.Server) []*corev1.Secret {
	var out []*corev1.Secret
	for _, o := range d.Written(kubetest.Secrets, fxSecret) {
		out = append(out, o.(*corev1.Secret))
	}
	return out
}

// now is the stored keyring Secret, nil when absent.
func now(d *kubetest.Server) *corev1.Secret { return d.Secret(fxSecret) }

// theirUpdate is someone else's update of the keyring Secret.
func theirUpdate(d *kubetest.Server, opts ...secretOption) {
	d.Edit(kubetest.Secrets, fxSecret, func(o kubetest.Object) {
		for _, opt := range opts {
			opt(o.(*corev1.Secret))
		}
	})
}

// theirDelete is someone else's delete of the keyring Secret.
func theirDelete(d *kubetest.Server) { d.Remove(kubetest.Secrets, fxSecret) }

// annotate is someone else's harmless-looking edit: an unrelated annotation.
func annotate(d *kubetest.Server) { d.Edit(kubetest.Secrets, fxSecret, kubetest.Annotate) }

// The statuses the tables script.
var (
	conflict    = kubetest.Status(kubetest.Conflict(kubetest.Secrets, fxSecret))
	invalid     = kubetest.Status(kubetest.Invalid("Secret", fxSecret))
	serverError = kubetest.Status(kubetest.ServerError())
	forbidden   = kubetest.Status(kubetest.Forbidden(kubetest.Secrets, fxSecret))
)
