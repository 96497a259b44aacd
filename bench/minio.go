package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"strata/tier"
)

// minioVersion is the MinIO the harness runs: the one deploy/install-deps.sh
// minio installs (and internal/testenv runs; a test checks they agree).
const minioVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"

// minioRegion is the region the harness's MinIO serves.
const minioRegion = "us-east-1"

// minioBinary is where deploy/install-deps.sh minio installs MinIO:
// $STRATA_MINIO, or <user cache dir>/strata/minio-<version>/minio.
func minioBinary() (string, error) {
	if p := os.Getenv("STRATA_MINIO"); p != "" {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache dir for minio: %w", err)
	}
	return filepath.Join(cache, "strata", "minio-"+minioVersion, "minio"), nil
}

// benchMinIO is a MinIO server the harness started on a free loopback
// port, with a data directory of its own and one bucket.
type benchMinIO struct {
	cmd               *exec.Cmd
	done              chan struct{}
	dir               string
	addr              string
	accessKey, secret string
	bucket            string
}

func (m *benchMinIO) endpoint() string { return "http://" + m.addr }

// env is the standard AWS variables that give a broker the credentials.
func (m *benchMinIO) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + m.accessKey, "AWS_SECRET_ACCESS_KEY=" + m.secret, "AWS_REGION=" + minioRegion}
}

// store returns a tier.S3Store on the bucket under prefix, configured as
// the broker's (tier.Open's defaults).
func (m *benchMinIO) store(prefix string) (*tier.S3Store, error) {
	return tier.NewS3Store(tier.S3Config{
		Bucket: m.bucket, Prefix: prefix, Endpoint: m.endpoint(), Region: minioRegion,
		Credentials: credentials.NewStaticCredentialsProvider(m.accessKey, m.secret, ""),
	})
}

func freeLoopbackPort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startMinIO starts MinIO with a fresh data directory and makes bucket.
func startMinIO(ctx context.Context, bucket string) (*benchMinIO, error) {
	bin, err := minioBinary()
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() {
		return nil, fmt.Errorf("%s missing: run deploy/install-deps.sh minio (make test-deps does); it builds MinIO %s with go install", bin, minioVersion)
	}
	addr, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	console, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-minio-")
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	m := &benchMinIO{dir: dir, addr: addr, accessKey: "strata-bench", secret: hex.EncodeToString(secret), bucket: bucket, done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	m.cmd = exec.Command(bin, "server", "--address", addr, "--console-address", console, filepath.Join(dir, "data"))
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") && !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	m.cmd.Env = append(env, "MINIO_ROOT_USER="+m.accessKey, "MINIO_ROOT_PASSWORD="+m.secret,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_REGION="+minioRegion)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { _ = m.cmd.Wait(); close(m.done) }()

	st, err := m.store("")
	if err != nil {
		m.close()
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	ready := func() bool {
		resp, err := hc.Get(m.endpoint() + "/minio/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = st.Client().CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		return err == nil
	}
	if err := awaitReady(ctx, "minio (and its bucket)", filepath.Join(dir, "minio.log"), m.done, ready); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// awaitReady polls ready every 50 ms until it holds. It fails when the
// process exits first (done closed: the last lines of its log are in the
// error), ctx ends, or readyTimeout passes.
func awaitReady(ctx context.Context, what, logPath string, done <-chan struct{}, ready func() bool) error {
	deadline := time.Now().Add(readyTimeout)
	for !ready() {
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited before ready: %s", what, lastLines(string(log), 10))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s", what, readyTimeout)
		}
	}
	return nil
}

// close stops MinIO and removes its data.
func (m *benchMinIO) close() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(stopTimeout):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	os.RemoveAll(m.dir)
}
