// Command demo is `make demo`: it brings up the local platform (a real
// control plane and PostgreSQL) and walks through the three families, each
// run as a ServiceAccount holding exactly the rights its family needs:
//
//   - a key retirement: plan, run, an exact replay, a refusal (the active
//     key) and the permission matrix refusing a wider identity;
//   - a credential plan: plan, run (creates), a rerun that writes nothing,
//     a deleted Secret recreated by the next run of the same plan;
//   - versioned writes: create, update, restore version 1, history;
//
// and prints the journal. Everything it starts it stops again.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
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
	"github.com/keyledger/keyledger/workflow/credentials"
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
	// One journal for every namespace; each namespace's runs connect as a
	// role of their own, which the schema owner grants its namespace.
	journal, err := pg.NewJournal(ctx, "keyledger_demo")
	if err != nil {
		return err
	}
	fmt.Printf("API server %s; journal migrated as its schema owner\n", kube.Host())
	asOwner := func(args ...string) error {
		return keyledger(ctx, bin, dir, kube.KubeconfigFile(), journal.OwnerURL, args...)
	}
	roleURL := map[string]string{}
	for _, n := range []string{"ai", "shop"} {
		role := "keyledger_" + n
		step("journal role %s for namespace %s: granted by the schema owner (row-level security confines it to %s)", role, n, n)
		password := make([]byte, 16)
		if _, err := rand.Read(password); err != nil {
			return err
		}
		if err := pg.EnsureRole(ctx, role, hex.EncodeToString(password)); err != nil {
			return err
		}
		if err := asOwner("journal", "grant", role, n); err != nil {
			return err
		}
		if roleURL[n], err = pg.URLFor(journal.OwnerURL, role, hex.EncodeToString(password)); err != nil {
			return err
		}
	}

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
	saKubeconfig, err := serviceAccount(ctx, kube, dir, ns, "retirer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}}})
	if err != nil {
		return err
	}

	keyringCLI := func(args ...string) error {
		return keyledger(ctx, bin, dir, kube.KubeconfigFile(), roleURL["ai"], args...)
	}
	asRetirer := func(args ...string) error {
		return keyledger(ctx, bin, dir, saKubeconfig, roleURL["ai"], args...)
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

	step("keyledger plan: what the run would do (reads only; nothing is sent or journaled)")
	if err := asRetirer("plan", retire7); err != nil {
		return err
	}
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
	if err := credentialsDemo(ctx, kube, bin, dir, roleURL["shop"]); err != nil {
		return err
	}
	if err := versionedDemo(ctx, kube, bin, dir, roleURL["shop"]); err != nil {
		return err
	}

	step("keyledger journal list as ai's role: only ai's operations (row-level security)")
	if err := keyringCLI("journal", "list"); err != nil {
		return err
	}
	step("keyledger journal list as the schema owner: every operation of the three families")
	if err := asOwner("journal", "list"); err != nil {
		return err
	}
	step("keyledger journal show mut-7")
	if err := keyringCLI("journal", "show", "mut-7"); err != nil {
		return err
	}
	step("keyledger journal grants --history, as the schema owner: every grant, with who made it")
	if err := asOwner("journal", "grants", "--history"); err != nil {
		return err
	}
	step("done: stopping the platform")
	return nil
}

// credentialsDemo runs a credential plan: plan, create, a rerun that writes
// nothing, and a deleted Secret recreated by the next run.
func credentialsDemo(ctx context.Context, kube *platform.Kube, bin, dir, databaseURL string) error {
	const ns = "shop"
	client := kube.Client()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	planFor := func(mutation string) map[string]any {
		secret := func(name string) map[string]any {
			return map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/part-of": "shop"},
				"keys": []any{
					map[string]any{"name": "password", "generate": map[string]any{"length": 32, "alphabet": "alphanumeric"}},
					map[string]any{"name": "username", "value": "app"},
				}}
		}
		return map[string]any{"apiVersion": "keyledger.dev/v1", "kind": "CredentialPlan",
			"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation},
			"spec": map[string]any{"owner": "shop-orders", "namespace": ns,
				"secrets": []any{secret("shop-orders-db"), secret("shop-orders-cache")}}}
	}
	first := planFor("cred-1")
	var spec credentials.Spec
	b, _ := json.Marshal(first["spec"])
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	step("credentials: ServiceAccount %s/credentials holds exactly the plan's rights (credentials.Rules, as render writes them)", ns)
	kubeconfig, err := serviceAccount(ctx, kube, dir, ns, "credentials", credentials.Rules(spec))
	if err != nil {
		return err
	}
	cli := func(args ...string) error { return keyledger(ctx, bin, dir, kubeconfig, databaseURL, args...) }
	path, err := writeJSON(dir, "credentials-1.json", first)
	if err != nil {
		return err
	}
	fmt.Printf("command file:\n%s\n", mustRead(path))
	step("keyledger plan: the Secrets the run would create and the keys it would write (never values)")
	if err := cli("plan", path); err != nil {
		return err
	}
	step("keyledger run: create both Secrets, each value generated once")
	if err := cli("run", path); err != nil {
		return err
	}
	step("keyledger run again: the plan converges; the Secrets are complete, nothing is written")
	if err := cli("run", path); err != nil {
		return err
	}
	step("deleting Secret %s/shop-orders-db behind keyledger's back", ns)
	if err := client.CoreV1().Secrets(ns).Delete(ctx, "shop-orders-db", metav1.DeleteOptions{}); err != nil {
		return err
	}
	step("keyledger plan, then run, of the same plan again: the missing Secret is created again, the other left alone")
	if err := cli("plan", path); err != nil {
		return err
	}
	if err := cli("run", path); err != nil {
		return err
	}
	step("keyledger journal show cred-1: every run of the plan")
	return cli("journal", "show", "cred-1")
}

