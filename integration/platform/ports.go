package platform

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

const (
	// freePortsBelow is how many ports under freePortCeiling freePort
	// picks from.
	freePortsBelow = 10000
	// nodePortRangeStart is where Kubernetes' default NodePort range
	// (30000-32767) begins. The test node's servers stay under it:
	// kube-router accepts traffic to a local address in that range from
	// any pod, whatever its NetworkPolicies say ("allow LOCAL TCP traffic
	// to node ports"), so an API server on such a port is reachable from
	// a pod whose policy has no rule for it, and the fence tests would
	// find the gate open.
	nodePortRangeStart = 30000
)

// freePort returns a loopback port that is free now, for a server this
// process starts and that binds it a moment later (the API server, etcd,
// PgBouncer). The port comes from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), never from inside it: a port the kernel
// hands out for an outgoing connection in between (any client of any test
// running beside this one) would make the server's bind fail with "address
// already in use", and the API server's start retries the same port. A
// port below the range is taken only by another listener that picked it.
// It is also below the NodePort range (nodePortRangeStart).
func freePort() (int, error) {
	ceiling, err := freePortCeiling()
	if err != nil {
		return 0, err
	}
	lo := max(ceiling-freePortsBelow, 1024)
	for range 200 {
		port := lo + rand.IntN(ceiling-lo)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: pick again
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("finding a free port: 200 ports in [%d, %d) taken", lo, ceiling)
}

// freePortCeiling is the first port freePort never picks: the start of the
// kernel's ephemeral range or of the NodePort range, whichever is lower.
func freePortCeiling() (int, error) {
	low, err := ephemeralLow()
	if err != nil {
		return 0, err
	}
	return min(low, nodePortRangeStart), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if errors.Is(err, os.ErrNotExist) {
		return 32768, nil // the Linux default
	}
	if err != nil {
		return 0, fmt.Errorf("reading the ephemeral port range: %w", err)
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, fmt.Errorf("ephemeral port range: want two numbers, got %q", strings.TrimSpace(string(b)))
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 1024+1 {
		return 0, fmt.Errorf("ephemeral port range starts at %q: too low to pick a port under it", fields[0])
	}
	return low, nil
}
