package app

//go:generate go test -run TestCLIReferenceIsCurrent -count=1 . -args -update

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// writeReference writes docs/cli.md, the command reference, from the
// command tree: the global flags, then each command (groups and their
// commands, in the usage's order) with its synopsis, description,
// examples and flags. TestCLIReferenceIsCurrent fails when the committed
// file differs; `make docs` (go generate) rewrites it.
func writeReference(w io.Writer, root *cobra.Command) {
	fmt.Fprint(w, `# keyledger command reference

<!-- Generated from the command tree (cmd/keyledger/app) by make docs; edit the commands, not this file. -->

keyledger runs `+root.Short+`. The [README](../README.md) says
what each family is for and how to start; this page is every command's `+"`--help`"+`, in
one place.

Flags go anywhere on the line, before or after the command's name
(`+"`keyledger --database-url URL journal list`"+` is `+"`keyledger journal list --database-url URL`"+`);
`+"`--`"+` ends them. `+"`-o`"+` takes `+"`table`, `json` or `yaml`"+` where a command's output is
structured; its default is what the command printed before `+"`-o`"+` existed: a table
for what people read, one JSON line for the outcomes machines read (`+"`run`"+` prints
its one JSON outcome line unless given `+"`-o yaml`"+`, so Jobs and scripts keep reading
stdout as before), YAML for Kubernetes objects. A failure prints one line on stderr
saying what failed and what to do (a JSON object with `+"`-o json`"+`).

## Global flags

`)
	writeFlags(w, rootFlags(root).FlagUsages())
	fmt.Fprint(w, "\n## Commands\n\n")
	for _, c := range availableCommands(root) {
		fmt.Fprintf(w, "- [`%s`](#%s): %s\n", synopsis(c), anchor(c.CommandPath()), c.Short)
	}
	for _, c := range availableCommands(root) {
		writeCommandReference(w, c)
	}
}

// availableCommands are c's commands in the usage's order, each group
// followed by its own.
func availableCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if !s.IsAvailableCommand() {
			continue
		}
		out = append(out, s)
		if s.Name() != "completion" {
			out = append(out, availableCommands(s)...)
		}
	}
	return out
}

func writeCommandReference(w io.Writer, c *cobra.Command) {
	c.InitDefaultHelpFlag()
	depth := strings.Count(c.CommandPath(), " ") + 1
	fmt.Fprintf(w, "\n%s %s\n\n", strings.Repeat("#", min(depth, 4)), c.CommandPath())
	fmt.Fprintf(w, "```text\n%s\n```\n\n", synopsis(c))
	long := c.Long
	if long == "" {
		long = c.Short + "."
	}
	fmt.Fprintf(w, "%s\n", strings.TrimRight(long, "\n"))
	if c.HasAvailableSubCommands() && c.Name() != "completion" {
		fmt.Fprint(w, "\nCommands:\n\n")
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(w, "- [`%s`](#%s): %s\n", synopsis(s), anchor(s.CommandPath()), s.Short)
			}
		}
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n\n```sh\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
	}
	if local := c.LocalFlags().FlagUsages(); local != "" {
		fmt.Fprint(w, "\nFlags:\n\n")
		writeFlags(w, local)
	}
}

// writeFlags writes pflag's flag usages as a text block.
func writeFlags(w io.Writer, usages string) {
	fmt.Fprintf(w, "```text\n%s```\n", usages)
}

// anchor is GitHub's anchor for a heading: lower case, spaces to dashes.
func anchor(heading string) string {
	return strings.ReplaceAll(strings.ToLower(heading), " ", "-")
}
