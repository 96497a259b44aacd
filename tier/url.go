package tier

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
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
		return Location{}, fmt.Errorf("--tier %q: %s", s, fmt.Sprintf(format, args...))
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
		return bad("%v", err)
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
// path beyond "/", no query.
func validateEndpoint(e string) error {
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--s3-endpoint %q: want http(s)://host[:port]", e)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--s3-endpoint %q: no path, query or user info allowed", e)
	}
	if p := u.Port(); p == "" && strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("--s3-endpoint %q: empty port", e)
	}
	return nil
}

// Config is the tier's object store, as the broker's flags give it.
type Config struct {
	URL        string // --tier; empty: no tier
	S3Endpoint string // --s3-endpoint
	S3Region   string // --s3-region
	// S3 tunes the S3 store (part size, retries, timeouts); its Bucket,
	// Prefix, Endpoint and Region are taken from the fields above.
	S3 S3Config
}

// Validate checks the flags' form without contacting anything: a valid
// URL, and S3 settings only with an s3:// URL.
func (c Config) Validate() error {
	if c.URL == "" {
		if c.S3Endpoint != "" || c.S3Region != "" {
			return errors.New("--s3-endpoint/--s3-region need --tier s3://bucket/prefix")
		}
		return nil
	}
	loc, err := ParseURL(c.URL)
	if err != nil {
		return err
	}
	if loc.Scheme != "s3" {
		if c.S3Endpoint != "" || c.S3Region != "" {
			return fmt.Errorf("--s3-endpoint/--s3-region need an s3:// tier, not %s", loc)
		}
		return nil
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
// empty). A file tier's directory is created; an S3 tier needs
// credentials (see S3Config) but is not contacted.
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
	s3s, err := NewS3Store(sc)
	if err != nil {
		return nil, err
	}
	return s3s, nil
}
