package tier

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// S3Config configures an S3Store. Zero values take the defaults noted.
type S3Config struct {
	Bucket string
	Prefix string // key prefix inside the bucket, without leading or trailing '/'
	// Endpoint is the S3 API's URL (MinIO, R2, …); empty means AWS's
	// endpoint for Region. With an endpoint, requests use path-style
	// addressing (http://host/bucket/key), which every S3-compatible
	// server accepts.
	Endpoint string
	// Region signs requests; empty: the AWS default chain's (AWS_REGION,
	// the profile's region), else us-east-1.
	Region string
	// Credentials; nil: the AWS SDK's default chain, in its order: the
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN), the shared config and credentials files
	// (AWS_PROFILE, AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE, with SSO
	// and assumed roles), web identity (AWS_WEB_IDENTITY_TOKEN_FILE with
	// AWS_ROLE_ARN), the container's role (ECS, EKS pod identity) and the
	// EC2 instance's role.
	Credentials aws.CredentialsProvider

	// SSE is the server-side encryption every object is written with
	// (each PutObject and multipart upload): "" or "none" leaves it to the
	// bucket's default; "AES256" is SSE-S3; "aws:kms" is SSE-KMS with
	// SSEKMSKeyID (a key id, ARN or alias), or the account's aws/s3 key
	// when that is empty. Reads need no setting.
	SSE         string
	SSEKMSKeyID string
	// CABundle is a PEM file of the certificate authorities an https
	// endpoint's certificate must chain to, in place of the system's
	// (as the SDK's AWS_CA_BUNDLE, which applies when this is empty).
	CABundle string

	// PartSize: objects larger than this are uploaded in parts of this
	// size (multipart upload, at least 5 MiB; default 8 MiB).
	PartSize int64
	// Concurrency is the number of parts of one object uploaded at once
	// (default 4).
	Concurrency int
	// MaxAttempts per request, the first included (default 5); retries of
	// throttling, 5xx and connection errors back off exponentially with
	// jitter up to MaxBackoff (default 5 s).
	MaxAttempts int
	MaxBackoff  time.Duration
	// Timeout bounds each call (all its attempts) (default 30 s); calls
	// that move an object's bytes get, in addition, the time the bytes
	// take at MinThroughput bytes/s (default 1 MiB/s).
	Timeout       time.Duration
	MinThroughput int64
	// ListPageSize is the number of keys per ListObjectsV2 request
	// (default and maximum 1000); DeleteBatch the keys per DeleteObjects
	// request (default and maximum 1000).
	ListPageSize int32
	DeleteBatch  int
	// HTTPClient; nil: the SDK's default client (with CABundle's roots).
	HTTPClient *http.Client
}

// SSE modes of S3Config.SSE.
const (
	SSENone = "none"
	SSES3   = "AES256"
	SSEKMS  = "aws:kms"
)

// validateSSE checks the encryption settings; errors name the flags.
func validateSSE(mode, keyID string) error {
	switch mode {
	case "", SSENone, SSES3:
		if keyID != "" {
			return fmt.Errorf("--s3-sse-kms-key-id needs --s3-sse %s, not %q", SSEKMS, mode)
		}
	case SSEKMS:
	default:
		return fmt.Errorf("--s3-sse %q: want %s, %s (SSE-S3) or %s (SSE-KMS)", mode, SSENone, SSES3, SSEKMS)
	}
	return nil
}

// caPool reads a PEM bundle of certificate authorities.
func caPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--s3-ca-bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--s3-ca-bundle %s: no PEM certificate in it", file)
	}
	return pool, nil
}

const minPartSize = 5 << 20

