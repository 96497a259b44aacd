package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// compressionCodec maps a codec name to franz-go's.
func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("unknown compression %q (want none, gzip, snappy, lz4 or zstd)", name)
}

// producerOpts are the franz-go options of one benchmark producer.
func producerOpts(cfg Config, br brokers, topic string) []kgo.Opt {
	codec, _ := compressionCodec(cfg.Compression) // validated
	opts := br.opts(
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(cfg.Linger.D()),
		kgo.ProducerBatchCompression(codec),
		kgo.ProduceRequestTimeout(30*time.Second),
	)
	if len(cfg.Faults) > 0 {
		// Ride out a broker's death (noticed after the ZooKeeper session
		// timeout) instead of failing records after a few retries.
		opts = append(opts, kgo.RecordDeliveryTimeout(2*time.Minute))
	} else {
		opts = append(opts, kgo.RecordRetries(5))
	}
	switch cfg.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		if cfg.NoIdempotence {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	return opts
}

// createTopic creates the benchmark topic and waits until every partition
// has a leader.
func createTopic(ctx context.Context, br brokers, topic string, partitions int32, rf int16) error {
	cl, err := br.client()
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("create topic %s: %w", topic, resp.Err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == int(partitions) && allLed(td) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for topic %s leaders: %w", topic, errors.Join(ctx.Err(), err))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func allLed(td kadm.TopicDetail) bool {
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// deleteTopic removes the benchmark topic, best effort.
func deleteTopic(ctx context.Context, br brokers, topic string) {
	cl, err := br.client()
	if err != nil {
		return
	}
	defer cl.Close()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
}
