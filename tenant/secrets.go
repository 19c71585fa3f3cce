package tenant

import (
	"bytes"
	"context"
	"crypto/rand"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reloadLabel makes CloudNativePG apply a password Secret's change at once
// rather than at its next resync.
const reloadLabel = "cnpg.io/reload"

// labels of every object onboarding writes.
func labels(extra map[string]string) map[string]string {
	l := map[string]string{"app.kubernetes.io/name": "keyledger", "app.kubernetes.io/part-of": "keyledger",
		"app.kubernetes.io/managed-by": "keyledger"}
	maps.Copy(l, extra)
	return l
}

// NewPassword is a fresh password: 26 characters of crypto/rand's base32
// text (128 bits).
func NewPassword() []byte { return []byte(rand.Text()) }

// loginSecret is the basic-auth Secret of role with password.
func loginSecret(role string, password []byte, extra map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: labels(extra)}, Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte(role), corev1.BasicAuthPasswordKey: password}}
}

// ensureLogin makes the Secret ns/name the role's login: created when
// absent, its username, password and labels corrected when present. The
// password is what password returns given the live one (nil when absent);
// it is called at most once. A Secret of another type is not keyledger's:
// refused.
func ensureLogin(ctx context.Context, a *Admin, ns, name, role string, extra map[string]string, password func(live []byte) []byte) (Change, error) {
	return ensure(ctx, a, secretKind, ns, name, func(live *corev1.Secret) (*corev1.Secret, error) {
		if live == nil {
			return loginSecret(role, password(nil), extra), nil
		}
		if live.Type != corev1.SecretTypeBasicAuth {
			return nil, refuse(ReasonObjectNotKeyledgers, "delete or rename that Secret, then run the same command again",
				"Secret %s/%s exists and is of type %s, not the kubernetes.io/basic-auth login keyledger writes", ns, name, live.Type)
		}
		want := loginSecret(role, password(live.Data[corev1.BasicAuthPasswordKey]), extra)
		if sameLogin(live, want) {
			return nil, nil
		}
		live.Data, live.Labels = want.Data, mergeLabels(live.Labels, want.Labels)
		return live, nil
	})
}

// sameLogin: live holds want's data and labels.
func sameLogin(live, want *corev1.Secret) bool {
	if len(live.Data) != len(want.Data) {
		return false
	}
	for k, v := range want.Data {
		if !bytes.Equal(live.Data[k], v) {
			return false
		}
	}
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	return true
}

func mergeLabels(live, want map[string]string) map[string]string {
	out := maps.Clone(live)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

// roleSecretPassword reads the password of the journal-side Secret: the
// one value CloudNativePG gives the role. Empty when it does not exist.
func roleSecretPassword(ctx context.Context, a *Admin, n Names) ([]byte, error) {
	s, found, err := get[corev1.Secret](ctx, a, secretKind, JournalNamespace, n.RoleSecret)
	if err != nil || !found {
		return nil, err
	}
	return s.Data[corev1.BasicAuthPasswordKey], nil
}
