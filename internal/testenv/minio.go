package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// MinIOVersion is the MinIO module version the tests run, built with
// `go install github.com/minio/minio@MinIOVersion` by
// deploy/install-deps.sh minio (which must name the same version).
const MinIOVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// MinIORegion is the region MinIO serves (its default).
const MinIORegion = "us-east-1"

// MinIOBinary returns where deploy/install-deps.sh installs MinIO:
// $STRATA_MINIO if set, else <user cache dir>/strata/minio-<version>/minio
// (the user cache dir is $XDG_CACHE_HOME or ~/.cache).
func MinIOBinary() (string, error) {
	if p := os.Getenv("STRATA_MINIO"); p != "" {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache dir for minio: %w", err)
	}
	return filepath.Join(cache, "strata", "minio-"+MinIOVersion, "minio"), nil
}

// MinIO is a MinIO server started for tests on a free loopback port, with
// its own data directory and root credentials, and one bucket made. Its
// methods are meant for the test goroutine; the accessors may be called
// from any goroutine.
type MinIO struct {
	bin       string
	dataDir   string
	logPath   string
	addr      string
	console   string
	accessKey string
	secretKey string
	bucket    string
	opts      MinIOOptions
	certsDir  string // with TLS: public.crt and private.key; the CA beside it

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// StartMinIO starts a MinIO server for this test, makes a bucket
// ("strata") and waits until both serve. The server is killed when the
// test ends and its log is printed if the test failed. A missing binary
// fails the test with the command that installs it.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	return StartMinIOWith(t, MinIOOptions{})
}

// MinIOOptions are the settings of a MinIO server beyond the defaults.
type MinIOOptions struct {
	// KMSKey starts the server with a static KMS key of this name
	// (MINIO_KMS_SECRET_KEY=<name>:<random 32 bytes, base64>), so that it
	// serves SSE-S3 and SSE-KMS with that key id.
	KMSKey string
	// TLS serves https with a certificate for 127.0.0.1 signed by a CA
	// made for this server (see [MinIO.CAFile]).
	TLS bool
}

// StartMinIOWith is [StartMinIO] with options.
func StartMinIOWith(t testing.TB, o MinIOOptions) *MinIO {
	t.Helper()
	m, err := newMinIO(t.TempDir())
	if err != nil {
		t.Fatalf("minio: %v", err)
	}
	m.opts = o
	if o.TLS {
		m.certsDir = filepath.Join(filepath.Dir(m.dataDir), "certs")
		if err := writeTestCerts(m.certsDir, m.CAFile(), "127.0.0.1"); err != nil {
			t.Fatalf("minio: %v", err)
		}
	}
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("minio %s log, last lines:\n%s", m.addr, tailLines(m.Logs(), 40))
		}
	})
	if err := m.start(); err != nil {
		t.Fatalf("minio: %v", err)
	}
	return m
}

var shared struct {
	once sync.Once
	m    *MinIO
	dir  string
	err  error
}

// SharedMinIO returns one MinIO server per test binary, started on first
// use and stopped by [Main], so that a package's tests share its start-up
// cost. Tests must not stop it; each should use its own bucket
// ([MinIO.NewBucket]) or key prefix.
func SharedMinIO(t testing.TB) *MinIO {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "strata-minio-")
		if shared.err != nil {
			return
		}
		shared.m, shared.err = newMinIO(shared.dir)
		if shared.err == nil {
			shared.err = shared.m.start()
		}
	})
	if shared.err != nil {
		if shared.m != nil {
			t.Logf("minio log, last lines:\n%s", tailLines(shared.m.Logs(), 40))
		}
		t.Fatalf("shared minio: %v", shared.err)
	}
	return shared.m
}

// stopSharedMinIO ends the shared server, if one was started, and removes
// its data; Main calls it.
func stopSharedMinIO() {
	if shared.m != nil {
		shared.m.kill()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

func newMinIO(dir string) (*MinIO, error) {
	bin, err := MinIOBinary()
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return nil, fmt.Errorf("%s missing: run deploy/install-deps.sh minio (`make test` does); it builds MinIO %s with go install", bin, MinIOVersion)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	m := &MinIO{
		bin:       bin,
		dataDir:   filepath.Join(dir, "data"),
		logPath:   filepath.Join(dir, "minio.log"),
		addr:      net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		console:   net.JoinHostPort("127.0.0.1", strconv.Itoa(cport)),
		accessKey: "strata-test",
		secretKey: hex.EncodeToString(secret),
		bucket:    "strata",
	}
	return m, nil
}

// Addr is the S3 API address, 127.0.0.1:PORT; it stays the same across
// restarts.
func (m *MinIO) Addr() string { return m.addr }

// Endpoint is the S3 endpoint URL, for --s3-endpoint: https with
// MinIOOptions.TLS.
func (m *MinIO) Endpoint() string {
	if m.certsDir != "" {
		return "https://" + m.addr
	}
	return "http://" + m.addr
}

// CAFile is the PEM file of the CA that signed the server's certificate
// (MinIOOptions.TLS), for --s3-ca-bundle; "" without TLS.
func (m *MinIO) CAFile() string {
	if m.certsDir == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(m.certsDir), "ca.crt")
}

// Bucket is the bucket StartMinIO made.
func (m *MinIO) Bucket() string { return m.bucket }

// AccessKey and SecretKey are the root credentials.
func (m *MinIO) AccessKey() string { return m.accessKey }
func (m *MinIO) SecretKey() string { return m.secretKey }

// Env returns the standard AWS environment variables that give a client
// (or a strata broker) these credentials and the region.
func (m *MinIO) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + m.accessKey,
		"AWS_SECRET_ACCESS_KEY=" + m.secretKey,
		"AWS_REGION=" + MinIORegion,
	}
}

