package platform

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One node per machine: a start that finds a live owner refuses, and its
// cleanup leaves the owner's node alone (no teardown of someone else's
// containers, chains or address); reaping ignores a live owner too.
func TestNodeOwnerRecordProtectsALiveNode(t *testing.T) {
	saved := nodeStateRoot
	nodeStateRoot = t.TempDir()
	t.Cleanup(func() { nodeStateRoot = saved })
	other := os.Getppid() // alive for the whole test
	record := `{"testPID":` + strconv.Itoa(other) + `,"state":"/nonexistent/state","run":"/nonexistent/run","pids":[]}`
	if err := os.WriteFile(ownerFile(), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}

	n := &Node{state: filepath.Join(t.TempDir(), "node"), run: filepath.Join(nodeStateRoot, "me")}
	err := n.claim(t.Context())
	if err == nil || !strings.Contains(err.Error(), "already runs a node") {
		t.Fatalf("claim with a live owner: want refusal, got %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("Stop of an unclaimed node: %v", err)
	}
	if err := reapDeadNode(); err != nil {
		t.Fatalf("reap with a live owner: %v", err)
	}
	rec, err := readOwner()
	if err != nil || rec == nil || rec.TestPID != other {
		t.Fatalf("the live owner's record must stay: %+v, %v", rec, err)
	}
	// The refused process's control plane (started WithNode, bound to the
	// node address) stops too: the live node keeps its address.
	if !nodeOwnedByOther() {
		t.Fatal("a live owner's node must count as owned by another process")
	}
}

// With no owner, or a dead one, the address is this process's to remove.
func TestNodeOwnedByOtherWithoutLiveOwner(t *testing.T) {
	saved := nodeStateRoot
	nodeStateRoot = t.TempDir()
	t.Cleanup(func() { nodeStateRoot = saved })
	if nodeOwnedByOther() {
		t.Fatal("no owner record: not owned by another process")
	}
	record := `{"testPID":` + strconv.Itoa(os.Getpid()) + `,"state":"/nonexistent/state","run":"/nonexistent/run","pids":[]}`
	if err := os.WriteFile(ownerFile(), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
	if nodeOwnedByOther() {
		t.Fatal("this process's own record: not another's")
	}
}
