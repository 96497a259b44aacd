package testenv

import (
	"os/exec"
	"testing"
)

// RequireKcat returns the path of kcat (Debian package kcat; older
// releases named it kafkacat). A missing kcat fails the test: the tests
// that need it are part of `make test`, which installs it.
func RequireKcat(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"kcat", "kafkacat"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("kcat not found on PATH: install the Debian package kcat; `make test` installs it via deploy/install-deps.sh")
	return ""
}
