package tier

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"

	"strata/index"
	"strata/internal/testenv"
)

func TestExpirationDays(t *testing.T) {
	for _, c := range []struct {
		retention, margin int64
		days              int32
		ok                bool
	}{
		{-1, dayMs, 0, false},
		{0, 0, 1, true},
		{1, 0, 1, true},
		{dayMs, 0, 1, true},
		{dayMs + 1, 0, 2, true},
		{7 * dayMs, dayMs, 8, true},
		{7*dayMs - 1, 1, 7, true},
		{3600000, dayMs, 2, true},
		{math.MaxInt64, dayMs, math.MaxInt32, true},
		{math.MaxInt64 / 2, 0, math.MaxInt32, true},
	} {
		days, ok := ExpirationDays(c.retention, c.margin)
		if days != c.days || ok != c.ok {
			t.Errorf("ExpirationDays(%d, %d) = %d, %v; want %d, %v", c.retention, c.margin, days, ok, c.days, c.ok)
		}
	}
}

func ruleIDs(rules []types.LifecycleRule) []string {
	var ids []string
	for _, r := range rules {
		ids = append(ids, aws.ToString(r.ID))
	}
	return ids
}

// TestPlanLifecycle checks the merge: foreign rules (including another
// prefix's "strata-" rules) kept first and unchanged, ours replaced, and
// no write when ours already match.
func TestPlanLifecycle(t *testing.T) {
	root := "cluster-a/"
	foreign := types.LifecycleRule{ID: aws.String("logs-expire"), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)}}
	otherCluster := topicRule("cluster-b/", topicY, 9)
	tagged := topicRule(root, topicY, 9) // our id, but a filter we never write: not ours
	tagged.Filter.Tag = &types.Tag{Key: aws.String("k"), Value: aws.String("v")}
	stale := topicRule(root, topicY, 30) // ours, for a topic no longer tiered
	oldX := topicRule(root, topicX, 2)   // ours, retention since changed
	existing := []types.LifecycleRule{foreign, stale, otherCluster, oldX}

	p := LifecyclePolicy{MarginMs: dayMs, AbortMultipartDays: 1, Topics: []TopicLifecycle{
		{TopicID: topicX, RetentionMs: 7 * dayMs},
		{TopicID: index.UUID{1, 2, 3}, RetentionMs: -1},
	}}
	rules, res, changed := planLifecycle(root, existing, p)
	if !changed || res.Rules != 2 || res.Foreign != 2 {
		t.Fatalf("changed %v, %+v", changed, res)
	}
	// Ours by id: topicX's id starts with '-', before "abort".
	want := []string{"logs-expire", topicRuleID(topicY), topicRuleID(topicX), abortRuleID(root)}
	if got := ruleIDs(rules); !slices.Equal(got, want) {
		t.Fatalf("rules %v, want %v", got, want)
	}
	if !reflect.DeepEqual(rules[0], foreign) || !reflect.DeepEqual(rules[1], otherCluster) {
		t.Fatal("foreign rules changed")
	}
	x := rules[2]
	if aws.ToInt32(x.Expiration.Days) != 8 || aws.ToString(x.Filter.Prefix) != root+TopicPrefix(topicX) || x.Status != types.ExpirationStatusEnabled {
		t.Fatalf("topic rule %+v", x)
	}
	a := rules[3]
	if aws.ToInt32(a.AbortIncompleteMultipartUpload.DaysAfterInitiation) != 1 || aws.ToString(a.Filter.Prefix) != root || a.Expiration != nil {
		t.Fatalf("multipart rule %+v", a)
	}
	// Applying the plan again changes nothing.
	if _, _, changed := planLifecycle(root, rules, p); changed {
		t.Fatal("second plan wants a write")
	}
	// The tagged rule with our id is foreign: kept, and ours added.
	rules, _, _ = planLifecycle(root, []types.LifecycleRule{tagged}, p)
	if got := ruleIDs(rules); !slices.Equal(got, []string{topicRuleID(topicY), topicRuleID(topicX), abortRuleID(root)}) {
		t.Fatalf("with a tagged rule: %v", got)
	}
	// No tiered topics and no multipart rule: nothing of ours left.
	rules, res, changed = planLifecycle(root, existing, LifecyclePolicy{})
	if !changed || res.Rules != 0 || !slices.Equal(ruleIDs(rules), []string{"logs-expire", topicRuleID(topicY)}) {
		t.Fatalf("emptied: %v %+v", ruleIDs(rules), res)
	}
	if abortRuleID("") == abortRuleID(root) || abortRuleID(root) == abortRuleID("cluster-b/") {
		t.Fatal("multipart rule ids collide across prefixes")
	}
}

// TestPlanLifecycleLimit checks that a bucket never gets more than
// MaxLifecycleRules rules: the topics that do not fit are counted.
func TestPlanLifecycleLimit(t *testing.T) {
	var existing []types.LifecycleRule
	for i := range 990 {
		existing = append(existing, types.LifecycleRule{ID: aws.String("f" + string(rune('a'+i%26)) + string(rune(i))), Status: types.ExpirationStatusEnabled})
	}
	var p LifecyclePolicy
	p.AbortMultipartDays = 1
	for i := range 20 {
		p.Topics = append(p.Topics, TopicLifecycle{TopicID: index.UUID{byte(i + 1)}, RetentionMs: dayMs})
	}
	rules, res, _ := planLifecycle("", existing, p)
	if len(rules) != MaxLifecycleRules || res.Skipped != 11 || res.Rules != 10 {
		t.Fatalf("%d rules, %+v", len(rules), res)
	}
}

