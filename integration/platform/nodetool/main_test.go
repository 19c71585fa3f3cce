package main

import (
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// Cluster DNS answers Service names from its table, NXDOMAIN for any other
// cluster.local name, and REFUSED for everything else: no query is ever
// forwarded, so no lookup leaves the node.
func TestZoneAnswers(t *testing.T) {
	z := &zone{hosts: map[string][4]byte{"kubernetes.default.svc.cluster.local.": {10, 96, 0, 1}}}
	cases := []struct {
		name    string
		typ     dnsmessage.Type
		rcode   dnsmessage.RCode
		answers int
	}{
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"KUBERNETES.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1},
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, 0},
		{"other.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, 0},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
		{"kubernetes.default.svc.cluster.local.example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, 0},
	}
	for _, tc := range cases {
		reply, err := z.answer(query(t, tc.name, tc.typ))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(reply); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if m.Header.ID != 7 || !m.Header.Response || m.Header.RCode != tc.rcode || len(m.Answers) != tc.answers {
			t.Errorf("%s %v: got id %d rcode %v, %d answers; want rcode %v, %d answers", tc.name, tc.typ, m.Header.ID, m.Header.RCode, len(m.Answers), tc.rcode, tc.answers)
		}
		if tc.answers == 1 && m.Answers[0].Body.(*dnsmessage.AResource).A != [4]byte{10, 96, 0, 1} {
			t.Errorf("%s: wrong address %v", tc.name, m.Answers[0].Body)
		}
	}
}
