package failpoint

import "testing"

func TestParseAndHit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec string
		hits []string
		want []bool
	}{
		{"", []string{"after-call"}, []bool{false}},
		{"after-call", []string{"after-prepare", "after-call", "after-call"}, []bool{false, true, false}},
		{"after-call#2", []string{"after-call", "after-send", "after-call", "after-call"}, []bool{false, false, true, false}},
		{"after-call#x", []string{"after-call#x"}, []bool{true}},
	}
	for _, tc := range cases {
		a := parse(tc.spec)
		for i, name := range tc.hits {
			if got := a.hit(name); got != tc.want[i] {
				t.Errorf("spec %q hit %d (%s) = %v, want %v", tc.spec, i, name, got, tc.want[i])
			}
		}
	}
}
