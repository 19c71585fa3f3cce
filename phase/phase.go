// Package phase times where one keyledger process spends its wall time,
// for `make bench` only: with KEYLEDGER_TRACE_PHASES=1 in the environment
// the process records spans on monotonic clocks (configuration, the
// permission check, the journal connect, each transaction, each API
// request) and prints, just before it exits, one extra JSON line on stderr
// that partitions its life into consecutive phases whose durations add up
// to the time from its start to that line. The line holds phase names,
// durations and counts: no names of objects, no addresses, nothing a
// request or the journal carried.
//
// Without the variable nothing is recorded (every call is a check of one
// bool) and nothing is printed: the default output is unchanged.
//
// The process's start is the parent's: KEYLEDGER_TRACE_SPAWN_NS is the
// parent's CLOCK_MONOTONIC reading (nanoseconds) taken just before it
// started the process, on the same clock the process reads at main (the
// machine's one CLOCK_MONOTONIC), so "start to main" includes fork, exec,
// the Go runtime's start and every package's init. Without it the origin
// is main and "start to main" is not reported. (/proc/self/stat's
// starttime would need no help from the parent, but counts clock ticks,
// 10 ms here: coarser than the phase it would measure.)
package phase

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The environment settings the bench sets.
const (
	EnvTrace   = "KEYLEDGER_TRACE_PHASES"
	EnvSpawnNS = "KEYLEDGER_TRACE_SPAWN_NS"
)

// Kinds of spans.
const (
	kindPhase   = "phase"
	kindRequest = "request"
)

type span struct {
	name       string
	kind       string
	start, end time.Duration
}

var rec struct {
	on bool
	mu sync.Mutex
	// main is the time.Now of Main; spans are offsets from it.
	main time.Time
	// spawn is the parent's spawn time as an offset from main (<= 0);
	// hasSpawn says whether the parent gave it.
	spawn    time.Duration
	hasSpawn bool
	spans    []span
	// conns counts the connections requests did not find idle (each a
	// dial and a TLS handshake), handshakes the TLS handshakes.
	conns, handshakes int
}

// Monotonic is the machine's CLOCK_MONOTONIC now, in nanoseconds: what
// the parent passes as KEYLEDGER_TRACE_SPAWN_NS.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// Main starts the recording when the environment asks for it. Call it
// first thing in main.
func Main() {
	mono := Monotonic()
	now := time.Now()
	if os.Getenv(EnvTrace) != "1" {
		return
	}
	rec.on, rec.main = true, now
	if v, err := strconv.ParseInt(os.Getenv(EnvSpawnNS), 10, 64); err == nil && v > 0 && v <= mono {
		rec.spawn, rec.hasSpawn = -time.Duration(mono-v), true
	}
}

// Enabled reports whether phases are being recorded.
func Enabled() bool { return rec.on }

func nothing() {}

// Begin starts a span named name on the run's path and returns its end.
// Spans inside another span are part of it; a span that overlaps one that
// started before it is merged with it.
func Begin(name string) (end func()) { return begin(name, kindPhase) }

func begin(name, kind string) func() {
	if !rec.on {
		return nothing
	}
	start := time.Since(rec.main)
	return func() {
		end := time.Since(rec.main)
		rec.mu.Lock()
		rec.spans = append(rec.spans, span{name: name, kind: kind, start: start, end: end})
		rec.mu.Unlock()
	}
}

// Wrap times every request sent through rt as a span named by its method
// and resource ("PUT secrets"; names and addresses are left out) and
// counts the connections and TLS handshakes requests had to make.
func Wrap(rt http.RoundTripper, name func(*http.Request) string) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if !rec.on {
			return rt.RoundTrip(req)
		}
		trace := &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if !info.Reused {
					rec.mu.Lock()
					rec.conns++
					rec.mu.Unlock()
				}
			},
			TLSHandshakeStart: func() {
				rec.mu.Lock()
				rec.handshakes++
				rec.mu.Unlock()
			},
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		end := begin(name(req), kindRequest)
		resp, err := rt.RoundTrip(req)
		end()
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Phase is one part of the partition.
type Phase struct {
	Name string `json:"name"`
	US   int64  `json:"us"`
}

// Line is the JSON line Write prints.
type Line struct {
	Msg string `json:"msg"`
	// Origin is "spawn" (the parent's clock at start) or "main".
	Origin string  `json:"origin"`
	Phases []Phase `json:"phases"`
	// SumUS is the sum of the phases: the time from the origin to the line.
	SumUS int64 `json:"sum_us"`
	// Requests is the number of API requests, Connections the new
	// connections they opened, Handshakes the TLS handshakes.
	Requests    int `json:"requests"`
	Connections int `json:"connections"`
	Handshakes  int `json:"tls_handshakes"`
}

// Write prints the phase line on w, once the run is over (just before the
// process exits): nothing when phases are not recorded.
func Write(w io.Writer) {
	if !rec.on {
		return
	}
	end := time.Since(rec.main)
	rec.mu.Lock()
	spans := slices.Clone(rec.spans)
	line := Line{Msg: "phases", Origin: "main", Connections: rec.conns, Handshakes: rec.handshakes}
	rec.mu.Unlock()
	var phases []Phase
	if rec.hasSpawn {
		line.Origin = "spawn"
		phases = append(phases, Phase{Name: "start to main", US: (-rec.spawn).Microseconds()})
	}
	for _, s := range spans {
		if s.kind == kindRequest {
			line.Requests++
		}
	}
	phases = append(phases, partition(spans, end)...)
	line.Phases = phases
	for _, p := range phases {
		line.SumUS += p.US
	}
	b, _ := json.Marshal(line)
	_, _ = w.Write(append(b, '\n'))
}

// partition turns spans (offsets from main) into consecutive phases from
// 0 to end: each top-level span (one not inside an earlier one; spans that
// overlap are merged into one phase named after all of them), and the
// time between two of them as "work before NEXT" (or "exit" after the
// last). Durations are computed from the boundaries, so they add up.
func partition(spans []span, end time.Duration) []Phase {
	slices.SortStableFunc(spans, func(a, b span) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(b.end, a.end) // the enclosing one first
	})
	type group struct {
		names      []string
		counts     map[string]int
		start, end time.Duration
	}
	var groups []*group
	for _, s := range spans {
		if n := len(groups); n > 0 && s.start < groups[n-1].end {
			g := groups[n-1]
			if s.end <= g.end {
				continue // inside: part of it
			}
			g.end = s.end // overlapping: merged
			if g.counts[s.name] == 0 {
				g.names = append(g.names, s.name)
			}
			g.counts[s.name]++
			continue
		}
		groups = append(groups, &group{names: []string{s.name}, counts: map[string]int{s.name: 1}, start: s.start, end: s.end})
	}
	var out []Phase
	cursor := time.Duration(0)
	add := func(name string, to time.Duration) {
		if to < cursor {
			to = cursor
		}
		out = append(out, Phase{Name: name, US: to.Microseconds() - cursor.Microseconds()})
		cursor = to
	}
	for _, g := range groups {
		label := make([]string, len(g.names))
		for i, n := range g.names {
			label[i] = n
			if c := g.counts[n]; c > 1 {
				label[i] = n + " x" + strconv.Itoa(c)
			}
		}
		name := strings.Join(label, " + ")
		if g.start > cursor {
			add("work before "+name, g.start)
		}
		add(name, g.end)
	}
	add("exit", end)
	return out
}
