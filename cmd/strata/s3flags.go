package main

import (
	"flag"

	tierpkg "strata/tier"
)

// s3Flags are the flags of an s3:// tier, shared by serve and restore.
type s3Flags struct {
	endpoint, region, sse, kmsKeyID, caBundle *string
}

func addS3Flags(fs *flag.FlagSet) *s3Flags {
	return &s3Flags{
		endpoint: fs.String("s3-endpoint", "", "S3 endpoint URL for an s3:// tier (no credentials in it: they come from the AWS default chain)"),
		region:   fs.String("s3-region", "", "S3 region for an s3:// tier (default: AWS_REGION or the profile's, else us-east-1)"),
		sse:      fs.String("s3-sse", "", "server-side encryption of every object written: none, AES256 (SSE-S3) or aws:kms (SSE-KMS) (default: the bucket's)"),
		kmsKeyID: fs.String("s3-sse-kms-key-id", "", "with --s3-sse aws:kms: the KMS key id, ARN or alias (default: the account's aws/s3 key)"),
		caBundle: fs.String("s3-ca-bundle", "", "PEM file of the CAs an https endpoint's certificate must chain to, in place of the system's (default: AWS_CA_BUNDLE)"),
	}
}

// config is the tier configuration of url with these flags.
func (f *s3Flags) config(url string) tierpkg.Config {
	return tierpkg.Config{URL: url, S3Endpoint: *f.endpoint, S3Region: *f.region,
		S3SSE: *f.sse, S3SSEKMSKeyID: *f.kmsKeyID, S3CABundle: *f.caBundle}
}