func (c *S3Config) setDefaults() {
	if c.PartSize == 0 {
		c.PartSize = 8 << 20
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MinThroughput <= 0 {
		c.MinThroughput = 1 << 20
	}
	if c.ListPageSize <= 0 || c.ListPageSize > 1000 {
		c.ListPageSize = 1000
	}
	if c.DeleteBatch <= 0 || c.DeleteBatch > 1000 {
		c.DeleteBatch = 1000
	}
}

// S3Store is an ObjectStore in an S3 bucket, through aws-sdk-go-v2.
type S3Store struct {
	cfg    S3Config
	client *s3.Client
	tm     *transfermanager.Client
	creds  aws.CredentialsProvider

	lifecycle s3Lifecycle    // lifecycle.go
	requests  *requestCounts // s3_requests.go
}

// NewS3Store returns a store for the bucket. It sends no request.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	cfg.setDefaults()
	if err := validateBucket(cfg.Bucket); err != nil {
		return nil, err
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix != "" {
		if err := ValidateKey(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3 prefix: %w", err)
		}
	}
	if cfg.Endpoint != "" {
		if err := validateEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("s3 part size %d: below S3's minimum of 5 MiB", cfg.PartSize)
	}
	if err := validateSSE(cfg.SSE, cfg.SSEKMSKeyID); err != nil {
		return nil, err
	}
	var loads []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		loads = append(loads, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		loads = append(loads, awsconfig.WithCredentialsProvider(cfg.Credentials))
	}
	switch {
	case cfg.HTTPClient != nil && cfg.CABundle != "":
		return nil, errors.New("s3: a CA bundle and an HTTP client of one's own cannot go together")
	case cfg.HTTPClient != nil:
		loads = append(loads, awsconfig.WithHTTPClient(cfg.HTTPClient))
	default:
		var roots *x509.CertPool
		if cfg.CABundle != "" {
			pool, err := caPool(cfg.CABundle)
			if err != nil {
				return nil, err
			}
			roots = pool
		}
		loads = append(loads, awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = 64
			if roots != nil {
				if t.TLSClientConfig == nil {
					t.TLSClientConfig = &tls.Config{}
				}
				t.TLSClientConfig.RootCAs = roots
			}
		})))
	}
	// The default chain reads the environment and the shared files now;
	// it asks no server anything until the first request.
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(), loads...)
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	cfg.Region = awsCfg.Region
	// The default configuration logs to stderr; the SDK would write a
	// DEBUG line for every GetObject from a store that sends no checksum
	// (MinIO, ranged reads). The broker logs what matters itself.
	awsCfg.Logger = logging.Nop{}
	requests := &requestCounts{}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, requests.countRequests)
		o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = cfg.MaxAttempts
			o.MaxBackoff = cfg.MaxBackoff
			// Retry every failed attempt, however many fail: the per-call
			// timeout bounds them, not a process-wide quota.
			o.RateLimiter = ratelimit.None
		})
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
	})
	creds := awsCfg.Credentials
	tm := transfermanager.New(client, func(o *transfermanager.Options) {
		o.PartSizeBytes = cfg.PartSize
		o.MultipartUploadThreshold = cfg.PartSize
		o.Concurrency = cfg.Concurrency
		o.FailTimeout = cfg.Timeout
	})
	return &S3Store{cfg: cfg, client: client, tm: tm, creds: creds, requests: requests}, nil
}

// CheckCredentials resolves the credentials through the default chain
// (which may ask the instance metadata service or STS), so that a broker
// without any fails at start with a one-line reason rather than at its
// first upload. It sends nothing to the bucket.
func (s *S3Store) CheckCredentials(ctx context.Context) error {
	if s.creds == nil {
		return errors.New("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity, or run with an instance or container role")
	}
	if _, err := s.creds.Retrieve(ctx); err != nil {
		return fmt.Errorf("no S3 credentials from the AWS default chain (environment, shared config and credentials files, web identity, container or instance role): %s", oneLine(err.Error()))
	}
	return nil
}

// oneLine folds an error's lines into one.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// sse sets the store's server-side encryption on a PutObject.
func (s *S3Store) sse(in *s3.PutObjectInput) {
	switch s.cfg.SSE {
	case SSES3:
		in.ServerSideEncryption = types.ServerSideEncryptionAes256
	case SSEKMS:
		in.ServerSideEncryption = types.ServerSideEncryptionAwsKms
		if s.cfg.SSEKMSKeyID != "" {
			in.SSEKMSKeyId = aws.String(s.cfg.SSEKMSKeyID)
		}
	}
}

func (s *S3Store) String() string {
	if s.cfg.Prefix == "" {
		return "s3://" + s.cfg.Bucket
	}
	return "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix
}

