// Package integration holds keyledger's tests on the real platform: a
// kube-apiserver, etcd and kube-controller-manager built from source and
// started through envtest, and PostgreSQL in a locally built container. Run
// them with `make test`; `go test -short ./...` skips them.
package integration
