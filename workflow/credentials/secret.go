package credentials

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The metadata a planned Secret carries or loses.
const (
	// AnnotationCreatedBy names the run (journal mutation ID) whose create
	// made the Secret. It is for people: anyone who may create Secrets can
	// write it, so keyledger never decides anything from it.
	AnnotationCreatedBy = "keyledger.dev/created-by-mutation"
	// AnnotationNonce holds the random nonce of the create call that made
	// the Secret; the call record journals its digest before the create is
	// sent, so after a lost answer only the Secret with that nonce (and the
	// planned type and keys) is the call's.
	AnnotationNonce = "keyledger.dev/create-nonce"
	// AnnotationArgoTracking is Argo CD's tracking id, removed from adopted
	// Secrets so Argo CD does not prune them.
	AnnotationArgoTracking = "argocd.argoproj.io/tracking-id"
	// LabelArgoInstance is Argo CD's legacy tracking label, removed likewise.
	LabelArgoInstance = "app.kubernetes.io/instance"
	// kindExternalSecret is the owner kind removed from adopted Secrets.
	kindExternalSecret  = "ExternalSecret"
	groupExternalSecret = "external-secrets.io"
)

// newSecret is the Secret a create sends: the plan's labels, the
// created-by and nonce annotations, and every key's value (generated now).
func newSecret(random io.Reader, namespace, run, nonce string, plan Secret) (*corev1.Secret, error) {
	data := make(map[string][]byte, len(plan.Keys))
	for _, k := range plan.Keys {
		v, err := value(random, k)
		if err != nil {
			return nil, err
		}
		data[k.Name] = v
	}
	labels := make(map[string]string, len(plan.Labels))
	for k, v := range plan.Labels {
		labels[k] = v
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: plan.Name, Namespace: namespace, Labels: labels,
			Annotations: map[string]string{AnnotationCreatedBy: run, AnnotationNonce: nonce},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}, nil
}

// newNonce is 128 random bits, hex: the create call's proof of authorship.
func newNonce(random io.Reader) (string, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("reading randomness: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// nonceDigest is what the journal holds of a nonce: sha256, so that a reader
// of the journal cannot write a Secret that passes for the call's.
func nonceDigest(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// value is a key's literal value, or one generated from random.
func value(random io.Reader, k Key) ([]byte, error) {
	if k.Value != nil {
		return []byte(*k.Value), nil
	}
	return generate(random, *k.Generate)
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// change is what an existing Secret lacks. It is content-free: key and
// label names, never values.
type change struct {
	AddKeys        []string `json:"addKeys,omitempty"`
	AddLabels      []string `json:"addLabels,omitempty"`
	RemoveOwners   []string `json:"removeOwners,omitempty"`
	RemoveTracking bool     `json:"removeTracking,omitempty"`
	RemoveInstance bool     `json:"removeInstance,omitempty"`
}

func (c change) empty() bool {
	return len(c.AddKeys) == 0 && len(c.AddLabels) == 0 && len(c.RemoveOwners) == 0 && !c.RemoveTracking && !c.RemoveInstance
}

// detail is c as journaled: the owner references as a count (owner names
// come from the cluster, and a record's size must follow from the plan
// alone).
func (c change) detail() changeDetail {
	return changeDetail{AddKeys: c.AddKeys, AddLabels: c.AddLabels, RemoveOwners: len(c.RemoveOwners),
		RemoveTracking: c.RemoveTracking, RemoveInstance: c.RemoveInstance}
}

// diff says what s lacks against the plan. adopted Secrets also lose
// ExternalSecret owner references and Argo CD's tracking metadata.
func diff(s *corev1.Secret, plan Secret, adopted bool) change {
	var c change
	for _, k := range plan.Keys {
		if _, ok := s.Data[k.Name]; !ok {
			c.AddKeys = append(c.AddKeys, k.Name)
		}
	}
	for k := range plan.Labels {
		if _, ok := s.Labels[k]; !ok {
			c.AddLabels = append(c.AddLabels, k)
		}
	}
	sort.Strings(c.AddLabels)
	if adopted {
		for _, o := range s.OwnerReferences {
			if isExternalSecretOwner(o) {
				c.RemoveOwners = append(c.RemoveOwners, o.Name)
			}
		}
		_, c.RemoveTracking = s.Annotations[AnnotationArgoTracking]
		_, c.RemoveInstance = s.Labels[LabelArgoInstance]
	}
	return c
}

func isExternalSecretOwner(o metav1.OwnerReference) bool {
	group, _, _ := strings.Cut(o.APIVersion, "/")
	return o.Kind == kindExternalSecret && group == groupExternalSecret
}

// patchFor builds the one JSON patch that makes s have what c says it lacks.
// Its first operation tests s's resourceVersion, so it applies only to s
// exactly as read. It adds only absent members: an existing /data/<key> is
// never the path of any operation. Values are generated here for keys to add.
func patchFor(random io.Reader, s *corev1.Secret, plan Secret, c change) ([]byte, error) {
	ops := []patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: s.ResourceVersion}}
	// Removals first, by index from the end, while the indices still hold.
	if len(c.RemoveOwners) > 0 {
		keep := slices.DeleteFunc(slices.Clone(s.OwnerReferences), isExternalSecretOwner)
		if len(keep) == 0 {
			ops = append(ops, patchOp{Op: "remove", Path: "/metadata/ownerReferences"})
		} else {
			for i := len(s.OwnerReferences) - 1; i >= 0; i-- {
				if isExternalSecretOwner(s.OwnerReferences[i]) {
					ops = append(ops, patchOp{Op: "remove", Path: fmt.Sprintf("/metadata/ownerReferences/%d", i)})
				}
			}
		}
	}
	if c.RemoveTracking {
		ops = append(ops, patchOp{Op: "remove", Path: "/metadata/annotations/" + escape(AnnotationArgoTracking)})
	}
	if c.RemoveInstance {
		ops = append(ops, patchOp{Op: "remove", Path: "/metadata/labels/" + escape(LabelArgoInstance)})
	}
	if len(c.AddLabels) > 0 {
		if s.Labels == nil {
			labels := map[string]string{}
			for _, k := range c.AddLabels {
				labels[k] = plan.Labels[k]
			}
			ops = append(ops, patchOp{Op: "add", Path: "/metadata/labels", Value: labels})
		} else {
			for _, k := range c.AddLabels {
				ops = append(ops, patchOp{Op: "add", Path: "/metadata/labels/" + escape(k), Value: plan.Labels[k]})
			}
		}
	}
	if len(c.AddKeys) > 0 {
		values := map[string][]byte{}
		for _, name := range c.AddKeys {
			i := slices.IndexFunc(plan.Keys, func(k Key) bool { return k.Name == name })
			v, err := value(random, plan.Keys[i])
			if err != nil {
				return nil, err
			}
			values[name] = v
		}
		if s.Data == nil {
			ops = append(ops, patchOp{Op: "add", Path: "/data", Value: values})
		} else {
			for _, name := range c.AddKeys {
				ops = append(ops, patchOp{Op: "add", Path: "/data/" + escape(name), Value: values[name]})
			}
		}
	}
	return json.Marshal(ops)
}

// escape encodes a member name as a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
