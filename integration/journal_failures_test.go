package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/kube/fault"
	"github.com/keyledger/keyledger/store"
)

// The failures a journal can give a run, each met at each stage of a
// retirement, against the real PostgreSQL: the exit code says whether
// anything durable happened (69 before the preparation is durable, 75
// after; 77 for a journal role that was never granted), the reason names
// the class, and the same command run again once the fault is gone
// settles the operation with one write. The class is raised by a trigger
// on the records table (as the schema owner) when the run appends the
// stage's record: the preparation, the call record, the answer, the
// completion (a retirement's answer and completion are one move, so the
// last two stop the same transaction at different records). Before,
// every class met while preparing exited 1 ("this is a bug").
func TestIntegrationJournalFailuresAtEachStage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	injectFaults(t, e)

	stages := []struct {
		name, kind string
		code       int
	}{
		{"preparation", "preparation", 69},
		{"call", "authority_call", 75},
		{"answer", "authority_result", 75},
		{"completion", "completion", 75},
	}
	classes := []struct{ sqlstate, reason string }{
		{"57P01", "journal-session-terminated"},
		{"57P02", "journal-server-crashed"},
		{"57P03", "journal-not-accepting"},
		{"53300", "journal-too-many-connections"},
		{"53200", "journal-out-of-memory"},
		{"55P03", "journal-lock-timeout"},
		{"40001", "journal-serialization-failure"},
		{"40P01", "journal-deadlock"},
		{"08006", "journal-connection-lost"},
		{"25P02", "journal-transaction-aborted"},
		{"57014", "journal-statement-canceled"},
		{"25P03", "journal-idle-timeout"},
		{"25006", "journal-read-only"},
		{"42501", "journal-not-granted"},
		{"XX000", "journal-server-error"},
	}
	for _, st := range stages {
		for _, c := range classes {
			name := st.name + "-" + c.sqlstate
			mutation := "mut-fail-" + strings.ToLower(name)
			s := e.CreateSecret(suite.KeyringSecret("keyring-fail-"+strings.ToLower(name), suite.StandardKeyring()))
			path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
			armFault(t, e, mutation, st.kind, c.sqlstate)

			r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
			code := st.code
			if c.sqlstate == "42501" && st.code == 69 {
				code = 77 // never granted: a permission, before anything durable
			}
			require.Equal(t, code, r.Code, "%s: %s %s", name, r.Stdout, r.Stderr)
			out := suite.Outcome(t, r)
			require.Equal(t, c.reason, out["reason"], "%s: %s", name, r.Stdout)
			require.NotContains(t, r.Stderr, "this is a bug", name)

			disarmFault(t, e, mutation)
			r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
			require.Equal(t, 0, r.Code, "%s rerun: %s %s", name, r.Stdout, r.Stderr)
			after := e.GetSecret(s.Name)
			require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "%s: one write", name)
		}
	}
}

// injectFaults installs, as the schema owner, a trigger that raises the
// SQLSTATE armed for an operation's mutation ID and a record kind when
// the run appends that record.
func injectFaults(t *testing.T, e *env) {
	t.Helper()
	_, err := suite.Connect(t, e.Journal.OwnerURL).Exec(t.Context(), `
		CREATE TABLE keyledger.test_faults (mutation_id text, kind text, sqlstate text, PRIMARY KEY (mutation_id, kind));
		CREATE FUNCTION keyledger.test_inject_fault() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
		SET search_path = pg_catalog AS $$
		DECLARE code text;
		BEGIN
			SELECT f.sqlstate INTO code FROM keyledger.test_faults f JOIN keyledger.operations o ON o.mutation_id = f.mutation_id
			WHERE o.id = NEW.operation_id AND f.kind = NEW.kind::text;
			IF code IS NOT NULL THEN
				RAISE EXCEPTION 'injected fault' USING ERRCODE = code;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_inject_fault BEFORE INSERT ON keyledger.records
			FOR EACH ROW EXECUTE FUNCTION keyledger.test_inject_fault()`)
	require.NoError(t, err)
}

func armFault(t *testing.T, e *env, mutation, kind, sqlstate string) {
	t.Helper()
	_, err := suite.Connect(t, e.Journal.OwnerURL).Exec(t.Context(),
		`INSERT INTO keyledger.test_faults VALUES ($1, $2, $3)`, mutation, kind, sqlstate)
	require.NoError(t, err)
}

func disarmFault(t *testing.T, e *env, mutation string) {
	t.Helper()
	_, err := suite.Connect(t, e.Journal.OwnerURL).Exec(t.Context(), `DELETE FROM keyledger.test_faults WHERE mutation_id = $1`, mutation)
	require.NoError(t, err)
}

