package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The broker runs the log cleaner on compacted topics: after enough
// overwrites, reading from the start returns the latest value of each key
// (older ones survive only in the active segment).
func TestBrokerCompactsTopic(t *testing.T) {
	ts := startTestServer(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("16384"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	}, "compacted")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.DefaultProduceTopic("compacted"), kgo.ProducerLinger(0))
	const keys, rounds = 10, 60
	for round := 0; round < rounds; round++ {
		for k := 0; k < keys; k++ {
			rec := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("v%d-%0200d", round, 0))}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A record without a key is refused on a compacted topic.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr(); err == nil {
		t.Fatal("null-key record accepted on a compacted topic")
	}
	total := int64(keys * rounds)
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs := consumeFrom(t, ts, "compacted", total)
		if len(recs) < int(total)/2 {
			// Every key's newest value must be present.
			latest := map[string]string{}
			for _, r := range recs {
				latest[string(r.Key)] = string(r.Value[:len(fmt.Sprintf("v%d-", rounds-1))])
			}
			for k := 0; k < keys; k++ {
				if got, want := latest[fmt.Sprintf("k%d", k)], fmt.Sprintf("v%d-", rounds-1); got != want {
					t.Fatalf("key k%d: latest value %q, want %q", k, got, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log not compacted: still %d records of %d after 20s", len(recs), total)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consumeFrom reads a partition-0 topic from the start up to end offset
// end, returning what it holds (fewer records when compacted).
func consumeFrom(t *testing.T, ts *testServer, topic string, end int64) []*kgo.Record {
	t.Helper()
	cl := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t)
	var out []*kgo.Record
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			out = append(out, r)
			if r.Offset >= end-1 {
				cl.Close()
				return out
			}
		}
	}
}
