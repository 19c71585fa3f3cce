package app

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats of -o. A command whose output is structured takes the
// ones that fit it, and its default is what it printed before -o existed:
// table for what people read (journal, history, plan, validate), json for
// the one-line outcomes machines read (run, migrate, preflight, apply-hook,
// version), yaml for Kubernetes objects (render).
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// outputFlag is one command's -o: the chosen format and those it takes
// (the first is the default).
type outputFlag struct {
	format  string
	allowed []string
}

// addOutput declares -o/--output on cmd, taking allowed (the first is the
// default), and its completion.
func addOutput(cmd *cobra.Command, o *outputFlag, allowed ...string) {
	o.allowed = allowed
	fs := cmd.Flags()
	fs.StringVarP(&o.format, "output", "o", allowed[0], "output format: "+strings.Join(allowed, ", "))
	// --o=json, as the standard library's flag package accepted it.
	fs.StringVar(&o.format, "o", allowed[0], "")
	_ = fs.MarkHidden("o")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion(allowed...))
}

// check refuses a format the command does not take.
func (o *outputFlag) check() error {
	for _, a := range o.allowed {
		if o.format == a {
			return nil
		}
	}
	return usagef("-o must be %s, not %q", orList(o.allowed), o.format)
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// writeYAML writes v, marshaled as JSON (its json names), as one YAML
// document.
func writeYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeJSONAsYAML(w, b)
}

// writeJSONAsYAML writes the JSON document b as YAML.
func writeJSONAsYAML(w io.Writer, b []byte) error {
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		return fmt.Errorf("writing YAML: %w", err)
	}
	_, err = w.Write(y)
	return err
}

// writeStructured writes v as one JSON document (a line) or as YAML.
func writeStructured(w io.Writer, format string, v any) error {
	if format == formatYAML {
		return writeYAML(w, v)
	}
	return json.NewEncoder(w).Encode(v)
}

// writeLine writes v as the one JSON line a command prints (json.Marshal,
// as before -o existed), or as YAML.
func writeLine(w io.Writer, format string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if format == formatYAML {
		return writeJSONAsYAML(w, b)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// Completion helpers.

// noCompletion completes nothing (no file names either).
func noCompletion(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// fixedCompletion completes one of words.
func fixedCompletion(words ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	}
}

// fileCompletion completes file names ending in one of exts (the first
// positional argument only, when args says one is given already).
func fileCompletion(exts ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

// dirCompletion completes directory names.
func dirCompletion(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}
