// Package preflight proves, before a retirement starts, that the network
// around its pod is the one the deployment intends: the Kubernetes API
// server accepts a TCP connection and completes a TLS handshake at the
// address the main container will use, and a deny-canary address does not
// accept a TCP connection at all.
//
// The check runs in an init container that has no token and no CA file, so
// by default the handshake is completed without trusting the server's
// certificate: it proves that the path to the address is open end to end and
// that a TLS server answers there, not who that server is. No application
// data is ever sent, so nothing can leak to an impostor; the main container
// verifies the server against the cluster CA before it sends its token. When
// a CA file is given, the chain and the server name are verified as well.
//
// The canary must be an IP literal: a name that fails to resolve would look
// exactly like a denied connection and let a typo pass the gate.
package preflight
