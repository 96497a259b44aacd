package broker

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"strata/broker/config"
)

// TestDataDirLockTwoOpens: flock locks belong to the open file
// description, so two separate opens of .lock in one process conflict as
// two processes would (Linux and the BSDs). The second is refused with
// the holder's pid, and gets the lock once the first is released.
func TestDataDirLockTwoOpens(t *testing.T) {
	dir := t.TempDir()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".lock"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf(".lock holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
	_, err = lockDataDir(dir)
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second lock: %v, want DataDirInUseError", err)
	}
	want := "data directory " + dir + " is in use by another Strata process (pid " + strconv.Itoa(os.Getpid()) + "); each broker needs its own --data-dir"
	if err.Error() != want {
		t.Fatalf("second lock: %q, want %q", err, want)
	}
	if err := l.release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := l.release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.release()
	if _, err := os.Stat(filepath.Join(dir, ".lock")); err != nil {
		t.Fatalf("the lock file is gone after a release: %v", err)
	}
}

// lockHelperEnv makes the test binary a child that holds a data
// directory's lock (TestDataDirLockHelper) until killed.
const lockHelperEnv = "STRATA_TEST_LOCK_DATA_DIR"

// TestDataDirLockHelper is the child process of TestDataDirLockOtherProcess;
// it does nothing in a normal run.
func TestDataDirLockHelper(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("only the child of TestDataDirLockOtherProcess")
	}
	if _, err := lockDataDir(dir); err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestDataDirLockOtherProcess: a lock held by another process refuses
// this one with that process's pid; once it is killed (kill -9: no
// release, its pid stays in the file) the lock is free.
func TestDataDirLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDataDirLockHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	_, err = lockDataDir(dir)
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || inUse.Pid != cmd.Process.Pid || inUse.Dir != dir {
		t.Fatalf("lock held by the child (pid %d): %v", cmd.Process.Pid, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	l.release()
}

// TestDataDirLockStale: a .lock file that names a dead process and that no
// one holds does not block a start; the new holder writes its own pid.
func TestDataDirLockStale(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skipf("no process to outlive: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".lock"), []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	startTestServerDir(t, dir, nil)
	b, err := os.ReadFile(filepath.Join(dir, ".lock"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf(".lock holds %q (%v), want this pid %d", b, err, os.Getpid())
	}
}

// TestServerDataDirInUse: a second server on a data directory another
// holds is refused by New, before it opens anything; the first keeps its
// lock until Close, and a server started after that gets it.
func TestServerDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	ts := startTestServerDir(t, dir, nil)
	cfg, err := config.Load(map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr()})
	var inUse *DataDirInUseError
	if !errors.As(err, &inUse) || inUse.Pid != os.Getpid() {
		if s != nil {
			s.Close()
		}
		t.Fatalf("second server on %s: %v, want DataDirInUseError naming pid %d", dir, err, os.Getpid())
	}
	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	startTestServerDir(t, dir, nil)
}
