package app

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
)

func newRenderCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	return group("render", "print deployment objects for a command file",
		"  keyledger render credentials --plan plan.json | kubectl apply --dry-run=client -f -",
		newRenderCredentialsCommand(streams, g))
}

// renderedObjects says what render credentials writes: how many hook
// objects, of which kinds, in order (hookKinds, as apply-hook reads them),
// and the sync marker after them.
func renderedObjects() string {
	return fmt.Sprintf("%d Argo CD PreSync hook objects (%s) and a ConfigMap naming the hook Job", len(hookKinds), strings.Join(hookKinds, ", "))
}

// renderOptions are render credentials' flags.
type renderOptions struct {
	planPath, image, outDir string
	journal                 credentials.HookJournal
	output                  outputFlag
}

// newRenderCredentialsCommand: `keyledger render credentials --plan FILE
// [--image IMAGE]` prints the Argo CD PreSync hook objects of a credential
// plan (renderedObjects). The image defaults to the versions table's
// KEYLEDGER_IMAGE.
func newRenderCredentialsCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "credentials --plan FILE [--image IMAGE]",
		Short: "print a credential plan's " + renderedObjects(),
		Long: strings.Join(wrap("Print the "+renderedObjects()+" that run a CredentialPlan on every Argo CD sync: "+
			"the Role holds exactly the plan's rights, the NetworkPolicy lets the hook reach only the plan's servers, "+
			"the ConfigMap carries the plan and the Job runs keyledger run on it, as the plan namespace's own journal role. "+
			"The last object, <owner>-credentials-sync, is not a hook: it names the Job, so a commit that changes only the plan, "+
			"the image or keyledger's version puts the Argo CD Application out of sync and automated sync runs the new Job (docs/argocd.md). "+
			"Commit the output beside the application's manifests (or generate it in a config management plugin); "+
			"--out-dir writes one file per object for apply-hook, which applies them in order without Argo CD.", 78), "\n"),
		Example: `  keyledger render credentials --plan examples/credential-plan.json > hook.yaml
  keyledger render credentials --plan plan.json --image registry.example/keyledger:v1 --journal-pooler keyledger-journal-pooler
  keyledger render credentials --plan plan.json --out-dir hook/ && keyledger apply-hook hook/`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: noCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			return renderCommand(args, &o, g, streams)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.planPath, "plan", "", "the CredentialPlan command file")
	fs.StringVar(&o.image, "image", keyledger.Image(), "the keyledger container image the Job runs (default: KEYLEDGER_IMAGE of versions.env, what make image builds)")
	fs.StringVar(&o.outDir, "out-dir", "", fmt.Sprintf("write the %d objects as files here (for apply-hook) instead of stdout", len(hookKinds)+1))
	fs.StringVar(&o.journal.Namespace, "journal-namespace", "keyledger-journal", "the journal's namespace (its CloudNativePG Cluster keyledger-journal; the Job reaches keyledger-journal-rw there)")
	fs.StringVar(&o.journal.Credentials, "journal-credentials", "keyledger-journal-credentials", "Secret of the plan's namespace with username and password of that namespace's journal role (read by the kubelet, not by the Job's Role)")
	fs.StringVar(&o.journal.CA, "journal-ca", "keyledger-journal-ca", "ConfigMap of the plan's namespace whose key ca.crt is the journal CA's certificate (verify-full)")
	fs.StringVar(&o.journal.Pooler, "journal-pooler", "", "connect through this CloudNativePG Pooler Service of the journal's namespace (deploy/journal/pooler: keyledger-journal-pooler) instead of keyledger-journal-rw")
	_ = cmd.RegisterFlagCompletionFunc("plan", fileCompletion("json"))
	_ = cmd.RegisterFlagCompletionFunc("out-dir", dirCompletion)
	for _, name := range []string{"image", "journal-namespace", "journal-credentials", "journal-ca", "journal-pooler"} {
		_ = cmd.RegisterFlagCompletionFunc(name, noCompletion)
	}
	addOutput(cmd, &o.output, formatYAML, formatJSON)
	return cmd
}

func renderCommand(args []string, o *renderOptions, g *commonFlags, streams IOStreams) error {
	if err := g.checkLogFlags(); err != nil {
		return err
	}
	if err := o.output.check(); err != nil {
		return err
	}
	planPath, image, outDir, journal := o.planPath, o.image, o.outDir, o.journal
	switch {
	case len(args) != 0:
		return usagef("render credentials takes no arguments, only flags (--plan, --image)")
	case planPath == "":
		return usagef("render credentials needs --plan FILE")
	}
	if err := checkImage(image); err != nil {
		return err
	}
	for _, f := range []struct{ flag, value string }{
		{"--journal-namespace", journal.Namespace}, {"--journal-credentials", journal.Credentials}, {"--journal-ca", journal.CA},
	} {
		if err := command.ValidName(f.value); err != nil {
			return usagef("%s: %v", f.flag, err)
		}
	}
	if journal.Pooler != "" { // unset: the Cluster's -rw Service
		if err := command.ValidName(journal.Pooler); err != nil {
			return usagef("--journal-pooler: %v", err)
		}
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
	if cmd.Spec.Namespace == journal.Namespace {
		// The hook's Role reads Secrets of its namespace: it never runs
		// where the journal's owner and CloudNativePG keep theirs.
		return usagef("render credentials: the plan's namespace %q is the journal's (--journal-namespace): no keyledger identity with Secret rights runs there", cmd.Spec.Namespace)
	}
	docs, err := credentials.Hook(cmd, f.Bytes, image, Version, journal)
	if err != nil {
		return err
	}
	marker, err := credentials.SyncMarker(cmd, f.Bytes, image, Version)
	if err != nil {
		return err
	}
	docs = append(docs, marker)
	if outDir == "" && o.output.format == formatJSON {
		return writeList(streams.Out, docs)
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
	if err := os.MkdirAll(outDir, 0o755); err != nil { //nolint:gosec // G301: the rendered objects hold names and references, no secret value; git and kubectl read them
		return fmt.Errorf("creating %s: %w", outDir, err)
	}
	files := append(append([]string{}, credentials.HookFiles...), credentials.SyncFile)
	for i, d := range docs {
		if err := os.WriteFile(filepath.Join(outDir, files[i]), d, 0o644); err != nil { //nolint:gosec // G306: as the directory above: no secret value, meant to be shared
			return fmt.Errorf("writing hook object: %w", err)
		}
	}
	return nil
}

// writeList writes the rendered objects as one JSON document, a v1 List
// (what kubectl get -o json prints for several objects).
func writeList(w io.Writer, docs [][]byte) error {
	items := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			return fmt.Errorf("rendering hook object: %w", err)
		}
		items[i] = j
	}
	return json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
}
