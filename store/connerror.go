package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// The classes of a journal connection that failed without an answer from
// the server: what kind of failure it was, in a word that names no
// address, user or database.
const (
	ConnRefused        = "connection-refused"
	ConnReset          = "connection-reset"
	ConnTimeout        = "timeout"
	ConnDNS            = "dns"
	ConnTLSServerName  = "tls-server-name"
	ConnTLSCertificate = "tls-certificate"
	ConnTLS            = "tls"
	ConnClosed         = "connection-closed"
	// ConnPoolerNoServer is a session pooler (PgBouncer) that could not
	// open a server session for the client: it relays the server's refusal
	// (too many connections) or its own cached login failure, both as
	// SQLSTATE 08P01, which is otherwise a broken wire protocol.
	ConnPoolerNoServer = "pooler-no-server"
)

// poolerNoServer says whether a 08P01 error's message is PgBouncer's
// "no server session for you": the words it sends (pgbouncer 1.x) when a
// server login failed or is failing.
func poolerNoServer(code, message string) bool {
	if code != "08P01" {
		return false
	}
	for _, words := range []string{"server login has been failing", "cannot connect to server",
		"too many connections", "too many clients", "no more connections allowed"} {
		if strings.Contains(message, words) {
			return true
		}
	}
	return false
}

// ConnError is a journal connection that failed without an answer from
// the server, redacted to its class (ConnRefused, ...). The message never
// carries the address, user or database the driver's message named.
type ConnError struct{ Class string }

func (e *ConnError) Error() string { return "connection failed (" + e.Class + ")" }

// connFailure redacts a connection failure that is neither a server error
// nor a context that ended: a *ConnError when its class is known, else
// "connection failed" and nothing more.
func connFailure(err error) error {
	if class := connClass(err); class != "" {
		return &ConnError{Class: class}
	}
	return errors.New("connection failed")
}

// connClass reads what kind of connection failure err is ("" when it is
// none keyledger knows).
func connClass(err error) string {
	var (
		dns              *net.DNSError
		hostname         x509.HostnameError
		unknownAuthority x509.UnknownAuthorityError
		certInvalid      x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
		record           tls.RecordHeaderError
		alert            tls.AlertError
		netErr           net.Error
	)
	switch {
	case errors.As(err, &hostname):
		return ConnTLSServerName
	case errors.As(err, &unknownAuthority), errors.As(err, &certInvalid), errors.As(err, &verify):
		return ConnTLSCertificate
	case errors.As(err, &record), errors.As(err, &alert):
		return ConnTLS
	case errors.As(err, &dns):
		return ConnDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ConnReset
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ConnTimeout
	}
	// pgx says a connection it already lost, or one the server closed,
	// only in words.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "conn closed"), strings.Contains(msg, "connection reset"),
		strings.Contains(msg, "server closed the connection"), strings.Contains(msg, "broken pipe"):
		return ConnClosed
	case strings.Contains(msg, "EOF"):
		return ConnReset
	}
	return ""
}
