package platform

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerRecord is the one node this machine runs, written before anything
// machine-wide changes, so that a test process that dies (a panic, a test
// timeout, SIGKILL) leaves enough for the next StartNode to tear its node
// down by PID.
type ownerRecord struct {
	TestPID int    `json:"testPID"`
	State   string `json:"state"`
	Run     string `json:"run"`
	PIDs    []int  `json:"pids"`
}

func ownerFile() string { return filepath.Join(nodeStateRoot, "owner.json") }

func readOwner() (*ownerRecord, error) {
	b, err := os.ReadFile(ownerFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec ownerRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("reading %s: %w", ownerFile(), err)
	}
	return &rec, nil
}

func (n *Node) writeOwner() error {
	b, err := json.Marshal(n.owner)
	if err != nil {
		return err
	}
	tmp := ownerFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, ownerFile())
}

// claim records this test process as the machine's node owner, or fails
// when a live process already runs a node.
func (n *Node) claim(context.Context) error {
	if err := os.MkdirAll(nodeStateRoot, 0o700); err != nil {
		return err
	}
	rec, err := readOwner()
	if err != nil {
		return err
	}
	if rec != nil && rec.TestPID != os.Getpid() && alive(rec.TestPID) {
		return fmt.Errorf("test process %d already runs a node on this machine (one node per machine)", rec.TestPID)
	}
	n.owner = ownerRecord{TestPID: os.Getpid(), State: n.state, Run: n.run}
	return n.writeOwner()
}

// reapDeadNode tears down a node whose test process is gone.
func reapDeadNode() error {
	rec, err := readOwner()
	if err != nil || rec == nil || alive(rec.TestPID) {
		return err
	}
	fmt.Fprintf(os.Stderr, "node: tearing down the node left by test process %d\n", rec.TestPID)
	err = teardown(rec, nil)
	removeNodeAddress()
	return err
}

func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// Stop tears the node down: the components by PID (the kubelet first, so
// nothing restarts containers), every container left, the mounts, the
// network state (iptables chains and ipsets of kube-proxy and kube-router,
// the guard rule, the bridge, pod network namespaces, the node address) and
// the pods' cgroups.
func (n *Node) Stop() error {
	// Only the machine's claimant tears down: a start that failed to claim
	// (another live test process runs a node) must not touch that node.
	if n == nil || n.owner.TestPID != os.Getpid() {
		return nil
	}
	if n.guardDone != nil {
		close(n.guardDone)
		<-n.guardWait
		n.guardDone = nil
	}
	return teardown(&n.owner, n)
}

