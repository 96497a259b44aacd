// Package tier will hold object storage: the ObjectStore interface (S3 and
// a local directory), the segment uploader, the remote reader and its
// cache, and remote retention. Nothing is here yet; see the tiered-storage
// issue.
package tier
