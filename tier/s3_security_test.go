package tier

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"strata/internal/testenv"
)

// Credentials come from the AWS default chain: here a named profile of a
// shared credentials file, with nothing in the environment. A profile
// with wrong keys is refused by the bucket, so the profile is what signs.
func TestS3StoreCredentialsFromProfile(t *testing.T) {
	m := testenv.SharedMinIO(t)
	isolateAWSChain(t)
	dir := t.TempDir()
	creds := fmt.Sprintf("[strata]\naws_access_key_id = %s\naws_secret_access_key = %s\n\n[wrong]\naws_access_key_id = %s\naws_secret_access_key = not-the-secret\n\n[paris]\naws_access_key_id = x\naws_secret_access_key = y\n",
		m.AccessKey(), m.SecretKey(), m.AccessKey())
	config := "[profile strata]\nregion = " + testenv.MinIORegion + "\n\n[profile wrong]\nregion = " + testenv.MinIORegion + "\n\n[profile paris]\nregion = eu-west-3\n"
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))

	open := func(profile string) *S3Store {
		t.Helper()
		t.Setenv("AWS_PROFILE", profile)
		st, err := Open(Config{URL: "s3://" + m.Bucket() + "/profile-" + profile, S3Endpoint: m.Endpoint()})
		if err != nil {
			t.Fatalf("open with profile %s: %v", profile, err)
		}
		return st.(*S3Store)
	}
	if p := open("paris"); p.cfg.Region != "eu-west-3" {
		t.Errorf("region %q, want the profile's eu-west-3", p.cfg.Region)
	}
	s := open("strata")
	put(t, s, "k", []byte("signed by the profile"))
	if got, err := get(t, s, "k", 0, -1); err != nil || string(got) != "signed by the profile" {
		t.Fatalf("get through the profile: %q, %v", got, err)
	}
	w := open("wrong")
	err := w.Put(ctxT(t), "k", bytes.NewReader([]byte("x")), 1)
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("put with the wrong profile's secret: %v, want SignatureDoesNotMatch", err)
	}
	if strings.Contains(err.Error(), "not-the-secret") {
		t.Fatalf("the error shows the secret: %v", err)
	}
	// A profile that is not in the files fails at open, in one line.
	t.Setenv("AWS_PROFILE", "missing")
	if _, err := Open(Config{URL: "s3://" + m.Bucket() + "/p", S3Endpoint: m.Endpoint()}); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("open with a missing profile: %v", err)
	}
}

