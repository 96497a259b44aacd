package controller

import (
	"context"
	"errors"
	"testing"
)

func TestEmbeddedPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	self := Broker{ID: 3, Host: "127.0.0.1", Port: 9092}
	ctx := context.Background()
	e, err := OpenEmbedded(dir, self)
	if err != nil {
		t.Fatal(err)
	}
	ch := e.Changes()
	top, err := e.CreateTopic(ctx, CreateTopicRequest{Name: "a", NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no change signalled after CreateTopic")
	}
	if _, err := e.CreateTopic(ctx, CreateTopicRequest{Name: "a", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v, want ErrTopicExists", err)
	}
	if _, err := e.CreateTopic(ctx, CreateTopicRequest{Name: "b", NumPartitions: 1, ReplicationFactor: 2}); !errors.Is(err, ErrInvalidReplication) {
		t.Fatalf("rf 2 on one broker: %v, want ErrInvalidReplication", err)
	}
	if _, err := e.CreateTopic(ctx, CreateTopicRequest{Name: "v", NumPartitions: 1, ReplicationFactor: 1, ValidateOnly: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreatePartitions(ctx, "a", 4, false); err != nil {
		t.Fatal(err)
	}
	if err := e.CreatePartitions(ctx, "a", 3, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink: %v, want ErrInvalidPartitions", err)
	}
	if err := e.SetBrokerConfigs(ctx, "", map[string]string{"log.retention.ms": "5"}); err != nil {
		t.Fatal(err)
	}
	first, err := e.AllocateProducerIDs(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}

	e2, err := OpenEmbedded(dir, self)
	if err != nil {
		t.Fatal(err)
	}
	md := e2.Metadata()
	got := md.Topics["a"]
	if got == nil || got.ID != top.ID || len(got.Partitions) != 4 || got.Configs["retention.ms"] != "1000" {
		t.Fatalf("reopened topic = %+v, want id %x with 4 partitions and retention.ms", got, top.ID)
	}
	if md.Topics["v"] != nil {
		t.Fatal("validate-only topic was created")
	}
	if md.TopicIDs[top.ID] != "a" || md.BrokerConfigs[""]["log.retention.ms"] != "5" {
		t.Fatalf("reopened metadata lost ids or broker configs: %+v", md)
	}
	next, err := e2.AllocateProducerIDs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if next < first+1000 {
		t.Fatalf("producer id %d reused after reopen (first block started at %d)", next, first)
	}
	for _, p := range got.Partitions {
		if p.Leader != 3 || len(p.ISR) != 1 || p.ISR[0] != 3 {
			t.Fatalf("partition %d: leader %d isr %v, want broker 3", p.Index, p.Leader, p.ISR)
		}
	}
	if err := e2.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e2.DeleteTopic(ctx, "a"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v, want ErrUnknownTopic", err)
	}
}
