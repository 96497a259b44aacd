package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

func kafkagoRead(ctx context.Context, seeds []string, topic string, parts int, n int) ([]string, error) {
	var got []string
	for p := range parts {
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: seeds, Topic: topic, Partition: p, MaxWait: 200 * time.Millisecond})
		defer r.Close()
		for len(got) < n*(p+1)/parts {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				return got, fmt.Errorf("read partition %d: %w", p, err)
			}
			got = append(got, string(m.Value))
		}
	}
	return got, nil
}

func runKafkaGo(t *testing.T, e *env) {
	const client = "kafka-go"
	e.rec.version(client, moduleVersion(e.root, "github.com/segmentio/kafka-go"))
	seeds := []string{e.addr}
	produceCheck := func(topic string, codec kafkago.Compression) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := createTopic(ctx, seeds, topic, 1); err != nil {
				return err
			}
			w := &kafkago.Writer{Addr: kafkago.TCP(seeds...), Transport: &kafkago.Transport{}, Topic: topic, Compression: codec, RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond}
			defer w.Close() // its own Transport: the default one caches metadata from before the topic existed
			vs := values(topic, records)
			var ms []kafkago.Message
			for _, v := range vs {
				ms = append(ms, kafkago.Message{Value: []byte(v)})
			}
			if err := w.WriteMessages(ctx, ms...); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			got, err := kafkagoRead(ctx, seeds, topic, 1, records)
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
		codec kafkago.Compression
	}{{"gzip", kafkago.Gzip}, {"snappy", kafkago.Snappy}, {"lz4", kafkago.Lz4}, {"zstd", kafkago.Zstd}} {
		e.check(t, client, "produce-"+c.name, produceCheck("g-"+c.name, c.codec))
	}
	e.check(t, client, "consume-partition", func(ctx context.Context) error {
		const topic = "g-assign"
		vs := values(topic, 48)
		if err := createTopic(ctx, seeds, topic, 3); err != nil {
			return err
		}
		if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
			return err
		}
		got, err := kafkagoRead(ctx, seeds, topic, 3, len(vs))
		if err != nil {
			return err
		}
		return sameSet(got, vs)
	})
	e.check(t, client, "group-default", func(ctx context.Context) error {
		const topic, g = "g-grp-default", "g-grp-default-g"
		vs := values(topic, records)
		if err := createTopic(ctx, seeds, topic, 3); err != nil {
			return err
		}
		if err := produceFranz(ctx, seeds, topic, 3, vs); err != nil {
			return err
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: seeds, GroupID: g, Topic: topic, MaxWait: 200 * time.Millisecond,
			StartOffset: kafkago.FirstOffset, HeartbeatInterval: time.Second, RebalanceTimeout: 10 * time.Second})
		var got []string
		for len(got) < records {
			m, err := r.ReadMessage(ctx) // commits each message (CommitInterval 0)
			if err != nil {
				r.Close()
				return fmt.Errorf("read %d of %d: %w", len(got), records, err)
			}
			got = append(got, string(m.Value))
		}
		if err := r.Close(); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		if err := sameSet(got, vs); err != nil {
			return err
		}
		if sum, err := committedSum(ctx, seeds, g, topic); err != nil || sum != records {
			return fmt.Errorf("committed offsets sum to %d, want %d (%v)", sum, records, err)
		}
		return nil
	})
	e.check(t, client, "offsets", func(ctx context.Context) error {
		const topic, g = "g-offsets", "g-offsets-g"
		if err := createTopic(ctx, seeds, topic, 1); err != nil {
			return err
		}
		cl := &kafkago.Client{Addr: kafkago.TCP(seeds...), Timeout: 10 * time.Second}
		cr, err := cl.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{GroupID: g, GenerationID: -1,
			Topics: map[string][]kafkago.OffsetCommit{topic: {{Partition: 0, Offset: 17, Metadata: "meta"}}}})
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if p := cr.Topics[topic]; len(p) != 1 || p[0].Error != nil {
			return fmt.Errorf("commit: %+v", cr.Topics)
		}
		fr, err := cl.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: g, Topics: map[string][]int{topic: {0}}})
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if p := fr.Topics[topic]; len(p) != 1 || p[0].CommittedOffset != 17 || p[0].Metadata != "meta" {
			return fmt.Errorf("fetched %+v, want offset 17 with metadata \"meta\"", fr.Topics)
		}
		return nil
	})
	e.check(t, client, "admin", func(ctx context.Context) error {
		const topic = "g-admin"
		cl := &kafkago.Client{Addr: kafkago.TCP(seeds...), Timeout: 10 * time.Second}
		cr, err := cl.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1,
			ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "3600000"}}}}})
		if err == nil {
			err = cr.Errors[topic]
		}
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		dr, err := cl.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
			ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"retention.ms"}}}})
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		found := false
		for _, r := range dr.Resources {
			for _, c := range r.ConfigEntries {
				found = found || (c.ConfigName == "retention.ms" && c.ConfigValue == "3600000")
			}
		}
		if !found {
			return fmt.Errorf("describe configs lacks retention.ms=3600000: %+v", dr.Resources)
		}
		del, err := cl.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{topic}})
		if err == nil {
			err = del.Errors[topic]
		}
		if err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		for {
			md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(md.Topics, func(t kafkago.Topic) bool { return t.Name == topic }) {
				return nil
			}
			if ctx.Err() != nil {
				return errors.New("topic still listed after delete")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	e.check(t, client, "leader-change", func(ctx context.Context) error {
		const topic = "lc-kafka-go"
		w := &kafkago.Writer{Addr: kafkago.TCP(e.seeds...), Transport: &kafkago.Transport{}, Topic: topic, RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond, MaxAttempts: 10}
		defer w.Close()
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte("before")}); err != nil {
			return fmt.Errorf("produce before: %w", err)
		}
		if err := e.moveLeader(ctx, topic); err != nil {
			return err
		}
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte("after")}); err != nil {
			return fmt.Errorf("produce after the leader moved: %w", err)
		}
		cl := &kafkago.Client{Addr: kafkago.TCP(e.seeds...), Timeout: 10 * time.Second}
		md, err := cl.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return err
		}
		if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].Leader.ID != newLeader {
			return fmt.Errorf("metadata: %+v, want leader %d", md.Topics, newLeader)
		}
		return nil
	})
	runKafkaGoSecurity(t, e)
}