// Every object the store writes (one PutObject, a multipart upload, a
// conditional put) carries the server-side encryption asked for, as seen
// by minio-go on a MinIO with a static KMS key, and reads back through
// the store. Without SSE, objects are stored as the bucket's default
// (here: not encrypted), so the check can fail.
func TestS3StoreServerSideEncryption(t *testing.T) {
	const keyName = "strata-test-key"
	m := testenv.StartMinIOWith(t, testenv.MinIOOptions{KMSKey: keyName})
	mc := m.Client(t)
	ctx := ctxT(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	small, large := payload(30, 1000), payload(31, conformanceLarge)
	for _, tc := range []struct {
		sse, keyID string
		wantSSE    string // X-Amz-Server-Side-Encryption; "" none
	}{
		{"", "", ""},
		{SSENone, "", ""},
		{SSES3, "", "AES256"},
		{SSEKMS, keyName, "aws:kms"},
	} {
		t.Run("sse="+tc.sse, func(t *testing.T) {
			prefix := "sse-" + strings.NewReplacer(":", "-").Replace(tc.sse)
			s, err := NewS3Store(S3Config{Bucket: m.Bucket(), Prefix: prefix, Endpoint: m.Endpoint(), PartSize: minPartSize,
				SSE: tc.sse, SSEKMSKeyID: tc.keyID})
			if err != nil {
				t.Fatal(err)
			}
			put(t, s, "small", small)
			put(t, s, "large", large)
			if _, err := s.PutIf(ctx, "cond", bytes.NewReader(small), int64(len(small)), Cond{IfAbsent: true}); err != nil {
				t.Fatalf("conditional put: %v", err)
			}
			for key, want := range map[string][]byte{"small": small, "large": large, "cond": small} {
				st, err := mc.StatObject(ctx, m.Bucket(), prefix+"/"+key, minio.StatObjectOptions{})
				if err != nil {
					t.Fatalf("minio-go stat %s: %v", key, err)
				}
				if got := st.Metadata.Get("X-Amz-Server-Side-Encryption"); got != tc.wantSSE {
					t.Errorf("%s: X-Amz-Server-Side-Encryption %q, want %q", key, got, tc.wantSSE)
				}
				kid := st.Metadata.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id")
				if tc.sse == SSEKMS && !strings.HasSuffix(kid, keyName) || tc.sse != SSEKMS && kid != "" {
					t.Errorf("%s: KMS key id %q, want %q", key, kid, tc.keyID)
				}
				if got, err := get(t, s, key, 0, -1); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s read back through the store: %d bytes, %v", key, len(got), err)
				}
			}
		})
	}
	// A KMS key the server does not have: the write fails, nothing is
	// stored unencrypted.
	s, err := NewS3Store(S3Config{Bucket: m.Bucket(), Prefix: "sse-badkey", Endpoint: m.Endpoint(), SSE: SSEKMS, SSEKMSKeyID: "no-such-key"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", bytes.NewReader(small), int64(len(small))); err == nil {
		t.Fatal("put with an unknown KMS key id succeeded")
	}
	if _, err := mc.StatObject(ctx, m.Bucket(), "sse-badkey/k", minio.StatObjectOptions{}); err == nil {
		t.Fatal("a put with an unknown KMS key left an object")
	}
}

// An https endpoint whose certificate chains to a private CA is reached
// with the CA bundle, and refused without it.
func TestS3StoreCABundle(t *testing.T) {
	m := testenv.StartMinIOWith(t, testenv.MinIOOptions{TLS: true})
	if !strings.HasPrefix(m.Endpoint(), "https://") {
		t.Fatalf("endpoint %s, want https", m.Endpoint())
	}
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	t.Setenv("AWS_CA_BUNDLE", "")
	cfg := Config{URL: "s3://" + m.Bucket() + "/tls", S3Endpoint: m.Endpoint(), S3CABundle: m.CAFile()}
	st, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	put(t, st, "k", []byte("over tls"))
	if got, err := get(t, st, "k", 0, -1); err != nil || string(got) != "over tls" {
		t.Fatalf("get over tls: %q, %v", got, err)
	}
	// The object is there for the independent client too.
	if _, err := m.Client(t).StatObject(ctxT(t), m.Bucket(), "tls/k", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("minio-go stat: %v", err)
	}

	cfg.S3CABundle = ""
	cfg.S3 = S3Config{MaxAttempts: 1}
	st, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Head(ctxT(t), "k"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("head without the CA bundle: %v, want a certificate error", err)
	}

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.S3CABundle = notPEM
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a bundle with no certificate: %v", err)
	}
}

// An endpoint or tier URL with credentials in it is refused with a
// one-line reason that does not print them.
func TestURLWithCredentialsRefusedWithoutPrintingThem(t *testing.T) {
	const id, secret = "AKIDSTRATAEXAMPLE", "s3cr3t-D0-not-print"
	for _, c := range []Config{
		{URL: "s3://bucket/p", S3Endpoint: "http://" + id + ":" + secret + "@127.0.0.1:9000"},
		{URL: "s3://bucket/p", S3Endpoint: "https://" + id + ":" + secret + "@s3.example.com/"},
		{URL: "s3://bucket/p", S3Endpoint: "http://" + id + ":" + secret + "%zz@127.0.0.1:9000"},
		{URL: "s3://" + id + ":" + secret + "@bucket/p"},
		{URL: "s3://" + id + ":" + secret + "%zz@bucket/p"},
	} {
		err := c.Validate()
		if err == nil {
			t.Errorf("%+v accepted", c)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, id) || strings.Contains(msg, "\n") {
			t.Errorf("the reason shows the credentials or is not one line: %s", msg)
		}
		if _, err := Open(c); err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), id) {
			t.Errorf("Open: %v", err)
		}
	}
	if _, err := NewS3Store(S3Config{Bucket: "bucket", Endpoint: "http://" + id + ":" + secret + "@127.0.0.1:9000"}); err == nil ||
		strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), id) {
		t.Errorf("NewS3Store: %v", err)
	}
}
