package tier

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"strata/internal/testenv"
)

// What the S3 store writes is checked with minio-go, an independent
// client: keys under the store's prefix, sizes, bytes, and a multipart
// upload for a large object.
func TestS3StoreSeenByMinIOClient(t *testing.T) {
	s, m := newMinIOStore(t, nil)
	mc := m.Client(t)
	ctx := ctxT(t)
	small := payload(20, 1000)
	large := payload(21, conformanceLarge)
	put(t, s, "t/0/small", small)
	put(t, s, "t/0/large", large)

	for key, want := range map[string][]byte{"t/0/small": small, "t/0/large": large} {
		full := s.Prefix() + "/" + key
		st, err := mc.StatObject(ctx, m.Bucket(), full, minio.StatObjectOptions{})
		if err != nil {
			t.Fatalf("minio-go stat %s: %v", full, err)
		}
		if st.Size != int64(len(want)) {
			t.Fatalf("%s: size %d, want %d", full, st.Size, len(want))
		}
		o, err := mc.GetObject(ctx, m.Bucket(), full, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o)
		o.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s through minio-go: %d bytes, %v", full, len(got), err)
		}
		// A multipart object's ETag is "<md5 of part md5s>-<parts>".
		parts := ""
		if i := strings.LastIndexByte(st.ETag, '-'); i >= 0 {
			parts = st.ETag[i+1:]
		}
		if len(want) > minPartSize && parts != "3" || len(want) <= minPartSize && parts != "" {
			t.Errorf("%s: ETag %s; want 3 parts for %d bytes at part size %d", full, st.ETag, len(want), minPartSize)
		}
	}
	var keys []string
	for o := range mc.ListObjects(ctx, m.Bucket(), minio.ListObjectsOptions{Prefix: s.Prefix() + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if want := []string{s.Prefix() + "/t/0/large", s.Prefix() + "/t/0/small"}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("bucket holds %v, want %v", keys, want)
	}
	// No multipart upload is left behind by a failed large put.
	err := s.Put(ctx, "t/0/torn", io.MultiReader(bytes.NewReader(large[:minPartSize+100])), conformanceLarge)
	if !errors.Is(err, ErrShortBody) {
		t.Fatalf("short multipart put: %v", err)
	}
	for u := range mc.ListIncompleteUploads(ctx, m.Bucket(), s.Prefix()+"/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("incomplete multipart upload left: %s (%s)", u.Key, u.UploadID)
	}
	if _, err := mc.StatObject(ctx, m.Bucket(), s.Prefix()+"/t/0/torn", minio.StatObjectOptions{}); err == nil {
		t.Error("a short multipart put left an object")
	}
	// Deletes are seen by the other client too.
	if err := s.DeleteMany(ctx, []string{"t/0/small", "t/0/large"}); err != nil {
		t.Fatal(err)
	}
	for o := range mc.ListObjects(ctx, m.Bucket(), minio.ListObjectsOptions{Prefix: s.Prefix() + "/", Recursive: true}) {
		t.Errorf("left after DeleteMany: %s %v", o.Key, o.Err)
	}
}

// flakyProxy forwards to MinIO, failing the first requests it is told
// to with 503 SlowDown, or holding them until released.
type flakyProxy struct {
	srv      *httptest.Server
	fail     atomic.Int64 // requests still to fail
	requests atomic.Int64
	hang     atomic.Bool
	release  chan struct{}
	once     sync.Once
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{release: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.hang.Load() {
			select {
			case <-p.release:
			case <-r.Context().Done():
				return
			}
		}
		if p.fail.Add(-1) >= 0 {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.once.Do(func() { close(p.release) })
		p.srv.Close()
	})
	return p
}

