package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// Argo CD hook annotations.
const (
	annotationHook       = "argocd.argoproj.io/hook"
	annotationSyncWave   = "argocd.argoproj.io/sync-wave"
	annotationHookDelete = "argocd.argoproj.io/hook-delete-policy"
	// planFile is the ConfigMap key; planPath is where the Job's container
	// reads it: a subPath mount of that one key, so the kubelet bind-mounts
	// the resolved file and the container sees a regular file (a ConfigMap
	// mounted as a directory holds plan.json as a symlink into ..data/,
	// which `run` refuses to open).
	planFile = "plan.json"
	planPath = "/etc/keyledger/plan.json"
	// hookUser is the non-root user the Job runs as: the image's UID 10001.
	hookUser = 10001
	// hookTTL is the Job's ttlSecondsAfterFinished.
	hookTTL = 3600
)

// hookFiles are the file names render --out-dir writes and apply-hook
// applies, in order.
var hookFiles = []string{"1-serviceaccount.yaml", "2-role.yaml", "3-rolebinding.yaml", "4-configmap.yaml", "5-job.yaml"}

// renderCommand: `keyledger render credentials --plan FILE [--image IMAGE]`
// prints the five Argo CD PreSync hook objects of a credential plan. The
// image defaults to the versions table's KEYLEDGER_IMAGE.
func renderCommand(_ context.Context, args []string, streams IOStreams) error {
	if len(args) == 0 || args[0] != "credentials" {
		return usagef("render takes credentials --plan FILE [--image IMAGE]")
	}
	var planPath, image, outDir, databaseSecret string
	fs := newFlagSet("render credentials", streams)
	fs.StringVar(&planPath, "plan", "", "the CredentialPlan command file")
	fs.StringVar(&image, "image", keyledger.Image(), "the keyledger container image the Job runs (default: KEYLEDGER_IMAGE of versions.env, what make image builds)")
	fs.StringVar(&outDir, "out-dir", "", "write the five objects as files here (for apply-hook) instead of stdout")
	fs.StringVar(&databaseSecret, "database-secret", "keyledger-database", "Secret whose key \"url\" holds the journal database URL (read by the kubelet, not by the Job's Role)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return usagef("render credentials takes no arguments, only flags (--plan, --image)")
	case planPath == "":
		return usagef("render credentials needs --plan FILE")
	case image == "" || strings.ContainsAny(image, " \t\n"):
		return usagef("render credentials needs --image IMAGE (no white space; the default is the versions table's)")
	}
	if err := command.ValidName(databaseSecret); err != nil {
		return usagef("--database-secret: %v", err)
	}
	abs, err := filepath.Abs(planPath)
	if err != nil {
		return usagef("--plan: %v", err)
	}
	f, err := command.Read(abs, command.ReadOptions{})
	if err != nil {
		return err
	}
	cmd, err := credentials.Decode(f)
	if err != nil {
		return err
	}
	docs, err := renderHook(cmd, f.Bytes, image, Version, databaseSecret)
	if err != nil {
		return err
	}
	if outDir == "" {
		for i, d := range docs {
			if i > 0 {
				fmt.Fprintln(streams.Out, "---")
			}
			_, _ = streams.Out.Write(d)
		}
		return nil
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", outDir, err)
	}
	for i, d := range docs {
		if err := os.WriteFile(filepath.Join(outDir, hookFiles[i]), d, 0o644); err != nil {
			return fmt.Errorf("writing hook object: %w", err)
		}
	}
	return nil
}

// hookName is the Job's name: <owner[:42]>-credentials-<h8>, h8 the first 8
// hex digits of sha256(plan.json bytes + version + image).
func hookName(owner string, plan []byte, version, image string) string {
	h := sha256.New()
	h.Write(plan)
	h.Write([]byte(version))
	h.Write([]byte(image))
	if len(owner) > 42 {
		owner = owner[:42]
	}
	return owner + "-credentials-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// renderHook returns the five objects as YAML documents, in apply order.
func renderHook(cmd *credentials.Command, plan []byte, image, version, databaseSecret string) ([][]byte, error) {
	s := cmd.Spec
	name := s.Owner + "-credentials"
	meta := func(n, wave, policy string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: n, Namespace: s.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "keyledger", "app.kubernetes.io/component": "credentials",
				"keyledger.dev/owner": s.Owner},
			Annotations: map[string]string{annotationHook: "PreSync", annotationSyncWave: wave, annotationHookDelete: policy},
		}
	}
	const before = "BeforeHookCreation"
	yes, no := true, false
	user := int64(hookUser)
	ttl, backoff := int32(hookTTL), int32(2)
	objects := []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(name, "0", before)},
		&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta(name, "0", before),
			Rules: credentials.Rules(s)},
		&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta(name, "0", before),
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: s.Namespace}}},
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(name, "0", before),
			Data: map[string]string{planFile: string(plan)}},
		&batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: meta(hookName(s.Owner, plan, version, image), "1", before+",HookSucceeded"),
			Spec: batchv1.JobSpec{
				BackoffLimit: &backoff, TTLSecondsAfterFinished: &ttl,
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "keyledger",
						"app.kubernetes.io/component": "credentials", "keyledger.dev/owner": s.Owner}},
					Spec: corev1.PodSpec{
						ServiceAccountName: name,
						RestartPolicy:      corev1.RestartPolicyNever,
						SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user,
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
						Containers: []corev1.Container{{
							Name: "keyledger", Image: image, Args: []string{"run", planPath},
							Env: []corev1.EnvVar{{Name: "KEYLEDGER_DATABASE_URL", ValueFrom: &corev1.EnvVarSource{
								SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: databaseSecret}, Key: "url"}}}},
							SecurityContext: &corev1.SecurityContext{RunAsNonRoot: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
							VolumeMounts: []corev1.VolumeMount{{Name: "plan", MountPath: planPath, SubPath: planFile, ReadOnly: true}},
						}},
						Volumes: []corev1.Volume{{Name: "plan", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: name},
							Items:                []corev1.KeyToPath{{Key: planFile, Path: planFile}},
						}}}},
					},
				},
			},
		},
	}
	docs := make([][]byte, len(objects))
	for i, o := range objects {
		d, err := toYAML(o)
		if err != nil {
			return nil, err
		}
		docs[i] = d
	}
	return docs, nil
}

// toYAML encodes an object without the empty status and creation
// timestamps the Go types carry.
func toYAML(o any) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	prune(m)
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return bytes.TrimLeft(out, "\n"), nil
}

// prune drops creationTimestamp: null and empty objects left by the types.
func prune(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			if k == "creationTimestamp" {
				delete(m, k)
			}
		case map[string]any:
			prune(x)
			if len(x) == 0 && (k == "resources" || k == "status" || k == "strategy") {
				delete(m, k)
			}
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
		}
	}
}
