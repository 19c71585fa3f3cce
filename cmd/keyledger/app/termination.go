package app

import (
	"encoding/json"
	"os"
	"regexp"
	"sync"
	"syscall"

	"github.com/keyledger/keyledger/store"
)

// TerminationLogEnv names the file a process writes its one-line outcome
// to when it ends; unset, the kubelet's default terminationMessagePath.
// Kubernetes shows the line as the container's termination message
// (kubectl describe pod, status.containerStatuses[].state.terminated.message).
const TerminationLogEnv = "KEYLEDGER_TERMINATION_LOG"

// defaultTerminationLog is the kubelet's default terminationMessagePath.
const defaultTerminationLog = "/dev/termination-log"

// terminationLine is the termination message: words a reader at 3 a.m.
// acts on, never a value, a path or an address.
type terminationLine struct {
	Outcome    string `json:"outcome"`
	Reason     string `json:"reason,omitempty"`
	Kind       string `json:"kind,omitempty"`
	MutationID string `json:"mutationId,omitempty"`
	// Journal is "not-consulted" for a run that ended without its journal
	// (nothing to write while it could not be reached).
	Journal  string `json:"journal,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// The members a termination line may carry; anything else is left off
// rather than risk a value in the pod's status (which more people may read
// than its logs: get on pods, not pods/log).
var (
	wordPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	kindPattern       = regexp.MustCompile(`^[A-Za-z]{1,64}$`)
	mutationIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
)

// lastRun is the outcome line of the run this process made, if any.
var lastRun struct {
	sync.Mutex
	line *outcomeLine
}

// noteRunOutcome keeps a run's outcome line for the termination message;
// runCommand defers it first, so it sees the line as printed.
func noteRunOutcome(l *outcomeLine) {
	lastRun.Lock()
	defer lastRun.Unlock()
	c := *l
	lastRun.line = &c
}

// WriteTerminationMessage writes err's one-line outcome (a run's outcome,
// reason, kind and mutationId; every command's exit code) to the
// termination log. It never fails and never creates the file: a missing,
// read-only or special file is left alone, so a run outside a pod writes
// nothing.
func WriteTerminationMessage(err error) {
	path := os.Getenv(TerminationLogEnv)
	if path == "" {
		path = defaultTerminationLog
	}
	writeTerminationLog(path, terminationMessage(err))
}

// terminationMessage is the line for a process that ends with err.
func terminationMessage(err error) []byte {
	f := describe(err)
	t := terminationLine{Outcome: string(f.Outcome), Reason: f.Reason, ExitCode: f.Code}
	if err == nil {
		t.Outcome = "done"
	}
	lastRun.Lock()
	if l := lastRun.line; l != nil && l.Outcome != "" {
		t.Outcome, t.Reason, t.Kind, t.MutationID = l.Outcome, l.Reason, l.Kind, l.MutationID
		t.Journal = summaryWord(l.Summary, "journal")
	}
	lastRun.Unlock()
	keep := func(s string, p *regexp.Regexp) string {
		if p.MatchString(s) {
			return s
		}
		return ""
	}
	t.Outcome, t.Reason = keep(t.Outcome, wordPattern), keep(t.Reason, wordPattern)
	t.Kind, t.MutationID = keep(t.Kind, kindPattern), keep(t.MutationID, mutationIDPattern)
	t.Journal = keep(t.Journal, wordPattern)
	b, _ := json.Marshal(t)
	return append(b, '\n')
}

// summaryWord is the string member key of a run's summary ("" when it has
// none or it is not a string).
func summaryWord(summary store.Detail, key string) string {
	fields, _ := summaryFields(summary)
	var s string
	if json.Unmarshal(fields[key], &s) != nil {
		return ""
	}
	return s
}

// writeTerminationLog replaces the content of the regular file at path
// with msg. Errors are ignored: the message is a courtesy, never a reason
// for a run to fail. O_NONBLOCK keeps a FIFO from holding the exit.
func writeTerminationLog(path string, msg []byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0) //nolint:gosec // G304: the pod's termination log, named by its spec; opened for writing, never read
	if err != nil {
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return
	}
	if f.Truncate(0) != nil {
		return
	}
	_, _ = f.Write(msg)
}
