package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The restore commits only the offsets a group lacks (one it committed
// meanwhile is newer than the snapshot's) and a group with members is a
// member error, which the restore warns about and passes.
func TestCommitRestoredSkipsCommittedPartitions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	var newer kadm.Offsets
	newer.Add(kadm.Offset{Topic: "t", Partition: 0, At: 100, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(ctx, "g", newer); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	var restored kadm.Offsets
	restored.Add(kadm.Offset{Topic: "t", Partition: 0, At: 5, LeaderEpoch: -1})
	restored.Add(kadm.Offset{Topic: "t", Partition: 1, At: 7, LeaderEpoch: -1})
	if err := commitRestored(ctx, adm, "g", restored); err != nil {
		t.Fatal(err)
	}
	got, err := adm.FetchOffsets(ctx, "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch: %v %v", err, got.Error())
	}
	for p, want := range map[int32]int64{0: 100, 1: 7} {
		if o, ok := got.Lookup("t", p); !ok || o.At != want {
			t.Fatalf("t-%d: %+v, want %d", p, o, want)
		}
	}

	// A group with members refuses a commit without a member id.
	c.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.OffsetCommitRequest)
		if req.Group != "busy" {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID // v10+ names topics by id
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownMemberID.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	done := make(chan error, 1)
	go func() { done <- commitRestored(ctx, adm, "busy", restored) }()
	select {
	case err := <-done:
		if !memberError(err) {
			t.Fatalf("a group with members: %v, want a member error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("commitRestored did not return")
	}
}
