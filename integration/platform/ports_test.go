package platform

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// freePort never returns a port of the ephemeral range (where an outgoing
// connection may take it before the server binds), and the port is free.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low, err := ephemeralLow()
	require.NoError(t, err)
	for range 50 {
		port, err := freePort()
		require.NoError(t, err)
		require.Less(t, port, low, "in the ephemeral range")
		require.GreaterOrEqual(t, port, max(low-freePortsBelow, 1024))
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, err, "the port is free")
		require.NoError(t, l.Close())
	}
}
