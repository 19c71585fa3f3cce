package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// The soak's independent record: etcd's own history of a namespace's
// Secrets, streamed from etcd's watch (its JSON gateway) from a revision
// taken before the first operation. etcd is never a fault target, so the
// stream spans every API server restart and pause; the API server's
// compaction cannot cut a watch that keeps up.

// secretEvent is one write to a Secret as etcd recorded it.
type secretEvent struct {
	Rev     int64
	Name    string
	Created bool // the key's first version (an ADDED event)
	Deleted bool
	Secret  *corev1.Secret // the stored object; nil for a delete
}

// etcdHistory collects the events of one watch.
type etcdHistory struct {
	mu     sync.Mutex
	events []secretEvent
	err    error
	notify chan struct{}
	cancel context.CancelFunc
}

// int64s decodes the gateway's int64 fields (JSON strings, as protobuf's
// JSON mapping writes them).
type int64s int64

func (n *int64s) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*n = int64s(v)
	return err
}

type etcdKV struct {
	Key            []byte `json:"key"`
	Value          []byte `json:"value"`
	CreateRevision int64s `json:"create_revision"`
	ModRevision    int64s `json:"mod_revision"`
}

type etcdWatchLine struct {
	Result struct {
		Header struct {
			Revision int64s `json:"revision"`
		} `json:"header"`
		Events []struct {
			Type string `json:"type"`
			KV   etcdKV `json:"kv"`
		} `json:"events"`
		Canceled     bool   `json:"canceled"`
		CancelReason string `json:"cancel_reason"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// secretsPrefix is where the API server keeps a namespace's Secrets.
func secretsPrefix(ns string) []byte { return []byte("/registry/secrets/" + ns + "/") }

// prefixEnd is the range end that makes key a prefix query.
func prefixEnd(key []byte) []byte {
	end := bytes.Clone(key)
	end[len(end)-1]++
	return end
}

// etcdPost posts a JSON body to etcd's gateway.
func etcdPost(ctx context.Context, base, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(base, "/")+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("etcd %s: %s", path, resp.Status)
	}
	return resp, nil
}

// etcdRevision is etcd's current revision.
func etcdRevision(ctx context.Context, base string) (int64, error) {
	resp, err := etcdPost(ctx, base, "/v3/kv/range", map[string]any{"key": []byte("/registry/"), "count_only": true})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		Header struct {
			Revision int64s `json:"revision"`
		} `json:"header"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("decoding etcd's range answer: %w", err)
	}
	return int64(out.Header.Revision), nil
}

// watchSecretHistory starts recording every write to ns's Secrets from
// etcd's current revision on (the stream replays from that revision, so
// nothing written after this returns is missed). Stop it with stop.
func watchSecretHistory(ctx context.Context, base, ns string) (*etcdHistory, error) {
	rev, err := etcdRevision(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("reading etcd's revision: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &etcdHistory{notify: make(chan struct{}, 1), cancel: cancel}
	go h.read(ctx, base, secretsPrefix(ns), rev+1)
	return h, nil
}

func (h *etcdHistory) read(ctx context.Context, base string, key []byte, from int64) {
	resp, err := etcdPost(ctx, base, "/v3/watch", map[string]any{"create_request": map[string]any{
		"key": key, "range_end": prefixEnd(key), "start_revision": strconv.FormatInt(from, 10),
	}})
	if err != nil {
		h.fail(fmt.Errorf("opening etcd's watch: %w", err))
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var line etcdWatchLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			h.fail(fmt.Errorf("decoding etcd's watch: %w", err))
			return
		}
		if line.Error != nil || line.Result.Canceled {
			h.fail(fmt.Errorf("etcd's watch ended: %v %s", line.Error, line.Result.CancelReason))
			return
		}
		for _, ev := range line.Result.Events {
			se, err := decodeSecretEvent(ev.Type, ev.KV, len(key))
			if err != nil {
				h.fail(err)
				return
			}
			h.add(se)
		}
	}
	h.fail(fmt.Errorf("etcd's watch closed: %v", sc.Err()))
}

func decodeSecretEvent(typ string, kv etcdKV, prefixLen int) (secretEvent, error) {
	se := secretEvent{Rev: int64(kv.ModRevision), Name: string(kv.Key[prefixLen:])}
	if typ == "DELETE" {
		se.Deleted = true
		return se, nil
	}
	se.Created = kv.CreateRevision == kv.ModRevision
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(kv.Value, nil, nil)
	if err != nil {
		return se, fmt.Errorf("decoding the Secret %s at revision %d: %w", se.Name, se.Rev, err)
	}
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return se, fmt.Errorf("etcd holds a %T under %s", obj, se.Name)
	}
	se.Secret = s
	return se, nil
}

func (h *etcdHistory) add(ev secretEvent) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

func (h *etcdHistory) fail(err error) {
	h.mu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// until waits for the event that created name (a marker the caller wrote
// last) and returns every event before it.
func (h *etcdHistory) until(ctx context.Context, name string) ([]secretEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		h.mu.Lock()
		for i, ev := range h.events {
			if ev.Name == name {
				out := append([]secretEvent(nil), h.events[:i]...)
				h.mu.Unlock()
				return out, nil
			}
		}
		err := h.err
		h.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-h.notify:
		case <-ctx.Done():
			return nil, fmt.Errorf("the marker %s never appeared in etcd's history", name)
		}
	}
}

func (h *etcdHistory) stop() { h.cancel() }
