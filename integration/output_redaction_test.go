package integration

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyledger/keyledger/integration/suite"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/retire"
)

// Canary words planted in file paths and connection details: none may
// appear in any output or journal row.
const (
	pathCanary = "PATHCANARY7f3a"
	hostCanary = "hostcanary7f3a"
	userCanary = "usercanary7f3a"
	dbCanary   = "dbcanary7f3a"
)

// canaryHost is a database host name holding hostCanary that never
// resolves and is never sent to a resolver: its first label is longer than
// the 63 characters a DNS label may have, so Go's resolver refuses it
// locally (nothing leaves the machine).
var canaryHost = hostCanary + "-" + strings.Repeat("x", 64) + ".invalid"

// withCanaryHost puts canaryHost first in a database URL's host list; pgx
// tries it, fails to resolve it and goes on to the real host.
func withCanaryHost(t *testing.T, dbURL, realHost string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	if realHost == "" {
		realHost = u.Host
	}
	return "postgres://" + u.User.String() + "@" + canaryHost + ":5432," + realHost + u.Path + "?" + u.RawQuery
}

// cuttingProxy stands between keyledger and PostgreSQL: it forwards the
// first connection until the client sends its cutAt-th request (a simple
// query, or the Sync that ends an extended-protocol request: one statement,
// or a pipelined batch of them), then closes that connection and refuses
// every later one. The database is
// there when the run connects and gone when it next needs it.
func cuttingProxy(t *testing.T, target string, cutAt int) string {
	t.Helper()
	return interceptingProxy(t, target, cutAt, false)
}

// stallingProxy is cuttingProxy that, at the client's stallAt-th request,
// keeps the connection open and forwards nothing more either way (a
// journal that stops answering, a pooler whose server sessions are all
// taken) until the test ends.
func stallingProxy(t *testing.T, target string, stallAt int) string {
	t.Helper()
	return interceptingProxy(t, target, stallAt, true)
}

