// Package testenv starts the real programs that end-to-end tests run
// against, as separate processes with their own data directories on free
// loopback ports, and cleans them up when the test ends.
//
// It builds and runs the strata binary itself ([BuildStrata],
// [StartBroker], [RunStrata]), finds kcat ([RequireKcat]) and runs
// ZooKeeper from Debian's zookeeper package ([StartZooKeeper]), and MinIO
// built from source by deploy/install-deps.sh minio ([StartMinIO], or one
// server per test binary with [SharedMinIO]). Each starter takes
// testing.TB, waits for readiness with a timeout, fails the test (never
// skips) when a dependency is missing, keeps the process's output in a
// file and prints its tail when the test fails.
//
// A package whose tests use this package should route its TestMain through
// [Main], so that the binary built once per test binary is removed at the
// end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv
