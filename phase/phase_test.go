package phase

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// The phases partition the run: top-level spans in order, the time
// between them as work, spans inside another dropped, overlapping ones
// merged under both names, and the durations add up to the end.
func TestPartitionAddsUpToTheEnd(t *testing.T) {
	spans := []span{
		{name: "tx prepare", start: ms(30), end: ms(40)},
		{name: "permission check", start: ms(10), end: ms(20)},
		{name: "POST selfsubjectaccessreviews", kind: kindRequest, start: ms(11), end: ms(19)}, // inside
		{name: "journal connect", start: ms(20), end: ms(28)},
		{name: "GET secrets", kind: kindRequest, start: ms(21), end: ms(31)}, // overlaps both
	}
	got := partition(spans, ms(45))
	require.Equal(t, []Phase{
		{"work before permission check", 10000},
		{"permission check", 10000},
		{"journal connect + GET secrets + tx prepare", 20000},
		{"exit", 5000},
	}, got)
	var sum int64
	for _, p := range got {
		sum += p.US
	}
	require.Equal(t, int64(45000), sum)
}

// Off, nothing is recorded and nothing is written.
func TestOffWritesNothing(t *testing.T) {
	if Enabled() {
		t.Skip("recording is on in this process")
	}
	Begin("x")()
	var b bytes.Buffer
	Write(&b)
	require.Empty(t, b.String())
}

// On, the line is one JSON object whose phases sum to sum_us and which
// starts at the parent's spawn when it was given.
func TestLineFromSpawn(t *testing.T) {
	t.Setenv(EnvTrace, "1")
	t.Setenv(EnvSpawnNS, "1")
	defer func() { rec.on, rec.spans, rec.hasSpawn = false, nil, false }()
	Main()
	require.True(t, Enabled())
	Begin("configuration")()
	var b bytes.Buffer
	Write(&b)
	var l Line
	require.NoError(t, json.Unmarshal(b.Bytes(), &l))
	require.Equal(t, "phases", l.Msg)
	require.Equal(t, "spawn", l.Origin)
	require.Equal(t, "start to main", l.Phases[0].Name)
	var sum int64
	for _, p := range l.Phases {
		sum += p.US
	}
	require.Equal(t, l.SumUS, sum)
}
