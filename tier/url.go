package tier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Location is a parsed --tier URL.
type Location struct {
	Scheme string // "file" or "s3"
	Dir    string // file: the absolute directory
	Bucket string // s3
	Prefix string // s3: key prefix, without leading or trailing '/'; may be empty
}

func (l Location) String() string {
	switch {
	case l.Scheme == "file":
		return "file://" + l.Dir
	case l.Prefix == "":
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Prefix
}

// ParseURL parses a --tier URL: file:///abs/dir or s3://bucket[/prefix].
// Errors are one line, naming what is wrong.
func ParseURL(s string) (Location, error) {
	bad := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("--tier %q: %s", redactURL(s), fmt.Sprintf(format, args...))
	}
	if s == "" {
		return bad("empty; want file:///abs/dir or s3://bucket/prefix")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if strings.Contains(s, "@") {
			return bad("not a URL") // the parser's reason may quote user info
		}
		return bad("%v", err)
	}
	if u.User != nil {
		return bad("user info (credentials) in the URL is refused; give S3 credentials through the AWS default chain (environment, shared files, roles)")
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return bad("no query, fragment or user info allowed")
	}
	switch u.Scheme {
	case "file":
		if u.Opaque != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return bad("file URL needs an absolute path and no host (file:///abs/dir)")
		}
		dir := filepath.Clean(u.Path)
		if dir == "/" {
			return bad("the root directory cannot be the tier")
		}
		return Location{Scheme: "file", Dir: dir}, nil
	case "s3":
		if u.Opaque != "" || u.Host == "" {
			return bad("s3 URL needs a bucket (s3://bucket/prefix)")
		}
		if u.Port() != "" || strings.Contains(u.Host, ":") {
			return bad("a bucket has no port; the endpoint goes in --s3-endpoint")
		}
		if err := validateBucket(u.Host); err != nil {
			return bad("%v", err)
		}
		prefix := strings.Trim(u.Path, "/")
		if prefix != "" && ValidateKey(prefix) != nil {
			return bad("prefix %q: empty components or components starting with '.' are not allowed", prefix)
		}
		return Location{Scheme: "s3", Bucket: u.Host, Prefix: prefix}, nil
	case "":
		return bad("no scheme; want file:///abs/dir or s3://bucket/prefix")
	}
	return bad("scheme %q; want file or s3", u.Scheme)
}

// validateBucket applies S3's naming rules for general-purpose buckets.
func validateBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q: must be 3 to 63 characters", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("bucket name %q: only lowercase letters, digits, '-' and '.'", b)
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return fmt.Errorf("bucket name %q: must start and end with a letter or digit", b)
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("bucket name %q: no two adjacent periods", b)
	}
	if net.ParseIP(b) != nil {
		return fmt.Errorf("bucket name %q: must not look like an IP address", b)
	}
	return nil
}

// validateEndpoint checks an --s3-endpoint URL: http or https, a host, no
// path beyond "/", no query, no user info. Errors never quote user info.
func validateEndpoint(e string) error {
	u, err := url.Parse(e)
	if err == nil && u.User != nil {
		return fmt.Errorf("--s3-endpoint %q: user info (credentials) in the URL is refused; give S3 credentials through the AWS default chain (environment, shared files, roles)", redactURL(e))
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--s3-endpoint %q: want http(s)://host[:port]", redactURL(e))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--s3-endpoint %q: no path, query or user info allowed", e)
	}
	if p := u.Port(); p == "" && strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("--s3-endpoint %q: empty port", e)
	}
	return nil
}

// redactURL is s without its user info, for messages: a URL that does
// not parse and holds an '@' is not shown at all.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(not shown: it may hold credentials)"
		}
		return s
	}
	if u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// Config is the tier's object store, as the broker's flags give it.
type Config struct {
	URL        string // --tier; empty: no tier
	S3Endpoint string // --s3-endpoint
	S3Region   string // --s3-region
	// S3SSE and S3SSEKMSKeyID are --s3-sse and --s3-sse-kms-key-id
	// (S3Config.SSE, SSEKMSKeyID); S3CABundle is --s3-ca-bundle.
	S3SSE         string
	S3SSEKMSKeyID string
	S3CABundle    string
	// S3 tunes the S3 store (part size, retries, timeouts); its Bucket,
	// Prefix, Endpoint, Region, SSE and CA bundle are taken from the
	// fields above.
	S3 S3Config
}

// Validate checks the flags' form without contacting anything: a valid
// URL, and S3 settings only with an s3:// URL.
func (c Config) Validate() error {
	s3Set := c.S3Endpoint != "" || c.S3Region != "" || c.S3SSE != "" || c.S3SSEKMSKeyID != "" || c.S3CABundle != ""
	if c.URL == "" {
		if s3Set {
			return errors.New("--s3-* flags need --tier s3://bucket/prefix")
		}
		return nil
	}
	loc, err := ParseURL(c.URL)
	if err != nil {
		return err
	}
	if loc.Scheme != "s3" {
		if s3Set {
			return fmt.Errorf("--s3-* flags need an s3:// tier, not %s", loc)
		}
		return nil
	}
	if err := validateSSE(c.S3SSE, c.S3SSEKMSKeyID); err != nil {
		return err
	}
	if c.S3CABundle != "" {
		if _, err := caPool(c.S3CABundle); err != nil {
			return err
		}
	}
	if c.S3Endpoint != "" {
		if err := validateEndpoint(c.S3Endpoint); err != nil {
			return err
		}
	}
	if r := c.S3Region; r != "" {
		for i := 0; i < len(r); i++ {
			if ch := r[i]; !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-') {
				return fmt.Errorf("--s3-region %q: want a region name like us-east-1", r)
			}
		}
	}
	return nil
}

// Open returns the store the configuration names (nil when URL is
// empty). A file tier's directory is created; an S3 tier's credentials
// are resolved through the AWS default chain (see S3Config; this may ask
// the instance metadata service), but the bucket is not contacted.
func Open(c Config) (ObjectStore, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.URL == "" {
		return nil, nil
	}
	loc, _ := ParseURL(c.URL)
	if loc.Scheme == "file" {
		fs, err := OpenFileStore(loc.Dir)
		if err != nil {
			return nil, err
		}
		return fs, nil
	}
	sc := c.S3
	sc.Bucket, sc.Prefix, sc.Endpoint, sc.Region = loc.Bucket, loc.Prefix, c.S3Endpoint, c.S3Region
	sc.SSE, sc.SSEKMSKeyID, sc.CABundle = c.S3SSE, c.S3SSEKMSKeyID, c.S3CABundle
	s3s, err := NewS3Store(sc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s3s.CheckCredentials(ctx); err != nil {
		return nil, err
	}
	return s3s, nil
}
