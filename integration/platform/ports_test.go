package platform

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// freePort never returns a port of the ephemeral range (where an outgoing
// connection may take it before the server binds) or of the NodePort range
// (where kube-router lets every pod reach a node-local server, past its
// NetworkPolicies), and the port is free.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low, err := ephemeralLow()
	require.NoError(t, err)
	ceiling, err := freePortCeiling()
	require.NoError(t, err)
	for range 50 {
		port, err := freePort()
		require.NoError(t, err)
		require.Less(t, port, low, "in the ephemeral range")
		require.Less(t, port, 30000, "in the NodePort range (30000-32767)")
		require.GreaterOrEqual(t, port, max(ceiling-freePortsBelow, 1024))
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, err, "the port is free")
		require.NoError(t, l.Close())
	}
}
