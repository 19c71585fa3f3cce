package app

import (
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

func newExplainCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain KIND[.FIELD]",
		Short: "print what a kind or one of its fields means",
		Long: `Print what a kind does and its fields, or what one field means, its type, whether it is
required and the rules on its value, as kubectl explain does for Kubernetes objects. FIELD is
a path of member names joined by dots (spec.secrets.keys.generate; list indices are left out).
The text is the table schema builds the JSON Schema from.`,
		Example: `  keyledger explain KeyRetirement
  keyledger explain KeyRetirement.spec.expectedMaterialDigest
  keyledger explain CredentialPlan.spec.secrets.keys`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: explainCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("explain takes one KIND[.FIELD]: %s", strings.Join(kindNames(), ", "))
			}
			return explain(streams.Out, args[0])
		},
	}
	return cmd
}

// indices are list indices a path may carry: secrets[0].keys[].
var indices = regexp.MustCompile(`\[[0-9]*\]`)

// explain writes what KIND[.FIELD] means.
func explain(w io.Writer, what string) error {
	kind, path, _ := strings.Cut(indices.ReplaceAllString(what, ""), ".")
	if _, ok := kindSpecs[kind]; !ok {
		return usagef("unknown kind %q: want one of %s", kind, strings.Join(kindNames(), ", "))
	}
	t := documentType(kind)
	if path == "" {
		fmt.Fprintf(w, "KIND:        %s\nAPI VERSION: keyledger.dev/v1\nSCHEMA:      keyledger schema %s\n\nDESCRIPTION:\n%s\n", kind, kind, indent(kindDocs[kind]))
		writeFields(w, kind, t, "")
		return nil
	}
	ft, ok := memberType(t, path)
	if !ok {
		return usagef("%s has no field %q%s", kind, path, nearestPath(kind, path))
	}
	d, _ := docOf(kind, path)
	required := "no"
	if d.required {
		required = "yes"
	}
	fmt.Fprintf(w, "KIND:        %s\nFIELD:       %s <%s>\nREQUIRED:    %s\n\nDESCRIPTION:\n%s\n", kind, path, typeName(ft), required, indent(d.doc))
	rules := d.rules()
	if path == "kind" {
		rules = append(rules, fmt.Sprintf("must be %q", kind))
	}
	if len(rules) > 0 {
		fmt.Fprintf(w, "\nRULES:\n")
		for _, r := range rules {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	writeFields(w, kind, ft, path)
	return nil
}

// writeFields lists the members of t (an object, or a list or map of
// objects) at path, with their types and first sentences.
func writeFields(w io.Writer, kind string, t reflect.Type, path string) {
	t = elem(t)
	if t.Kind() != reflect.Struct {
		return
	}
	fmt.Fprint(w, "\nFIELDS:\n")
	for _, m := range members(t) {
		child := m.name
		if path != "" {
			child = path + "." + m.name
		}
		d, _ := docOf(kind, child)
		req := ""
		if d.required {
			req = " -required-"
		}
		fmt.Fprintf(w, "  %s\t<%s>%s\n%s\n", m.name, typeName(m.typ), req, indent(firstSentence(d.doc)+"\n"))
	}
}

// memberType is the type of the member at path under t.
func memberType(t reflect.Type, path string) (reflect.Type, bool) {
	for _, name := range strings.Split(path, ".") {
		t = elem(t)
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for _, m := range members(t) {
			if m.name == name {
				t, found = m.typ, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return t, true
}

// nearestPath is "; did you mean KIND.PATH?" for the member path of kind
// nearest to path, or "".
func nearestPath(kind, path string) string {
	best, bestDistance := "", 3
	walkMembers(documentType(kind), "", func(p string, _ reflect.Type) {
		if d := editDistanceFold(p, path); d < bestDistance {
			best, bestDistance = p, d
		}
	})
	if best == "" {
		return ""
	}
	return "; did you mean " + kind + "." + best + "?"
}

func editDistanceFold(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	d := make([]int, len(b)+1)
	for j := range d {
		d[j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev := d[0]
		d[0] = i
		for j := 1; j <= len(b); j++ {
			cur := d[j]
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[j] = min(d[j]+1, d[j-1]+1, prev+cost)
			prev = cur
		}
	}
	return d[len(b)]
}

// firstSentence is text up to its first ". " (or all of it), on one line.
func firstSentence(text string) string {
	text = oneLine(text)
	if i := strings.Index(text, ". "); i >= 0 {
		return text[:i+1]
	}
	return text
}

// indent wraps text at 76 columns, indented by four.
func indent(text string) string {
	var b strings.Builder
	for _, line := range wrap(oneLine(text), 76) {
		b.WriteString("    " + line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// explainCompletion completes KIND and KIND.FIELD paths.
func explainCompletion(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	kind, _, dotted := strings.Cut(toComplete, ".")
	if !dotted {
		out := kindNames()
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	var out []string
	if _, ok := kindSpecs[kind]; ok {
		walkMembers(documentType(kind), "", func(p string, _ reflect.Type) { out = append(out, kind+"."+p) })
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
