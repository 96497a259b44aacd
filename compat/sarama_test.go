package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "compat-sarama"
	c.Net.DialTimeout = 10 * time.Second
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.MaxWaitTime = 200 * time.Millisecond
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	return c
}

// saramaRead reads n records from partitions 0..parts-1 of topic.
func saramaRead(ctx context.Context, seeds []string, topic string, parts int32, n int) ([]string, error) {
	return saramaReadWith(ctx, seeds, saramaConfig(), topic, parts, n)
}

// saramaReadWith is saramaRead with a consumer of config cfg.
func saramaReadWith(ctx context.Context, seeds []string, cfg *sarama.Config, topic string, parts int32, n int) ([]string, error) {
	c, err := sarama.NewConsumer(seeds, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msgs := make(chan string, n)
	for p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consume partition %d: %w", p, err)
		}
		defer pc.Close()
		go func() {
			for m := range pc.Messages() {
				msgs <- string(m.Value)
			}
		}()
	}
	var got []string
	for len(got) < n {
		select {
		case v := <-msgs:
			got = append(got, v)
		case <-ctx.Done():
			return got, fmt.Errorf("read %d of %d records: %w", len(got), n, ctx.Err())
		}
	}
	return got, nil
}

func saramaProduce(seeds []string, cfg *sarama.Config, topic string, parts int32, vs []string) error {
	p, err := sarama.NewSyncProducer(seeds, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	var ms []*sarama.ProducerMessage
	for i, v := range vs {
		ms = append(ms, &sarama.ProducerMessage{Topic: topic, Partition: int32(i) % parts, Value: sarama.StringEncoder(v)})
	}
	return p.SendMessages(ms)
}

// saramaGroup is a consumer group handler that collects n values and
// commits.
type saramaGroup struct {
	n    int
	mu   sync.Mutex
	got  []string
	done chan struct{}
	once sync.Once
}

func (h *saramaGroup) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaGroup) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaGroup) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.got = append(h.got, string(m.Value))
		full := len(h.got) >= h.n
		h.mu.Unlock()
		if full {
			s.Commit()
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

func runSarama(t *testing.T, e *env) {
	const client = "sarama"
	e.rec.version(client, moduleVersion(e.root, "github.com/IBM/sarama"))
	seeds := []string{e.addr}
	produceCheck := func(topic string, cfg *sarama.Config) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := createTopic(ctx, seeds, topic, 1); err != nil {
				return err
			}
			vs := values(topic, records)
			if err := saramaProduce(seeds, cfg, topic, 1, vs); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			got, err := saramaRead(ctx, seeds, topic, 1, records)
			if err != nil {
				return err
			}
			if !slices.Equal(got, vs) {
				return fmt.Errorf("read back %d records, not the %d produced in order", len(got), records)
			}
			return nil
		}
	}
	for _, c := range []struct {
		name  string
		codec sarama.CompressionCodec
	}{{"gzip", sarama.CompressionGZIP}, {"snappy", sarama.CompressionSnappy}, {"lz4", sarama.CompressionLZ4}, {"zstd", sarama.CompressionZSTD}} {
		cfg := saramaConfig()
		cfg.Producer.Compression = c.codec
		e.check(t, client, "produce-"+c.name, produceCheck("s-"+c.name, cfg))
	}
	idem := saramaConfig()
	idem.Producer.Idempotent = true
	idem.Net.MaxOpenRequests = 1
	idem.Producer.Retry.Max = 5
	e.check(t, client, "produce-idempotent", produceCheck("s-idem", idem))
	e.check(t, client, "consume-partition", func(ctx context.Context) error {
		const topic = "s-assign"
		vs := values(topic, records)
		if err := createTopic(ctx, seeds, topic, 3); err != nil {
			return err
		}
		if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
			return err
		}
		got, err := saramaRead(ctx, seeds, topic, 3, records)
		if err != nil {
			return err
		}
		return sameSet(got, vs)
	})
	group := func(topic string, strategies ...sarama.BalanceStrategy) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			vs := values(topic, records)
			if err := createTopic(ctx, seeds, topic, 3); err != nil {
				return err
			}
			if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
				return err
			}
			cfg := saramaConfig()
			if len(strategies) > 0 {
				cfg.Consumer.Group.Rebalance.GroupStrategies = strategies
			}
			g := topic + "-g"
			cg, err := sarama.NewConsumerGroup(seeds, g, cfg)
			if err != nil {
				return err
			}
			h := &saramaGroup{n: records, done: make(chan struct{})}
			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				var err error
				for cctx.Err() == nil && err == nil {
					err = cg.Consume(cctx, []string{topic}, h)
				}
				errc <- err
			}()
			select {
			case <-h.done:
			case err := <-errc:
				cancel()
				cg.Close()
				return fmt.Errorf("consume: %w", err)
			case <-ctx.Done():
			}
			cancel()
			<-errc
			if err := cg.Close(); err != nil {
				return fmt.Errorf("close: %w", err)
			}
			h.mu.Lock()
			got := slices.Clone(h.got)
			h.mu.Unlock()
			if err := sameSet(got, vs); err != nil {
				return err
			}
			if sum, err := committedSum(ctx, seeds, g, topic); err != nil || sum != records {
				return fmt.Errorf("committed offsets sum to %d, want %d (%v)", sum, records, err)
			}
			return nil
		}
	}
	e.check(t, client, "group-default", group("s-grp-default"))
	e.check(t, client, "group-cooperative", group("s-grp-coop", sarama.NewBalanceStrategyCooperativeSticky()))
	e.check(t, client, "offsets", func(ctx context.Context) error {
		const topic, g = "s-offsets", "s-offsets-g"
		if err := createTopic(ctx, seeds, topic, 1); err != nil {
			return err
		}
		cfg := saramaConfig()
		cfg.Consumer.Offsets.AutoCommit.Enable = false
		cl, err := sarama.NewClient(seeds, cfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		om, err := sarama.NewOffsetManagerFromClient(g, cl)
		if err != nil {
			return err
		}
		pom, err := om.ManagePartition(topic, 0)
		if err != nil {
			return err
		}
		pom.MarkOffset(17, "meta")
		om.Commit()
		pom.AsyncClose() // Close waits for a flush that only a commit brings
		om.Close()
		adm, err := sarama.NewClusterAdminFromClient(cl)
		if err != nil {
			return err
		}
		r, err := adm.ListConsumerGroupOffsets(g, map[string][]int32{topic: {0}})
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		b := r.GetBlock(topic, 0)
		if b == nil || b.Offset != 17 || b.Metadata != "meta" {
			return fmt.Errorf("fetched %+v, want offset 17 with metadata \"meta\"", b)
		}
		return nil
	})
	e.check(t, client, "admin", func(ctx context.Context) error {
		const topic = "s-admin"
		adm, err := sarama.NewClusterAdmin(seeds, saramaConfig())
		if err != nil {
			return err
		}
		defer adm.Close()
		ret := "3600000"
		if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": &ret}}, false); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		cs, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
		if err != nil {
			return fmt.Errorf("describe config: %w", err)
		}
		found := false
		for _, c := range cs {
			found = found || (c.Name == "retention.ms" && c.Value == ret)
		}
		if !found {
			return fmt.Errorf("describe config lacks retention.ms=%s", ret)
		}
		if err := adm.DeleteTopic(topic); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		for {
			ts, err := adm.ListTopics()
			if err != nil {
				return err
			}
			if _, ok := ts[topic]; !ok {
				return nil
			}
			if ctx.Err() != nil {
				return errors.New("topic still listed after delete")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	e.check(t, client, "leader-change", func(ctx context.Context) error {
		const topic = "lc-sarama"
		cl, err := sarama.NewClient(e.seeds, saramaConfig())
		if err != nil {
			return err
		}
		defer cl.Close()
		p, err := sarama.NewSyncProducerFromClient(cl)
		if err != nil {
			return err
		}
		defer p.Close()
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("before")}); err != nil {
			return fmt.Errorf("produce before: %w", err)
		}
		if err := e.moveLeader(ctx, topic); err != nil {
			return err
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("after")}); err != nil {
			return fmt.Errorf("produce after the leader moved: %w", err)
		}
		if err := cl.RefreshMetadata(topic); err != nil {
			return err
		}
		b, err := cl.Leader(topic, 0)
		if err != nil {
			return err
		}
		if b.ID() != newLeader {
			return fmt.Errorf("metadata names leader %d, want %d", b.ID(), newLeader)
		}
		return nil
	})
	e.check(t, client, "transactions", func(ctx context.Context) error { return saramaTxn(ctx, seeds) })
	runSaramaSecurity(t, e)
}
