package app

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
)

// jsonSchemaDraft is the JSON Schema dialect `keyledger schema` writes.
const jsonSchemaDraft = "https://json-schema.org/draft/2020-12/schema"

// kindSchema is the JSON Schema of kind's command files, made from the
// Go type the family decodes (documentType) and the member table
// (fieldDocs): every member's JSON type, required members, no member the
// type does not know (additionalProperties false, as the decoder refuses
// unknown members), null only where the decoder takes it as absent (a
// pointer that is not required), and the value rules. Rules that span
// members (a server's secret names a planned Secret, data and removeKeys
// together) stay the decoder's: TestSchemaAgreesWithTheDecoder lists them.
func kindSchema(kind string) (map[string]any, error) {
	if _, ok := kindSpecs[kind]; !ok {
		return nil, usagef("unknown kind %q: want one of %s", kind, strings.Join(kindNames(), ", "))
	}
	s, err := typeSchema(kind, documentType(kind), "")
	if err != nil {
		return nil, err
	}
	s["$schema"] = jsonSchemaDraft
	s["$id"] = "https://keyledger.dev/schemas/v1/" + kind + ".json"
	s["title"] = kind
	s["description"] = oneLine(kindDocs[kind])
	props := s["properties"].(map[string]any)
	props["kind"].(map[string]any)["const"] = kind
	return s, nil
}

// typeSchema is the schema of a value of Go type t at member path.
func typeSchema(kind string, t reflect.Type, path string) (map[string]any, error) {
	d, documented := docOf(kind, path)
	if path != "" && !documented {
		return nil, fmt.Errorf("schema: %s member %s has no entry in fieldDocs", kind, path)
	}
	nullable := false
	if t.Kind() == reflect.Pointer {
		nullable = !d.required
		t = t.Elem()
	}
	var s map[string]any
	switch t.Kind() {
	case reflect.Struct:
		var err error
		if s, err = structSchema(kind, t, path); err != nil {
			return nil, err
		}
	case reflect.Slice:
		items, err := elemSchema(kind, t.Elem(), path, d)
		if err != nil {
			return nil, err
		}
		s = map[string]any{"type": "array", "items": items}
		setInt(s, "minItems", d.minItems)
		setInt(s, "maxItems", d.maxItems)
	case reflect.Map:
		values, err := elemSchema(kind, t.Elem(), path, d)
		if err != nil {
			return nil, err
		}
		s = map[string]any{"type": "object", "additionalProperties": values}
		setInt(s, "minProperties", d.minItems)
		setInt(s, "maxProperties", d.maxItems)
		if d.keyPattern != "" || d.keyMaxLength > 0 {
			names := map[string]any{}
			setString(names, "pattern", d.keyPattern)
			setInt(names, "maxLength", d.keyMaxLength)
			s["propertyNames"] = names
		}
	default:
		s = map[string]any{}
		scalarSchema(s, t, d)
	}
	if d.doc != "" {
		s["description"] = oneLine(d.doc)
	}
	if nullable {
		s["type"] = []any{s["type"], "null"}
	}
	return s, nil
}

// structSchema is the object schema of struct type t at path: its
// members, the required ones, and no other member.
func structSchema(kind string, t reflect.Type, path string) (map[string]any, error) {
	props := map[string]any{}
	required := []string{}
	for _, m := range members(t) {
		child := m.name
		if path != "" {
			child = path + "." + m.name
		}
		ms, err := typeSchema(kind, m.typ, child)
		if err != nil {
			return nil, err
		}
		props[m.name] = ms
		if cd, _ := docOf(kind, child); cd.required {
			required = append(required, m.name)
		}
	}
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

// elemSchema is the schema of a list's or map's elements at path: a
// struct's own members (documented under the same path), or a scalar with
// the member's value rules.
func elemSchema(kind string, t reflect.Type, path string, d fieldDoc) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return structSchema(kind, t, path)
	}
	s := map[string]any{}
	scalarSchema(s, t, d)
	return s, nil
}

// scalarSchema sets the type and value rules of a string, number or
// boolean.
func scalarSchema(s map[string]any, t reflect.Type, d fieldDoc) {
	switch t.Kind() {
	case reflect.String:
		s["type"] = "string"
		setString(s, "const", d.constant)
		if len(d.enum) > 0 {
			s["enum"] = d.enum
		}
		setString(s, "pattern", d.pattern)
		setInt(s, "minLength", d.minLength)
		setInt(s, "maxLength", d.maxLength)
	case reflect.Bool:
		s["type"] = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s["type"] = "integer"
		if d.minimum != 0 || d.maximum != 0 {
			s["minimum"], s["maximum"] = d.minimum, d.maximum
		}
	}
}

func setString(s map[string]any, k, v string) {
	if v != "" {
		s[k] = v
	}
}

func setInt(s map[string]any, k string, v int) {
	if v > 0 {
		s[k] = v
	}
}

// oneLine joins a documentation text's lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newSchemaCommand(streams IOStreams, g *commonFlags) *cobra.Command {
	var out outputFlag
	cmd := &cobra.Command{
		Use:   "schema KIND",
		Short: "print the JSON Schema of a kind's command files",
		Long: `Print the JSON Schema (draft 2020-12) of one kind's command files, made from the Go types the
family decodes and the same member table explain prints: for an editor, a CI check or a
generator. validate remains the authority: it runs the decoder and the family's checks,
including the rules that span members, which the schema does not state.`,
		Example: `  keyledger schema KeyRetirement > key-retirement.schema.json
  keyledger schema CredentialPlan -o yaml`,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: kindCompletion,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := g.checkLogFlags(); err != nil {
				return err
			}
			if err := out.check(); err != nil {
				return err
			}
			if len(args) != 1 {
				return usagef("schema takes one KIND: %s", strings.Join(kindNames(), ", "))
			}
			s, err := kindSchema(args[0])
			if err != nil {
				return err
			}
			if out.format == formatYAML {
				return writeYAML(streams.Out, s)
			}
			b, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				return err
			}
			_, err = streams.Out.Write(append(b, '\n'))
			return err
		},
	}
	addOutput(cmd, &out, formatJSON, formatYAML)
	return cmd
}

// kindCompletion completes the first argument with the kinds.
func kindCompletion(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return kindNames(), cobra.ShellCompDirectiveNoFileComp
}
