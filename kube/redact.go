package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// Reason classes of a call that got no answer: what kind of failure it was,
// in a word that names no address.
const (
	LostRefused            = "connection-refused"
	LostReset              = "connection-reset"
	LostTimeout            = "timeout"
	LostCanceled           = "canceled"
	LostTLS                = "tls"
	LostDNS                = "dns"
	LostCredentialsCleared = "credentials-cleared"
	LostOther              = "connection-failed"
)

// LostClass is the reason class of a call that got no answer.
func LostClass(err error) string {
	var dns *net.DNSError
	var certInvalid x509.CertificateInvalidError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.Is(err, ErrCredentialsCleared):
		return LostCredentialsCleared
	case errors.Is(err, context.Canceled):
		return LostCanceled
	case isTimeout(err):
		return LostTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return LostRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return LostReset
	case errors.As(err, &dns):
		return LostDNS
	case errors.As(err, &certInvalid), errors.As(err, &unknownAuthority), errors.As(err, &hostname),
		errors.As(err, &record), errors.As(err, &alert), errors.As(err, &verify):
		return LostTLS
	}
	// Some transports report a reset only in words.
	if msg := err.Error(); strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "server closed") {
		return LostReset
	}
	return LostOther
}

// isTimeout reports whether err says a deadline passed.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// noAnswerMessage describes a call that got no answer: "kubernetes get
// secrets: no answer (connection-refused)", ", timeout" when a deadline
// passed.
func noAnswerMessage(err error) string {
	op := "request"
	var ue *url.Error
	if errors.As(err, &ue) {
		op = strings.ToLower(ue.Op)
		if r := requestResource(ue.URL); r != "" {
			op += " " + r
		}
	}
	msg := "kubernetes " + op + ": no answer (" + LostClass(err) + ")"
	if isTimeout(err) {
		msg += ", timeout"
	}
	return msg
}

// resourceWord is a Kubernetes resource name (plural, lower case, maybe
// with a subresource).
var resourceWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9]{0,62}(/[a-z]{1,32})?$`) })

// requestResource reads the resource a request URL addresses (secrets,
// pods/eviction, selfsubjectaccessreviews), and nothing else of it: not the
// host, the namespace, the object's name or the query.
func requestResource(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	p, ok := parsePath(u.Path)
	if !ok {
		return ""
	}
	r := p.resource
	if p.subresource != "" {
		r += "/" + p.subresource
	}
	if !resourceWord().MatchString(r) {
		return ""
	}
	return r
}

// addressLike matches what an API server's status message may quote about
// a third party (an admission webhook's failure names its URL): URLs and
// host:port pairs.
var addressLike = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"']+|\[[0-9a-fA-F:.]+\](:\d+)?|\b(\d{1,3}\.){3}\d{1,3}(:\d+)?\b|\b[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}:\d+\b`)
})

// scrubAddresses replaces every URL and address in msg.
func scrubAddresses(msg string) string { return addressLike().ReplaceAllString(msg, "(address)") }
