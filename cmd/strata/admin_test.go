package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeShowsOffsetErrors pins issue 14, item 6: describe dropped the
// errors of ListStartOffsets and ListEndOffsets and showed END 0.
func TestDescribeShowsOffsetErrors(t *testing.T) {
	td := kadm.TopicDetails{
		"t": {Topic: "t", Partitions: kadm.PartitionDetails{
			0: {Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
			1: {Topic: "t", Partition: 1, Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 1}, ISR: []int32{2}},
			2: {Topic: "t", Partition: 2, Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1, 2}},
		}},
		"gone": {Topic: "gone", Err: kerr.UnknownTopicOrPartition},
	}
	starts := offsets{ListedOffsets: kadm.ListedOffsets{"t": {
		0: {Topic: "t", Partition: 0, Offset: 5},
		1: {Topic: "t", Partition: 1, Offset: 7},
		2: {Topic: "t", Partition: 2, Offset: 0},
	}}}
	// Partition 1's leader answered NOT_LEADER_OR_FOLLOWER; the shard of
	// the request asking for partition 2 failed as a whole, as did another.
	shard := func(p int32, err error) kadm.ShardError {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "t", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: p, Timestamp: -1}}}}
		return kadm.ShardError{Req: req, Err: err}
	}
	ends := offsets{
		ListedOffsets: kadm.ListedOffsets{"t": {
			0: {Topic: "t", Partition: 0, Offset: 42},
			1: {Topic: "t", Partition: 1, Offset: 0, Err: kerr.NotLeaderForPartition},
		}},
		err: &kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{shard(9, kerr.KafkaStorageError), shard(2, kerr.UnknownTopicOrPartition)}},
	}
	var b strings.Builder
	sz := sizes{local: map[partKey]int64{{"t", 0}: 2048, {"t", 1}: 10}, remote: map[partKey]int64{{"t", 0}: 3 << 20}}
	if bad := writeDescribe(&b, td, starts, ends, sz); bad != 3 {
		t.Errorf("%d rows with errors, want 3 (gone, t/1, t/2)", bad)
	}
	want := "TOPIC\tPARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tSTART\tEND\tLOCAL\tREMOTE\tERROR\n" +
		"gone\t\t\t\t\t\t\t\t\t\tUNKNOWN_TOPIC_OR_PARTITION\n" +
		"t\t0\t1\t3\t[1 2]\t[1 2]\t5\t42\t2.0 kB\t3.0 MB\t\n" +
		"t\t1\t2\t4\t[2 1]\t[2]\t7\t-\t10 B\t-\tEND: NOT_LEADER_OR_FOLLOWER\n" +
		"t\t2\t1\t5\t[1 2]\t[1 2]\t0\t-\t-\t-\tEND: UNKNOWN_TOPIC_OR_PARTITION\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}

	// A request that failed before any shard: its error, not a number.
	b.Reset()
	failed := offsets{err: errors.New("context deadline exceeded")}
	if bad := writeDescribe(&b, kadm.TopicDetails{"t": {Topic: "t", Partitions: kadm.PartitionDetails{0: td["t"].Partitions[0]}}}, failed, failed, sizes{}); bad != 1 ||
		!strings.Contains(b.String(), "\t-\t-\t-\t-\tSTART: context deadline exceeded, END: context deadline exceeded\n") {
		t.Errorf("%d rows with errors, table:\n%s", bad, b.String())
	}
}

// TestDescribeAgainstBroker runs describe against kfake whose ListOffsets
// answers NOT_LEADER_OR_FOLLOWER for the end offset of one partition.
func TestDescribeAgainstBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequestRetries(1),
		kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.ControlKey(int16(kmsg.ListOffsets), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if rp.Timestamp != -1 { // only end offsets are controlled
					return nil, nil, false
				}
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.Offset = 2 // partition 0 holds two records
				if rp.Partition == 1 {
					sp.Offset, sp.ErrorCode = 0, kerr.NotLeaderForPartition.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var b strings.Builder
	e := &adminEnv{stdout: &b}
	if code := describe(ctx, kadm.NewClient(cl), e, []string{"t"}); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	lines := strings.Split(b.String(), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "TOPIC") ||
		!strings.Contains(lines[1], " 0 ") || strings.Join(strings.Fields(lines[1])[6:8], " ") != "0 2" ||
		strings.Join(strings.Fields(lines[2])[6:8], " ") != "0 -" || !strings.HasSuffix(lines[2], "END: NOT_LEADER_OR_FOLLOWER") {
		t.Errorf("describe:\n%s", b.String())
	}
}
