package credentials

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/keyledger/keyledger/store"
)

// ProbeStatus is what a server answered to a credential probe: the
// status of its probe record.
type ProbeStatus = store.Status

const (
	// ProbeAccepted: the server accepted the password (Valkey +OK, NATS PONG).
	ProbeAccepted ProbeStatus = "accepted"
	// ProbeRefused: the server refused the password (Valkey WRONGPASS or
	// invalid password, NATS Authorization Violation).
	ProbeRefused ProbeStatus = "refused"
	// ProbeUnknown: anything else (timeout, connection refused, another
	// answer). An unknown answer never restarts a pod.
	ProbeUnknown ProbeStatus = "unknown"
)

// ProbeResult is a probe's status and a stable kebab-case reason. It never
// holds the password or the server's words.
type ProbeResult struct {
	Status ProbeStatus
	Reason store.Reason
}

// unreachable says the probe never reached the server's answer: the
// connection was refused, timed out or broke. Such a probe may be sent
// again (reprobeBound); any answer the server gave is final.
func (r ProbeResult) unreachable() bool {
	if r.Status != ProbeUnknown {
		return false
	}
	switch r.Reason {
	case "connection-refused", "timeout", "connection-reset", "io-error":
		return true
	}
	return false
}

// probeTimeout bounds one probe (dial, write and read).
const probeTimeout = 3 * time.Second

// Probe dials addr and checks the credentials with protocol's handshake.
func Probe(ctx context.Context, protocol, addr string, user, password []byte) ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return unknown(err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	switch protocol {
	case ProtocolValkey:
		return probeValkey(conn, user, password)
	case ProtocolNATS:
		return probeNATS(conn, user, password)
	}
	return ProbeResult{Status: ProbeUnknown, Reason: "unknown-protocol"}
}

// Replies are bounded: a Valkey reply line, a NATS protocol line and all
// NATS lines of one probe. A longer reply is unknown (reply-too-large).
const (
	maxValkeyReply = 512
	maxNATSLine    = 16 << 10
	maxNATSReplies = 64 << 10
)

var errReplyTooLarge = errors.New("reply too large")

// readLine reads one line of at most the reader's buffer size.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", errReplyTooLarge
	case err != nil:
		return "", err
	}
	return string(line), nil
}

func unknown(err error) ProbeResult {
	var ne net.Error
	switch {
	case errors.Is(err, errReplyTooLarge):
		return ProbeResult{Status: ProbeUnknown, Reason: "reply-too-large"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return ProbeResult{Status: ProbeUnknown, Reason: "connection-refused"}
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ProbeResult{Status: ProbeUnknown, Reason: "timeout"}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed):
		return ProbeResult{Status: ProbeUnknown, Reason: "connection-reset"}
	default:
		return ProbeResult{Status: ProbeUnknown, Reason: "io-error"}
	}
}

// probeValkey sends AUTH [user] password as a RESP array and reads one reply.
func probeValkey(conn net.Conn, user, password []byte) ProbeResult {
	args := [][]byte{[]byte("AUTH")}
	if len(user) > 0 {
		args = append(args, user)
	}
	args = append(args, password)
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	_, err := conn.Write(b)
	clear(b)
	if err != nil {
		return unknown(err)
	}
	line, err := readLine(bufio.NewReaderSize(io.LimitReader(conn, maxValkeyReply), maxValkeyReply))
	if err != nil {
		return unknown(err)
	}
	return classifyValkey(strings.TrimRight(line, "\r\n"))
}

// classifyValkey reads one RESP reply line to AUTH.
func classifyValkey(reply string) ProbeResult {
	upper := strings.ToUpper(reply)
	switch {
	case reply == "+OK":
		return ProbeResult{Status: ProbeAccepted, Reason: "ok"}
	case strings.HasPrefix(upper, "-WRONGPASS"):
		return ProbeResult{Status: ProbeRefused, Reason: "wrongpass"}
	case strings.HasPrefix(upper, "-ERR INVALID PASSWORD"), strings.HasPrefix(upper, "-INVALIDPASSWORD"):
		return ProbeResult{Status: ProbeRefused, Reason: "invalid-password"}
	default:
		return ProbeResult{Status: ProbeUnknown, Reason: "unexpected-reply"}
	}
}

// probeNATS reads the server's INFO, sends CONNECT with user and password
// and PING, and reads until PONG or an error.
func probeNATS(conn net.Conn, user, password []byte) ProbeResult {
	r := bufio.NewReaderSize(io.LimitReader(conn, maxNATSReplies), maxNATSLine)
	line, err := readLine(r)
	if err != nil {
		return unknown(err)
	}
	infoJSON, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "INFO ")
	if !ok {
		return ProbeResult{Status: ProbeUnknown, Reason: "no-info"}
	}
	var info struct {
		TLSRequired bool `json:"tls_required"`
	}
	if json.Unmarshal([]byte(infoJSON), &info) != nil {
		return ProbeResult{Status: ProbeUnknown, Reason: "bad-info"}
	}
	if info.TLSRequired {
		return ProbeResult{Status: ProbeUnknown, Reason: "tls-required"}
	}
	connect, err := json.Marshal(map[string]any{
		"verbose": false, "pedantic": false, "tls_required": false, "name": "keyledger-probe",
		"lang": "go", "version": "keyledger", "protocol": 1, "user": string(user), "pass": string(password),
	})
	if err != nil {
		return ProbeResult{Status: ProbeUnknown, Reason: "encode-error"}
	}
	msg := append(append([]byte("CONNECT "), connect...), "\r\nPING\r\n"...)
	_, err = conn.Write(msg)
	clear(msg)
	clear(connect)
	if err != nil {
		return unknown(err)
	}
	for range 8 {
		line, err := readLine(r)
		if err != nil {
			return unknown(err)
		}
		if res, done := classifyNATS(strings.TrimRight(line, "\r\n")); done {
			return res
		}
	}
	return ProbeResult{Status: ProbeUnknown, Reason: "unexpected-reply"}
}

// classifyNATS reads one protocol line after CONNECT+PING; done is false for
// lines that say nothing about the credentials (+OK, INFO, PING).
func classifyNATS(line string) (ProbeResult, bool) {
	upper := strings.ToUpper(line)
	switch {
	case upper == "PONG":
		return ProbeResult{Status: ProbeAccepted, Reason: "pong"}, true
	case strings.HasPrefix(upper, "-ERR") && strings.Contains(upper, "AUTHORIZATION VIOLATION"):
		return ProbeResult{Status: ProbeRefused, Reason: "authorization-violation"}, true
	case upper == "+OK", strings.HasPrefix(upper, "INFO "), upper == "PING":
		return ProbeResult{}, false
	default:
		return ProbeResult{Status: ProbeUnknown, Reason: "unexpected-reply"}, true
	}
}

// podAddress is host:port for the pod IP.
func podAddress(ip string, port int) string {
	return net.JoinHostPort(ip, fmt.Sprint(port))
}
