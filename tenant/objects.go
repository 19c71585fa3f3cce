package tenant

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kind is one kind of object the steps read or write.
type kind struct {
	Name string // Secret, ConfigMap, ...
	GVR  schema.GroupVersionResource
}

var (
	secretKind    = kind{"Secret", schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}
	configMapKind = kind{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	namespaceKind = kind{"Namespace", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}}
	policyKind    = kind{"NetworkPolicy", schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}}
	sliceKind     = kind{"EndpointSlice", schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}}
	clusterKind   = kind{"Cluster", schema.GroupVersionResource{Group: "postgresql.cnpg.io", Version: "v1", Resource: "clusters"}}
)

func (k kind) apiVersion() string { return k.GVR.GroupVersion().String() }

// get reads one object into a typed value; found is false on 404.
func get[T any](ctx context.Context, a *Admin, k kind, ns, name string) (obj *T, found bool, err error) {
	u, err := a.Dynamic.Resource(k.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if notFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, apiError(fmt.Sprintf("reading %s %s", k.Name, ref(ns, name)), err)
	}
	obj = new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, false, fmt.Errorf("decoding %s %s: %w", k.Name, ref(ns, name), err)
	}
	return obj, true, nil
}

// ensure makes one object what decide wants: decide gets the live object
// (nil when absent) and returns the object to write, or nil when the live
// one is as it should be. A create or an update that meets a concurrent
// change is object-changed (69): the next run reads it again.
func ensure[T any](ctx context.Context, a *Admin, k kind, ns, name string, decide func(live *T) (*T, error)) (Change, error) {
	c := Change{Kind: k.Name, Namespace: ns, Name: name, DryRun: a.DryRun, Action: Unchanged}
	live, found, err := get[T](ctx, a, k, ns, name)
	if err != nil {
		return c, err
	}
	if !found {
		live = nil
	}
	want, err := decide(live)
	if err != nil || want == nil {
		return c, err
	}
	c.Action = Updated
	if live == nil {
		c.Action = Created
	}
	if a.DryRun {
		return c, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return c, fmt.Errorf("encoding %s %s: %w", k.Name, ref(ns, name), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(k.apiVersion())
	u.SetKind(k.Name)
	u.SetNamespace(ns)
	u.SetName(name)
	r := a.Dynamic.Resource(k.GVR).Namespace(ns)
	if live == nil {
		_, err = r.Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = r.Update(ctx, u, metav1.UpdateOptions{})
	}
	if conflict(err) {
		return c, changedUnder(k, ns, name)
	}
	if err != nil {
		return c, apiError(fmt.Sprintf("writing %s %s", k.Name, ref(ns, name)), err)
	}
	return c, nil
}

// remove deletes one object (deleted), or reports it absent.
func remove(ctx context.Context, a *Admin, k kind, ns, name string) (Change, error) {
	c := Change{Kind: k.Name, Namespace: ns, Name: name, DryRun: a.DryRun, Action: Absent}
	r := a.Dynamic.Resource(k.GVR).Namespace(ns)
	_, err := r.Get(ctx, name, metav1.GetOptions{})
	if notFound(err) {
		return c, nil
	}
	if err != nil {
		return c, apiError(fmt.Sprintf("reading %s %s", k.Name, ref(ns, name)), err)
	}
	c.Action = Deleted
	if a.DryRun {
		return c, nil
	}
	if err := r.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !notFound(err) {
		return c, apiError(fmt.Sprintf("deleting %s %s", k.Name, ref(ns, name)), err)
	}
	return c, nil
}

func changedUnder(k kind, ns, name string) error {
	return unavailable(ReasonObjectChanged, "someone else changed it at the same time: run the same command again",
		"%s %s changed while it was being written", k.Name, ref(ns, name))
}

func ref(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func fromUnstructured(m map[string]any, obj any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj); err != nil {
		return fmt.Errorf("decoding an API object: %w", err)
	}
	return nil
}
