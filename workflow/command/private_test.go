package command

import (
	"errors"
	"io/fs"
	"testing"
)

// A file holding values must be private. A Kubernetes Secret volume file
// is group-readable by the pod's fsGroup (the kubelet adds group read), so
// --fs-group accepts group read by exactly that group, held by the process,
// and nothing more.
func TestPrivateWithFSGroup(t *testing.T) {
	held := processGroups
	t.Cleanup(func() { processGroups = held })
	processGroups = func() (int, []int) { return 10001, []int{10001, 20} }
	cases := []struct {
		name    string
		perm    fs.FileMode
		gid     uint32
		fsGroup int
		ok      bool
	}{
		{"owner-only", 0o600, 0, 0, true},
		{"owner-only-with-fs-group", 0o400, 10001, 10001, true},
		{"group-read-without-fs-group", 0o640, 10001, 0, false},
		{"secret-volume-file", 0o440, 10001, 10001, true},
		{"supplementary-group", 0o440, 20, 20, true},
		{"group-not-held", 0o440, 30, 30, false},
		{"other-group-than-fs-group", 0o440, 20, 10001, false},
		{"group-write", 0o460, 10001, 10001, false},
		{"group-exec", 0o450, 10001, 10001, false},
		{"world-read", 0o444, 10001, 10001, false},
		{"root-group-never-trusted", 0o440, 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := private("/etc/keyledger/command.json", tc.perm, tc.gid, tc.fsGroup)
			if tc.ok {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				return
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Reason != ReasonNotPrivate {
				t.Fatalf("want %s, got %v", ReasonNotPrivate, err)
			}
		})
	}
}
