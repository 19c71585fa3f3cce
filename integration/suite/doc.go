// Package suite is the shared harness of keyledger's tests on the real
// platform (package integration) and of its benchmarks (package bench):
// the platform, started once per test binary on first use (Setup,
// SetupNode, SetupESO) and stopped by Run from each package's TestMain; a
// test's environment (Env: its namespace, its journal, Env.Keyledger to run
// the binary under test); and the helpers and fixtures more than one test
// file uses, one file per subject (see integration/README.md). A helper
// only one test file uses stays in that file.
package suite
