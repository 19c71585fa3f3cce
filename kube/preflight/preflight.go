package preflight

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Expectation is what the canary check requires of the canary address.
type Expectation string

const (
	// CanaryUnreachable is the gate: the network policy must deny the canary.
	CanaryUnreachable Expectation = "unreachable"
	// CanaryReachable is the control run without a policy: the baseline that
	// shows the canary is a real, listening address.
	CanaryReachable Expectation = "reachable"
)

// Default timeouts.
const (
	DefaultAPITimeout    = 5 * time.Second
	DefaultCanaryTimeout = 3 * time.Second
	// DefaultWait bounds how long Wait keeps checking. NetworkPolicy
	// enforcers fence a new pod asynchronously (kube-router about a second
	// after the pod starts; Calico and Cilium also lag): a gate that looked
	// once would see the canary reachable in that window.
	DefaultWait = 30 * time.Second
	// DefaultInterval is the pause between two checks of Wait.
	DefaultInterval = 500 * time.Millisecond
)

// Options say what to check.
type Options struct {
	// APIServer is the API server's host:port.
	APIServer string
	// CAFile, when set, is a PEM bundle the API server's certificate must
	// chain to; ServerName (default: APIServer's host) must match it.
	CAFile     string
	ServerName string
	// Canary is the deny-canary's IP:port.
	Canary string
	// Expect is what the canary check requires (default CanaryUnreachable).
	Expect Expectation
	// APITimeout bounds the connect plus the handshake; CanaryTimeout bounds
	// the canary connect. Zero means the default.
	APITimeout    time.Duration
	CanaryTimeout time.Duration
	// Wait bounds Wait: it checks until both checks hold at once or this
	// much time has passed (then the last report, not ready, stands).
	// Interval is the pause between checks. Zero means the default.
	Wait     time.Duration
	Interval time.Duration
}

// Validate checks the options without touching the network.
func (o *Options) Validate() error {
	if o.Expect == "" {
		o.Expect = CanaryUnreachable
	}
	if o.Expect != CanaryUnreachable && o.Expect != CanaryReachable {
		return fmt.Errorf("canary expectation must be %q or %q, not %q", CanaryUnreachable, CanaryReachable, o.Expect)
	}
	if o.APITimeout == 0 {
		o.APITimeout = DefaultAPITimeout
	}
	if o.CanaryTimeout == 0 {
		o.CanaryTimeout = DefaultCanaryTimeout
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.APITimeout < 0 || o.CanaryTimeout < 0 || o.Wait < 0 || o.Interval < 0 {
		return errors.New("timeouts must be positive")
	}
	host, port, err := net.SplitHostPort(o.APIServer)
	if err != nil || host == "" || !validPort(port) {
		return fmt.Errorf("API server address %q is not host:port", o.APIServer)
	}
	ap, err := netip.ParseAddrPort(o.Canary)
	if err != nil || ap.Port() == 0 {
		return fmt.Errorf("canary address %q is not IP:port (a name is refused: failing to resolve it would pass the gate)", o.Canary)
	}
	return nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}

// Report is the result of Check, printed as one JSON line.
type Report struct {
	// Ready is true when both checks hold.
	Ready  bool         `json:"ready"`
	API    APIResult    `json:"api"`
	Canary CanaryResult `json:"canary"`
	// Checks is how many times Wait checked (1 for Check).
	Checks int `json:"checks"`
}

// APIResult describes the API server check.
type APIResult struct {
	Address string `json:"address"`
	// Connected: the TCP connection was established.
	Connected bool `json:"connected"`
	// Handshake: the TLS handshake completed.
	Handshake bool `json:"tlsHandshake"`
	// Verified: the certificate was verified against CAFile (false when no
	// CA file was given: the handshake then proves reachability only).
	Verified   bool   `json:"verified"`
	TLSVersion string `json:"tlsVersion,omitempty"`
	// Failure is a stable word for what went wrong (see the Failure* constants).
	Failure string `json:"failure,omitempty"`
	OK      bool   `json:"ok"`
}

// CanaryResult describes the canary check.
type CanaryResult struct {
	Address string      `json:"address"`
	Expect  Expectation `json:"expect"`
	// Reachable: a TCP connection to the canary was established.
	Reachable bool `json:"reachable"`
	// Failure is why the connection failed, when it did.
	Failure string `json:"failure,omitempty"`
	OK      bool   `json:"ok"`
}

// Failure words.
const (
	FailureTimeout     = "timeout"
	FailureRefused     = "refused"
	FailureUnreachable = "unreachable"
	FailureResolve     = "resolve-failed"
	FailureConnect     = "connect-failed"
	FailureNotTLS      = "not-tls"
	FailureVerify      = "tls-verify-failed"
	FailureHandshake   = "tls-handshake-failed"
)

// Check runs both checks (after Validate) and reports. It never returns an
// error for a network outcome: those are in the Report.
func Check(ctx context.Context, o Options) (Report, error) {
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	var tlsCfg *tls.Config
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return Report{}, fmt.Errorf("reading CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return Report{}, errors.New("CA file holds no PEM certificate")
		}
		name := o.ServerName
		if name == "" {
			name, _, _ = net.SplitHostPort(o.APIServer)
		}
		tlsCfg = &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	} else {
		// No CA in the init container: complete the handshake without
		// trusting the certificate. Nothing is sent after it (see doc.go).
		tlsCfg = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // reachability only, no data sent
	}
	// The canary first, then the API server: a fence that lands between
	// the two checks (NetworkPolicy implementations fence a new pod while
	// it runs) must not make a round ready that reached the API server
	// before the fence and found the canary closed after it. Fences only
	// tighten, so a canary found closed stays closed for the API check.
	canary := checkCanary(ctx, o.Canary, o.Expect, o.CanaryTimeout)
	r := Report{API: checkAPI(ctx, o.APIServer, tlsCfg, o.CAFile != "", o.APITimeout), Canary: canary}
	r.Ready = r.API.OK && r.Canary.OK
	r.Checks = 1
	return r, nil
}

