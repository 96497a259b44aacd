// Package e2e holds process-level end-to-end tests: each test runs the real
// strata binary (built once per test binary by internal/testenv) and talks
// to it only through the network, with franz-go, kcat and raw TCP.
package e2e

import (
	"testing"

	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
