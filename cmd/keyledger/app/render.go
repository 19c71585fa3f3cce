package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/keyledger/keyledger"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/credentials"
)

// renderCommand: `keyledger render credentials --plan FILE [--image IMAGE]`
// prints the five Argo CD PreSync hook objects of a credential plan. The
// image defaults to the versions table's KEYLEDGER_IMAGE.
func renderCommand(_ context.Context, args []string, streams IOStreams) error {
	if len(args) == 0 || args[0] != "credentials" {
		return usagef("render takes credentials --plan FILE [--image IMAGE]")
	}
	var planPath, image, outDir string
	var journal credentials.HookJournal
	fs := newFlagSet("render credentials", streams)
	fs.StringVar(&planPath, "plan", "", "the CredentialPlan command file")
	fs.StringVar(&image, "image", keyledger.Image(), "the keyledger container image the Job runs (default: KEYLEDGER_IMAGE of versions.env, what make image builds)")
	fs.StringVar(&outDir, "out-dir", "", "write the five objects as files here (for apply-hook) instead of stdout")
	fs.StringVar(&journal.Namespace, "journal-namespace", "keyledger-journal", "the journal's namespace (its CloudNativePG Cluster keyledger-journal; the Job reaches keyledger-journal-rw there)")
	fs.StringVar(&journal.Credentials, "journal-credentials", "keyledger-journal-credentials", "Secret of the plan's namespace with username and password of that namespace's journal role (read by the kubelet, not by the Job's Role)")
	fs.StringVar(&journal.CA, "journal-ca", "keyledger-journal-ca", "ConfigMap of the plan's namespace whose key ca.crt is the journal CA's certificate (verify-full)")
	fs.StringVar(&journal.Pooler, "journal-pooler", "", "connect through this CloudNativePG Pooler Service of the journal's namespace (deploy/journal/pooler: keyledger-journal-pooler) instead of keyledger-journal-rw")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
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
	for i, d := range docs {
		if err := os.WriteFile(filepath.Join(outDir, credentials.HookFiles[i]), d, 0o644); err != nil { //nolint:gosec // G306: as the directory above: no secret value, meant to be shared
			return fmt.Errorf("writing hook object: %w", err)
		}
	}
	return nil
}