// versionedDemo creates a Secret at version 1, updates it, restores version
// 1 and prints its history.
func versionedDemo(ctx context.Context, kube *platform.Kube, bin, dir, databaseURL string) error {
	const ns, name = "shop", "orders-api"
	client := kube.Client()
	step("versioned writes: ServiceAccount %s/writer may get, list, create and delete Secrets and update only %s", ns, name)
	kubeconfig, err := serviceAccount(ctx, kube, dir, ns, "writer", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"update"}},
	})
	if err != nil {
		return err
	}
	cli := func(args ...string) error { return keyledger(ctx, bin, dir, kubeconfig, databaseURL, args...) }
	command := func(kind, mutation string, spec map[string]any) (string, error) {
		spec["namespace"], spec["name"] = ns, name
		return writeJSON(dir, mutation+".json", map[string]any{"apiVersion": "keyledger.dev/v1", "kind": kind,
			"metadata": map[string]any{"requestId": "req-" + mutation, "mutationId": mutation}, "spec": spec})
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	rv := func() (string, error) {
		s, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return s.ResourceVersion, nil
	}

	create, err := command("SecretUpdate", "ver-1", map[string]any{"expectedResourceVersion": "", "data": map[string]string{"token": b64("demo-token-one")}})
	if err != nil {
		return err
	}
	step("keyledger run: SecretUpdate with expectedResourceVersion \"\" creates %s/%s at version 1", ns, name)
	if err := cli("run", create); err != nil {
		return err
	}
	v1, err := rv()
	if err != nil {
		return err
	}
	update, err := command("SecretUpdate", "ver-2", map[string]any{"expectedResourceVersion": v1, "data": map[string]string{"token": b64("demo-token-two")}})
	if err != nil {
		return err
	}
	step("keyledger plan, then run: update to version 2 (version 1 is archived in a snapshot first)")
	if err := cli("plan", update); err != nil {
		return err
	}
	if err := cli("run", update); err != nil {
		return err
	}
	v2, err := rv()
	if err != nil {
		return err
	}
	restore, err := command("SecretRestore", "ver-3", map[string]any{"expectedResourceVersion": v2, "version": 1})
	if err != nil {
		return err
	}
	step("keyledger run: SecretRestore of version 1 (version 2 is archived first)")
	if err := cli("run", restore); err != nil {
		return err
	}
	step("keyledger history %s/%s: the retained versions, never values", ns, name)
	if err := cli("history", ns+"/"+name); err != nil {
		return err
	}
	step("keyledger history %s/%s --version 1 --show-keys: key names and value digests", ns, name)
	return cli("history", ns+"/"+name, "--version", "1", "--show-keys")
}

// serviceAccount creates a ServiceAccount's Role (rules) and RoleBinding in
// ns, and returns a kubeconfig holding a TokenRequest token for it.
func serviceAccount(ctx context.Context, kube *platform.Kube, dir, ns, name string, rules []rbacv1.PolicyRule) (string, error) {
	client := kube.Client()
	if _, err := client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
		metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	cfg, err := kube.ServiceAccountConfig(ctx, ns, name, 600)
	if err != nil {
		return "", err
	}
	sub, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return "", err
	}
	return kube.KubeconfigForConfig(cfg, sub)
}

// writeJSON writes v as an indented 0600 command file in dir.
func writeJSON(dir, file string, v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, file)
	return path, os.WriteFile(path, b, 0o600)
}

func mustRead(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// keyledger runs the CLI with stdout shown, stderr logs shown dimmed, and
// reports its exit code.
func keyledger(ctx context.Context, bin, home, kubeconfig, databaseURL string, args ...string) error {
	// Command files live in the demo's scratch directory: name them alone.
	fmt.Printf("$ keyledger %s\n", strings.ReplaceAll(strings.Join(args, " "), home+string(filepath.Separator), ""))
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
