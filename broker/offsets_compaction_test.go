package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// __consumer_offsets is compacted: many commits of one group's offsets
// shrink to about one record per key, and the coordinator still loads the
// latest offsets from the compacted log after a restart.
func TestOffsetsTopicCompactsAndReloads(t *testing.T) {
	dir := t.TempDir()
	sets := map[string]string{"offsets.topic.num.partitions": "1", "log.cleaner.backoff.ms": "50"}
	ts := startTestServerDir(t, dir, sets)
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "data"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "data", Partition: 0, At: at, LeaderEpoch: -1})
		os.Add(kadm.Offset{Topic: "data", Partition: 1, At: at * 2, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(ctx, "g", os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
	commit(0) // creates __consumer_offsets
	p := ts.partition("__consumer_offsets", 0)
	if p == nil {
		t.Fatal("no __consumer_offsets-0 here")
	}
	// What the commits below would take uncompacted: the cleaner may
	// already be at work when they end, so the log's size then is no
	// measure.
	perCommit := p.Log().Size()
	r, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("16384")},
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("0.01")},
	}, "__consumer_offsets")
	if err == nil {
		for _, x := range r {
			if x.Err != nil {
				err = x.Err
			}
		}
	}
	if err != nil {
		t.Fatalf("alter __consumer_offsets: %v", err)
	}
	const commits = 400
	for i := int64(1); i <= commits; i++ {
		commit(i)
	}
	full := perCommit * (commits + 1)
	deadline := time.Now().Add(20 * time.Second)
	for p.Log().Size() > full/2 {
		if time.Now().After(deadline) {
			t.Fatalf("__consumer_offsets not compacted: %d bytes of %d after 20s", p.Log().Size(), full)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ts.Close()

	ts2 := startTestServerDir(t, dir, sets)
	adm2 := ts2.admin(t)
	var got kadm.OffsetResponses
	deadline = time.Now().Add(20 * time.Second)
	for {
		got, err = adm2.FetchOffsets(ctx, "g")
		if err == nil && got.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch offsets after restart: %v / %v", err, got.Error())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for part, want := range map[int32]int64{0: commits, 1: 2 * commits} {
		o, ok := got.Lookup("data", part)
		if !ok || o.At != want {
			t.Fatalf("partition %d after compaction and restart: %+v (found %v), want %d", part, o, ok, want)
		}
	}
}
