// Package testenv starts the real programs that end-to-end tests run
// against, as separate processes with their own data directories on free
// loopback ports, and cleans them up when the test ends.
//
// Today it builds and runs the strata binary itself ([BuildStrata],
// [StartBroker], [RunStrata]) and finds kcat ([RequireKcat]). Later issues
// add starters for ZooKeeper (Debian's zookeeper package) and MinIO here, in
// files of their own, following the same shape: a Start function taking
// testing.TB and an options struct, waiting for readiness with a timeout,
// failing the test (never skipping) when a dependency is missing, keeping
// the process's output in a file under t.TempDir() and printing its tail
// when the test fails.
//
// A package whose tests use this package should route its TestMain through
// [Main], so that the binary built once per test binary is removed at the
// end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv
