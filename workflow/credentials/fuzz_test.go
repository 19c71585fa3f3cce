package credentials

import (
	"errors"
	"strings"
	"testing"

	"github.com/keyledger/keyledger/workflow/command"
)

// FuzzDecode: the plan decoder never panics, every refusal is a
// *command.InvalidError that never repeats a literal value, and every
// accepted plan is within the limits the issue sets.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(planJSON(validSpec)))
	f.Add([]byte(planJSON(`{"owner":"o","namespace":"ns","secrets":[{"name":"a","keys":[{"name":"p","generate":{"length":16,"alphabet":"hex"}}]}]}`)))
	f.Add([]byte(planJSON(`{"owner":"o","namespace":"ns","secrets":[]}`)))
	f.Add([]byte(planJSON(`{"owner":"o","namespace":"ns","secrets":[{"name":"a","keys":[{"name":"p","generate":{"length":200,"alphabet":"hex"}}]}]}`)))
	f.Add([]byte(planJSON(`{"owner":"o","namespace":"ns","secrets":[{"name":"a","keys":[{"name":"p","value":"x","value":"y"}]}]}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := command.Parse(data)
		if err != nil {
			return
		}
		cmd, err := Decode(&command.File{Bytes: data, Envelope: *env})
		if err != nil {
			var invalid *command.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("refusal is %T, want *command.InvalidError: %v", err, err)
			}
			if strings.Contains(err.Error(), "CANARY") {
				t.Fatalf("refusal repeats a value: %v", err)
			}
			return
		}
		s := cmd.Spec
		if len(s.Secrets) == 0 || len(s.Secrets) > 64 {
			t.Fatalf("accepted a plan of %d Secrets", len(s.Secrets))
		}
		for _, sec := range s.Secrets {
			for _, k := range sec.Keys {
				if g := k.Generate; g != nil && (g.Length < 16 || g.Length > 128) {
					t.Fatalf("accepted a generated length of %d", g.Length)
				}
			}
		}
		if !strings.HasPrefix(cmd.Digest, "sha256:") {
			t.Fatalf("digest %q", cmd.Digest)
		}
	})
}
