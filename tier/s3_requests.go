package tier

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/aws/smithy-go/middleware"
)

// requestCounts counts the HTTP requests an S3Store sent, by S3
// operation, every attempt of a retried call included: what the bucket
// bills.
type requestCounts struct {
	m sync.Map // operation name → *atomic.Int64
}

func (c *requestCounts) add(op string) {
	if op == "" {
		op = "Unknown"
	}
	v, ok := c.m.Load(op)
	if !ok {
		v, _ = c.m.LoadOrStore(op, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (c *requestCounts) snapshot() map[string]int64 {
	out := map[string]int64{}
	c.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// countRequests is an API option that counts each attempt of a call, as
// the last middleware of the finalize step (after the retryer).
func (c *requestCounts) countRequests(st *middleware.Stack) error {
	return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("StrataCountRequests",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.add(middleware.GetOperationName(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// RequestCounts returns the requests sent to the bucket so far, by S3
// operation (PutObject, GetObject, ListObjectsV2, …), retries included.
func (s *S3Store) RequestCounts() map[string]int64 { return s.requests.snapshot() }

// RequestClass is the S3 price class of an operation: "A" (writes and
// listings: PUT, COPY, POST, LIST), "B" (reads: GET, HEAD and the rest)
// or "free" (DELETE, and aborting a multipart upload).
func RequestClass(op string) string {
	switch op {
	case "PutObject", "CopyObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
		"CompleteMultipartUpload", "ListObjectsV2", "ListObjects", "ListMultipartUploads", "ListParts",
		"PutBucketLifecycleConfiguration", "ListBuckets", "CreateBucket":
		return "A"
	case "DeleteObject", "DeleteObjects", "AbortMultipartUpload":
		return "free"
	}
	return "B"
}

// RequestPrices are the prices assumed for a request of each class, in
// US dollars: Amazon S3 Standard's in us-east-1 ($0.005 per 1,000 class
// A requests, $0.0004 per 1,000 class B ones).
var RequestPrices = map[string]float64{"A": 0.005 / 1000, "B": 0.0004 / 1000, "free": 0}