// Bucket and Prefix locate the store's keys (for lifecycle rules).
func (s *S3Store) Bucket() string { return s.cfg.Bucket }
func (s *S3Store) Prefix() string { return s.cfg.Prefix }

// Client is the underlying S3 client, for bucket administration
// (lifecycle rules) with the same configuration.
func (s *S3Store) Client() *s3.Client { return s.client }

func (s *S3Store) fullKey(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

func (s *S3Store) timeout(bytes int64) time.Duration {
	return s.cfg.Timeout + time.Duration(bytes/s.cfg.MinThroughput)*time.Second
}

func (s *S3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout(size))
	defer cancel()
	if size <= s.cfg.PartSize {
		_, err := s.putObject(ctx, key, r, size, nil)
		return err
	}
	body := &exactReader{r: r, left: size}
	// Multipart: the transfer manager buffers parts (so each can be
	// retried), uploads Concurrency at once and aborts the upload if a
	// part fails, our short-body error included. S3 allows 10,000 parts.
	partSize := max(s.cfg.PartSize, (size+9999)/10000)
	in := &transfermanager.UploadObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	switch s.cfg.SSE {
	case SSES3:
		in.ServerSideEncryption = tmtypes.ServerSideEncryptionAes256
	case SSEKMS:
		in.ServerSideEncryption = tmtypes.ServerSideEncryptionAwsKms
		if s.cfg.SSEKMSKeyID != "" {
			in.SSEKMSKeyID = aws.String(s.cfg.SSEKMSKeyID)
		}
	}
	out, err := s.tm.UploadObject(ctx, in, func(o *transfermanager.Options) { o.PartSizeBytes = partSize })
	if err != nil {
		if errors.Is(err, ErrShortBody) {
			return fmt.Errorf("put %s: %w", key, ErrShortBody)
		}
		return s.mapErr("put", key, err)
	}
	if body.left != 0 {
		// Cannot happen when the manager read to EOF; refuse to report
		// success for an object of the wrong size.
		return fmt.Errorf("put %s: %w: uploader stopped %d bytes early (upload %v)", key, ErrShortBody, body.left, aws.ToString(out.UploadID))
	}
	return nil
}

// PutIf sends one PutObject with If-None-Match: * or If-Match (objects
// under PartSize only: the writes that need a condition are small). A
// retried request whose first attempt landed fails its condition; the
// caller reads the object back to tell (see casManifest).
func (s *S3Store) PutIf(ctx context.Context, key string, r io.Reader, size int64, cond Cond) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := cond.validate(key); err != nil {
		return "", err
	}
	if size < 0 || size > s.cfg.PartSize {
		return "", fmt.Errorf("put %s: a conditional put takes 0 to %d bytes, not %d", key, s.cfg.PartSize, size)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout(size))
	defer cancel()
	out, err := s.putObject(ctx, key, r, size, func(in *s3.PutObjectInput) {
		if cond.IfAbsent {
			in.IfNoneMatch = aws.String("*")
		} else {
			in.IfMatch = aws.String(cond.IfMatch)
		}
	})
	if errors.Is(err, ErrNotFound) {
		// If-Match on a missing object: S3 answers 404.
		err = fmt.Errorf("put %s (%s): %w", key, cond, ErrPreconditionFailed)
	}
	if err != nil {
		return "", err
	}
	if aws.ToString(out.ETag) == "" {
		return "", fmt.Errorf("put %s: the store answered no ETag", key)
	}
	return aws.ToString(out.ETag), nil
}

// putObject sends one PutObject of size bytes from a buffer, so that
// retries can resend it and a short body fails before anything is sent;
// with is applied to the request (conditions). ctx bounds the call.
func (s *S3Store) putObject(ctx context.Context, key string, r io.Reader, size int64, with func(*s3.PutObjectInput)) (*s3.PutObjectOutput, error) {
	buf := make([]byte, size)
	if _, err := io.ReadFull(&exactReader{r: r, left: size}, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %d of %d bytes", ErrShortBody, len(buf), size)
		}
		return nil, fmt.Errorf("put %s: %w", key, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          bytes.NewReader(buf),
		ContentLength: aws.Int64(size),
	}
	s.sse(in)
	if with != nil {
		with(in)
	}
	out, err := s.client.PutObject(ctx, in)
	return out, s.mapErr("put", key, err)
}