// Wait checks (as Check) until both checks hold in the same round or
// o.Wait has passed since the first check started, and returns the report
// of the last round: a gate that fails closed at its deadline instead of on
// the first look. No check starts after the deadline, and a round that ends
// after it does not count as ready unless it started before it.
func Wait(ctx context.Context, o Options) (Report, error) {
	if err := o.Validate(); err != nil {
		return Report{}, err
	}
	deadline := time.Now().Add(o.Wait)
	for checks := 1; ; checks++ {
		r, err := Check(ctx, o)
		if err != nil {
			return Report{}, err
		}
		r.Checks = checks
		if r.Ready || time.Now().Add(o.Interval).After(deadline) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-time.After(o.Interval):
		}
	}
}

func checkAPI(ctx context.Context, addr string, cfg *tls.Config, verify bool, timeout time.Duration) APIResult {
	res := APIResult{Address: addr}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		res.Failure = classify(err)
		return res
	}
	defer conn.Close()
	res.Connected = true
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		res.Failure = classifyTLS(err)
		return res
	}
	state := tc.ConnectionState()
	res.Handshake, res.Verified = true, verify
	res.TLSVersion = tls.VersionName(state.Version)
	res.OK = true
	return res
}

func checkCanary(ctx context.Context, addr string, expect Expectation, timeout time.Duration) CanaryResult {
	res := CanaryResult{Address: addr, Expect: expect}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		res.Reachable = true
	} else {
		res.Failure = classify(err)
	}
	res.OK = res.Reachable == (expect == CanaryReachable)
	return res
}

// classify names a dial failure with a stable word.
func classify(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		return FailureResolve
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return FailureTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailureRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return FailureUnreachable
	default:
		return FailureConnect
	}
}

func classifyTLS(err error) string {
	var header tls.RecordHeaderError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &verify):
		return FailureVerify
	case errors.As(err, &header):
		return FailureNotTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return FailureTimeout
	default:
		return FailureHandshake
	}
}