// minioRules reads the bucket's lifecycle rules with minio-go, the
// independent client.
func minioRules(t *testing.T, c *minio.Client, bucket string) map[string]lifecycle.Rule {
	t.Helper()
	cfg, err := c.GetBucketLifecycle(context.Background(), bucket)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchLifecycleConfiguration" {
			return map[string]lifecycle.Rule{}
		}
		t.Fatalf("minio-go: get lifecycle: %v", err)
	}
	out := map[string]lifecycle.Rule{}
	for _, r := range cfg.Rules {
		out[r.ID] = r
	}
	return out
}

// TestS3StoreLifecycle syncs lifecycle rules on a real MinIO bucket and
// reads them back with minio-go: a rule an operator wrote stays as it
// was, topic rules follow retention changes and go when the topic does.
func TestS3StoreLifecycle(t *testing.T) {
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	s, _ := newMinIOStore(t, func(c *S3Config) { c.Bucket = bucket })
	mc := m.Client(t)
	ctx := ctxT(t)

	// An operator's rule, written with minio-go.
	own := lifecycle.NewConfiguration()
	own.Rules = []lifecycle.Rule{{
		ID: "operator-tmp", Status: "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: "tmp/"},
		Expiration: lifecycle.Expiration{Days: 2},
	}}
	if err := mc.SetBucketLifecycle(ctx, bucket, own); err != nil {
		t.Fatalf("minio-go: set lifecycle: %v", err)
	}
	root := s.Prefix() + "/"

	p := LifecyclePolicy{MarginMs: dayMs, AbortMultipartDays: 1, Topics: []TopicLifecycle{
		{TopicID: topicX, RetentionMs: 7 * dayMs},
		{TopicID: topicY, RetentionMs: 3600000},
		{TopicID: index.UUID{1, 2, 3}, RetentionMs: -1},
	}}
	res, err := s.SyncLifecycle(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Foreign != 1 {
		t.Fatalf("first sync: %+v", res)
	}
	check := func(want map[string]int) {
		t.Helper()
		got := minioRules(t, mc, bucket)
		op, ok := got["operator-tmp"]
		if !ok || op.RuleFilter.Prefix != "tmp/" || op.Expiration.Days != 2 || op.Status != "Enabled" {
			t.Fatalf("operator's rule changed: %+v (present %v)", op, ok)
		}
		delete(got, "operator-tmp")
		if ab, ok := got[abortRuleID(root)]; ok {
			if ab.AbortIncompleteMultipartUpload.DaysAfterInitiation != 1 || ab.RuleFilter.Prefix != root {
				t.Fatalf("multipart rule %+v", ab)
			}
			delete(got, abortRuleID(root))
		} else if !res.AbortUnsupported {
			t.Fatal("no multipart rule, and the store did not say it was refused")
		}
		if len(got) != len(want) {
			t.Fatalf("rules %v, want %v", got, want)
		}
		for id, days := range want {
			r, ok := got[LifecycleRuleIDPrefix+id]
			if !ok {
				t.Fatalf("no rule for topic %s; rules %v", id, got)
			}
			if int(r.Expiration.Days) != days || r.RuleFilter.Prefix != root+id+"/" || r.Status != "Enabled" {
				t.Fatalf("rule of topic %s: %d days on %q (%s), want %d days on %q", id, r.Expiration.Days, r.RuleFilter.Prefix, r.Status, days, root+id+"/")
			}
		}
	}
	check(map[string]int{topicX.String(): 8, topicY.String(): 2})
	t.Logf("multipart rule refused by the server: %v", res.AbortUnsupported)

	// Nothing to change: no write.
	if res, err = s.SyncLifecycle(ctx, p); err != nil || res.Changed {
		t.Fatalf("second sync: %+v, %v", res, err)
	}

	// Retention of X changes, Y is no longer tiered.
	p.Topics = []TopicLifecycle{{TopicID: topicX, RetentionMs: 30 * dayMs}}
	if res, err = s.SyncLifecycle(ctx, p); err != nil || !res.Changed {
		t.Fatalf("sync after changes: %+v, %v", res, err)
	}
	check(map[string]int{topicX.String(): 31})

	// Rules edited by hand are put back.
	cfg, err := mc.GetBucketLifecycle(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Rules {
		if cfg.Rules[i].ID == LifecycleRuleIDPrefix+topicX.String() {
			cfg.Rules[i].Expiration.Days = 1
		}
	}
	if err := mc.SetBucketLifecycle(ctx, bucket, cfg); err != nil {
		t.Fatal(err)
	}
	if res, err = s.SyncLifecycle(ctx, p); err != nil || !res.Changed {
		t.Fatalf("sync after a hand edit: %+v, %v", res, err)
	}
	check(map[string]int{topicX.String(): 31})

	// The topic is deleted: only the operator's rule (and the multipart
	// rule) remain.
	p.Topics = nil
	if res, err = s.SyncLifecycle(ctx, p); err != nil || !res.Changed {
		t.Fatalf("sync after the deletion: %+v, %v", res, err)
	}
	check(map[string]int{})

	// Without the operator's rule and ours, the configuration goes.
	if err := mc.SetBucketLifecycle(ctx, bucket, lifecycle.NewConfiguration()); err != nil {
		// minio-go deletes the configuration when given no rules.
		t.Fatal(err)
	}
	p.AbortMultipartDays = 0
	if _, err = s.SyncLifecycle(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := minioRules(t, mc, bucket); len(got) != 0 {
		t.Fatalf("rules left: %v", got)
	}
}
