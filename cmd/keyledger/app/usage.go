package app

import (
	"fmt"
	"io"
	"strings"
)

// entry is one line of the usage: a synopsis and what it does. The
// program's usage, each command group's usage and each command's --help
// are all made from entries, so the usage text lives in one place.
type entry struct {
	// command is the command (and subcommand) the entry documents:
	// "run", "journal show".
	command string
	// synopsis is the invocation, starting with "keyledger".
	synopsis string
	// doc is the description, one element per printed line.
	doc []string
}

// entries is the usage of every command, in the order the program's usage
// lists them.
var entries = []entry{
	{"run", "keyledger run COMMAND_FILE", []string{"run one command file (absolute path)"}},
	{"plan", "keyledger plan COMMAND_FILE", []string{"show what run would do; writes nothing"}},
	{"migrate", "keyledger migrate up|down|version|recover", []string{
		"manage the journal schema (recover: clear",
		"the dirty mark an earlier version left;",
		"down refuses to drop journal rows unless",
		"--destroy-journal-records)"}},
	{"journal list", "keyledger journal list", []string{"list journaled operations (those the role may see)"}},
	{"journal show", "keyledger journal show MUTATION_ID", []string{
		"show one operation and its records (a plan: its",
		"newest runs, --limit, at most 100)"}},
	{"journal prune", "keyledger journal prune --older-than DURATION", []string{
		"as the schema owner: remove finished plan runs",
		"older than DURATION (each plan keeps its newest)"}},
	{"journal grant", "keyledger journal grant ROLE NAMESPACE...", []string{
		"as the schema owner: let ROLE act on NAMESPACEs"}},
	{"journal revoke", "keyledger journal revoke ROLE NAMESPACE...", []string{
		"as the schema owner: take NAMESPACEs from ROLE"}},
	{"journal grants", "keyledger journal grants [--history]", []string{"list the namespace grants (or every change)"}},
	{"keyring inspect", "keyledger keyring inspect NS/NAME", []string{"print a keyring's catalog (never material)"}},
	{"history", "keyledger history NS/NAME", []string{"list a Secret's retained versions (never values)"}},
	{"history", "keyledger history NS/NAME --version N --show-keys", []string{
		"one version's key names and value digests"}},
	{"render credentials", "keyledger render credentials --plan FILE [--image IMAGE]", []string{
		"print a credential plan's Argo CD PreSync hook objects"}},
	{"apply-hook", "keyledger apply-hook DIR", []string{"apply rendered hook objects in order and wait for the Job"}},
	{"preflight", "keyledger preflight --canary IP:PORT", []string{"prove the API server reachable, the canary not"}},
	{"version", "keyledger version", []string{"print the version"}},
	{"completion", "keyledger completion bash|zsh|fish", []string{"print a shell completion script"}},
}

const usageHeader = "keyledger: exactly-once operations on Kubernetes Secrets, journaled in PostgreSQL\n\n"

const usageFooter = `
Flags common to commands that need them:
  --database-url URL   journal database (default $KEYLEDGER_DATABASE_URL)
  --kubeconfig PATH    cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)
  -o table|json        output format of journal, history and plan
  -h, --help           usage of the program or of one command (exit 0)
  --version            print the version (as keyledger version)

A failure prints one line on stderr saying what failed and what to do
(with -o json: a JSON object with error, reason and fix).
Exit codes: 0 done, 1 internal error, 2 refused, 64 usage or invalid
command file, 69 dependency unreachable, 75 outcome uncertain (rerun
settles it), 77 permission matrix mismatch.
`

// docColumn is where descriptions start; a longer synopsis has its
// description on the lines below it.
const docColumn = 40

// writeEntries writes the entries for which match is true, in the usage's
// layout.
func writeEntries(w io.Writer, match func(entry) bool) {
	indent := strings.Repeat(" ", docColumn)
	for _, e := range entries {
		if !match(e) {
			continue
		}
		line := "  " + e.synopsis
		doc := e.doc
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

// writeUsage writes the program's usage.
func writeUsage(w io.Writer) {
	fmt.Fprint(w, usageHeader+"Usage:\n")
	writeEntries(w, func(entry) bool { return true })
	fmt.Fprint(w, usageFooter)
}

// writeCommandUsage writes the entries of command (a command, or a group
// such as "journal": every command in it) and reports whether there were
// any.
func writeCommandUsage(w io.Writer, command string) bool {
	match := func(e entry) bool { return e.command == command || strings.HasPrefix(e.command, command+" ") }
	found := false
	for _, e := range entries {
		found = found || match(e)
	}
	if !found {
		return false
	}
	fmt.Fprint(w, "Usage:\n")
	writeEntries(w, match)
	return true
}

// shortDoc is a command's one-line description for completion: its first
// entry's description.
func shortDoc(command string) string {
	for _, e := range entries {
		if e.command == command || strings.HasPrefix(e.command, command+" ") {
			return strings.Join(e.doc, " ")
		}
	}
	return ""
}
