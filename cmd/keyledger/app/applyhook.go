package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/keyledger/keyledger/kube"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/workflow"
)

// hookObjects are the five objects render writes, decoded.
type hookObjects struct {
	serviceAccount *corev1.ServiceAccount
	role           *rbacv1.Role
	roleBinding    *rbacv1.RoleBinding
	configMap      *corev1.ConfigMap
	job            *batchv1.Job
}

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
	if err := applyHook(ctx, client, objs, timeout); err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]string{"job": objs.job.Name, "namespace": objs.job.Namespace, "outcome": "succeeded"})
	fmt.Fprintln(streams.Out, string(b))
	return nil
}

// readHook decodes the five files strictly, each of the kind its name says.
func readHook(dir string) (*hookObjects, error) {
	o := &hookObjects{serviceAccount: &corev1.ServiceAccount{}, role: &rbacv1.Role{}, roleBinding: &rbacv1.RoleBinding{},
		configMap: &corev1.ConfigMap{}, job: &batchv1.Job{}}
	targets := []struct {
		into metav1.Object
		kind string
	}{{o.serviceAccount, "ServiceAccount"}, {o.role, "Role"}, {o.roleBinding, "RoleBinding"}, {o.configMap, "ConfigMap"}, {o.job, "Job"}}
	entries, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(entries) != len(hookFiles) {
		return nil, usagef("apply-hook: %s must hold exactly the %d files render --out-dir writes", dir, len(hookFiles))
	}
	var ns string
	for i, t := range targets {
		b, err := os.ReadFile(filepath.Join(dir, hookFiles[i]))
		if err != nil {
			return nil, usagef("apply-hook: reading %s: %v", hookFiles[i], err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil || tm.Kind != t.kind {
			return nil, usagef("apply-hook: %s must hold a %s", hookFiles[i], t.kind)
		}
		if err := yaml.UnmarshalStrict(b, t.into); err != nil {
			return nil, usagef("apply-hook: %s: %v", hookFiles[i], err)
		}
		if i == 0 {
			ns = t.into.GetNamespace()
		}
		if t.into.GetNamespace() == "" || t.into.GetNamespace() != ns {
			return nil, usagef("apply-hook: %s: every object must name the same namespace", hookFiles[i])
		}
	}
	return o, nil
}

// applyHook replaces each object in order, then waits for the Job.
func applyHook(ctx context.Context, c kube.Interface, o *hookObjects, timeout time.Duration) error {
	ns := o.job.Namespace
	background := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &background}
	type resource struct {
		name   string
		get    func(context.Context) error
		delete func(context.Context) error
		create func(context.Context) error
	}
	sa, roles, bindings, cms, jobs := c.CoreV1().ServiceAccounts(ns), c.RbacV1().Roles(ns), c.RbacV1().RoleBindings(ns),
		c.CoreV1().ConfigMaps(ns), c.BatchV1().Jobs(ns)
	steps := []resource{
		{"serviceaccount/" + o.serviceAccount.Name,
			func(ctx context.Context) error {
				_, err := sa.Get(ctx, o.serviceAccount.Name, metav1.GetOptions{})
				return err
			},
			func(ctx context.Context) error { return sa.Delete(ctx, o.serviceAccount.Name, del) },
			func(ctx context.Context) error {
				_, err := sa.Create(ctx, o.serviceAccount, metav1.CreateOptions{})
				return err
			}},
		{"role/" + o.role.Name,
			func(ctx context.Context) error {
				_, err := roles.Get(ctx, o.role.Name, metav1.GetOptions{})
				return err
			},
			func(ctx context.Context) error { return roles.Delete(ctx, o.role.Name, del) },
			func(ctx context.Context) error {
				_, err := roles.Create(ctx, o.role, metav1.CreateOptions{})
				return err
			}},
		{"rolebinding/" + o.roleBinding.Name,
			func(ctx context.Context) error {
				_, err := bindings.Get(ctx, o.roleBinding.Name, metav1.GetOptions{})
				return err
			},
			func(ctx context.Context) error { return bindings.Delete(ctx, o.roleBinding.Name, del) },
			func(ctx context.Context) error {
				_, err := bindings.Create(ctx, o.roleBinding, metav1.CreateOptions{})
				return err
			}},
		{"configmap/" + o.configMap.Name,
			func(ctx context.Context) error {
				_, err := cms.Get(ctx, o.configMap.Name, metav1.GetOptions{})
				return err
			},
			func(ctx context.Context) error { return cms.Delete(ctx, o.configMap.Name, del) },
			func(ctx context.Context) error {
				_, err := cms.Create(ctx, o.configMap, metav1.CreateOptions{})
				return err
			}},
		{"job/" + o.job.Name,
			func(ctx context.Context) error { _, err := jobs.Get(ctx, o.job.Name, metav1.GetOptions{}); return err },
			func(ctx context.Context) error { return jobs.Delete(ctx, o.job.Name, del) },
			func(ctx context.Context) error { _, err := jobs.Create(ctx, o.job, metav1.CreateOptions{}); return err }},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, s := range steps {
		if err := s.delete(ctx); err != nil && !apierrors.IsNotFound(err) {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: fmt.Errorf("deleting %s: %w", s.name, err)}
		}
		if err := poll(ctx, func() (bool, error) {
			err := s.get(ctx)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}); err != nil {
			return fmt.Errorf("waiting for the old %s to go: %w", s.name, err)
		}
		if err := s.create(ctx); err != nil {
			return &workflow.Unavailable{Dependency: "kubernetes", Err: fmt.Errorf("creating %s: %w", s.name, err)}
		}
	}
	var failed bool
	err := poll(ctx, func() (bool, error) {
		j, err := jobs.Get(ctx, o.job.Name, metav1.GetOptions{})
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
				failed = true
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case err != nil:
		return &workflow.Uncertain{Reason: "hook-job-unfinished", Err: err}
	case failed:
		return &workflow.Refused{Reason: "hook-job-failed", Detail: "job " + o.job.Name + " failed; see its pod's output"}
	}
	return nil
}

// poll calls cond every 250ms until it is done, fails, or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		done, err := cond()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
