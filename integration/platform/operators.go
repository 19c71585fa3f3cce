package platform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// EnvOperators turns the operator suites off: KEYLEDGER_OPERATORS=off skips
// the tests that run the real CloudNativePG operator and the real External
// Secrets controller (and `make platform` does not build them). Any other
// value, or none, runs them.
const EnvOperators = "KEYLEDGER_OPERATORS"

// OperatorsSkipReason says why the operator suites must not run here, or ""
// when they should.
func OperatorsSkipReason() string {
	if os.Getenv(EnvOperators) == "off" {
		return EnvOperators + "=off: operator suites (CloudNativePG, External Secrets) skipped"
	}
	return ""
}

// operatorsDir builds (first run) or finds one operator in the operators'
// cache directory (hack/operators.sh cloudnativepg|external-secrets) and
// returns that directory.
func operatorsDir(ctx context.Context, which string) (string, error) {
	root := RepoRoot()
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "operators.sh"), which)
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("running hack/operators.sh %s: %w", which, err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ApplyManifest server-side-applies every object of a multi-document YAML
// file as field manager keyledger-test, after edit (which may drop an object
// by returning false). Namespaced objects without a namespace are an error.
func ApplyManifest(ctx context.Context, k *Kube, path string, edit func(*unstructured.Unstructured) bool) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	var kept []*unstructured.Unstructured
	for _, o := range objs {
		if edit == nil || edit(o) {
			kept = append(kept, o)
		}
	}
	return kept, ApplyObjects(ctx, k, kept)
}

func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// ApplyObjects server-side-applies objs in order (force, field manager
// keyledger-test). CRDs are waited for until Established before the next
// object, so a custom resource may follow its definition.
func ApplyObjects(ctx context.Context, k *Kube, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(k.Config())
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config())
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var m *meta.RESTMapping
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			var err error
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				mapper.Reset()
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("no API serves %s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				return fmt.Errorf("%s %s has no namespace", gvk.Kind, o.GetName())
			}
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		body, err := o.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "keyledger-test", Force: &force}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if gvk.Kind == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, dyn, o.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// ExternalSecrets is the External Secrets controller (EXTERNAL_SECRETS_VERSION,
// built from the Go module proxy by hack/operators.sh) running out of
// cluster against a control plane, with the CRDs of the same module. Only
// the ExternalSecret reconciler runs (no webhook, no certificate controller,
// no cluster-wide or push reconcilers: none is needed without a remote
// store). Stop ends it by PID.
type ExternalSecrets struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// StartExternalSecrets installs the External Secrets CRDs into k and starts
// the controller as the control plane's admin.
func StartExternalSecrets(ctx context.Context, k *Kube) (*ExternalSecrets, error) {
	dir, err := operatorsDir(ctx, "external-secrets")
	if err != nil {
		return nil, err
	}
	version, err := Version("EXTERNAL_SECRETS_VERSION")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "external-secrets-v"+version)
	if _, err := ApplyManifest(ctx, k, filepath.Join(home, "crds.yaml"), nil); err != nil {
		return nil, fmt.Errorf("installing the External Secrets CRDs: %w", err)
	}
	logPath := filepath.Join(k.WorkDir(), "external-secrets.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(home, "external-secrets"),
		"--metrics-addr=0",
		"--enable-leader-election=false",
		"--enable-cluster-store-reconciler=false",
		"--enable-cluster-external-secret-reconciler=false",
		"--enable-push-secret-reconciler=false",
		"--enable-cluster-push-secret-reconciler=false",
		"--loglevel=info",
	)
	// controller-runtime reads $KUBECONFIG (there is no flag).
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + k.WorkDir(), "KUBECONFIG=" + k.KubeconfigFile()}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the External Secrets controller: %w", err)
	}
	e := &ExternalSecrets{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { e.err = cmd.Wait(); close(e.done) }()
	// Ready when its ExternalSecret controller runs its workers.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-e.done:
			return false, fmt.Errorf("the External Secrets controller exited: %v:\n%s", e.err, logTail(logPath, 20))
		default:
		}
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("Starting workers")) && bytes.Contains(b, []byte(`"externalsecret"`)), nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("waiting for the External Secrets controller: %w", err), e.Stop())
	}
	return e, nil
}

// Log returns the controller's log so far.
func (e *ExternalSecrets) Log() string {
	b, _ := os.ReadFile(e.log)
	return string(b)
}

