package tier

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Location
	}{
		{"file:///var/lib/strata/tier", Location{Scheme: "file", Dir: "/var/lib/strata/tier"}},
		{"file:///srv/tier/", Location{Scheme: "file", Dir: "/srv/tier"}},
		{"file:///srv/a/../tier", Location{Scheme: "file", Dir: "/srv/tier"}},
		{"s3://my-bucket", Location{Scheme: "s3", Bucket: "my-bucket"}},
		{"s3://my-bucket/", Location{Scheme: "s3", Bucket: "my-bucket"}},
		{"s3://my.bucket.1/strata/prod", Location{Scheme: "s3", Bucket: "my.bucket.1", Prefix: "strata/prod"}},
		{"s3://abc/tier/", Location{Scheme: "s3", Bucket: "abc", Prefix: "tier"}},
	} {
		got, err := ParseURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "empty"},
		{"/var/tier", "no scheme"},
		{"gs://bucket", "scheme"},
		{"file://relative/dir", "absolute path"},
		{"file:relative", "absolute path"},
		{"file:///", "root"},
		{"file:///a?x=1", "query"},
		{"s3://", "bucket"},
		{"s3:///prefix", "bucket"},
		{"s3://ab", "3 to 63"},
		{"s3://" + strings.Repeat("a", 64), "3 to 63"},
		{"s3://My-Bucket", "lowercase"},
		{"s3://under_score", "lowercase"},
		{"s3://-bucket", "start and end"},
		{"s3://bucket-", "start and end"},
		{"s3://a..b", "adjacent"},
		{"s3://192.168.1.1", "IP address"},
		{"s3://bucket:9000/p", "port"},
		{"s3://user@bucket/p", "user info"},
		{"s3://bucket/a//b", "prefix"},
		{"s3://bucket/a/../b", "prefix"},
		{"s3://bucket/p#frag", "fragment"},
		{"s3://buc ket", ""},
	} {
		_, err := ParseURL(c.in)
		if err == nil {
			t.Errorf("ParseURL(%q) accepted", c.in)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "--tier ") || !strings.Contains(msg, c.why) {
			t.Errorf("ParseURL(%q): %q; want one line starting --tier, mentioning %q", c.in, msg, c.why)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, true},
		{Config{URL: "file:///tier"}, true},
		{Config{URL: "s3://bucket/p"}, true},
		{Config{URL: "s3://bucket/p", S3Endpoint: "http://127.0.0.1:9000", S3Region: "eu-west-1"}, true},
		{Config{URL: "s3://bucket/p", S3Endpoint: "https://s3.example.com/"}, true},
		{Config{S3Endpoint: "http://127.0.0.1:9000"}, false},
		{Config{S3Region: "us-east-1"}, false},
		{Config{URL: "file:///tier", S3Region: "us-east-1"}, false},
		{Config{URL: "s3://bucket/p", S3Endpoint: "127.0.0.1:9000"}, false},
		{Config{URL: "s3://bucket/p", S3Endpoint: "http://host/path"}, false},
		{Config{URL: "s3://bucket/p", S3Endpoint: "http://"}, false},
		{Config{URL: "s3://bucket/p", S3Region: "US East"}, false},
		{Config{URL: "s3://BAD"}, false},
	} {
		err := c.cfg.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.cfg, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error of several lines: %q", c.cfg, err)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{URL: "file://" + dir + "/tier"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*FileStore); !ok || s.String() != "file://"+dir+"/tier" {
		t.Fatalf("Open file: %T %s", s, s)
	}
	if s, err := Open(Config{}); s != nil || err != nil {
		t.Fatalf("Open without a tier: %v, %v", s, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "id")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	s, err = Open(Config{URL: "s3://bucket/p", S3Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*S3Store); !ok || s.String() != "s3://bucket/p" {
		t.Fatalf("Open s3: %T %s", s, s)
	}
	if s, err := Open(Config{URL: "s3://x"}); s != nil || err == nil {
		t.Fatalf("Open of a bad URL: %v, %v", s, err)
	}
}
