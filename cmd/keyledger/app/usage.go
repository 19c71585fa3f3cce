package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The usage text has one source, the command tree: the program's usage
// lists every command's synopsis (its path and the arguments of its Use)
// beside its Short; a command's help starts with the same lines, then its
// Long, its flags and its Example; docs/cli.md is written from the same
// tree (writeReference).

// synopsis is c's invocation: "keyledger journal show MUTATION_ID".
func synopsis(c *cobra.Command) string {
	if _, args, ok := strings.Cut(c.Use, " "); ok {
		return c.CommandPath() + " " + args
	}
	return c.CommandPath()
}

// usageLeaves are the commands the usage lists for c: c itself, or, for a
// command holding subcommands, each of them (a subcommand holding more,
// in turn). completion is one entry: its shells are its arguments.
func usageLeaves(c *cobra.Command) []*cobra.Command {
	if !c.HasAvailableSubCommands() || c.Name() == "completion" {
		return []*cobra.Command{c}
	}
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, usageLeaves(s)...)
		}
	}
	return out
}

// docColumn is where descriptions start; a longer synopsis has its
// description on the lines below it.
const docColumn = 40

// usageWidth is the width the descriptions are wrapped to.
const usageWidth = 80

// writeEntries writes one entry per command: its synopsis and its Short,
// wrapped from docColumn.
func writeEntries(w io.Writer, commands []*cobra.Command) {
	indent := strings.Repeat(" ", docColumn)
	for _, c := range commands {
		line := "  " + synopsis(c)
		doc := wrap(c.Short, usageWidth-docColumn)
		if len(line) <= docColumn-2 {
			line += strings.Repeat(" ", docColumn-len(line)) + doc[0]
			doc = doc[1:]
		}
		fmt.Fprintln(w, line)
		for _, d := range doc {
			fmt.Fprintln(w, indent+d)
		}
	}
}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

const usageHeader = "keyledger: exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL\n\n"

// usageFooter follows the global flags in the program's usage.
const usageFooter = `
Flags go anywhere on the line (GNU style: --flag VALUE, --flag=VALUE);
"--" ends them. -o (table, json, yaml) is taken by every command whose
output is structured; run prints its one JSON outcome line unless asked
for yaml. keyledger help COMMAND or keyledger COMMAND --help prints a
command's usage, flags and examples (exit 0).

A failure prints one line on stderr saying what failed and what to do
(with -o json: a JSON object with error, reason and fix).
Exit codes: 0 done, 1 internal error, 2 refused, 64 usage or invalid
command file, 69 dependency unreachable, 75 outcome uncertain (rerun
settles it), 77 permission matrix mismatch.
`

// writeUsage writes the program's usage.
func writeUsage(w io.Writer, root *cobra.Command) {
	fmt.Fprint(w, usageHeader+"Usage:\n")
	writeEntries(w, usageLeaves(root))
	fmt.Fprintf(w, "\nGlobal flags:\n%s", rootFlags(root).FlagUsages())
	fmt.Fprint(w, usageFooter)
}

// rootFlags are the persistent flags and the root's own (--help,
// --version), as one set.
func rootFlags(root *cobra.Command) *pflag.FlagSet {
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	fs := pflag.NewFlagSet("keyledger", pflag.ContinueOnError)
	fs.AddFlagSet(root.PersistentFlags())
	for name, usage := range map[string]string{
		"help":    "usage of the program, or of one command (keyledger COMMAND --help); exit 0",
		"version": "print the version (as keyledger version)",
	} {
		if f := root.Flags().Lookup(name); f != nil {
			f.Usage = usage
			fs.AddFlag(f)
		}
	}
	return fs
}

// writeCommandHelp writes one command's help: its usage entries (for a
// group, every command in it), its description, its flags, the global
// flags and its examples.
func writeCommandHelp(w io.Writer, c *cobra.Command) {
	c.InitDefaultHelpFlag()
	fmt.Fprint(w, "Usage:\n")
	writeEntries(w, usageLeaves(c))
	long := c.Long
	if long == "" {
		long = c.Short
	}
	fmt.Fprintf(w, "\n%s\n", strings.TrimRight(long, "\n"))
	if local := c.LocalFlags().FlagUsages(); local != "" {
		fmt.Fprintf(w, "\nFlags:\n%s", local)
	}
	if inherited := c.InheritedFlags().FlagUsages(); inherited != "" {
		fmt.Fprintf(w, "\nGlobal Flags:\n%s", inherited)
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
}

// setHelp makes every help (--help, -h, help COMMAND) print the usage
// above on streams.Out.
func setHelp(root *cobra.Command, streams IOStreams) {
	root.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if c == root {
			writeUsage(streams.Out, root)
			return
		}
		writeCommandHelp(streams.Out, c)
	})
}
