package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A connection that failed without a server's answer keeps its class
// through redact, and still names no address.
func TestRedactKeepsTheConnectionClass(t *testing.T) {
	const canary = "canary-host-9d1c"
	dial := func(err error) error {
		return fmt.Errorf("failed to connect to `user=%s database=%s`: %w", canary, canary,
			&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 9), Port: 5432}, Err: err})
	}
	cases := map[string]struct {
		err   error
		class string
	}{
		"refused":     {dial(syscall.ECONNREFUSED), ConnRefused},
		"reset":       {dial(syscall.ECONNRESET), ConnReset},
		"eof":         {fmt.Errorf("read %s: %w", canary, io.ErrUnexpectedEOF), ConnReset},
		"closed":      {fmt.Errorf("conn closed"), ConnClosed},
		"dns":         {dial(&net.DNSError{Name: canary, Err: "no such host"}), ConnDNS},
		"server name": {dial(&tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: canary}}), ConnTLSServerName},
		"authority":   {dial(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), ConnTLSCertificate},
		"not tls":     {dial(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), ConnTLS},
	}
	for name, tc := range cases {
		got := redact(tc.err)
		var conn *ConnError
		if !errors.As(got, &conn) || conn.Class != tc.class {
			t.Errorf("%s: redact(%v) = %v, want class %s", name, tc.err, got, tc.class)
		}
		if strings.Contains(got.Error(), canary) || strings.Contains(got.Error(), "192.0.2.9") {
			t.Errorf("%s: %q leaks connection details", name, got)
		}
	}
	// PgBouncer without a server session: its 08P01 words, never a
	// broken protocol; another 08P01 still is one.
	for _, msg := range []string{"server login has been failing, try again later (server_login_retry)",
		`too many connections for database "` + canary + `"`, "pgbouncer cannot connect to server"} {
		var conn *ConnError
		if got := redact(&pgconn.PgError{Code: "08P01", Message: msg}); !errors.As(got, &conn) || conn.Class != ConnPoolerNoServer ||
			strings.Contains(got.Error(), canary) {
			t.Errorf("PgBouncer's %q: redact = %v, want class %s and no name", msg, got, ConnPoolerNoServer)
		}
	}
	if got := redact(&pgconn.PgError{Code: "08P01", Message: "invalid message format"}); errors.As(got, new(*ConnError)) {
		t.Errorf("a broken protocol is not the pooler's refusal: %v", got)
	}
	if got := redact(errors.New("can't scan into dest[3]")); errors.As(got, new(*ConnError)) {
		t.Errorf("a failure that is not a connection's has no class: %v", got)
	}
}
