// Package testenv starts the real programs that end-to-end tests run
// against, as separate processes with their own data directories on free
// loopback ports, and cleans them up when the test ends.
//
// It builds and runs the strata binary itself ([BuildStrata],
// [StartBroker], [RunStrata]), finds kcat ([RequireKcat]) and runs
// ZooKeeper from Debian's zookeeper package ([StartZooKeeper]). MinIO comes
// with tiered storage, in a file of its own, following the same shape: a Start function taking
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