func (s *S3Store) GetTagged(ctx context.Context, key string, max int64) ([]byte, string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout(max))
	defer cancel()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err != nil {
		return nil, "", s.mapErr("get", key, err)
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); n > max {
		return nil, aws.ToString(out.ETag), fmt.Errorf("get %s: %d bytes, more than %d: %w", key, n, max, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(out.Body, max+1))
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	if int64(len(b)) > max {
		return nil, aws.ToString(out.ETag), fmt.Errorf("get %s: more than %d bytes: %w", key, max, ErrTooLarge)
	}
	return b, aws.ToString(out.ETag), nil
}

func (s *S3Store) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: %s: offset %d", ErrInvalidRange, key, off)
	}
	if length == 0 {
		info, err := s.Head(ctx, key)
		if err != nil {
			return nil, err
		}
		if _, err := checkRange(key, info.Size, off, 0); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))}
	budget := int64(1 << 30) // unknown size: allow for a large object
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
		budget = length
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout(budget))
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		cancel()
		err = s.mapErr("get", key, err)
		if errors.Is(err, ErrInvalidRange) {
			// S3 refuses a range starting at the end; we serve it empty.
			info, herr := s.Head(context.WithoutCancel(ctx), key)
			if herr != nil {
				return nil, herr
			}
			if _, rerr := checkRange(key, info.Size, off, length); rerr != nil {
				return nil, rerr
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	return &cancelBody{ReadCloser: out.Body, cancel: cancel}, nil
}

// cancelBody ends the call's context when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (s *S3Store) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err != nil {
		return ObjectInfo{}, s.mapErr("head", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

func (s *S3Store) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return s.ListFrom(ctx, prefix, "")
}

// ListFrom lists with ListObjectsV2's StartAfter: S3 does not send the
// keys up to startAfter ("" lists from the start).
func (s *S3Store) ListFrom(ctx context.Context, prefix, startAfter string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := validatePrefix(prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		root := ""
		if s.cfg.Prefix != "" {
			root = s.cfg.Prefix + "/"
		}
		in := &s3.ListObjectsV2Input{
			Bucket:  aws.String(s.cfg.Bucket),
			Prefix:  aws.String(root + prefix),
			MaxKeys: aws.Int32(s.cfg.ListPageSize),
		}
		if startAfter != "" {
			in.StartAfter = aws.String(root + startAfter)
		}
		p := s3.NewListObjectsV2Paginator(s.client, in)
		for p.HasMorePages() {
			pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			page, err := p.NextPage(pctx)
			cancel()
			if err != nil {
				yield(ObjectInfo{}, s.mapErr("list", prefix, err))
				return
			}
			for _, o := range page.Contents {
				k := strings.TrimPrefix(aws.ToString(o.Key), root)
				if !yield(ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}, nil) {
					return
				}
			}
		}
	}
}

func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err = s.mapErr("delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (s *S3Store) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return err
		}
	}
	for len(keys) > 0 {
		batch := keys[:min(len(keys), s.cfg.DeleteBatch)]
		keys = keys[len(batch):]
		ids := make([]types.ObjectIdentifier, len(batch))
		for i, k := range batch {
			ids[i] = types.ObjectIdentifier{Key: aws.String(s.fullKey(k))}
		}
		bctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		out, err := s.client.DeleteObjects(bctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.cfg.Bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		cancel()
		if err != nil {
			return s.mapErr("delete", fmt.Sprintf("%d keys from %s", len(batch), batch[0]), err)
		}
		for _, e := range out.Errors {
			if code := aws.ToString(e.Code); code != "NoSuchKey" {
				return fmt.Errorf("delete %s: %s: %s", aws.ToString(e.Key), code, aws.ToString(e.Message))
			}
		}
	}
	return nil
}

// mapErr turns S3's "no such key" and "invalid range" into the sentinels
// and adds the operation and key.
func (s *S3Store) mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
		case "InvalidRange":
			return fmt.Errorf("%s %s: %w", op, key, ErrInvalidRange)
		case "PreconditionFailed", "ConditionalRequestConflict":
			return fmt.Errorf("%s %s: %w", op, key, ErrPreconditionFailed)
		}
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, s, err)
}