// The two failures of a real session while the preparation is in flight:
// the server ends it (pg_terminate_backend, as a restart, a failover or a
// pooler recycling sessions does) and a lock wait times out (55P03). Both
// exited 1 "internal-error" before; each is now 69 with its reason, and
// the same command converges once the lock is gone, with one write.
func TestIntegrationJournalSessionEndsWhilePreparing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	db := journalDatabase(t, e)

	for _, tc := range []struct {
		name, reason string
		terminate    bool
	}{
		{"terminated", "journal-session-terminated", true},
		{"lock-timeout", "journal-lock-timeout", false},
	} {
		mutation := "mut-prep-" + tc.name
		s := e.CreateSecret(suite.KeyringSecret("keyring-prep-"+tc.name, suite.StandardKeyring()))
		path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))

		// Another session holds the operations table: the preparation's
		// insert waits for it.
		locker, err := suite.Connect(t, e.Journal.OwnerURL).Begin(ctx)
		require.NoError(t, err)
		_, err = locker.Exec(ctx, `LOCK TABLE keyledger.operations IN EXCLUSIVE MODE`)
		require.NoError(t, err)

		done := make(chan suite.Result, 1)
		opts := []suite.RunOption{e.AsRetirerOf(s), suite.WithEnv(store.EnvLockTimeout + "=2s")}
		if tc.terminate {
			opts[1] = suite.WithEnv(store.EnvLockTimeout + "=60s")
		}
		go func() { done <- e.Keyledger([]string{"run", path}, opts...) }()
		if tc.terminate {
			admin := suite.Connect(t, suite.Postgres().AdminURL())
			var terminated bool
			for deadline := time.Now().Add(time.Minute); !terminated && time.Now().Before(deadline); {
				require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity
					WHERE datname = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`, db).Scan(&terminated))
				if !terminated {
					time.Sleep(50 * time.Millisecond)
				}
			}
			require.True(t, terminated, "the run's preparation waited for the lock")
		}
		r := <-done
		require.Equal(t, 69, r.Code, "%s: %s %s", tc.name, r.Stdout, r.Stderr)
		out := suite.Outcome(t, r)
		require.Equal(t, "unavailable", out["outcome"], r.Stdout)
		require.Equal(t, tc.reason, out["reason"], r.Stdout)
		require.NoError(t, locker.Rollback(ctx))

		r = e.Keyledger([]string{"run", path}, e.AsRetirerOf(s))
		require.Equal(t, 0, r.Code, "%s rerun: %s %s", tc.name, r.Stdout, r.Stderr)
		require.Equal(t, "completed", suite.Outcome(t, r)["outcome"], r.Stdout)
		after := e.GetSecret(s.Name)
		require.Equal(t, 1, e.SecretWrites(s.Name, s.ResourceVersion, after.ResourceVersion), "one write")
	}
}

// journalDatabase is the name of e's journal database.
func journalDatabase(t *testing.T, e *env) string {
	t.Helper()
	u, err := url.Parse(e.Journal.OwnerURL)
	require.NoError(t, err)
	return strings.TrimPrefix(u.Path, "/")
}

// The first failures a new deployment meets, while connecting: each exits
// with its own reason and code, and those a rerun cannot fix name their fix
// and never say "run again". Before, a wrong password, a missing role and
// a missing database printed a bare code and "run again", and a role never
// granted exited 1 "this is a bug", from run and from journal list.
func TestIntegrationJournalConnectFailures(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	admin := suite.Connect(t, suite.Postgres().AdminURL())
	suffix := suite.RandomSuffix(t)

	// A role that exists and logs in, never granted this namespace.
	ungranted, pw := "kl_ungranted_"+suffix, suite.RandomSuffix(t)
	require.NoError(t, suite.Postgres().EnsureRole(ctx, ungranted, pw))
	ungrantedURL, err := suite.Postgres().URLFor(e.Journal.OperatorURL, ungranted, pw)
	require.NoError(t, err)
	// A role that may not log in (NOLOGIN): 28000.
	nologin := "kl_nologin_" + suffix
	require.NoError(t, suite.Postgres().EnsureRole(ctx, nologin, pw))
	_, err = admin.Exec(ctx, `ALTER ROLE `+pgx.Identifier{nologin}.Sanitize()+` NOLOGIN`)
	require.NoError(t, err)
	nologinURL, err := suite.Postgres().URLFor(e.Journal.OperatorURL, nologin, pw)
	require.NoError(t, err)
	// A role granted the namespace whose connection slots are all taken
	// (a connection limit of 0): 53300.
	limited := "kl_limited_" + suffix
	require.NoError(t, suite.Postgres().EnsureRole(ctx, limited, pw))
	_, err = admin.Exec(ctx, `ALTER ROLE `+pgx.Identifier{limited}.Sanitize()+` CONNECTION LIMIT 0`)
	require.NoError(t, err)
	limitedURL, err := suite.Postgres().URLFor(e.Journal.OperatorURL, limited, pw)
	require.NoError(t, err)

	u, err := url.Parse(e.Journal.OperatorURL)
	require.NoError(t, err)
	with := func(change func(*url.URL)) string {
		c := *u
		change(&c)
		return c.String()
	}
	wrongPassword := with(func(c *url.URL) { c.User = url.UserPassword(c.User.Username(), "not-the-password") })
	missingRole := with(func(c *url.URL) { c.User = url.UserPassword("kl_absent_"+suffix, "pw") })
	missingDatabase := with(func(c *url.URL) { c.Path = "/kl_absent_" + suffix })
	refused := with(func(c *url.URL) { c.Host = suite.ClosedPort(t) })
	notAccepting := with(func(c *url.URL) { c.Host = refusingServer(t, "57P03") })
	serverName := tlsServerNameMismatch(t, e, u)

	cases := []struct {
		name, url, reason string
		code              int
		// settles is whether a rerun alone may settle it ("run the same
		// command again" in the fix).
		settles bool
	}{
		{"wrong-password", wrongPassword, "journal-login-failed", 69, false},
		// Under password authentication the server refuses a role that
		// does not exist as it refuses a wrong password.
		{"missing-role", missingRole, "journal-login-failed", 69, false},
		{"role-nologin", nologinURL, "journal-login-rejected", 69, false},
		{"missing-database", missingDatabase, "journal-database-missing", 69, false},
		{"not-granted", ungrantedURL, "journal-not-granted", 77, false},
		{"tls-server-name", serverName, "journal-tls-server-name", 69, false},
		{"connection-refused", refused, "journal-connection-refused", 69, true},
		{"too-many-connections", limitedURL, "journal-too-many-connections", 69, true},
		{"not-accepting", notAccepting, "journal-not-accepting", 69, true},
	}
	for i, tc := range cases {
		s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("keyring-connect-%d", i), suite.StandardKeyring()))
		mutation := "mut-connect-" + tc.name
		path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
		check := func(what string, r suite.Result) {
			require.Equal(t, tc.code, r.Code, "%s %s: %s %s", tc.name, what, r.Stdout, r.Stderr)
			require.Contains(t, r.Stderr, tc.reason, "%s %s", tc.name, what)
			require.NotContains(t, r.Stderr, "this is a bug", "%s %s", tc.name, what)
			if !tc.settles {
				require.NotContains(t, r.Stderr, "run again", "%s %s: a rerun cannot fix it", tc.name, what)
				require.NotContains(t, r.Stderr, "run the same command again", "%s %s: a rerun cannot fix it", tc.name, what)
			}
			for _, leak := range []string{u.Host, u.Hostname() + ":", pw, "not-the-password", "kl_absent_", ungranted, nologin, limited} {
				require.NotContains(t, r.Stdout+r.Stderr, leak, "%s %s", tc.name, what)
			}
		}
		r := e.Keyledger([]string{"run", path}, e.AsRetirerOf(s), suite.WithDatabase(tc.url))
		check("run", r)
		require.Equal(t, tc.reason, suite.Outcome(t, r)["reason"], r.Stdout)
		require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "%s: nothing was written", tc.name)
		check("journal list", e.Keyledger([]string{"journal", "list"}, suite.WithDatabase(tc.url)))
	}
}

// refusingServer is a loopback server that answers every startup message
// with a FATAL error of the given SQLSTATE, as PostgreSQL does while it
// starts up, shuts down or recovers (57P03).
func refusingServer(t *testing.T, sqlstate string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var n uint32
				if binary.Read(c, binary.BigEndian, &n) != nil || n < 8 || n > 10000 {
					return
				}
				if _, err := io.CopyN(io.Discard, c, int64(n-4)); err != nil {
					return
				}
				var body []byte
				for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", sqlstate}, {"M", "the database system is starting up"}} {
					body = append(append(append(body, f[0]...), f[1]...), 0)
				}
				body = append(body, 0)
				msg := append([]byte{'E'}, binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))...)
				_, _ = c.Write(append(msg, body...))
			}()
		}
	}()
	return ln.Addr().String()
}

// tlsServerNameMismatch returns u (sslmode=verify-full) pointed at a
// loopback server that accepts PostgreSQL's SSLRequest and presents a
// certificate, signed by the CA in sslrootcert, for another name than the
// host connected to.
func tlsServerNameMismatch(t *testing.T, e *env, u *url.URL) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "journal test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject: pkix.Name{CommonName: "journal-rw"}, DNSNames: []string{"journal-rw.other.svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	caFile := filepath.Join(e.Dir, "journal-ca.crt")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var req [8]byte // SSLRequest: length 8, code 80877103
				if _, err := io.ReadFull(c, req[:]); err != nil {
					return
				}
				if _, err := c.Write([]byte{'S'}); err != nil {
					return
				}
				_ = tls.Server(c, cfg).Handshake() // the client gives up here
			}()
		}
	}()
	c := *u
	c.Host = ln.Addr().String()
	c.RawQuery = "sslmode=verify-full&sslrootcert=" + url.QueryEscape(caFile)
	return c.String()
}

// A failure of the API server is a dependency's too, with its own reason:
// at the permission check and at the read before any call nothing durable
// happened (69); a token the API server rejects (401) is not fixed by a
// rerun, and says so.
func TestIntegrationKubernetesFailuresClassified(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name, fault, reason string
		kubeconfig          func(s *corev1.Secret) suite.RunOption
	}{
		{"review-reset", string(fault.Reset) + ":POST:/selfsubjectaccessreviews#0", "kubernetes-connection-lost", nil},
		{"review-throttled", string(fault.Throttle) + ":POST:/selfsubjectaccessreviews#0", "kubernetes-throttled", nil},
		{"read-reset", string(fault.Reset) + ":GET:/secrets/#0", "kubernetes-connection-lost", nil},
		{"read-server-error", string(fault.ServerError) + ":GET:/secrets/#0", "kubernetes-server-error", nil},
		{"token-rejected", "", "kubernetes-unauthorized", func(*corev1.Secret) suite.RunOption { return suite.AsKubeconfig(rejectedTokenKubeconfig(e)) }},
		{"connection-refused", "", "kubernetes-connection-refused", func(*corev1.Secret) suite.RunOption {
			return suite.AsKubeconfig(kubeconfigAt(e, "https://"+suite.ClosedPort(t)))
		}},
	}
	for i, tc := range cases {
		s := e.CreateSecret(suite.KeyringSecret(fmt.Sprintf("keyring-kube-%d", i), suite.StandardKeyring()))
		mutation := "mut-kube-" + tc.name
		path := e.WriteCommand(mutation+".json", suite.RetireCommand(s, "k-2026-07", mutation))
		opts := []suite.RunOption{e.AsRetirerOf(s)}
		if tc.kubeconfig != nil {
			opts = []suite.RunOption{tc.kubeconfig(s)}
		}
		if tc.fault != "" {
			opts = append(opts, suite.WithEnv(fault.Env+"="+tc.fault))
		}
		r := e.Keyledger([]string{"run", path}, opts...)
		require.Equal(t, 69, r.Code, "%s: %s %s", tc.name, r.Stdout, r.Stderr)
		require.Equal(t, tc.reason, suite.Outcome(t, r)["reason"], "%s: %s", tc.name, r.Stdout)
		if tc.reason == "kubernetes-unauthorized" {
			require.NotContains(t, r.Stderr, "run the same command again", tc.name)
		}
		require.Equal(t, s.ResourceVersion, e.GetSecret(s.Name).ResourceVersion, "%s: nothing was written", tc.name)
	}
}

// rejectedTokenKubeconfig is a kubeconfig for the test's API server whose
// token the server does not know (401).
func rejectedTokenKubeconfig(e *env) string {
	e.T.Helper()
	cfg, err := e.Kube.ServiceAccountConfig(e.T.Context(), e.NS, "default", 600)
	require.NoError(e.T, err)
	cfg.BearerToken = "not-a-token-" + suite.RandomSuffix(e.T)
	path, err := e.Kube.KubeconfigForConfig(cfg, e.T.TempDir())
	require.NoError(e.T, err)
	return path
}

// kubeconfigAt is the admin kubeconfig pointed at another server address.
func kubeconfigAt(e *env, server string) string {
	e.T.Helper()
	cfg, err := e.Kube.ServiceAccountConfig(e.T.Context(), e.NS, "default", 600)
	require.NoError(e.T, err)
	cfg.Host = server
	path, err := e.Kube.KubeconfigForConfig(cfg, e.T.TempDir())
	require.NoError(e.T, err)
	return path
}