// interceptingProxy is cuttingProxy, or with stall stallingProxy.
func interceptingProxy(t *testing.T, target string, cutAt int, stall bool) string {
	t.Helper()
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var once sync.Once
	stop := func() { once.Do(func() { ln.Close() }) }
	t.Cleanup(stop)
	go func() {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		defer client.Close()
		server, err := net.Dial("tcp", target)
		if err != nil {
			stop()
			return
		}
		defer server.Close()
		go func() { _, _ = io.Copy(client, server) }()
		// The startup message: an int32 length (itself included) and a body.
		var n [4]byte
		if _, err := io.ReadFull(client, n[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(n[:])-4)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		_, _ = server.Write(append(n[:], body...))
		queries := 0
		for {
			var head [5]byte // type byte and int32 length
			if _, err := io.ReadFull(client, head[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
			if _, err := io.ReadFull(client, body); err != nil {
				return
			}
			if head[0] == 'Q' || head[0] == 'S' {
				queries++
				if queries == cutAt {
					stop()
					if stall {
						<-ended
					}
					return
				}
			}
			if _, err := server.Write(append(head[:], body...)); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// Neither a file path given on the command line or in the environment nor
// a connection's host, user or database name reaches stdout, stderr or the
// journal: not on success, not when the kubeconfig is missing, not when the
// database is unreachable, not when it goes away in the middle of a run.
func TestIntegrationNoPathsNoConnectionDetails(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.CreateSecret(suite.KeyringSecret("canary-paths", suite.StandardKeyring()))
	dir := filepath.Join(t.TempDir(), "dir-"+pathCanary)
	require.NoError(t, os.Mkdir(dir, 0o700))
	kubeconfig := filepath.Join(dir, "kubeconfig-"+pathCanary)
	raw, err := os.ReadFile(e.ServiceAccountKubeconfig("canary-paths", retire.Rules(s.Name)))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(kubeconfig, raw, 0o600))
	command := func(mutation string) string {
		b, err := json.Marshal(suite.RetireCommand(s, "k-2026-07", mutation))
		require.NoError(t, err)
		p := filepath.Join(dir, mutation+"-"+pathCanary+".json")
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	dbURL := withCanaryHost(t, e.Journal.OperatorURL, "")
	u, err := url.Parse(e.Journal.OperatorURL)
	require.NoError(t, err)

	var outputs strings.Builder
	run := func(name string, wantCode int, args []string, opts ...suite.RunOption) suite.Result {
		t.Helper()
		r := e.Keyledger(args, append([]suite.RunOption{suite.WithEnv("KEYLEDGER_LOG_LEVEL=debug")}, opts...)...)
		require.Equal(t, wantCode, r.Code, "%s: %s %s", name, r.Stdout, r.Stderr)
		if args[0] == "run" {
			require.NotEmpty(t, r.Stdout, "%s: a run always prints its outcome line", name)
		}
		outputs.WriteString(name + ": " + r.Stdout + r.Stderr + "\n")
		return r
	}

	// Success: the kubeconfig by flag, then by $KUBECONFIG (a replay).
	ok := command("mut-paths-ok")
	run("success", 0, []string{"run", "--kubeconfig", kubeconfig, ok}, suite.WithDatabase(dbURL))
	run("replay", 0, []string{"run", ok}, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(dbURL))
	run("journal-show", 0, []string{"journal", "show", "mut-paths-ok", "-o", "json"}, suite.WithDatabase(dbURL))
	run("journal-list", 0, []string{"journal", "list"}, suite.WithDatabase(dbURL))

	// A missing kubeconfig, by flag and by $KUBECONFIG: a usage error (64).
	absent := filepath.Join(dir, "absent-"+pathCanary)
	run("missing-kubeconfig-flag", 64, []string{"run", "--kubeconfig", absent, command("mut-paths-nokube")}, suite.WithDatabase(dbURL))
	run("missing-kubeconfig-env", 64, []string{"run", command("mut-paths-nokube-env")}, suite.AsKubeconfig(absent), suite.WithDatabase(dbURL))

	// An unreachable database: only the canary host, with canary user and
	// database names.
	unreachable := "postgres://" + userCanary + ":pw@" + canaryHost + ":5432/" + dbCanary + "?sslmode=disable"
	run("unreachable-run", 69, []string{"run", command("mut-paths-nodb")}, suite.AsKubeconfig(kubeconfig), suite.WithDatabase(unreachable))
	run("unreachable-journal", 69, []string{"journal", "list"}, suite.WithDatabase(unreachable))

	// The database goes away mid-run: the first connection is cut at its
	// first request (the session's start: its timeouts and the check that
	// it is fresh), its second (the preparation's BEGIN and operation
	// insert), its third (the preparation's records and COMMIT) or its
	// fourth (the first move's BEGIN and update), and no new connection is
	// accepted: pgx's reconnect fails. Before anything is sent it is a
	// dependency failure (69); after the preparation, an interrupted run
	// (75) that a rerun settles.
	for cutAt, code := range map[int]int{1: 69, 2: 69, 3: 69, 4: 75} {
		proxy := cuttingProxy(t, u.Host, cutAt)
		run(fmt.Sprintf("reconnect-failure-%d", cutAt), code, []string{"run", command(fmt.Sprintf("mut-paths-cut-%d", cutAt))},
			suite.AsKubeconfig(kubeconfig), suite.WithDatabase(withCanaryHost(t, e.Journal.OperatorURL, proxy)))
	}

	// The journal stops answering at the same four points (the connection
	// stays open, nothing comes back): the run does not wait for TCP to give
	// up, it ends once a read has had no byte for the statement timeout
	// (1s here) and 3s more, with the same exit codes, saying so. Before
	// the bound, a run waited here until something killed it.
	for stallAt, code := range map[int]int{1: 69, 2: 69, 3: 69, 4: 75} {
		proxy := stallingProxy(t, u.Host, stallAt)
		name := fmt.Sprintf("journal-silent-%d", stallAt)
		r := run(name, code, []string{"run", command(fmt.Sprintf("mut-paths-stall-%d", stallAt))},
			suite.AsKubeconfig(kubeconfig), suite.WithDatabase(withCanaryHost(t, e.Journal.OperatorURL, proxy)),
			suite.WithEnv(store.EnvStatementTimeout+"=1s"))
		require.Contains(t, r.Stdout+r.Stderr, "the journal stopped answering: no answer for 4s", name)
	}

	conn := suite.Connect(t, e.Journal.OwnerURL)
	var dump string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		(SELECT coalesce(string_agg(row_to_json(o)::text, E'\n'), '') FROM keyledger.operations o) || E'\n' ||
		(SELECT coalesce(string_agg(row_to_json(r)::text, E'\n'), '') FROM keyledger.records r)`).Scan(&dump))
	require.Contains(t, dump, "mut-paths-ok", "the journal was read")
	all := outputs.String() + dump
	require.Contains(t, all, `"outcome":"completed"`, "the outputs were captured")
	for _, canary := range []string{pathCanary, strings.ToLower(pathCanary), hostCanary, userCanary, dbCanary, dir, u.Host, u.User.Username()} {
		require.NotContains(t, all, canary, "outputs and journal:\n%s", all)
	}
}
