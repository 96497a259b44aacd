package testenv

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestMain(m *testing.M) { Main(m) }

func TestMinIOStartRestart(t *testing.T) {
	m := StartMinIO(t)
	c := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	body := []byte("hello, bucket")
	if _, err := c.PutObject(ctx, m.Bucket(), "a/b", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() []byte {
		t.Helper()
		o, err := c.GetObject(ctx, m.Bucket(), "a/b", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		if err != nil {
			t.Fatalf("read a/b: %v", err)
		}
		return b
	}
	addr := m.Addr()
	m.Stop(t)
	if _, err := c.BucketExists(ctx, m.Bucket()); err == nil {
		t.Fatal("minio answers after Stop")
	}
	m.Start(t)
	if got := get(); !bytes.Equal(got, body) {
		t.Fatalf("after restart: %q", got)
	}
	m.Kill9(t)
	m.Start(t)
	if m.Addr() != addr {
		t.Fatalf("address changed across restarts: %s -> %s", addr, m.Addr())
	}
	if got := get(); !bytes.Equal(got, body) {
		t.Fatalf("after kill -9 and restart: %q", got)
	}
	b := m.NewBucket(t)
	if ok, err := c.BucketExists(ctx, b); err != nil || !ok {
		t.Fatalf("NewBucket %s: exists %v, %v", b, ok, err)
	}
	if b2 := m.NewBucket(t); b2 == b {
		t.Fatalf("NewBucket gave %s twice", b)
	}
	env := strings.Join(m.Env(), " ")
	if !strings.Contains(env, "AWS_ACCESS_KEY_ID="+m.AccessKey()) || !strings.Contains(env, "AWS_SECRET_ACCESS_KEY="+m.SecretKey()) {
		t.Fatalf("Env = %s", env)
	}
}

func TestSharedMinIOIsShared(t *testing.T) {
	a, b := SharedMinIO(t), SharedMinIO(t)
	if a != b {
		t.Fatal("SharedMinIO started two servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := a.Client(t).BucketExists(ctx, a.Bucket()); err != nil || !ok {
		t.Fatalf("bucket %s: %v, %v", a.Bucket(), ok, err)
	}
}

// recordingTB records how a starter gives up, standing in for a test.
type recordingTB struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped bool
	dir     string
}

func (r *recordingTB) Helper()             {}
func (r *recordingTB) TempDir() string     { return r.dir }
func (r *recordingTB) Cleanup(f func())    {}
func (r *recordingTB) Logf(string, ...any) {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = format
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recordingTB) Skipf(string, ...any) {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recordingTB) SkipNow()    { r.Skipf("") }
func (r *recordingTB) Skip(...any) { r.Skipf("") }

// A missing MinIO fails the test, with the command that installs it.
func TestMinIOMissingFails(t *testing.T) {
	t.Setenv("STRATA_MINIO", filepath.Join(t.TempDir(), "no-minio"))
	r := &recordingTB{TB: t, dir: t.TempDir()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartMinIO(r)
	}()
	<-done
	if r.skipped || r.fatal == "" {
		t.Fatalf("StartMinIO without a binary: fatal %q, skipped %v; want a failure", r.fatal, r.skipped)
	}
}

// The install script builds the version testenv runs, into the path
// testenv looks in.
func TestInstallScriptMatches(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy", "install-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MINIO_VERSION=" + MinIOVersion + "\n",
		`${STRATA_MINIO:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/minio-$MINIO_VERSION/minio}`,
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("deploy/install-deps.sh lacks %q", want)
		}
	}
	t.Setenv("STRATA_MINIO", "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if p, _ := MinIOBinary(); p != "/cache/strata/minio-"+MinIOVersion+"/minio" {
		t.Errorf("MinIOBinary = %s", p)
	}
}
