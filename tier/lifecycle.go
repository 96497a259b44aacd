package tier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"strata/index"
)

// Bucket lifecycle rules: a safety net that expires a tiered topic's
// objects some margin after its retention.ms, for when no broker is left
// to delete them, and aborts multipart uploads that never completed. See
// "Lifecycle rules" in the package doc.

// LifecycleRuleIDPrefix starts the id of every lifecycle rule Strata
// writes; rules without it are never changed.
const LifecycleRuleIDPrefix = "strata-"

// MaxLifecycleRules is S3's limit of rules in a bucket's lifecycle
// configuration.
const MaxLifecycleRules = 1000

const dayMs = 24 * 60 * 60 * 1000

// LifecycleStore is implemented by stores whose bucket has lifecycle
// rules (S3Store). The broker type-asserts its store to it.
type LifecycleStore interface {
	ObjectStore
	// SyncLifecycle makes the rules this store owns in its bucket (ids
	// starting with LifecycleRuleIDPrefix, filtered on this store's
	// prefix) match the policy, and leaves every other rule as it was.
	SyncLifecycle(ctx context.Context, p LifecyclePolicy) (LifecycleResult, error)
}

// LifecyclePolicy is what the bucket's rules should say.
type LifecyclePolicy struct {
	// Topics are the tiered topics; a topic not listed has no rule.
	Topics []TopicLifecycle
	// MarginMs is added to each topic's retention before it is rounded
	// up to whole days.
	MarginMs int64
	// AbortMultipartDays, when > 0, adds one rule over the store's prefix
	// that aborts multipart uploads this many days after they started.
	AbortMultipartDays int32
}

// TopicLifecycle is one tiered topic's retention.
type TopicLifecycle struct {
	TopicID index.UUID
	// RetentionMs is the topic's retention.ms; < 0 (unlimited) gives no
	// rule.
	RetentionMs int64
}

// LifecycleResult says what a sync did.
type LifecycleResult struct {
	Changed bool // the configuration was written (or deleted)
	Rules   int  // rules of ours in the bucket now
	Foreign int  // rules not ours, kept
	// Skipped counts topics left without a rule because the bucket would
	// exceed MaxLifecycleRules.
	Skipped int
	// AbortUnsupported is set when the server refused the
	// AbortIncompleteMultipartUpload rule (MinIO does; it aborts stale
	// uploads by itself); the topic rules were written without it.
	AbortUnsupported bool
}

// ExpirationDays is the number of whole days after which a topic's
// objects expire: retention.ms plus the margin, rounded up, at least 1.
// ok is false when retention is unlimited (retention.ms < 0).
func ExpirationDays(retentionMs, marginMs int64) (days int32, ok bool) {
	if retentionMs < 0 {
		return 0, false
	}
	total := retentionMs + max(marginMs, 0)
	if total < retentionMs { // overflow: as good as forever
		return math.MaxInt32, true
	}
	d := total / dayMs
	if total%dayMs != 0 {
		d++
	}
	return int32(min(max(d, 1), math.MaxInt32)), true
}

// topicRuleID is the id of a topic's rule.
func topicRuleID(id index.UUID) string { return LifecycleRuleIDPrefix + id.String() }

// abortRuleID is the id of the multipart rule of the store whose keys
// start with root: stores sharing a bucket under different prefixes get
// different ids.
func abortRuleID(root string) string {
	if root == "" {
		return LifecycleRuleIDPrefix + "abort-multipart"
	}
	h := fnv.New64a()
	h.Write([]byte(root))
	return fmt.Sprintf("%sabort-multipart-%016x", LifecycleRuleIDPrefix, h.Sum64())
}

// rulePrefix is the prefix a rule filters on: Filter.Prefix, else the
// deprecated Rule.Prefix; ok is false when the filter is anything else
// (tags, sizes, And).
func rulePrefix(r *types.LifecycleRule) (string, bool) {
	if r.Filter != nil {
		f := r.Filter
		if f.And != nil || f.Tag != nil || f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil {
			return "", false
		}
		return aws.ToString(f.Prefix), true
	}
	return aws.ToString(r.Prefix), true
}

