package cause_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/keyledger/keyledger/cause"
	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
)

func pg(code string) error {
	return fmt.Errorf("preparing operation: %w", &pgconn.PgError{Code: code, Severity: "FATAL"})
}

func lost(err error) error {
	return kube.Wrap(&url.Error{Op: "Get", URL: "https://192.0.2.1:6443/api/v1/namespaces/ns/secrets/s", Err: err})
}

// Every class a run can meet has its own reason; a failure of keyledger's
// own has none (exit 1).
func TestOf(t *testing.T) {
	t.Parallel()
	secrets := schema.GroupResource{Resource: "secrets"}
	cases := []struct {
		name   string
		err    error
		reason string // "" when it is not a dependency's failure
	}{
		{"57P01 terminated", pg("57P01"), "journal-session-terminated"},
		{"57P02 crash", pg("57P02"), "journal-server-crashed"},
		{"57P03 starting", pg("57P03"), "journal-not-accepting"},
		{"53300 too many connections", pg("53300"), "journal-too-many-connections"},
		{"53200 out of memory or lock table", pg("53200"), "journal-out-of-memory"},
		{"53100 disk full", pg("53100"), "journal-insufficient-resources"},
		{"55P03 lock timeout", pg("55P03"), "journal-lock-timeout"},
		{"40001 serialization", pg("40001"), "journal-serialization-failure"},
		{"40P01 deadlock", pg("40P01"), "journal-deadlock"},
		{"08006 connection failure", pg("08006"), "journal-connection-lost"},
		{"08P01 protocol", pg("08P01"), "journal-protocol-violation"},
		{"25P02 aborted", pg("25P02"), "journal-transaction-aborted"},
		{"57014 statement timeout", pg("57014"), "journal-statement-canceled"},
		{"25P03 idle in transaction", pg("25P03"), "journal-idle-timeout"},
		{"25006 read only", pg("25006"), "journal-read-only"},
		{"28P01 password", &store.UnreachableError{Err: &pgconn.PgError{Code: "28P01"}}, "journal-login-failed"},
		{"28000 role", &store.UnreachableError{Err: &pgconn.PgError{Code: "28000"}}, "journal-login-rejected"},
		{"3D000 database", &store.UnreachableError{Err: &pgconn.PgError{Code: "3D000"}}, "journal-database-missing"},
		{"42501 not granted", pg("42501"), "journal-not-granted"},
		{"3F000 schema", pg("3F000"), "journal-schema-missing"},
		{"XX000 server internal", pg("XX000"), "journal-server-error"},
		{"refused", &store.UnreachableError{Err: &store.ConnError{Class: store.ConnRefused}}, "journal-connection-refused"},
		{"reset", fmt.Errorf("moving: %w", &store.ConnError{Class: store.ConnReset}), "journal-connection-lost"},
		{"closed", &store.ConnError{Class: store.ConnClosed}, "journal-connection-lost"},
		{"tls server name", &store.UnreachableError{Err: &store.ConnError{Class: store.ConnTLSServerName}}, "journal-tls-server-name"},
		{"tls certificate", &store.UnreachableError{Err: &store.ConnError{Class: store.ConnTLSCertificate}}, "journal-tls-certificate"},
		{"pooler without a server session", &store.UnreachableError{Err: &store.ConnError{Class: store.ConnPoolerNoServer}}, "journal-pooler-no-server"},
		{"connect timeout", &store.UnreachableError{Err: fmt.Errorf("connecting: %w", context.DeadlineExceeded)}, "journal-timeout"},
		{"silent", fmt.Errorf("x: %w", store.ErrJournalSilent), "journal-silent"},
		{"not fresh", store.ErrSessionNotFresh, "journal-session-not-fresh"},
		{"unreadable record", fmt.Errorf("reading: %w", &store.RecordError{ID: 7, Field: "target", Err: errors.New("not <kind>/<name>")}), "journal-record-unreadable"},
		{"unreachable", &store.UnreachableError{Err: errors.New("connection failed")}, "journal-unreachable"},
		{"kube refused", lost(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), "kubernetes-connection-refused"},
		{"kube reset", lost(syscall.ECONNRESET), "kubernetes-connection-lost"},
		{"kube timeout", lost(context.DeadlineExceeded), "kubernetes-timeout"},
		{"kube tls", lost(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "h"}), "kubernetes-tls"},
		{"kube 401", kube.Wrap(apierrors.NewUnauthorized("token expired")), "kubernetes-unauthorized"},
		{"kube 403", fmt.Errorf("reading: %w", kube.Wrap(apierrors.NewForbidden(secrets, "s", errors.New("no")))), "kubernetes-forbidden"},
		{"kube 429", kube.Wrap(apierrors.NewTooManyRequests("slow down", 1)), "kubernetes-throttled"},
		{"kube 500", kube.Wrap(apierrors.NewInternalError(errors.New("etcd"))), "kubernetes-server-error"},
		{"kube 503", kube.Wrap(apierrors.NewServiceUnavailable("down")), "kubernetes-server-error"},
		// keyledger's own: exit 1.
		{"bug", errors.New("family decided nothing"), ""},
		{"constraint", pg("23505"), ""},
		{"trigger", pg("P0001"), ""},
		{"kube canceled", lost(context.Canceled), ""},
		{"kube credentials cleared", lost(kube.ErrCredentialsCleared), ""},
		{"kube 409", kube.Wrap(apierrors.NewConflict(secrets, "s", errors.New("x"))), ""},
		{"nil", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := cause.Of(tc.err)
			if tc.reason == "" {
				require.False(t, ok, "%v is keyledger's own failure, not %q", tc.err, c.Reason)
				return
			}
			require.True(t, ok, "%v has no cause", tc.err)
			require.Equal(t, tc.reason, c.Reason)
		})
	}
}