// Logs returns the server's output so far, across restarts.
func (m *MinIO) Logs() string {
	b, _ := os.ReadFile(m.logPath)
	return string(b)
}

// Client returns a minio-go client for the server: an independent client
// with which tests inspect buckets without trusting the code under test.
func (m *MinIO) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := m.client()
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return c
}

func (m *MinIO) client() (*minio.Client, error) {
	o := &minio.Options{
		Creds:  credentials.NewStaticV4(m.accessKey, m.secretKey, ""),
		Region: MinIORegion,
	}
	if m.certsDir != "" {
		tr, err := m.tlsTransport()
		if err != nil {
			return nil, err
		}
		o.Secure, o.Transport = true, tr
	}
	return minio.New(m.addr, o)
}

// tlsTransport trusts the server's CA only.
func (m *MinIO) tlsTransport() (*http.Transport, error) {
	pem, err := os.ReadFile(m.CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", m.CAFile())
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return tr, nil
}

var bucketSeq atomic.Int64

// NewBucket makes a bucket with a name no other test of this process uses
// and returns the name.
func (m *MinIO) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), bucketSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: MinIORegion}); err != nil {
		t.Fatalf("minio: make bucket %s: %v", name, err)
	}
	return name
}

// Start starts the server again on the same port and data directory and
// waits until it serves.
func (m *MinIO) Start(t testing.TB) {
	t.Helper()
	if err := m.start(); err != nil {
		t.Fatalf("minio: %v", err)
	}
}

// Stop sends SIGTERM and waits for the server to exit (killing it after
// 30 s).
func (m *MinIO) Stop(t testing.TB) {
	t.Helper()
	if !m.signalAndWait(syscall.SIGTERM, 30*time.Second) {
		t.Errorf("minio %s did not stop within 30s of SIGTERM; killing it", m.addr)
		m.kill()
	}
}

// Kill9 sends SIGKILL and waits for the server to be gone.
func (m *MinIO) Kill9(t testing.TB) {
	t.Helper()
	if !m.signalAndWait(syscall.SIGKILL, 30*time.Second) {
		t.Errorf("minio %s did not exit within 30s of SIGKILL", m.addr)
	}
}

func (m *MinIO) start() error {
	if m.running() {
		return fmt.Errorf("%s: start while running", m.addr)
	}
	if err := os.MkdirAll(m.dataDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer logf.Close()
	args := []string{"server", "--address", m.addr, "--console-address", m.console}
	if m.certsDir != "" {
		args = append(args, "--certs-dir", m.certsDir)
	}
	args = append(args, m.dataDir)
	m.starts++
	fmt.Fprintf(logf, "=== testenv: start %d: minio %s\n", m.starts, strings.Join(args, " "))
	cmd := exec.Command(m.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = filepath.Dir(m.dataDir)
	env := []string{}
	for _, kv := range os.Environ() {
		// The server gets only the settings below.
		if !strings.HasPrefix(kv, "MINIO_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env,
		"MINIO_ROOT_USER="+m.accessKey,
		"MINIO_ROOT_PASSWORD="+m.secretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_REGION="+MinIORegion,
	)
	if m.opts.KMSKey != "" {
		// The key is derived from the secret key, so that it stays the
		// same across restarts.
		sum := sha256.Sum256([]byte("kms:" + m.secretKey))
		cmd.Env = append(cmd.Env, "MINIO_KMS_SECRET_KEY="+m.opts.KMSKey+":"+base64.StdEncoding.EncodeToString(sum[:]))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.bin, err)
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	go func() {
		cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(60 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	if m.certsDir != "" {
		tr, err := m.tlsTransport()
		if err != nil {
			m.kill()
			return err
		}
		hc.Transport = tr
	}
	c, err := m.client()
	if err != nil {
		m.kill()
		return err
	}
	ready := false
	for {
		if !ready {
			if resp, err := hc.Get(m.Endpoint() + "/minio/health/ready"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		if ready {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.MakeBucket(ctx, m.bucket, minio.MakeBucketOptions{Region: MinIORegion})
			var exists bool
			if err != nil {
				exists, _ = c.BucketExists(ctx, m.bucket)
			}
			cancel()
			if err == nil || exists {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before ready (%v); log tail:\n%s", cmd.ProcessState, tailLines(m.Logs(), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.kill()
			return fmt.Errorf("%s not ready within 60s; log tail:\n%s", m.addr, tailLines(m.Logs(), 30))
		}
	}
}

func (m *MinIO) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return processRunning(m.exited)
}

func (m *MinIO) signalAndWait(sig syscall.Signal, d time.Duration) bool {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	done, err := signalProcess(cmd, exited, sig)
	if done {
		return true
	}
	if err != nil {
		return false
	}
	return waitExit(exited, d)
}

func (m *MinIO) kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	killProcess(cmd, exited)
}