func TestS3StoreRetries(t *testing.T) {
	proxy := newFlakyProxy(t, testenv.SharedMinIO(t).Endpoint())
	s, _ := newMinIOStore(t, func(c *S3Config) {
		c.Endpoint = proxy.srv.URL
		c.MaxAttempts = 4
		c.MaxBackoff = 20 * time.Millisecond
	})
	ctx := ctxT(t)

	// Three failures, then success: within four attempts.
	proxy.fail.Store(3)
	proxy.requests.Store(0)
	put(t, s, "retried", []byte("made it"))
	if n := proxy.requests.Load(); n != 4 {
		t.Fatalf("put took %d requests, want 4 (3 failed + 1)", n)
	}
	proxy.fail.Store(3)
	if got, err := get(t, s, "retried", 0, -1); err != nil || string(got) != "made it" {
		t.Fatalf("get after 3 failures: %q, %v", got, err)
	}
	// Four failures exhaust four attempts: the error says why.
	proxy.fail.Store(4)
	proxy.requests.Store(0)
	_, err := s.Head(ctx, "retried")
	if err == nil || !strings.Contains(err.Error(), "503") && !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("head after 4 failures: %v, want the 503 SlowDown", err)
	}
	if n := proxy.requests.Load(); n != 4 {
		t.Fatalf("head made %d attempts, want 4", n)
	}
	// A multipart upload retries its parts.
	proxy.fail.Store(2)
	data := payload(22, conformanceLarge)
	put(t, s, "big", data)
	if got, err := get(t, s, "big", 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("big after retried parts: %d bytes, %v", len(got), err)
	}
}

func TestS3StoreTimeout(t *testing.T) {
	proxy := newFlakyProxy(t, testenv.SharedMinIO(t).Endpoint())
	s, _ := newMinIOStore(t, func(c *S3Config) {
		c.Endpoint = proxy.srv.URL
		c.Timeout = 500 * time.Millisecond
		c.MaxAttempts = 2
		c.MaxBackoff = 10 * time.Millisecond
	})
	put(t, s, "k", []byte("v"))
	proxy.hang.Store(true)
	start := time.Now()
	_, err := s.Head(context.Background(), "k")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("head against a hanging endpoint: %v, want a deadline error", err)
	}
	// Generous: the point is that it returns, not how fast under load.
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("head took %v with a 500ms timeout", d)
	}
	proxy.hang.Store(false)
	if _, err := s.Head(ctxT(t), "k"); err != nil {
		t.Fatalf("after the endpoint recovered: %v", err)
	}
}

func TestNewS3StoreConfig(t *testing.T) {
	isolateAWSChain(t)
	s, err := NewS3Store(S3Config{Bucket: "b-1"})
	if err != nil {
		t.Fatalf("no credentials yet: NewS3Store asks nothing, but: %v", err)
	}
	err = s.CheckCredentials(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "no S3 credentials") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("no credentials: %v", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	for _, c := range []S3Config{
		{Bucket: "B"},
		{Bucket: "ok-bucket", Prefix: "a//b"},
		{Bucket: "ok-bucket", Endpoint: "ftp://x"},
		{Bucket: "ok-bucket", PartSize: 1 << 20},
		{Bucket: "ok-bucket", SSE: "aes256"},
		{Bucket: "ok-bucket", SSE: SSES3, SSEKMSKeyID: "k"},
		{Bucket: "ok-bucket", CABundle: "/nonexistent/ca.pem"},
	} {
		if _, err := NewS3Store(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	s, err = NewS3Store(S3Config{Bucket: "ok-bucket", Prefix: "/tier/a/", Endpoint: "http://127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "s3://ok-bucket/tier/a" || s.Prefix() != "tier/a" {
		t.Fatalf("String %s, Prefix %s", s, s.Prefix())
	}
	if err := s.CheckCredentials(ctxT(t)); err != nil {
		t.Fatalf("credentials from the environment: %v", err)
	}
}

// isolateAWSChain empties the AWS default chain for this test: no
// credentials in the environment, no shared files, no profile, no web
// identity, no container or instance role.
func isolateAWSChain(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                      "",
		"AWS_SECRET_ACCESS_KEY":                  "",
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_DEFAULT_PROFILE":                    "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_CONFIG_FILE":                        dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE":            dir + "/credentials",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_ROLE_ARN":                           "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_CA_BUNDLE":                          "",
		"AWS_ENDPOINT_URL":                       "",
		"AWS_ENDPOINT_URL_S3":                    "",
	} {
		t.Setenv(k, v)
	}
}
