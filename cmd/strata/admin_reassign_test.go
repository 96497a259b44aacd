package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReassignStatusAndCancel runs reassign status and cancel against
// kfake answering ListPartitionReassignments with one partition moving
// and AlterPartitionReassignments with NO_REASSIGNMENT_IN_PROGRESS for
// another.
func TestReassignStatusAndCancel(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var b strings.Builder
	if code := reassignStatus(ctx, cl, &b); code != 0 || b.String() != "no reassignment in progress\n" {
		t.Errorf("status with none: %d %q", code, b.String())
	}

	moving := true
	c.ControlKey(int16(kmsg.ListPartitionReassignments), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ListPartitionReassignmentsRequest)
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		if req.Topics != nil {
			t.Errorf("listed %v, want a null topic list (all)", req.Topics)
		}
		if moving {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = 1, []int32{2, 0}, []int32{2}, []int32{0}
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	var asked []string
	c.ControlKey(int16(kmsg.AlterPartitionAssignments), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.AlterPartitionAssignmentsRequest)
		resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if rp.Replicas != nil {
					t.Errorf("cancel sent replicas %v", rp.Replicas)
				}
				asked = append(asked, fmt.Sprintf("%s:%d", rt.Topic, rp.Partition))
				sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				sp.Partition = rp.Partition
				if rp.Partition == 0 {
					sp.ErrorCode = kerr.NoReassignmentInProgress.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	b.Reset()
	if code := reassignStatus(ctx, cl, &b); code != 0 {
		t.Errorf("status: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "TOPIC PARTITION REPLICAS ADDING REMOVING BEHIND" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "t 1 [2 0] [2] [0] 2:") {
		t.Errorf("status:\n%s", b.String())
	}

	// Named: t:0 fails with Kafka's error name, t:1 is cancelled.
	b.Reset()
	if code := reassignCancel(ctx, cl, &b, []string{"t:0", "t:1"}, true); code != 1 {
		t.Errorf("cancel t:0 t:1: exit %d, want 1", code)
	}
	if b.String() != "cancelled t-1\n" {
		t.Errorf("cancel output %q", b.String())
	}
	// All: what is listed.
	asked = nil
	b.Reset()
	if code := reassignCancel(ctx, cl, &b, nil, true); code != 0 || b.String() != "cancelled t-1\n" || strings.Join(asked, " ") != "t:1" {
		t.Errorf("cancel all: exit %d, %q, asked %v", code, b.String(), asked)
	}
	// Bad arguments are refused before anything is sent.
	if code := reassignCancel(ctx, cl, &b, []string{"t:x"}, true); code != 1 {
		t.Errorf("cancel t:x: exit %d", code)
	}
	moving = false
	b.Reset()
	if code := reassignCancel(ctx, cl, &b, []string{"t"}, true); code != 1 {
		t.Errorf("cancel t with nothing moving: exit %d, want 1", code)
	}
}