// teardown works from the owner record alone (a dead owner's node) or with
// the live Node (its child processes, waited for).
func teardown(rec *ownerRecord, n *Node) error {
	var errs []error
	// Components in reverse start order; containerd last.
	pids := slices.Clone(rec.PIDs)
	slices.Reverse(pids)
	for _, pid := range pids {
		if !ownedProcess(pid, rec) {
			continue
		}
		if isContainerd(pid) {
			killContainers(rec)
		}
		stopPID(pid, n)
	}
	killContainers(rec)
	// Shims (and anything else) that name this node's directories.
	for _, pid := range processesMentioning(rec.Run, rec.State) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if n != nil {
		for _, c := range n.procs {
			_ = c.log.Close()
		}
	}
	if err := unmountUnder(rec.State, rec.Run); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, cleanNetwork()...)
	removeContainerLogLinks(rec.State)
	removeCgroups()
	if rec.Run != "" {
		if err := os.RemoveAll(rec.Run); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(ownerFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ownedProcess is true when pid still runs one of this node's components
// (its command line names the node's state or run directory): a PID reused
// since by another program is never signalled.
func ownedProcess(pid int, rec *ownerRecord) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	s := string(b)
	return (rec.State != "" && strings.Contains(s, rec.State)) || (rec.Run != "" && strings.Contains(s, rec.Run))
}

func isContainerd(pid int) bool {
	exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	return filepath.Base(exe) == "containerd"
}

// stopPID sends SIGTERM, waits up to 10 s and then sends SIGKILL
// (containerd 1.6 may not exit on SIGTERM while the kubelet is connected).
func stopPID(pid int, n *Node) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	var done chan struct{}
	if n != nil {
		for _, c := range n.procs {
			if c.cmd.Process.Pid == pid {
				done = c.done
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if done != nil {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		} else if !alive(pid) || zombie(pid) {
			return
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if done != nil {
		<-done
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// killContainers kills every process in the pods' cgroups: containers are
// in pid namespaces of their own and outlive their shims.
func killContainers(rec *ownerRecord) {
	if rec.Run != "" {
		sock := filepath.Join(rec.Run, "containerd.sock")
		if _, err := os.Stat(sock); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, _ := exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "tasks", "ls", "-q").Output()
			for _, id := range strings.Fields(string(out)) {
				_ = exec.CommandContext(ctx, "ctr", "--address", sock, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).Run()
			}
			cancel()
		}
	}
	for _, dir := range kubepodsCgroups() {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// kubepodsCgroups lists the kubelet's pod cgroup roots: one per cgroup v1
// hierarchy, or the one of cgroup v2.
func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if fi, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && fi.IsDir() {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	return dirs
}

// removeCgroups removes the pod cgroups, deepest first (a cgroup directory
// is removed with rmdir once it has no processes and no children).
func removeCgroups() {
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			for i := 0; i < 20 && syscall.Rmdir(d) == syscall.EBUSY; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// removeContainerLogLinks removes the kubelet's symlinks in
// /var/log/containers (a fixed path) that point into the node's state.
func removeContainerLogLinks(state string) {
	if state == "" {
		return
	}
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, state+"/") {
			_ = os.Remove(p)
		}
	}
}

// processesMentioning lists processes whose command line contains one of
// the (non-empty) strings.
func processesMentioning(subs ...string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, s := range subs {
			if s != "" && strings.Contains(string(b), s) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount below the given directories, deepest
// first (container rootfs, pod volumes, network namespace files).
func unmountUnder(dirs ...string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var targets []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if d != "" && (mp == d || strings.HasPrefix(mp, d+"/")) {
				targets = append(targets, mp)
			}
		}
	}
	slices.SortFunc(targets, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, t := range targets {
		if err := syscall.Unmount(t, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// cleanNetwork removes what the node added to the machine's network: the
// iptables chains of kube-proxy and kube-router (KUBE-*) and the rules that
// jump to them, their ipsets, the guard rule, the cni0 bridge and leftover
// pod network namespaces.
func cleanNetwork() []error {
	var errs []error
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		out, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			continue
		}
		var chains []string
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
				chains = append(chains, f[1])
			case len(f) > 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") &&
				(strings.Contains(line, " -j KUBE-") || strings.Contains(line, " -g KUBE-") || strings.Contains(line, "keyledger-node-guard")):
				args := append([]string{"-t", table, "-D"}, splitRule(line[3:])...)
				_ = exec.Command("iptables", args...).Run()
			}
		}
		for _, c := range chains {
			_ = exec.Command("iptables", "-t", table, "-F", c).Run()
		}
		for _, c := range chains {
			if out, err := exec.Command("iptables", "-t", table, "-X", c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("deleting iptables chain %s/%s: %v: %s", table, c, err, strings.TrimSpace(string(out))))
			}
		}
	}
	if out, err := exec.Command("ipset", "list", "-n").Output(); err == nil {
		for _, set := range strings.Fields(string(out)) {
			if strings.HasPrefix(set, "KUBE-") || strings.HasPrefix(set, "kube-router") || strings.HasPrefix(set, "inet6:KUBE-") {
				_ = exec.Command("ipset", "destroy", set).Run()
			}
		}
	}
	_ = exec.Command("ip", "link", "delete", "cni0").Run()
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "cni-") {
				_ = exec.Command("ip", "netns", "delete", f[0]).Run()
			}
		}
	}
	return errs
}

// removeNodeAddress takes NodeAddress off lo. The control plane's Stop does
// it once the API server (bound to it) has stopped: removed earlier, the
// API server's connections to itself hang its shutdown.
func removeNodeAddress() {
	_ = exec.Command("ip", "addr", "del", NodeAddress+"/32", "dev", "lo").Run()
}

// nodeOwnedByOther reports whether another live test process runs the
// machine's node. Its node (and every control plane bound to the node
// address, its own included) needs the address: a control plane of this
// process, started WithNode for a node that then could not claim the
// machine, must leave the address alone when it stops.
func nodeOwnedByOther() bool {
	rec, err := readOwner()
	return err == nil && rec != nil && rec.TestPID != os.Getpid() && alive(rec.TestPID)
}

// splitRule splits an iptables -S rule into arguments, keeping quoted
// comments whole.
func splitRule(s string) []string {
	var args []string
	var cur strings.Builder
	inQuote := false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == ' ' && !inQuote:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}