// Each reason is a stable kebab-case word given once, with a fix; a
// failure a rerun cannot fix never tells the user to run again, and the
// permission failures are the two the README's table gives 77.
func TestAll(t *testing.T) {
	t.Parallel()
	word := regexp.MustCompile(`^(journal|kubernetes)(-[a-z0-9]+)+$`)
	seen := map[string]bool{}
	var permission []string
	for _, c := range cause.All() {
		require.Regexp(t, word, c.Reason)
		require.False(t, seen[c.Reason], "%s given twice", c.Reason)
		seen[c.Reason] = true
		require.NotEmpty(t, c.Fix, c.Reason)
		require.Contains(t, []string{cause.PostgreSQL, cause.Kubernetes}, c.Dependency, c.Reason)
		if c.Settles {
			require.Contains(t, c.Fix, "run the same command again", c.Reason)
		} else {
			require.NotContains(t, strings.ToLower(c.Fix), "run again", c.Reason)
			require.NotContains(t, c.Fix, "run the same command again", c.Reason)
		}
		if c.Permission {
			permission = append(permission, c.Reason)
		}
	}
	require.ElementsMatch(t, []string{"journal-not-granted", "kubernetes-forbidden"}, permission)
	for _, permanent := range []string{"journal-login-failed", "journal-login-rejected", "journal-database-missing",
		"journal-not-granted", "journal-tls-server-name", "kubernetes-unauthorized", "kubernetes-forbidden"} {
		require.True(t, seen[permanent], permanent)
		for _, c := range cause.All() {
			if c.Reason == permanent {
				require.False(t, c.Settles, "%s: a rerun alone can never fix it", permanent)
			}
		}
	}
}

// docs/failures.md lists every reason with its exit codes and its fix, as
// the table gives them.
func TestFailuresDocListsEveryReason(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/failures.md")
	require.NoError(t, err)
	doc := string(b)
	for _, c := range cause.All() {
		before := "69"
		if c.Permission {
			before = "77"
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(c.Reason) + "` \\| [^|]* \\| " + before + " \\| 75 \\| [^|]* \\| (.*) \\|$")
		m := row.FindStringSubmatch(doc)
		require.NotNil(t, m, "docs/failures.md has no row for %s with exit %s", c.Reason, before)
		require.Equal(t, c.Fix, m[1], c.Reason)
	}
}