// ownRule reports whether r is one of the rules the store under root
// writes: a topic rule ("strata-<topic id>" on root+"<topic id>/") or the
// multipart rule (on root). A "strata-" rule of another prefix (another
// cluster sharing the bucket) is not ours.
func ownRule(root string, r *types.LifecycleRule) bool {
	id := aws.ToString(r.ID)
	if !strings.HasPrefix(id, LifecycleRuleIDPrefix) {
		return false
	}
	prefix, ok := rulePrefix(r)
	if !ok {
		return false
	}
	if id == abortRuleID(root) {
		return prefix == root
	}
	tid, err := index.ParseUUID(strings.TrimPrefix(id, LifecycleRuleIDPrefix))
	return err == nil && prefix == root+TopicPrefix(tid)
}

func topicRule(root string, id index.UUID, days int32) types.LifecycleRule {
	return types.LifecycleRule{
		ID:         aws.String(topicRuleID(id)),
		Status:     types.ExpirationStatusEnabled,
		Filter:     &types.LifecycleRuleFilter{Prefix: aws.String(root + TopicPrefix(id))},
		Expiration: &types.LifecycleExpiration{Days: aws.Int32(days)},
	}
}

func abortRule(root string, days int32) types.LifecycleRule {
	return types.LifecycleRule{
		ID:                             aws.String(abortRuleID(root)),
		Status:                         types.ExpirationStatusEnabled,
		Filter:                         &types.LifecycleRuleFilter{Prefix: aws.String(root)},
		AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(days)},
	}
}

// sameRule compares the parts of a rule that Strata sets.
func sameRule(a, b *types.LifecycleRule) bool {
	pa, oka := rulePrefix(a)
	pb, okb := rulePrefix(b)
	days := func(e *types.LifecycleExpiration) (int32, bool) {
		if e == nil || e.Date != nil || e.ExpiredObjectDeleteMarker != nil {
			return 0, e == nil
		}
		return aws.ToInt32(e.Days), true
	}
	abort := func(x *types.AbortIncompleteMultipartUpload) int32 {
		if x == nil {
			return 0
		}
		return aws.ToInt32(x.DaysAfterInitiation)
	}
	da, okda := days(a.Expiration)
	db, okdb := days(b.Expiration)
	return aws.ToString(a.ID) == aws.ToString(b.ID) && a.Status == b.Status && oka && okb && pa == pb &&
		okda && okdb && da == db && abort(a.AbortIncompleteMultipartUpload) == abort(b.AbortIncompleteMultipartUpload) &&
		len(a.Transitions) == 0 && len(b.Transitions) == 0 &&
		len(a.NoncurrentVersionTransitions) == 0 && len(b.NoncurrentVersionTransitions) == 0 &&
		a.NoncurrentVersionExpiration == nil && b.NoncurrentVersionExpiration == nil
}

// planLifecycle merges the policy into a bucket's rules: the rules not
// ours first, as they were and in their order, then ours sorted by id.
// changed is false when ours already say what the policy says.
func planLifecycle(root string, existing []types.LifecycleRule, p LifecyclePolicy) (rules []types.LifecycleRule, res LifecycleResult, changed bool) {
	var foreign, current []types.LifecycleRule
	for _, r := range existing {
		if ownRule(root, &r) {
			current = append(current, r)
		} else {
			foreign = append(foreign, r)
		}
	}
	var want []types.LifecycleRule
	if p.AbortMultipartDays > 0 {
		want = append(want, abortRule(root, p.AbortMultipartDays))
	}
	topics := slices.Clone(p.Topics)
	slices.SortFunc(topics, func(a, b TopicLifecycle) int { return strings.Compare(a.TopicID.String(), b.TopicID.String()) })
	topics = slices.CompactFunc(topics, func(a, b TopicLifecycle) bool { return a.TopicID == b.TopicID })
	for _, t := range topics {
		days, ok := ExpirationDays(t.RetentionMs, p.MarginMs)
		if !ok {
			continue
		}
		if len(foreign)+len(want) >= MaxLifecycleRules {
			res.Skipped++
			continue
		}
		want = append(want, topicRule(root, t.TopicID, days))
	}
	byID := func(a, b types.LifecycleRule) int { return cmp.Compare(aws.ToString(a.ID), aws.ToString(b.ID)) }
	slices.SortFunc(want, byID)
	slices.SortFunc(current, byID)
	changed = !slices.EqualFunc(want, current, func(a, b types.LifecycleRule) bool { return sameRule(&a, &b) })
	res.Rules, res.Foreign = len(want), len(foreign)
	return append(foreign, want...), res, changed
}

