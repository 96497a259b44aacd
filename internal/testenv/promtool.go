package testenv

import (
	"os/exec"
	"testing"
)

// RequirePromtool returns the path of promtool (Debian package
// prometheus). A missing promtool fails the test: the tests that need it
// are part of `make test`, which installs it.
func RequirePromtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on PATH: install the Debian package prometheus; `make test` installs it via deploy/install-deps.sh")
	}
	return p
}
