package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// applyHookCommand: `keyledger apply-hook DIR` applies the five files render
// --out-dir wrote, in order, as Argo CD would run the PreSync hooks: each
// object of the same name is deleted first (BeforeHookCreation), then
// created; then it waits for the Job to succeed or fail.
func applyHookCommand(ctx context.Context, args []string, streams IOStreams) error {
	var flags commonFlags
	var timeout time.Duration
	fs := newFlagSet("apply-hook", streams)
	flags.addKube(fs)
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the Job")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("apply-hook takes one DIR (written by render credentials --out-dir)")
	}
	objs, err := readHook(fs.Arg(0))
	if err != nil {
		return err
	}
	_, client, release, err := flags.kubeClient(nil)
	if err != nil {
		return err
	}
	defer release()
	if err := credentials.ApplyHook(ctx, kube.NewHook(client, objs.Job.Namespace), objs, timeout); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]string{"job": objs.Job.Name, "namespace": objs.Job.Namespace, "outcome": "succeeded"})
	fmt.Fprintln(streams.Out, string(b))
	return nil
}

// readHook decodes the five files strictly, each of the kind its name says.
func readHook(dir string) (*kube.HookObjects, error) {
	o := &kube.HookObjects{ServiceAccount: &corev1.ServiceAccount{}, Role: &rbacv1.Role{}, RoleBinding: &rbacv1.RoleBinding{},
		ConfigMap: &corev1.ConfigMap{}, NetworkPolicy: &networkingv1.NetworkPolicy{}, Job: &batchv1.Job{}}
	targets := []struct {
		into metav1.Object
		kind string
	}{{o.ServiceAccount, "ServiceAccount"}, {o.Role, "Role"}, {o.RoleBinding, "RoleBinding"}, {o.ConfigMap, "ConfigMap"}, {o.NetworkPolicy, "NetworkPolicy"}, {o.Job, "Job"}}
	entries, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(entries) != len(credentials.HookFiles) {
		return nil, usagef("apply-hook: %s must hold exactly the %d files render --out-dir writes", dir, len(credentials.HookFiles))
	}
	var ns string
	for i, t := range targets {
		b, err := os.ReadFile(filepath.Join(dir, credentials.HookFiles[i])) //nolint:gosec // G304: the directory the operator named, with a fixed file name; what it holds is checked object by object
		if err != nil {
			return nil, usagef("apply-hook: reading %s: %v", credentials.HookFiles[i], err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil || tm.Kind != t.kind {
			return nil, usagef("apply-hook: %s must hold a %s", credentials.HookFiles[i], t.kind)
		}
		if err := yaml.UnmarshalStrict(b, t.into); err != nil {
			return nil, usagef("apply-hook: %s: %v", credentials.HookFiles[i], err)
		}
		if i == 0 {
			ns = t.into.GetNamespace()
		}
		if t.into.GetNamespace() == "" || t.into.GetNamespace() != ns {
			return nil, usagef("apply-hook: %s: every object must name the same namespace", credentials.HookFiles[i])
		}
	}
	return o, nil
}