// s3Lifecycle is the S3Store's lifecycle state.
type s3Lifecycle struct {
	abortUnsupported atomic.Bool // the server refused the multipart rule once
}

// root is the prefix of every key of the store inside the bucket.
func (s *S3Store) root() string {
	if s.cfg.Prefix == "" {
		return ""
	}
	return s.cfg.Prefix + "/"
}

// SyncLifecycle reads the bucket's lifecycle configuration, replaces the
// rules of this store with the policy's and writes it back if that
// changed anything (deleting the configuration when no rule is left).
// Rules of others are kept, but only the fields aws-sdk-go-v2 models
// survive the rewrite. A server that refuses the multipart rule gets the
// topic rules without it, then and in later syncs. Concurrent writers of
// the bucket's configuration can lose each other's updates: only one
// broker of a cluster should call it.
func (s *S3Store) SyncLifecycle(ctx context.Context, p LifecyclePolicy) (LifecycleResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	existing, minSize, err := s.getLifecycle(ctx)
	if err != nil {
		return LifecycleResult{}, err
	}
	abortUnsupported := s.lifecycle.abortUnsupported.Load()
	if abortUnsupported {
		p.AbortMultipartDays = 0
	}
	rules, res, changed := planLifecycle(s.root(), existing, p)
	res.AbortUnsupported = abortUnsupported
	if !changed {
		return res, nil
	}
	err = s.putLifecycle(ctx, rules, minSize)
	if err != nil && p.AbortMultipartDays > 0 && isMalformed(err) {
		// MinIO parses AbortIncompleteMultipartUpload away and then finds
		// a rule without an action.
		s.lifecycle.abortUnsupported.Store(true)
		p.AbortMultipartDays = 0
		rules, res, changed = planLifecycle(s.root(), existing, p)
		res.AbortUnsupported = true
		if !changed {
			return res, nil
		}
		err = s.putLifecycle(ctx, rules, minSize)
	}
	if err != nil {
		return res, err
	}
	res.Changed = true
	return res, nil
}

func (s *S3Store) getLifecycle(ctx context.Context) ([]types.LifecycleRule, types.TransitionDefaultMinimumObjectSize, error) {
	out, err := s.client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(s.cfg.Bucket)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration" {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("get lifecycle configuration of bucket %s: %w", s.cfg.Bucket, err)
	}
	return out.Rules, out.TransitionDefaultMinimumObjectSize, nil
}

func (s *S3Store) putLifecycle(ctx context.Context, rules []types.LifecycleRule, minSize types.TransitionDefaultMinimumObjectSize) error {
	if len(rules) == 0 {
		if _, err := s.client.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: aws.String(s.cfg.Bucket)}); err != nil {
			return fmt.Errorf("delete lifecycle configuration of bucket %s: %w", s.cfg.Bucket, err)
		}
		return nil
	}
	_, err := s.client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                             aws.String(s.cfg.Bucket),
		LifecycleConfiguration:             &types.BucketLifecycleConfiguration{Rules: rules},
		TransitionDefaultMinimumObjectSize: minSize,
	})
	if err != nil {
		return fmt.Errorf("put lifecycle configuration of bucket %s (%d rules): %w", s.cfg.Bucket, len(rules), err)
	}
	return nil
}

func isMalformed(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "MalformedXML" || ae.ErrorCode() == "InvalidArgument" || ae.ErrorCode() == "InvalidRequest")
}
