package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// buildDirPrefix names the temporary directories the binary is built in;
// the owning process id follows it so that directories left by a test
// binary that died are recognised and removed by the next one.
const buildDirPrefix = "strata-testenv-"

var build struct {
	once sync.Once
	dir  string // directory holding the binary; removed by Main
	bin  string
	err  error
}

// Main runs the tests of a package and then removes what this package built
// for them and stops the shared MinIO ([SharedMinIO]). Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	stopSharedMinIO()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// BuildStrata builds ./cmd/strata once per test binary and returns the path
// of the binary. A build failure fails every test that asks for it, with
// the compiler's output.
func BuildStrata(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.bin, build.err = buildStrata() })
	if build.err != nil {
		t.Fatalf("build strata: %v", build.err)
	}
	return build.bin
}

func buildStrata() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	removeStaleBuildDirs()
	dir, err := os.MkdirTemp("", buildDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", fmt.Errorf("make build dir: %w", err)
	}
	build.dir = dir
	goBin, err := exec.LookPath("go")
	if err != nil {
		// Tests run by `go test` see GOROOT; prefer its go over failing.
		if gr := os.Getenv("GOROOT"); gr != "" {
			goBin = filepath.Join(gr, "bin", "go")
		} else {
			return "", fmt.Errorf("find the go command: %w", err)
		}
	}
	bin := filepath.Join(dir, "strata")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/strata")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/strata in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// removeStaleBuildDirs removes build directories whose owning test binary
// is no longer running (it was killed before Main could clean up).
func removeStaleBuildDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), buildDirPrefix+"*"))
	for _, m := range matches {
		rest := strings.TrimPrefix(filepath.Base(m), buildDirPrefix)
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(m)
		}
	}
}

// ModuleRoot returns the directory holding the go.mod of the strata module,
// found by walking up from the working directory (a package directory when
// run by `go test`).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}
