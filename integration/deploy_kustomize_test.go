package integration

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/command"
)

// The kustomizations under deploy/ that render on their own. The api-egress
// component is a template: it is rendered only through a private overlay
// (privateOverlay), as an operator would use it.
var kustomizations = []string{"base", "versioned", "control", "overlays/cloudnativepg", "overlays/cloudnativepg-versioned", "journal", "journal/grant", "journal/inspect", "credentials"}

// deployFS is the repository's deploy/ tree copied into an in-memory
// filesystem at /deploy, so tests can add private overlays beside it
// without writing into the work tree.
func deployFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	root := filepath.Join(platform.RepoRoot(), "deploy")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/deploy", rel), data)
	})
	require.NoError(t, err)
	return mem
}

// render builds the kustomization at dir in fsys with the kustomize Go API
// (the same engine as `kubectl kustomize`) and returns its objects.
func render(t *testing.T, fsys filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := tryRender(fsys, dir)
	require.NoError(t, err, "kustomize build %s", dir)
	require.NotEmpty(t, objs, "kustomize build %s rendered nothing", dir)
	return objs
}

func tryRender(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, so numbers are int64 as in every client object.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// privateOverlay is what an operator fills in for one retirement, written
// exactly as deploy/README.md tells them to.
type privateOverlay struct {
	Namespace  string
	NameSuffix string
	SecretName string
	Canary     string
	Command    []byte
	// APIServerIP and APIServerPort, when set, add a filled copy of
	// components/api-egress.
	APIServerIP   string
	APIServerPort int
	// ForgetImmutable leaves out the generator's immutable option (an
	// operator's mistake the audit must catch).
	ForgetImmutable bool
	// ImageName and ImageTag, when set, are the images: entry's newName and
	// newTag (default: newTag test).
	ImageName, ImageTag string
	// Pooled adds components/cloudnativepg-pooler: the journal through its
	// session pooler.
	Pooled bool
	// MutationID, when set, fills the Job's mutation ID label and
	// annotation as deploy/README.md says (labels, commonAnnotations).
	MutationID string
}

// write lays the overlay out at /private in fsys and returns its path.
func (o privateOverlay) write(t *testing.T, fsys filesys.FileSystem) string {
	t.Helper()
	immutable := "  options:\n    immutable: true\n"
	if o.ForgetImmutable {
		immutable = ""
	}
	var components []string
	if o.APIServerIP != "" {
		components = append(components, "api-egress")
		fillAPIEgress(t, fsys, "/private", o.APIServerIP, o.APIServerPort)
	}
	if o.Pooled {
		components = append(components, "../deploy/components/cloudnativepg-pooler")
	}
	listed := ""
	if len(components) > 0 {
		listed = "components:\n- " + strings.Join(components, "\n- ") + "\n"
	}
	image := "  newTag: test\n"
	if o.ImageName != "" {
		image = fmt.Sprintf("  newName: %s\n  newTag: %s\n", o.ImageName, o.ImageTag)
	}
	mutation := ""
	if o.MutationID != "" {
		mutation = fmt.Sprintf("labels:\n- pairs:\n    keyledger.dev/mutation-id-hash: %q\n  includeTemplates: true\n"+
			"commonAnnotations:\n  keyledger.dev/mutation-id: %q\n", command.MutationIDHash(o.MutationID), o.MutationID)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: "%[1]s"
nameSuffix: "-%[2]s"
resources:
- ../deploy/overlays/cloudnativepg
%[3]s%[8]sconfigMapGenerator:
- name: keyledger-command
  behavior: replace
  files:
  - command.json
%[4]spatches:
- target:
    kind: Role
    name: keyledger-retire
  patch: |-
    - op: replace
      path: /rules/0/resourceNames
      value: [%[5]q]
- target:
    kind: Job
    name: keyledger-retire
  patch: |-
    - op: replace
      path: /spec/template/spec/initContainers/0/env/0/value
      value: %[6]q
images:
- name: keyledger
%[7]s`, o.Namespace, o.NameSuffix, listed, immutable, o.SecretName, o.Canary, image, mutation)
	require.NoError(t, fsys.WriteFile("/private/kustomization.yaml", []byte(kustomization)))
	require.NoError(t, fsys.WriteFile("/private/command.json", o.Command))
	return "/private"
}

// fillAPIEgress copies components/api-egress into dir/api-egress with the
// API server endpoint filled in, as deploy/README.md tells an operator to.
func fillAPIEgress(t *testing.T, fsys filesys.FileSystem, dir, ip string, port int) {
	t.Helper()
	for _, name := range []string{"kustomization.yaml", "api-egress.yaml"} {
		data, err := fsys.ReadFile("/deploy/components/api-egress/" + name)
		require.NoError(t, err)
		filled := strings.NewReplacer("API_SERVER_IP", ip, "API_SERVER_PORT", fmt.Sprint(port)).Replace(string(data))
		require.NoError(t, fsys.WriteFile(dir+"/api-egress/"+name, []byte(filled)))
	}
}

// renderPrivate renders o on top of a fresh copy of deploy/.
func renderPrivate(t *testing.T, o privateOverlay) []*unstructured.Unstructured {
	t.Helper()
	fsys := deployFS(t)
	return render(t, fsys, o.write(t, fsys))
}

// find returns the one rendered object of kind whose name starts with
// prefix.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, prefix string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasPrefix(o.GetName(), prefix) {
			require.Nil(t, found, "more than one %s named %s*", kind, prefix)
			found = o
		}
	}
	require.NotNil(t, found, "no %s named %s*", kind, prefix)
	return found
}

// applier applies unstructured objects to the real API server with
// server-side apply, for real or as a dry run.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func (e *env) applier() *applier {
	e.t.Helper()
	cfg := e.kube.Config()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(e.t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(e.t, err)
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// resource resolves obj's kind, placing namespaced objects without a
// namespace into ns.
func (a *applier) resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(ns)
	}
	return a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// apply server-side-applies obj (a dry run: DryRun All, nothing persisted,
// everything validated and admitted).
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, ns string, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := a.resource(obj, ns)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: "keyledger-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Apply(ctx, obj.GetName(), obj, opts)
}

// dryRunAll applies every object as a server-side dry run and fails the
// test on the first rejection.
func (a *applier) dryRunAll(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	for _, obj := range objs {
		_, err := a.apply(t.Context(), obj.DeepCopy(), ns, true)
		require.NoError(t, err, "server-side dry run of %s %s", obj.GetKind(), obj.GetName())
	}
}

// waitForKind waits until discovery serves gvk (after a CRD is installed).
func (a *applier) waitForKind(ctx context.Context, group, version, kind string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		a.mapper.Reset()
		_, err := a.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}, version)
		return err == nil, nil
	})
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// TestIntegrationDeployNameSuffixOfDigits: the private overlay as
// deploy/README.md writes it renders for a namespace named only with
// digits (a valid DNS label): its nameSuffix is quoted, since YAML reads
// -123456789012 as a number, which kustomize refuses. The random hex
// suffix of the deploy tests hit that about once in 300 runs.
func TestIntegrationDeployNameSuffixOfDigits(t *testing.T) {
	t.Parallel()
	objs := renderPrivate(t, privateOverlay{
		Namespace: "123456789012", NameSuffix: "123456789012", SecretName: "keyring", Canary: "192.0.2.10:443",
		Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443,
	})
	for _, o := range objs {
		if o.GetKind() == "ClusterRoleBinding" {
			require.True(t, strings.HasSuffix(o.GetName(), "-123456789012"), o.GetName())
			return
		}
	}
	t.Fatal("no ClusterRoleBinding rendered")
}
