package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/workflow/credentials"
)

func newApplyHookCommand(ctx context.Context, streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "apply-hook DIR",
		Short: "apply rendered hook objects in order and wait for the Job",
		Long: fmt.Sprintf(`Apply the %d hook files render credentials --out-dir wrote, in order, as Argo CD
runs PreSync hooks: each object of the same name is deleted first
(BeforeHookCreation), then created; then wait for the Job to succeed or fail
(--timeout). For a cluster without Argo CD, and for tests. The directory's
last file, %s, only tells Argo CD that the hook changed: it is read, not
applied.`, len(hookKinds), credentials.SyncFile),
		Example: `  keyledger render credentials --plan plan.json --out-dir hook/
  keyledger apply-hook hook/ --timeout 5m`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: dirCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("apply-hook takes one DIR (written by render credentials --out-dir)")
			}
			objs, err := readHook(args[0])
			if err != nil {
				return err
			}
			_, client, release, err := g.kubeClient(nil)
			if err != nil {
				return err
			}
			defer release()
			if err := credentials.ApplyHook(ctx, kube.NewHook(client, objs.Job.Namespace), objs, timeout); err != nil {
				return err
			}
			return writeLine(streams.Out, out.format, map[string]string{"job": objs.Job.Name, "namespace": objs.Job.Namespace, "outcome": "succeeded"})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the Job")
	_ = cmd.RegisterFlagCompletionFunc("timeout", noCompletion)
	addOutput(cmd, &out, formatJSON, formatYAML)
	return cmd
}

// hookTarget is one rendered object apply-hook reads: into what, and the
// kind its file must hold.
type hookTarget struct {
	into metav1.Object
	kind string
}

// hookTargets are the objects of o in the order render writes them
// (credentials.HookFiles).
func hookTargets(o *kube.HookObjects) []hookTarget {
	return []hookTarget{{o.ServiceAccount, "ServiceAccount"}, {o.Role, "Role"}, {o.RoleBinding, "RoleBinding"},
		{o.ConfigMap, "ConfigMap"}, {o.NetworkPolicy, "NetworkPolicy"}, {o.Job, "Job"}}
}

func newHookObjects() *kube.HookObjects {
	return &kube.HookObjects{ServiceAccount: &corev1.ServiceAccount{}, Role: &rbacv1.Role{}, RoleBinding: &rbacv1.RoleBinding{},
		ConfigMap: &corev1.ConfigMap{}, NetworkPolicy: &networkingv1.NetworkPolicy{}, Job: &batchv1.Job{}}
}

// hookKinds are the kinds render credentials writes, in order: what its
// help says and what apply-hook reads.
var hookKinds = func() []string {
	var kinds []string
	for _, t := range hookTargets(newHookObjects()) {
		kinds = append(kinds, t.kind)
	}
	return kinds
}()

// readHook decodes the files render --out-dir writes strictly, each of the
// kind its name says.
func readHook(dir string) (*kube.HookObjects, error) {
	o := newHookObjects()
	targets := hookTargets(o)
	entries, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(entries) != len(credentials.HookFiles)+1 {
		return nil, usagef("apply-hook: %s must hold exactly the %d files render --out-dir writes", dir, len(credentials.HookFiles)+1)
	}
	var marker metav1.TypeMeta
	b, err := os.ReadFile(filepath.Join(dir, credentials.SyncFile)) //nolint:gosec // G304: as below, a fixed file name in the named directory
	if err != nil || yaml.Unmarshal(b, &marker) != nil || marker.Kind != "ConfigMap" {
		return nil, usagef("apply-hook: %s must hold the ConfigMap render --out-dir writes", credentials.SyncFile)
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
