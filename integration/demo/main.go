// Command demo is `make demo`: it brings up the local platform (a real
// control plane and PostgreSQL), creates a keyring Secret, retires a key as
// a ServiceAccount holding exactly get/update on that Secret, replays the
// same command, shows a refusal, and prints the journal. Everything it starts
// it stops again.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/retire"
	"github.com/keyledger/keyledger/workflow/retire/keyring"
	"github.com/keyledger/keyledger/workflow/retire/keyring/keyringtest"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...)
}

func run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "keyledger-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	step("building keyledger")
	bin := filepath.Join(dir, "keyledger")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/keyledger")
	build.Dir, build.Stdout, build.Stderr = platform.RepoRoot(), os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building keyledger: %w", err)
	}

	step("starting the platform: kube-apiserver, etcd, kube-controller-manager and PostgreSQL")
	kube, err := platform.StartKube(ctx)
	if err != nil {
		return err
	}
	defer kube.Stop()
	pg, err := platform.StartPostgres(ctx)
	if err != nil {
		return err
	}
	defer pg.Terminate(context.Background())
	journal, err := pg.NewJournal(ctx, "keyledger_demo")
	if err != nil {
		return err
	}
	fmt.Printf("API server %s; journal migrated; runs use the keyledger_operator role\n", kube.Host())

	const ns, name = "ai", "prompt-output-keyring"
	client := kube.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	step("creating keyring Secret %s/%s (three keys, k-2026-08 active)", ns, name)
	m := keyringtest.New(
		keyringtest.WithKey("k-2026-06", "2026-06-01T00:00:00Z", keyringtest.Material("demo-k-2026-06")),
		keyringtest.WithKey("k-2026-07", "2026-07-01T00:00:00Z", keyringtest.Material("demo-k-2026-07")),
		keyringtest.WithKey("k-2026-08", "2026-08-01T00:00:00Z", keyringtest.Material("demo-k-2026-08")),
		keyringtest.WithActive("k-2026-08"), keyringtest.WithGeneration(4),
	)
	s, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{retire.LabelKeyring: retire.LabelKeyringManaged},
			Annotations: map[string]string{retire.AnnotationGeneration: strconv.FormatInt(m.Generation, 10), retire.AnnotationCatalogDigest: m.CatalogDigest()}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"keyring.json": m.Encode()},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}

	step("granting ServiceAccount %s/retirer exactly get and update on that one Secret", ns)
	if _, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "retirer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}}}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "retirer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "retirer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "retirer", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	saConfig, err := kube.ServiceAccountConfig(ctx, ns, "retirer", 600)
	if err != nil {
		return err
	}
	saKubeconfig, err := kube.KubeconfigForConfig(saConfig, dir)
	if err != nil {
		return err
	}

	keyringCLI := func(args ...string) error {
		return keyledger(ctx, bin, dir, kube.KubeconfigFile(), journal.OperatorURL, args...)
	}
	asRetirer := func(args ...string) error {
		return keyledger(ctx, bin, dir, saKubeconfig, journal.OperatorURL, args...)
	}

	step("keyledger keyring inspect %s/%s (the catalog: digests, never material)", ns, name)
	if err := keyringCLI("keyring", "inspect", ns+"/"+name); err != nil {
		return err
	}

	command := func(file, keyID, mutation string) (string, error) {
		cmd := map[string]any{
			"apiVersion": "keyledger.dev/v1", "kind": "KeyRetirement",
			"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
			"spec": map[string]any{"namespace": ns, "secretName": name, "expectedUID": string(s.UID), "dataKey": "keyring.json",
				"keyId": keyID, "retirementId": "ret-" + mutation, "expectedMaterialDigest": keyring.MaterialDigest(keyringtest.Material("demo-" + keyID))},
		}
		b, _ := json.MarshalIndent(cmd, "", "  ")
		path := filepath.Join(dir, file)
		return path, os.WriteFile(path, b, 0o600)
	}
	retire7, err := command("retire-k-2026-07.json", "k-2026-07", "mut-7")
	if err != nil {
		return err
	}
	b, _ := os.ReadFile(retire7)
	fmt.Printf("command file:\n%s\n", b)

	step("keyledger run: retire k-2026-07")
	if err := asRetirer("run", retire7); err != nil {
		return err
	}
	step("keyledger run again: an exact replay writes nothing")
	if err := asRetirer("run", retire7); err != nil {
		return err
	}
	step("keyledger run: retiring the active key k-2026-08 is refused (exit 2)")
	active, err := command("retire-k-2026-08.json", "k-2026-08", "mut-8")
	if err != nil {
		return err
	}
	if err := asRetirer("run", active); err == nil {
		return fmt.Errorf("retiring the active key was not refused")
	}
	step("keyledger run as the control plane's admin: the permission matrix refuses (exit 77) before PostgreSQL")
	if err := keyringCLI("run", retire7); err == nil {
		return fmt.Errorf("the admin identity passed the permission matrix")
	}

	step("keyledger keyring inspect: k-2026-07 is gone, its receipt remains, generation 5")
	if err := keyringCLI("keyring", "inspect", ns+"/"+name); err != nil {
		return err
	}
	step("keyledger journal list")
	if err := keyringCLI("journal", "list"); err != nil {
		return err
	}
	step("keyledger journal show mut-7")
	if err := keyringCLI("journal", "show", "mut-7"); err != nil {
		return err
	}
	step("keyledger journal show mut-8")
	if err := keyringCLI("journal", "show", "mut-8"); err != nil {
		return err
	}
	step("done: stopping the platform")
	return nil
}

// keyledger runs the CLI with stdout shown, stderr logs shown dimmed, and
// reports its exit code.
func keyledger(ctx context.Context, bin, home, kubeconfig, databaseURL string, args ...string) error {
	fmt.Printf("$ keyledger %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "KUBECONFIG=" + kubeconfig, "KEYLEDGER_DATABASE_URL=" + databaseURL}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = os.Stdout, &stderr
	err := cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" {
			fmt.Printf("\033[2m  stderr: %s\033[0m\n", line)
		}
	}
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		return err
	}
	fmt.Printf("(exit %d)\n", code)
	if code != 0 {
		return fmt.Errorf("exit %d", code)
	}
	return nil
}
