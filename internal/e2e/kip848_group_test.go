package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// kip848Consumer is one franz-go consumer using the server-side balancer
// (KIP-848), recording every value it processes.
type kip848Consumer struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
}

type processed struct {
	mu   sync.Mutex
	seen map[string]int
}

func (p *processed) count() (distinct, dups int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.seen {
		if n > 1 {
			dups += n - 1
		}
	}
	return len(p.seen), dups
}

func startKIP848Consumer(t *testing.T, addr, group, topic string, p *processed, opts ...kgo.Opt) *kip848Consumer {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(200 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	c := &kip848Consumer{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				p.mu.Lock()
				p.seen[string(r.Value)]++
				p.mu.Unlock()
			})
		}
	}()
	t.Cleanup(c.leave)
	return c
}

// leave stops polling and leaves the group cleanly (commits, then a
// heartbeat with member epoch -1).
func (c *kip848Consumer) leave() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
	c.cl.Close()
}

func describeKIP848(t *testing.T, addr, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	cl := newClient(t, addr)
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return kmsg.NewConsumerGroupDescribeResponseGroup()
	}
	return resp.Groups[0]
}

func stableWith(t *testing.T, addr, group string, members, partitions int) func() bool {
	return func() bool {
		d := describeKIP848(t, addr, group)
		if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != members {
			return false
		}
		total := 0
		for _, m := range d.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				total += len(tp.Partitions)
			}
		}
		return total == partitions
	}
}

// TestKIP848ConsumerGroup runs franz-go consumers with the next-generation
// protocol against a broker process: members join and leave while records
// flow, every record is processed exactly once (clean leaves commit
// first), and the group and its offsets survive a broker restart.
func TestKIP848ConsumerGroup(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{Sets: []string{"offsets.topic.num.partitions=3", "group.consumer.heartbeat.interval.ms=500"}})
	const topic, group, parts = "kip848", "kip848-group", 6
	createTopic(t, b.Addr(), topic, parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	producer := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	produced := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", produced), Value: fmt.Appendf(nil, "v%d", produced)})
			produced++
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	p := &processed{seen: map[string]int{}}
	allProcessed := func() bool { d, _ := p.count(); return d == produced }

	produce(300)
	a := startKIP848Consumer(t, b.Addr(), group, topic, p)
	waitFor(t, 30*time.Second, "a alone and stable", stableWith(t, b.Addr(), group, 1, parts))
	produce(300)
	bc := startKIP848Consumer(t, b.Addr(), group, topic, p)
	c := startKIP848Consumer(t, b.Addr(), group, topic, p)
	produce(300)
	waitFor(t, 30*time.Second, "three members stable", stableWith(t, b.Addr(), group, 3, parts))
	produce(300)
	waitFor(t, 30*time.Second, "1200 records processed", allProcessed)

	bc.leave()
	produce(300)
	waitFor(t, 30*time.Second, "two members stable", stableWith(t, b.Addr(), group, 2, parts))
	waitFor(t, 30*time.Second, "1500 records processed", allProcessed)
	c.leave()
	a.leave()
	if _, dups := p.count(); dups != 0 {
		t.Fatalf("%d records processed twice without any crash", dups)
	}
	waitFor(t, 30*time.Second, "group empty", func() bool {
		return describeKIP848(t, b.Addr(), group).State == "Empty"
	})
	epoch := describeKIP848(t, b.Addr(), group).Epoch

	// Restart: the group and its committed offsets come back.
	b.Stop()
	b.Restart()
	waitFor(t, 30*time.Second, "group reloaded", func() bool {
		d := describeKIP848(t, b.Addr(), group)
		return d.ErrorCode == 0 && d.State == "Empty" && d.Epoch == epoch
	})
	adm := kadm.NewClient(newClient(t, b.Addr()))
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	_, end := offsets(t, b.Addr(), topic)
	for part, e := range end {
		o, ok := offs.Lookup(topic, part)
		if !ok || o.At != e {
			t.Fatalf("partition %d: committed %+v, end %d", part, o, e)
		}
	}
	// A member joining after the restart resumes at the commits.
	producer = newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	before := produced
	produce(20)
	d := startKIP848Consumer(t, b.Addr(), group, topic, p)
	waitFor(t, 30*time.Second, "records after restart", allProcessed)
	d.leave()
	if distinct, dups := p.count(); dups != 0 || distinct != before+20 {
		t.Fatalf("after restart: %d distinct, %d duplicates", distinct, dups)
	}
}
