package platform

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapOrphanedControlPlanes kills processes running one of binaries whose
// parent has died (they were reparented to init, PID 1): the etcd,
// kube-apiserver and kube-controller-manager of a test process that was
// killed before it could stop them (a panic, a test timeout). Control planes
// of live test processes, such as a concurrent run, are left alone. It reads
// /proc and does nothing where there is none.
func reapOrphanedControlPlanes(binaries ...string) (killed []int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !isOneOf(strings.TrimSuffix(exe, " (deleted)"), binaries) {
			continue
		}
		if parentPID(pid) != 1 {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

func isOneOf(path string, binaries []string) bool {
	for _, b := range binaries {
		if resolved, err := filepath.EvalSymlinks(b); err == nil && resolved == path || b == path {
			return true
		}
	}
	return false
}

// parentPID reads the PPID field of /proc/PID/stat (after the command name,
// which may hold spaces and parentheses).
func parentPID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return ppid
}