// Stop ends the controller: SIGTERM, then SIGKILL after 10 s.
func (e *ExternalSecrets) Stop() error {
	if e == nil || e.cmd == nil || e.cmd.Process == nil {
		return nil
	}
	select {
	case <-e.done:
		return nil
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
	return nil
}

// CloudNativePG is the CloudNativePG operator (CLOUDNATIVEPG_VERSION, built
// from the Go module proxy by hack/operators.sh) installed on the test node
// from the release manifest inside its module, with the operator image and
// the PostgreSQL operand and PgBouncer images of hack/operators-images.sh
// imported into the node's containerd.
type CloudNativePG struct {
	OperatorImage string
	PostgresImage string
	// PoolerImage is what a Pooler's pods run (PGBOUNCER_IMAGE_NAME).
	PoolerImage string
	// StorageClass is the default StorageClass (no provisioner) whose
	// hostPath PersistentVolumes the instances' claims bind to.
	StorageClass string
}

// CloudNativePGNamespace is where the release manifest installs the operator.
const CloudNativePGNamespace = "cnpg-system"

// InstallCloudNativePG builds (first run) and installs the operator on the
// node and waits until its Deployment is available. The release manifest is
// applied as published except for what a registry-less single node needs:
//   - the operator image (imported, imagePullPolicy Never), OPERATOR_IMAGE_NAME,
//     POSTGRES_IMAGE_NAME and PGBOUNCER_IMAGE_NAME naming the local images;
//   - no admission webhooks: both webhook configurations are left out and
//     MANAGE_WEBHOOK_CONFIGURATIONS=false (the operator then defaults and
//     validates Clusters in its reconcilers);
//   - no CPU limit (100m on 2 shared cores starves its reconciles);
//   - storage: a default StorageClass without provisioner and volumes
//     pre-created on the node (hostPath, owned by 26:26, mode 0700).
func InstallCloudNativePG(ctx context.Context, k *Kube, n *Node, volumes int) (*CloudNativePG, error) {
	tags, err := runHackScript(ctx, "operators-images.sh")
	if err != nil {
		return nil, err
	}
	lines := strings.Fields(tags)
	if len(lines) != 3 {
		return nil, fmt.Errorf("hack/operators-images.sh printed %d tags, want 3", len(lines))
	}
	c := &CloudNativePG{OperatorImage: lines[0], PostgresImage: lines[1], PoolerImage: lines[2], StorageClass: "keyledger-node-local"}
	if err := n.ImportImages(ctx, c.OperatorImage, c.PostgresImage, c.PoolerImage); err != nil {
		return nil, err
	}
	if err := c.createStorage(ctx, k, n, volumes); err != nil {
		return nil, fmt.Errorf("preparing storage: %w", err)
	}
	dir, err := operatorsDir(ctx, "cloudnativepg")
	if err != nil {
		return nil, err
	}
	version, err := Version("CLOUDNATIVEPG_VERSION")
	if err != nil {
		return nil, err
	}
	_, err = ApplyManifest(ctx, k, filepath.Join(dir, "cloudnativepg-v"+version, "cnpg.yaml"), func(o *unstructured.Unstructured) bool {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			return false
		case "Deployment":
			c.patchDeployment(o)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("installing CloudNativePG: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := k.Client().AppsV1().Deployments(CloudNativePGNamespace).Get(ctx, "cnpg-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.AvailableReplicas >= 1, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the CloudNativePG operator to be available: %w", err)
	}
	return c, nil
}

func (c *CloudNativePG) patchDeployment(o *unstructured.Unstructured) {
	containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	for i, raw := range containers {
		ctr, _ := raw.(map[string]any)
		if ctr["name"] != "manager" {
			continue
		}
		ctr["image"] = c.OperatorImage
		ctr["imagePullPolicy"] = "Never"
		var env []any
		list, _ := ctr["env"].([]any)
		for _, e := range list {
			if m, _ := e.(map[string]any); m["name"] != "OPERATOR_IMAGE_NAME" {
				env = append(env, e)
			}
		}
		ctr["env"] = append(env,
			map[string]any{"name": "OPERATOR_IMAGE_NAME", "value": c.OperatorImage},
			map[string]any{"name": "POSTGRES_IMAGE_NAME", "value": c.PostgresImage},
			map[string]any{"name": "PGBOUNCER_IMAGE_NAME", "value": c.PoolerImage},
			map[string]any{"name": "MANAGE_WEBHOOK_CONFIGURATIONS", "value": "false"},
		)
		ctr["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "100Mi"},
			"limits": map[string]any{"memory": "300Mi"}}
		containers[i] = ctr
	}
	_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
}

// createStorage makes the default StorageClass (no provisioner, bind on
// first consumer) and volumes hostPath PersistentVolumes of 1Gi under the
// node's state directory, owned by 26:26 with mode 0700 (the kubelet does
// not apply fsGroup to hostPath). A re-created instance gets a new claim:
// keep spares.
func (c *CloudNativePG) createStorage(ctx context.Context, k *Kube, n *Node, volumes int) error {
	sc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
		"metadata": map[string]any{"name": c.StorageClass, "annotations": map[string]any{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		"provisioner":       "kubernetes.io/no-provisioner",
		"volumeBindingMode": "WaitForFirstConsumer",
		"reclaimPolicy":     "Retain",
	}}
	objs := []*unstructured.Unstructured{sc}
	for i := 1; i <= volumes; i++ {
		path := filepath.Join(n.state, "volumes", fmt.Sprintf("pv-%d", i))
		if err := os.MkdirAll(path, 0o700); err != nil {
			return err
		}
		if err := os.Chown(path, 26, 26); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o700); err != nil {
			return err
		}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": map[string]any{"name": fmt.Sprintf("keyledger-node-pv-%d", i)},
			"spec": map[string]any{
				"capacity":                      map[string]any{"storage": "1Gi"},
				"accessModes":                   []any{"ReadWriteOnce"},
				"persistentVolumeReclaimPolicy": "Retain",
				"storageClassName":              c.StorageClass,
				"hostPath":                      map[string]any{"path": path, "type": "Directory"},
			},
		}})
	}
	if err := ApplyObjects(ctx, k, objs); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
