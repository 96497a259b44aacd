package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestRestartDurability checks that records acknowledged with acks=1
// survive a clean stop (SIGTERM) and a kill -9 that follows the
// acknowledgement immediately, and that the broker comes back on the same
// port and data directory.
func TestRestartDurability(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{})
	const topic = "durable"
	createTopic(t, b.Addr(), topic, 2, nil)
	producer := func() *kgo.Client {
		return newClient(t, b.Addr(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var want []*kgo.Record
	cl := producer()
	for i := range 500 {
		want = append(want, &kgo.Record{
			Key:     fmt.Appendf(nil, "k%d", i),
			Value:   fmt.Appendf(nil, "value %d before a clean stop", i),
			Headers: []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}},
		})
	}
	if err := cl.ProduceSync(ctx, want...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cl.Close()
	addr := b.Addr()
	b.Stop()
	b.Restart()
	if b.Addr() != addr {
		t.Fatalf("restarted on %s, want the same address %s", b.Addr(), addr)
	}
	_, end := offsets(t, b.Addr(), topic)
	compareRecords(t, want, consumeAll(t, b.Addr(), topic, end))

	// kill -9 as soon as the acknowledgement arrives: the record was
	// handed to the operating system before the ack, so it survives.
	for round := range 3 {
		cl := producer()
		r := &kgo.Record{Key: fmt.Appendf(nil, "kill-%d", round), Value: fmt.Appendf(nil, "acknowledged just before kill -9 number %d", round)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("round %d: produce: %v", round, err)
		}
		b.Kill9()
		cl.Close()
		want = append(want, r)
		b.Restart()
		_, end := offsets(t, b.Addr(), topic)
		if end[r.Partition] < r.Offset+1 {
			t.Fatalf("round %d: partition %d end offset %d after restart, but offset %d was acknowledged", round, r.Partition, end[r.Partition], r.Offset)
		}
	}
	_, end = offsets(t, b.Addr(), topic)
	compareRecords(t, want, consumeAll(t, b.Addr(), topic, end))
	b.Stop()
}
